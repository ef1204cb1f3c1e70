"""Rebuild a Keras 3 model from an upgrade plan by calling layers on KerasTensors.

Runs inside the tensorflow worker (imports keras). Mirrors tf_keras's reconstruct_from_config:
layers are processed in config order, each node once its inputs exist, with Keras 2's node
numbering (nested models start at node 1) and tensors inside call kwargs resolved.
"""

from __future__ import annotations

import re
from typing import Any

import keras
import numpy as np

from k2to3.core import optable as op_table
from k2to3.errors import K2to3Error, NotPortable
from k2to3.upgrade import RNN_CLASSES, is_ref, op_node_kwargs
from k2to3.upgrade.names import unique

CONSTANT = "_CONSTANT_VALUE"


class SymShape:
    """The output of a tf.shape node while the graph is rebuilt: the shape of `source`, indexed by the
    SlicingOpLambda nodes after it (`index`: steps as portable.shape_index takes them). Keras 3 has no symbolic
    shape tensor (keras.ops.shape is a tuple with None for the batch axis), so a consumer gets the dimensions as
    ints when they are static, else becomes a k2to3>ShapeOp layer that reads them when the model runs."""

    def __init__(self, source: Any, out_type: str, index: list[Any] | None = None):
        self.source, self.out_type, self.index = source, out_type, list(index or [])

    def value(self) -> Any:
        from k2to3.portable import shape_index

        return shape_index(tuple(self.source.shape), self.index)

    def static(self) -> bool:
        v = self.value()
        return None not in (v if isinstance(v, tuple) else (v,))

    def scalar(self) -> bool:
        return bool(self.index) and isinstance(self.index[-1], int)

    def template(self, tensors: list[Any]) -> dict[str, Any]:
        tensors.append(self.source)
        return {"__shape__": len(tensors) - 1, "index": self.index}

    def sliced(self, index: tuple[Any, ...]) -> SymShape:
        if len(index) != 1 or not isinstance(index[0], (int, slice)):
            raise op_table.Untranslatable(f"tf.shape indexed with {index!r} (one int or slice is translated)")
        i = index[0]
        step = [i.start, i.stop, i.step] if isinstance(i, slice) else int(i)
        return SymShape(self.source, self.out_type, [*self.index, step])


class SymArith:
    """Integer arithmetic on single dimensions (tf.shape(x)[0] * 2, b // 2, b + 1) kept symbolic like SymShape, so
    tf.reshape(x, [b * heads, -1]) still gets ints (or the dynamic size on tensorflow) when the model runs."""

    def __init__(self, op: str, operands: list[Any], out_type: str):
        self.op, self.operands, self.out_type = op, operands, out_type

    def value(self) -> Any:
        from k2to3.portable import shape_arith

        vals = [o.value() if isinstance(o, SYM) else o for o in self.operands]
        return None if any(v is None for v in vals) else shape_arith(self.op, *vals)

    def static(self) -> bool:
        return self.value() is not None

    def scalar(self) -> bool:
        return True

    def template(self, tensors: list[Any]) -> dict[str, Any]:
        return {"__shape_op__": self.op, "args": [o.template(tensors) if isinstance(o, SYM) else o
                                                  for o in self.operands]}

    def sliced(self, index: tuple[Any, ...]) -> SymShape:
        raise op_table.Untranslatable("an indexed arithmetic result of tf.shape is not translated")


SYM = (SymShape, SymArith)
ARITH = ("add", "subtract", "multiply", "floor_divide")  # keras.ops names the table maps +, -, *, // to


def _walk(value: Any, fn: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return type(value)(_walk(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _walk(v, fn) for k, v in value.items()}
    return fn(value)


def _syms(value: Any) -> list[Any]:
    found: list[Any] = []
    _walk(value, lambda v: found.append(v) if isinstance(v, SYM) else None)
    return found


def _arith(name: str, kw: dict[str, Any]) -> Any:
    """A SymArith for +, -, *, // of scalar shape dimensions and Python ints, else None."""
    if name not in ARITH or set(kw) != {"x1", "x2"}:
        return None
    ops_ = [kw["x1"], kw["x2"]]
    syms = [o for o in ops_ if isinstance(o, SYM)]
    ints = all((isinstance(o, SYM) and o.scalar()) or (isinstance(o, int) and not isinstance(o, bool)) for o in ops_)
    return SymArith(name, ops_, syms[0].out_type) if syms and ints else None


class BuildError(K2to3Error):
    pass


def _first_line(exc: BaseException) -> str:
    text = [re.sub(r"\x1b\[[0-9;]*m", "", ln).strip() for ln in str(exc).strip().splitlines()]
    # Keras wraps errors as "Error when deserializing ... Exception encountered: <cause>", and a layer's call as
    # "Exception encountered when calling X.call().", the cause on a later line
    for line in text:
        if "Exception encountered:" in line:
            return line.split("Exception encountered:", 1)[1].strip()[:300]
    if text and text[0].startswith("Exception encountered when calling"):
        cause = next((ln for ln in text[1:] if ln and not ln.startswith(("Arguments received", "•"))), "")
        if cause:
            return f"{text[0]} {cause}"[:300]
    return (text[0] if text else type(exc).__name__)[:300]


def _constant(value: Any) -> Any:
    """A constant tensor argument tf_keras stored as a nested list -> the array TF made of it (float32 for
    floats, int32 for ints: tf.convert_to_tensor's defaults)."""
    if not isinstance(value, list) or not value:
        return value
    arr = np.asarray(value)
    if arr.dtype.kind == "f":
        return arr.astype("float32")
    return arr.astype("int32") if arr.dtype.kind in "iu" else value


def make_layer(spec: dict[str, Any]) -> keras.layers.Layer:
    cls_name, registered = spec["class_name"], spec.get("registered_name")
    if registered:
        cls = keras.saving.get_registered_object(registered)
    else:
        cls = getattr(keras.layers, cls_name, None)
    if cls is None:
        raise NotPortable(
            f"layer '{spec['orig_name']}': unknown layer class '{cls_name}' (not a Keras 3 layer, no k2to3 rule)",
            hint="pass the source that defines it with --src model.py, or port it and register it",
        )
    try:
        return cls.from_config(spec["config"])
    except Exception as exc:  # a config Keras 3 rejects: name the layer and the cause
        raise NotPortable(
            f"layer '{spec['orig_name']}' ({cls_name}): Keras 3 rejects its config: {_first_line(exc)}",
            hint="report it to k2to3 with the model_config; a rule in rules/layers.toml can fix it",
        ) from None


class GraphBuilder:
    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        self.layers: dict[str, Any] = {}
        self.specs = {s["name"]: s for s in spec["layers"]}
        self.calls: dict[str, list[list[Any]]] = {}
        self.inputs: dict[str, Any] = {}
        self.taken: set[str] = set(self.specs)  # names in this model: op nodes' operations get unused ones

    def resolve_ref(self, ref: list[Any]) -> tuple[bool, Any]:
        name, node, tensor = ref[0], ref[1], ref[2]
        if name == CONSTANT:
            return True, tensor
        if name in self.inputs:
            return True, self.inputs[name]
        idx = node - self.specs[name]["node_offset"]
        outs = self.calls.get(name, [])
        if idx < 0 or idx >= len(outs):
            return False, None
        return True, outs[idx][tensor]

    def resolve(self, data: Any) -> tuple[bool, Any]:
        """Replace every [layer, node, tensor] reference in a structure by its tensor."""
        if is_ref(data):
            return self.resolve_ref(data)
        if isinstance(data, list):
            out = []
            for x in data:
                ok, v = self.resolve(x)
                if not ok:
                    return False, None
                out.append(v)
            return True, out
        if isinstance(data, dict):
            res = {}
            for k, x in data.items():
                ok, v = self.resolve(x)
                if not ok:
                    return False, None
                res[k] = v
            return True, res
        return True, data

    def process_op_node(self, spec: dict[str, Any], node: Any) -> bool:
        """TFOpLambda / SlicingOpLambda: the TF function's first argument is the node structure, the rest
        are its kwargs; call the keras.ops translation from rules/ops.toml on the resolved tensors."""

        def strip(n: Any) -> Any:
            if is_ref(n):
                return n[:3]
            return [strip(x) for x in n] if isinstance(n, list) else n

        ok, first = self.resolve(strip(node))
        if not ok:
            return False
        ok, kwargs = self.resolve(op_node_kwargs(node))
        if not ok:
            return False
        fn = spec["op"]
        if spec.get("tf_only"):
            from k2to3.portable import TFOpLayer

            first, kwargs = self.materialize([first, kwargs], spec)  # the TF call takes tf.shape's tensor

            tensors: list[Any] = []
            template = TFOpLayer.template([first, kwargs], tensors, keras.KerasTensor)
            layer = TFOpLayer(fn, template, name=self.node_name(spec))  # one layer per node: its own arguments
            try:
                out = layer(tensors)
            except Exception as exc:
                raise NotPortable(f"layer '{spec['orig_name']}': kept as tf.{fn}, but calling it failed: "
                                  f"{_first_line(exc)}", hint="replace the op in the source and re-save") from None
            self.calls.setdefault(spec["name"], []).append(keras.tree.flatten(out))
            return True
        try:
            if fn == op_table.GETITEM and isinstance(first, SYM):
                self.calls.setdefault(spec["name"], []).append([first.sliced(
                    op_table.slice_index(kwargs["slice_spec"]))])
                return True
            if fn != op_table.GETITEM and op_table.lookup(fn).keras == op_table.SHAPE:
                entry = op_table.lookup(fn)
                out_type = op_table.translate(entry, first, kwargs)["out_type"]
                self.calls.setdefault(spec["name"], []).append([SymShape(first, out_type)])
                return True
            if fn == op_table.GETITEM:
                flips, index = op_table.flips_for_negative_steps(op_table.slice_index(kwargs["slice_spec"]),
                                                                 len(first.shape))
                for ax in flips:
                    first = keras.ops.flip(first, axis=ax)
                out = first[index]
            else:
                entry = op_table.lookup(fn)
                kwargs = {k: _constant(v) if k in entry.tensor_params else v for k, v in kwargs.items()}
                name, call_kwargs = op_table.call_target(entry, op_table.translate(entry, first, kwargs))
                if name == entry.keras and entry.graph:  # the keras.ops node would not reload on every backend
                    name = entry.graph
                target: Any = keras.ops
                parts = name.split(".")
                if parts[0] == "k2to3":  # a keras.ops composition k2to3 ships (k2to3.portable)
                    import k2to3.portable as target
                    parts = parts[2:]
                for part in parts:
                    target = getattr(target, part)
                arith = _arith(name, call_kwargs)
                if arith is not None:  # shape arithmetic stays symbolic (a consumer reads it)
                    self.calls.setdefault(spec["name"], []).append([arith])
                    return True
                positional, call_kwargs = op_table.call_arguments(entry, call_kwargs)
                syms = _syms([positional, call_kwargs])
                if syms and not all(sym.static() for sym in syms):
                    return self.shape_op(spec, name, [positional, call_kwargs])
                if syms:  # every dimension it reads is static: the call gets ints, as TF's constant folding did
                    positional, call_kwargs = _walk([positional, call_kwargs],
                                                    lambda v: v.value() if isinstance(v, SYM) else v)
                out = target(*positional, **call_kwargs)
        except op_table.Untranslatable as exc:
            raise NotPortable(f"layer '{spec['orig_name']}': {exc}") from None
        except Exception as exc:
            raise NotPortable(f"layer '{spec['orig_name']}': keras.ops translation of tf.{fn} failed: "
                              f"{_first_line(exc)}", hint="report it to k2to3 with the model_config") from None
        self.name_operations(spec, keras.tree.flatten(out), [first, kwargs])
        self.calls.setdefault(spec["name"], []).append(keras.tree.flatten(out))
        return True

    def shape_op(self, spec: dict[str, Any], function: str, call: list[Any]) -> bool:
        """A consumer of a shape with a dimension unknown until the model runs: a k2to3>ShapeOp layer that reads
        the shapes with keras.ops.shape in its call and passes them to `function`."""
        from k2to3.portable import ShapeOp

        tensors: list[Any] = []

        def slot(v: Any) -> Any:
            if isinstance(v, SYM):
                return v.template(tensors)
            if isinstance(v, keras.KerasTensor):
                tensors.append(v)
                return {"__tensor__": len(tensors) - 1}
            if isinstance(v, np.ndarray):  # a constant tf_keras stored as a nested list
                return v.tolist()
            return v

        template = _walk(call, slot)
        layer = ShapeOp(function, template, name=self.node_name(spec))
        out = layer(tensors)
        self.calls.setdefault(spec["name"], []).append(keras.tree.flatten(out))
        return True

    def materialize(self, value: Any, spec: dict[str, Any]) -> Any:
        """SymShapes that reach a layer or the model's outputs -> the int tensor tf.shape gave."""
        if not _syms(value):
            return value

        def one(v: Any) -> Any:
            if not isinstance(v, SYM):
                return v
            if v.static():
                return keras.ops.convert_to_tensor(v.value(), v.out_type)
            from k2to3.portable import ShapeOp

            name = unique(f"{spec['name']}_shape", self.taken)
            self.taken.add(name)
            tensors: list[Any] = []
            layer = ShapeOp("k2to3.portable.shape_tensor", [[v.template(tensors)], {"dtype": v.out_type}], name=name)
            return layer(tensors)

        return _walk(value, one)

    def node_name(self, spec: dict[str, Any]) -> str:
        """The op node's name: the layer's (planned, see upgrade/names.py) for its first call, then unused
        derived ones."""
        n = len(self.calls.get(spec["name"], []))
        name = spec["name"] if n == 0 else unique(f"{spec['name']}_node{n}", self.taken)
        self.taken.add(name)
        return name

    def name_operations(self, spec: dict[str, Any], outs: list[Any], inputs: Any) -> None:
        """Name the operations a keras.ops translation created after the TFOpLambda node instead of Keras 3's
        auto names ('multiply', 'add', ...), which can collide with a Keras 2 layer of that name: the output's
        operation gets the node's name, the ones before it derived names, all unused in this model."""
        stop = {id(t) for t in keras.tree.flatten(inputs) if isinstance(t, keras.KerasTensor)}
        created: list[Any] = []  # from the output back to the node's inputs
        stack = [t for t in outs if isinstance(t, keras.KerasTensor)]
        while stack:
            t = stack.pop(0)
            history = getattr(t, "_keras_history", None)
            if id(t) in stop or history is None:
                continue
            stop.add(id(t))
            op = history.operation
            if isinstance(op, keras.layers.Layer) or any(op is c for c in created):
                continue  # a layer of the model (an input passed through), or seen
            created.append(op)
            stack.extend(op._inbound_nodes[history.node_index].input_tensors)
        if not created:
            return  # the translation returned an input unchanged
        name = self.node_name(spec)
        for i, op in enumerate(reversed(created[1:]), 1):
            op.name = unique(f"{name}_{i}", self.taken)
            self.taken.add(op.name)
        created[0].name = name

    def process_node(self, spec: dict[str, Any], node: Any) -> bool:
        if "op" in spec:
            return self.process_op_node(spec, node)
        refs = node if isinstance(node, list) and node and all(is_ref(r) for r in node) else None
        if refs is None:
            raise BuildError(f"layer '{spec['orig_name']}': unsupported node structure")
        kwargs: dict[str, Any] = dict(refs[-1][3]) if len(refs[-1]) == 4 else {}
        ok, inputs = self.resolve([r[:3] for r in refs])
        if not ok:
            return False
        ok, kwargs = self.resolve(kwargs)
        if not ok:
            return False
        inputs, kwargs = self.materialize([inputs, kwargs], spec)
        kwargs.pop("training", None)  # the converted model is called in inference mode by default
        layer = self.layers[spec["name"]]
        cls = spec["class_name"]
        if len(inputs) > 1 and (cls in RNN_CLASSES or cls == "Bidirectional"):
            # Keras 2 RNN.__call__ appended initial_state / constants to the inputs list.
            n_const = int(spec["config"].get("num_constants") or 0)
            states = inputs[1 : len(inputs) - n_const]
            if states:
                kwargs["initial_state"] = states
            if n_const:
                kwargs["constants"] = inputs[len(inputs) - n_const :]
            inputs = inputs[0]
            # Keras 2 gave the RNN its sequence's mask (masks[0]); Keras 3 fills `mask` in only for a call with a
            # single tensor argument, so with initial_state or constants the mask would be dropped silently.
            mask = getattr(inputs, "_keras_mask", None)
            if mask is not None and kwargs.get("mask") is None and (states or n_const):
                kwargs["mask"] = mask
        elif len(inputs) == 1:
            inputs = inputs[0]
        # no mask, or one None per input (Keras 2.0's legacy Merge saved mask=[None, None]): the call's default
        kwargs = {k: v for k, v in kwargs.items() if not (k == "mask" and (v is None or (
            isinstance(v, (list, tuple)) and all(m is None for m in v))))}
        try:
            out = layer(inputs, **kwargs)
        except NotPortable:
            raise
        except Exception as exc:
            from_source = ">" in str(spec.get("registered_name") or "") and not str(
                spec.get("registered_name")).startswith("k2to3>")
            raise NotPortable(
                f"layer '{spec['orig_name']}' ({cls}): calling it in Keras 3 failed: {_first_line(exc)}",
                hint="the class comes from the --src files: rewrite what Keras 3 rejects there (its call or "
                     "compute_output_shape), then convert again" if from_source else
                     "report it to k2to3 with the model_config",
            ) from None
        self.calls.setdefault(spec["name"], []).append(keras.tree.flatten(out))
        return True

    def build(self) -> keras.Model:
        spec = self.spec
        if spec["kind"] == "sequential":
            return self.build_sequential()
        pending: dict[str, list[Any]] = {}
        for s in spec["layers"]:
            if s["class_name"] == "InputLayer":
                self.inputs[s["name"]] = make_input(s)
                continue
            self.layers[s["name"]] = self.instantiate(s)
            pending[s["name"]] = list(s["inbound_nodes"])
        while any(pending.values()):
            progressed = False
            for s in spec["layers"]:
                queue = pending.get(s["name"])
                while queue:
                    if not self.process_node(s, queue[0]):
                        break
                    queue.pop(0)
                    progressed = True
            if not progressed:
                stuck = sorted(n for n, q in pending.items() if q)
                raise BuildError(f"model '{spec['orig_name']}': graph cannot be resolved at layers {stuck[:5]}")
        ins = [self.resolve_ref(r)[1] for r in spec["inputs"]]
        outs_spec = spec["outputs"]
        if is_ref(outs_spec):
            outs: Any = self.materialize(self.resolve_ref(outs_spec)[1], {"name": spec["name"]})
        else:
            ok, outs = self.resolve([r[:3] if is_ref(r) else r for r in outs_spec])
            if not ok:
                raise BuildError(f"model '{spec['orig_name']}': outputs cannot be resolved")
            outs = self.materialize(outs, {"name": spec["name"]})
            if isinstance(outs, list) and len(outs) == 1:
                outs = outs[0]
        return keras.Model(ins[0] if len(ins) == 1 else ins, outs, name=spec["name"])

    def instantiate(self, s: dict[str, Any]) -> Any:
        if s["nested"] is not None:
            return GraphBuilder(s["nested"]).build()
        if "op" in s:
            return None  # translated to keras.ops calls node by node
        return make_layer(s)

    def build_sequential(self) -> keras.Model:
        items: list[Any] = []
        for s in self.spec["layers"]:
            if s["class_name"] == "InputLayer":
                items.append(make_input(s))
            else:
                items.append(self.instantiate(s))
        return keras.Sequential(items, name=self.spec["name"])


def make_input(s: dict[str, Any]) -> Any:
    c = s["config"]
    kwargs: dict[str, Any] = {"batch_shape": tuple(c["batch_shape"]), "dtype": c.get("dtype") or "float32",
                              "name": s["name"]}
    if c.get("sparse"):
        kwargs["sparse"] = True
    if c.get("ragged"):
        kwargs["ragged"] = True
    return keras.Input(**kwargs)


def build_model(plan: dict[str, Any]) -> keras.Model:
    return GraphBuilder(plan["model"]).build()
