"""Run by the interpreter of a `--target-keras` environment as a script, never imported by k2to3: loads the .keras
with that environment's Keras (safe_mode=True) after `import k2to3.portable` and the generated modules, runs it on
the inputs and writes the outputs. Needs only keras, numpy and the backend: the parent puts a copy of
k2to3/portable (and nothing else of k2to3) on PYTHONPATH.

    python target_load.py REQUEST.json   ->  one JSON line on stdout: versions, params, warnings (or an error)

A request {"batch": [REQUEST, ...]} answers a list, one import of keras for many files.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import warnings


def _import(path: str) -> None:
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)


def main(req: dict) -> dict:
    import keras
    import numpy as np

    import k2to3.portable  # noqa: F401  registers k2to3>* objects, as a user of the converted model does

    for path in req.get("modules") or []:
        _import(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        model = keras.saving.load_model(req["keras"], safe_mode=True)
        load_seconds = time.perf_counter() - t0
        with np.load(req["inputs"]) as z:
            xs = [z[f"in{i}"] for i in range(len(z.files))]
        out = model(xs[0] if len(xs) == 1 else list(xs), training=False)
    flat = [np.asarray(keras.ops.convert_to_numpy(t)) for t in keras.tree.flatten(out)]
    np.savez(req["out"], **{f"out{i}": a for i, a in enumerate(flat)})
    backend = keras.backend.backend()
    opt = getattr(model, "optimizer", None)
    # the optimizer state a resumed training starts from: its step counter shows the saved slots were read
    iterations = int(keras.ops.convert_to_numpy(opt.iterations)) if opt is not None and opt.variables else None
    return {"optimizer": type(opt).__name__ if opt is not None else None, "optimizer_iterations": iterations,
            "keras_version": keras.__version__, "backend": backend,
            "library_version": str(getattr(sys.modules.get(backend), "__version__", "unknown")),
            "params": int(model.count_params()), "load_seconds": round(load_seconds, 3),
            # a weight an older Keras skips is only a warning there: the parent treats any load warning as a finding
            "warnings": sorted({str(w.message).splitlines()[0][:300] for w in caught
                                if "weight" in str(w.message).lower() or "skipping" in str(w.message).lower()})}


def answer(req: dict) -> dict:
    try:
        return main(req)
    except Exception as exc:  # the parent turns it into a one-line error; the traceback stays in the log
        import traceback

        traceback.print_exc(file=sys.stderr)
        return {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:500]}


if __name__ == "__main__":
    with open(sys.argv[1]) as f:
        request = json.load(f)
    replies = [answer(r) for r in request["batch"]] if "batch" in request else answer(request)
    sys.stdout.write("K2TO3-TARGET " + json.dumps(replies) + "\n")
