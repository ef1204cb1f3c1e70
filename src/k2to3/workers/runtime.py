"""What every worker op shares, inside the backend process: the seeded Keras 3 import, the job's arrays in and out,
the generated modules, the forward pass, the layer probe, and loading a .keras lean (safe_mode=True)."""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from typing import Any

import numpy as np

from k2to3.core.seeds import WORKER_SEED as SEED
from k2to3.errors import K2to3Error
from k2to3.workers import large_weights
from k2to3.workers.protocol import Keras3Model


def load_inputs(path: str) -> list[np.ndarray]:
    with np.load(path) as z:
        return [z[f"in{i}"] for i in range(len(z.files))]


def save_arrays(path: str, arrays: list[np.ndarray], prefix: str = "out") -> None:
    np.savez(path, **{f"{prefix}{i}": a for i, a in enumerate(arrays)})


def model_input(xs: list[np.ndarray]) -> Any:
    return xs[0] if len(xs) == 1 else list(xs)


# -- Keras 3 side -----------------------------------------------------------------------------------
def keras3():
    import keras

    import k2to3.portable  # noqa: F401  registers k2to3>* objects

    keras.utils.set_random_seed(SEED)
    return keras


def forward(keras: Any, model: Any, xs: list[np.ndarray]) -> Any:
    """Inference-mode forward pass. On jax, one jit-compiled program (what model.predict runs): eager jax
    compiles every primitive separately, far slower on a large model."""
    if keras.backend.backend() == "jax":
        import jax

        tv = [v.value for v in model.trainable_variables]
        ntv = [v.value for v in model.non_trainable_variables]
        fn = jax.jit(lambda tv, ntv, x: model.stateless_call(tv, ntv, x, training=False)[0])
        return fn(tv, ntv, model_input(xs))
    from k2to3.workers.graphrun import freeing_intermediates

    if keras.backend.backend() == "torch":
        import torch

        # As model.predict does: without it autograd keeps every layer's saved tensors for a backward pass
        # that never comes (a large share of the peak on a big model); the computed values are the same.
        with torch.no_grad(), freeing_intermediates():
            return model(model_input(xs), training=False)
    with freeing_intermediates():
        return model(model_input(xs), training=False)


def flat_numpy(keras: Any, out: Any) -> list[np.ndarray]:
    return [np.asarray(keras.ops.convert_to_numpy(t)) for t in keras.tree.flatten(out)]


def probe_layers(model: Any, input_cls: type, flatten: Any) -> tuple[list[str], list[Any]]:
    """Symbolic outputs of every call of the model's layers, in a topological order of the calls (Keras 3 and
    tf_keras alike: `flatten` is keras.tree.flatten or tf.nest.flatten). A layer called at several depths (a
    shared layer applied to a tensor computed from its own output) has one entry per call: `name` for its
    first call in this model, `name@k` for the k-th after it (call order, the same in both frameworks)."""
    graph = model if hasattr(model, "_nodes_by_depth") else getattr(model, "_functional", None)
    if graph is None:
        return [], []
    position = {id(layer): i for i, layer in enumerate(model.layers) if not isinstance(layer, input_cls)}
    nodes = [n for depth in graph._nodes_by_depth.values() for n in depth]
    own = {id(n) for n in nodes}

    def op(n: Any) -> Any:  # Keras 3's Node.operation, tf_keras's Node.layer
        return n.operation if hasattr(n, "operation") else n.layer

    calls: dict[int, list[Any]] = {}  # layer -> its nodes in this model, in call order
    for n in nodes:
        calls.setdefault(id(op(n)), []).append(n)
    rank = {}
    for layer_nodes in calls.values():
        inbound = op(layer_nodes[0])._inbound_nodes
        order = {id(x): i for i, x in enumerate(inbound)}
        for k, n in enumerate(sorted(layer_nodes, key=lambda x: order.get(id(x), 0))):
            rank[id(n)] = k
    names, tensors = [], []
    for n in _topological(nodes, own, lambda n: (position.get(id(op(n)), -1), rank[id(n)])):
        layer = op(n)
        if id(layer) not in position:
            continue  # an input, or a keras.ops call (no layer of the model)
        base = layer.name if rank[id(n)] == 0 else f"{layer.name}@{rank[id(n)]}"
        for i, t in enumerate(flatten(n.outputs)):
            names.append(base if i == 0 else f"{base}#{i}")
            tensors.append(t)
    return names, tensors


def _topological(nodes: list[Any], own: set[int], key: Any) -> list[Any]:
    """Kahn's order over the calls, the smallest key first among the ready ones: for a graph whose layer list
    is already a topological order (every layer called once) this is that list's order."""
    import heapq

    index = {id(n): i for i, n in enumerate(nodes)}
    parents = {id(n): {id(p) for p in n.parent_nodes if id(p) in own} for n in nodes}
    children: dict[int, list[Any]] = {}
    for n in nodes:
        for p in parents[id(n)]:
            children.setdefault(p, []).append(n)
    waiting = {i: len(ps) for i, ps in parents.items()}
    ready = [(key(n), index[id(n)], n) for n in nodes if not waiting[id(n)]]
    heapq.heapify(ready)
    out = []
    while ready:
        n = heapq.heappop(ready)[2]
        out.append(n)
        for c in children.get(id(n), []):
            waiting[id(c)] -= 1
            if not waiting[id(c)]:
                heapq.heappush(ready, (key(c), index[id(c)], c))
    return out


def tf_flatten(x: Any) -> list[Any]:
    import tensorflow as tf

    return tf.nest.flatten(x)


def import_module(path: str) -> Any:
    """Import a generated module by path under its file name (what a user does with `import model_k3`), so
    the objects it registers are there before a model is built or loaded. Re-executed on every job: a warm
    worker may see a new version of the same module."""
    import importlib.util

    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise K2to3Error(f"{path}: cannot import the generated module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def import_modules(paths: list[str]) -> None:
    for path in paths:
        import_module(path)


@contextmanager
def constant_initializers(keras: Any):
    """Loading creates every variable with its initializer, then overwrites it with the saved value.
    On jax each random initializer compiles an XLA program per shape (most of a large model's load) for
    values that are thrown away. Draw zeros instead while loading; the weight hash taken after loading
    is compared with the build's, so a variable the file did not overwrite cannot go unnoticed."""
    from keras.src.initializers import constant_initializers as const

    rnd = keras.src.backend.random
    names = ("uniform", "normal", "truncated_normal")
    saved = {n: getattr(rnd, n) for n in names}
    calls = {c: c.__call__ for c in (const.Zeros, const.Ones)}

    def zeros(shape, *args, dtype=None, **kwargs):  # not jnp.zeros: it would compile per shape too
        # no page resident until the restore writes it (torch, jax): keras's own numpy -> tensor path copies
        return large_weights.lazy_zeros(tuple(shape), keras.backend.standardize_dtype(dtype or "float32"))

    def ones(self: Any, shape: Any, dtype: Any = None) -> Any:
        # Zeros and Ones initializers (biases, BatchNormalization, optimizer slots) give the same values as theirs,
        # without jnp.zeros / jnp.ones compiling per shape on jax (one call per bias and slot, each shape a compile
        # on a new worker)
        return large_weights.host_ones(tuple(shape), keras.backend.standardize_dtype(dtype or "float32"))

    for n in names:
        setattr(rnd, n, zeros)
    const.Zeros.__call__ = lambda self, shape, dtype=None: zeros(shape, dtype=dtype)  # type: ignore[method-assign]
    const.Ones.__call__ = ones  # type: ignore[method-assign]
    try:
        yield
    finally:
        for n, f in saved.items():
            setattr(rnd, n, f)
        for c, f in calls.items():
            c.__call__ = f  # type: ignore[method-assign]


@contextmanager
def weights_on_disk(path: str):
    """Save or load `path` (.keras) with its weights file on disk beside it, never whole in memory. Keras
    picks the in-memory path whenever the weights fit half the available memory (1 GB assumed without
    psutil): a save then holds the h5 in a BytesIO and a copy of it for the zip, a load the whole member
    read into memory, one to two extra copies of the weights at the peak. Its other path (a temporary h5
    beside the .keras) writes and reads the same bytes; used only where that directory is writable, since
    keras's fallback then reads from the zip on the fly."""
    from keras.src.saving import saving_lib

    saved = getattr(saving_lib, "is_memory_sufficient", None)  # a private hook: absent in another Keras, no-op
    if saved is not None and os.access(os.path.dirname(os.path.abspath(path)), os.W_OK):
        saving_lib.is_memory_sufficient = lambda model: False
    try:
        yield
    finally:
        if saved is not None:
            saving_lib.is_memory_sufficient = saved


def load_keras(req: Keras3Model[Any]) -> tuple[Any, Any, float]:
    """(keras, the .keras loaded with safe_mode=True, load seconds), the generated modules imported first."""
    keras = keras3()
    import_modules(req.modules)
    t0 = time.perf_counter()
    with constant_initializers(keras), weights_on_disk(req.keras), large_weights.keras3_loading():
        model = keras.saving.load_model(req.keras, safe_mode=True)
    return keras, model, time.perf_counter() - t0


def library_version(backend: str) -> str:
    """The backend library's version (golden files record it: `verify --golden` after an upgrade)."""
    return str(getattr(sys.modules.get(backend), "__version__", "unknown"))


def layer_outputs(keras: Any, model: Any, xs: list[np.ndarray], out_path: str, input_cls: Any) -> list[str]:
    names, tensors = probe_layers(model, input_cls, keras.tree.flatten)
    if not tensors:
        save_arrays(out_path, [])
        return []
    probe = keras.Model(model.inputs, tensors)  # a plain functional probe over the same graph
    save_arrays(out_path, flat_numpy(keras, forward(keras, probe, xs)))
    return names
