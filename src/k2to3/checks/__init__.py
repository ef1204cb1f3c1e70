"""The checks layer: one module per check (registry.py lists them), each with the worker jobs it queues, the report
section it builds from their replies, its report.md section and its say in the verdict (base.py: Check, Run);
runner.py runs them a stage at a time, one pool round per stage. Parent side, numpy only: the work itself runs in
the backend workers through the worker protocol (workers/protocol.py, workers/process.py)."""
