"""The gradients a training step hands its optimizer, read from inside the model's own `train_on_batch`.

`--grads` with `--fit-steps` would otherwise differentiate the model twice per backend: once for the gradient
check, once inside the training step. On jax each is its own XLA compile of the backward pass (many seconds each
on a large model). Spying on the optimizer's update gives the gradient check the step's own gradients, from the
program the user's `fit` runs, at no extra cost:

- tensorflow: `optimizer.apply` assigns them to buffer variables (works inside the traced train function);
- torch: `optimizer.apply` copies them (eager);
- jax: `train_step` returns them beside its logs from the jitted step (`stateless_apply` sees tracers only);
- tf_keras (the reference, eager): `optimizer.apply_gradients` keeps them.

Only the first step's gradients are kept: they are taken at the weights the file holds, as the standalone check
(workers/grads.py) takes them. The gradients are of the loss the step minimises (the compiled loss, loss weights
and regularisation losses included) and under a loss-scale optimizer would be scaled: the parent uses this path
only without mixed precision (checks/training/schedule.py)."""

from __future__ import annotations

from typing import Any

import numpy as np

KEY = "_k2to3_step_grads"


class StepGrads:
    """Installed on a compiled Keras 3 model before its first `train_on_batch`; `take()` after it."""

    def __init__(self, keras: Any, model: Any):
        self.backend = keras.backend.backend()
        self.variables = list(model.trainable_variables)
        self._pos = {id(v): i for i, v in enumerate(self.variables)}
        self.none: set[int] = set()
        self._got: list[Any] | None = None
        opt = model.optimizer
        if self.backend == "tensorflow":
            self._install_tf(opt)
        elif self.backend == "torch":
            self._install_torch(opt)
        else:
            self._install_jax(model, opt)

    def _install_tf(self, opt: Any) -> None:
        import tensorflow as tf

        self._bufs = [tf.Variable(tf.zeros(tuple(v.shape), v.dtype), trainable=False) for v in self.variables]
        real = opt.apply

        def apply(grads: Any, trainable_variables: Any = None) -> Any:
            for g, v in zip(grads, trainable_variables or self.variables):
                i = self._pos[id(v)]
                if g is None:  # known when the step is traced
                    self.none.add(i)
                else:
                    self._bufs[i].assign(tf.cast(tf.convert_to_tensor(g), self._bufs[i].dtype))  # IndexedSlices too
            return real(grads, trainable_variables)

        opt.apply = apply

    def _install_torch(self, opt: Any) -> None:
        real = opt.apply

        def apply(grads: Any, trainable_variables: Any = None) -> Any:
            got: list[Any] = [None] * len(self.variables)
            for g, v in zip(grads, trainable_variables or self.variables):
                got[self._pos[id(v)]] = None if g is None else g.detach().clone()
            if self._got is None:
                self._got = got
            return real(grads, trainable_variables)

        opt.apply = apply

    def _install_jax(self, model: Any, opt: Any) -> None:
        real_step, real_make = model.train_step, model.make_train_function

        def train_step(state: Any, data: Any) -> Any:
            box: list[Any] = []
            real_apply = opt.stateless_apply

            def stateless_apply(optimizer_variables: Any, grads: Any, trainable_variables: Any) -> Any:
                box.append(list(grads))
                return real_apply(optimizer_variables, grads, trainable_variables)

            opt.stateless_apply = stateless_apply
            try:
                logs, state = real_step(state, data)
            finally:
                del opt.stateless_apply
            return {**logs, KEY: box[0]}, state

        def make_train_function(force: bool = False) -> None:
            real_make(force)
            fn = model.train_function
            if getattr(fn, "_k2to3", False):
                return

            def train_function(state: Any, data: Any) -> Any:
                logs, state = fn(state, data)
                grads = logs.pop(KEY)
                if self._got is None:
                    self._got = grads
                return logs, state

            train_function._k2to3 = True  # type: ignore[attr-defined]
            model.train_function = train_function

        model.train_step = train_step  # make_train_function jits self.train_step
        model.make_train_function = make_train_function

    def take(self, to_numpy: Any) -> list[np.ndarray | None]:
        """The first step's gradients in `model.trainable_variables` order (None: not connected to the loss)."""
        if self.backend == "tensorflow":
            return [None if i in self.none else np.asarray(to_numpy(b)) for i, b in enumerate(self._bufs)]
        if self._got is None:
            raise RuntimeError("the training step never reached the optimizer")
        return [None if g is None else np.asarray(to_numpy(g)) for g in self._got]


class GoldenStepGrads:
    """The same spy on a tf_keras model that trains eagerly (fit_ops.py's reference). With `apply=False` the
    step stops at the gradients: the optimizer applies nothing (weights, slots and iteration stay) until
    `remove()`."""

    def __init__(self, model: Any, apply: bool = True):
        self.variables = list(model.trainable_weights)
        self._pos = {id(v): i for i, v in enumerate(self.variables)}
        self._got: list[Any] | None = None
        self._opt = opt = model.optimizer
        self._real = real = opt.apply_gradients

        def apply_gradients(grads_and_vars: Any, *args: Any, **kwargs: Any) -> Any:
            pairs = list(grads_and_vars)
            if self._got is None:
                got: list[Any] = [None] * len(self.variables)
                for g, v in pairs:
                    if id(v) in self._pos:
                        got[self._pos[id(v)]] = None if g is None else np.asarray(_dense(g))
                self._got = got
            return real(pairs, *args, **kwargs) if apply else None

        opt.apply_gradients = apply_gradients

    def remove(self) -> None:
        self._opt.apply_gradients = self._real

    def take(self) -> list[np.ndarray | None]:
        if self._got is None:
            raise RuntimeError("the training step never reached the optimizer")
        return self._got


def _dense(g: Any) -> Any:
    import tensorflow as tf

    return tf.convert_to_tensor(g)
