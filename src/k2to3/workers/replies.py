"""What each worker op answers (workers/protocol.py registers every op with its request type and one of these).

A reply is a JSON object: at run time the dict the op returned, with `ok` and the job's `memory` (Reply); as types,
TypedDicts, the keys a reply may lack in a `total=False` class. No import of keras or a backend: the parent reads
these.
"""

from typing import Any, TypedDict


class JobMemory(TypedDict):
    peak_rss_mb: float  # the job's peak resident set (VmHWM, reset before each job)
    idle_rss_mb: float  # after the job, its model freed


class Reply(TypedDict):
    """What every successful reply carries besides the op's own keys."""

    ok: bool
    memory: JobMemory


class _Error(TypedDict):
    ok: bool  # False
    error: str  # one line
    traceback: str
    memory: JobMemory


class ErrorReply(_Error, total=False):
    """A job that raised: `Worker.call` turns it into a WorkerError (workers/process.py)."""

    code: int  # the Exit code of a K2to3Error (a user-facing problem)
    not_runnable: bool  # errors.NotRunnableHere: this backend cannot run the model here


class ReadyLine(TypedDict):
    """The child's first line, once its backend is imported."""

    ok: bool
    ready: str  # the backend
    memory: dict[str, float]  # rss_mb: the idle worker's resident set


class BuildReply(Reply):
    inputs: list[dict[str, Any]]  # name, shape, dtype, embedding_input_dim
    ledger: dict[str, Any]
    weight_hash: str
    n_layers: int
    seconds: float
    warnings: list[str]
    notes: list[dict[str, str]]  # findings made while building (code, message, layer)
    optimizer: dict[str, Any] | None


class ProbeBuildsReply(Reply):
    tried: list[dict[str, Any]]  # each candidate with its match (full, shapes_match, ...) or error, seconds


class CkptGroupsReply(Reply):
    groups: list[dict[str, Any]]
    optimizer_values: int
    optimizer_layout: str | None
    declared_bytes: int
    data_bytes: int


class CkptBridgeReply(Reply):
    keras_version: str
    optimizer_values: int
    optimizer_restored: int
    compiled: bool
    optimizer_layout: str | None
    iterations: int | None
    optimizer: str | None


class _Verified(Reply):
    backend: str
    keras_version: str
    params_trainable: int
    params_non_trainable: int
    weight_hash: str
    layer_hashes: dict[str, str]
    n_outputs: int
    load_seconds: float
    predict_seconds: float
    compiled: bool
    library_version: str


class VerifyReply(_Verified, total=False):
    layer_names: list[str]  # with `layers`


class _Outputs(Reply):
    keras_version: str
    load_seconds: float
    n_outputs: int


class _Golden(_Outputs):
    nhwc_layers: list[str]  # channels_first layers run transposed (workers/nhwc.py)


class GoldenReply(_Golden, total=False):
    layer_names: list[str]  # with `layers`


class _HeldReference(_Outputs):
    held: bool  # the reference stays in the worker for fit_golden


class GoldenReferenceReply(_HeldReference, total=False):
    nhwc_layers: list[str]  # not held: op golden's own load
    layer_names: list[str]


class BridgeReply(Reply):
    keras_version: str
    compiled: bool
    how: str  # "loaded" | "read as data"
    wrapped: str | None  # a subclassed Model saved as the root: its class, re-saved as a one-layer functional model


class _Available(Reply):
    available: bool


class _Rerun(_Available):
    seconds: float


class RerunReply(_Rerun, total=False):
    reason: str  # not available


class _Gradients(Reply):
    names: list[str]
    shapes: list[list[int]]
    loss: float
    derandomized: list[str]
    load_seconds: float
    grad_seconds: float


class GradsReply(_Gradients):
    none: list[str]  # variables not connected to the loss
    notes: list[str]


class GoldenGradsReply(_Gradients):
    keras_version: str
    sensitivity: list[float]


class _Trained(_Available, total=False):
    reason: str  # not available: the rest is absent
    losses: list[float]
    weight_names: list[str]
    noise_disabled: list[str]
    optimizer_class: str
    iterations_after: int
    grads: dict[str, Any]  # with grads_out: the first step's gradients (as GradsReply)


class FitReply(_Trained, total=False):
    state_digests: list[str]


class FitGoldenReply(_Trained, total=False):
    state_loaded: bool
    state_source: str | None
    batchnorm_unfused: list[str]


class FitNoiseReply(_Available, total=False):
    reason: str
    runs: list[dict[str, Any]]  # seed, losses, iterations_after, changes, l2_changes, grad_changes
    weight_names: list[str]
    state_source: str | None
    load_seconds: float
    seconds: float


class DropHeldReply(Reply):
    dropped: list[str]


class ExportReply(Reply):
    format: str
    keras_format: str
    exporter_backend: str
    keras_version: str
    load_seconds: float
    export_seconds: float
    run_seconds: float
    runtime: str  # the format's runtime (workers/exported.py), its version
    version: str
    dynamic_batch: bool
    batch: int
    n_outputs: int
    runtime_peak_rss_mb: float
    unrolled: list[str]


class LoadedReply(Reply):
    loaded: dict[str, bool]
