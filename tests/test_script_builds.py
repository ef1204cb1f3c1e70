"""A model a script builds at top level (source/script_builds.py): the statements sliced backwards from the saved
model, data reads left out, a size computed from data left a module name to bind (or a vocabulary's len() turned
into one), and nothing taken when what the model needs is data itself. The conversions of such scripts at parity
are in test_repo_builders.py (script_charrnn, script_vae)."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import FIXTURES

from k2to3.source.extract import index_sources
from k2to3.source.script_builds import script_builds, with_script_builds

REPOS = FIXTURES / "repos"


def _one(text: str, name: str = "train.py"):
    builds = script_builds(Path(name), text)
    assert len(builds) == 1, builds
    compile(builds[0].code, name, "exec")  # the function is Python that runs
    return builds[0]


def test_vae_example_is_sliced_from_its_data():
    b = _one((REPOS / "script_vae" / "vae_mlp.py").read_text(), "vae_mlp.py")
    assert b.model == "vae" and b.unbound == ("original_dim",)
    body = b.code.split("\n", 1)[1]
    assert "np.load" not in body and "x_train" not in body and "parse_args" not in body  # data and script parts
    assert "vae.compile" not in body and "fit(" not in body and "summary" not in body
    assert body.rstrip().endswith("return vae")
    assert b.label == "the top-level statements of vae_mlp.py:26-46 that build vae"


def test_a_counted_vocabulary_becomes_a_size():
    b = _one((REPOS / "script_charrnn" / "Name_Generator.py").read_text(), "Name_Generator.py")
    assert b.unbound == ("n_vocab_tokens",)
    assert b.code.startswith("n_vocab_tokens = len(vocab_tokens)")
    assert "L.Embedding(n_vocab_tokens, 12)" in b.code and "len(vocab_tokens)" not in b.code.split("\n", 1)[1]


def test_loop_and_augmented_sizes_are_taken_in_order():
    text = """from keras.layers import Conv2D, Input
from keras.models import Model
filters = 8
inputs = Input(shape=(16, 16, 1))
x = inputs
for i in range(2):
    filters *= 2
    x = Conv2D(filters, 3)(x)
net = Model(inputs, x)
net.save_weights('w.h5')
"""
    b = _one(text)
    assert b.unbound == ()
    assert [ast.unparse(s) for s in ast.parse(b.code).body[0].body][:2] == ["filters = 8",  # type: ignore[attr-defined]
                                                                           "inputs = Input(shape=(16, 16, 1))"]


def test_a_model_that_needs_the_data_itself_is_not_a_build():
    text = """import numpy as np
from keras.layers import Dense
from keras.models import Sequential
x = np.load('x.npy')
model = Sequential([Dense(4, input_shape=x.shape[1:])])
model.set_weights(x)
model.save_weights('w.h5')
"""
    assert script_builds(Path("t.py"), text) == []  # set_weights(x) reads the array: nothing a weight shape gives


def test_function_builders_are_untouched_and_the_index_is_read_again():
    index = index_sources([REPOS / "ddpg_globals" / "ddpg.py"])
    again, found = with_script_builds(index)
    assert found == [] and again is index  # get_actor() is the builder; the script only calls it
    index = index_sources([REPOS / "script_vae" / "vae_mlp.py"])
    again, found = with_script_builds(index)
    assert [b.fn for b in found] == ["_k2to3_script_vae"] and "_k2to3_script_vae" in again.defs
    assert "sampling" in again.defs and "original_dim" in again.dynamic
    assert with_script_builds(again)[0] is again  # read once


def test_an_alias_of_the_graph_is_taken_not_bound():
    """washcycle/minimal_vae's CNN VAE: `x = inputs` after an Input whose shape comes from the data is the graph under
    another name, not a size: the slice goes on to `inputs` and binds only `image_size`."""
    text = """from keras.datasets import mnist
from keras.layers import Conv2D, Dense, Flatten, Input
from keras.models import Model
(x_train, y_train), _ = mnist.load_data()
image_size = x_train.shape[1]
input_shape = (image_size, image_size, 1)
inputs = Input(shape=input_shape)
x = inputs
for i in range(2):
    x = Conv2D(8, 3, strides=2)(x)
x = Dense(4)(Flatten()(x))
encoder = Model(inputs, x)
encoder.save_weights('e.h5')
"""
    b = _one(text)
    assert b.unbound == ("image_size",) and "    x = inputs\n" in b.code and "    inputs = Input(" in b.code
