"""Keras 1 `Merge(mode='dot' | 'cos')` -> Keras 2/3 (pure data): `Dot` where it is what Keras 1 computed, the
portable k2to3>Keras1Merge where only Keras 1's own arithmetic is (K2T489), a stop where Keras 1's TensorFlow and
Theano backends computed different things and the file does not say which one trained the model (K2T909).

Keras 1's arithmetic (keras-team/keras 1.2.2): keras/engine/topology.py `Merge.call` (dot = K.batch_dot(a, b,
dot_axes); cos = batch_dot(a, b) / max(sqrt(batch_dot(a, a) * batch_dot(b, b)), K.epsilon()), then a unit axis at
position 1 its `get_output_shape_for` does not declare) and `_arguments_validation` (how `dot_axes` is made a
pair); keras/backend/tensorflow_backend.py `batch_dot` (rank 2: reduce_sum(a * b); above: tf.matmul with adjoint
flags, i.e. the last two axes as a batch of matrices) and theano_backend.py `batch_dot` (T.batched_tensordot). On
two inputs of rank 2 or 3 the two backends agree with each other and with Keras 3's `Dot`. Keras 1.0-1.2.1's
TensorFlow `batch_dot` took rank 2 through tf.batch_matmul too (a @ b.T, across the batch), fixed in 1.2.2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from k2to3.core import rules as rules_mod

if TYPE_CHECKING:
    from k2to3.upgrade.state import UpgradeState


def keras1_dot_axes(dot_axes: Any, r1: int, r2: int) -> tuple[list[int] | None, str]:
    """Keras 1's `dot_axes` for inputs of ranks r1, r2 (Merge._arguments_validation, keras/engine/topology.py
    1.0.8-1.2.2: an int d is [d % r1, d % r2] when negative, else [d, d]; a pair is kept as given), then whether
    Keras 1's `K.batch_dot` computed the same on its TensorFlow and Theano backends (keras/backend/*_backend.py
    1.2.2): (axes in 1..rank-1, "") where it did, (None, why not) where it did not."""
    if isinstance(dot_axes, int) and not isinstance(dot_axes, bool):
        axes = [dot_axes % r1, dot_axes % r2] if dot_axes < 0 else [dot_axes, dot_axes]
    elif isinstance(dot_axes, list) and len(dot_axes) == 2 and all(
            isinstance(a, int) and not isinstance(a, bool) for a in dot_axes):
        axes = list(dot_axes)
    else:
        return None, f"dot_axes {dot_axes!r} is not an int or a pair of ints"
    if r1 != r2:
        return None, ("inputs of different ranks: Keras 1 on Theano took a batched tensordot, on TensorFlow "
                      "1.x a batch matmul needs equal ranks")
    if r1 > 3:
        return None, ("Keras 1 on TensorFlow multiplied the last two axes as a batch of matrices (tf.matmul), "
                      "on Theano it took a batched tensordot over the given axes (another shape)")
    if r1 == 2:
        if not all(a in (1, -1) for a in axes):
            return None, f"dot_axes {axes} contracts the batch axis"
        return [1, 1], ""
    if any(a < 0 for a in axes):
        return None, (f"dot_axes {axes}: Keras 1 on TensorFlow read a negative axis as 'not the last' and "
                      "contracted axis 1, Theano the axis counted from the end")
    if not all(a in (1, 2) for a in axes):
        return None, f"dot_axes {axes} contracts the batch axis or an axis the inputs do not have"
    return axes, ""


def dot_merge(up: UpgradeState, out: dict[str, Any], new: dict[str, Any],
               ranks: list[int | None] | None) -> dict[str, Any]:
    """Keras 1 Merge(mode=dot|cos) (keras/engine/topology.py 1.2.2 Merge.call): dot = K.batch_dot(a, b, dot_axes);
    cos = batch_dot(a, b) / max(sqrt(batch_dot(a, a) * batch_dot(b, b)), epsilon), each a batch_dot over the same
    axes. Rank 2 and 3 on equal ranks: dot is Keras 3's Dot; cos is Dot(normalize=True) at rank 2 and at rank 3
    k2to3>Keras1Merge (the denominator is an elementwise product of two Gram matrices, no cosine). Other ranks were
    computed differently by Keras 1's two backends: K2T909. Ranks the graph does not give: k2to3>Keras1Merge, which
    computes ranks 2 and 3 as Keras 1 did and refuses any other when the model is built."""
    cfg = out["config"]
    name, mode = cfg.get("name"), cfg["mode"]
    dot_axes = cfg.get("dot_axes", -1)
    known = ranks is not None and len(ranks) == 2 and all(isinstance(r, int) for r in ranks)
    if not known:
        new.update(mode=mode, dot_axes=dot_axes)
        up.note("K2T489", "info", f"Keras 1 Merge(mode={mode!r}, dot_axes={dot_axes!r}) on inputs whose ranks the "
                "config does not give -> k2to3>Keras1Merge (Keras 1's batch_dot for ranks 2 and 3; any other rank "
                "stops the build)", name)
        out["class_name"], out["config"] = "Keras1Merge", new
        return out
    assert ranks is not None
    r1, r2 = int(ranks[0]), int(ranks[1])  # type: ignore[arg-type]
    axes, why = keras1_dot_axes(dot_axes, r1, r2)
    if axes is None:
        up.note("K2T909", "error", f"Keras 1 Merge(mode={mode!r}, dot_axes={dot_axes!r}) on inputs of ranks {r1} "
                f"and {r2}: {why}; no one Keras 3 layer is what Keras 1 computed", name, rules_mod.rule("K2T909").fix)
        return out
    if mode == "cos" and r1 == 3:
        new.update(mode=mode, dot_axes=axes)
        up.note("K2T489", "warning", f"Keras 1 Merge(mode='cos', dot_axes={axes}) on rank-3 inputs -> "
                "k2to3>Keras1Merge: Keras 1 divided batch_dot(a, b) elementwise by sqrt(batch_dot(a, a) * "
                "batch_dot(b, b)), two Gram matrices, not by the norms (no cosine off the diagonal; NaN where that "
                "product is negative)", name)
        out["class_name"], out["config"] = "Keras1Merge", new
        return out
    new["axes"] = axes
    new["normalize"] = mode == "cos"
    up.note("K2T477", "info", f"Keras 1 Merge(mode={mode!r}, dot_axes={dot_axes!r}) on rank-{r1} inputs -> "
            f"Dot(axes={axes}{', normalize=True' if mode == 'cos' else ''})", name)
    out["class_name"], out["config"] = "Dot", new
    return out
