"""TFOpLambda / SlicingOpLambda conversion through the op table (issue: one op table)."""

from __future__ import annotations

import json
import subprocess
import sys

import h5py
import pytest
from conftest import CACHE, FIXTURES, H5, record
from test_convert import check_parity

from k2to3.core.options import ConvertOptions as Options
from k2to3.errors import K2to3Error
from k2to3.pipeline.convert import convert
from k2to3.upgrade import upgrade

pytestmark = pytest.mark.slow


def _functions(path) -> set[str]:
    cfg = json.loads(h5py.File(path, "r").attrs["model_config"])
    return {layer["config"]["function"] for layer in cfg["config"]["layers"]
            if layer["class_name"] in ("TFOpLambda", "SlicingOpLambda")}


def test_zoo_uses_at_least_40_tf_functions():
    assert len(_functions(H5 / "tfop_zoo.h5")) >= 40


def test_zoo_converts_with_parity(pool, tmp_path):
    report = convert(Options(src=H5 / "tfop_zoo.h5", output=tmp_path / "zoo.keras"), pool=pool)
    record("tfop_zoo", report)
    check_parity(report)
    assert report["reference"]["kind"] == "keras2-tf_keras"
    assert not report["output"]["needs_k2to3_portable"]  # built-in keras.ops nodes only
    translated = [f for f in report["findings"] if f["code"] == "K2T904"]
    assert len(translated) >= 60 and all(f["severity"] == "info" for f in translated)


@pytest.fixture(scope="module")
def regnets() -> dict:
    names = ("regnetx002", "regnety002")
    if not all((CACHE / f"{n}.h5").exists() for n in names):
        subprocess.run([sys.executable, str(FIXTURES / "make_tfop_fixtures.py"), "--large", str(CACHE)],
                       check=True, capture_output=True, timeout=900)
    return {n: CACHE / f"{n}.h5" for n in names}


@pytest.mark.parametrize("name", ["regnetx002", "regnety002"])
def test_regnet_converts_with_parity(name, regnets, pool, tmp_path):
    assert _functions(regnets[name])  # the application really contains TFOpLambda layers
    report = convert(Options(src=regnets[name], output=tmp_path / f"{name}.keras"), pool=pool)
    record(name, report)
    check_parity(report)


def _op_model(function: str, kwargs: dict) -> dict:
    return {"class_name": "Functional", "config": {
        "name": "m", "input_layers": [["x", 0, 0]], "output_layers": [["op", 0, 0]],
        "layers": [
            {"class_name": "InputLayer", "name": "x", "config": {"name": "x", "batch_input_shape": [None, 3]},
             "inbound_nodes": []},
            {"class_name": "TFOpLambda", "name": "op", "config": {"name": "op", "function": function},
             "inbound_nodes": [["x", 0, 0, kwargs]]}]}}


def test_untranslatable_op_is_a_finding_naming_layer_and_op():
    plan = upgrade(_op_model("raw_ops.AddV2", {"y": 1.0}))
    (warn,) = [f for f in plan.findings if f.code == "K2T904"]
    assert warn.severity == "warning" and warn.layer == "op" and "raw_ops.AddV2" in warn.message
    assert plan.tf_only == [{"layer": "op", "op": "tf.raw_ops.AddV2", "reason": plan.tf_only[0]["reason"]}]
    plan = upgrade(_op_model("math.cumsum", {"axis": 1, "exclusive": True}))
    assert not plan.errors and "exclusive" in plan.tf_only[0]["reason"]


def test_tf_op_that_fails_in_tensorflow_stops_convert_without_output(tmp_path):
    """Kept as a TF call, tf.strings.length on a float tensor fails when the graph is rebuilt: one line, exit 3,
    nothing written."""
    src = tmp_path / "m.h5"
    with h5py.File(src, "w") as f:
        f.attrs["model_config"] = json.dumps(_op_model("strings.length", {}))
        f.attrs["keras_version"] = "2.15.0"
        f.create_group("model_weights").attrs["layer_names"] = []
    with pytest.raises(K2to3Error) as exc:
        convert(Options(src=src, output=tmp_path / "m.keras"))
    assert "strings.length" in exc.value.line() and exc.value.code == 3 and not (tmp_path / "m.keras").exists()


def test_untranslatable_op_is_kept_as_a_tf_call():
    from k2to3.formats.artifact import read_artifact

    a = read_artifact(FIXTURES / "src_models" / "tf_only.h5")
    plan = upgrade(a.model_config, a.training_config)
    assert not plan.errors
    (t,) = plan.tf_only
    assert t["op"] == "tf.math.cumsum" and "exclusive=True" in t["reason"] and plan.needs_portable
    assert any(f.code == "K2T904" and f.severity == "warning" for f in plan.findings)


@pytest.mark.slow
def test_tf_only_model_converts_for_tensorflow(pool, tmp_path):
    """The rest of the model converts; the .keras is verified on tensorflow against the Keras 2 reference, torch
    and jax are skipped (the layer says why if loaded there), verdict tf_only, exit code 3, file written."""
    out = tmp_path / "m.keras"
    report = convert(Options(src=FIXTURES / "src_models" / "tf_only.h5", output=out), pool=pool)
    assert report["verdict"] == "tf_only" and report["exit_code"] == 3 and out.exists()
    assert report["reference"]["kind"] == "keras2-tf_keras"
    assert report["backends"]["tensorflow"]["status"] == "parity"
    assert report["backends"]["torch"]["status"] == report["backends"]["jax"]["status"] == "skipped"
    assert "tf.math.cumsum" in report["backends"]["jax"]["reason"]
    assert "import k2to3.portable" in report["output"]["load"]


def test_everyday_ops_convert_with_parity_on_all_backends(pool, tmp_path):
    """tf.reverse, tf.math.log1p, tf.compat.v1.gather and tf.linalg.matmul(transpose_b=True) made a model
    tensorflow-only; they now translate to keras.ops (matmul's flag through keras.ops.swapaxes)."""
    assert _functions(H5 / "tfop_everyday.h5") == {"reverse", "math.log1p", "compat.v1.gather", "linalg.matmul",
                                                    "concat", "math.abs"}
    report = convert(Options(src=H5 / "tfop_everyday.h5", output=tmp_path / "m.keras"), pool=pool)
    record("tfop_everyday", report)
    check_parity(report)
    assert report["verdict"] == "parity" and not report["output"]["needs_k2to3_portable"]
    assert all(report["backends"][b]["status"] == "parity" for b in ("tensorflow", "torch", "jax"))


def test_zoo2_new_table_entries_convert_with_parity(pool, tmp_path):
    """Every TF-side entry tf_keras can serialize as a TFOpLambda, in one small model."""
    functions = _functions(H5 / "tfop_zoo2.h5")
    assert len(functions) >= 50, sorted(functions)
    report = convert(Options(src=H5 / "tfop_zoo2.h5", output=tmp_path / "z.keras"), pool=pool)
    record("tfop_zoo2", report)
    check_parity(report)
    assert report["verdict"] == "parity" and not report["output"]["needs_k2to3_portable"]
    assert not [f for f in report["findings"] if f["code"] == "K2T904" and f["severity"] != "info"]


def test_gaps_norm_one_hot_and_constants_convert_with_parity(pool, tmp_path):
    """tf.norm / reduce_euclidean_norm (a reloaded keras.ops.norm node's list axis failed on jax), tf.one_hot of
    an int32 input with indices >= depth (torch's one_hot raised; TF gives zeros) and constant tensor arguments
    (stored as nested lists: "Invalid dtype: list") convert with parity on all three backends."""
    functions = _functions(H5 / "tfop_gaps.h5")
    assert {"compat.v1.norm", "math.reduce_euclidean_norm", "one_hot", "linalg.matmul", "tensordot"} <= functions
    report = convert(Options(src=H5 / "tfop_gaps.h5", output=tmp_path / "g.keras"), pool=pool)
    record("tfop_gaps", report)
    check_parity(report)
    assert report["verdict"] == "parity" and not report["output"]["needs_k2to3_portable"]
    assert all(report["backends"][b]["status"] == "parity" for b in ("tensorflow", "torch", "jax"))


def test_zoo3_remaining_table_entries_convert_with_parity(pool, tmp_path):
    """The op-table entries no other fixture reached that tf_keras can save and reload (comparisons, floordiv as
    compat.v1.floor_div, argmin, gather_nd as compat.v1.gather_nd, segment_sum, det/inv/cholesky/solve,
    rgb_to_grayscale, fake_quant_with_min_max_vars) convert with parity on all three backends."""
    functions = _functions(H5 / "tfop_zoo3.h5")
    assert {"math.greater_equal", "math.less_equal", "math.equal", "compat.v1.floor_div", "math.argmin",
            "compat.v1.gather_nd", "math.segment_sum", "linalg.det", "linalg.inv", "linalg.cholesky", "linalg.solve",
            "image.rgb_to_grayscale", "quantization.fake_quant_with_min_max_vars"} <= functions, sorted(functions)
    report = convert(Options(src=H5 / "tfop_zoo3.h5", output=tmp_path / "z3.keras"), pool=pool)
    record("tfop_zoo3", report)
    check_parity(report)
    assert report["verdict"] == "parity"
    assert all(report["backends"][b]["status"] == "parity" for b in ("tensorflow", "torch", "jax"))


def test_shape_consumers_convert_with_parity(pool, tmp_path):
    """tf.shape on a Keras tensor (recorded as compat.v1.shape, often sliced) feeding zeros/ones/fill/broadcast_to/
    scatter_nd/reshape/range/eye/cast, and +, -, *, // on dimensions, converts with parity on all three backends:
    static dimensions become ints, a consumer of the batch dimension a k2to3>ShapeOp layer that reads the shape when
    the model runs. logical_xor and
    nn.moments arrive as the ops tf_keras decomposed them into."""
    import zipfile

    functions = _functions(H5 / "tfop_shapes.h5")
    assert {"compat.v1.shape", "__operators__.getitem", "zeros", "ones", "fill", "range", "broadcast_to",
            "scatter_nd", "reshape", "eye", "cast", "math.logical_and", "math.logical_or", "math.logical_not",
            "math.reduce_mean", "math.squared_difference"} <= functions, sorted(functions)
    out = tmp_path / "s.keras"
    report = convert(Options(src=H5 / "tfop_shapes.h5", output=out), pool=pool)
    record("tfop_shapes", report)
    check_parity(report)
    assert report["verdict"] == "parity" and report["output"]["needs_k2to3_portable"]
    assert all(report["backends"][b]["status"] == "parity" for b in ("tensorflow", "torch", "jax"))
    assert all(len(report["backends"][b]["outputs"]) == 18 for b in ("tensorflow", "torch", "jax"))  # one per op
    layers = json.loads(zipfile.ZipFile(out).read("config.json"))["config"]["layers"]
    shape_ops = {la["name"]: la["config"]["function"] for la in layers if la["class_name"] == "ShapeOp"}
    # the batch-dependent consumers read the shape at run time; tf.eye / tf.range of a static dimension do not
    assert {"zeros", "ones", "full", "broadcast_to", "scatter", "reshape", "arange", "cast"} == set(shape_ops.values())
    assert "tf_eye" not in shape_ops and "tf_range_1" not in shape_ops and "tf_range" in shape_ops


def test_shape_feeding_a_tf_only_op_becomes_a_tensor(pool, tmp_path):
    """A tf.shape with the batch dimension that reaches an op kept as a TensorFlow call is materialised as the int32
    tensor TF gave (k2to3>ShapeOp over k2to3.portable.shape_tensor); the static part indexed after a cast stays a
    constant. Parity on tensorflow, the other backends skipped for the TF-only op."""
    out = tmp_path / "s.keras"
    report = convert(Options(src=H5 / "tfop_shape_tf_only.h5", output=out), pool=pool)
    record("tfop_shape_tf_only", report)
    assert report["verdict"] == "tf_only" and report["backends"]["tensorflow"]["status"] == "parity"
    assert all(o["max_abs"] == 0.0 for o in report["backends"]["tensorflow"]["outputs"])
    assert "tf.math.cumsum" in report["backends"]["jax"]["reason"]
