"""The tolerance of one differential case of rules/ops.toml (tests/op_diff_probe.py; documented in docs/ops.md),
derived from the case itself, as convert's float32 noise floor is (core/compare.py), so that it holds for any CPU's
float32 kernels rather than the ones it was tuned on. Pure numpy: test_ops.py checks the rule without a backend.

The allowed |got - ref| of each element, for a float32 reference `ref`:

    atol + rtol * |ref|  +  NOISE_K * (floor + eps * summed)

- atol + rtol * |ref| (FLOOR, the fixed tolerance used before): the rounding of an op that does not accumulate;
- floor: the reference's own float32 rounding, max |ref - ref64| with ref64 the same TF / tf_keras function on the
  same inputs in float64 (what convert's float64 reruns measure). One figure for the whole output, as in convert:
  rounding follows the magnitudes an op works with, not each element (reference_floor: its cap, its estimate);
- summed (entries marked `sums` in rules/ops.toml: matmul, convolutions, pooling, reductions, interpolation): the
  same function on the inputs' absolute values in float64, sum |terms| of each element. Whatever order or blocking
  a kernel sums in, its float32 error is a small multiple of eps * sum |terms|: about eps/4 of it (rms) for a
  sequential sum of terms of random sign, less for blocked or pairwise sums (n * eps/2 is the worst case bound,
  never approached by rounding errors of random sign). Two sequential sums in opposite orders, over thousands
  of elements of 9 to 1024 terms, end up at most 2.3 eps * sum |terms| apart.

NOISE_K = 4 covers both sides' rounding: the translation's kernel may round several times as much as the
reference's did. A translation error (a transposed or flipped kernel, a wrong axis, padding or channel order, a
1e-4 relative change) moves the result by a share of the result itself, orders of magnitude above
eps * sum |terms| for sums of up to thousands of terms: test_ops.py's
test_derived_tolerance_catches_translation_errors keeps that so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FLOOR = {"float32": (1e-5, 1e-6), "float16": (1e-3, 1e-3)}  # (rtol, atol); other dtypes compare exactly
NOISE_K = 4.0
FLOOR_CAP = 16.0  # the largest measured floor, in eps of the output's largest magnitude, taken as rounding


@dataclass
class Verdict:
    ok: bool
    max_abs: float  # max |got - ref|
    tol: float  # the tolerance of the element with the worst ratio (the smallest when none differs)
    ratio: float  # max |got - ref| / tolerance over the elements (<= 1 passes)
    floor: float = 0.0  # the reference's float32 rounding (reference_floor)
    note: str = ""


def reference_floor(ref: np.ndarray, ref64: np.ndarray | None) -> float:
    """The reference's own float32 rounding: max |ref - ref64| over the elements finite in both (0 for a function
    whose result keeps its own dtype whatever the input's: a cast, tf.image.resize), at most FLOOR_CAP eps of the
    output's largest magnitude: beyond that the float64 result differs by more than rounding (across a floor
    division's step, say) and is not taken as noise. Without a float64 run (TF has no float64 kernel: fused batch
    norm, FakeQuant, 3-D pooling), an estimate: one eps of that largest magnitude, the measured floor of an op that
    rounds once or twice."""
    if ref.dtype.kind != "f":  # complex: compared exactly (FLOOR)
        return 0.0
    r = ref.astype(np.float64)
    fin = np.isfinite(r)
    eps = float(np.finfo(ref.dtype).eps)
    peak = float(np.abs(r[fin]).max()) if fin.any() else 0.0
    if ref64 is None or np.shape(ref64) != ref.shape:
        return eps * peak
    r64 = np.asarray(ref64, dtype=np.float64)
    ok = fin & np.isfinite(r64)
    floor = float(np.abs(r - r64)[ok].max()) if ok.any() else 0.0
    return min(floor, FLOOR_CAP * eps * peak)


def tolerance(ref: np.ndarray, ref64: np.ndarray | None = None, summed: np.ndarray | None = None) -> np.ndarray:
    """The allowed |got - ref| of each element of a float reference (see the module docstring)."""
    rtol, atol = FLOOR.get(str(ref.dtype), (0.0, 0.0))
    r = np.abs(ref.astype(np.float64))
    tol = atol + rtol * r
    if rtol == atol == 0.0:  # float64 (or an unlisted dtype): compared exactly, as before
        return tol
    eps = float(np.finfo(ref.dtype).eps)
    noise = reference_floor(ref, ref64)
    if summed is not None and np.shape(summed) == ref.shape:
        s = np.abs(np.asarray(summed, dtype=np.float64))
        noise = noise + eps * np.where(np.isfinite(s), s, 0.0)
    return tol + NOISE_K * noise


def judge(got: np.ndarray, ref: np.ndarray, ref64: np.ndarray | None = None,
          summed: np.ndarray | None = None) -> Verdict:
    """Whether a float output `got` matches `ref` within the derived tolerance; non-finite elements must be equal
    (NaN never is), as np.allclose has it."""
    wide = np.complex128 if ref.dtype.kind == "c" else np.float64
    g, r = got.astype(wide), ref.astype(wide)
    finite = np.isfinite(g) & np.isfinite(r)
    diff = np.where(finite, np.abs(g - r), 0.0)
    max_abs = float(diff.max()) if diff.size else 0.0
    floor = reference_floor(ref, ref64)
    if not np.array_equal(g[~finite], r[~finite]):
        return Verdict(False, float("inf"), 0.0, float("inf"), floor, "non-finite values differ")
    tol = tolerance(ref, ref64, summed)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(diff > 0, diff / tol, 0.0)
    if not ratios.size:
        return Verdict(True, 0.0, 0.0, 0.0, floor)
    worst = int(np.argmax(ratios))
    ratio = float(ratios.flat[worst])
    tol_w = float(tol.flat[worst] if ratio > 0 else tol.min())  # no element differs: the tightest tolerance
    note = "" if ratio <= 1.0 else \
        f"error {float(diff.flat[worst]):.3g} where {tol_w:.3g} is allowed (max abs error {max_abs:.3g})"
    return Verdict(bool(ratio <= 1.0), max_abs, tol_w, ratio, floor, note)
