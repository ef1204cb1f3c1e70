"""Run in a subprocess (KERAS_BACKEND set by the caller): load every `.keras` of tests/fixtures/portable/ as a user
does, with `import k2to3.portable` (and the generated module of a --src conversion) and keras alone, safe_mode=True;
run it on its golden file's inputs and print one JSON line: per file, the max abs error against the Keras 2 outputs
the golden file holds, and whether it is within the golden file's tolerance. Not a test module:
test_portable_compat.py runs it."""

from __future__ import annotations

import importlib
import json
import os
import sys
import warnings
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
warnings.filterwarnings("ignore")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import k2to3.portable  # noqa: E402,F401  what the report's `load` line says to import

DIR = Path(__file__).resolve().parent / "fixtures" / "portable"


def main() -> None:
    manifest = json.loads((DIR / "manifest.json").read_text())
    sys.path.insert(0, str(DIR))
    rows = {}
    for name, entry in manifest["files"].items():
        if keras.backend.backend() not in entry["backends"]:
            continue
        if entry["module"]:
            importlib.import_module(Path(entry["module"]).stem)
        with np.load(DIR / f"{name}.golden.npz") as z:
            meta = json.loads(str(z["meta"]))
            xs = [z[f"in{i}"] for i in range(sum(k.startswith("in") for k in z.files))]
            ys = [z[f"out{i}"] for i in range(sum(k.startswith("out") for k in z.files))]
        model = keras.saving.load_model(DIR / f"{name}.keras", safe_mode=True)
        got = model(xs[0] if len(xs) == 1 else xs, training=False)
        got = [keras.ops.convert_to_numpy(t) for t in keras.tree.flatten(got)]
        rows[name] = {"max_abs": max(float(np.abs(g - y).max()) for g, y in zip(got, ys)),
                      "ok": all(np.allclose(g, y, rtol=meta["rtol"], atol=meta["atol"]) for g, y in zip(got, ys)),
                      "optimizer": type(model.optimizer).__name__ if getattr(model, "optimizer", None) else None}
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
