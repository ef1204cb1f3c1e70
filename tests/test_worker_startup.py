"""Workers defer what Keras imports and never uses (workers/deferred_imports.py): a torch worker starts, verifies and
trains without loading torch._dynamo (1.2 s of its start, 0.7-0.95 s of its first training step), no worker loads
IPython, and what does use dynamo (a training step outside the worker's scope, torch.compile) gets the real package,
Keras's seed functions and the steps' results unchanged under it. Real torch, real Keras."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES

from k2to3.workers.pool import Pool
from k2to3.workers.protocol import LoadedRequest

SRC = str(Path(__file__).resolve().parents[1] / "src")

SCRIPT = r"""
import json, sys
from k2to3.workers import deferred_imports
deferred_imports.block_ipython()
sys.modules.setdefault("jax", None)
with deferred_imports.dynamo_stand_in():
    from keras.src.utils import module_utils
    module_utils.tensorflow._available = False
    import keras
import numpy as np
import torch

def real():
    mod = sys.modules.get("torch._dynamo")
    return mod is not None and "optimize" in vars(mod)

seen = {"ipython": "IPython" in sys.modules and sys.modules["IPython"] is not None}
keras.utils.set_random_seed(1)
# Inference, and a dropout that draws through keras's `@dynamo.disable()` seed function; clear_session resets dynamo.
m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dropout(0.5), keras.layers.Dense(1)])
seen["predicted"] = m.predict(np.ones((8, 4), "float32"), verbose=0).shape[0]
drop = keras.random.dropout(keras.ops.ones((1000,)), 0.5, seed=keras.random.SeedGenerator(3))
with deferred_imports.dynamo_stand_in():
    keras.backend.clear_session()
seen["after_inference"] = real()
seen["kept"] = float(keras.ops.mean(drop))
# Training steps inside the worker's scope: torch's `_disable_dynamo` wrappers (an op's, the optimizer's) get the
# stand-in's untraced function, and dynamo stays unloaded.
def twin():
    keras.utils.set_random_seed(5)
    t = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3), keras.layers.Dense(1)])
    t.compile(keras.optimizers.Adam(0.01), "mse")
    return t

xs = np.random.default_rng(0).standard_normal((8, 4)).astype("float32")
ys = np.random.default_rng(1).standard_normal((8, 1)).astype("float32")
scoped, unscoped = twin(), twin()
with deferred_imports.dynamo_scope(keras):
    seen["scoped_losses"] = [float(scoped.train_on_batch(xs, ys)) for _ in range(3)]
seen["after_scoped_training"] = real()
# A training step outside the scope: the functions torch wraps kept the deferred disable they were handed.
m.compile("adam", "mse")
m.fit(np.ones((8, 4), "float32"), np.ones((8, 1), "float32"), epochs=1, verbose=0)
seen["after_training"] = real()
# torch.compile needs the real package: the stand-in hands it over, and keras's seed function stays usable.
f = torch.compile(lambda x: torch.sin(x) * 2, backend="eager")
seen["compiled"] = float(f(torch.ones(2)).sum())
seen["after_compile"] = real()
seen["same_module"] = torch._dynamo is sys.modules["torch._dynamo"]
# the same steps with the real dynamo loaded (the deferred disables hand over to it): bit for bit the same
seen["unscoped_losses"] = [float(unscoped.train_on_batch(xs, ys)) for _ in range(3)]
seen["same_weights"] = all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(scoped.weights, unscoped.weights))
d2 = keras.random.dropout(keras.ops.ones((10,)), 0.5, seed=keras.random.SeedGenerator(3))
seen["dropout_after"] = int(keras.ops.sum(keras.ops.cast(d2 == 0, "int32")))
keras.backend.clear_session()  # now the real reset
with deferred_imports.dynamo_stand_in():
    keras.backend.clear_session()
print(json.dumps(seen))
"""


def _env(backend: str) -> dict[str, str]:
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3", "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = SRC + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def test_torch_predicts_without_dynamo_and_training_and_compile_still_get_it():
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=_env("torch"),
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    assert seen["ipython"] is False
    assert seen["predicted"] == 8
    assert seen["after_inference"] is False  # predicted, dropped out, cleared: dynamo never loaded
    assert seen["after_scoped_training"] is False  # three steps, and dynamo never loaded
    assert seen["after_training"] is False
    assert seen["scoped_losses"] == seen["unscoped_losses"] and seen["same_weights"] is True
    assert 0.8 < seen["kept"] < 1.2  # dropout at rate 0.5 keeps about half, scaled by 2
    assert seen["compiled"] == pytest.approx(2 * 2 * 0.8414709848, rel=1e-6)
    assert seen["after_compile"] is True and seen["same_module"] is True
    assert 0 < seen["dropout_after"] < 10


def test_a_converted_model_verifies_on_torch_with_the_stand_in(tmp_path):
    """The worker as convert runs it: the torch worker's verify leaves torch._dynamo unloaded (its start without
    the 1.2 s), and the verdict is parity."""
    from k2to3.interfaces.api import convert

    out = tmp_path / "m.keras"
    with Pool(backends=("torch",), golden=True) as pool:
        result = convert(str(FIXTURES / "h5" / "fm19_hard_sigmoid.h5"), str(out), pool=pool, backends=("torch",))
        log_dir = pool.log_dir
        probe = pool.get("torch").call(LoadedRequest(names=["torch._dynamo", "IPython"]))
    assert result.verdict == "parity", result.verdict
    assert probe["loaded"] == {"torch._dynamo": False, "IPython": False}
    assert not log_dir.exists()  # the pool removes the log directory it made


def test_torch_trains_and_differentiates_without_dynamo(tmp_path):
    """`--fit-steps` with `--grads` on torch: the steps and the first step's gradients at parity with tf_keras,
    and the worker never loaded torch._dynamo (its first step without the 0.7-0.95 s of the import)."""
    from k2to3.core.options import ConvertOptions
    from k2to3.pipeline.convert import convert

    with Pool(backends=("torch",), golden=True) as pool:
        rep = convert(ConvertOptions(src=FIXTURES / "optimizers" / "adam_legacy.h5", output=tmp_path / "m.keras",
                                     fit_steps=2, grads=True, backends=("torch",)), pool=pool)
        probe = pool.get("torch").call(LoadedRequest(names=["torch._dynamo"]))
    assert rep["training"]["backends"]["torch"]["status"] == "parity", rep["training"]["backends"]["torch"]
    assert rep["gradients"]["backends"]["torch"]["status"] == "parity"
    assert probe["loaded"] == {"torch._dynamo": False}
