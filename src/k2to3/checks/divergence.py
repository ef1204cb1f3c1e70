"""The first divergent layer of a mismatch (`backends.<b>.first_divergent_layer`, `layer_errors`): every layer's
output probed on the reference and on each mismatching backend, compared in topological order."""

from __future__ import annotations

from typing import Any

from k2to3.checks.base import Run
from k2to3.core.compare import first_divergent_layer
from k2to3.workers.process import WorkerError
from k2to3.workers.protocol import GoldenRequest, VerifyRequest


def locate(run: Run, backends: dict[str, Any]) -> None:
    bad = [b for b, v in backends.items() if v.get("status") == "mismatch"]
    ref_kind = run.report["reference"].get("kind")
    if not bad or ref_kind == "golden-npz":  # a golden file holds the model outputs only, not every layer's
        return
    try:
        if ref_kind == "keras2-tf_keras":
            ref_reply: Any = run.pool.get("tensorflow").call(GoldenRequest(
                h5=str(run.reference_h5), inputs=run.npz("inputs"), out=run.npz("golden2"), layers=True,
                layers_out=run.npz("golden-layers"), **run.golden_args))
        else:
            ref_reply = run.pool.get(ref_kind.split("-", 1)[1]).call(VerifyRequest(
                keras=str(run.keras), inputs=run.npz("inputs"), out=run.npz("ref2"), layers=True,
                layers_out=run.npz("ref-layers"), modules=run.modules))
        ref_layers = dict(zip(ref_reply["layer_names"], run.load(
            "golden-layers" if ref_kind == "keras2-tf_keras" else "ref-layers")))
        inverse = {new: old for old, new in run.plan.renames.items()}
        for b in bad:
            rep = run.pool.get(b).call(VerifyRequest(keras=str(run.keras), inputs=run.npz("inputs"),
                                                     out=run.npz(f"probe-{b}"), layers=True,
                                                     layers_out=run.npz(f"layers-{b}"), modules=run.modules))
            got = dict(zip(rep["layer_names"], run.load(f"layers-{b}")))
            first, rows = first_divergent_layer(rep["layer_names"], got, ref_layers, inverse, run.rtol, run.atol)
            backends[b]["first_divergent_layer"] = first
            backends[b]["layer_errors"] = rows
    except WorkerError as exc:
        for b in bad:
            backends[b]["first_divergent_layer"] = {"error": f"per-layer probe failed: {exc.message}"}
