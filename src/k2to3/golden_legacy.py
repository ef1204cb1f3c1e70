"""The Keras 2 reference for files older than Keras 2 (no keras import here; the worker does the loading).

* Keras 1.x configs: tf_keras cannot build Keras 1 layer names, so the golden builds the Keras 2 translation of
  the config (upgrade/keras1.py, rules/keras1.toml) and loads the file's weights with tf_keras's own
  `load_weights_from_hdf5_group`, whose `preprocess_weights_for_loading` still converts Keras 1 layouts (a
  Keras 1 `model_weights` group has no `keras_version`). The weights path is thus Keras 2's, not k2to3's.
* Theano-trained files (`backend: theano`): tf_keras dropped Keras 2's kernel flip (`_need_convert_kernel`), so
  the worker flips the convolution kernels of the loaded tf_keras model as Keras 2.2 did (workers/child.py
  `_flip_theano_kernels`, written apart from k2to3's weights_legacy.py).
"""

from __future__ import annotations

import json
from typing import Any

from k2to3.core.findings import Finding
from k2to3.upgrade.keras1 import is_keras1, is_merge_of_models, to_keras2


def findings(artifact: Any) -> list[Finding]:
    """K2T480 for a Theano-trained file: its convolution kernels are flipped on restore (weights_legacy.py)."""
    if (artifact.backend or "").lower() != "theano":
        return []
    return [Finding("K2T480", "info", "Theano-trained file (backend: theano): Conv1D/2D/3D, Conv2DTranspose and "
                    "ConvLSTM2D kernels flipped along their spatial axes, as Keras 2 did on TensorFlow", None, None)]


def prepare(job: Any, artifact: Any) -> None:
    if artifact.model_config is not None and is_keras1(artifact.model_config) \
            and "golden_config" not in job.golden_args:
        path = job.work / "golden_keras1_config.json"
        path.write_text(json.dumps(to_keras2(artifact.model_config)))
        job.golden_args["golden_config"] = str(path)
        if is_merge_of_models(artifact.model_config):  # K2T485: the Functional form loads by layer name
            job.golden_args["golden_by_name"] = True
    if (artifact.backend or "").lower() == "theano":
        job.golden_args["theano_kernels"] = True
