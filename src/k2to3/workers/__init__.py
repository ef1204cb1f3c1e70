"""The workers layer: everything that runs inside a backend process (`python -m k2to3.workers.child BACKEND`, one per
backend, KERAS_BACKEND fixed before keras is imported): the ops of child.OPS (build.py with rebuild.py and restore.py,
keras3_outputs.py, tf_keras_outputs.py, reruns.py, grads.py, keras3_export.py, the training ops in training/) and what
they share (runtime.py, derandomize.py, large_weights.py, chunked_arrays.py, deferred_imports.py). protocol.py and
replies.py are what both sides say (each op's typed request and reply, JSON lines over pipes, arrays as .npz and array
files); process.py (one worker process), pool.py (the workers of a run within a memory budget) and memory.py are the
parent side."""
