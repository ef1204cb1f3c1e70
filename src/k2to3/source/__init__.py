"""The source pass: `k2to3 lint` and `k2to3 fix` (libcst; imports no keras, tensorflow, torch or jax)."""
