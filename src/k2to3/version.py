"""The package version (one home: `k2to3.__version__` reads it; importing it imports nothing else of k2to3)."""

__version__ = "0.1.0"
