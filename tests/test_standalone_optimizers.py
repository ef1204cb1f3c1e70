"""Standalone Keras 2 (2.0-2.3) optimizer state: unnamed (or 2.3-named) slots paired by the order of the file's
Keras version (k2to3.formats.optimizer_state.STANDALONE_LAYOUTS, read from keras/optimizers.py at each tag) and proved
by shapes; restored into the Keras 3 optimizer of the `.keras` (docs/optimizers.md#k2t608).

Fixtures: tests/fixtures/make_standalone_optimizer_fixtures.py (h5py, Keras 2's save_model layout); the real
Keras 2.0.5 files of ../shared/corpus/real-h5/face_classification."""

from __future__ import annotations

import io
import json
import sys
import zipfile

import h5py
import numpy as np
import pytest
from conftest import CORPUS, FIXTURES

from k2to3.errors import NotPortable
from k2to3.formats.artifact import read_artifact
from k2to3.formats.optimizer_state import read_state

sys.path.insert(0, str(FIXTURES))
from make_standalone_optimizer_fixtures import CASES, WEIGHTS, source_slot

OPT = FIXTURES / "optimizers"
KINDS = {"moment": "momentum"}  # the fixture's list names -> k2to3's slot kinds (else equal)
FACES = ["fer2013_big_XCEPTION.54-0.66.hdf5", "fer2013_mini_XCEPTION.102-0.66.hdf5",
         "gender_mini_XCEPTION.21-0.95.hdf5", "tiny_XCEPTION_KDEF.hdf5"]


def _trainable(art) -> tuple[list[str], list[tuple[int, ...]]]:
    ws = [e for es in art.weights.values() for e in es
          if e.name.split("/")[-1].split(":")[0] not in ("moving_mean", "moving_variance")]
    return [e.name.removesuffix(":0") for e in ws], [e.shape for e in ws]


@pytest.mark.parametrize("name", list(CASES))
def test_slots_pair_with_the_weight_keras2_gave_them(name):
    """Every slot lands on the weight (and the slot kind) whose trained tensor the fixture stored there."""
    src, cls, _, version, head, lists = CASES[name]
    art = read_artifact(OPT / f"{name}.h5")
    state = read_state(art, _trainable(art))
    assert state.layout == "keras2-standalone" and state.class_name == cls and art.keras_version == version
    assert [s.slot for s in state.slots[:len(head)]] == head
    assert state.iteration == (3 if "iterations" in head else None)
    slots = state.slots[len(head):]
    assert [s.slot for s in slots] == [KINDS.get(k, k) for k, _ in lists for _ in WEIGHTS]
    with h5py.File(OPT / f"{name}.h5") as f, h5py.File(OPT / f"{src}.h5") as g:
        for s, (_kind, src_slot) in zip(slots, [kl for kl in lists for _ in WEIGHTS]):
            if src_slot is not None:
                np.testing.assert_array_equal(np.asarray(f[s.h5path]), source_slot(g, s.weight, src_slot))
    if version == "2.0.5":  # Keras 2.0.0-2.0.5 sorted the collected trainable weights by name
        assert [s.weight for s in slots[:4]] == sorted(WEIGHTS)


def test_a_wrong_order_is_refused_with_the_slot_and_both_shapes():
    art = read_artifact(OPT / "k2_adamax.h5")
    names, shapes = _trainable(art)
    with pytest.raises(NotPortable, match=r"'training/Adamax/Variable:0' has shape \(4, 3\); in Keras 2.2.4's order "
                                          r"it is the m of 'd1/bias'"):
        read_state(art, ([names[1], names[0], *names[2:]], [shapes[1], shapes[0], *shapes[2:]]))
    art.keras_version = "2.1.6-tf"  # tf.keras 1.x: not the standalone order
    with pytest.raises(NotPortable, match="is not a standalone Keras 2 release"):
        read_state(art, (names, shapes))


@pytest.mark.parametrize("rel", FACES)
def test_real_keras_205_adam_pairs_in_name_order(rel):
    """The issue's Keras 2.0.5 files: the first moment is not the first layer's kernel; Keras 2.0.5's compile sorted
    the weights by name, and every one of the slots then matches its weight's shape."""
    if not CORPUS.is_dir():
        pytest.skip("shared corpus not found")
    art = read_artifact(CORPUS / "face_classification" / rel)
    names, shapes = _trainable(art)
    state = read_state(art, (names, shapes))
    assert art.keras_version == "2.0.5" and state.layout == "keras2-standalone" and state.iteration > 0
    ms = [s for s in state.slots if s.slot == "m"]
    assert [s.weight for s in ms] == sorted(names) != names


@pytest.fixture(scope="module")
def converted(pool, tmp_path_factory):
    from k2to3.core.options import ConvertOptions as Options
    from k2to3.pipeline.convert import convert

    d = tmp_path_factory.mktemp("k2opt")
    return {n: (d / f"{n}.keras", convert(Options(src=OPT / f"{n}.h5", output=d / f"{n}.keras"), pool=pool))
            for n in CASES}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_standalone_state_is_restored_in_the_keras_file(converted, name):
    """convert restores every slot (ledger complete); the .keras's optimizer variables hold the file's tensors."""
    keras, r = converted[name]
    _, cls, _, _, head, _ = CASES[name]
    opt = r["optimizer"]
    assert opt["status"] == "restored" and opt["layout"] == "keras2-standalone" and opt["ledger"]["complete"], opt
    assert opt["iteration"] == (3 if "iterations" in head else None)
    assert r["verdict"] == "parity"
    with zipfile.ZipFile(keras) as z, h5py.File(io.BytesIO(z.read("model.weights.h5"))) as w, \
            h5py.File(OPT / f"{name}.h5") as f:
        saved = w["optimizer/vars"]
        for slot, index in opt["slots"].items():
            want = np.asarray(f["optimizer_weights"][slot])
            np.testing.assert_array_equal(np.asarray(saved[str(index)]).reshape(want.shape), want)
    # the iteration and Nadam 2.3's momentum product are optimizer-wide, not per-weight slots
    assert opt["ledger"]["slots_restored"] == len(opt["slots"]) - len({"iterations", "m_schedule"} & set(head))
    if name == "k2_sgd_205":  # momentum=0: Keras 3's SGD has no momentums; Keras 2's unused moments are ignored
        assert opt["ledger"]["ignored"] == 4 and opt["ledger"]["slots_expected"] == 0
    if name == "k2_nadam_231":  # the saved momentum product goes into Keras2Nadam (K2T605)
        assert opt["ledger"]["ignored"] == 0 and any(k.split("/")[-1].startswith("m_schedule") for k in opt["slots"])
    if "iterations" not in head:
        assert "saves no iteration counter" in opt["note"]
    with zipfile.ZipFile(keras) as z:
        written = json.loads(z.read("config.json"))["compile_config"]["optimizer"]
    if cls == "RMSprop":  # standalone Keras 2 RMSprop divides by sqrt(ms) + epsilon (K2T602)
        assert written["class_name"] == "Keras2RMSprop"
    if cls == "Adagrad":  # by sqrt(accumulator) + epsilon, from accumulators of 0 (K2T610)
        assert written["class_name"] == "Keras2Adagrad" and written["config"]["initial_accumulator_value"] == 0.0
    if cls == "Nadam":  # Keras 2's momentum schedule 0.96 ** (0.004 * t) and its product (K2T605)
        assert written["class_name"] == "Keras2Nadam" and written["config"]["u_product_rule"] == "per_step"
        assert written["config"]["schedule_decay"] == pytest.approx(0.004)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["k2_nadam", "k2_nadam_231"])
def test_standalone_nadam_resumes_as_keras2_would(pool, tmp_path, name):
    """5 training steps after loading, against tf_keras given the file's state (2.0-2.2 saved no momentum product:
    Keras 2 restarts it at 1; 2.3's m_schedule is carried), on every backend."""
    from k2to3.core.options import ConvertOptions as Options
    from k2to3.pipeline.convert import convert

    r = convert(Options(src=OPT / f"{name}.h5", output=tmp_path / "m.keras", fit_steps=5), pool=pool)
    t = r["training"]
    assert t["reference"]["state_loaded"] and t["steps"] == 5, t["reference"]
    for b in ("tensorflow", "torch", "jax"):
        be = t["backends"][b]
        assert be["status"] == "parity" and be["weights_max_abs"] < 1e-6, (b, be["first_divergent_weight"])
    assert r["verdict"] == "parity" and "K2T605" in {f["code"] for f in r["findings"]}


@pytest.mark.slow
def test_real_keras_205_file_converts_with_its_adam_state(pool, tmp_path):
    """tiny_XCEPTION_KDEF.hdf5 (Keras 2.0.5, Adam at step 246): all 104 slots restored in name order, outputs at
    parity on every backend, and the .keras holds the file's moments."""
    from k2to3.core.options import ConvertOptions as Options
    from k2to3.pipeline.convert import convert

    if not CORPUS.is_dir():
        pytest.skip("shared corpus not found")
    src = CORPUS / "face_classification" / "tiny_XCEPTION_KDEF.hdf5"
    r = convert(Options(src=src, output=tmp_path / "m.keras"), pool=pool)
    opt = r["optimizer"]
    assert opt["status"] == "restored" and opt["iteration"] == 246 and r["verdict"] == "parity"
    assert opt["ledger"] == {"slots_expected": 104, "slots_restored": 104, "ignored": 0, "complete": True}
    with zipfile.ZipFile(tmp_path / "m.keras") as z, h5py.File(io.BytesIO(z.read("model.weights.h5"))) as w, \
            h5py.File(src) as f:
        for slot, index in opt["slots"].items():
            want = np.asarray(f["optimizer_weights"][slot])
            np.testing.assert_array_equal(np.asarray(w["optimizer/vars"][str(index)]).reshape(want.shape), want)
