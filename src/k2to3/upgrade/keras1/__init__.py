"""Keras 1.x and Theano files: the config translation to Keras 2 (translate.py, rules/keras1.toml), the Keras 1 and
Theano weight layouts (layouts.py, numpy only) and how the Keras 2 reference is computed for them (reference_build.py).
Pure data: no keras import."""
