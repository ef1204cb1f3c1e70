"""Differential probe (run as a subprocess by tests/test_tfmot.py, one backend per process): k2to3's keras.ops
fake quantization (portable/tfmot.fake_quant, portable/tfops.fake_quant_with_min_max_vars) on 1.6M random values,
one range, a range per channel (and narrow), and Python-number ranges. Writes the outputs to the .npz named by argv[1];
under the TensorFlow backend it also writes TensorFlow's own kernels' outputs to argv[2]."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from k2to3.portable.tfmot import fake_quant
from k2to3.portable.tfops import fake_quant_with_min_max_vars

rng = np.random.default_rng(0)
X = (rng.standard_normal((200_000, 8)) * 2).astype("float32")
LO, HI = np.float32(-3.7), np.float32(4.1)
CLO, CHI = np.linspace(-4, -0.5, 8).astype("float32"), np.linspace(0.7, 5, 8).astype("float32")


def t(a: np.ndarray):
    return keras.ops.convert_to_tensor(a)


CASES = {
    "one_range": lambda a: fake_quant(a, t(LO), t(HI)),
    "per_channel": lambda a: fake_quant(a, t(CLO), t(CHI)),
    "per_channel_narrow": lambda a: fake_quant(a, t(CLO), t(CHI), 8, True),
    "numbers": lambda a: fake_quant_with_min_max_vars(a, -3.7, 4.1),
    "tensors": lambda a: fake_quant_with_min_max_vars(a, t(LO), t(HI)),
}


def main() -> None:
    backend = keras.backend.backend()
    out = {}
    for name, fn in CASES.items():
        if backend == "jax":  # compiled, as Keras 3 runs a model on jax
            import jax

            out[name] = np.asarray(jax.jit(fn)(X))
        else:
            out[name] = keras.ops.convert_to_numpy(fn(t(X)))
    np.savez(sys.argv[1], **out)
    if backend == "tensorflow":
        import tensorflow as tf

        q = tf.quantization
        one = q.fake_quant_with_min_max_vars(X, LO, HI).numpy()
        np.savez(sys.argv[2], one_range=one, numbers=one, tensors=one,
                 per_channel=q.fake_quant_with_min_max_vars_per_channel(X, CLO, CHI).numpy(),
                 per_channel_narrow=q.fake_quant_with_min_max_vars_per_channel(X, CLO, CHI,
                                                                               narrow_range=True).numpy())


if __name__ == "__main__":
    main()
