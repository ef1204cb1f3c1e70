"""How the Keras 2 reference (tf_keras) computes files older than Keras 2. No keras import; the worker loads.

* Keras 1.x configs: tf_keras cannot build Keras 1 layer names, so the golden builds the Keras 2 translation of
  the config (translate.py, rules/keras1.toml) and loads the file's weights with tf_keras's own
  `load_weights_from_hdf5_group`, whose `preprocess_weights_for_loading` still converts Keras 1 layouts (a
  Keras 1 `model_weights` group has no `keras_version`). The weights path is thus Keras 2's, not k2to3's.
* Theano-trained files (`backend: theano`): tf_keras dropped Keras 2's kernel flip (`_need_convert_kernel`), so
  the worker flips the convolution kernels of the loaded tf_keras model as Keras 2.2 did (workers/child.py
  `_flip_theano_kernels`, written apart from k2to3's layouts.py).
"""

from __future__ import annotations

from typing import Any

from k2to3.core.findings import Finding
from k2to3.upgrade.keras1.translate import is_keras1, is_merge_of_models, to_keras2


def is_theano(backend: str | None) -> bool:
    return (backend or "").lower() == "theano"


def findings(backend: str | None) -> list[Finding]:
    """K2T480 for a Theano-trained file: its convolution kernels are flipped on restore (layouts.py)."""
    if not is_theano(backend):
        return []
    return [Finding("K2T480", "info", "Theano-trained file (backend: theano): Conv1D/2D/3D, Conv2DTranspose and "
                    "ConvLSTM2D kernels flipped along their spatial axes, as Keras 2 did on TensorFlow", None, None)]


def golden_config(model_config: dict[str, Any] | None) -> tuple[dict[str, Any], bool] | None:
    """The Keras 2 config tf_keras builds for a Keras 1 file, and whether its weights load by layer name (K2T485: a
    Sequential-with-Merge becomes a Functional model whose layer order is not the file's); None for a Keras 2
    file."""
    if model_config is None or not is_keras1(model_config):
        return None
    return to_keras2(model_config), is_merge_of_models(model_config)
