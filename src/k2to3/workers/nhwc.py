"""The Keras 2 golden of a channels_first model on a CPU: tf_keras (TensorFlow) has only NHWC kernels for
Conv1D/2D/3D, SeparableConv2D, MaxPooling2D and AveragePooling2D there (docs/channels-first.md), so a Keras 1
`dim_ordering="th"` model or a Keras 2 `channels_first` one had no reference without a GPU.

The golden model is loaded as the file says (tf_keras's own weight conversion, which reads `data_format`, runs
unchanged); its copy for the forward pass runs each such layer as transpose -> the same layer channels_last with
the same weights -> transpose back, under the layer's own name, so every layer's output keeps the file's layout
(the layer probe compares them by name). The kernels of these layers do not depend on `data_format` in Keras 2,
and a transposed NHWC convolution or pooling computes the NCHW one exactly: the result is the model's own
function, not an approximation.
"""

from __future__ import annotations

from typing import Any

NHWC_ONLY = frozenset({"Conv1D", "Conv2D", "Conv3D", "SeparableConv2D", "MaxPooling2D", "AveragePooling2D"})


def _needs(layer: Any) -> bool:
    return type(layer).__name__ in NHWC_ONLY and getattr(layer, "data_format", None) == "channels_first"


def cpu_only() -> bool:
    import tensorflow as tf

    return not tf.config.list_physical_devices("GPU")


def nhwc_layers(model: Any) -> list[str]:
    """The model's own layers that tf_keras cannot run on this machine (none with a GPU)."""
    names = [lay.name for lay in getattr(model, "layers", []) if _needs(lay)]
    return names if names and cpu_only() else []


def nhwc_copy(tf_keras: Any, model: Any) -> Any:
    """`model` with its NHWC-only channels_first layers run transposed (see the module docstring)."""
    import tensorflow as tf

    class NHWC(tf_keras.layers.Layer):
        """Runs a channels_last twin of a channels_first layer between two transposes."""

        def __init__(self, inner: Any, **kwargs: Any):
            super().__init__(**kwargs)
            self.inner = inner

        def call(self, x: Any) -> Any:
            y = self.inner(tf.transpose(x, (0, *range(2, len(x.shape)), 1)))
            return tf.transpose(y, (0, len(y.shape) - 1, *range(1, len(y.shape) - 1)))

    def clone(layer: Any) -> Any:
        if not _needs(layer):
            return layer.__class__.from_config(layer.get_config())
        cfg = {**layer.get_config(), "data_format": "channels_last", "name": f"{layer.name}_nhwc"}
        return NHWC(type(layer).from_config(cfg), name=layer.name)

    twin = tf_keras.models.clone_model(model, clone_function=clone)
    for lay in model.layers:
        if lay.weights:
            target = twin.get_layer(lay.name)
            (target.inner if isinstance(target, NHWC) else target).set_weights(lay.get_weights())
    return twin


# Keras 3 on TensorFlow, CPU (docs/channels-first.md): these channels_first layers have no kernel there.
KERAS3_TF_NHWC_ONLY = frozenset({"Conv1D", "Conv2D", "Conv2DTranspose"})


def refuse_keras3_tf_cpu(keras: Any, model: Any) -> None:
    """One precise line instead of TensorFlow's `UnimplementedError: Exception encountered when calling
    Conv2D.call()` when the converted model cannot run on this backend and machine."""
    if keras.backend.backend() != "tensorflow":
        return
    stack = list(getattr(model, "layers", []))
    while stack:
        lay = stack.pop(0)
        stack.extend(getattr(lay, "layers", []))
        if type(lay).__name__ in KERAS3_TF_NHWC_ONLY and getattr(lay, "data_format", None) == "channels_first":
            if not cpu_only():
                return
            from k2to3.errors import NotRunnableHere

            raise NotRunnableHere(f"layer '{lay.name}': Keras 3 on TensorFlow has no CPU kernel for a channels_first "
                                  f"{type(lay).__name__} (NHWC only)", hint="verify it on a GPU; torch and jax "
                                  "verify it here (docs/channels-first.md)")
