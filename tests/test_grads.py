"""--grads: the loss gradient w.r.t. every trainable variable on tensorflow, torch and jax against tf_keras's, on
MobileNetV2 (BatchNormalization in training mode, 158 variables) and stacked LSTMs with dropout and recurrent
dropout (made the identity on both sides)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import numpy as np
import pytest
from conftest import ARTIFACTS, CACHE, FIXTURES

from k2to3.checks.training.gradient_check import loss_specs
from k2to3.checks.training.gradient_compare import compare_grads
from k2to3.core.compare import compare_arrays
from k2to3.core.options import ConvertOptions as Options
from k2to3.core.options import VerifyOptions
from k2to3.core.seeds import make_targets
from k2to3.pipeline.convert import convert
from k2to3.pipeline.verify import verify
from k2to3.workers.protocol import DropHeldRequest, FitGoldenRequest, FitNoiseRequest

VERIFY = FIXTURES / "verify"


def test_targets_are_shaped_and_typed_for_the_loss():
    outs = [np.zeros((2, 5), np.float32)]
    (sparse,) = make_targets(["sparse_categorical_crossentropy"], outs)
    assert sparse.shape == (2,) and sparse.dtype == np.int32 and sparse.max() < 5
    (onehot,) = make_targets([{"class_name": "CategoricalCrossentropy", "config": {}}], outs)
    assert onehot.shape == (2, 5) and (onehot.sum(-1) == 1).all()
    (binary,) = make_targets(["binary_crossentropy"], outs)
    assert set(np.unique(binary)) <= {0.0, 1.0}
    assert loss_specs({"loss": {"class_name": "CategoricalCrossentropy", "config": {"reduction": "auto",
                                                                                    "from_logits": True}}},
                      None, 1)[0] == [{"class_name": "CategoricalCrossentropy", "config": {"from_logits": True}}]
    assert loss_specs(None, None, 2) == (["mean_squared_error"] * 2, loss_specs(None, None, 2)[1])
    assert loss_specs({"loss": "mse"}, "huber", 1) == (["huber"], "--loss")


def test_compare_grads_names_the_first_divergent_variable():
    ref = [np.ones((3, 2), np.float32), np.ones(2, np.float32), np.ones(4, np.float32)]
    got = [ref[0].copy(), ref[1] * 1.01, -ref[2]]
    r = compare_grads(["a", "b", "c"], got, ["a", "b", "c"], ref, 1e-4, 1e-6)
    assert r["status"] == "mismatch" and r["first_divergent_variable"] == "b"
    rows = {v["variable"]: v for v in r["variables"]}
    assert rows["a"]["allclose"] and rows["a"]["rel_l2"] == 0 and rows["a"]["cosine"] == pytest.approx(1)
    assert rows["b"]["rel_l2"] == pytest.approx(0.01, rel=1e-3) and rows["c"]["cosine"] == pytest.approx(-1)
    assert r["top_divergent"][0]["variable"] == "c"
    assert compare_grads(["a"], [np.ones(3)], ["a"], [np.ones(2)], 1e-4, 1e-6)["status"] == "error"



def test_compare_grads_figures_equal_a_direct_float64_computation():
    """The figures come from one set of float64 copies per variable (compare_arrays' dot products): they must equal,
    bit for bit, the norms, cosine and ratios computed directly; a NaN in the reference takes the direct path."""
    rng = np.random.default_rng(3)
    ref = [rng.standard_normal((40, 30)).astype(np.float32), np.zeros(5, np.float32),
           np.array([1e-8, 2.0, np.nan, -3.0], np.float32)]
    got = [ref[0] + rng.standard_normal((40, 30)).astype(np.float32) * 1e-3, np.full(5, 1e-7, np.float32),
           np.array([1e-6, 2.0001, np.nan, -3.0], np.float32)]
    rows = compare_grads(["a", "b", "c"], got, ["a", "b", "c"], ref, 1e-4, 1e-6)["variables"]
    for row, g, r in zip(rows, got, ref):
        ok = ~np.isnan(r)
        g64, r64 = g.astype(np.float64)[ok], r.astype(np.float64)[ok]
        d = np.abs(g64 - r64)
        nr = np.linalg.norm(r64)
        assert row["max_abs"] == d.max()
        assert row["max_rel"] == (max((d[np.abs(r64) > 1e-6] / np.abs(r64)[np.abs(r64) > 1e-6]), default=0.0))
        if ok.all():
            assert row["ref_max_abs"] == np.abs(r64).max()
            assert row["rel_l2"] == (np.linalg.norm(g64 - r64) / nr if nr > 0 else float("inf"))
            assert row["cosine"] == (np.dot(g64, r64) / (np.linalg.norm(g64) * nr) if nr > 0 else 0.0)
    # NaN in both at one place: as the direct computation gives (the NaN norm is not > 0)
    assert rows[2]["rel_l2"] == float("inf") and np.isnan(rows[2]["cosine"]) and np.isnan(rows[2]["ref_max_abs"])

def test_rows_compared_as_the_replies_came_are_the_rows_of_the_section(tmp_path):
    """gradient_check.EarlyRows compares each backend's step gradients while the others still train; build_section
    takes those rows as they are, with the reference arrays they used: the same section as comparing them all at
    the end (timings aside)."""
    from types import SimpleNamespace

    from k2to3.checks.training.gradient_compare import backend_row, build_section, load_grads
    from k2to3.core import arrayfile

    rng = np.random.default_rng(7)
    names = ["k", "b"]
    ref = [rng.standard_normal((30, 20)).astype(np.float32), rng.standard_normal(20).astype(np.float32)]
    got = {"torch": [ref[0] + 1e-6, ref[1] * 1.01], "jax": [ref[0], -ref[1]]}

    def at(name):
        return str(tmp_path / f"{name}.arrays")

    arrayfile.write(at("grads-golden"), ref)
    for b, arrays in got.items():
        arrayfile.write(at(f"grads-{b}"), arrays)
    reply = {"names": names, "loss": 1.0, "grad_seconds": 0.1, "none": []}
    replies = {b: dict(reply) for b in got}
    ctx = {"t0": 0.0, "golden": True, "rt": 1e-4, "at": 1e-6, "losses": ["mse"], "source": "s", "training": True,
           "tol_source": "default"}

    def run():
        return SimpleNamespace(report={}, reference_origin="the file", arrays=at, state={})

    late = build_section(run(), replies, reply, ctx)
    arrays = load_grads(at("grads-golden"), 2)
    rows = {"torch": backend_row(run(), "torch", replies["torch"], reply, arrays, 1e-4, 1e-6), "jax": None}
    early = build_section(run(), replies, reply, ctx, {"rows": rows, "ref_arrays": arrays})
    late.pop("seconds"), early.pop("seconds")
    assert early == late and late["backends"]["jax"]["status"] == "mismatch"


def test_block_by_block_figures_equal_the_whole_array_ones(monkeypatch):
    """Large weights and gradients are compared a block at a time (core/compare.py CHUNK, bench/compare.py): the
    same maxima, tolerance verdict and minimum tolerances as the whole-array path, the dot products to float64
    rounding; a NaN anywhere takes the whole-array path. Blocks made small here, so that small arrays cross them."""
    import k2to3.core.compare as C

    rng = np.random.default_rng(5)
    ref = rng.standard_normal(10_000).astype(np.float32)
    ref[::97] = 0.0  # a zero reference where got differs: min_rtol is inf
    cases = {"close": ref + rng.standard_normal(ref.size).astype(np.float32) * 1e-6,
             "far": ref + rng.standard_normal(ref.size).astype(np.float32) * 1e-2,
             "zero_differs": np.where(ref == 0, np.float32(1e-3), ref)}
    nan_ref = ref.copy()
    nan_ref[5] = np.nan
    for name, got in [*cases.items(), ("nan", np.where(np.isnan(nan_ref), np.nan, ref + 1e-6).astype(np.float32))]:
        r = nan_ref if name == "nan" else ref
        whole_norms, block_norms = {}, {}
        monkeypatch.setattr(C, "CHUNKED_MIN", 1 << 62)
        whole = C.compare_arrays(got, r, 1e-4, 1e-6, output=False, norms=whole_norms)
        monkeypatch.setattr(C, "CHUNKED_MIN", 1000)
        monkeypatch.setattr(C, "CHUNK", 512)
        blocks = C.compare_arrays(got, r, 1e-4, 1e-6, output=False, norms=block_norms)
        assert blocks == whole, name
        assert block_norms.keys() == whole_norms.keys(), name
        for k, v in whole_norms.items():
            assert block_norms[k] == pytest.approx(v, rel=1e-12), (name, k)


@pytest.fixture(scope="module")
def mobilenetv2():
    path = CACHE / "mobilenetv2.h5"
    if not path.exists():  # generated with the other applications (tests/test_applications.py)
        subprocess.run([sys.executable, str(FIXTURES / "make_fixtures.py"), "--skip-small", "--large", str(CACHE)],
                       check=True, capture_output=True, timeout=900)
    return path


def _record(name: str, report: dict) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    g = report["gradients"]
    row = {"model": name, "verdict": g["verdict"], "numeric_verdict": g.get("numeric_verdict"), "loss": g["loss"],
           "reference_sensitivity": g["reference"].get("sensitivity"),
           **{b: {k: v.get(k) for k in ("max_abs", "max_rel", "max_rel_l2", "min_cosine", "first_divergent_variable")}
              for b, v in g["backends"].items()}}
    with open(ARTIFACTS / "grads.jsonl", "a") as fh:
        fh.write(json.dumps(row) + "\n")


def check_table(report: dict, n_vars: int, training: bool = True) -> None:
    g = report["gradients"]
    assert set(g["backends"]) == {"tensorflow", "torch", "jax"}
    assert g["reference"]["kind"] == "keras2-tf_keras" and g["training"] is training
    for b, v in g["backends"].items():
        assert v["status"] in ("parity", "mismatch"), (b, v.get("error"))
        assert len(v["variables"]) == n_vars and not v["unconnected"]
        # the same function differentiated: where tf_keras's own gradient is stable under a 1e-6 change of the
        # inputs (probed by the standalone check only), every backend's gradient points the same way as tf_keras's
        stable = [r for r in v["variables"] if r.get("reference_sensitivity", 0.0) < 1e-3 and r["ref_max_abs"] > 1e-6]
        assert stable and min(r["cosine"] for r in stable) > 0.999, (b, v["top_divergent"])
        assert abs(v["loss"] - g["reference"]["loss"]) < 1e-4 * max(1.0, abs(g["reference"]["loss"]))


@pytest.mark.slow
def test_grads_mobilenetv2(pool, mobilenetv2, tmp_path):
    """Inference mode (frozen BatchNormalization, as fine-tuning does): a well-conditioned comparison. Training mode:
    at 32x32 the last blocks normalize 2x1x1 values per channel, and tf_keras's own gradients jump under a 1e-6
    input change; the report must say so rather than blame the conversion."""
    out = tmp_path / "m.keras"
    report = convert(Options(src=mobilenetv2, output=out, grads=True, grads_mode="inference"), pool=pool)
    _record("mobilenetv2 (inference mode)", report)
    check_table(report, 158, training=False)
    g = report["gradients"]
    assert g["loss_source"].startswith("default") and not any("BatchNormalization" in n for n in g["notes"])
    assert report["exit_code"] == (0 if g["verdict"] == "parity" else 1)
    assert g["reference"]["sensitivity"]["max_rel_l2"] < 0.01 and g["numeric_verdict"] != "mismatch", g["backends"]

    train = verify(VerifyOptions(model=out, reference=mobilenetv2, grads=True), pool=pool)
    _record("mobilenetv2 (training mode)", train)
    t = train["gradients"]
    assert t["training"] is True and set(t["backends"]) == {"tensorflow", "torch", "jax"}
    assert any("BatchNormalization in training mode" in n for n in t["notes"])
    if t["verdict"] == "mismatch":
        assert t["reference"]["sensitivity"]["max_rel_l2"] > 0.01 and any("ill-conditioned" in n for n in t["notes"])
        # explained by tf_keras's own conditioning on every variable: said, not failed (exit 0)
        assert train["exit_code"] == (0 if t["numeric_verdict"] == "within_reference_sensitivity" else 1)


@pytest.mark.slow
def test_grads_lstm_with_dropout_on_convert_and_verify(pool, tmp_path):
    out = tmp_path / "lstm.keras"
    report = convert(Options(src=VERIFY / "lstm_dropout.h5", output=out, grads=True), pool=pool)
    _record("lstm_dropout", report)
    check_table(report, 8)  # two LSTMs (kernel, recurrent_kernel, bias) and the Dense
    g = report["gradients"]
    # with the training step (--fit-steps defaults to 1 with --grads), its own gradients are the ones compared
    assert g["from"] == "training step" and "sensitivity" not in g["reference"]
    assert g["loss"] == ["categorical_crossentropy"] and g["loss_source"].startswith("the training step's compiled")
    assert any("lstm" in n for n in g["derandomized"]) and any("recurrent" in n for n in g["notes"])
    assert g["verdict"] == "parity" and report["exit_code"] == 0, {b: v["top_divergent"][:2]
                                                                   for b, v in g["backends"].items()}
    # --grads brings one training step (--fit-steps defaults to 1 with it), run in the same round of jobs
    t = report["training"]
    assert t["steps"] == 1 and t["status"] == "parity" and set(t["backends"]) == {"tensorflow", "torch", "jax"}
    assert all(len(v["losses"]) == 1 for v in t["backends"].values())
    # verify --grads on the converted file gives the same gradient figures
    again = verify(VerifyOptions(model=out, reference=VERIFY / "lstm_dropout.h5", grads=True), pool=pool)
    assert again["gradients"]["verdict"] == "parity" and again["training"]["status"] == "parity"
    for b, v in again["gradients"]["backends"].items():
        assert v["max_abs"] == g["backends"][b]["max_abs"]
    # the standalone check (no training step) differentiates the same loss on the same batch: the same verdict,
    # gradients within float32 rounding of the step's, and tf_keras's input-sensitivity probe
    alone = verify(VerifyOptions(model=out, reference=VERIFY / "lstm_dropout.h5", grads=True, fit_steps=0), pool=pool)
    a = alone["gradients"]
    assert a["from"] == "standalone differentiation" and a["verdict"] == "parity" and "training" not in alone
    assert a["reference"]["sensitivity"]["max_rel_l2"] < 1e-3
    assert abs(a["reference"]["loss"] - g["reference"]["loss"]) < 1e-6
    for b, v in a["backends"].items():
        assert v["max_rel_l2"] < 1e-5 and g["backends"][b]["max_rel_l2"] < 1e-5
    # a mismatch of the training step's gradients (here forced by a tolerance below float32 rounding) gets
    # tf_keras's own sensitivity (the same step from weights nudged by 1e-6); float32 rounding is within it: exit 0
    strict = verify(VerifyOptions(model=out, reference=VERIFY / "lstm_dropout.h5", grads=True, grad_rtol=1e-12,
                                  grad_atol=1e-30), pool=pool)
    s = strict["gradients"]
    assert s["from"] == "training step" and s["verdict"] == "mismatch"
    assert s["numeric_verdict"] == "within_reference_sensitivity" and strict["exit_code"] == 0
    sens = s["reference"]["sensitivity"]
    assert 0 < sens["max_rel_l2"] < 1e-3 and sens["weights_moved_by"] == 1e-6 and sens["runs"] >= 1
    assert all("reference_sensitivity" in r for v in s["backends"].values() for r in v["variables"])
    assert strict["training"]["status"] == "parity"


def test_training_mismatch_within_the_gradients_sensitivity_is_said_so():
    from k2to3.checks.training.gradient_check import explain_training as _explain_training

    report = {"training": {"status": "mismatch"}, "gradients": {"numeric_verdict": "within_reference_sensitivity"}}
    _explain_training(report)
    assert report["training"]["numeric_verdict"] == "within_reference_sensitivity"
    assert "ill-conditioned" in report["training"]["note"]
    real = {"training": {"status": "mismatch"}, "gradients": {"numeric_verdict": "mismatch"}}
    _explain_training(real)
    assert "numeric_verdict" not in real["training"] and "note" not in real["training"]


def test_gradient_floor_runs_on_the_held_reference_and_measure_only_the_nudge(pool, tmp_path):
    """The float32 floor of the step's gradients (a gradient mismatch's probe) is tf_keras's first step again from
    the file's weights moved by ±1e-6 relative, on the reference its steps left held: unmoved, the step gives
    tf_keras's gradients bit for bit (changes all 0: the probe measures the nudge and nothing else); moved, they
    change; and a run stopped at the gradients measures what the training noise probe's run of the same seed does,
    so the floor is the same whichever took it."""
    h5 = FIXTURES / "optimizers" / "batchnorm_adam_legacy.h5"  # Dense(3) -> BatchNormalization -> Dense(2), mse
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "x.npz", in0=rng.standard_normal((4, 4)).astype(np.float32))
    np.savez(tmp_path / "y.npz", y0=rng.standard_normal((4, 2)).astype(np.float32))
    w = pool.get("tensorflow")
    common = {"h5": str(h5), "inputs": str(tmp_path / "x.npz"), "targets": str(tmp_path / "y.npz"), "loss": None,
              "steps": 2}
    ref = w.call(FitGoldenRequest(weights_out=str(tmp_path / "ref.arrays"), grads_out=str(tmp_path / "g.arrays"),
                                  hold=True, **common))
    assert ref["available"] and ref["grads"]["names"]

    def noise(eps: float, **kw: Any) -> dict:
        got = w.call(FitNoiseRequest(weights_out=[str(tmp_path / "n.arrays")], eps=eps, seeds=[25], keep=True,
                                     held_only=True, ref_grads=str(tmp_path / "g.arrays"), **common, **kw))
        assert got["available"], got
        return got["runs"][0]

    still = noise(0.0, grads_only=True)
    assert still["grad_changes"] == [0.0] * len(ref["grads"]["names"]) and still["losses"] == ref["losses"][:1]
    moved = noise(1e-6, grads_only=True)
    assert max(moved["grad_changes"]) > 0
    assert noise(1e-6, grads=True)["grad_changes"] == moved["grad_changes"]  # the training probe's run: the same
    w.call(DropHeldRequest())


@pytest.mark.slow
def test_torch_oneDNN_crash_is_retried_without_it(pool, tmp_path):
    """oneDNN's CPU convolution backward corrupts the heap on a strided 1x1 convolution of a 60x60 input (found on
    face_classification's fer2013_mini_XCEPTION; torch 2.13 kills its worker with SIGSEGV/SIGABRT). The torch
    jobs run again with oneDNN off: gradients and the training step at parity, and the report says what the
    user's own torch training needs."""
    report = convert(Options(src=VERIFY / "strided_1x1_conv.h5", output=tmp_path / "s.keras", grads=True), pool=pool)
    g, t = report["gradients"], report["training"]
    assert g["backends"]["torch"]["status"] == "parity", g["backends"]["torch"]
    assert t["backends"]["torch"]["status"] == "parity" and report["exit_code"] == 0
    for w in report.get("workarounds", []):  # absent on a torch whose oneDNN does not crash here
        assert w["backend"] == "torch" and "mkldnn" in w["fix"]
    # a job wrapped by with_switches carries the switch on every request
    from k2to3.workers.process import with_switches

    seen = []

    class Fake:
        def call(self, req):
            seen.append(req)
            return {}

    req = DropHeldRequest(slot="keras3")
    with_switches(lambda w: w.call(req), onednn=False)(Fake())
    assert seen == [DropHeldRequest(slot="keras3", onednn=False)]


@pytest.mark.slow
def test_a_real_gradient_error_is_beyond_the_reference_sensitivity(pool, tmp_path):
    """A `.keras` whose Dense lost nothing in the forward pass but gained an L2 kernel regularizer (what a
    conversion that misplaced a regularizer would write): the outputs match, the training step's gradients do not,
    far beyond tf_keras's own sensitivity: a mismatch, exit 1, on every backend."""
    import zipfile

    out = tmp_path / "lstm.keras"
    assert convert(Options(src=VERIFY / "lstm_dropout.h5", output=out), pool=pool)["exit_code"] == 0
    bad = tmp_path / "regularized.keras"
    with zipfile.ZipFile(out) as zin, zipfile.ZipFile(bad, "w") as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "config.json":
                cfg = json.loads(data)
                probs = next(la for la in cfg["config"]["layers"] if la["config"]["name"] == "probs")
                probs["config"]["kernel_regularizer"] = {"module": "keras.regularizers", "class_name": "L2",
                                                         "config": {"l2": 0.5}, "registered_name": None}
                data = json.dumps(cfg).encode()
            zout.writestr(item, data)
    report = verify(VerifyOptions(model=bad, reference=VERIFY / "lstm_dropout.h5", grads=True), pool=pool)
    g = report["gradients"]
    assert report["backends"]["torch"]["status"] == "parity"  # the forward pass is unchanged
    assert g["verdict"] == "mismatch" and g["numeric_verdict"] == "mismatch" and report["exit_code"] == 1
    for v in g["backends"].values():
        assert v["first_divergent_variable"] == "probs/kernel" or "probs" in v["top_divergent"][0]["variable"]


def test_identical_gradients_take_the_short_path_with_the_same_figures():
    """Bit-identical arrays (tensorflow's step gradients against tf_keras's) skip the float64 passes; their figures
    are the ones the full comparison gives (a float64 copy of `got` takes the full path: another dtype)."""
    rng = np.random.default_rng(5)
    ref = [rng.standard_normal((64, 32)).astype(np.float32), np.zeros(7, np.float32),
           np.array([1e-9, -2.5, 0.0, 3.0], np.float32)]
    for r in ref:
        for rtol, atol in ((1e-4, 1e-6), (0.0, 0.0)):
            fast_norms: dict = {}
            slow_norms: dict = {}
            fast = compare_arrays(r.copy(), r, rtol, atol, output=False, norms=fast_norms)
            slow = compare_arrays(r.astype(np.float64), r, rtol, atol, output=False, norms=slow_norms)
            assert fast == slow and fast_norms == slow_norms
    rows = compare_grads(["a", "b", "c"], [r.copy() for r in ref], ["a", "b", "c"], ref, 1e-4, 1e-6)["variables"]
    slow_rows = compare_grads(["a", "b", "c"], [r.astype(np.float64) for r in ref], ["a", "b", "c"], ref, 1e-4,
                              1e-6)["variables"]
    assert rows == slow_rows
