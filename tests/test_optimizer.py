"""Optimizer state migration and --fit-steps training parity (issue 10; docs/optimizers.md).

Fixtures: tests/fixtures/make_optimizer_fixtures.py (tf_keras files trained 3 steps with each optimizer)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile

import pytest
from conftest import CORPUS, FIXTURES, ROOT

from k2to3.errors import NotPortable
from k2to3.formats.artifact import read_artifact
from k2to3.formats.optimizer_state import SCALAR_STATE, SLOTS, read_state
from k2to3.interfaces.docgen.optimizers import optimizer_rules, updated
from k2to3.upgrade import upgrade

OPT = FIXTURES / "optimizers"
MANIFEST = json.loads((OPT / "manifest.json").read_text())
NAMES = [m["name"] for m in MANIFEST]
STANDALONE = ["carnd_1560800/model.h5", "nnom/keras_mnist_model.h5", "nnom/keras_cifar10_model.h5"]


def _trainable_by_name(art) -> tuple[list[str], list[tuple[int, ...]]]:
    """Trainable weights in file order, told apart by name (BatchNormalization's moving statistics are not)."""
    ws = [e for es in art.weights.values() for e in es
          if e.name.split("/")[-1].split(":")[0] not in ("moving_mean", "moving_variance")]
    return [e.name.removesuffix(":0") for e in ws], [e.shape for e in ws]


@pytest.mark.parametrize("name", NAMES)
def test_every_fixture_slot_names_a_model_weight(name):
    art = read_artifact(OPT / f"{name}.h5")
    state = read_state(art)
    weights = {e.name.removesuffix(":0") for es in art.weights.values() for e in es}
    assert state.layout == ("optimizer_v2" if name.endswith("_legacy") else "tf.keras>=2.11")
    assert state.iteration_slot is not None
    scalars = {"iterations", *SCALAR_STATE.get(state.class_name, ())}  # optimizer-wide, no weight
    slots = [s for s in state.slots if s.slot not in scalars]
    assert len(slots) == len(state.slots) - 1 - (name == "nadam_legacy")  # optimizer_v2 Nadam: momentum_cache
    assert all(s.weight in weights for s in slots) and all(s.slot in SLOTS[state.class_name] for s in slots)
    assert all(s.weight is None and s.shape == () for s in state.slots if s.slot in scalars)


@pytest.mark.parametrize("rel", STANDALONE)
def test_standalone_keras2_slots_pair_by_order_and_shape(rel):
    if not CORPUS.is_dir():
        pytest.skip("shared corpus not found")
    art = read_artifact(CORPUS / rel)
    names, shapes = _trainable_by_name(art)
    state = read_state(art, (names, shapes))
    assert state.layout == "keras2-standalone" and art.keras_version == "2.2.4"
    ms = [s for s in state.slots if s.slot == "m"]
    assert [s.weight for s in ms] == names and [s.shape for s in ms] == [tuple(x) for x in shapes]
    # the order is proved by shapes: a swapped pair of differently shaped weights is refused, naming both
    i = next(k for k in range(len(shapes) - 1) if shapes[k] != shapes[k + 1])
    names[i], names[i + 1], shapes[i], shapes[i + 1] = names[i + 1], names[i], shapes[i + 1], shapes[i]
    with pytest.raises(NotPortable, match=r"in Keras 2\.2\.4's order it is the m of"):
        read_state(art, (names, shapes))


def _compile(optimizer_config: dict, embedding: dict | None = None) -> tuple[dict, list]:
    """The compile config k2to3 writes for a Dense model, with an Embedding of `embedding`'s config in front."""
    tc = {"loss": "mse", "optimizer_config": optimizer_config}
    first = [{"class_name": "Embedding", "config": {"name": "emb", "input_dim": 10, "output_dim": 2,
                                                     "batch_input_shape": [None, 2], **embedding}},
             {"class_name": "Flatten", "config": {"name": "f"}}] if embedding is not None else []
    dense = {"name": "d", "units": 1, **({} if first else {"batch_input_shape": [None, 2]})}
    plan = upgrade({"class_name": "Sequential", "config": {"name": "s", "layers": [
        *first, {"class_name": "Dense", "config": dense}]}}, tc)
    return plan.compile["optimizer"], plan.findings


def test_a_trained_embedding_gets_its_repeated_rows_summed():
    """K2T612: with a trainable Embedding, every update not linear in the gradient sums a sparse gradient's repeated
    rows first (k2to3>SummedRows<cls>, or the Keras2* class that already keeps Keras 2's formula); else Keras 3's."""
    opt, findings = _compile({"class_name": "Adam", "config": {"learning_rate": 0.01}}, {})
    assert opt["registered_name"] == "k2to3>SummedRowsAdam" and "k2to3_sparse_rows" not in opt["config"]
    assert [f.code for f in findings if f.code == "K2T612"] == ["K2T612"]
    assert "emb" in next(f.message for f in findings if f.code == "K2T612")
    opt, findings = _compile({"class_name": "Adam", "config": {"learning_rate": 0.01}}, {"trainable": False})
    assert opt["class_name"] == "Adam" and opt["registered_name"] is None and "K2T612" not in {f.code for f in findings}
    opt, _ = _compile({"class_name": "Adam", "config": {"learning_rate": 0.01}})
    assert opt["registered_name"] is None
    opt, _ = _compile({"class_name": "SGD", "config": {"learning_rate": 0.01, "momentum": 0.9}}, {})
    assert opt["registered_name"] is None  # linear in the gradient
    # tf.keras >= 2.11 RMSprop: Keras 3's formula with the rows summed, not Keras2RMSprop's epsilon
    opt, _ = _compile({"class_name": "RMSprop", "config": {"learning_rate": 0.01, "is_legacy_optimizer": False}}, {})
    assert opt["registered_name"] == "k2to3>SummedRowsRMSprop" and "is_legacy_optimizer" not in opt["config"]
    opt, _ = _compile({"class_name": "RMSprop", "config": {"learning_rate": 0.01}}, {})
    assert opt["registered_name"] == "k2to3>Keras2RMSprop"
    opt, findings = _compile({"class_name": "Ftrl", "config": {"learning_rate": 0.1}}, {})
    assert opt["registered_name"] == "k2to3>SummedRowsFtrl" and "K2T613" in {f.code for f in findings}
    _, findings = _compile({"class_name": "Ftrl", "config": {"learning_rate": 0.1, "is_legacy_optimizer": False}}, {})
    assert "K2T613" not in {f.code for f in findings}


def test_training_config_keeps_keras2_training_behaviour():
    opt, findings = _compile({"class_name": "Adam", "config": {"learning_rate": 0.01, "decay": 0.05}})
    assert opt["config"]["learning_rate"]["class_name"] == "InverseTimeDecay"
    assert opt["config"]["learning_rate"]["config"] == {"initial_learning_rate": 0.01, "decay_steps": 1,
                                                        "decay_rate": 0.05, "staircase": False,
                                                        "name": "InverseTimeDecay"}
    art = read_artifact(OPT / "adam_schedule.h5")
    opt, _ = _compile(art.training_config["optimizer_config"])
    assert opt["class_name"] == "Adam" and opt["config"]["learning_rate"]["config"]["name"] == "ExponentialDecay"
    opt, _ = _compile(read_artifact(OPT / "mixed_float16_lso.h5").training_config["optimizer_config"])
    assert opt["class_name"] == "LossScaleOptimizer" and opt["config"]["initial_scale"] == 1024.0
    assert opt["config"]["inner_optimizer"]["class_name"] == "Adam"
    opt, _ = _compile(read_artifact(OPT / "rmsprop_legacy.h5").training_config["optimizer_config"])
    assert opt["registered_name"] == "k2to3>Keras2RMSprop"
    opt, _ = _compile(read_artifact(OPT / "rmsprop_centered.h5").training_config["optimizer_config"])
    assert opt["class_name"] == "RMSprop" and opt["registered_name"] is None  # >= 2.11: Keras 3's formula
    opt, findings = _compile({"class_name": "Nadam", "config": {"lr": 0.002, "schedule_decay": 0.004}})
    # the schedule's decay is Keras2Nadam's own key, not turned into a learning-rate schedule (K2T605)
    assert opt["registered_name"] == "k2to3>Keras2Nadam" and "K2T605" in {f.code for f in findings}
    assert opt["config"]["schedule_decay"] == 0.004 and opt["config"]["learning_rate"] == 0.002
    assert opt["config"]["u_product_rule"] == "per_step"
    opt, findings = _compile({"class_name": "Nadam", "config": {"learning_rate": 0.002, "decay": 0.004,
                                                                "is_legacy_optimizer": True}})
    assert opt["config"]["schedule_decay"] == 0.004 and opt["config"]["learning_rate"] == 0.002
    opt, findings = _compile({"class_name": "Nadam", "config": {"learning_rate": 0.002,
                                                                "is_legacy_optimizer": False}})
    assert opt["config"]["u_product_rule"] == "tf_keras_compiled" and "K2T606" in {f.code for f in findings}


def test_optimizer_rules_doc_is_current():
    doc = (ROOT / "docs" / "optimizers.md").read_text()
    assert doc == updated(doc), "run: python -m k2to3.interfaces.docgen.optimizers --write"
    assert {r["code"] for r in optimizer_rules()} >= {"K2T601", "K2T602", "K2T605", "K2T606", "K2T607"}


def _env(backend: str) -> dict[str, str]:
    return {**os.environ, "KERAS_BACKEND": backend, "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3",
            "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _probe(script: str, backend: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, str(ROOT / "tests" / script), *args], capture_output=True, text=True,
                         env=_env(backend), check=True, timeout=600)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_update_rules_match_the_differential_probe():
    """Each rule's claim holds on the probe (same variable, gradients, hyper-parameters; 3 applies)."""
    probe = _probe("optimizer_update_probe.py", "tensorflow")
    differs = {(case, flavour): r["plain"]["max_rel"] > 1e-5 for case, row in probe.items()
               for flavour, r in row.items()}
    fixed = {(case, flavour): r["k2to3"]["max_rel"] <= 1e-5 for case, row in probe.items()
             for flavour, r in row.items()}
    # repeated rows of a sparse gradient (K2T612): every update not linear in the gradient, both layouts
    sparse = {(case, flavour) for case, row in probe.items()
              if case.endswith("_sparse") and case != "sgd_momentum_sparse" for flavour in row}
    assert {k for k, v in differs.items() if v} == {("rmsprop", "legacy"), ("rmsprop_centered", "legacy"),
                                                     ("nadam", "legacy"), ("adagrad_zero", "legacy"), *sparse}
    assert len(sparse) == 17 and not fixed[("ftrl_sparse", "legacy")]  # K2T613: optimizer_v2 Ftrl's lazy rows
    for r in optimizer_rules():
        for case, flavour in [r["probe"], *r.get("probe_also", [])] if "probe" in r else []:
            key = (case, flavour)
            if r["status"] == "portable":
                assert differs[key] and fixed[key], r["code"]
            elif r["status"] == "finding":
                assert differs[key] and not fixed[key], r["code"]
            elif r["status"] == "same":
                assert not differs[key], r["code"]


@pytest.mark.slow
def test_plain_keras3_loses_the_state():
    """The naive recipe on the same files: fresh moments and step 0 (k2to3 keeps them: test_fit_steps_parity)."""
    files = [str(OPT / f"{n}.h5") for n in ("adam_legacy", "rmsprop_centered", "batchnorm_adam_legacy")]
    lstm = str(OPT / "lstm_adam_legacy.h5")
    res = _probe("optimizer_plain_probe.py", "jax", *files, lstm)
    for f in files:
        assert res[f]["iterations"] == 0 and res[f]["max_abs_slot"] == 0.0 and res[f]["n_slots"] > 0, res[f]
    assert "time_major" in res[lstm]["error"]  # plain Keras 3 does not even load the LSTM file


# One convert per file with --fit-steps 5 on tensorflow, torch and jax (the session's warm pool): the optimizer
# state as each backend loads it, and 5 training steps against tf_keras on the original file.
E2E = ["adam_legacy", "rmsprop_legacy", "adam_decay_legacy", "adam_schedule", "mixed_float16_lso",
       "lstm_adam_legacy", "batchnorm_adam_legacy", "nadam", "nadam_legacy"]


@pytest.fixture(scope="module")
def fitted(pool, tmp_path_factory):
    from conftest import ARTIFACTS

    from k2to3.core.options import ConvertOptions as Options
    from k2to3.pipeline.convert import convert

    out, d = {}, tmp_path_factory.mktemp("opt")
    ARTIFACTS.mkdir(exist_ok=True)
    with open(ARTIFACTS / "optimizer_fit.jsonl", "a") as fh:
        for n in E2E:
            out[n] = convert(Options(src=OPT / f"{n}.h5", output=d / f"{n}.keras", fit_steps=5), pool=pool)
            t = out[n].get("training", {})
            fh.write(json.dumps({"model": n, **{b: {k: v.get(k) for k in ("status", "weights_max_abs",
                                                                          "weights_max_rel", "loss_max_rel")}
                                                for b, v in t.get("backends", {}).items()}}) + "\n")
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", E2E)
def test_fit_steps_parity(fitted, name):
    r = fitted[name]
    opt = r["optimizer"]
    assert opt["status"] == "restored" and opt["iteration"] == 3 and opt["ledger"]["complete"], opt
    t = r["training"]
    assert t["reference"]["state_loaded"] and t["steps"] == 5
    for b in ("tensorflow", "torch", "jax"):
        be = t["backends"][b]
        # every slot and the iteration, as the backend loaded them from the .keras, are the file's bit for bit
        assert be["state_as_loaded"]["equal"] == be["state_as_loaded"]["slots"] == opt["n_saved"], (b, be)
        assert be["iterations_after"] == t["reference"]["iterations_after"]
        assert be["status"] == "parity", (b, be["first_divergent_weight"], be["weights_max_abs"])
    assert r["verdict"] == "parity" and t["status"] == "parity"
    if name.startswith("nadam"):  # Keras2Nadam carries Keras 2's momentum product (K2T605 optimizer_v2, K2T606)
        assert {"nadam": "K2T606", "nadam_legacy": "K2T605"}[name] in {f["code"] for f in r["findings"]}
        assert opt["keras3_class"] == "Keras2Nadam"
    if name == "mixed_float16_lso":
        assert opt["keras3_class"] == "LossScaleOptimizer" and "by saved variable name" in \
            t["reference"]["state_source"]


@pytest.mark.slow
def test_saved_compile_config_lets_each_backend_choose_jit(fitted):
    """Keras saves compile's resolved jit_compile (False under TensorFlow on a CPU); k2to3 saves "auto", so jax
    compiles its training step instead of running it eagerly, and TensorFlow on a CPU still does not."""
    path = fitted["adam_legacy"]["output"]["path"]
    with zipfile.ZipFile(path) as z:
        assert json.loads(z.read("config.json"))["compile_config"]["jit_compile"] == "auto"
    script = ("import sys, keras, k2to3.portable; "
              "print(keras.saving.load_model(sys.argv[1], safe_mode=True).jit_compile)")
    for backend, expected in (("jax", "True"), ("tensorflow", "False"), ("torch", "False")):
        out = subprocess.run([sys.executable, "-c", script, path], capture_output=True, text=True,
                             env=_env(backend), check=True, timeout=300)
        assert out.stdout.strip().splitlines()[-1] == expected, (backend, out.stdout[-300:])


def test_targets_and_loss_need_fit_steps(tmp_path):
    from k2to3.core.options import ConvertOptions as Options
    from k2to3.errors import InputError
    from k2to3.pipeline.convert import check_paths

    with pytest.raises(InputError, match="--loss applies to --fit-steps and --grads only"):
        check_paths(Options(src=OPT / "adam_legacy.h5", output=tmp_path / "m.keras", loss="mse"))
    (tmp_path / "y.npz").write_bytes(b"")
    with pytest.raises(InputError, match="--targets applies to --fit-steps only"):
        check_paths(Options(src=OPT / "adam_legacy.h5", output=tmp_path / "m.keras", targets=tmp_path / "y.npz"))
    (tmp_path / "y.npz").unlink()
    check_paths(Options(src=OPT / "adam_legacy.h5", output=tmp_path / "m.keras", loss="mse", grads=True))
    with pytest.raises(InputError, match=r"--targets .*no such file"):
        check_paths(Options(src=OPT / "adam_legacy.h5", output=tmp_path / "m.keras", fit_steps=1,
                            targets=tmp_path / "y.npz"))


def test_seeded_targets_are_typed_for_the_loss(tmp_path):
    import numpy as np

    from k2to3.checks.training.batch import load_targets
    from k2to3.core.seeds import make_targets
    from k2to3.errors import InputError

    outs = [np.zeros((2, 4), "float32")] * 4
    onehot, sparse, binary, reg = make_targets(["categorical_crossentropy", "sparse_categorical_crossentropy",
                                                "binary_crossentropy", "mean_squared_error"], outs)
    assert (onehot.sum(-1) == 1).all() and sparse.shape == (2,) and sparse.dtype == np.int32
    assert set(np.unique(binary)) <= {0.0, 1.0} and reg.dtype == np.float32 and reg.std() > 0
    np.savez(tmp_path / "y.npz", y0=np.zeros((3, 4)))
    with pytest.raises(InputError, match="target 0 has batch 3"):
        load_targets(tmp_path / "y.npz", outs[:1])


@pytest.mark.slow
def test_real_lstm_file_resumes_training_on_every_backend(pool, tmp_path):
    """ethnicolr's wiki_name_lstm.h5 (tf.keras 2.5, Adam at step 60260): state restored and loaded bit for bit on
    each backend, and 3 training steps agree with tf_keras's on the original file."""
    from k2to3.core.options import ConvertOptions as Options
    from k2to3.pipeline.convert import convert

    if not CORPUS.is_dir():
        pytest.skip("shared corpus not found")
    r = convert(Options(src=CORPUS / "ethnicolr" / "wiki_name_lstm.h5", output=tmp_path / "m.keras", fit_steps=3),
                pool=pool)
    assert r["optimizer"]["status"] == "restored" and r["optimizer"]["iteration"] == 60260
    t = r["training"]
    assert t["status"] == "parity" and t["reference"]["state_source"] == "tf_keras"
    for b in ("tensorflow", "torch", "jax"):
        assert t["backends"][b]["state_as_loaded"] == {"slots": 13, "equal": 13, "differ": []}
        assert t["backends"][b]["iterations_after"] == 60263


@pytest.mark.slow
def test_real_embedding_file_trains_as_keras2_on_tensorflow_too(pool, tmp_path):
    """ethnicolr's fl_all_ln_lstm.h5 (Embedding + LSTM, Adam): batches repeat tokens, and Keras 3's own Adam on the
    TensorFlow backend moved the Embedding 9.7e-3 from tf_keras in 3 steps (torch and jax at parity). With
    k2to3>SummedRowsAdam (K2T612) all three backends train as tf_keras does, and the file loads in safe mode."""
    from k2to3.core.options import ConvertOptions as Options
    from k2to3.pipeline.convert import convert

    if not CORPUS.is_dir():
        pytest.skip("shared corpus not found")
    out = tmp_path / "m.keras"
    r = convert(Options(src=CORPUS / "ethnicolr" / "fl_all_ln_lstm.h5", output=out, fit_steps=3), pool=pool)
    assert r["exit_code"] == 0 and r["training"]["status"] == "parity", r["training"]
    assert "K2T612" in {f["code"] for f in r["findings"]} and r["output"]["needs_k2to3_portable"]
    for b in ("tensorflow", "torch", "jax"):
        assert r["training"]["backends"][b]["weights_max_abs"] < 1e-5, b
    config = json.loads(zipfile.ZipFile(out).read("config.json"))
    assert config["compile_config"]["optimizer"]["registered_name"] == "k2to3>SummedRowsAdam"


@pytest.mark.slow
def test_compile_sgd_string_file_converts_and_resumes(pool, tmp_path):
    """model.compile("sgd") in tf_keras >= 2.11 saves an `m` slot per variable although momentum is 0 (it never
    enters an update there); Keras 3's SGD has none. The slots are ignored, not a crash, and training resumes."""
    from k2to3.core.options import ConvertOptions as Options
    from k2to3.pipeline.convert import convert

    src = tmp_path / "sgd.h5"
    subprocess.run([sys.executable, str(FIXTURES / "make_sgd_default.py"), str(src)], check=True,
                   capture_output=True, timeout=300)
    r = convert(Options(src=src, output=tmp_path / "m.keras", fit_steps=2), pool=pool)
    assert r["exit_code"] == 0, r.get("error") or r["verdict"]
    assert r["optimizer"]["status"] == "restored" and r["optimizer"]["iteration"] == 1
    assert r["optimizer"]["ledger"]["ignored"] == 6  # kernel and bias of two Dense, gamma and beta of the BN
    assert r["training"]["status"] == "parity"


@pytest.mark.slow
def test_a_bad_targets_file_is_one_line_with_the_steps_joined_to_verification(pool, tmp_path):
    """The training steps run in the verification's round (schedule.fused): a --targets file whose batch is not the
    inputs' stops before any work, one whose array count is not the model's after the round; both an InputError
    (exit 2) naming the file, no .keras left behind; a good one trains at parity."""
    import numpy as np

    from k2to3.core.options import ConvertOptions as Options
    from k2to3.errors import Exit, InputError
    from k2to3.pipeline.convert import convert

    src = OPT / "adam_legacy.h5"
    units = [la for la in read_artifact(src).model_config["config"]["layers"]
             if la["class_name"] == "Dense"][-1]["config"]["units"]
    np.savez(tmp_path / "batch.npz", y0=np.zeros((3, units), "float32"))
    np.savez(tmp_path / "count.npz", y0=np.zeros((2, units), "float32"), y1=np.zeros((2, units), "float32"))
    np.savez(tmp_path / "good.npz", y0=np.random.default_rng(0).standard_normal((2, units)).astype("float32"))
    for name, words in (("batch", "target 0 has batch 3, the inputs 2"), ("count", "2 arrays for a model with 1")):
        out = tmp_path / f"{name}.keras"
        with pytest.raises(InputError) as exc:
            convert(Options(src=src, output=out, fit_steps=1, targets=tmp_path / f"{name}.npz"), pool=pool)
        assert words in exc.value.line() and exc.value.code == Exit.USAGE, exc.value.line()
        assert not out.exists()
    r = convert(Options(src=src, output=tmp_path / "good.keras", fit_steps=1, targets=tmp_path / "good.npz"),
                pool=pool)
    assert r["training"]["targets"].endswith("good.npz") and r["training"]["status"] == "parity", r["training"]
