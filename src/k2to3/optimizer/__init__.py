"""Optimizer state migration (issue 10): read Keras 2 `optimizer_weights` (slots.py, h5py only) and put them into
the Keras 3 optimizer of the rebuilt model (workers/optstate.py, inside the TensorFlow rebuild worker)."""
