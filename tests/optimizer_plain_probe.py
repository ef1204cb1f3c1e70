"""Plain Keras 3 on Keras 2 files with optimizer state (run as a subprocess by tests/test_optimizer.py): load the
`.h5` with keras.saving.load_model (the naive recipe), build the optimizer as fit would, and print per file the
iteration counter and the largest absolute slot value as JSON."""

from __future__ import annotations

import json
import sys

import h5py
import keras
import numpy as np

from k2to3.workers.optstate import slot_variables


def main() -> None:
    out = {}
    for path in sys.argv[1:]:
        recipe = "load_model(h5)"
        try:
            model = keras.saving.load_model(path)
        except Exception as exc:
            # the next naive step: load without compile, compile with the file's optimizer class
            first = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            try:
                model = keras.saving.load_model(path, compile=False)
            except Exception as exc2:
                out[path] = {"error": f"{type(exc2).__name__}: {str(exc2).splitlines()[0][:200]}"}
                continue
            with h5py.File(path, "r") as f:
                cls = json.loads(f.attrs["training_config"])["optimizer_config"]["class_name"]
            cls = cls.removeprefix("Custom>")
            model.compile(optimizer=keras.optimizers.deserialize({"class_name": cls, "config": {}}), loss="mse")
            recipe = f"load_model(h5) failed ({first}); load_model(h5, compile=False) + compile({cls})"
        opt = getattr(model, "optimizer", None)
        if opt is None:
            out[path] = {"optimizer": None}
            continue
        opt.build(model.trainable_variables)
        inner = getattr(opt, "inner_optimizer", opt)
        slots = [v for vs in slot_variables(inner, type(inner).__name__).values() for v in vs]
        out[path] = {"recipe": recipe, "optimizer": type(opt).__name__, "n_slots": len(slots),
                     "iterations": int(keras.ops.convert_to_numpy(inner.iterations)),
                     "max_abs_slot": max((float(np.max(np.abs(keras.ops.convert_to_numpy(v)))) for v in slots),
                                         default=0.0)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
