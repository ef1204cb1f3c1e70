"""Keras 1.x model configs -> Keras 2 configs (pure data, no keras import), before the Keras 3 upgrade.

The specification is Keras 2.0's own converter (keras/legacy/interfaces.py, keras/legacy/layers.py): the
argument renames are reviewed data in rules/keras1.toml; the value conversions that are not renames live
here. Every translated layer leaves a finding with its rule code.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from k2to3.core import rules as rules_mod
from k2to3.upgrade.keras1 import ranks as ranks_mod
from k2to3.upgrade.keras1.dot import dot_merge

if TYPE_CHECKING:
    from k2to3.upgrade.state import UpgradeState

CLASS_TO = {
    "Convolution1D": "Conv1D", "Convolution2D": "Conv2D", "Convolution3D": "Conv3D",
    "AtrousConvolution1D": "Conv1D", "AtrousConvolution2D": "Conv2D",
}
MERGE_MODES = {"sum": "Add", "mul": "Multiply", "concat": "Concatenate", "ave": "Average", "max": "Maximum",
               "dot": "Dot", "cos": "Dot"}
# Keras 1-only keys: a config holding any of them (or a Keras 1 class) is read as Keras 1.
KERAS1_KEYS = frozenset({"output_dim", "nb_filter", "nb_row", "nb_col", "border_mode", "subsample", "init",
                         "inner_init", "inner_activation", "W_regularizer", "b_regularizer", "W_constraint",
                         "b_constraint", "dim_ordering", "consume_less", "input_dtype", "dropout_W", "dropout_U",
                         "filter_length", "pool_length", "subsample_length", "beta_init", "gamma_init"})
KERAS1_CLASSES = frozenset({*CLASS_TO, "Merge", "MaxoutDense", "Highway", "TimeDistributedDense",
                            "Deconvolution2D"})
WRAPPERS = ("TimeDistributed", "Bidirectional")  # Keras 1 wrappers whose inner layer is a Keras 1 config
# Keras 1 Dense/conv keys -> Keras 2 (legacy_dense_support / legacy_deconv2d_support), for the layers built here
_DENSE_RENAME = {"output_dim": "units", "init": "kernel_initializer", "W_regularizer": "kernel_regularizer",
                 "b_regularizer": "bias_regularizer", "W_constraint": "kernel_constraint",
                 "b_constraint": "bias_constraint", "bias": "use_bias"}
_DECONV_RENAME = {**{k: v for k, v in _DENSE_RENAME.items() if k != "output_dim"}, "nb_filter": "filters",
                  "subsample": "strides", "border_mode": "padding", "dim_ordering": "data_format"}
_BASE_KEYS = ("name", "trainable", "batch_input_shape", "dtype")
PORTABLE_KEYS = {"MaxoutDense": (*_BASE_KEYS, "output_dim", "nb_feature", "bias"),
                 "Highway": (*_BASE_KEYS, "activation", "transform_bias", "bias")}
DATA_FORMAT = {"tf": "channels_last", "th": "channels_first", "default": None}
# Keras 1 layers whose get_config dropped their dim_ordering (K2T488)
ORDERING_UNSAID = frozenset({"UpSampling2D", "UpSampling3D", "ZeroPadding2D", "ZeroPadding3D", "Cropping2D",
                             "Cropping3D"})
INITIALIZERS = {"zero": "zeros", "one": "ones"}


def _layers(cfg: Any) -> list[dict[str, Any]]:
    inner = cfg.get("config") if isinstance(cfg, dict) else None
    if isinstance(inner, list):
        return [x for x in inner if isinstance(x, dict)]
    if isinstance(inner, dict) and isinstance(inner.get("layers"), list):
        return [x for x in inner["layers"] if isinstance(x, dict)]
    return []


def is_keras1(model_config: Any) -> bool:
    """A Keras 1 config by content: a Keras 1 class, or a layer with Keras 1-only keys."""
    for layer in _layers(model_config):
        cfg = layer.get("config")
        if not isinstance(layer.get("class_name"), str):
            continue  # validate.py reports it
        if layer["class_name"] in KERAS1_CLASSES:
            return True
        keys = set(cfg) - {"output_dim"} if layer.get("class_name") == "Embedding" and isinstance(cfg, dict) \
            else set(cfg) if isinstance(cfg, dict) else set()  # Keras 2's Embedding still has output_dim
        if layer["class_name"] == "BatchNormalization" and "mode" in keys:  # Keras 2 removed `mode`
            return True
        if layer["class_name"] not in rules_mod.keras3_layers() and layer["class_name"] not in WRAPPERS:
            # a library's or the user's own class names its keys itself (keras-pos-embd's PositionEmbedding has
            # output_dim): they say nothing about the Keras that saved it
            keys = set()
        if keys & KERAS1_KEYS or (isinstance(cfg, dict) and is_keras1(layer)):
            return True
        if layer["class_name"] in WRAPPERS and isinstance(cfg, dict) and isinstance(cfg.get("layer"), dict) \
                and is_keras1({"config": [cfg["layer"]]}):
            return True
    return False


def _rule_for(cls: str) -> rules_mod.Rule | None:
    for r in rules_mod.keras1_rules():
        if cls in r.classes and r.code != "K2T478":
            return r
    return None


def _regularizer(value: Any) -> Any:
    """Keras 1 {"name": "WeightRegularizer", "l1": a, "l2": b} -> Keras 2 L1L2 (Keras 1.2 wrote L1L2Regularizer, the
    class its l1l2() helper made)."""
    if isinstance(value, dict) and value.get("name") in ("WeightRegularizer", "ActivityRegularizer",
                                                         "L1L2Regularizer"):
        l1, l2 = value.get("l1", 0.0), value.get("l2", 0.0)
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (l1, l2)):
            return {"class_name": "L1L2", "config": {"l1": float(l1), "l2": float(l2)}}
    return value


def _shape(cfg: dict[str, Any], cls: str) -> None:
    """input_dim / input_length -> batch_input_shape, as Keras 1 layers built their input."""
    if "batch_input_shape" in cfg or cfg.get("input_dim") is None:
        return
    if cls in ("Embedding",):
        cfg["batch_input_shape"] = [None, cfg.get("input_length")]
    elif "input_length" in cfg:
        cfg["batch_input_shape"] = [None, cfg.get("input_length"), cfg["input_dim"]]
    else:
        cfg["batch_input_shape"] = [None, cfg["input_dim"]]


def layer(up: UpgradeState, layer: dict[str, Any], ranks: list[int | None] | None = None) -> dict[str, Any]:
    """One Keras 1 layer entry {class_name, config(, inbound_nodes, name)} -> its Keras 2 entry; `ranks`: the ranks
    of a Merge's inputs where the graph gives them (ranks.py)."""
    out = copy.deepcopy(layer)
    cls, cfg = out.get("class_name"), out.get("config")
    if not isinstance(cfg, dict) or not isinstance(cls, str):
        return out
    name = cfg.get("name")
    if cls in ("Sequential", "Model"):
        out["config"] = translate_model(up, out)["config"]
        return out
    if cls == "Merge":
        return _merge(up, out, ranks)
    if cls in WRAPPERS and isinstance(cfg.get("layer"), dict):  # e.g. TimeDistributed(Dense(output_dim=...))
        cfg["layer"] = _layer(up, cfg["layer"])
        _shape(cfg, cls)
        # Keras 1's Wrapper.get_config carried the base Layer's input_dtype (the dtype of the Input a Sequential
        # made from batch_input_shape), which Keras 2/3 wrappers reject.
        for key in ("input_dim", "input_length", "input_dtype"):
            cfg.pop(key, None)
        return out
    if cls == "TimeDistributedDense":
        return _time_distributed_dense(up, out)
    if cls == "Deconvolution2D":
        return _deconvolution2d(up, out)
    if cls == "BatchNormalization" and "mode" in cfg:
        return _batchnorm(up, out)
    if cls in PORTABLE_KEYS:  # Keras 1 layers k2to3 ships (k2to3.portable; layers.toml K2T464 registers them)
        _shape(cfg, cls)
        dropped = sorted(k for k in cfg if k not in PORTABLE_KEYS[cls] and k not in ("input_dim", "input_dtype"))
        out["config"] = {k: v for k, v in cfg.items() if k in PORTABLE_KEYS[cls]}
        up.note("K2T464", "info", f"Keras 1 {cls} kept as k2to3>{cls}" + (f"; dropped {', '.join(dropped)} "
                "(initializers, regularizers and constraints: training only)" if dropped else ""), name)
        return out
    if cls in rules_mod.rule("K2T478").classes:
        up.note("K2T478", "error", f"Keras 1 layer {cls} has no Keras 2/3 equivalent in k2to3 yet", name,
                rules_mod.rule("K2T478").fix)
        return out
    if cls == "Embedding" and cfg.get("dropout"):
        up.note("K2T475", "warning", f"dropped the training-time embedding dropout={cfg['dropout']}", name)
    _shape(cfg, cls)
    if "input_dtype" in cfg and cls != "InputLayer":  # the dtype of the Input Keras 1 made, not of the layer
        cfg.pop("input_dtype")
    r = _rule_for(cls)
    if r is not None:
        if "nb_row" in cfg:
            cfg["kernel_size"] = [cfg.pop("nb_row"), cfg.pop("nb_col", None)]
        if "kernel_dim1" in cfg:
            cfg["kernel_size"] = [cfg.pop(f"kernel_dim{i}") for i in (1, 2, 3)]
        for old, new in r.rename.items():
            if old in cfg:
                cfg[new] = cfg.pop(old)
        up.note(r.code, "info", f"Keras 1 {cls} -> Keras 2 {CLASS_TO.get(cls, cls)}", name)
    for key in ("consume_less", "dropout") if cls == "Embedding" else ("consume_less", "input_dim", "input_length"):
        cfg.pop(key, None)
    _values(cfg)
    if "unit_forget_bias" in cfg:
        cfg["unit_forget_bias"] = cfg["unit_forget_bias"] in ("one", "ones", True)
    if cls == "GRU":
        cfg["reset_after"] = False  # Keras 1's GRU: the reset gate applied before the recurrent matmul
    if isinstance(cfg.get("strides"), int) and cls in ("Conv1D", "Convolution1D", "AtrousConvolution1D"):
        cfg["strides"] = [cfg["strides"]]
    if cls in ("AtrousConvolution1D", "AtrousConvolution2D") and "dilation_rate" not in cfg:
        cfg["dilation_rate"] = 1
    out["class_name"] = CLASS_TO.get(cls, cls)
    return out


def _values(cfg: dict[str, Any]) -> None:
    """The value conversions of legacy/interfaces.py: dim_ordering values, regularizer objects, initializer names."""
    if isinstance(cfg.get("data_format"), str):
        cfg["data_format"] = DATA_FORMAT.get(cfg["data_format"], cfg["data_format"])
    for key, value in list(cfg.items()):
        if key.endswith("_regularizer"):
            cfg[key] = _regularizer(value)
        elif key.endswith("_initializer") and isinstance(value, str):
            cfg[key] = INITIALIZERS.get(value, value)


def _renamed(cfg: dict[str, Any], rename: dict[str, str], drop: tuple[str, ...]) -> dict[str, Any]:
    new = {rename.get(k, k): v for k, v in cfg.items() if k not in drop}
    _values(new)
    return new


def _time_distributed_dense(up: UpgradeState, out: dict[str, Any]) -> dict[str, Any]:
    """Keras 1 TimeDistributedDense(output_dim) = Dense applied to each timestep (keras/layers/core.py 1.2.2:
    W (input_dim, output_dim), b (output_dim,), the same tensors TimeDistributed(Dense) holds) ->
    TimeDistributed(Dense). Keras 2.0 removed the class without a converter."""
    cfg = out["config"]
    name = cfg.get("name")
    if cfg.get("input_dim") is not None and "batch_input_shape" not in cfg:
        cfg["batch_input_shape"] = [None, cfg.get("input_length"), cfg["input_dim"]]
    outer = ("name", "trainable", "batch_input_shape", "dtype", "input_dtype")
    dense = _renamed(cfg, _DENSE_RENAME, (*outer, "input_dim", "input_length"))
    dense.setdefault("activation", "linear")
    wrapper = {k: cfg[k] for k in ("name", "trainable", "batch_input_shape") if k in cfg}
    wrapper["layer"] = {"class_name": "Dense", "config": {"name": f"{name}_dense", "trainable": cfg.get(
        "trainable", True), **dense}}
    up.note("K2T481", "info", "Keras 1 TimeDistributedDense -> TimeDistributed(Dense), weights W, b as saved", name)
    out["class_name"], out["config"] = "TimeDistributed", wrapper
    return out


def _deconv_padding(k: int, s: int, padding: str, o: int) -> tuple[bool, int]:
    """For Keras 1's output length `o` (which TF's conv2d_transpose took as given): whether Keras 3's default
    Conv2DTranspose(k, s, padding) length already is `o`, and the `output_padding` that gives `o` explicitly."""
    if padding == "valid":
        n = (o - k) // s + 1  # the input length a valid convolution of `o` has
        default, explicit = n * s + max(k - s, 0), (o - k) - (n - 1) * s  # Keras 3: (n-1)s + k + output_padding
    else:
        n = -(-o // s)
        default, explicit = n * s, o - (n - 1) * s - k + 2 * (k // 2)  # Keras 3: (n-1)s + k - 2(k//2) + op
    if n < 1:
        raise ValueError(f"output length {o} is shorter than the kernel ({k})")
    return default == o, explicit


def _deconvolution2d(up: UpgradeState, out: dict[str, Any]) -> dict[str, Any]:
    """Keras 1 Deconvolution2D -> Conv2DTranspose as legacy_deconv2d_support did (the kernel layout is converted
    by K2T479), except that Keras 2.0 dropped `output_shape`: here it becomes `output_padding` where the Keras 3
    default length differs (stride > 1 leaves several output lengths; Keras 1 on TensorFlow used the one given)."""
    cfg = out["config"]
    name, shape = cfg.get("name"), cfg.get("output_shape")
    if cfg.get("border_mode") not in ("valid", "same", None):
        up.note("K2T487", "error", f"Keras 1 Deconvolution2D border_mode={cfg.get('border_mode')!r} (Theano only) "
                "has no Keras 3 padding", name, rules_mod.rule("K2T487").fix)
        return out
    _shape(cfg, "Deconvolution2D")
    new = _renamed(cfg, _DECONV_RENAME, ("nb_row", "nb_col", "output_shape", "input_dim", "input_length",
                                         "input_dtype"))
    new["kernel_size"] = [cfg.get("nb_row"), cfg.get("nb_col")]
    new.setdefault("padding", "valid")
    new["strides"] = new.get("strides") or [1, 1]
    new.setdefault("activation", "linear")
    rows = (2, 3) if new.get("data_format") == "channels_first" else (1, 2)
    try:
        for key in ("kernel_size", "strides"):
            v = new[key]
            if not isinstance(v, (list, tuple)) or len(v) != 2 or not all(
                    isinstance(i, int) and not isinstance(i, bool) and 0 < i < 2**31 for i in v):
                raise ValueError(f"{key} {v!r} is not two positive integers")
            new[key] = list(v)
        if not isinstance(shape, (list, tuple)) or len(shape) != 4 or not all(
                isinstance(shape[i], int) and not isinstance(shape[i], bool) and 0 < shape[i] < 2**31
                for i in rows):
            raise ValueError(f"output_shape {shape!r} does not give the output rows and columns")
        pads = [_deconv_padding(int(new["kernel_size"][j]), int(new["strides"][j]), new["padding"],
                                int(shape[i])) for j, i in enumerate(rows)]
        if not all(ok for ok, _ in pads):
            bad = [(p, s) for (_, p), s in zip(pads, new["strides"]) if not 0 <= p < s]
            if bad:
                raise ValueError(f"it needs output_padding {bad[0][0]}, outside [0, stride={bad[0][1]})")
            new["output_padding"] = [p for _, p in pads]
    except (ValueError, TypeError) as exc:
        up.note("K2T487", "error", f"Keras 1 Deconvolution2D output_shape cannot be expressed in Keras 3: {exc}",
                name, rules_mod.rule("K2T487").fix)
        return out
    up.note("K2T482", "info", "Keras 1 Deconvolution2D -> Conv2DTranspose" + (
        f" with output_padding={new['output_padding']} (Keras 1 output_shape {list(shape)})"
        if "output_padding" in new else ""), name)
    out["class_name"], out["config"] = "Conv2DTranspose", new
    return out


def _batchnorm(up: UpgradeState, out: dict[str, Any]) -> dict[str, Any]:
    """Keras 1 BatchNormalization as legacy_batchnorm_support did: mode 0 is Keras 2's layer (running_std held
    the moving variance: Keras 1's K.normalize_batch_in_training returned the variance on both backends and
    K.batch_normalization took it as var), modes 1 and 2 have no Keras 2/3 layer."""
    cfg = out["config"]
    name, mode = cfg.get("name"), cfg.get("mode", 0)
    if mode != 0:
        why = ("normalises each sample over its last axis as (x - mean) / (sqrt(var + eps) + eps)" if mode == 1
               else "normalises with the statistics of the batch it is given, also at inference")
        up.note("K2T484", "error", f"Keras 1 BatchNormalization mode={mode} {why}; no Keras 2/3 layer computes "
                "that", name, rules_mod.rule("K2T484").fix)
        return out
    _shape(cfg, "BatchNormalization")
    out["config"] = _renamed(cfg, {"beta_init": "beta_initializer", "gamma_init": "gamma_initializer"},
                             ("mode", "input_dim", "input_length", "input_dtype"))
    up.note("K2T483", "info", "Keras 1 BatchNormalization(mode=0) -> BatchNormalization; running_mean, running_std "
            "(the moving variance) -> moving_mean, moving_variance", name)
    return out


def _layer(up: UpgradeState, entry: dict[str, Any]) -> dict[str, Any]:
    return layer(up, entry)  # `layer` is shadowed by the argument inside layer()


def _merge(up: UpgradeState, out: dict[str, Any], ranks: list[int | None] | None = None) -> dict[str, Any]:
    cfg = out["config"]
    name, mode = cfg.get("name"), cfg.get("mode")
    if cfg.get("mode_type", "raw") != "raw":
        up.note("K2T486", "error", f"Keras 1 Merge '{name}' merges with a Python function (mode_type "
                f"{cfg.get('mode_type')!r}, stored as marshalled bytecode); k2to3 never runs stored bytecode and "
                "no Keras 3 layer is that function", name, rules_mod.rule("K2T486").fix)
        return out
    if not isinstance(mode, str) or mode not in MERGE_MODES or cfg.get("layers"):
        up.note("K2T478", "error", f"Keras 1 Merge with mode {mode!r}" + (" of models outside a Sequential's "
                "first layer" if cfg.get("layers") else "") + " has no Keras 2/3 equivalent in k2to3 yet", name,
                rules_mod.rule("K2T478").fix)
        return out
    new: dict[str, Any] = {"name": name, "trainable": cfg.get("trainable", True)}
    if mode == "concat":
        new["axis"] = cfg.get("concat_axis", -1)
    elif mode in ("dot", "cos"):
        return dot_merge(up, out, new, ranks)
    up.note("K2T477", "info", f"Keras 1 Merge(mode={mode!r}) -> {MERGE_MODES[mode]}", name)
    out["class_name"], out["config"] = MERGE_MODES[mode], new
    return out


def _node(*names: str) -> list[list[list[Any]]]:
    return [[[n, 0, 0, {}] for n in names]]


def _named(entry: Any) -> bool:
    """A layer entry the Functional form can wire: a dict with a class name and a config naming it."""
    return isinstance(entry, dict) and isinstance(entry.get("class_name"), str) and \
        isinstance(entry.get("config"), dict) and isinstance(entry["config"].get("name"), str)


def _merge_of_models(up: UpgradeState, seq: list[dict[str, Any]]) -> dict[str, Any] | None:
    """A Keras 1 Sequential whose first layer is Merge([seq_a, seq_b, ...]) (keras/models.py 1.2.2
    Sequential.get_config) -> the Functional model it computed: one Input per branch, each branch's layers, the
    merge layer, the rest. Keras 1's save_weights wrote the branches' layers flattened, by layer name (the names
    are unique in the model), so the weights restore by name. None when a branch is not a plain Sequential."""
    merge = seq[0]["config"]
    branches = merge.get("layers") or []
    if not isinstance(branches, list) or len(branches) < 2 or not all(
            isinstance(b, dict) and b.get("class_name") == "Sequential" and isinstance(b.get("config"), list)
            and b["config"] for b in branches):
        return None
    if not all(_named(x) and x.get("class_name") != "Merge" for b in branches for x in b["config"]) or \
            not all(_named(x) for x in seq[1:]) or not isinstance(merge.get("name"), str):
        return None
    layers: list[dict[str, Any]] = []
    inputs, tails = [], []
    for b in branches:
        first = b["config"][0].get("config", {})
        dtype = first.get("input_dtype", "float32")
        translated = [layer(up, x) for x in b["config"]]
        if not all(_named(x) for x in translated):
            return None
        shape = translated[0]["config"].pop("batch_input_shape", None)
        if not isinstance(shape, list):
            return None
        inp = f"{translated[0]['config'].get('name')}_input"
        layers.append({"name": inp, "class_name": "InputLayer", "inbound_nodes": [], "config": {
            "name": inp, "batch_input_shape": shape, "dtype": dtype, "sparse": False}})
        prev = inp
        for x in translated:
            nm = x["config"]["name"]
            layers.append({**x, "name": nm, "inbound_nodes": _node(prev)})
            prev = nm
        inputs.append(inp)
        tails.append(prev)
    tails_rank = [ranks_mod.sequential_rank(b["config"], None) for b in branches]
    m = _merge(up, {"class_name": "Merge", "config": {k: v for k, v in merge.items() if k != "layers"}}, tails_rank)
    if m["class_name"] == "Merge":
        return {}  # the mode's stop is noted
    prev = m["config"]["name"]
    layers.append({**m, "name": prev, "inbound_nodes": _node(*tails)})
    for x in seq[1:]:
        t = layer(up, x)
        if not _named(t):
            return None
        nm = t["config"]["name"]
        layers.append({**t, "name": nm, "inbound_nodes": _node(prev)})
        prev = nm
    up.note("K2T485", "info", f"Keras 1 Sequential starting with Merge of {len(branches)} Sequential models -> a "
            f"Functional model with {len(inputs)} inputs", merge.get("name"))
    return {"class_name": "Model", "config": {"name": "sequential_merge", "layers": layers,
                                              "input_layers": [[n, 0, 0] for n in inputs],
                                              "output_layers": [[prev, 0, 0]]}}


def is_merge_of_models(model_config: Any) -> bool:
    """A Keras 1 Sequential config whose first layer is a Merge of models (its weights pair by name)."""
    cfg = model_config.get("config") if isinstance(model_config, dict) else None
    return isinstance(cfg, list) and bool(cfg) and isinstance(cfg[0], dict) and cfg[0].get("class_name") == \
        "Merge" and isinstance(cfg[0].get("config"), dict) and bool(cfg[0]["config"].get("layers"))


def translate_model(up: UpgradeState, model_config: dict[str, Any]) -> dict[str, Any]:
    """A Keras 1 model config -> Keras 2 (Sequential list configs stay lists; node refs keep their 3 elements,
    which Keras 2 reads as [layer, node, tensor] with no call kwargs)."""
    out = copy.deepcopy(model_config)
    inner = out.get("config")
    if is_merge_of_models(out):
        functional = _merge_of_models(up, inner)
        if functional:
            return functional
        if functional is None:
            up.note("K2T478", "error", "Keras 1 Merge of models whose branches are not plain Sequential models "
                    "with an input shape has no Keras 2/3 equivalent in k2to3 yet", inner[0]["config"].get("name"),
                    rules_mod.rule("K2T478").fix)
        return out
    if isinstance(inner, list):
        out["config"] = [layer(up, x) for x in inner]
    elif isinstance(inner, dict) and isinstance(inner.get("layers"), list):
        entries = [x for x in inner["layers"] if isinstance(x, dict)]
        ranks = ranks_mod.functional_ranks(entries) if any(x.get("class_name") == "Merge" for x in entries) else {}
        inner["layers"] = [layer(up, x, ranks_mod.merge_input_ranks(x, ranks)) if isinstance(x, dict) and x.get(
            "class_name") == "Merge" else layer(up, x) for x in inner["layers"]]
    return out


def _entries(obj: Any) -> Any:
    """Every layer entry {class_name, config: {...}} in a config, nested models, wrappers and Merge branches too."""
    if isinstance(obj, dict):
        if isinstance(obj.get("class_name"), str) and isinstance(obj.get("config"), dict):
            yield obj
        for v in obj.values():
            yield from _entries(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _entries(v)


def _unsaid_ordering(up: UpgradeState, model_config: dict[str, Any]) -> None:
    """K2T488: Keras 1.x UpSampling/ZeroPadding/Cropping 2D/3D configs never held `dim_ordering` (their
    get_config left it out, keras/layers/convolutional.py 1.0.0-1.2.2), so rebuilt as saved they take the
    loading machine's default: a "th" U-Net's UpSampling2D would double its channels and rows. They are given
    the ordering the file's other layers state, when those agree."""
    stated = {e["config"]["dim_ordering"] for e in _entries(model_config)
              if e["config"].get("dim_ordering") in ("th", "tf")}
    for e in _entries(model_config):
        cfg = e["config"]
        if e["class_name"] not in ORDERING_UNSAID or "dim_ordering" in cfg or "data_format" in cfg:
            continue
        if len(stated) == 1:
            cfg["dim_ordering"] = next(iter(stated))
            up.note("K2T488", "info", f"Keras 1 {e['class_name']} config has no dim_ordering; given the file's "
                    f"{cfg['dim_ordering']!r} (the ordering its other layers state)", cfg.get("name"))
        else:
            said = "state both 'th' and 'tf'" if stated else "state none"
            up.note("K2T488", "warning", f"Keras 1 {e['class_name']} config has no dim_ordering and the file's "
                    f"layers {said}; built channels_last (Keras 1.1+'s default)", cfg.get("name"),
                    rules_mod.rule("K2T488").fix)


def translate(up: UpgradeState, model_config: dict[str, Any]) -> dict[str, Any]:
    """The entry point: note K2T470 once and translate."""
    up.note("K2T470", "info", "Keras 1.x model config translated to Keras 2 (rules/keras1.toml)", None)
    model_config = copy.deepcopy(model_config)
    _unsaid_ordering(up, model_config)
    return translate_model(up, model_config)


def to_keras2(model_config: dict[str, Any]) -> dict[str, Any]:
    """The Keras 2 config alone (what tf_keras builds for the golden reference)."""
    from k2to3.upgrade.core import Upgrader

    return translate(Upgrader(), model_config)
