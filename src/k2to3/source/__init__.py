"""The source pass (libcst and ast; no keras import): `k2to3 lint` (lint.py, classify.py), `k2to3 fix` (fix.py) over
files and notebooks (files.py, run.py, formats.py), and for `convert --src` the definitions an artifact needs
(extract.py, hoist.py, resolution.py, tfkeras_module.py)."""
