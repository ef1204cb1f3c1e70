"""The build op (tensorflow worker): the Keras 3 model rebuilt from the upgrade plan (rebuild.py), every weight
restored by name (restore.py), the compile config and the optimizer state (optstate.py), saved as .keras."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from k2to3.errors import K2to3Error
from k2to3.workers import large_weights
from k2to3.workers.chunked_arrays import weight_hash
from k2to3.workers.protocol import BuildRequest
from k2to3.workers.runtime import constant_initializers, import_modules, keras3, weights_on_disk


def op_build(req: BuildRequest) -> dict[str, Any]:
    keras = keras3()
    from k2to3.formats.artifact import read_artifact
    from k2to3.workers.rebuild import build_model
    from k2to3.workers.restore import restore

    t0 = time.perf_counter()
    import_modules(req.modules)
    with open(req.plan) as fh:
        plan = json.load(fh)
    artifact = read_artifact(req.h5, weights_only_ok=bool(req.build_fn))
    skipped: list[str] = []  # the build function's own load_weights calls
    dropped: list[str] = []  # Keras 2 optimizer arguments Keras 3 has not (decay=)
    notes: list[dict[str, str]] = []  # rule findings made here (K2T436-K2T437 on a source-built model)
    with constant_initializers(keras):  # every variable is then restored, and the ledger proves it
        if req.build_fn:
            from k2to3.workers.masks import keras2_masks

            with keras2_masks(keras, notes):
                model = _call_build_fn(keras, req, skipped, dropped)
            plan["renames"] = _renames_by_order(model, artifact)
            plan["weight_transforms"] = {**plan.get("weight_transforms", {}),
                                         **_cudnn_groups(model, artifact, plan["renames"])}
        else:
            model = build_model(plan)
            _check_lambda_shapes(model, plan["model"])
    pairs: dict[str, Any] = {}  # file dataset -> Keras 3 variable, for the optimizer slots
    ledger = restore(model, artifact, plan["renames"], plan.get("weight_transforms"), pairs)
    if not ledger.complete:
        raise K2to3Error(
            f"weights not fully restored: {ledger.tensors_restored}/{ledger.tensors_expected} tensors; "
            f"unassigned in file: {ledger.unassigned_file_tensors[:3]}, unrestored in model: "
            f"{ledger.unrestored_variables[:3]}", hint="report it to k2to3 with the file",
        )
    warnings = [f"the build function's own load_weights({p!r}) was skipped: the converted file's weights are restored"
                for p in skipped] + [f"the build function's optimizer {d}" for d in dict.fromkeys(dropped)]
    if req.build_fn:
        warnings.extend(_unsaveable_compile(keras, model))
    if plan.get("compile"):
        warnings.extend(_compile(keras, model, plan["compile"]))
    optimizer = None
    if req.optimizer_state and artifact.model_config is not None:
        from k2to3.workers.optstate import migrate

        optimizer = migrate(keras, model, artifact, pairs)
    with weights_on_disk(req.out), large_weights.keras3_saving():
        try:
            model.save(req.out)
        except TypeError as exc:
            if not (req.build_fn and "Cannot serialize object" in str(exc)):
                raise
            raise _unsaveable(req.build_fn, exc) from None
    return {
        "inputs": [{"name": t.name, "shape": [None if d is None else int(d) for d in t.shape],
                    "dtype": str(t.dtype), "embedding_input_dim": _embedding_fed(keras, model, t)}
                   for t in model.inputs],
        "ledger": ledger.to_dict(),
        # a generator: one variable's numpy copy at a time, not a second copy of the whole model
        "weight_hash": weight_hash(large_weights.hashable(keras, w) for w in model.weights),
        "n_layers": len(model.layers),
        "seconds": time.perf_counter() - t0,
        "warnings": warnings,
        "notes": notes,
        "optimizer": optimizer,
    }


def _unsaveable_compile(keras: Any, model: Any) -> list[str]:
    """The build function compiled the model with a loss or metric defined inside a function (an actor-critic's
    `def custom_loss(y_true, y_pred)` closing over a tensor): the .keras would name a function no process can load.
    The compile state is dropped, said once; the weights and outputs are what the conversion is about."""
    config = getattr(model, "_compile_config", None)
    cfg = config.config if config is not None and hasattr(config, "config") else {}
    found, stand_ins = [], []
    for key in ("loss", "metrics", "weighted_metrics"):
        for obj in keras.tree.flatten(cfg.get(key)) if cfg.get(key) is not None else []:
            if callable(obj) and "<locals>" in getattr(obj, "__qualname__", ""):
                found.append(f"{key} {obj.__qualname__}")
            elif callable(obj) and getattr(obj, "_k2to3_stand_in", False):  # generated_module.py's stand-in
                stand_ins.append(f"{key} {obj.__name__}")
    if not found and not stand_ins:
        return []
    model.compiled = False
    model._compile_config = None
    said = [f"{', '.join(found)}, defined inside a function (it cannot be saved or loaded by name)"] if found else []
    said += [f"{', '.join(stand_ins)}, which k2to3 could not rewrite for Keras 3 (see the findings)"] if stand_ins \
        else []
    return [f"the build function compiles with {'; and '.join(said)}: the .keras is saved without its compile "
            "state; compile it again before training"]


def _embedding_fed(keras: Any, model: Any, tensor: Any) -> int | None:
    """input_dim of an Embedding this model input feeds directly (a build function's float Input(shape=(40,))
    into Embedding(465, ...), textgenrnn): the seeded verification indices stay in range."""
    for layer in model.layers:
        if isinstance(layer, keras.layers.Embedding):
            for node in getattr(layer, "_inbound_nodes", []):
                if any(t is tensor for t in node.input_tensors):
                    return int(layer.input_dim)
    return None


def _check_lambda_shapes(model: Any, spec: dict[str, Any]) -> None:
    """A Lambda rebuilt from --src must give the output shape its Keras 2 config recorded (a raw
    output_shape): a different shape means the matched source function is not the one that built it."""
    for s in spec.get("layers", []):
        want = s.get("expect_output_shape")
        if not want:
            continue
        got = list(model.get_layer(s["name"]).output.shape[1:])
        if len(got) != len(want) or any(w is not None and g is not None and w != g for w, g in zip(want, got)):
            raise K2to3Error(f"Lambda '{s['orig_name']}': the source function gives output shape {got}, the file "
                             f"recorded {want}", hint="the matched source call is not the one that built this "
                             "layer; give it name= in the source or pass --src FILE:FUNCTION")


def _unsaveable(build_fn: str, exc: TypeError) -> K2to3Error:
    """The model a build function makes holds an object Keras 3 cannot write into the .keras: a Lambda whose
    function closes over one (`Lambda(lambda v: tf.tile(v, [1, self.action_size]))` in a method: `self`)."""
    from k2to3.errors import Exit

    what = str(exc).split(". To be serializable")[0]
    return K2to3Error(f"the model {build_fn} builds cannot be saved by Keras 3 ({what}): a Lambda's function is "
                      "saved with the values it closes over, and a lambda in a method that reads self.x closes over "
                      "the instance", Exit.NOT_PORTABLE,
                      hint="in the source, read the value into a local name before the lambda (n = self.x) or pass "
                      "it as Lambda(..., arguments={...})")


def _call_build_fn(keras: Any, req: BuildRequest, skipped: list[str], dropped: list[str]) -> Any:
    from k2to3.errors import STAND_IN_MARK, Exit
    from k2to3.workers.build_probe import call_build, target

    module = sys.modules[os.path.splitext(os.path.basename(req.modules[0]))[0]]
    try:
        return call_build(target(module, req.build_fn), req.build_fn, req.build_args, keras.Model,
                          skipped, dropped)
    except NotImplementedError as exc:  # a definition the generated module could not rewrite, and the build uses
        if STAND_IN_MARK not in str(exc):
            raise _build_failed(req, exc) from None
        raise K2to3Error(str(exc), Exit.NOT_PORTABLE, hint="rewrite it with keras.ops in the source") from None
    except K2to3Error:
        raise
    except Exception as exc:  # the user's build code, rewritten for Keras 3, raised: where, in one line
        raise _build_failed(req, exc) from None


def _build_failed(req: BuildRequest, exc: Exception) -> K2to3Error:
    """The build function (tf_keras built it; the search confirmed that) raised under Keras 3: a Keras 2 idiom
    Keras 3 rejects (Input(shape=2), not (2,)). Names the line of the generated module, a precise stop (exit 3)."""
    import traceback

    from k2to3.errors import Exit

    module = os.path.basename(req.modules[0])
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.basename(f.filename) == module]
    where = f" at {module}:{frames[-1].lineno} (`{(frames[-1].line or '').strip()[:80]}`)" if frames else ""
    first = (str(exc).strip().splitlines() or [""])[0][:200]
    return K2to3Error(f"{req.build_fn} fails under Keras 3{where}: {type(exc).__name__}: {first}",
                      Exit.NOT_PORTABLE, hint="the build ran under tf_keras; rewrite that line for Keras 3 in the "
                      "source (k2to3 lint names most such calls)")


def _cudnn_groups(model: Any, artifact: Any, renames: dict[str, str]) -> dict[str, str]:
    """File layers holding cuDNN-layout weights where the build function made an LSTM/GRU (textgenrnn): converted
    on restore as Keras 2's load_weights converted them (upgrade/cudnn.py)."""
    from k2to3.upgrade.cudnn import file_layout
    from k2to3.workers.build_probe import rnn_class

    out = {}
    for f, entries in artifact.weights.items():
        layer = next((m for m in model.layers if m.name == renames.get(f, f)), None)
        if layer is None or not entries:
            continue
        target = file_layout(rnn_class(layer), [[int(d) for d in e.shape] for e in entries],
                             [[int(d) for d in w.shape] for w in layer.weights])
        if target:
            out[f] = target
    return out


def _renames_by_order(model: Any, artifact: Any) -> dict[str, str]:
    """A weights-only file names its layers as Keras 2 numbered them in the process that saved it; Keras 2's
    load_weights matched layers with weights by order, and so does this (file layer -> model layer)."""
    file_layers = [n for n in artifact.layer_names if artifact.weights.get(n)]
    model_layers = [layer for layer in model.layers if layer.weights]
    if len(file_layers) != len(model_layers):
        raise K2to3Error(f"the weights file has {len(file_layers)} layers with weights, the model built by the "
                         f"source has {len(model_layers)}", hint="pass the build function that made these weights")
    # Keras 3 may order two branches of equal depth otherwise than tf_keras did (anago's word and char
    # embeddings): each file layer takes the first layer left, in order, whose weight shapes are its own
    free = list(model_layers)
    out = {}
    for f in file_layers:
        want = sorted(tuple(int(d) for d in e.shape) for e in artifact.weights[f])
        m = next((m for m in free if sorted(tuple(int(d) for d in w.shape) for w in m.weights) == want), free[0])
        # (a cuDNN-layout group matches no shapes exactly: it takes the next layer in order)
        free.remove(m)
        if f != m.name:
            out[f] = m.name
    return out


def _compile(keras: Any, model: Any, cfg: dict[str, Any]) -> list[str]:
    try:
        opt = keras.optimizers.deserialize(cfg["optimizer"]) if cfg.get("optimizer") else "rmsprop"
        loss = cfg.get("loss")
        if isinstance(loss, dict) and "class_name" in loss:
            loss = keras.losses.deserialize(loss)
        elif isinstance(loss, dict):
            loss = {k: keras.losses.deserialize(v) if isinstance(v, dict) else v for k, v in loss.items()}
        model.compile(optimizer=opt, loss=loss, metrics=cfg.get("metrics"), loss_weights=cfg.get("loss_weights"))
        # Keras saves compile's *resolved* jit_compile: "auto" is False under TensorFlow on a CPU, and a .keras
        # built here would then train eagerly on jax, every step far slower than compiled. Saved as "auto", every
        # backend resolves its own default when it loads the file.
        saved = getattr(getattr(model, "_compile_config", None), "config", None)
        if isinstance(saved, dict) and "jit_compile" in saved:
            saved["jit_compile"] = "auto"
        return []
    except Exception as exc:  # compile info is optional: the model converts without it
        return [f"compile config not kept: {str(exc).splitlines()[0][:200]}"]
