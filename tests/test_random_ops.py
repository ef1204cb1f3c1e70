"""Models whose graph draws random numbers (a VAE's sampling step) convert with `--src`: the draws become keras.random
calls on a SeedGenerator their layer owns (source/seed_generators.py), and verification draws one fixed pattern on
every side (workers/fixed_random.py), so the arithmetic around the draws is compared value by value.

Fixture: tests/fixtures/random/vae_sampling.h5 (tests/fixtures/make_random_fixtures.py), built from
tests/fixtures/src/vae_sampling.py, whose three sampling steps are written as in the zoo's real repositories
(bench/zoo/manifest.toml: seq-vae-timeseries, generating-music-vae, sketch-vae-sampling)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import FIXTURES

H5 = FIXTURES / "random" / "vae_sampling.h5"
SRC = FIXTURES / "src"


def _convert(tmp_path, *args):
    out = tmp_path / "vae.keras"
    r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(H5), "-o", str(out), "--json", *args],
                       capture_output=True, text=True, timeout=900)
    report_path = tmp_path / "vae.keras.report" / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    return r, report, out


@pytest.mark.slow
def test_vae_sampling_converts_at_parity_with_its_source(tmp_path):
    r, report, out = _convert(tmp_path, "--src", str(SRC / "vae_sampling.py"))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert report["verdict"] == "parity"
    assert set(report["backends"]) == {"tensorflow", "torch", "jax"}
    assert "fixed pattern" in report["reference"]["random"]
    module = (tmp_path / "vae_k3.py").read_text()
    # every draw is a keras.random call seeded by its layer; the two Lambdas own one each, the class is decorated
    assert module.count("seed=_k2to3_seed()") == 3 and "tf." not in module.replace("tf.keras", "")
    assert "Sampling = _k2to3_seeded(Sampling)" in module
    config = json.dumps(report)
    assert "K2to3RandomLambda" in (tmp_path / "vae.keras").read_bytes().decode("latin-1") or "K2to3RandomLambda" \
        in config
    # the saved model draws on its own, anew on each call, on a backend that needs the SeedGenerator (jax)
    probe = ("import sys, numpy as np, keras; sys.path.insert(0, sys.argv[1]); import vae_k3\n"
             "m = keras.saving.load_model(sys.argv[2], safe_mode=True)\n"
             "x = np.ones((2, 12), 'float32')\n"
             "a, b = m.predict(x, verbose=0)[2], m.predict(x, verbose=0)[2]\n"
             "print(float(np.abs(a - b).max()))\n")
    p = subprocess.run([sys.executable, "-c", probe, str(tmp_path), str(out)], capture_output=True, text=True,
                       env={**__import__("os").environ, "KERAS_BACKEND": "jax"}, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert float(p.stdout.strip().splitlines()[-1]) > 1e-3  # two draws, not one traced constant


@pytest.mark.slow
def test_a_wrong_noise_scale_still_shows_under_the_fixed_pattern(tmp_path):
    """The golden runs the file's own Lambda bytecode (--trust-bytecode); the source given scales the noise of one
    Lambda differently: a pattern of zeros (the mean alone) would hide it, the fixed pattern does not."""
    text = (SRC / "vae_sampling.py").read_text()
    wrong = tmp_path / "src" / "vae_sampling.py"
    wrong.parent.mkdir()
    wrong.write_text(text.replace("K.exp(z_log_var / 2) * epsilon", "K.exp(z_log_var) * epsilon"))
    assert wrong.read_text() != text
    r, report, _ = _convert(tmp_path, "--src", str(wrong), "--trust-bytecode")
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert report["verdict"] == "mismatch"
    z = {b: v["outputs"][2] for b, v in report["backends"].items()}
    assert all(not o["allclose"] and o["max_abs"] > 1e-2 for o in z.values()), z
    assert all(v["outputs"][0]["allclose"] for v in report["backends"].values())  # z_mean draws nothing


@pytest.mark.slow
def test_the_right_source_with_the_files_bytecode_as_golden_is_parity(tmp_path):
    r, report, _ = _convert(tmp_path, "--src", str(SRC / "vae_sampling.py"), "--trust-bytecode")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert report["reference"]["from"] == "the file's Lambda bytecode (--trust-bytecode)"


def _prepared(tmp_path, h5):
    from k2to3.formats import open_input
    from k2to3.pipeline.prepare import prepare
    from k2to3.pipeline.sources import read_sources

    inp = open_input(FIXTURES / "random" / h5, tmp_path)
    return prepare(inp, read_sources((str(SRC / "vae_script.py"),)), tmp_path / "m.keras", False)


@pytest.mark.parametrize("h5,site,nth", [("script_encoder.h5", 33, "2nd"), ("script_decoder.h5", 30, "1st"),
                                         ("script_encoder_keras212.h5", 33, "2nd")])
def test_an_unnamed_lambda_is_matched_by_its_automatic_name(tmp_path, h5, site, nth):
    """Two unnamed module-level Lambdas in one script: Keras named them in creation order (tf.keras from 0:
    `lambda`, `lambda_1`; standalone Keras 2.1.2 from 1: `lambda_1`, `lambda_2`), which picks the call site. The
    settings dict also holding an optimizer object gives its literal entries (`Config["latent_dim"]`)."""
    prepared = _prepared(tmp_path, h5)
    assert not prepared.plan.errors, [f.message for f in prepared.plan.errors]
    how = [f.message for f in prepared.plan.findings if "Lambda rebuilt from the source" in f.message]
    assert len(how) == 1 and f"vae_script.py:{site}, matched by its automatic name: the {nth} Lambda" in how[0], how
    res = prepared.resolution
    if nth == "1st":
        assert "'latent_dim': 3" in res.k3_code and "not 'optimizer'" in res.k3_code and "Adam" not in res.k3_code


@pytest.mark.slow
def test_the_standalone_keras_file_converts_at_parity(tmp_path):
    out = tmp_path / "enc.keras"
    r = subprocess.run([sys.executable, "-m", "k2to3", "convert", str(FIXTURES / "random" / "script_decoder.h5"),
                        "--src", str(SRC / "vae_script.py"), "-o", str(out)], capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    report = json.loads((tmp_path / "enc.keras.report" / "report.json").read_text())
    assert report["verdict"] == "parity" and "random" in report["reference"]


def test_a_keras_backend_call_recorded_as_a_tfoplambda_is_its_k_entry():
    """tf.keras records `tf.keras.backend.binary_crossentropy(...)` on Keras tensors as a TFOpLambda whose function
    is "keras.backend.binary_crossentropy" (jecas/Generating_music's VAE loss): the K entry translates it."""
    from k2to3.core import optable as ops

    e = ops.lookup("keras.backend.binary_crossentropy")
    assert e.k == ("binary_crossentropy",) and e.target == "keras.ops.binary_crossentropy"
    assert ops.check("keras.backend.binary_crossentropy", {"output": [1.0], "from_logits": False}) is None
    assert ops.check("keras.backend.not_a_function", {}) is not None
