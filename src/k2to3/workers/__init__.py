"""The workers layer: everything that runs inside a backend process (`python -m k2to3.workers.child BACKEND`, one
per backend, KERAS_BACKEND fixed before keras is imported): the ops of child.OPS (build.py with rebuild.py and
restore.py, verify.py, golden.py for tf_keras, reruns.py, grads.py, fit.py) and what they share (runtime.py, noise.py,
lean.py, slices.py). pool.py and memory.py are the parent side of the protocol: JSON lines over pipes, arrays as
.npz files, a memory budget."""
