"""A TF-format checkpoint (PREFIX.index + PREFIX.data-*): no model config, so the --src build function makes the
model (named, or found and matched to the checkpoint's weight groups, pipeline/build_search.py); tf_keras loads the
checkpoint into it in the tensorflow worker, with the optimizer slots when the build function compiles the model,
and re-saves it as a Keras 2 HDF5 the rest of the pipeline reads like any full model file (formats.bridged)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from k2to3.errors import Exit, K2to3Error, NotPortable
from k2to3.formats import Input, bridged
from k2to3.pipeline import build_search
from k2to3.pipeline.sources import Sources
from k2to3.source.buildargs import call_text
from k2to3.upgrade.needed_code import collect_needs, module_name_for
from k2to3.workers.pool import Pool
from k2to3.workers.process import WorkerError
from k2to3.workers.protocol import CkptBridgeRequest, CkptGroupsRequest, Request

R = TypeVar("R")


def _call(get_pool: Callable[[], Pool], req: Request[R]) -> R:
    try:
        return get_pool().get("tensorflow").call(req)
    except WorkerError as exc:
        raise K2to3Error(exc.message, Exit(exc.code) if exc.code is not None else Exit.USAGE) from None


def bridge_checkpoint(inp: Input, sources: Sources, output: Path, work: Path, get_pool: Callable[[], Pool],
                      progress: Callable[[str], None]) -> Input:
    prefix = str(inp.h5)
    if sources.index is None:
        raise NotPortable(f"{inp.path}: a TF checkpoint holds weights, not the model",
                          hint="pass the source of the function that builds it: --src FILE.py[:FUNCTION]")
    index = _call(get_pool, CkptGroupsRequest(prefix=prefix))  # its declared sizes checked before anything is read
    chosen = build_search.Chosen(sources.build_fn or "", sources.build_args, None)
    build_search.add_script_builds(sources)
    if build_search.needs_search(sources, None):
        weights = build_search.WeightFile(inp.path, index["groups"], order_free=True)
        chosen = build_search.choose(sources, weights, output, work, get_pool, progress)
        progress(chosen.match["summary"] if chosen.match else "")
    elif not sources.build_fn:
        raise NotPortable(f"{inp.path}: a TF checkpoint and --src without a build function",
                          hint="name it: --src FILE.py:FUNCTION")
    from k2to3.source.resolve_files import resolve_in_files  # libcst: only a model with --src pays for it

    res = resolve_in_files(sources.index, None, None, module_name_for(output.stem), chosen.fn)
    if res.errors:
        raise NotPortable(res.errors[0].line())
    k2 = work / f"_k2to3_ckpt_{res.module}.py"
    k2.write_text(res.k2_code)
    out = work / "checkpoint.h5"
    progress(f"loading the TF checkpoint into {call_text(chosen.fn, chosen.build_args)} with tf_keras and "
             "re-saving it as Keras 2 HDF5")
    reply = _call(get_pool, CkptBridgeRequest(prefix=prefix, k2_module=str(k2), fn=chosen.fn,
                                              build_args=chosen.build_args, out=str(out)))
    sources.build_fn, sources.build_args, sources.match = chosen.fn, chosen.build_args, chosen.match
    info = {"format": "TF checkpoint", "keras_version": reply["keras_version"], "checkpoint": {
        "prefix": prefix, "declared_bytes": index["declared_bytes"], "data_bytes": index["data_bytes"],
        "weight_groups": len(index["groups"]), "optimizer_values": reply["optimizer_values"],
        "optimizer": reply["optimizer"], "optimizer_layout": reply["optimizer_layout"],
        "optimizer_variables_restored": reply["optimizer_restored"],
        "iterations": reply["iterations"], "built_by": call_text(chosen.fn, chosen.build_args),
        "match": chosen.match},
        "bridged": f"built by {call_text(chosen.fn, chosen.build_args)} under tf_keras {reply['keras_version']}, the "
                   "checkpoint loaded into it (load_weights) and the model re-saved as HDF5"}
    return bridged(inp, out, info)


def needs_no_source(inp: Input) -> bool:
    """The re-saved model needs nothing of --src (no Lambda, no custom object): it converts as a plain file, and
    tf_keras's reference is the file itself, with its optimizer state."""
    art = inp.artifact
    return art is not None and not collect_needs(art.model_config, art.training_config)
