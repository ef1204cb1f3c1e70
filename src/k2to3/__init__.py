"""k2to3: move legacy Keras 2 models to multi-backend Keras 3 and prove they compute the same thing."""

__version__ = "0.1.0"
