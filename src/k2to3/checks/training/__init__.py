"""The training feature, parent side (numpy only; the steps run in workers/training/): `--fit-steps N` and
`--grads`, two checks and what they share.

  step_check        the training-step check (report section `training`): its jobs, its section, its verdict
  batch             the batch both sides train on: the --targets file or seeded targets, the compiled losses
  schedule          which round the steps run in, whether tf_keras is the reference, whether they carry --grads
  step_replies      each side's steps as they reply: the weights compared while the others still train
  weights_compare   one backend's weights and losses after the steps against tf_keras's
  noise_probe       a mismatch's float32 training noise: tf_keras's own steps again from nudged weights
  noise_verdict     the floors those runs give and the verdict on each backend
  gradient_check    the gradient check (report section `gradients`): from the first step, or standalone
  gradient_compare  per-variable figures of the gradients against tf_keras's
  reference_worker  the tf_keras reference's jobs on a worker of their own (docs/convert.md#the-reference-worker)

The gradient check reads the training steps through schedule (its stage, carries_gradients), batch (the compiled
losses), step_replies (each side's reply, a listener as they come) and noise_probe.gradient_runs (tf_keras's own
float32 sensitivity of the step)."""
