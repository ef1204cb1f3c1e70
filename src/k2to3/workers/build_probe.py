"""A --src build function called in a worker: with the --build-args values, its own `load_weights(...)` calls
skipped (crepe's builder loads its package's weights file; k2to3 loads the file the user named), its Keras 2
optimizer arguments let through (`SGD(lr=..., decay=1e-6)`: the optimizer does not change the weights), and op
probe_builds, which builds candidate functions with tf_keras and compares each model's weights with the file's."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from k2to3.errors import K2to3Error
from k2to3.workers.protocol import ProbeBuildsRequest
from k2to3.workers.runtime import import_module


@contextmanager
def own_loads_skipped(model_cls: Any, skipped: list[str]) -> Iterator[None]:
    """The build function's `model.load_weights(path)` does nothing while it runs (the paths are recorded), nor does
    its `plot_model(...)` (a picture of the model, which needs pydot and graphviz: not the model)."""
    saved = model_cls.load_weights

    def skip(self: Any, filepath: Any, *args: Any, **kwargs: Any) -> None:
        skipped.append(str(filepath))

    model_cls.load_weights = skip
    originals = {id(f): f for m in list(sys.modules.values()) if m is not None
                 and getattr(m, "__name__", "").startswith(("keras", "tf_keras", "tensorflow.python.keras"))
                 and callable(f := getattr(m, "__dict__", {}).get("plot_model"))}
    # wherever it was imported to, the generated modules' own `from keras.utils import plot_model` included
    plots = [(m, attr, v) for m in list(sys.modules.values()) if m is not None
             for attr, v in list(getattr(m, "__dict__", {}).items()) if id(v) in originals and originals[id(v)] is v]
    try:
        for m, attr, _ in plots:
            setattr(m, attr, lambda *args, **kwargs: None)
        yield
    finally:
        model_cls.load_weights = saved
        for m, attr, fn in plots:
            setattr(m, attr, fn)


@contextmanager
def keras2_optimizers(model_cls: Any, dropped: list[str]) -> Iterator[None]:
    """A build function's optimizer made with Keras 2 arguments (DQN code of Keras 2.0-2.10: `SGD(lr=0.01,
    decay=1e-6, clipnorm=2)`) while it runs. tf_keras >= 2.11's optimizers raise on `decay`: such a call builds
    tf_keras's legacy optimizer of the same name (Keras 2's own, which takes them). Keras 3's ignore `decay` with a
    Python warning: it is said in `dropped` instead. The weights never depend on the optimizer."""
    if model_cls.__module__.startswith("tf_keras"):
        import tf_keras

        news = {n: getattr(tf_keras.optimizers, n) for n in dir(tf_keras.optimizers.legacy)
                if n[:1].isupper() and n != "Optimizer" and isinstance(getattr(tf_keras.optimizers, n, None), type)}
        made = {n: _legacy_fallback(n, new, getattr(tf_keras.optimizers.legacy, n), dropped) for n, new in news.items()}
        # the module attributes, and the names the generated modules bound (`from tf_keras.optimizers import SGD`)
        spots = [(tf_keras.optimizers, n, new) for n, new in news.items()] + [
            (m, attr, v) for m in list(sys.modules.values()) if m is not None
            and not getattr(m, "__name__", "").startswith(("tf_keras", "keras", "tensorflow"))
            for attr, v in list(getattr(m, "__dict__", {}).items())
            if isinstance(v, type) and attr in news and news[attr] is v]
        try:
            for m, attr, _ in spots:
                setattr(m, attr, made[attr])
            yield
        finally:
            for m, attr, v in spots:
                setattr(m, attr, v)
        return
    from keras.src.optimizers.base_optimizer import BaseOptimizer

    init = BaseOptimizer.__init__

    def recorded(self: Any, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("decay") is not None:
            dropped.append(f"{type(self).__name__}(decay={kwargs['decay']!r}): Keras 3 optimizers have no decay, "
                           "the build's optimizer runs without it (Keras 2 divided the learning rate by 1 + decay * "
                           "iterations); the weights do not depend on it")
        init(self, *args, **kwargs)

    BaseOptimizer.__init__ = recorded  # type: ignore[method-assign]
    try:
        yield
    finally:
        BaseOptimizer.__init__ = init  # type: ignore[method-assign]


def _legacy_fallback(name: str, new: Any, legacy: Any, dropped: list[str]) -> Any:
    def make(*args: Any, **kwargs: Any) -> Any:
        if "lr" in kwargs and "learning_rate" not in kwargs:
            # Keras 2's spelling: tf_keras's new optimizers take it and keep their default rate (the Keras 3 module
            # says learning_rate=, K2T207), so the reference would train at another rate than the model
            kwargs["learning_rate"] = kwargs.pop("lr")
        try:
            return new(*args, **kwargs)
        except ValueError as exc:  # "decay is deprecated in the new TF-Keras optimizer, ... use the legacy optimizer"
            if "legacy" not in str(exc):
                raise
            dropped.append(f"{name}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())}) built as tf_keras's "
                           f"legacy {name} ({str(exc).split(',')[0]})")
            return legacy(*args, **kwargs)

    return make


def target(objects: Any, name: str) -> Any:
    """The callable `name` stands for in a generated module (its K2TO3_OBJECTS, or the module itself): a function,
    a class, or for "Builder.build" the class, whose instance's method is then called (call_build)."""
    head = name.split(".")[0]
    return objects[head] if isinstance(objects, dict) else getattr(objects, head)


def models_in(result: Any, model_cls: Any) -> list[tuple[Any, Any]]:
    """The keras Models a build returned, each with how to pick it again: the model itself (None), an element of a
    returned tuple (`return actor, critic`: its index), or an attribute of a returned or built instance (an agent
    whose __init__ sets `self.model`: the attribute's name)."""
    if isinstance(result, model_cls):
        return [(None, result)]
    if isinstance(result, (tuple, list)):
        return [(i, m) for i, m in enumerate(result) if isinstance(m, model_cls)]
    if hasattr(result, "__dict__") and not isinstance(result, type):
        return [(k, v) for k, v in vars(result).items() if isinstance(v, model_cls)]
    return []


def call_builds(fn: Any, name: str, build_args: dict[str, Any] | None, model_cls: Any,
                skipped: list[str] | None = None, dropped: list[str] | None = None) -> list[tuple[Any, Any]]:
    """Every model one build makes (`models_in`). `name`: FUNCTION, CLASS (a Model subclass configured by its
    __init__, or a class whose __init__ builds its model) or CLASS.METHOD (a builder class: the method returns the
    model, or sets it on the instance, as anago's BiLSTMCRF.build sets self.model). build_args["globals"]: module
    names the sources assign by running code (sizes read from the environment), set before the call. `dropped`:
    what keras2_optimizers said."""
    args = build_args or {}
    for key, value in (args.get("globals") or {}).items():
        module = sys.modules.get(getattr(fn, "__module__", ""))
        if module is not None:
            setattr(module, key, value)
    with own_loads_skipped(model_cls, skipped if skipped is not None else []), \
            keras2_optimizers(model_cls, dropped if dropped is not None else []):
        result = fn(*args.get("args", []), **args.get("kwargs", {}))
        if "." in name:
            owner = result
            result = getattr(owner, name.split(".", 1)[1])()
            if not isinstance(result, model_cls):  # the method stored the model on the instance
                result = result if models_in(result, model_cls) else owner
    found = models_in(result, model_cls)
    if isinstance(fn, type) and "." not in name and isinstance(result, model_cls):
        found = [(None, _functional(result, name, model_cls))]
    return found


def call_build(fn: Any, name: str, build_args: dict[str, Any] | None, model_cls: Any,
               skipped: list[str] | None = None, dropped: list[str] | None = None) -> Any:
    """The one model a build makes, or the one build_args["pick"] names among several."""
    found = call_builds(fn, name, build_args, model_cls, skipped, dropped)
    pick = (build_args or {}).get("pick")
    chosen = [m for k, m in found if k == pick] if pick is not None else [m for _, m in found]
    if len(chosen) != 1:
        what = "no keras Model" if not found else f"{len(found)} models ({', '.join(str(k) for k, _ in found)})"
        raise K2to3Error(f"{name}() made {what}", hint="pass a function that builds and returns the model")
    return chosen[0]


def _functional(model: Any, name: str, model_cls: Any) -> Any:
    """A Model subclass whose __init__ connects its layers (super().__init__(inputs, outputs)) is rebuilt as the
    plain functional model of the same layers: that is what the Keras 2 file's weights and a portable .keras hold.
    One whose graph exists only in call() is refused: it has no layer graph to rebuild."""
    if getattr(model, "_is_graph_network", False) or any(c.__name__ == "Functional" for c in type(model).__mro__[1:]):
        return model_cls(model.inputs, model.outputs, name=model.name)
    if any(c.__name__ == "Sequential" for c in type(model).__mro__[1:]) and getattr(model, "inputs", None):
        return model_cls(model.inputs, model.outputs, name=model.name)  # a Sequential subclass, built
    raise K2to3Error(f"{name}(...) is a subclassed keras Model whose layers are connected only in call(): k2to3 "
                     "rebuilds models whose layer graph exists when they are built",
                     hint="pass a function or builder method that returns a functional or Sequential model")


def weight_groups(model: Any, order_free: bool = False) -> list[dict[str, Any]]:
    """The layers with weights in order (Keras 2's load_weights order), each with its weights' shapes (sorted for a
    TF checkpoint, which names a layer's weights by attribute, not by position)."""
    out = []
    for layer in model.layers:
        if layer.weights:
            # Keras 2's save_weights order (_legacy_weights): trainable, then non-trainable; a nested model's
            # BatchNormalization statistics come after all its trainable weights
            shapes = [[int(d) for d in w.shape] for w in [*layer.trainable_weights, *layer.non_trainable_weights]]
            out.append({"name": layer.name, "shapes": sorted(shapes) if order_free else shapes,
                        "class": rnn_class(layer)})
    return out


def rnn_class(layer: Any) -> str:
    """The layer's class name, or for a Bidirectional wrapper its inner layer's (what a cuDNN layout converts to)."""
    inner = getattr(layer, "forward_layer", None) or getattr(layer, "layer", None)
    return type(inner if type(layer).__name__ == "Bidirectional" and inner is not None else layer).__name__


def compare(file_groups: list[dict[str, Any]], built: list[dict[str, Any]]) -> dict[str, Any]:
    """Keras 2 matches a weights-only file to a model by layer order: groups whose shapes agree, and names too."""
    from k2to3.upgrade.cudnn import file_layout

    # a cuDNN layer's weights where the build made an LSTM/GRU match too: Keras 2's loader converted them
    cudnn = [f["name"] for f, b in zip(file_groups, built)
             if file_layout(b.get("class"), f["shapes"], b["shapes"]) is not None]
    same = [f["shapes"] == b["shapes"] or f["name"] in cudnn for f, b in zip(file_groups, built)]
    names = sum(f["name"] == b["name"] for f, b in zip(file_groups, built))
    first = next((f"{f['name']} {f['shapes']} in the file, {b['name']} {b['shapes']} built"
                  for f, b, ok in zip(file_groups, built, same) if not ok), None)
    return {"groups": len(file_groups), "built_groups": len(built), "shapes_match": sum(same), "names_match": names,
            "full": len(built) == len(file_groups) and all(same), "first_difference": first,
            "cudnn": ", ".join(cudnn)}


def op_probe_builds(req: ProbeBuildsRequest) -> dict[str, Any]:
    """Build each candidate with tf_keras from the Keras 2 module of its --src function (the user's code as written,
    in this worker only), in the order given; a function's first build whose weights match the file's in full ends
    its tries."""
    import tf_keras

    tried, matched = [], set()
    for cand in req.candidates:
        if cand["fn"] in matched:  # a function's first full match is its answer: cheapest first
            continue
        t0 = time.perf_counter()
        try:
            module = import_module(cand["k2_module"])
            found = call_builds(target(module.K2TO3_OBJECTS, cand["fn"]), cand["fn"], cand["build_args"],
                                tf_keras.Model)
            if not found:
                raise K2to3Error("made no keras Model")
            got = {}
            for pick, model in found:  # `return actor, critic`: the one whose weights are the file's
                got = compare(req.groups, weight_groups(model, bool(req.order_free)))
                got["params"] = int(model.count_params())
                if got["full"]:
                    if len(found) > 1:
                        cand = {**cand, "build_args": {**cand["build_args"], "pick": pick}}
                    break
            del model, found
            tf_keras.backend.clear_session()
        except Exception as exc:  # the user's code failed on these arguments: not this candidate
            text = str(exc).splitlines()[0][:160] if str(exc) else ""
            got = {"full": False, "error": f"{type(exc).__name__}: {text}"}
        tried.append({**cand, **got, "seconds": round(time.perf_counter() - t0, 3)})
        if got["full"]:
            matched.add(cand["fn"])
    return {"tried": tried}
