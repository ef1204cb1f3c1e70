"""k2to3: move legacy Keras 2 models to multi-backend Keras 3 and prove they compute the same thing."""

__version__ = "0.1.0"


def __getattr__(name: str):  # the Python API (docs/api.md), imported on first use: `import k2to3` stays light
    if name == "convert":  # the module k2to3/convert.py, callable as the API function (api.CallableModule)
        import importlib

        return importlib.import_module(".convert", __name__)
    if name in ("verify", "lint", "fix", "ModelReport", "LintReport", "FixReport"):
        from k2to3 import api

        return getattr(api, name)
    raise AttributeError(f"module 'k2to3' has no attribute {name!r}")
