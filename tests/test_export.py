"""`k2to3 export` and `convert --export`: real Keras 2 fixtures converted, exported by Keras 3's own exporters and
run by each format's own runtime (onnxruntime, the LiteRT interpreter, TensorFlow's serving signature,
torch.export.load) in a fresh process, against the tf_keras golden. A format that cannot take a model stops with
one line naming the op and the layer (exit 3) and writes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import FIXTURES, H5
from test_cli import k2to3, one_error_line
from test_report_schema import _covered

from k2to3.checks.number_format import fmt as fmt_figure
from k2to3.core.options import ConvertOptions, ExportOptions
from k2to3.errors import InputError
from k2to3.pipeline.convert import convert
from k2to3.pipeline.export import export
from k2to3.pipeline.report import to_markdown
from k2to3.pipeline.sources import module_path

SRC = FIXTURES / "src_models"
# name -> (the Keras 2 file, its --src, what ONNX and LiteRT are expected to say)
CASES = {
    "cnn": (H5 / "fm10_conv_no_inputlayer.h5", None, "parity", "parity"),
    "rnn": (H5 / "embedding_lstm.h5", None, "parity", "parity"),  # LiteRT: the LSTM unrolled
    "tfop": (H5 / "tfop_everyday.h5", None, "not_portable", "parity"),  # tf2onnx leaves Log1p untranslated
    "src_lambda": (SRC / "lambda_args.h5", FIXTURES / "src" / "k2_zoo.py", "parity", "parity"),
    "mixed": (H5 / "fm11_mixed_precision.h5", None, "parity", "not_portable"),  # float16 MatMul: a Flex op
    "optimizer_state": (FIXTURES / "optimizers" / "conv_bn_adam.h5", None, "parity", "parity"),
}


@pytest.fixture(scope="module")
def converted(pool, tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """Every case converted (tensorflow only: the exporters' backend) with --export onnx and --save-golden."""
    d = tmp_path_factory.mktemp("export")
    out = {}
    for name, (h5, src, _, _) in CASES.items():
        keras = d / f"{name}.keras"
        opts = ConvertOptions(src=h5, output=keras, backends=("tensorflow",), export="onnx", save_golden=True,
                              sources=(str(src),) if src else ())
        out[name] = (keras, convert(opts, pool=pool))
    return out


def _figures_hold(e: dict) -> None:
    """Written, within the run's tolerance on every output, and (a dynamic batch) on the first sample alone."""
    assert e["written"] and Path(e["path"]).exists() and e["allclose"]
    assert all(o["allclose"] and np.isfinite(o["max_abs"]) for o in e["outputs"])
    assert e["max_abs"] == max(o["max_abs"] for o in e["outputs"])
    if e["dynamic_batch"]:
        assert e["batch_1"]["allclose"] and e["batch_1"]["outputs"][0]["shape"][0] == 1


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_convert_export_onnx(converted, name):
    keras, rep = converted[name]
    e, want = rep["export"], CASES[name][2]
    assert e["status"] == want, e
    onnx_path = keras.with_suffix(".onnx")
    if want == "parity":
        _figures_hold(e)
        assert rep["exit_code"] == 0 and rep["verdict"] == "parity"
        assert e["runtime"] == "onnxruntime" and e["dynamic_batch"] is True
        onnx.checker.check_model(str(onnx_path))  # a well-formed file, not only one onnxruntime tolerates
        assert keras.exists()
    else:  # the op and the layer it came from, in one line; no .onnx left behind
        assert e["error"].startswith("onnx cannot take op Log1p from Keras 2 layer tf.math.log1p (tf.math.log1p -> "
                                     "keras.ops.log1p)"), e["error"]
        assert rep["exit_code"] == 3 and rep["verdict"] == "not_portable" and not onnx_path.exists()
        assert not list(keras.parent.glob(f".{onnx_path.name}*"))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_export_litert_against_the_golden_file(pool, converted, tmp_path, name):
    keras, _ = converted[name]
    h5, src, _, want = CASES[name]
    out = tmp_path / f"{name}.tflite"
    # a --src model is checked against its reference (the golden file holds outputs, not the Lambda's code)
    given = {"reference": h5, "sources": (str(src),)} if src else {"golden": keras.with_suffix(".golden.npz")}
    rep = export(ExportOptions(model=keras, format="litert", output=out, **given), pool=pool)
    e = rep["export"]
    assert e["status"] == want, e
    if want == "parity":
        _figures_hold(e)
        assert rep["exit_code"] == 0 and e["runtime"] == "ai_edge_litert" and rep["command"] == "export"
        assert e["unrolled"] == (["lstm"] if name == "rnn" else [])
    else:
        assert e["error"].startswith("litert cannot take op FlexMatMul in layer dense (Dense, mixed_float16)")
        assert rep["exit_code"] == 3 and not out.exists() and not list(tmp_path.glob(".*"))


@pytest.mark.slow
@pytest.mark.parametrize(("name", "fmt"), [("cnn", "savedmodel"), ("rnn", "savedmodel"), ("cnn", "torch"),
                                           ("rnn", "torch")])
def test_export_savedmodel_and_torch(pool, converted, tmp_path, name, fmt):
    keras, _ = converted[name]
    out = tmp_path / (f"{name}_sm" if fmt == "savedmodel" else f"{name}.pt2")
    rep = export(ExportOptions(model=keras, format=fmt, output=out, reference=CASES[name][0]), pool=pool)
    e = rep["export"]
    assert (e["status"], rep["exit_code"]) == ("parity", 0), e
    _figures_hold(e)
    assert e["exporter_backend"] == ("torch" if fmt == "torch" else "tensorflow")
    assert e["dynamic_batch"] is True and "batch_1" in e
    assert (out / "saved_model.pb").exists() if fmt == "savedmodel" else out.is_file()
    assert rep["reference"]["kind"] == "keras2-tf_keras"
    _covered(rep)  # report.md shows the section report.json has
    assert "## Export\n" in to_markdown(rep) and f"| 1 | 0 | {fmt_figure(e['batch_1']['max_abs'])} |" in \
        to_markdown(rep)


@pytest.mark.slow
def test_export_mismatch_against_a_golden_it_does_not_match(pool, converted, tmp_path):
    """The exported file is judged against the golden, not against itself: the CNN's golden file with its
    reference output moved by 1e-3 (its inputs and meta as written) makes the export a mismatch, exit 1, with the
    figure measured."""
    keras, _ = converted["cnn"]
    with np.load(keras.with_suffix(".golden.npz")) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["out0"] = arrays["out0"] + np.float32(1e-3)
    moved = tmp_path / "moved.golden.npz"
    np.savez(moved, **arrays)
    rep = export(ExportOptions(model=keras, format="onnx", output=tmp_path / "m.onnx", golden=moved), pool=pool)
    e = rep["export"]
    assert e["status"] == "mismatch" and rep["exit_code"] == 1 and rep["verdict"] == "mismatch"
    assert 0.9e-3 < e["max_abs"] < 1.1e-3 and not e["allclose"]


@pytest.mark.slow
def test_torch_export_against_a_golden_file_starts_the_torch_worker_alone(converted, tmp_path):
    """torch.export runs on the torch backend and a golden file is the Keras 2 reference: no tensorflow worker
    (no TensorFlow import) in the run, and the .pt2 still matches the tf_keras golden the file holds."""
    keras, _ = converted["cnn"]
    out = tmp_path / "cnn.pt2"
    r = k2to3("export", str(keras), "--format", "torch", "-o", str(out), "--golden",
              str(keras.with_suffix(".golden.npz")))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rep = json.loads((tmp_path / "cnn.pt2.report" / "report.json").read_text())
    assert [e["role"] for e in rep["memory"]["schedule"]] == ["torch"] and set(rep["memory"]["workers"]) == {"torch"}
    assert "starting workers: torch (" in r.stdout + r.stderr
    e = rep["export"]
    assert (e["status"], e["exporter_backend"], rep["reference"]["kind"]) == ("parity", "torch", "golden-npz"), e
    _figures_hold(e)
    assert rep["reference"]["recorded"]["kind"] == "keras2-tf_keras"  # the golden file holds tf_keras's outputs


@pytest.mark.slow
def test_export_of_a_src_model_against_its_golden_file_takes_the_generated_module(pool, converted, tmp_path):
    """A --src model's golden file holds outputs, not the Keras 2 source's resolution: `--src MODEL_k3.py` (what
    convert wrote beside the .keras) is imported by the workers and the export matches; without it, or with the
    original source, one line names the module before any work and nothing is written."""
    keras, _ = converted["src_lambda"]
    golden, module = keras.with_suffix(".golden.npz"), module_path(keras)
    out = tmp_path / "lam.onnx"
    with pytest.raises(InputError) as exc:
        export(ExportOptions(model=keras, format="onnx", output=out, golden=golden), pool=pool)
    assert f"registered by the package '{module.stem}'" in exc.value.line()
    assert f"pass --src {module.name}" in exc.value.line()
    with pytest.raises(InputError, match="not a module generated by k2to3 convert"):
        export(ExportOptions(model=keras, format="onnx", output=out, golden=golden,
                             sources=(str(CASES["src_lambda"][1]),)), pool=pool)
    assert not list(tmp_path.iterdir())
    rep = export(ExportOptions(model=keras, format="onnx", output=out, golden=golden, sources=(str(module),)),
                 pool=pool)
    assert (rep["export"]["status"], rep["exit_code"], rep["reference"]["kind"]) == ("parity", 0, "golden-npz")
    _figures_hold(rep["export"])


def test_export_usage_errors_are_one_line_before_any_work(tmp_path):
    model = tmp_path / "m.keras"
    model.write_bytes((FIXTURES / "verify" / "plain_cnn.naive.keras").read_bytes())
    taken = tmp_path / "m.onnx"
    taken.write_text("x")
    r = k2to3("export", str(model), "--format", "onnx", "-o", str(taken), "--golden", str(tmp_path / "g.npz"))
    assert r.returncode == 2 and "exists" in one_error_line(r) and "--force" in one_error_line(r)
    r = k2to3("export", str(model), "--format", "tflite2", "-o", str(tmp_path / "m.x"), "--golden", "g.npz")
    assert r.returncode == 2 and "unknown format" in one_error_line(r)
    r = k2to3("export", str(model), "--format", "torch", "-o", str(tmp_path / "m.pt"), "--golden", "g.npz")
    assert r.returncode == 2 and ".pt2" in one_error_line(r)
    r = k2to3("export", str(model), "--format", "onnx", "-o", str(tmp_path / "n.onnx"))
    assert r.returncode == 2 and "--reference" in one_error_line(r)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.keras", "m.onnx"]
    with pytest.raises(InputError, match="--backends"):
        convert(ConvertOptions(src=H5 / "embedding_lstm.h5", output=tmp_path / "x.keras", export="torch",
                               backends=("tensorflow",)))


@pytest.mark.slow
def test_cli_stop_is_one_line_exit_3_and_nothing_written(converted, tmp_path):
    keras, _ = converted["tfop"]
    out = tmp_path / "m.onnx"
    r = k2to3("export", str(keras), "--format", "onnx", "-o", str(out), "--reference", str(CASES["tfop"][0]))
    assert r.returncode == 3 and "Traceback" not in r.stdout + r.stderr
    lines = [ln for ln in r.stdout.splitlines() if "cannot take op" in ln]
    assert len(lines) == 1 and "onnx cannot take op Log1p from Keras 2 layer tf.math.log1p" in lines[0], r.stdout
    assert "nothing exported" in r.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx.report"]  # the report, no partial file


@pytest.mark.slow
def test_litert_stop_on_a_variable_length_rnn_is_the_one_the_audit_predicts(pool, tmp_path):
    """K2T713 measured: an LSTM over Input((None, 3)) stays a While loop over TensorLists (fixed lengths are
    unrolled), which LiteRT's builtin ops lack; the export stops with one line, exit 3, and writes no .tflite."""
    from k2to3.core.keras_versions import export_stops

    h5 = FIXTURES / "target" / "rnn_variable_length.h5"
    keras = tmp_path / "rnn.keras"
    rep = convert(ConvertOptions(src=h5, output=keras, backends=("tensorflow",), export="litert"), pool=pool)
    e = rep["export"]
    assert e["status"] == "not_portable" and rep["exit_code"] == 3, e
    assert e["error"].startswith("litert cannot take op FlexTensorListReserve"), e["error"]
    assert not keras.with_suffix(".tflite").exists() and not list(tmp_path.glob(".*tflite*"))
    stop = next(s for s in export_stops() if s.code == "K2T713")
    assert stop.format == "litert" and "FlexTensorListReserve" in stop.why and "LSTM" in stop.values
