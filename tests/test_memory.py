"""The memory budget (--max-memory): per-process peak RSS in the report, and verifications that run one after
another when the budget is tight, with the same verdict and figures as side by side."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest
from conftest import H5
from test_cli import k2to3, one_error_line

from k2to3.workers.memory import MB, parse_size
from k2to3.workers.pool import IDLE_MB, JOB_MIN_MB, Pool

MODEL = H5 / "fm02_training_config.h5"


def _convert(tmp_path, name: str, *extra: str) -> dict:
    r = k2to3("convert", str(MODEL), "-o", str(tmp_path / f"{name}.keras"), "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_tiny_budget_runs_verifications_one_after_another(tmp_path, monkeypatch):
    monkeypatch.setenv("K2TO3_CORES", "8")  # cores for all three side by side, whatever this machine has
    wide = _convert(tmp_path, "wide", "--max-memory", "64G")
    tight = _convert(tmp_path, "tight", "--max-memory", "1M")
    for rep in (wide, tight):
        mem = rep["memory"]
        assert set(mem["workers"]) == {"tensorflow", "torch", "jax"}
        for figures in mem["workers"].values():
            assert figures["peak_rss_mb"] > 0 and figures["idle_rss_mb"] > 0
            assert figures["peak_rss_mb"] >= figures["idle_rss_mb"]
        assert mem["parent_peak_rss_mb"] > 0
        assert mem["budget_source"] == "--max-memory"
    assert wide["memory"]["budget_mb"] == 64 * 1024 and tight["memory"]["budget_mb"] == 1.0
    assert wide["memory"]["cores"] == 8 and wide["memory"]["max_parallel"] == 8
    # 64G: torch and jax verify while the tensorflow worker computes the golden
    assert not wide["memory"]["sequential"]
    assert any(e["concurrent"] for e in wide["memory"]["schedule"])
    # 1M: nothing fits, so one role at a time, in order, each starting after the previous one ended
    sched = tight["memory"]["schedule"]
    assert tight["memory"]["sequential"]
    assert [e["role"] for e in sched] == ["tensorflow", "torch", "jax"]
    assert all(e["over_budget"] and not e["concurrent"] for e in sched)
    for before, after in pairwise(sched):
        assert after["start_s"] >= before["end_s"]
    # the schedule changes nothing in the result
    assert tight["verdict"] == wide["verdict"] == "parity"
    for b in ("tensorflow", "torch", "jax"):
        w, t = wide["backends"][b], tight["backends"][b]
        assert t["status"] == w["status"] == "parity"
        assert t["weight_hash"] == w["weight_hash"]
        assert [o["max_abs"] for o in t["outputs"]] == [o["max_abs"] for o in w["outputs"]]


@pytest.mark.parametrize("value", ["lots", "0", "-3G", "4Q", ""])
def test_bad_max_memory_is_one_line(tmp_path, value):
    out = tmp_path / "o.keras"
    r = k2to3("convert", str(MODEL), "-o", str(out), "--max-memory", value)
    assert r.returncode == 2
    assert "--max-memory" in one_error_line(r)
    assert not out.exists()


def test_parse_size():
    assert parse_size("4G") == 4 * 1024 * MB
    assert parse_size("1500M") == 1500 * MB
    assert parse_size("2.5GB") == int(2.5 * 1024 * MB)
    assert parse_size("800MiB") == 800 * MB
    assert parse_size("123456") == 123456
    for bad in ("", "G", "x", "0", "-1M"):
        with pytest.raises(ValueError):
            parse_size(bad)


def test_estimates_and_fit_without_workers():
    pool = Pool(max_memory=int(1.2 * IDLE_MB["tensorflow"] * MB))
    assert pool.budget_source == "--max-memory"
    weights = 100 * MB
    assert pool.job_bytes("torch", weights) > pool.idle_bytes("torch") + weights  # copies of the weights
    assert pool.job_bytes("jax", 0) == pool.idle_bytes("jax") + int(JOB_MIN_MB * MB)
    assert pool.job_bytes("jax", 2 * weights) > pool.job_bytes("jax", weights)
    assert not pool.fits(["tensorflow", "torch", "jax"], weights)
    assert Pool(max_memory=64 * 1024 * MB).fits(["tensorflow", "torch", "jax"], weights)
    default = Pool()
    assert default.max_memory is None or default.max_memory > 0


def test_one_core_verifies_one_backend_at_a_time_whatever_the_budget(tmp_path, monkeypatch):
    """At most one backend per core: the default schedule is bounded by cores as well as by the budget (a budget
    everything fits changes nothing), with the same result."""
    monkeypatch.setenv("K2TO3_CORES", "1")
    rep = _convert(tmp_path, "one", "--max-memory", "64G")
    mem = rep["memory"]
    assert mem["cores"] == 1 and mem["max_parallel"] == 1
    assert mem["sequential"]
    sched = mem["schedule"]
    assert [e["role"] for e in sched] == ["tensorflow", "torch", "jax"]
    assert not any(e["over_budget"] for e in sched)  # the cores serialised them, not the budget
    for before, after in pairwise(sched):
        assert after["start_s"] >= before["end_s"]
    assert rep["verdict"] == "parity" and rep["weight_hashes_agree"]


def test_max_parallel_follows_cores(monkeypatch):
    for cores, expect in (("1", 1), ("2", 2), ("3", 3), ("64", 64)):  # one backend per core, both kinds of pool
        monkeypatch.setenv("K2TO3_CORES", cores)
        assert Pool(max_memory=64 * 1024 * MB, one_shot=True).max_parallel == expect  # convert's own pool
        assert Pool(max_memory=64 * 1024 * MB).max_parallel == expect  # a warm pool
    monkeypatch.setenv("K2TO3_CORES", "lots")  # ignored: the machine's own cores
    assert Pool().cores >= 1


def test_one_at_a_time_keeps_one_worker_resident_only_in_a_one_shot_pool(monkeypatch):
    """Serialised by the cores, a warm pool keeps its workers for the next model; a one-shot pool (convert's
    own) shuts each finished one down before the next starts, so one backend process is resident at a time."""
    monkeypatch.setenv("K2TO3_CORES", "1")  # one core: both kinds of pool run one backend at a time
    with Pool(max_memory=64 * 1024 * MB) as pool:
        jobs = {r: [lambda w: w.proc.pid] for r in ("tensorflow", "torch", "jax")}
        done = pool.run(jobs, 0)
        pids = {r: f[0].result() for r, f in done.items()}
        assert pool.workers.keys() == pids.keys()  # warm: all three still there
        assert all(w.proc.poll() is None for w in pool.workers.values())
        pool.one_shot = True
        done = pool.run(jobs, 0)
        assert {r: f[0].result() for r, f in done.items()} == pids  # the same warm processes served it
        assert list(pool.workers) == ["jax"]  # tensorflow and torch were shut down when their turn ended
        assert pool.schedule and all(not e["concurrent"] for e in pool.schedule)


def test_side_by_side_one_shot_pool_shuts_each_finished_worker_down(monkeypatch):
    """convert with agreeing outputs needs no worker after its verification round: with release_finished, a
    one-shot pool closes each worker as soon as its own jobs are done, so a finished backend's resident set is
    not summed with those still working (a warm pool keeps them)."""
    monkeypatch.setenv("K2TO3_CORES", "2")
    with Pool(("tensorflow", "torch"), golden=False, max_memory=64 * 1024 * MB) as pool:
        jobs = {"tensorflow": [lambda w: w.proc.pid], "torch": [lambda w: w.proc.pid]}
        pool.run(jobs, 0, release_finished=True)
        assert set(pool.workers) == {"tensorflow", "torch"}  # not one-shot: kept for the next model
        pool.one_shot = True
        done = pool.run(jobs, 0, release_finished=True)
        procs = [f[0].result() for f in done.values()]
        assert not pool.workers and len(procs) == 2
        assert pool.schedule[1]["concurrent"] == ["tensorflow"]  # side by side, then each one closed
        assert set(pool.stats) >= {"tensorflow", "torch"}  # their measured figures outlive them (report)


@pytest.mark.parametrize("backend", ["tensorflow", "torch"])
def test_eager_forward_frees_intermediates_with_the_same_outputs(backend):
    """Keras 3's functional executor holds every activation until the call returns; the workers' forward pass
    (graphrun.freeing_intermediates) drops each one after its last use, with bit-identical outputs on shared
    layers, nested models, a tensor consumed twice by one node and dict outputs."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3", "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(root / "tests" / "graphrun_probe.py"), str(root / "src")],
                         capture_output=True, text=True, env=env, timeout=600, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["multi"] == {"active": True, "equal": True} and r["conv"] == {"active": True, "equal": True}
    # 24 activations of 32 MB: Keras's executor holds them all (~770 MB), the freeing one about two at a time
    assert r["keras_peak_mb"] > 600 and r["freeing_peak_mb"] < 200, r


@pytest.mark.slow
def test_sliced_restore_gives_the_same_weights(tmp_path, monkeypatch):
    """Large tensors move by slices of their first axis everywhere a worker holds weights: k2to3's restore
    (weights.Restorer.assign_in_slices), Keras 3's save of the .keras and its load in each backend, and
    tf_keras's golden load (workers/large_weights.py). K2TO3_SLICED_BYTES=16 sends every dataset of 16 bytes or more
    through those paths, by slices of one row, for three small models (nested and shared layers, a
    BatchNormalization with a (1, 1, C) gamma reshaped, an LSTM): every backend's loaded weights hash the same
    as the whole-array restore's, the saved weights files hold the same datasets, with parity."""
    import zipfile

    import h5py
    import numpy as np

    from k2to3.core.options import ConvertOptions as Options
    from k2to3.pipeline.convert import convert

    def datasets(keras_file):
        out = {}
        with zipfile.ZipFile(keras_file) as zf, zf.open("model.weights.h5") as fh, h5py.File(fh, "r") as f:
            f.visititems(lambda name, obj: out.__setitem__(name, np.asarray(obj)) if isinstance(obj, h5py.Dataset)
                         else None)
        return out

    reports = {}
    for name in ("fm03_nested_shared.h5", "fm21_bn_virtual_batch_size.h5", "embedding_lstm.h5"):
        plain = convert(Options(src=H5 / name, output=tmp_path / f"plain-{name}.keras", backends=("tensorflow",)))
        monkeypatch.setenv("K2TO3_SLICED_BYTES", "16")
        sliced = convert(Options(src=H5 / name, output=tmp_path / f"sliced-{name}.keras"))
        monkeypatch.delenv("K2TO3_SLICED_BYTES")
        assert sliced["verdict"] == plain["verdict"] == "parity", name
        assert sliced["build"]["weight_hash"] == plain["build"]["weight_hash"], name
        assert {b: r["weight_hash"] for b, r in sliced["backends"].items()} == \
            dict.fromkeys(("tensorflow", "torch", "jax"), plain["build"]["weight_hash"]), name
        assert sliced["ledger"]["params_restored"] == plain["ledger"]["params_restored"]
        assert sliced["ledger"]["sliced"] > 0 and plain["ledger"]["sliced"] == 0, name
        a, b = datasets(tmp_path / f"plain-{name}.keras"), datasets(tmp_path / f"sliced-{name}.keras")
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype for k in a)
        reports[name] = sliced
    assert reports


def test_chunked_weight_hash_is_the_whole_arrays_hash():
    """A large variable is hashed slice by slice of its first axis (workers/large_weights.py): the same digest as the
    whole array, and a different one when a slice is missing, reordered or has another shape."""
    import numpy as np

    from k2to3.workers.chunked_arrays import Chunked, weight_hash

    a = np.arange(5 * 3 * 2, dtype="float32").reshape(5, 3, 2)
    b = np.ones((4,), dtype="float32")
    whole = weight_hash([a, b])
    assert weight_hash([Chunked(a.shape, [a[:2], a[2:4], a[4:]]), b]) == whole
    assert weight_hash([Chunked(a.shape, [a[:2], a[4:]]), b]) != whole
    assert weight_hash([Chunked(a.shape, [a[2:], a[:2]]), b]) != whole
    assert weight_hash([Chunked((5, 6), [a.reshape(5, 6)]), b]) != whole


def test_jax_compilation_cache_per_machine_and_off_switch(tmp_path, monkeypatch):
    """The jax worker keeps jax's persistent compilation cache in K2TO3_CACHE_DIR/jax/<machine-cpu>/ (every
    program here: JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS=0), a second conversion is served from it with the
    same numbers, and K2TO3_JAX_CACHE=off writes nothing."""
    from k2to3.core.options import ConvertOptions as Options
    from k2to3.pipeline.convert import convert

    monkeypatch.setenv("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    monkeypatch.setenv("K2TO3_CACHE_DIR", str(tmp_path / "cache"))
    first = convert(Options(src=H5 / "fm07_conv1d.h5", output=tmp_path / "a.keras", backends=("jax",)))
    machine_dirs = list((tmp_path / "cache" / "jax").iterdir())
    assert len(machine_dirs) == 1 and machine_dirs[0].name.startswith(("x86_64-", "aarch64-", "arm64-"))
    entries = {p.name for p in machine_dirs[0].iterdir()}
    assert entries
    warm = convert(Options(src=H5 / "fm07_conv1d.h5", output=tmp_path / "b.keras", backends=("jax",)))
    assert {p.name for p in machine_dirs[0].iterdir()} == entries  # nothing compiled anew
    monkeypatch.setenv("K2TO3_JAX_CACHE", "off")
    monkeypatch.setenv("K2TO3_CACHE_DIR", str(tmp_path / "off"))
    cold = convert(Options(src=H5 / "fm07_conv1d.h5", output=tmp_path / "c.keras", backends=("jax",)))
    assert not (tmp_path / "off" / "jax").exists()
    for r in (first, warm, cold):
        assert r["verdict"] == "parity"
    errs = [r["backends"]["jax"]["outputs"] for r in (first, warm, cold)]
    assert errs[0] == errs[1] == errs[2]


def test_constant_initializers_compile_nothing_on_jax_and_give_the_same_values():
    """While a worker loads a model, Zeros and Ones initializers (biases, BatchNormalization, optimizer slots) make
    their tensors from host arrays: jnp.zeros / jnp.ones compile one XLA program per shape on jax. Same values,
    dtypes and shapes as Keras's own; Keras's initializers are back afterwards."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    code = """
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np, jax, keras
from keras.src.initializers import constant_initializers as const
from k2to3.workers.runtime import constant_initializers
real = (const.Zeros.__call__, const.Ones.__call__)
shapes = [(3, 5, 7), (11,), (2, 13)]
compiled = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, secs, **kw: compiled.append(event) if "backend_compile" in event else None)
with constant_initializers(keras):
    got = [(np.asarray(keras.initializers.Zeros()(s, "float32")), np.asarray(keras.initializers.Ones()(s, "float16")))
           for s in shapes]
during = len(compiled)
keras.initializers.Ones()((17, 19), "float32")
print(json.dumps({"during": during, "after": len(compiled) - during,
                  "restored": (const.Zeros.__call__, const.Ones.__call__) == real,
                  "values": all(z.shape == s and o.shape == s and z.dtype == np.float32 and o.dtype == np.float16
                                and not z.any() and (o == 1).all() for (z, o), s in zip(got, shapes))}))
"""
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", code, str(root / "src")], capture_output=True, text=True, env=env,
                         timeout=300, check=True)
    r = json.loads(out.stdout.strip().splitlines()[-1])
    # nothing compiled while loading; Keras's own ones, after, does compile (the test can see a compile)
    assert r["during"] == 0 and r["after"] >= 1 and r["restored"] and r["values"], r
