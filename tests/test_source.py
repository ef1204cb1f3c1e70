"""The source pass: lint findings (every import style), fix rewrites, suppression, formats, notebooks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from k2to3.core.rules import source_rules
from k2to3.source.files import Config
from k2to3.source.fix import fix_source
from k2to3.source.lint import lint_source
from k2to3.source.run import lint_paths


def codes(src: str) -> list[str]:
    return [f.code for f in lint_source(textwrap.dedent(src), "t.py")[0]]


@pytest.mark.parametrize("imports,call", [
    ("import tensorflow as tf", "tf.reduce_mean(x, 1)"),
    ("import tensorflow", "tensorflow.reduce_mean(x, 1)"),
    ("import tensorflow as tf", "tf.math.reduce_mean(x, axis=1)"),
    ("from tensorflow.keras import backend as K", "K.mean(x, 1)"),
    ("import keras.backend as K", "K.mean(x, 1)"),
    ("from keras import backend", "backend.mean(x, 1)"),
    ("from tensorflow.python.keras import backend as K", "K.mean(x, 1)"),
    ("import tensorflow.compat.v1 as tf1", "tf1.reduce_mean(x, 1)"),
])
def test_import_styles_are_resolved(imports, call):
    found = codes(f"{imports}\ndef f(x):\n    return {call}\n")
    assert found and found[-1] in ("K2T101", "K2T201"), found


def test_findings_cover_the_rule_families():
    src = """
    import tensorflow as tf
    from tensorflow import keras
    from tensorflow.keras import backend as K
    from tensorflow.keras.layers import Lambda

    class MyLayer(keras.layers.Layer):
        def call(self, x):
            return tf.nn.relu(x) + tf.strings.length(x)

    def build(x):
        s = tf.compat.v1.Session()
        f = K.function([x], [x])
        e = K.epsilon()
        outs = [Lambda(lambda t: t[:, i])(x) for i in range(2)]
        for i in range(2):
            outs.append(Lambda(lambda t: t[:, i])(x))
        y = Lambda(my_fn, output_shape=(3,))(x)
        z = tf.keras.layers.Dense(2)(x)
        w = tf.math.cumsum(x, axis=1, exclusive=True)
        return K.relu(x, alpha=0.1)
    """
    found = lint_source(textwrap.dedent(src), "t.py")[0]
    got = {f.code for f in found}
    assert {"K2T101", "K2T102", "K2T103", "K2T202", "K2T203", "K2T204", "K2T301", "K2T302", "K2T501"} <= got
    inside = [f for f in found if "inside MyLayer.call" in f.message]
    assert {f.code for f in inside} == {"K2T101", "K2T103"}
    assert all(f.line > 0 and f.col > 0 for f in found)


def test_noqa_and_file_level_suppression():
    src = "import tensorflow as tf\na = tf.reduce_mean(x)  # noqa: K2T101\nb = tf.reduce_sum(x)  # noqa\n" \
          "c = tf.reduce_max(x)  # noqa: K2T999\n"
    found, supp = lint_source(src, "t.py")
    assert [f.line for f in found] == [4] and supp == 2
    assert lint_source("# k2to3: noqa\nimport tensorflow as tf\ntf.reduce_mean(x)\n", "t.py")[0] == []


def test_fix_rewrites_with_explicit_keywords_and_defaults():
    src = textwrap.dedent("""\
        import tensorflow as tf
        from tensorflow.keras import backend as K


        def f(x, y):
            # a comment that must survive
            a = tf.reduce_mean(x, 1)  # trailing comment
            b = K.concatenate([x, y])
            c = tf.nn.gelu(x)
            d = K.epsilon()
            e = tf.split(x, [2, 4], axis=-1)
            return a, b, c, d, e
        """)
    out, n = fix_source(src)
    assert n == 6  # five calls and the backend import
    assert "keras.ops.mean(x, 1)" in out  # positional kept (same position in keras.ops.mean), no keepdims=False
    assert "keras.ops.concatenate([x, y], axis=-1)" in out
    assert "keras.ops.gelu(x, approximate=False)" in out
    assert "keras.config.epsilon()" in out
    assert "keras.ops.split(x, [2], axis=-1)" in out
    assert "# a comment that must survive" in out and "# trailing comment" in out
    assert "import tensorflow" not in out and "backend as K" not in out and "import keras" in out
    again, n2 = fix_source(out)
    assert n2 == 0 and again == out


def test_fix_leaves_unsafe_calls_alone():
    src = "import tensorflow as tf\ny = tf.math.cumsum(x, axis=1, exclusive=True)\nz = tf.split(x, sizes, 1)\n"
    out, n = fix_source(src)
    assert n == 0 and out == src
    assert codes(src) == ["K2T102", "K2T102"]


def test_fix_tf_keras_namespace():
    src = "from tensorflow import keras\nfrom tensorflow.keras import layers\nimport tensorflow as tf\n" \
          "m = tf.keras.Sequential([layers.Dense(2)])\n"
    out, _ = fix_source(src)
    assert "from keras import layers" in out and "keras.Sequential" in out
    assert "tensorflow" not in out


def test_notebook(tmp_path):
    nb = {"cells": [{"cell_type": "markdown", "source": ["# hi"]},
                    {"cell_type": "code", "source": ["%matplotlib inline\n", "import tensorflow as tf\n",
                                                     "y = tf.reduce_sum(x)\n"]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    p = tmp_path / "n.ipynb"
    p.write_text(json.dumps(nb))
    res = lint_paths([tmp_path], Config())
    assert [(f.code, f.cell, f.line) for f in res.findings] == [("K2T101", 1, 3)]


def test_config_select_ignore_exclude(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.k2to3]\nignore = ["K2T103"]\nexclude = ["skip_*.py"]\n')
    (tmp_path / "a.py").write_text("import tensorflow as tf\ntf.reduce_sum(x)\ntf.strings.length(x)\n")
    (tmp_path / "skip_b.py").write_text("import tensorflow as tf\ntf.reduce_sum(x)\n")
    from k2to3.source.files import load_config

    cfg = load_config(tmp_path)
    res = lint_paths([tmp_path], cfg)
    assert [f.code for f in res.findings] == ["K2T101"] and res.files == 1


def test_source_rules_documented():
    for r in source_rules():
        assert r.what and r.why and r.before and r.after and r.fix, r.code


def k2to3(*args, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "k2to3", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, **(env or {})}, timeout=300)


def test_cli_formats_and_exit_codes(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("import tensorflow as tf\ny = tf.reduce_sum(x)\n")
    r = k2to3("lint", str(p), "--no-cache")
    assert r.returncode == 1 and f"{p}:2:5: K2T101" in r.stdout
    sarif = json.loads(k2to3("lint", str(p), "--format", "sarif", "--no-cache").stdout)
    assert sarif["runs"][0]["results"][0]["ruleId"] == "K2T101"
    assert sarif["runs"][0]["results"][0]["fixes"]
    gh = k2to3("lint", str(p), "--format", "github", "--no-cache").stdout
    assert gh.startswith(f"::warning file={p},line=2,col=5,title=K2T101::")
    js = json.loads(k2to3("lint", str(p), "--format", "json", "--no-cache").stdout)
    assert js["findings"][0]["fixable"] is True
    assert k2to3("fix", str(p)).returncode == 1 and "reduce_sum" in p.read_text()  # dry run
    assert "+y = keras.ops.sum(x" in k2to3("fix", str(p), "--diff").stdout
    assert k2to3("fix", str(p), "--write").returncode == 0
    assert k2to3("lint", str(p), "--no-cache").returncode == 0
    clean = tmp_path / "clean.py"
    clean.write_text("import keras\n")
    assert k2to3("lint", str(clean)).returncode == 0
    r = k2to3("lint", str(tmp_path / "missing.py"))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_lint_path_imports_no_ml_framework(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("import tensorflow as tf\nfrom tensorflow.keras import backend as K\ny = K.mean(tf.abs(x))\n")
    code = ("import sys, runpy; sys.argv = ['k2to3', 'lint', %r, '--no-cache']\n"
            "try:\n    runpy.run_module('k2to3', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "bad = [m for m in ('keras', 'tensorflow', 'torch', 'jax', 'tf_keras') if m in sys.modules]\n"
            "print('IMPORTED', bad)\n").replace("%r", repr(str(p)))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "IMPORTED []" in r.stdout, r.stdout + r.stderr



def test_add_weight_positionals_become_keras2_keywords():
    src = textwrap.dedent("""
        import tensorflow as tf
        class Scale(tf.keras.layers.Layer):
            def build(self, input_shape):
                self.w = self.add_weight("w", (input_shape[-1],), None, "ones")  # keep me
                self.b = self.add_weight(name="b", shape=(1,))
                other.add_weight("x", (1,))
    """)
    assert codes(src).count("K2T205") == 1
    out, _ = fix_source(src)
    assert 'self.add_weight(name="w", shape=(input_shape[-1],), dtype=None, initializer="ones")  # keep me' in out
    assert 'other.add_weight("x", (1,))' in out and fix_source(out) == (out, 0)


def test_attribute_uses_ignore_strings_comments_and_imports():
    """fix skips libcst's unused-import analysis only for names still used as `name.attr` in code."""
    from k2to3.source.fiximports import attribute_uses as _attribute_uses

    assert _attribute_uses("import tensorflow as tf\nx = tf.zeros(3)\n", {"tf"}) == {"tf"}
    assert _attribute_uses("import tensorflow as tf\n# tf.zeros\ns = 'tf.x'\ny = a.tf.b\n", {"tf"}) == set()
    assert _attribute_uses("import tensorflow.keras\nfrom tensorflow.keras import layers\n", {"tensorflow"}) == set()
    assert _attribute_uses("import tensorflow\nx = (1,\n  tensorflow.nn)\n", {"tensorflow"}) == {"tensorflow"}
    assert _attribute_uses("import tensorflow as tf; y = tf.ones(1)\n", {"tf"}) == {"tf"}


def test_fix_still_drops_a_tf_import_it_made_unused():
    from k2to3.source.fix import fix_source

    new, n = fix_source("import tensorflow as tf\n\n\ndef f(x):\n    return tf.reduce_mean(x, 1)\n")
    assert n and "import tensorflow" not in new and "keras.ops.mean(x, 1)" in new
    kept, _ = fix_source("import tensorflow as tf\n\n\ndef f(x):\n    return tf.reduce_mean(x, 1) + tf.foo(x)\n")
    assert "import tensorflow as tf" in kept


def test_fix_write_keeps_mode_and_leaves_no_temporary(tmp_path):
    """`fix --write` replaces a file through a temporary name; the script keeps its executable bit."""
    p = tmp_path / "train.py"
    p.write_text("#!/usr/bin/env python\nimport tensorflow as tf\ny = tf.reduce_sum(x)\n")
    p.chmod(0o755)
    assert k2to3("fix", str(p), "--write").returncode == 0
    assert "keras.ops.sum(" in p.read_text()
    assert p.stat().st_mode & 0o777 == 0o755
    assert sorted(q.name for q in tmp_path.iterdir()) == ["train.py"]
    import k2to3 as api

    q = tmp_path / "api.py"
    q.write_text("import tensorflow as tf\ny = tf.reduce_sum(x)\n")
    q.chmod(0o750)
    assert api.fix(q, write=True).written and q.stat().st_mode & 0o777 == 0o750
    assert sorted(x.name for x in tmp_path.iterdir()) == ["api.py", "train.py"]
