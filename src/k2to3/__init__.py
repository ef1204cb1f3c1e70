"""k2to3: move legacy Keras 2 models to multi-backend Keras 3 and prove they compute the same thing."""

from k2to3.version import __version__ as __version__

_API = ("convert", "verify", "export", "lint", "fix", "ModelReport", "LintReport", "FixReport")


def __getattr__(name: str):  # the Python API (docs/api.md), imported on first use: `import k2to3` stays light
    if name in _API:
        from k2to3.interfaces import api

        return getattr(api, name)
    raise AttributeError(f"module 'k2to3' has no attribute {name!r}")
