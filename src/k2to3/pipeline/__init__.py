"""The pipeline layer: `convert` and `verify` as short sequences over the checks (read -> upgrade -> rebuild and
restore -> checks -> save -> verdict), and what they prepare for them: the --src files, the Keras 2 reference, the
archive bridge, the report a run starts from. Imports checks, workers.pool, formats, upgrade, source and core."""
