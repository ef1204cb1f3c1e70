"""The package every k2to3 object is registered under: a converted `.keras` names them `k2to3>Name`, so this name
and each object's class or function name never change (tests/test_portable_compat.py loads files written by
earlier versions)."""

from __future__ import annotations

import keras

PACKAGE = "k2to3"
register = keras.saving.register_keras_serializable(package=PACKAGE)
