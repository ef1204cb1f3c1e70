"""What `fix` writes and what `convert --src` generates compiles and binds to the installed Keras 3:
every `keras.X.Y(...)` call (and `self.add_weight` in a Keras 3 layer) is bound with
`inspect.signature(...).bind` by tests/bindcheck.py, in a subprocess (the test process never imports keras).
The keyword rules are rules/source.toml ([[call]], [add_weight]); the signatures fix binds to without importing
keras are rules/keras3_signatures.txt. Real code: tests/test_source_corpus.py (tf_keras) and
tests/test_fix_safety.py (the PyPI corpus of bench/real_code.py) run the same check over every file fix rewrites."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import FIXTURES, ROOT

from k2to3.formats.artifact import read_artifact
from k2to3.source.extract import index_sources
from k2to3.source.fix import fix_module, fix_source
from k2to3.source.lint import lint_source
from k2to3.source.resolve_files import resolve_in_files

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "KERAS_BACKEND": "jax", "JAX_PLATFORMS": "cpu"}


def bind(pairs: list[tuple[Path | None, Path]], tmp: Path) -> dict:
    """[(original or None, file)] -> {"calls": bound, "failures": ["path:line: why"]}."""
    spec = tmp / "bind.json"
    spec.write_text(json.dumps([[str(a) if a else None, str(b)] for a, b in pairs]))
    r = subprocess.run([sys.executable, str(ROOT / "tests" / "bindcheck.py"), str(spec)], capture_output=True,
                       text=True, env=ENV, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


# Keras 2 calls that Keras 3 rejects, and what fix writes (K2T205 by value, K2T207, K2T208)
HEAD = "from tensorflow import keras\n\n\nclass Bias(keras.layers.Layer):\n    def build(self, input_shape):\n"
CASES = [
    # standalone Keras 2.0: add_weight(shape, initializer, name=None, ...): a tuple is the shape
    (HEAD + "        self.b = self.add_weight((input_shape[-1],), initializer='zeros', name='bias')\n",
     "        self.b = self.add_weight(shape=(input_shape[-1],), initializer='zeros', name='bias')\n"),
    (HEAD + "        self.w = self.add_weight('{}_W'.format(self.name), (3, 4))\n",
     "        self.w = self.add_weight(name='{}_W'.format(self.name), shape=(3, 4))\n"),
    (HEAD + "        self.w = self.add_weight(shape_of(input_shape), 'zeros', name='w')\n",
     "        self.w = self.add_weight(shape=shape_of(input_shape), initializer='zeros', name='w')\n"),
    ("from tensorflow import keras\n\n\ndef act(x):\n    return keras.activations.relu(x, alpha=0.1, max_value=20.0)\n",
     "    return keras.activations.relu(x, negative_slope=0.1, max_value=20.0)\n"),
    ("from tensorflow.keras.layers import LeakyReLU\n\nact = LeakyReLU(alpha=0.2)\n",
     "act = LeakyReLU(negative_slope=0.2)\n"),
    ("import tensorflow as tf\n\ncb = tf.keras.callbacks.TensorBoard(\n    log_dir='d',\n    batch_size=32,\n"
     "    write_grads=False,\n    embeddings_layer_names=None,\n    update_freq='epoch',\n)\n",
     "cb = keras.callbacks.TensorBoard(\n    log_dir='d',\n    update_freq='epoch',\n)\n"),
]


def test_rewrites_of_calls_keras3_rejects_compile_and_bind(tmp_path):
    pairs = []
    for i, (before, after) in enumerate(CASES):
        new, n = fix_source(before)
        assert n and after in new, new
        assert {f.code for f in lint_source(before, "m.py")[0]} & {"K2T205", "K2T207", "K2T208"}
        (a := tmp_path / f"before{i}.py").write_text(before)
        (b := tmp_path / f"after{i}.py").write_text(new)
        pairs.append((a, b))
    # before the rules: the add_weight rewrite repeated name= (compile fails), relu kept alpha=, ...
    got = bind(pairs, tmp_path)
    assert got["failures"] == [] and got["calls"] >= len(CASES), got


def test_add_weight_positional_that_would_repeat_a_keyword_is_left_alone():
    code = HEAD + "        self.w = self.add_weight(n, initializer='zeros', name='w', shape=(3,))\n"
    assert fix_source(code)[0].count("add_weight(n, ") == 1
    (f,) = [f for f in lint_source(code, "m.py")[0] if f.code == "K2T205"]
    assert not f.fixable and "would repeat a keyword" in f.message


def test_fix_keeps_on_tf_keras_a_call_that_would_not_bind():
    code = ("import tensorflow as tf\nfrom tf_keras.src import metrics as metrics_mod\n\n\n"
            "m = metrics_mod.Mean(name='loss', mesh=None)\ncb = tf.keras.callbacks.ProgbarLogger('steps')\n"
            "d = tf.keras.layers.Dense(3)\n")
    new, _, kept = fix_module(code)
    assert "from tf_keras.src import metrics as metrics_mod" in new and "tf.keras.callbacks.ProgbarLogger" in new
    assert "keras.layers.Dense(3)" in new and "tf.keras.layers.Dense" not in new
    assert any("K2T209 keras.metrics.Mean(...) has no argument mesh= in Keras 3" in k for k in kept), kept
    assert any("K2T209 keras.callbacks.ProgbarLogger(...) takes 0 positional arguments, 1 given" in k
               for k in kept), kept


SRC = FIXTURES / "src"
GENERATED = [("lambda_args.h5", SRC / "k2_zoo.py", None), ("lambda_loop.h5", SRC / "k2_zoo.py", "build_lambda_loop"),
             ("lambda_activation.h5", SRC / "k2_zoo.py", None), ("custom.h5", SRC / "k2_zoo.py", None),
             ("lambda_custom_objects.h5", SRC / "lrelu_model.py", None), ("k_attention.h5", SRC / "k_attention.py",
                                                                          None),
             ("weights_only.h5", SRC / "k2_zoo.py", "build_weights_only"), ("custom.h5", SRC / "renamed_scale.py",
                                                                              None)]
# the real files with Lambdas (../shared/corpus) and the sources tests/test_src.py converts them with
CORPUS = [("carnd_1560800/model.h5", SRC / "carnd_model.py", None), ("nnom/keras_mnist_model.h5",
                                                                     SRC / "nnom_model.py", None),
          ("nnom/keras_cifar10_model.h5", SRC / "nnom_model.py", None)]


def test_generated_modules_compile_and_bind(corpus, tmp_path):
    """The `<out>_k3.py` every --src conversion of the suite generates (tests/test_src.py converts them; conftest
    also binds every `*_k3.py` a test leaves in its tmp_path, at the end of the session)."""
    pairs = []
    cases = [(FIXTURES / "src_models" / f, s, b) for f, s, b in GENERATED] + [(corpus / f, s, b) for f, s, b in CORPUS]
    for i, (fixture, src, build_fn) in enumerate(cases):
        a = read_artifact(fixture, weights_only_ok=build_fn is not None)
        res = resolve_in_files(index_sources([src]), a.model_config, a.training_config, "m_k3", build_fn)
        assert not res.errors, [f.line() for f in res.errors]
        (out := tmp_path / f"{i}_{fixture.stem}_k3.py").write_text(res.k3_code)
        pairs.append((None, out))
    got = bind(pairs, tmp_path)
    assert got["failures"] == [] and got["calls"] > 10, got


@pytest.mark.parametrize("target,n,keywords,why", [
    ("keras.activations.relu", 1, ["negative_slope"], None),
    ("keras.activations.relu", 1, ["alpha"], "has no argument alpha="),
    ("keras.metrics.Mean", 0, ["name", "mesh"], "has no argument mesh="),
    ("keras.layers.Dense", 1, ["units"], "got multiple values for units"),
    ("keras.layers.Dense", 1, ["anything"], None),  # **kwargs: Layer checks them when it runs
    ("keras.callbacks.ProgbarLogger", 1, [], "takes 0 positional arguments, 1 given"),
])
def test_shipped_signatures(target, n, keywords, why):
    from k2to3.source.keras3api import binds

    assert binds(target, n, keywords) == why


def test_keras20_add_weight_in_a_src_layer_generates_a_module_that_binds(tmp_path):
    """The issue's case: a custom layer written for standalone Keras 2.0 (`add_weight(shape, initializer,
    name=...)`); the generated module had `add_weight(name=(n,), ..., name='gamma')` and convert ended in exit 4."""
    text = (SRC / "k2_zoo.py").read_text()
    old = ('self.add_weight(name="gamma", shape=(input_shape[-1],),\n'
           '                                     initializer=keras.initializers.Constant(self.init))')
    assert old in text
    (src := tmp_path / "zoo20.py").write_text(text.replace(old, "self.add_weight((input_shape[-1],), "
                                                            "keras.initializers.Constant(self.init), name='gamma')"))
    a = read_artifact(FIXTURES / "src_models" / "custom.h5")
    res = resolve_in_files(index_sources([src]), a.model_config, a.training_config, "m_k3")
    assert not res.errors, [f.line() for f in res.errors]
    assert "self.add_weight(shape=(input_shape[-1],), initializer=keras.initializers.Constant(self.init), " \
           "name='gamma')" in res.k3_code
    (out := tmp_path / "m_k3.py").write_text(res.k3_code)
    got = bind([(None, out)], tmp_path)
    assert got["failures"] == [] and got["calls"] >= 2, got
