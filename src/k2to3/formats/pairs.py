"""Architecture JSON/YAML (`model.to_json()` / `to_yaml()`) + weights HDF5 (`save_weights()`) pairs.

The pair is read as data (json, or yaml.safe_load) and merged into one Keras 2 HDF5 in the job directory, as
`model.save()` would have written it: the config as `model_config`, the weight groups under `model_weights`.
The rest of the pipeline (upgrade, rebuild + restore, the tf_keras golden through `load_model`, which is
`model_from_config` + `load_weights_from_hdf5_group`) then reads it like any other file. Weights are paired with
layers the way Keras 2's `load_weights` did: by order of the layers that have weights; where the saved layer
names match the config the pairing is by name (the same thing, checked), else the groups are renamed to the
config's names in the merged file and the report says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k2to3.core.h5safe import open_checked
from k2to3.core.text import clip
from k2to3.core.validate import check_model_config
from k2to3.errors import InputError, NotPortable
from k2to3.formats.artifact import MAX_METADATA_BYTES, file_sha256, read_artifact, sniff
from k2to3.upgrade.keras1.translate import is_merge_of_models

CONFIG_SUFFIXES = (".json", ".yaml", ".yml")
_WEIGHT_STEM_TAILS = ("_weights", "-weights", ".weights", "_weight", "-weight")
_MODEL_CLASSES = ("Sequential", "Model", "Functional")
_HINT = "pass the JSON or YAML written by model.to_json() / model.to_yaml()"


@dataclass
class Pair:
    weights: Path
    config_path: Path
    config: dict[str, Any]
    keras_version: str | None
    backend: str | None
    matched_by: str = "name"  # "name" or "order"
    renamed: dict[str, str] = field(default_factory=dict)  # weights-file layer -> config layer (by order)

    def to_report(self, found: bool) -> dict[str, Any]:
        return {"config": str(self.config_path), "config_sha256": file_sha256(self.config_path),
                "found": "beside the weights" if found else "--config",
                "config_keras_version": self.keras_version, "weights_matched_by": (
                    "layer name (= Keras 2 load_weights order)" if self.matched_by == "name"
                    else "topological order of layers with weights (Keras 2 load_weights); saved names differ"),
                "renamed_weight_groups": self.renamed}


def config_candidates(weights: Path) -> list[Path]:
    """Where the architecture of a weights file sits: same stem, stem without `_weights`, or model.* for
    weights.h5 / model_weights.h5."""
    d, stem = weights.parent, weights.stem
    bases = [stem] + [stem[: -len(t)] for t in _WEIGHT_STEM_TAILS if stem.endswith(t) and len(stem) > len(t)]
    if stem in ("weights", "model_weights", "model-weights"):
        bases.append("model")
    return [d / f"{b}{s}" for b in dict.fromkeys(bases) for s in CONFIG_SUFFIXES]


MAX_BESIDE = 64  # other config files of a weights file's directory looked at when no name says which


def find_config(weights: Path) -> Path | None:
    """The config file beside a weights-only file: one with a name that says so (model.json for
    model_weights.h5), else the one JSON or YAML of the directory that is a Keras model config whose layers take
    these weights by name (or, failing that, the one that takes them by order)."""
    for cand in config_candidates(weights):
        if cand.is_file() and cand != weights:
            try:
                read_config(cand)
            except InputError:
                continue
            return cand
    try:
        others = sorted(c for c in weights.parent.iterdir() if c.suffix in CONFIG_SUFFIXES and c.is_file())
    except OSError:
        return None
    by: dict[str, list[Path]] = {"name": [], "order": []}
    for cand in others[:MAX_BESIDE]:
        try:
            by[pair(weights, cand).matched_by].append(cand)
        except (InputError, NotPortable):
            continue
    return next((found[0] for found in by.values() if len(found) == 1), None)


def is_weights_only(path: Path) -> bool:
    """A save_weights HDF5 (layer groups at the root, no model_config), checked by content."""
    if not path.is_file() or sniff(path) != "hdf5":
        return False
    try:
        art = read_artifact(path, weights_only_ok=True)
    except InputError:
        return False
    return art.model_config is None


def _yaml_load(text: str, path: Path) -> Any:
    try:
        import yaml
    except ImportError:
        raise InputError(f"{path}: reading a YAML model config needs PyYAML",
                         hint="pip install 'k2to3[all]' (or pip install pyyaml)") from None

    class Loader(yaml.SafeLoader):
        """safe_load plus the one tag Keras 2's to_yaml wrote (yaml.dump of tuples): a tuple becomes a list."""

    Loader.add_constructor("tag:yaml.org,2002:python/tuple", lambda loader, node: loader.construct_sequence(node))
    try:
        return yaml.load(text, Loader=Loader)  # a SafeLoader subclass: safe_load + tuples
    except yaml.YAMLError as exc:
        raise InputError(f"{path}: not valid YAML ({clip(str(exc), 80)})", hint=_HINT) from None


MAX_CONFIG_NODES = 2_000_000  # values in a model config once YAML aliases are expanded (a real one: ~1e5)


def _check_expansion(data: Any, path: Path) -> None:
    """YAML aliases share objects, so a small file can stand for an exponentially large config ("billion
    laughs"); everything after this walks it expanded. Count the values with aliases expanded, up to a cap."""
    seen = 0
    stack = [data]
    while stack:
        x = stack.pop()
        seen += 1
        if seen > MAX_CONFIG_NODES:
            raise InputError(f"{path}: the YAML expands to over {MAX_CONFIG_NODES} values through its aliases; "
                             "refused", hint="docs/security.md; pass the config written by model.to_yaml()")
        if isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)


def read_config(path: Path) -> tuple[dict[str, Any], str | None, str | None]:
    """(model config, keras_version, backend) of a to_json/to_yaml file; one line if it is not one."""
    if not path.is_file():
        raise InputError(f"{path}: no such config file", hint=_HINT)
    size = path.stat().st_size
    if size > MAX_METADATA_BYTES:
        raise InputError(f"{path}: {size} bytes, over the {MAX_METADATA_BYTES}-byte limit for a model config",
                         hint="docs/security.md")
    text = path.read_bytes().decode("utf-8", errors="replace")
    if path.suffix in (".yaml", ".yml"):
        data = _yaml_load(text, path)
        _check_expansion(data, path)
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})", hint=_HINT) from None
    if isinstance(data, str) and path.suffix == ".json":  # json.dump(model.to_json(), f): the JSON held as a string
        try:
            data = json.loads(data)
        except json.JSONDecodeError:
            pass
    if not isinstance(data, dict) or data.get("class_name") not in _MODEL_CLASSES or "config" not in data:
        what = (f"class_name {data.get('class_name')!r}" if isinstance(data, dict) and "class_name" in data
                else f"a {type(data).__name__} without class_name/config")
        raise InputError(f"{path}: not a Keras model config ({what}; expected Sequential, Model or Functional)",
                         hint=_HINT)
    check_model_config(data, f"{path}:")
    version = data.get("keras_version")
    backend = data.get("backend")
    config = {"class_name": data["class_name"], "config": data["config"]}
    return config, str(version) if version else None, str(backend) if backend else None


def _top_layers(config: dict[str, Any]) -> list[tuple[str, str]]:
    """(name, class_name) of the model's own layers, in config order (= Keras 2 model.layers order)."""
    cfg = config["config"]
    layers = cfg if isinstance(cfg, list) else cfg.get("layers", [])
    if is_merge_of_models(config):  # Keras 1 Sequential(Merge of models): save_weights wrote flattened_layers
        branches = [b.get("config") for b in layers[0]["config"]["layers"] if isinstance(b, dict)]
        layers = [x for b in branches if isinstance(b, list) for x in b] + list(layers[1:])
    return [(lay.get("config", {}).get("name") or lay.get("name"), lay.get("class_name")) for lay in layers]


def pair(weights: Path, config_path: Path) -> Pair:
    """Read both files and decide how the weight groups map onto the config's layers."""
    config, version, backend = read_config(config_path)
    art = read_artifact(weights, weights_only_ok=True)
    p = Pair(weights, config_path, config, version, backend)
    with_w = [n for n in art.layer_names if art.weights.get(n)]
    cfg_layers = _top_layers(config)
    names = [n for n, _ in cfg_layers]
    if all(n in names for n in with_w):
        return p
    # Keras 2 load_weights: the i-th file layer with weights goes to the i-th model layer with weights. The file
    # lists every layer of model.layers (weightless ones with no weights); Sequential's omit the InputLayer.
    for candidates in (names, [n for n, c in cfg_layers if c != "InputLayer"]):
        if len(candidates) == len(art.layer_names):
            p.matched_by = "order"
            p.renamed = {f: c for f, c in zip(art.layer_names, candidates) if f != c}
            return p
    raise NotPortable(f"{weights}: its {len(art.layer_names)} layer groups ({len(with_w)} with weights) do not "
                      f"match the {len(cfg_layers)} layers of {config_path} by name or by order",
                      hint="pass the config saved with these weights (--config)")


def write_merged(p: Pair, out: Path) -> None:
    """The pair as one Keras 2 model file (model_config + model_weights), in the job directory."""
    import h5py

    src = open_checked(p.weights)
    try:
        with h5py.File(out, "w") as dst:
            dst.attrs["model_config"] = json.dumps(p.config)
            dst.attrs["keras_version"] = (p.keras_version or src.attrs.get("keras_version", b"2.2.4"))
            dst.attrs["backend"] = p.backend or src.attrs.get("backend", b"tensorflow")
            root = src["model_weights"] if "model_weights" in src else src
            mw = dst.create_group("model_weights")
            for k, v in root.attrs.items():
                mw.attrs[k] = v
            names = [n.decode() if isinstance(n, bytes) else str(n) for n in _layer_names(root)]
            for k in [k for k in mw.attrs if k.startswith("layer_names")]:
                del mw.attrs[k]
            new = [p.renamed.get(n, n) for n in names]
            mw.attrs["layer_names"] = [n.encode() for n in new]
            for old, nn in zip(names, new):
                src.copy(root[old], mw, name=nn)
    finally:
        src.close()


def _layer_names(group: Any) -> list[Any]:
    if "layer_names" in group.attrs:
        return list(group.attrs["layer_names"])
    out, i = [], 0
    while f"layer_names{i}" in group.attrs:
        out.extend(group.attrs[f"layer_names{i}"])
        i += 1
    return out


def resolve(src: Path, config: Path | None) -> Pair | None:
    """The pair `convert` and `audit` use for `src`: the --config given, else a config beside a weights-only
    file; None when `src` is not half of a pair."""
    if config is not None:
        return pair(src, config)
    if not is_weights_only(src):
        return None
    found = find_config(src)
    return pair(src, found) if found else None


def bridge(p: Pair, work: Path, found: bool) -> tuple[Path, dict[str, Any]]:
    """Merge the pair into work/paired.h5; the report's input section for it."""
    out = work / "paired.h5"
    write_merged(p, out)
    fmt = "JSON config + HDF5 weights" if p.config_path.suffix == ".json" else "YAML config + HDF5 weights"
    return out, {"format": fmt, "keras_version": p.keras_version, "pair": p.to_report(found)}
