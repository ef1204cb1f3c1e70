"""The import lines of a generated module: standalone Keras 2.0-2.3 submodule paths (`keras.layers.merge`), gone
from tf_keras and Keras 3, pointed at `keras.layers`; and, for a weights-only build, a name imported from a package
that is not installed (anago's `from anago.layers import CRF` when anago is not) replaced by a stand-in that
raises when called, so a build that never takes that branch runs, and one that does stops on one line."""

from __future__ import annotations

import ast
import importlib.util
import re

# keras/layers/*.py of Keras 2.0-2.3, each re-exported by keras.layers (and tf_keras.layers, keras 3's layers)
KERAS2_LAYER_MODULES = ("advanced_activations", "convolutional", "convolutional_recurrent", "core",
                        "cudnn_recurrent", "embeddings", "local", "merge", "noise", "normalization", "pooling",
                        "recurrent", "wrappers")
_SUBMODULE = re.compile(r"\b((?:tensorflow\.)?keras\.layers)\.(" + "|".join(KERAS2_LAYER_MODULES) + r")\b")
_FRAMEWORKS = frozenset({"keras", "tensorflow", "tf_keras", "numpy", "scipy", "h5py"})


# Keras 2's engine modules, where Keras 2.0-2.2 code imported Layer and InputSpec (and Model); tf_keras and Keras 3
# have no such modules, and re-export the names from keras.layers (keras.models for Model)
_ENGINE = re.compile(r"\bfrom ((?:tensorflow\.)?keras)\.engine(?:\.(?:topology|base_layer|input_spec|input_layer))?"
                     r" import\b")
_ENGINE_TRAINING = re.compile(r"\bfrom ((?:tensorflow\.)?keras)\.engine\.training import\b")
_OBJECTIVES = re.compile(r"\b((?:tensorflow\.)?keras)\.objectives\b")  # Keras 1's name of keras.losses


def flat_layer_paths(code: str) -> str:
    """`from keras.layers.merge import Concatenate` -> `from keras.layers import Concatenate`;
    `from keras.engine.topology import Layer` -> `from keras.layers import Layer`."""
    code = _OBJECTIVES.sub(r"\1.losses", _ENGINE_TRAINING.sub(r"from \1.models import", code))
    return _SUBMODULE.sub(r"\1", _ENGINE.sub(r"from \1.layers import", code))


def missing_package(code: str) -> str | None:
    """The top-level package an import line needs when it is not installed (found without importing it)."""
    stmt = ast.parse(code).body[0]
    mod = stmt.module if isinstance(stmt, ast.ImportFrom) else stmt.names[0].name  # type: ignore[attr-defined]
    top = (mod or "").split(".")[0]
    if not top or top in _FRAMEWORKS or getattr(stmt, "level", 0):
        return None
    try:
        return None if importlib.util.find_spec(top) is not None else mod
    except (ImportError, ValueError):
        return mod


def stand_in(name: str, module: str, where: str) -> str:
    return (f"def {name}(*args, **kwargs):  # {where}: from {module}, not installed\n"
            f"    raise ImportError({f'{name} (imported from {module} at {where}) is needed by this build, and '!r}\n"
            f"                      {f'{module} is not installed: pass its source with --src'!r})\n")
