"""`convert --src`: Lambda layers, custom objects, weights-only files, .keras archives and SavedModels, rebuilt
from the model's source (never run) and verified on every backend against the Keras 2 output.

Fixtures: tests/fixtures/make_src_fixtures.py (tf_keras writes them from tests/fixtures/src/k2_zoo.py); the
CarND and nnom sources (tests/fixtures/src/) are written for the tests from ../shared/corpus/README.md."""

from __future__ import annotations

import ast
import base64
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest
from conftest import FIXTURES, record

from k2to3.core.options import ConvertOptions as Options
from k2to3.errors import InputError, NotPortable
from k2to3.formats.artifact import read_artifact
from k2to3.pipeline.convert import convert
from k2to3.pipeline.report import NotPortableReport
from k2to3.source.extract import index_sources
from k2to3.source.hoist import resolve_sources
from k2to3.source.lint import lint_source

SRC = FIXTURES / "src"
MODELS = FIXTURES / "src_models"
ZOO = SRC / "k2_zoo.py"


def _resolve(h5: str, *srcs: Path, build_fn: str | None = None, module: str = "m_k3"):
    a = read_artifact(MODELS / h5, weights_only_ok=build_fn is not None)
    return resolve_sources(index_sources(list(srcs)), a.model_config, a.training_config, module, build_fn)


def _write(tmp_path: Path, name: str, code: str) -> Path:
    p = tmp_path / name
    p.write_text(code)
    return p


# -- extraction and matching (no backend) ---------------------------------------------------------------
def test_top_level_is_never_run(tmp_path):
    marker = tmp_path / "ran"
    src = _write(tmp_path, "train.py", f"""
import tensorflow as tf
from tensorflow.keras import layers
open({str(marker)!r}, "w").write("top level ran")
SCALE = 0.5
def scale_shift(x, scale, shift):
    return x * scale + shift
def build():
    h = layers.Lambda(scale_shift, output_shape=lambda s: s, arguments={{"scale": 1.5, "shift": -0.25}},
                      name="affine")
    return layers.Lambda(lambda t: tf.reduce_mean(t, axis=-1, keepdims=True) * SCALE)
raise SystemExit("a training script")
""")
    res = _resolve("lambda_args.h5", src)
    assert not res.errors, [f.line() for f in res.errors]
    assert not marker.exists()
    assert set(res.lambdas) == {"affine", "lambda"}
    assert res.lambdas["affine"] == {"function": "scale_shift", "arguments": {"scale": 1.5, "shift": -0.25},
                                     "source": f"{src}:9", "matched_by": "name="}
    assert res.lambdas["lambda"]["matched_by"].startswith("the only compatible call")


def test_generated_modules_are_portable_and_registered():
    res = _resolve("lambda_args.h5", ZOO, build_fn="build_lambda_args")
    assert not res.errors
    k3 = res.k3_code
    assert "tensorflow" not in k3 and "keras.ops.mean(t, axis=-1, keepdims=True)" in k3
    assert "register_keras_serializable(package='m_k3'" in k3
    assert lint_source(k3, "m_k3.py", prefilter=False)[0] == []
    names = {n.name for n in ast.parse(k3).body if isinstance(n, ast.FunctionDef)}
    assert {"scale_shift", "lambda_fn"} <= names and "build_lambda_args" not in names  # only what is needed
    assert "np.load" not in k3 and "fit(" not in k3
    k2 = res.k2_code  # the Keras 2 reference module: the code as written, keras imports -> tf_keras
    assert "tf.reduce_mean(t, axis=-1, keepdims=True)" in k2 and "tf_keras" in k2 and "tf = _K2TO3_TF" in k2


def test_lambda_order_scope_and_ambiguity():
    # Two build functions in one file each make inline Lambdas: without a hint k2to3 refuses to guess...
    res = _resolve("lambda_loop.h5", ZOO)
    (first, *_) = res.errors
    assert first.code == "K2T901" and "k2_zoo.py:36" in first.message and "FILE:FUNCTION" in (first.fix or "")
    # ...and FILE:FUNCTION says which function built the model.
    res = _resolve("lambda_loop.h5", ZOO, build_fn="build_lambda_loop")
    assert not res.errors
    assert {lam["arguments"]["i"] for lam in res.lambdas.values()} == {2}  # the file's closure: late binding
    warn = [f for f in res.findings if f.code == "K2T905"]
    assert len(warn) == 3 and "i=2" in warn[0].message


def test_lambda_activation_and_named_function_and_class_and_loss():
    res = _resolve("lambda_activation.h5", ZOO)
    assert not res.errors and res.activations == {("hidden", "activation"): "hidden_fn"}
    assert res.functions == {"swish_k2": "swish_k2"}
    res = _resolve("custom.h5", ZOO)
    assert not res.errors and res.classes == {"ScaleLayer": "ScaleLayer"} and res.functions == {
        "weighted_mse": "weighted_mse", "abs_err": "abs_err"}
    assert "keras.ops.relu6(y)" in res.k3_code and "from keras import layers" in res.k3_code
    kinds = {o["name"]: o["kind"] for o in res.objects}
    assert kinds == {"ScaleLayer": "class", "weighted_mse": "loss", "abs_err": "metrics"}


def test_missing_definitions_are_precise(tmp_path):
    src = _write(tmp_path, "m.py", """
import numpy as np
from tensorflow.keras import layers
SCALE = np.load("scale.npy")
def build():
    return layers.Lambda(lambda t: t * SCALE, name="affine")
""")
    a = read_artifact(MODELS / "lambda_args.h5")
    res = resolve_sources(index_sources([src]), a.model_config, None, "m_k3")
    msgs = [f.line() for f in res.errors]
    assert any("K2T901 layer 'lambda'" in m and "no Lambda layer" in m for m in msgs), msgs
    src2 = _write(tmp_path, "m2.py", """
import numpy as np
from tensorflow.keras import layers
SCALE = np.load("scale.npy")
def build():
    layers.Lambda(lambda t: t * SCALE, name="lambda")
    layers.Lambda(lambda t: t, output_shape=lambda s: s, arguments={"scale": 1, "shift": 2}, name="affine")
""")
    res = resolve_sources(index_sources([src2]), a.model_config, None, "m_k3")
    (err,) = res.errors
    assert err.code == "K2T906" and "'SCALE'" in err.message and "m2.py:4" in err.message


def test_bad_src_arguments(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        convert(Options(src=MODELS / "lambda_args.h5", output=tmp_path / "m.keras", sources=("nope.py",)))
    # a file that does not parse is skipped (tests/test_py2_source.py); the model here needs what it would hold
    bad = _write(tmp_path, "bad.py", "def f(:\n")
    with pytest.raises(NotPortable, match=r"bad\.py could not be parsed"):
        convert(Options(src=MODELS / "lambda_args.h5", output=tmp_path / "m.keras", sources=(str(bad),)))
    assert not (tmp_path / "m.keras").exists() and not (tmp_path / "m_k3.py").exists()


def test_weights_only_needs_a_build_function(tmp_path):
    with pytest.raises(NotPortable, match="weights-only") as exc:
        convert(Options(src=MODELS / "weights_only.h5", output=tmp_path / "m.keras"))
    assert "--src module.py:build_fn" in exc.value.line()
    with pytest.raises(NotPortableReport, match="K2T906 build function 'nope'"):
        convert(Options(src=MODELS / "weights_only.h5", output=tmp_path / "m.keras", sources=(f"{ZOO}:nope",)))


def test_archive_with_lambda_stops_with_a_message(tmp_path):
    with pytest.raises(NotPortable, match=r"Lambda layers .*\(affine, lambda\) in a keras archive"):
        convert(Options(src=MODELS / "archive_lambda.keras", output=tmp_path / "m.keras"))
    assert not list(tmp_path.iterdir())


# -- end to end: convert, verify on tensorflow, torch and jax -------------------------------------------
def _inputs_of(name: str, tmp_path: Path) -> tuple[Path, list[np.ndarray]]:
    with np.load(MODELS / f"{name}.expected.npz") as z:
        ins = {k: z[k] for k in z.files if k.startswith("in")}
        outs = [z[f"out{i}"] for i in range(sum(k.startswith("out") for k in z.files))]
    path = tmp_path / "inputs.npz"
    np.savez(path, **ins)
    return path, outs


def _check(report: dict, reference_from: str | None = None) -> None:
    assert report["verdict"] == "parity", json.dumps(report["backends"], indent=1)[:3000]
    assert report["reference"]["kind"] == "keras2-tf_keras", report["reference"]
    if reference_from:
        assert report["reference"]["from"] == reference_from
    assert report["weight_hashes_agree"]
    assert report["ledger"]["tensors_restored"] == report["ledger"]["tensors_expected"]


SRC_CASES = [  # (fixture, --src, expected reference)
    ("lambda_args.h5", f"{ZOO}", "the --src definitions as written"),
    ("lambda_loop.h5", f"{ZOO}:build_lambda_loop", "the --src definitions as written"),
    ("lambda_activation.h5", f"{ZOO}", "the --src definitions as written"),
    ("custom.h5", f"{ZOO}", "the --src definitions as written"),
    ("lambda_custom_objects.h5", f"{SRC / 'lrelu_model.py'}", "the --src definitions as written"),
    ("k_attention.h5", f"{SRC / 'k_attention.py'}", "the --src definitions as written"),
    ("weights_only.h5", f"{ZOO}:build_weights_only", "the --src build function"),
    ("archive.keras", None, "the file re-saved as HDF5 by tf_keras"),
    ("savedmodel", None, "the file re-saved as HDF5 by tf_keras"),
]


@pytest.mark.slow
@pytest.mark.parametrize("fixture,src,ref", SRC_CASES, ids=[c[0] for c in SRC_CASES])
def test_src_fixture_converts_with_parity(fixture, src, ref, pool, tmp_path):
    """Parity with the Keras 2 reference, and the Keras 2 model as it was built (its live outputs, saved by
    the fixture script before saving) agrees too."""
    name = fixture.split(".")[0]
    inputs, live = _inputs_of(name, tmp_path)
    out = tmp_path / "model.keras"
    report = convert(Options(src=MODELS / fixture, output=out, inputs=inputs,
                             sources=(src,) if src else ()), pool=pool)
    record(f"src:{fixture}", report)
    _check(report, ref)
    for b in ("tensorflow", "torch", "jax"):
        assert report["backends"][b]["status"] == "parity"
    assert out.exists() and (tmp_path / "model_k3.py").exists() == bool(src)
    got = _run_saved(out, tmp_path, "jax", inputs)  # a fresh interpreter: `import model_k3`, safe_mode=True
    for g, e in zip(got, live):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def _run_saved(out: Path, where: Path, backend: str, inputs: Path) -> list[np.ndarray]:
    code = ("import sys, numpy as np, keras\n"
            "sys.path.insert(0, sys.argv[1])\n"
            "try:\n    import model_k3\nexcept ImportError:\n    pass\n"
            "m = keras.saving.load_model(sys.argv[2], safe_mode=True)\n"
            "z = np.load(sys.argv[3]); xs = [z[f'in{i}'] for i in range(len(z.files))]\n"
            "y = m.predict(xs[0] if len(xs) == 1 else xs, verbose=0)\n"
            "ys = y if isinstance(y, list) else [y]\n"
            "np.savez(sys.argv[4], *[np.asarray(v) for v in ys])\n")
    res = where / "saved_out.npz"
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3", "JAX_PLATFORMS": "cpu"}
    r = subprocess.run([sys.executable, "-c", code, str(where), str(out), str(inputs), str(res)],
                       capture_output=True, text=True, env=env, cwd=where)
    assert r.returncode == 0, r.stderr[-2000:]
    with np.load(res) as z:
        return [z[f"arr_{i}"] for i in range(len(z.files))]


@pytest.mark.slow
def test_custom_loss_is_restored_in_the_compile_config(pool, tmp_path):
    out = tmp_path / "custom.keras"
    convert(Options(src=MODELS / "custom.h5", output=out, sources=(str(ZOO),)), pool=pool)
    with zipfile.ZipFile(out) as z:
        cfg = json.loads(z.read("config.json"))
    assert cfg["compile_config"]["loss"]["config"] == "custom_k3>weighted_mse"
    assert "custom_k3>abs_err" in json.dumps(cfg["compile_config"]["metrics"])
    layer = next(x for x in cfg["config"]["layers"] if x["class_name"] == "ScaleLayer")
    assert layer["registered_name"] == "custom_k3>ScaleLayer" and layer["config"]["init"] == 0.7


@pytest.mark.slow
def test_trusted_bytecode_reference_agrees_with_the_source(pool, tmp_path):
    """With --trust-bytecode the reference is the file's own Lambdas (this Python wrote them): the functions
    k2to3 matched from the source compute the same thing."""
    for fixture, src in (("lambda_args.h5", str(ZOO)), ("lambda_loop.h5", f"{ZOO}:build_lambda_loop")):
        report = convert(Options(src=MODELS / fixture, output=tmp_path / f"{fixture}.keras", sources=(src,),
                                 trust_bytecode=True), pool=pool)
        _check(report, "the file's Lambda bytecode (--trust-bytecode)")
        info = [f["message"] for f in report["findings"] if f["code"] == "K2T901"]
        assert info and "references" in info[0]


CORPUS_CASES = [("carnd_1560800/model.h5", "carnd_model.py"), ("nnom/keras_mnist_model.h5", "nnom_model.py"),
                ("nnom/keras_cifar10_model.h5", "nnom_model.py")]


@pytest.mark.slow
@pytest.mark.parametrize("rel,src", CORPUS_CASES, ids=[c[0] for c in CORPUS_CASES])
def test_corpus_lambda_files_convert_with_source(rel, src, corpus, pool, tmp_path):
    """The real files' Lambdas hold bytecode of an old Python; the reference is tf_keras running the
    source as written (the TF1 name tf.fake_quant_with_min_max_vars resolved via tf.compat.v1)."""
    inputs = None
    if "nnom" in rel:  # nnom's Lambdas quantize to integer steps in [-128, 127]: N(0, 1) noise gives the same
        # output for every row (parity that proves nothing). Small integer pixels give input-dependent outputs
        # on both files (8-bit values 0..127 saturate the cifar10 file to one output).
        inputs = tmp_path / "ints.npz"
        np.savez(inputs, in0=np.random.default_rng(5).integers(0, 8, (8, 28, 28, 1)).astype("float32"))
    report = convert(Options(src=corpus / rel, output=tmp_path / "m.keras", sources=(str(SRC / src),),
                             inputs=inputs), pool=pool)
    record(f"src:{rel}", report)
    _check(report, "the --src definitions as written")
    spread = report["backends"]["tensorflow"]["outputs"][0]["ref_batch_spread"]
    assert spread > 1e-3, spread  # the outputs depend on the input (CarND's steering angles spread 2.5e-3)
    lambdas = [o for o in report["source"]["objects"] if o["kind"] == "lambda function"]
    assert lambdas and all(o["source"].startswith(str(SRC / src)) for o in lambdas)
    n_lambda = sum(1 for f in report["findings"] if f["code"] == "K2T907")
    assert n_lambda == (1 if "carnd" in rel else 13)


# -- bytecode is never unmarshalled without the trust flag ----------------------------------------------
SITECUSTOMIZE = """
import os, sys
_payload = bytes.fromhex(os.environ["K2TO3_PAYLOAD_HEX"])
def _hook(event, args):
    if event == "marshal.loads" and args and bytes(args[0]) == _payload:
        with open(os.environ["K2TO3_UNMARSHAL_MARKER"], "a") as fh:
            fh.write(f"{os.getpid()} {' '.join(sys.argv)}\\n")
sys.addaudithook(_hook)
"""


@pytest.mark.slow
def test_no_code_path_unmarshals_bytecode_without_trust(tmp_path):
    """payload.h5's Lambda creates $K2TO3_PAYLOAD_MARKER when run. An audit hook in every process (a
    sitecustomize on PYTHONPATH, inherited by the workers) records any marshal.loads of its bytes. convert
    (with and without --src), audit and audit --verify never unmarshal it; --trust-bytecode does (the control
    that shows the hook works), and only then does the payload run."""
    with h5py.File(MODELS / "payload.h5") as f:
        cfg = json.loads(f.attrs["model_config"])
    lam = next(x for x in cfg["config"]["layers"] if x["class_name"] == "Lambda")
    payload = base64.b64decode(lam["config"]["function"][0].encode("ascii"))
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    ran, unmarshalled = tmp_path / "payload-ran", tmp_path / "unmarshalled"
    env = {**os.environ, "PYTHONPATH": f"{hook}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "K2TO3_PAYLOAD_HEX": payload.hex(), "K2TO3_PAYLOAD_MARKER": str(ran),
           "K2TO3_UNMARSHAL_MARKER": str(unmarshalled), "TF_CPP_MIN_LOG_LEVEL": "3"}
    src = _write(tmp_path, "pay.py", "import keras\ndef payload(t):\n    return t\n"
                 "def build():\n    return keras.layers.Lambda(payload, name='payload')\n")
    store = tmp_path / "store"
    store.mkdir()
    (store / "payload.h5").write_bytes((MODELS / "payload.h5").read_bytes())

    def k2to3(*args: str) -> int:
        r = subprocess.run([sys.executable, "-m", "k2to3", *args], env=env, cwd=tmp_path, capture_output=True,
                           text=True)
        assert "Traceback" not in r.stderr, r.stderr[-2000:]
        return r.returncode

    assert k2to3("convert", str(MODELS / "payload.h5"), "-o", "a.keras") == 3
    assert k2to3("convert", str(MODELS / "payload.h5"), "--src", str(src), "-o", "b.keras") == 0
    assert k2to3("audit", str(store), "-o", "audit") in (0, 3)
    assert k2to3("audit", str(store), "--verify", "-o", "audit2") in (0, 1, 3)
    assert not unmarshalled.exists(), unmarshalled.read_text()
    assert not ran.exists()
    assert k2to3("convert", str(MODELS / "payload.h5"), "--src", str(src), "-o", "c.keras",
                 "--trust-bytecode") == 0
    assert unmarshalled.exists() and ran.exists()  # the control: the hook sees it, the payload runs


@pytest.mark.slow
def test_recorded_lambda_output_shape_is_checked(pool, tmp_path):
    """A raw output_shape in the file that the matched source function does not produce stops the conversion
    (the file is edited with h5py to record (3,) where scale_shift gives (8,))."""
    from k2to3.errors import K2to3Error

    h5 = tmp_path / "edited.h5"
    h5.write_bytes((MODELS / "lambda_args.h5").read_bytes())
    with h5py.File(h5, "r+") as f:
        cfg = json.loads(f.attrs["model_config"])
        lam = next(x for x in cfg["config"]["layers"] if x["config"]["name"] == "affine")
        lam["config"].update(output_shape=[3], output_shape_type="raw")
        f.attrs["model_config"] = json.dumps(cfg)
    with pytest.raises(K2to3Error, match=r"Lambda 'affine': the source function gives output shape \[8\], the "
                                         r"file recorded \[3\]"):
        convert(Options(src=h5, output=tmp_path / "m.keras", sources=(str(ZOO),)), pool=pool)
    assert not (tmp_path / "m.keras").exists() and not (tmp_path / "m_k3.py").exists()


def test_unresolved_loss_keeps_the_model_convertible():
    """A loss stored as "<lambda>" (or a name the source lacks) is optional: the compile config is saved without
    it and a warning says so; the model itself still converts."""
    from k2to3.upgrade import upgrade

    a = read_artifact(MODELS / "lambda_activation.h5")
    tc = {"loss": "<lambda>", "metrics": ["missing_metric"], "optimizer_config": None}
    res = resolve_sources(index_sources([ZOO]), a.model_config, tc, "m_k3")
    assert not res.errors
    plan = upgrade(a.model_config, tc, res)
    assert not plan.errors and plan.compile["loss"] is None
    assert any("'<lambda>' is a custom function" in f.message for f in plan.findings if f.severity == "warning")


def test_src_directory_resolves_from_the_one_script_that_fits():
    """A --src directory (or an audited tree): each script is tried alone first. lambda_args resolves from
    k2_zoo.py only; CarND's one module-level lambda cannot have made lambda_loop's three layers (a module-level
    call outside loops runs once), so that file is not taken for it, and the loop model stays ambiguous until
    FILE:FUNCTION names its builder."""
    from k2to3.source.resolve_files import resolve_in_files

    files = sorted(SRC.glob("*.py"))
    index = index_sources(files)
    a = read_artifact(MODELS / "lambda_args.h5")
    res = resolve_in_files(index, a.model_config, None, "m_k3")
    assert not res.errors and {o["source"].rsplit(":", 1)[0] for o in res.objects} == {str(ZOO)}
    loop = read_artifact(MODELS / "lambda_loop.h5")
    only_carnd = resolve_sources(index_sources([SRC / "carnd_model.py"]), loop.model_config, None, "m_k3")
    assert only_carnd.errors and "runs once at module level but 3 Lambda layers" in only_carnd.errors[0].message
    res = resolve_in_files(index, loop.model_config, None, "m_k3")
    assert res.errors and "FILE:FUNCTION" in (res.errors[0].fix or "")
    res = resolve_in_files(index, loop.model_config, None, "m_k3", build_fn="build_lambda_loop")
    assert not res.errors and set(res.lambdas) == {"lambda", "lambda_1", "lambda_2"}


def test_custom_objects_mapping_links_lambda_activations(tmp_path):
    """load_model(path, custom_objects={"<lambda>": lrelu}) is how Keras 2 users loaded a lambda activation:
    it is the only link from the file's "<lambda>" to the function, read without running the file."""
    res = _resolve("lambda_custom_objects.h5", SRC / "lrelu_model.py")
    assert not res.errors, [f.line() for f in res.errors]
    assert res.activations == {("conv2d", "activation"): "lrelu", ("dense", "activation"): "lrelu"}
    how = [f.message for f in res.findings if "custom_objects=" in f.message]
    assert len(how) == 2 and "lrelu_model.py:24" in how[0] and "matched by custom_objects=" in how[0]
    assert "def lrelu(x):" in res.k3_code and "keras.ops.maximum(" in res.k3_code  # Keras 3 cannot register a lambda
    # every way Keras 2 code passed the mapping; without one, the activation stays unresolved (K2T903)
    body = "ALPHA = 0.2\nlrelu = lambda x: K.maximum(x, ALPHA * x)\n"
    head = "import tensorflow as tf\nfrom tensorflow.keras import backend as K\n"
    for call in ("tf.keras.models.model_from_json(s, custom_objects=dict(**{}, **{}))",
                 "tf.keras.utils.CustomObjectScope({'<lambda>': lrelu})",
                 "tf.keras.utils.custom_object_scope({'<lambda>': lrelu})",
                 "tf.keras.utils.get_custom_objects().update({'<lambda>': lrelu})",
                 "tf.keras.models.load_model(p, custom_objects={'<lambda>': lrelu})"):
        src = _write(tmp_path, "m.py", head + body + f"def load(p, s):\n    return {call}\n")
        res = _resolve("lambda_custom_objects.h5", src)
        if "dict(" in call:  # no literal key "<lambda>": nothing links it
            assert [f.code for f in res.errors] == ["K2T903", "K2T903"], call
        else:
            assert not res.errors and set(res.activations.values()) == {"lrelu"}, call


def test_custom_layer_in_k_calls_is_rewritten_to_portable_keras3():
    """K.int_shape / K.constant / K.cast_to_floatx / K.batch_dot / K.bias_add used to stop the conversion
    (K2T203/K2T204): each is now a keras.ops call or a k2to3.portable helper, so the module imports k2to3."""
    res = _resolve("k_attention.h5", SRC / "k_attention.py")
    assert not res.errors, [f.line() for f in res.errors]
    k3 = res.k3_code
    assert "import k2to3.portable" in k3 and "K." not in k3 and "tensorflow" not in k3
    for helper in ("int_shape", "constant", "cast_to_floatx", "batch_dot", "bias_add"):
        assert f"k2to3.portable.{helper}(" in k3, helper
    assert "keras.ops.tensordot(" in k3 and "keras.ops.softmax(" in k3


def test_custom_objects_mapping_links_a_renamed_class():
    """custom_objects={"ScaleLayer": ChannelScale}: the file's class name maps to the source's renamed class, on
    the Keras 3 side and in the Keras 2 reference's config."""
    res = _resolve("custom.h5", SRC / "renamed_scale.py")
    assert not res.errors, [f.line() for f in res.errors]
    assert res.classes == {"ScaleLayer": "ChannelScale"}
    how = [f.message for f in res.findings if "matched by custom_objects=" in f.message]
    assert any("'ScaleLayer' is ChannelScale" in m and "renamed_scale.py:" in m for m in how), how
    assert "class ChannelScale(" in res.k3_code
    a = read_artifact(MODELS / "custom.h5")
    golden = [la for la in res.golden_config(a.model_config)["config"]["layers"] if la["name"] == "scale"]
    assert golden[0]["class_name"] == "ChannelScale"


@pytest.mark.slow
def test_renamed_class_converts_with_parity(pool, tmp_path):
    inputs, live = _inputs_of("custom", tmp_path)
    out = tmp_path / "model.keras"
    report = convert(Options(src=MODELS / "custom.h5", output=out, inputs=inputs,
                             sources=(str(SRC / "renamed_scale.py"),)), pool=pool)
    record("src:custom.h5 renamed class", report)
    _check(report, "the --src definitions as written")
    assert all(report["backends"][b]["status"] == "parity" for b in ("tensorflow", "torch", "jax"))
    got = _run_saved(out, tmp_path, "torch", inputs)
    for g, e in zip(got, live):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


# -- --trust-bytecode without --src: Lambdas of another Python, decompiled -------------------------------------
@pytest.mark.slow
def test_corpus_carnd_converts_from_its_decompiled_bytecode(corpus, pool, tmp_path):
    """CarND's Lambda is CPython 3.5 bytecode: with --trust-bytecode (no --src) it is read as data, decompiled to
    `lambda x: x / 127.5 - 1.0`, matched and hoisted like a --src Lambda, and tf_keras runs that decompiled Keras 2
    source for the reference: parity on every backend. Without the flag it stops with K2T901 as before."""
    rel = "carnd_1560800/model.h5"
    with pytest.raises(NotPortableReport) as exc:
        convert(Options(src=corpus / rel, output=tmp_path / "plain.keras"), pool=pool)
    assert "K2T901" in str(exc.value) and not (tmp_path / "plain.keras").exists()
    assert not any("decompiled" in f["message"] for f in exc.value.report["findings"])
    report = convert(Options(src=corpus / rel, output=tmp_path / "carnd.keras", trust_bytecode=True), pool=pool)
    record("trust-bytecode:carnd", report)
    _check(report, "the --src definitions as written")
    assert set(report["backends"]) == {"tensorflow", "torch", "jax"}
    info = [f["message"] for f in report["findings"] if "decompiled" in f["message"]]
    assert any("(CPython 3.5, function '<lambda>' from run5.py:72): lambda x: x / 127.5 - 1.0" in m for m in info)
    assert any(m.startswith("Lambda rebuilt from the source (decompiled from the file's bytecode") for m in info)
    lambdas = [o for o in report["source"]["objects"] if o["kind"] == "lambda function"]
    assert [o["source"] for o in lambdas] == ["decompiled from the file's bytecode (--trust-bytecode)"]
    figures = {b: report["backends"][b]["outputs"][0]["max_abs"] for b in report["backends"]}
    print("carnd max abs from decompiled bytecode:", figures)
    module = (tmp_path / "carnd_k3.py").read_text()
    assert "def lambda_1_fn(x):  # decompiled from the file's bytecode (--trust-bytecode): lambda x: x / 127.5 " \
           "- 1.0\n    return (x / 127.5 - 1.0)" in module
