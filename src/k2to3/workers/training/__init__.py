"""The training feature inside a backend worker: the ops `--fit-steps` and `--grads` send (the parent side is
checks/training/).

  fit_ops          op fit (Keras 3 on the .keras) and op fit_golden (tf_keras on the original file)
  noise_fit        op fit_noise: tf_keras's steps again from nudged weights (the float32 training noise probe)
  train_steps      what those ops share: the batch, N train_on_batch steps, the weights after them
  step_gradients   the gradients a training step hands its optimizer, read from inside train_on_batch
  reference_model  the tf_keras reference: the file loaded compiled, its optimizer state, noise off; op
                   golden_reference
  held_models      what one job of a run loads and a later job reuses in this worker; op drop_held"""
