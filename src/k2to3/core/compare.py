"""Numerical comparison against the reference (numpy only)."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

# Elements whose reference magnitude is below this are left out of the relative error.
REL_FLOOR = 1e-6


@dataclass
class OutputStats:
    index: int
    shape: list[int]
    atol_effective: float  # atol floored at rtol x the output's peak magnitude (see docs/report.md)
    max_abs: float
    max_rel: float
    allclose: bool
    min_rtol: float  # smallest rtol that passes at the requested atol
    min_atol: float  # smallest atol that passes at the requested rtol
    argmax_agreement: float | None  # percent, for class-like outputs
    note: str | None = None
    ref_batch_spread: float | None = None  # max over elements of the reference's range across the batch


    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _f(x: float) -> float:
    return float(x) if np.isfinite(x) else float("inf")


def compare_arrays(got: np.ndarray, ref: np.ndarray, rtol: float, atol: float, index: int = 0,
                   output: bool = True, norms: dict[str, float] | None = None) -> OutputStats:
    """Error figures of `got` against `ref`. `output=False` (weights, gradients) skips what only means something
    for a model output: the argmax agreement and the spread of the reference across the batch. `norms` (the
    gradient check's cosine and relative L2) receives the float64 dot products got.ref, got.got, ref.ref and
    diff.diff and max |ref|, from the same float64 copies (each pass over a large model's weights costs), when ref
    has no NaN."""
    if got.shape != ref.shape:
        return OutputStats(index, list(ref.shape), atol, float("inf"), float("inf"), False, float("inf"),
                           float("inf"), None, f"shape {list(got.shape)} != reference {list(ref.shape)}")
    if not output and _identical(got, ref) and rtol >= 0 and atol >= 0:
        return _equal_stats(ref, rtol, atol, index, norms)
    if not output and ref.size > CHUNKED_MIN and rtol >= 0 and atol >= 0:
        stats = _chunked_stats(got, ref, rtol, atol, index, norms)
        if stats is not None:
            return stats
    g = got.astype(np.float64)
    r = ref.astype(np.float64)
    nan_g, nan_r = np.isnan(g), np.isnan(r)
    if (nan_g != nan_r).any():
        return OutputStats(index, list(ref.shape), atol, float("inf"), float("inf"), False, float("inf"),
                           float("inf"), None, "NaN pattern differs")
    any_nan = bool(nan_r.any())
    if norms is not None and not any_nan:
        gf, rf = g.ravel(), r.ravel()
        norms.update(dot=float(np.dot(gf, rf)), got=float(np.dot(gf, gf)), ref=float(np.dot(rf, rf)))
    diff = np.subtract(g, r, out=g)  # in place: large models' weights and gradients are compared too
    np.abs(diff, out=diff)
    mag = np.abs(r)
    if any_nan:
        diff, mag = diff[~nan_r], mag[~nan_r]
    diff, mag = diff.ravel(), mag.ravel()
    max_abs = float(diff.max()) if diff.size else 0.0
    peak = float(mag.max()) if mag.size else 0.0
    if norms is not None and not any_nan:
        norms.update(diff=float(np.dot(diff, diff)), ref_max_abs=peak)
    sel = mag > REL_FLOOR
    # the ratio where the reference is above the floor, 0 elsewhere: the same maximum as over the selection (every
    # ratio is >= 0), without the two boolean-indexed copies
    max_rel = float(np.divide(diff, mag, out=np.zeros_like(diff), where=sel).max()) if sel.any() else 0.0
    # float32 rounding noise grows with the magnitudes a layer accumulates, not with each element:
    # an element near zero in an output that peaks at 10 carries noise of order eps * 10.
    atol = max(atol, rtol * peak) if mag.size else atol
    scaled = rtol * mag  # computed once for the tolerance test and min_atol
    allclose = bool(np.all(diff <= atol + scaled))
    # min rtol at this atol: max((d - atol) / |r|); elements with d <= atol need none.
    need = diff > atol
    if not need.any():
        min_rtol = 0.0
    elif (need & (mag == 0)).any():
        min_rtol = float("inf")
    else:  # over `need` only (0 elsewhere, below every needed ratio): no boolean-indexed copies of a large array
        min_rtol = float(np.divide(diff - atol, mag, out=np.zeros_like(diff), where=need).max())
    min_atol = float(max(0.0, np.subtract(diff, scaled, out=scaled).max())) if diff.size else 0.0
    agree = spread = None
    if output:
        g = got.astype(np.float64)
    if output and r.ndim >= 2 and r.shape[-1] > 1 and np.issubdtype(ref.dtype, np.floating):
        agree = float(np.mean(np.argmax(g, -1) == np.argmax(r, -1)) * 100.0)
    if output and r.ndim >= 1 and r.shape[0] > 1 and r.size:
        spread = float(np.nanmax(np.ptp(r, axis=0)))
    note = None
    if output and any_nan:
        # both sides NaN at the same places is no evidence that they compute the same (an input too small for the
        # model's poolings makes both NaN); the elements that are numbers are compared above
        allclose = False
        note = (f"the reference output has NaN at {int(nan_r.sum())} of {nan_r.size} elements: those compare nothing "
                "(an input too small for the model, or an overflow); pass --input with data the model takes")
    elif spread == 0.0:
        # e.g. a quantized model fed N(0, 1) noise far below its input scale: every row gives the same output
        note = "the reference output is identical for every input row: parity says little; pass --input with data"
    return OutputStats(index, list(ref.shape), atol, _f(max_abs), _f(max_rel), allclose, _f(min_rtol),
                       _f(min_atol), agree, note, spread)


# Weights and gradients (output=False) of more than CHUNKED_MIN elements are compared CHUNK elements at a time: the
# dozen float64 passes of compare_arrays then stay in the CPU cache instead of streaming whole float64 copies through
# memory. Below CHUNKED_MIN the blocks gain nothing (bench/compare.py; figures in the README's benchmark table).
CHUNK, CHUNKED_MIN = 1 << 16, 1 << 20


def _blocks(a: np.ndarray) -> Any:
    flat = a.reshape(-1)
    return (flat[i:i + CHUNK].astype(np.float64) for i in range(0, flat.size, CHUNK))


def _chunked_stats(got: np.ndarray, ref: np.ndarray, rtol: float, atol: float, index: int,
                   norms: dict[str, float] | None) -> OutputStats | None:
    """compare_arrays' figures for a large weight or gradient without NaN, block by block in float64 (the same
    figures: maxima and all/any are exact over blocks; the dot products are sums of per-block float64 sums). Two
    passes: the effective atol needs the whole reference's peak. None when either array has a NaN (the whole-array
    path handles the pattern)."""
    max_abs = peak = max_rel = 0.0
    dot = gg = rr = dd = 0.0
    for g, r in zip(_blocks(got), _blocks(ref)):
        if np.isnan(g).any() or np.isnan(r).any():
            return None
        if norms is not None:
            dot += float(np.dot(g, r))
            gg += float(np.dot(g, g))
            rr += float(np.dot(r, r))
        diff = np.abs(np.subtract(g, r, out=g), out=g)
        mag = np.abs(r, out=r)
        max_abs = max(max_abs, float(diff.max()))
        peak = max(peak, float(mag.max()))
        if norms is not None:
            dd += float(np.dot(diff, diff))
        sel = mag > REL_FLOOR
        if sel.any():
            max_rel = max(max_rel, float(np.divide(diff, mag, out=np.zeros_like(diff), where=sel).max()))
    if norms is not None:
        norms.update(dot=dot, got=gg, ref=rr, diff=dd, ref_max_abs=peak)
    atol = max(atol, rtol * peak)
    allclose, min_rtol, min_atol = True, 0.0, 0.0
    for g, r in zip(_blocks(got), _blocks(ref)):
        diff = np.abs(np.subtract(g, r, out=g), out=g)
        mag = np.abs(r, out=r)
        scaled = rtol * mag
        allclose = allclose and bool(np.all(diff <= atol + scaled))
        need = diff > atol
        if need.any():
            if (need & (mag == 0)).any():
                min_rtol = float("inf")
            elif min_rtol != float("inf"):
                min_rtol = max(min_rtol, float(np.divide(diff - atol, mag, out=np.zeros_like(diff), where=need).max()))
        min_atol = max(min_atol, float(np.subtract(diff, scaled, out=scaled).max()))
    return OutputStats(index, list(ref.shape), atol, _f(max_abs), _f(max_rel), allclose, _f(min_rtol),
                       _f(min_atol), None, None, None)


def _identical(got: np.ndarray, ref: np.ndarray) -> bool:
    """The same floating values element for element, no NaN (array_equal: NaN != NaN), one dtype, not empty."""
    if not (got.dtype == ref.dtype and np.issubdtype(ref.dtype, np.floating) and ref.size > 0):
        return False
    head_g, head_r = got.reshape(-1)[:4096], ref.reshape(-1)[:4096]  # most that differ, differ here: no full pass
    return bool(np.array_equal(head_g, head_r)) and bool(np.array_equal(got, ref))


def _equal_stats(ref: np.ndarray, rtol: float, atol: float, index: int, norms: dict[str, float] | None
                 ) -> OutputStats:
    """compare_arrays' figures when got is ref, value for value, from one float64 copy instead of two and a dozen
    passes (tensorflow's gradients of a training step equal tf_keras's bit for bit: a third of the gradient check):
    every difference is 0, so max_abs, max_rel, min_rtol and min_atol are 0 and allclose holds; the effective atol
    and the dot products are the reference's own (got.ref = got.got = ref.ref, the same sum of the same values)."""
    peak = float(np.abs(ref).max())  # float32 |x| is exact: the float64 peak compare_arrays takes
    if norms is not None:
        rf = ref.astype(np.float64).ravel()
        sq = float(np.dot(rf, rf))
        norms.update(dot=sq, got=sq, ref=sq, diff=0.0, ref_max_abs=peak)
    return OutputStats(index, list(ref.shape), max(atol, rtol * peak), 0.0, 0.0, True, 0.0, 0.0, None, None, None)


def compare_outputs(got: list[np.ndarray], ref: list[np.ndarray], rtol: float, atol: float) -> list[OutputStats]:
    if len(got) != len(ref):
        return [OutputStats(0, [], atol, float("inf"), float("inf"), False, float("inf"), float("inf"), None,
                            f"{len(got)} outputs != reference {len(ref)}")]
    return [compare_arrays(g, r, rtol, atol, i) for i, (g, r) in enumerate(zip(got, ref))]


def _reference_name(name: str, to_ref_name: dict[str, str]) -> str:
    """A probe name `layer[@call][#output]` with the layer part renamed to the reference's."""
    base, hash_, output = name.partition("#")
    layer, at, call = base.rpartition("@")
    if not (at and call.isdigit()):
        layer, at, call = base, "", ""
    return to_ref_name.get(layer, layer) + at + call + hash_ + output


def first_divergent_layer(
    order: list[str],
    got: dict[str, np.ndarray],
    ref: dict[str, np.ndarray],
    to_ref_name: dict[str, str],
    rtol: float,
    atol: float,
) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Walk layers in topological order; the first whose output differs beyond tolerance is named."""
    rows: list[dict[str, Any]] = []
    first = None
    for name in order:
        ref_name = _reference_name(name, to_ref_name)
        if name not in got or ref_name not in ref:
            continue
        s = compare_arrays(got[name], ref[ref_name], rtol, atol)
        row = {"layer": name, "reference_layer": ref_name, "max_abs": s.max_abs, "max_rel": s.max_rel,
               "allclose": s.allclose}
        rows.append(row)
        if first is None and not s.allclose:
            first = row
    return first, rows


# -- float32 noise floor ------------------------------------------------------------------------------
# A backend's float32 output and the reference's each land some rounding error away from the exact result
# of the same weights and inputs; a float64 rerun on each side measures that error (the floor). With the
# float64 results in agreement, the float32 discrepancy is bounded by the two floors (triangle inequality),
# so an honest conversion has k = error / floor <= 1 + (float64 disagreement / floor).
NOISE_K = 2.0  # the largest error, in floors, still called float32 noise
FLOAT64_SHARE = 0.1  # the float64 results may differ by at most this share of the float32 floor (see docs)


@dataclass
class NoiseStats:
    index: int
    floor_abs: float  # max |got32 - got64|: this backend's own float32 rounding
    reference_floor_abs: float  # max |ref32 - ref64|: the reference's own float32 rounding
    float64_max_abs: float  # max |got64 - ref64|: the conversion's difference with rounding taken out
    max_abs: float  # max |got32 - ref32| (as in outputs[])
    k: float  # max_abs / (floor_abs + reference_floor_abs)
    within: bool
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _max_abs(a: np.ndarray, b: np.ndarray, ok: np.ndarray) -> float:
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))[ok]
    return float(d.max()) if d.size else 0.0


def noise_stats(got32: np.ndarray, got64: np.ndarray, ref32: np.ndarray, ref64: np.ndarray,
                index: int = 0) -> NoiseStats:
    """How many float32 noise floors the error of one output is, and whether float64 removes it."""
    inf = float("inf")
    if not (got32.shape == got64.shape == ref32.shape == ref64.shape):
        return NoiseStats(index, inf, inf, inf, inf, inf, False, "output shapes differ")
    nans = [np.isnan(a.astype(np.float64)) for a in (got32, got64, ref32, ref64)]
    if any((n != nans[0]).any() for n in nans[1:]):
        return NoiseStats(index, inf, inf, inf, inf, inf, False, "NaN pattern differs between the runs")
    ok = ~nans[0]
    floor_b, floor_r = _max_abs(got32, got64, ok), _max_abs(ref32, ref64, ok)
    f64, err = _max_abs(got64, ref64, ok), _max_abs(got32, ref32, ok)
    floor = floor_b + floor_r
    k = err / floor if floor > 0 else (0.0 if err == 0 else inf)
    within = bool(k <= NOISE_K and f64 <= FLOAT64_SHARE * floor)
    return NoiseStats(index, _f(floor_b), _f(floor_r), _f(f64), _f(err), _f(k), within)


def noise_verdict(stats: list[NoiseStats]) -> tuple[str, float]:
    """(`within_float32_noise` or `beyond_float32_noise`, the largest k over the outputs)."""
    k = max((s.k for s in stats), default=0.0)
    return ("within_float32_noise" if stats and all(s.within for s in stats) else "beyond_float32_noise"), k


def per_backend(fn: Any, backends: Any, arrays: Any = ()) -> list[Any]:
    """fn(b) for each backend, in order; in threads (numpy's array arithmetic runs outside the GIL: the
    comparisons of the backends' weights and gradients share the cores the workers just left) unless one of
    `arrays` is large: each thread holds float64 copies of the arrays it compares (several times their size).
    Each runs with numpy's BLAS on one thread (single_threaded_blas)."""
    from concurrent.futures import ThreadPoolExecutor

    def one(b: Any) -> Any:
        with single_threaded_blas():
            return fn(b)

    backends = list(backends)
    if any(a.nbytes >= PARALLEL_MAX_BYTES for a in arrays) or len(backends) < 2:
        return [one(b) for b in backends]
    with ThreadPoolExecutor(max_workers=max(1, min(len(backends), os.cpu_count() or 1))) as ex:
        return list(ex.map(one, backends))


@functools.cache
def _openblas_threads() -> Any:
    """OpenBLAS's openblas_set_num_threads_local (0.3.27+; returns the count before) in the OpenBLAS this process
    loaded for numpy, or None (another BLAS, an older OpenBLAS, no /proc). In a pthreads build it sets the count of
    the whole process, despite its name: single_threaded_blas counts its holders."""
    import ctypes

    try:
        with open("/proc/self/maps") as fh:
            libs = sorted({ln.split()[-1] for ln in fh if "openblas" in ln.rsplit("/", 1)[-1].lower()
                           and ".so" in ln})
    except OSError:
        return None
    for path in libs:
        try:
            fn = ctypes.CDLL(path).openblas_set_num_threads_local
        except (OSError, AttributeError):
            continue
        fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
        return fn
    return None


_BLAS_LOCK = threading.Lock()
_BLAS_HOLD = {"holders": 0, "before": 1}


@contextlib.contextmanager
def single_threaded_blas() -> Any:
    """numpy's BLAS (the comparisons' float64 dot products) on one thread while any thread is inside. The parent
    compares the backends side by side in threads on cores the workers still use, and OpenBLAS's own threads spin
    between calls: on 2 cores they take the cores from the elementwise passes that follow each dot, and a large
    model's gradient comparisons then take several times as long. One thread also makes each dot product's
    summation order, so its last bits, the same on every machine. Every holder sets it (the setting is
    per thread or per process, by build); the last one out restores the count from before. A no-op without
    OpenBLAS."""
    fn = _openblas_threads()
    if fn is None:
        yield
        return
    with _BLAS_LOCK:
        before = fn(1)
        if _BLAS_HOLD["holders"] == 0:
            _BLAS_HOLD["before"] = before
        _BLAS_HOLD["holders"] += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_HOLD["holders"] -= 1
            if _BLAS_HOLD["holders"] == 0:
                fn(_BLAS_HOLD["before"])


# The size from which a tensor moves by slices in the workers (workers/large_weights.py): its comparisons run one at
# a time.
PARALLEL_MAX_BYTES = 64 << 20


def diff_l2(got: np.ndarray, ref: np.ndarray) -> float:
    """||got - ref|| in float64: how far a whole tensor moved (the training noise floor's statistic,
    checks/training/noise_probe.py), where the largest element alone is an extreme value that varies severalfold between
    seeds."""
    if not ref.size:
        return 0.0
    d = got.astype(np.float64)
    np.subtract(d, ref, out=d)
    return float(np.sqrt(np.dot(d.ravel(), d.ravel())))


def weight_changes(weights: list[np.ndarray], ref_w: list[np.ndarray]) -> tuple[list[float], list[float]]:
    """Per weight, how far it is from the reference's: its largest absolute difference (in the weights' own dtype: the
    difference of two close float32 numbers is exact) and the L2 norm of the difference. The training noise probe's
    measure of one run (workers/training/noise_fit.py measures it there, checks/training/noise_probe.py from a saved
    run)."""
    return ([float(np.max(np.abs(w - r))) if r.size else 0.0 for w, r in zip(weights, ref_w)],
            [diff_l2(w, r) for w, r in zip(weights, ref_w)])


def rel_l2(got: np.ndarray, ref: np.ndarray) -> float:
    """||got - ref|| / ||ref|| in float64 (0 when both are zero, inf when only ref is)."""
    n = float(np.linalg.norm(ref.astype(np.float64)))
    return diff_l2(got, ref) / n if n > 0 else (0.0 if not got.any() else float("inf"))


def value_digest(a: np.ndarray) -> str:
    """An array's values bit for bit, as `<dtype>:<sha256>` of its elements in C order (shape left out: a slot
    loaded under another shape with the same elements is the same slot). What a worker replies for the optimizer
    state it loaded, so a large model's slots need not go through a file per backend
    (checks/slotstate.state_as_loaded)."""
    import hashlib

    a = np.asarray(a)
    a = a if a.flags.c_contiguous else a.copy(order="C")
    return f"{a.dtype.str}:{hashlib.sha256(a.reshape(-1).view(np.uint8)).hexdigest()}"
