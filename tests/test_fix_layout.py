"""`k2to3 fix` diffs a reviewer accepts (before/after, pyupgrade style): the call keeps its layout and comments,
positionals stay positional where keras.ops takes the same parameter at that position
(rules/keras3_ops_signatures.json), and only defaults that differ from keras.ops's own are written."""

from __future__ import annotations

import ast

import libcst as cst
import pytest
from libcst.codemod import CodemodCommand, CodemodContext

from k2to3.source.fix import FixCommand, fix_module, fix_source

CASES = [
    # layout and comments: a multi-line call stays multi-line, comments and the trailing comma stay
    ("tf.where(\n    cond,  # mask\n    x,\n    y,\n)", "keras.ops.where(\n    cond,  # mask\n    x,\n    y,\n)"),
    ("tf.reduce_sum(\n    x,\n    axis=1,\n    name='s',\n)", "keras.ops.sum(\n    x,\n    axis=1,\n)"),
    ("K.concatenate(\n    [a, b]  # two\n)", "keras.ops.concatenate(\n    [a, b], axis=-1  # two\n)"),
    ("tf.reduce_sum(x,   1)", "keras.ops.sum(x,   1)"),
    # positionals where both signatures agree
    ("tf.math.greater(labels, cutoff)", "keras.ops.greater(labels, cutoff)"),
    ("tf.concat([a, b], -1)", "keras.ops.concatenate([a, b], -1)"),
    ("tf.clip_by_value(x, 0.0, 1.0)", "keras.ops.clip(x, 0.0, 1.0)"),
    ("tf.reduce_max(x, [1, 2], True)", "keras.ops.max(x, [1, 2], True)"),
    ("tf.split(x, 2, 1)", "keras.ops.split(x, 2, 1)"),
    ("tf.pad(x, [[0, 1]], 'REFLECT')", "keras.ops.pad(x, [[0, 1]], 'reflect')"),  # value translated, same place
    ("tf.split(x, [2, 4], 1)", "keras.ops.split(x, [2], 1)"),
    # keywords stay keywords (renamed where the names differ); name= is dropped
    ("tf.reduce_mean(input_tensor=x, axis=1)", "keras.ops.mean(x, axis=1)"),
    ("tf.reduce_mean(x, axis=1, keepdims=True)", "keras.ops.mean(x, axis=1, keepdims=True)"),
    ("tf.reduce_sum(x, 1, name='s')", "keras.ops.sum(x, 1)"),
    ("tf.math.l2_normalize(x, axis=-1, epsilon=1e-12)", "keras.ops.normalize(x, axis=-1, epsilon=1e-06)"),
    # defaults: only those that differ from keras.ops's
    ("tf.reduce_sum(x)", "keras.ops.sum(x)"),
    ("tf.nn.gelu(x)", "keras.ops.gelu(x, approximate=False)"),
    ("K.argmax(x)", "keras.ops.argmax(x, axis=-1)"),
    ("K.sum(x, keepdims=False)", "keras.ops.sum(x, keepdims=False)"),  # the author's explicit value stays
]


@pytest.mark.parametrize("before,after", CASES)
def test_fix_layout(before, after):
    src = f"import tensorflow as tf\nfrom tensorflow.keras import backend as K\ny = {before}\nz = K.shape(y)\n"
    out, n = fix_source(src)
    assert n >= 1
    assert out.split("y = ", 1)[1].split("\nz = ")[0] == after
    ast.parse(out)
    assert fix_source(out) == (out, 0)


def test_op_table_first_argument_is_keras_first_positional():
    """fix writes the first argument positionally: it must be keras.ops's first positional parameter."""
    from k2to3.core import optable as ops
    from k2to3.source.keras3api import binds, exists, positional

    for e in ops.table():
        if e.keras.startswith("k2to3."):
            continue
        assert exists(e.target), e.name
        if e.namespace == "ops":
            assert (positional(e.target) or ("",))[0] == e.first, e.name
        else:  # keras.random.normal(shape, ...): the first argument binds positionally, and by its name
            assert binds(e.target, 1, []) is None and binds(e.target, 0, [e.first]) is None, e.name


class _Textbook(CodemodCommand):
    """The same transformer through libcst's own codemod pipeline (a deep copy, then AddImportsVisitor and
    RemoveImportsVisitor over the whole tree): what fix_module's shortcuts must agree with."""

    def transform_module_impl(self, tree: cst.Module) -> cst.Module:
        self.fix = FixCommand(self.context)
        return tree.visit(self.fix)


HEADS = [
    "",
    '"""Doc."""\n',
    '"""Doc."""\nimport tensorflow as tf\n',
    "import tensorflow as tf\n",
    "__strict__ = True\nimport tensorflow as tf\n",
    "from __future__ import annotations\n# a comment\nimport os\nimport tensorflow as tf\n",
    "import os\n\n\n# leading comment of the first statement\nimport tensorflow as tf\n",
    "import tensorflow as tf\nimport keras\n",
    "import tensorflow as tf; import os\n",
    "def f():\n    import tensorflow as tf\n    return tf.reduce_sum(1)\n",
]
TAILS = ["", "y = tf.reduce_sum(x)\n", "\n# c\nclass A:\n    def f(self):\n        return tf.keras.layers.Dense(2)\n",
         "if True:\n    y = tf.nn.relu(x)\nfrom tensorflow.keras import backend as K\nz = K.sum(y)\n"]


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("tail", TAILS)
def test_fix_module_agrees_with_libcst_textbook_pipeline(head, tail):
    code = head + tail
    cmd = _Textbook(CodemodContext(filename="m.py"))
    want = cmd.transform_module(cst.parse_module(code)).code
    new, n, _ = fix_module(code, "m.py")
    assert new == want and n == cmd.fix.changed
