"""docs/rules.md, docs/ops.md and the optimizer table of docs/optimizers.md, generated from rules/*.toml (tests fail
when a generated page is not current)."""
