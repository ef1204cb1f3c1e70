"""A tf.keras `.keras` archive or Keras SavedModel: checked as data first (no Lambda bytecode, custom objects only
from --src), then loaded by tf_keras with safe_mode=True in the tensorflow worker and re-saved as a Keras 2 .h5,
which the rest of the pipeline reads like any other (formats.bridged)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from k2to3.errors import NotPortable
from k2to3.formats import Input, bridged
from k2to3.formats.artifact import read_keras_config
from k2to3.pipeline.sources import Sources
from k2to3.upgrade.needed_code import collect_needs, module_name_for
from k2to3.workers.pool import Pool
from k2to3.workers.process import WorkerError
from k2to3.workers.protocol import BridgeRequest


def bridge(inp: Input, sources: Sources, output: Path, work: Path, get_pool: Callable[[], Pool],
           progress: Callable[[str], None]) -> Input:
    config, version, fmt = read_keras_config(inp.path)
    config = _root_as_layer(config)
    needs = collect_needs(config, None)
    lambdas = [n.layer for n in needs if n.kind in ("lambda", "activation_lambda")]
    if lambdas:
        raise NotPortable(f"{inp.path}: Lambda layers or lambda activations ({', '.join(map(str, lambdas[:3]))}) "
                          f"in a {fmt}; k2to3 rebuilds Lambdas from Keras 2 .h5 files with --src",
                          hint="in Keras 2, load it and model.save('model.h5'), then convert the .h5 with --src")
    k2_module = None
    custom = sorted({str(n.class_name or n.fn_name) for n in needs})
    if custom and sources.index is None:
        raise NotPortable(f"{inp.path}: custom objects {', '.join(custom[:5])} in a {fmt}",
                          hint="pass the source that defines them with --src model.py")
    if custom:
        assert sources.index is not None
        from k2to3.source.hoist import resolve_sources  # libcst: only an archive with sources

        res = resolve_sources(sources.index, config, None, module_name_for(output.stem))
        if res.errors:
            raise NotPortable(res.errors[0].line())
        k2_module = work / f"_k2to3_bridge_{res.module}.py"
        k2_module.write_text(res.k2_code)
    progress(f"loading the {fmt} with tf_keras (safe_mode=True) and re-saving it as Keras 2 HDF5")
    out = work / "bridged.h5"
    try:
        reply = get_pool().get("tensorflow").call(BridgeRequest(src=str(inp.path), out=str(out),
                                                                k2_module=str(k2_module) if k2_module else None))
    except WorkerError as exc:
        raise NotPortable(f"{inp.path}: tf_keras could not load the {fmt}: {exc.message}",
                          hint="load it in Keras 2 and model.save('model.h5'), then convert the .h5") from None
    how = f"loaded by tf_keras {reply['keras_version']} (compile={reply['compiled']})" \
        if reply.get("how", "loaded") == "loaded" else (
            f"rebuilt by tf_keras {reply['keras_version']} from config.json, its weights read as data (tf_keras's "
            "loader refused the archive; layers matched to the weights' groups by name, or by class and creation "
            "order for a tf.keras 2.13/2.14 archive: formats/keras_archive.py)")
    if reply.get("wrapped"):
        how += (f"; {reply['wrapped']}, a subclassed Model whose layers are connected in call(), re-saved as the "
                "functional model of one layer, itself, on the inputs it was saved with")
        progress(f"{reply['wrapped']} is a subclassed Model: converted as the one layer of a functional model")
    if reply.get("how") == "read as data":
        progress("tf_keras's loader refused the archive: rebuilt from config.json, its weights read as data")
    return bridged(inp, out, {"format": fmt, "keras_version": version, "bridged": f"{how} and re-saved as HDF5"},
                   weights_only_ok=sources.build_fn is not None)


GRAPH_CLASSES = ("Functional", "Model", "Sequential")


def _root_as_layer(config: dict[str, Any]) -> dict[str, Any]:
    """A subclassed Model saved as the root (`{"class_name": "Tower", "config": {"num_classes": 3}}`): read as the one
    layer of a functional model, which is what the tensorflow worker re-saves (workers/tf_keras_outputs.py
    archive_bridge.py as_layer_graph), so its class is a custom object the --src files must define like any layer's."""
    if not isinstance(config, dict) or config.get("class_name") in GRAPH_CLASSES:
        return config
    inner = config.get("config")
    if isinstance(inner, dict) and "layers" in inner:
        return config  # a subclass whose __init__ built a functional graph: tf_keras saved the graph
    return {"class_name": "Functional", "config": {"name": "root", "layers": [{**config, "name": "root",
                                                                                "inbound_nodes": []}]}}
