"""The named value transforms of rules/ops.toml (`transform = "..."`): TensorFlow's argument conventions turned
into keras.ops' (split sizes into split points, pad modes, data formats, window lists, norm orders, ...). Each takes
the translated keyword arguments and changes them in place, or raises Untranslatable with the reason. Pure data: no
keras or tensorflow import."""

from __future__ import annotations

import math
from typing import Any


class Untranslatable(Exception):
    """The call has no keras.ops equivalent (or not with these arguments)."""


def _pad_mode(kw: dict[str, Any]) -> None:
    if "mode" in kw:
        kw["mode"] = str(kw["mode"]).lower()
    if kw.get("mode", "constant") != "constant":
        # TF records constant_values=0 for every mode; keras.ops.pad accepts it only for "constant".
        if kw.pop("constant_values", 0) not in (0, None):
            raise Untranslatable("tf.pad constant_values with a non-constant mode")


def _split_sizes(kw: dict[str, Any]) -> None:
    sizes = kw.get("indices_or_sections")
    if isinstance(sizes, list):  # TF sizes -> numpy split points
        if any(s == -1 for s in sizes):
            raise Untranslatable("split sizes with -1 need the static dimension")
        points, acc = [], 0
        for s in sizes[:-1]:
            acc += int(s)
            points.append(acc)
        kw["indices_or_sections"] = points


_METHODS = {"bilinear": "bilinear", "nearest": "nearest", "bicubic": "bicubic", "lanczos3": "lanczos3",
            "lanczos5": "lanczos5", "area": "area"}


def _resize_method(kw: dict[str, Any]) -> None:
    m = str(kw.get("interpolation", "bilinear")).lower()
    if m not in _METHODS:
        raise Untranslatable(f"resize method {m!r} has no keras.ops equivalent")
    kw["interpolation"] = _METHODS[m]


def _sqrt_epsilon(kw: dict[str, Any]) -> None:
    # TF bounds the squared norm (x * rsqrt(max(sum(x**2), eps))), keras.ops.normalize the norm
    # (x * min(rsqrt(sum(x**2)), 1 / eps)): the same result needs keras eps = sqrt(TF eps).
    eps = kw.get("epsilon")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise Untranslatable(f"l2_normalize epsilon={eps!r} is not a literal number")
    kw["epsilon"] = math.sqrt(eps)


def _k_clip(kw: dict[str, Any]) -> None:
    # K.clip raised max_value to min_value when both are Python numbers and max < min (keras.ops.clip
    # would return max everywhere).
    lo, hi = kw.get("x_min"), kw.get("x_max")
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (lo, hi))
    if numbers and hi < lo:
        kw["x_max"] = lo


def _data_format(kw: dict[str, Any]) -> None:
    fmt = kw.pop("data_format", None)
    if fmt in (None, "NHWC", "channels_last"):
        kw["data_format"] = "channels_last"
    elif fmt in ("NCHW", "channels_first"):
        kw["data_format"] = "channels_first"
    else:
        raise Untranslatable(f"data_format {fmt!r}")


def _norm_ord(kw: dict[str, Any]) -> None:
    # TF's "euclidean" is keras' default (None): the 2-norm of the flattened axes, Frobenius over two axes.
    _axes_tuple(kw)
    if isinstance(kw.get("axis"), int):  # keras' Norm keeps an int axis as a list, which jax cannot hash
        kw["axis"] = (kw["axis"],)
    order = kw.pop("ord", "euclidean")
    if order in ("euclidean", None):
        return
    axis = kw.get("axis")
    if order == "fro" or not isinstance(axis, tuple) or len(axis) != 1:
        raise Untranslatable(f"norm ord={order!r} over several axes differs between TF and keras.ops")
    kw["ord"] = order


def _axes_tuple(kw: dict[str, Any]) -> None:
    # tf.reverse takes a list of axes; keras.ops.flip an int or a tuple (jax rejects lists).
    if isinstance(kw.get("axis"), list):
        kw["axis"] = tuple(kw["axis"])


def _repeats_int(kw: dict[str, Any]) -> None:
    if isinstance(kw.get("repeats"), (list, tuple)):
        raise Untranslatable("repeat with a list of repeats (keras.ops.repeat takes one count or a tensor)")


def _float_uniform(kw: dict[str, Any]) -> None:
    # keras.random.uniform draws floats only; TF's integer form needs maxval and is keras.random.randint
    dtype = kw.get("dtype")
    if dtype is not None and "float" not in str(dtype):
        raise Untranslatable(f"uniform with dtype={dtype!r}: keras.random.uniform draws floats (keras.random.randint "
                             "draws integers)")
    if kw.get("maxval", 1.0) is None:
        kw.pop("maxval")  # TF's None is 1 for floats, keras's default


def _qr_mode(kw: dict[str, Any]) -> None:  # tf.linalg.qr's full_matrices flag -> keras.ops.qr's mode
    if not isinstance(kw.get("mode", False), bool):
        raise Untranslatable(f"qr full_matrices={kw['mode']!r} is not a literal True/False")
    kw["mode"] = "complete" if kw.get("mode") else "reduced"


_TF_FORMATS = ("NWC", "NHWC", "NDHWC", "CHANNELS_LAST", "NCW", "NCHW", "NCDHW", "CHANNELS_FIRST")  # 4 last, 4 first


def _tf_window(kw: dict[str, Any], key: str, last: bool, n: int | None, full: bool) -> None:
    """TF's ksize/strides/dilations/rates: an int, or 1, N or N + 2 entries (ones on the batch and channel axes; N + 2
    when the rank says so or, unknown, a list of 3 or more with ones at both ends; `full`: always) -> keras's."""
    if (v := kw.get(key)) is None or v == []:  # TF's default (ones; tf.conv's []), keras's too
        kw.pop(key, None)
    elif not isinstance(v, int) or isinstance(v, bool) or full:
        if not isinstance(v, (list, tuple)) or not all(isinstance(i, int) and not isinstance(i, bool) for i in v):
            raise Untranslatable(f"{key}={v!r} is not a literal int or list of ints")
        if full or (len(v) == n + 2 if n is not None else len(v) >= 3 and v[0] == v[-1 if last else 1] == 1):
            if ([v[0], v[-1]] if last else list(v[:2])) != [1, 1]:
                raise Untranslatable(f"{key}={v!r}: a window over the batch or channel axis has no keras.ops form")
            v = v[1:-1] if last else v[2:]
        elif n is not None and len(v) not in (1, n):
            raise Untranslatable(f"{key}={v!r} for {n} spatial axes")
        kw[key] = v[0] if len(v) == 1 and not full else tuple(v)


def _tf_spatial(kw: dict[str, Any], keys: tuple[str, ...], first: str = "inputs", full: bool = False) -> int | None:
    """A TF windowed op's data_format (NHWC, NCW, CHANNELS_LAST, None), per-axis `keys` and padding -> keras.ops'; N."""
    given = kw.get("data_format")
    if given is not None and (not isinstance(given, str) or given.upper() not in _TF_FORMATS):
        raise Untranslatable(f"data_format {given!r}")
    kw["data_format"] = "channels_first" if given and _TF_FORMATS.index(given.upper()) > 3 else "channels_last"
    rank = len(getattr(kw.get(first), "shape", ()))  # 0: not a tensor (source code: an expression)
    n = len(given) - 2 if given and given.upper().startswith("N") else rank - 2 if rank else None
    for key in keys:
        _tf_window(kw, key, kw["data_format"] == "channels_last", n, full)
    if not isinstance(kw.get("padding"), str) or kw["padding"].upper() not in ("SAME", "VALID"):
        raise Untranslatable(f"padding={kw.get('padding')!r} (keras.ops takes \"same\" or \"valid\")")
    kw["padding"] = kw["padding"].lower()
    return n


def _tf_conv_transpose(kw: dict[str, Any]) -> None:
    # TF takes the output shape; only the one keras.ops.conv_transpose derives (output_padding=None) translates
    n, out = _tf_spatial(kw, ("strides", "dilation_rate")), kw.pop("output_shape", None)
    shape, kshape = getattr(kw["inputs"], "shape", None), getattr(kw.get("kernel"), "shape", None)
    if not isinstance(out, (list, tuple)) or shape is None or kshape is None or n is None:
        raise Untranslatable("conv_transpose output_shape= needs a literal shape and static input and kernel shapes "
                             "(keras.ops.conv_transpose takes output_padding instead)")
    at = 1 if kw["data_format"] == "channels_last" else 2
    for i in range(n):
        s, d = (v if isinstance(v, int) else v[i] for v in (kw.get("strides", 1), kw.get("dilation_rate", 1)))
        k, size = (int(kshape[i]) - 1) * d + 1, shape[at + i]
        if size is None or out[at + i] != (size * s if kw["padding"] == "same" else (size - 1) * s + max(k, s)):
            raise Untranslatable(f"conv_transpose output_shape {list(out)}: keras.ops derives another (output_padding)")


TRANSFORMS = {"qr_mode": _qr_mode, "tf_conv_transpose": _tf_conv_transpose,
              "tf_conv": lambda kw: _tf_spatial(kw, ("strides", "dilation_rate"), full=True),  # N + 2 entries
              "tf_pool": lambda kw: _tf_spatial(kw, ("pool_size", "strides")),
              "tf_patches": lambda kw: _tf_spatial(kw, ("size", "strides", "dilation_rate"), "images", True),
              "rot90_axes": lambda kw: kw.update(axes=(-3, -2)),  # an image's or a batch's (height, width)
              "float_uniform": _float_uniform,
              "repeats_int": _repeats_int, "norm_ord": _norm_ord, "axes_tuple": _axes_tuple, "pad_mode": _pad_mode,
              "split_sizes": _split_sizes, "resize_method": _resize_method,
              "data_format": _data_format, "sqrt_epsilon": _sqrt_epsilon, "k_clip": _k_clip}
