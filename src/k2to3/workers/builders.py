"""A --src build function called in a worker: with the --build-args values, its own `load_weights(...)` calls
skipped (crepe's builder loads its package's weights file; k2to3 loads the file the user named), and op
probe_builds, which builds candidate functions with tf_keras and compares each model's weights with the file's."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from k2to3.errors import K2to3Error
from k2to3.workers.runtime import import_module


@contextmanager
def own_loads_skipped(model_cls: Any, skipped: list[str]) -> Iterator[None]:
    """The build function's `model.load_weights(path)` does nothing while it runs (the paths are recorded)."""
    saved = model_cls.load_weights

    def skip(self: Any, filepath: Any, *args: Any, **kwargs: Any) -> None:
        skipped.append(str(filepath))

    model_cls.load_weights = skip
    try:
        yield
    finally:
        model_cls.load_weights = saved


def target(objects: Any, name: str) -> Any:
    """The callable `name` stands for in a generated module (its K2TO3_OBJECTS, or the module itself): a function,
    a class, or for "Builder.build" the class, whose instance's method is then called (call_build)."""
    head = name.split(".")[0]
    return objects[head] if isinstance(objects, dict) else getattr(objects, head)


def call_build(fn: Any, name: str, build_args: dict[str, Any] | None, model_cls: Any,
               skipped: list[str] | None = None) -> Any:
    """`name`: FUNCTION, CLASS (a Model subclass configured by its __init__) or CLASS.METHOD (a builder class: the
    method returns the model, or sets it on the instance, as anago's BiLSTMCRF.build sets self.model)."""
    args = build_args or {}
    with own_loads_skipped(model_cls, skipped if skipped is not None else []):
        model = fn(*args.get("args", []), **args.get("kwargs", {}))
        if "." in name:
            owner = model
            model = getattr(owner, name.split(".", 1)[1])()
            if not isinstance(model, model_cls):  # the method stored the model on the instance
                found = [v for v in vars(owner).values() if isinstance(v, model_cls)]
                model = found[0] if len(found) == 1 else model
    if not isinstance(model, model_cls):
        raise K2to3Error(f"{name}() returned {type(model).__name__}, not a keras Model",
                         hint="pass a function that builds and returns the model")
    return _functional(model, name, model_cls) if isinstance(fn, type) and "." not in name else model


def _functional(model: Any, name: str, model_cls: Any) -> Any:
    """A Model subclass whose __init__ connects its layers (super().__init__(inputs, outputs)) is rebuilt as the
    plain functional model of the same layers: that is what the Keras 2 file's weights and a portable .keras hold.
    One whose graph exists only in call() is refused: it has no layer graph to rebuild."""
    if getattr(model, "_is_graph_network", False) or any(c.__name__ == "Functional" for c in type(model).__mro__[1:]):
        return model_cls(model.inputs, model.outputs, name=model.name)
    raise K2to3Error(f"{name}(...) is a subclassed keras Model whose layers are connected only in call(): k2to3 "
                     "rebuilds models whose layer graph exists when they are built",
                     hint="pass a function or builder method that returns a functional or Sequential model")


def weight_groups(model: Any, order_free: bool = False) -> list[dict[str, Any]]:
    """The layers with weights in order (Keras 2's load_weights order), each with its weights' shapes (sorted for a
    TF checkpoint, which names a layer's weights by attribute, not by position)."""
    out = []
    for layer in model.layers:
        if layer.weights:
            shapes = [[int(d) for d in w.shape] for w in layer.weights]
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


def op_probe_builds(req: dict[str, Any]) -> dict[str, Any]:
    """Build each candidate with tf_keras from the Keras 2 module of its --src function (the user's code as written,
    in this worker only), in the order given; a function's first build whose weights match the file's in full ends
    its tries."""
    import tf_keras

    tried, matched = [], set()
    for cand in req["candidates"]:
        if cand["fn"] in matched:  # a function's first full match is its answer: cheapest first
            continue
        t0 = time.perf_counter()
        try:
            module = import_module(cand["k2_module"])
            model = call_build(target(module.K2TO3_OBJECTS, cand["fn"]), cand["fn"], cand["build_args"],
                               tf_keras.Model)
            got = compare(req["groups"], weight_groups(model, bool(req.get("order_free"))))
            got["params"] = int(model.count_params())
            del model
            tf_keras.backend.clear_session()
        except Exception as exc:  # the user's code failed on these arguments: not this candidate
            text = str(exc).splitlines()[0][:160] if str(exc) else ""
            got = {"full": False, "error": f"{type(exc).__name__}: {text}"}
        tried.append({**cand, **got, "seconds": round(time.perf_counter() - t0, 3)})
        if got["full"]:
            matched.add(cand["fn"])
    return {"tried": tried}
