"""Where a weights-only file's build search finds argument values without running anything (source/build_candidates.py):
math and numpy constants in module constants, constants imported from another --src file, parameters the build
never reads; and what a failed candidate's line says. Pure ast: no worker, no keras."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from k2to3.core.optable import lookup, translate
from k2to3.pipeline.build_search import _tried_text
from k2to3.source.build_candidates import find_builders
from k2to3.source.builder_sizes import build_methods, unread
from k2to3.source.extract import index_sources
from k2to3.source.static_values import eval_const, numeric_bindings, static

IMPORTS = "import math\nimport numpy as np\nfrom math import sqrt, pi as PI\n"


def _numeric() -> dict:
    out: dict = {}
    for s in ast.parse(IMPORTS).body:
        out.update(numeric_bindings(s))
    return out


@pytest.mark.parametrize("expr,value", [("np.pi / 4", 0.7853981633974483), ("-1 * np.pi / 4", -0.7853981633974483),
                                        ("math.sqrt(2)", 2 ** 0.5), ("sqrt(PI) ** 2", 3.141592653589793),
                                        ("np.e ** 2", 7.3890560989306495), ("(np.inf, SIZE * 2)", (float("inf"), 8)),
                                        ("math.floor(2.5)", 2)])
def test_math_and_numpy_constants_are_static(expr, value):
    node = ast.parse(expr, mode="eval").body
    assert static(node, {"SIZE"}, _numeric())
    assert eval_const(node, {"SIZE": 4}, _numeric()) == pytest.approx(value)


@pytest.mark.parametrize("expr", ["np.array([1])", "np.sqrt", "np.pi.real", "np.random.rand()", "math.sqrt(x=2)",
                                  "open('f')", "np.pi * n", "math.sqrt(*a)", "sqrt"])
def test_anything_else_is_not(expr):
    assert not static(ast.parse(expr, mode="eval").body, set(), _numeric())


def test_a_numpy_constant_is_a_module_constant_not_running_code(tmp_path):
    src = tmp_path / "net.py"
    src.write_text(IMPORTS + "upper_bound = np.pi / 4\nspread = math.sqrt(2) / 2\nbad = math.log(0)\n"
                   "import numpy.random as npr\nseeded = npr.pi if False else 1\nx = np.load('w.npy')\n")
    index = index_sources([src])
    assert index.defs["upper_bound"].kind == "constant" and index.defs["spread"].kind == "constant"
    assert {"bad", "x"} <= set(index.dynamic)  # math.log(0) raises: assigned by running code, not a crash


def _builders(tmp_path: Path, files: dict[str, str], groups=None, layers=()):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    index = index_sources([tmp_path / n for n in files])
    return {b.fn: b for b in find_builders(index, list(layers), None, groups=groups)}


NET = ("from keras.layers import Dense\nfrom keras.models import Sequential\n\n\n"
       "def build(hidden, activation):\n    m = Sequential()\n"
       "    m.add(Dense(hidden, input_dim=4, activation=activation))\n    return m\n")


@pytest.mark.parametrize("caller", [
    "from parameters import *\nfrom net import build\nbuild(HIDDEN, ACT)\n",
    "from parameters import HIDDEN, ACT as A\nfrom net import build\nbuild(HIDDEN, activation=A)\n",
    "import parameters as p\nfrom net import build\nbuild(p.HIDDEN, p.ACT)\n",
    "from net import build\nfrom parameters import *\nHIDDEN = HIDDEN * 2\nbuild(HIDDEN // 2, ACT)\n",
])
def test_constants_imported_from_another_src_file_give_call_site_values(tmp_path, caller):
    b = _builders(tmp_path, {"parameters.py": "HIDDEN = 12\nACT = 'tanh'\n", "net.py": NET, "main.py": caller})["build"]
    assert b.values == {"hidden": [12], "activation": ["tanh"]}


def test_relative_import_of_a_package_config(tmp_path):
    b = _builders(tmp_path, {"pkg/__init__.py": "", "pkg/config.py": "HIDDEN = 7\nACT = 'relu'\n", "pkg/net.py": NET,
                             "pkg/train.py": "from .config import *\nfrom .net import build\nbuild(HIDDEN, ACT)\n"})
    assert b["build"].values == {"hidden": [7], "activation": ["relu"]}
    assert b["build"].how["hidden"] == [(7, "HIDDEN of config.py (train.py:3)")]


AGENT = '''
class NN:
    def __init__(self, n_states, n_actions, batch_size, size_hidden, learning_rate, activation, env):
        self.learning_rate = learning_rate
        self.act = activation
        self.n_states = n_states
        self.batch_size = batch_size
        self.model = self._make_model(n_states, n_actions, size_hidden, env)

    def _make_model(self, n_states, n_actions, size_hidden, env):
        model = Sequential()
        model.add(Dense(size_hidden, input_dim=4, activation=self.act))
        model.add(Dense(n_actions + env.extra))
        model.compile(loss='mse', optimizer=SGD(lr=self.learning_rate))
        return model

    def predict(self, state):
        return self.model.predict(state.reshape(1, self.n_states[0]), batch_size=self.batch_size)
'''


def test_parameters_the_build_never_reads():
    cls = ast.parse(AGENT).body[0]
    methods = build_methods(cls, ["__init__"])
    assert set(methods) == {"__init__", "_make_model"}  # predict is not the build's
    read = {p: not unread(p, methods["__init__"], methods) for p in
            ("n_states", "n_actions", "batch_size", "size_hidden", "learning_rate", "activation", "env")}
    # stored for predict and passed to a parameter _make_model ignores: n_states, batch_size
    assert read == {"n_states": False, "n_actions": True, "batch_size": False, "size_hidden": True,
                    "learning_rate": True, "activation": True, "env": True}


def test_a_parameter_the_build_never_reads_is_tried_with_none(tmp_path):
    b = _builders(tmp_path, {"qnet.py": "from keras.layers import Dense\nfrom keras.models import Sequential\n"
                             "from keras.optimizers import SGD\n" + AGENT},
                  groups=[{"name": "dense", "shapes": [[4, 12], [12]]}, {"name": "dense_1", "shapes": [[12, 2], [2]]}])
    nn = b["NN"]
    assert nn.values["n_states"] == [None] and nn.values["batch_size"] == [None]
    assert nn.how["n_states"] == [(None, "as a stand-in: the build never reads it")]
    assert nn.missing == ["learning_rate", "activation", "env"]  # read by the build: never guessed


def test_a_failed_candidate_says_what_the_search_left_unset():
    tried = [{"fn": "get_actor", "build_args": {"args": [], "kwargs": {}}, "score": 0,
              "error": "ValueError: Exception encountered when calling layer \"tf.math.multiply\" (type TFOpLambda).",
              "unvalued": ["upper_bound is assigned by running code at Network.py:16"]}]
    assert _tried_text(tried, []) == (
        "get_actor(): upper_bound is assigned by running code at Network.py:16 (K2T906) and no value was found for "
        "it (it is not a size the weight shapes give), so the build failed: ValueError: Exception encountered when "
        "calling layer \"tf.math.multiply\" (type TFOpLambda).")


def test_tf1_keyword_spellings_translate():
    entry = lookup("reduce_mean")
    assert translate(entry, "x", {"axis": 1, "keep_dims": True}) == {"x": "x", "axis": 1, "keepdims": True}
    assert translate(entry, "x", {"reduction_indices": [1]})["axis"] == [1]


def test_a_callers_local_literals_give_call_site_values(tmp_path):
    """machine_translation_of_dates' compile_and_run: `Ty = 10`, `n_a = 32` set in the calling function, then
    create_model(Tx, Ty, n_a, ...) with Tx a module constant; a local set twice is not one value."""
    (tmp_path / "nmt.py").write_text(
        "from keras.layers import Dense, Input, LSTM\nfrom keras.models import Model\nTx = 30\n"
        "def create_model(Tx, Ty, n_a, n_s):\n    x = Input(shape=(Tx, 4))\n    h = LSTM(n_a)(x)\n"
        "    return Model(x, [Dense(n_s)(h) for _ in range(Ty)])\n"
        "def compile_and_run():\n    Ty = 10\n    n_a = 32\n    n_s = 1\n    n_s = 64\n"
        "    return create_model(Tx, Ty, n_a, n_s)\n")
    b = find_builders(index_sources([tmp_path / "nmt.py"]), [])[0]
    assert (b.values["Tx"], b.values["Ty"], b.values["n_a"]) == ([30], [10], [32])
    assert "n_s" not in b.values
