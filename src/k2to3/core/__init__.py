"""The core data layer (stdlib, h5py, numpy, tomllib; no keras): the reviewed rules and the op table (rules/*.toml),
findings, the untrusted-file checks (h5safe, validate, weight_shapes), the options model, seeds and targets, the
policy tolerances, seeded inputs and the numerical comparisons."""
