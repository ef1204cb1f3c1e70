"""What the parent and a backend worker say to each other: every op's typed request, its reply type (replies.py),
the registry of the ops, and their JSON lines.

Both sides import this module (it imports neither keras nor a backend): the parent builds a request
(`VerifyRequest(keras=..., inputs=..., out=...)`) and `Worker.call` (workers/process.py) writes it as one JSON line,
`{"op": "verify", ...fields}`; the child (workers/child.py) reads the line back into the same request type, serves it
with the op function its table names for that type, and answers one JSON line, the op's reply with `ok` and the
job's `memory`. A line naming an unknown op, a key the request type does not have or without a key it needs is
refused with a ProtocolError, and so is a reply with a key its type does not declare. `OPS` is the registry (op name
-> request type, reply type); docs/architecture.md's op table is generated from it
(`python -m k2to3.interfaces.docgen.worker_ops --write`).

Requests are frozen keyword-only dataclasses; their fields are JSON values (paths as str, never Path). Replies are
TypedDicts (replies.py): at run time a reply stays the dict the op returned. Arrays never travel in a line: they go
through .npz and array files in the job's work directory, named by the request.
"""

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from k2to3.workers.replies import (
    BridgeReply,
    BuildReply,
    CkptBridgeReply,
    CkptGroupsReply,
    DropHeldReply,
    ExportReply,
    FitGoldenReply,
    FitNoiseReply,
    FitReply,
    GoldenGradsReply,
    GoldenReferenceReply,
    GoldenReply,
    GradsReply,
    LoadedReply,
    ProbeBuildsReply,
    Reply,
    RerunReply,
    VerifyReply,
)

R = TypeVar("R")
SHUTDOWN = "shutdown"  # the control line `{"op": "shutdown"}`: the child exits; no reply, not an op


class ProtocolError(ValueError):
    """A line or a request that does not follow the protocol (a bug in k2to3, never the user's input)."""


@dataclass(frozen=True, kw_only=True)
class Request(Generic[R]):
    """Every request carries the per-job switches of the worker (workers/process.py `with_switches`, child
    `_job_switches`): `onednn=False` runs a torch job with oneDNN (mkldnn) off, the retry after oneDNN's CPU convolution
    backward crashed the worker (checks/pool_round.py); `fixed_random=True` draws a fixed pattern in place of every
    random draw (a model whose graph draws them, workers/fixed_random.py)."""

    OP: ClassVar[str] = ""  # set by @op
    onednn: bool | None = None
    fixed_random: bool = False


SWITCHES = tuple(f.name for f in dataclasses.fields(Request))


@dataclass(frozen=True)
class Op:
    name: str
    request: type[Request[Any]]
    reply: type

    @property
    def what(self) -> str:
        """What the op does: its request type's docstring, on one line."""
        return " ".join((self.request.__doc__ or "").split())


OPS: dict[str, Op] = {}


def op(name: str, reply: type) -> Any:
    """Register a request type as op `name` answered by `reply` (one op, one request type, one reply type)."""

    def register(cls: type[Request[Any]]) -> type[Request[Any]]:
        if name in OPS or any(o.request is cls for o in OPS.values()):
            raise ProtocolError(f"op {name!r} ({cls.__name__}) registered twice")
        cls.OP = name
        OPS[name] = Op(name, cls, reply)
        return cls

    return register


# -- the shared parts of the requests -------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True)
class Keras3Model(Request[R]):
    """The converted .keras, loaded with safe_mode=True after the generated modules are imported."""

    keras: str
    modules: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class Keras2Source(Request[R]):
    """How tf_keras loads the Keras 2 model (pipeline/tf_keras_reference.py `golden_args`;
    workers/tf_keras_outputs.py)."""

    k2_module: str | None = None  # the Keras 2 module generated from --src: its objects
    trust_bytecode: bool = False  # let tf_keras load the file's Lambda bytecode
    build_fn: str | None = None  # a weights-only file: the --src function that builds the model
    build_args: dict[str, Any] | None = None
    golden_config: str | None = None  # a JSON config tf_keras builds the model from (Lambdas named, Keras 1, CuDNN)
    golden_by_name: bool = False  # load golden_config's weights by layer name
    theano_kernels: bool = False  # a Theano file: flip the convolution kernels


@dataclass(frozen=True, kw_only=True)
class TfKerasModel(Keras2Source[R]):
    h5: str  # the Keras 2 HDF5


@dataclass(frozen=True, kw_only=True)
class TrainingBatch(Request[R]):
    """The batch and the steps of `--fit-steps`."""

    inputs: str  # .npz in0..
    targets: str  # .npz y0..
    steps: int
    loss: str | None = None  # --loss in place of the file's


# -- the ops --------------------------------------------------------------------------------------------------------
@op("build", BuildReply)
@dataclass(frozen=True, kw_only=True)
class BuildRequest(Request[BuildReply]):
    """Rebuild the Keras 3 model from the upgrade plan (or the --src build function), restore every weight by name
    and the optimizer state, save the .keras. Tensorflow worker."""

    plan: str  # the plan's JSON
    h5: str
    out: str  # the .keras
    modules: list[str] = field(default_factory=list)
    build_fn: str | None = None
    build_args: dict[str, Any] | None = None
    optimizer_state: bool = True


@op("probe_builds", ProbeBuildsReply)
@dataclass(frozen=True, kw_only=True)
class ProbeBuildsRequest(Request[ProbeBuildsReply]):
    """Build each candidate --src function with tf_keras and match its weight groups to the file's."""

    candidates: list[dict[str, Any]]  # fn, k2_module, build_args, score, ...
    groups: list[dict[str, Any]]  # the file's weight groups: name, shapes
    order_free: bool = False  # a TF checkpoint: shapes sorted within a group


@op("ckpt_groups", CkptGroupsReply)
@dataclass(frozen=True, kw_only=True)
class CkptGroupsRequest(Request[CkptGroupsReply]):
    """Read a TF checkpoint's index: its weight groups, checked against the bytes its data files hold."""

    prefix: str


@op("ckpt_bridge", CkptBridgeReply)
@dataclass(frozen=True, kw_only=True)
class CkptBridgeRequest(Request[CkptBridgeReply]):
    """Load a TF checkpoint into the --src build with tf_keras (with its optimizer slots) and re-save it as HDF5."""

    prefix: str
    k2_module: str
    fn: str
    out: str
    build_args: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class OutputsOnInputs:
    """A model run on the seeded inputs: where they are, where its outputs go, and every layer's with `layers`."""

    inputs: str
    out: str
    layers: bool = False
    layers_out: str | None = None


@op("verify", VerifyReply)
@dataclass(frozen=True, kw_only=True)
class VerifyRequest(Keras3Model[VerifyReply], OutputsOnInputs):
    """Load the .keras on this backend: parameter counts, weight hashes, outputs on the seeded inputs (every
    layer's with `layers`)."""

    hold: bool = False  # keep the model for op fit (--fit-steps, workers/training/held_models.py)


@op("golden", GoldenReply)
@dataclass(frozen=True, kw_only=True)
class GoldenRequest(TfKerasModel[GoldenReply], OutputsOnInputs):
    """The Keras 2 golden outputs: tf_keras loads the original model and runs it on the seeded inputs (every
    layer's with `layers`)."""


@op("golden_reference", GoldenReferenceReply)
@dataclass(frozen=True, kw_only=True)
class GoldenReferenceRequest(TfKerasModel[GoldenReferenceReply]):
    """The golden outputs from the compiled tf_keras reference --fit-steps trains, held in the worker for op
    fit_golden (op golden's load when it cannot load compiled)."""

    inputs: str
    out: str
    loss: str | None = None
    layers: bool = False
    layers_out: str | None = None


@op("bridge", BridgeReply)
@dataclass(frozen=True, kw_only=True)
class BridgeRequest(Request[BridgeReply]):
    """Load a tf.keras .keras archive or SavedModel with tf_keras (safe_mode=True) and re-save it as HDF5."""

    src: str
    out: str
    k2_module: str | None = None


@op("float64", RerunReply)
@dataclass(frozen=True, kw_only=True)
class Float64Request(Keras2Source[RerunReply]):
    """Rerun the model in `dtype` on the same weights and inputs: the .keras on this backend, or (`golden`) the
    Keras 2 model with tf_keras; never an error (available: false, reason)."""

    inputs: str
    out: str
    dtype: str = "float64"  # float32: the shadow of a mixed-precision model
    golden: bool = False
    h5: str | None = None  # golden
    keras: str | None = None  # not golden
    modules: list[str] = field(default_factory=list)


@op("grads", GradsReply)
@dataclass(frozen=True, kw_only=True)
class GradsRequest(Keras3Model[GradsReply]):
    """Differentiate the loss of the .keras on this backend; the gradients go to `out` (an array file)."""

    inputs: str
    targets: str
    out: str
    losses: list[Any]  # one loss spec per output (checks/training/gradient_check.py)
    training: bool = True


@op("golden_grads", GoldenGradsReply)
@dataclass(frozen=True, kw_only=True)
class GoldenGradsRequest(TfKerasModel[GoldenGradsReply]):
    """Differentiate the loss of the Keras 2 model with tf_keras, and the gradients' sensitivity to a nudge of the
    inputs."""

    inputs: str
    targets: str
    out: str
    losses: list[Any]
    training: bool = True


@op("fit", FitReply)
@dataclass(frozen=True, kw_only=True)
class FitRequest(Keras3Model[FitReply], TrainingBatch[FitReply]):
    """Run the training steps on the .keras (the model op verify held, else loaded); weights after them to
    `weights_out`, the first step's gradients to `grads_out`."""

    weights_out: str
    grads_out: str | None = None


@op("fit_golden", FitGoldenReply)
@dataclass(frozen=True, kw_only=True)
class FitGoldenRequest(TfKerasModel[FitGoldenReply], TrainingBatch[FitGoldenReply]):
    """Run the training steps on the tf_keras reference (held by op golden_reference, else loaded compiled)."""

    weights_out: str
    grads_out: str | None = None
    hold: bool = False  # keep the reference, its state before and after, for op fit_noise


@op("fit_noise", FitNoiseReply)
@dataclass(frozen=True, kw_only=True)
class FitNoiseRequest(TfKerasModel[FitNoiseReply], TrainingBatch[FitNoiseReply]):
    """The float32 training noise probe: the reference's steps again from its weights nudged by ±eps, one run per
    seed, each measured against the reference's weights after its own steps."""

    weights_out: list[str]  # one per seed: a run's weights when they cannot be measured in the worker
    eps: float
    seeds: list[int]
    keep: bool = False  # hold the reference for a next call
    held_only: bool = False  # only on a held reference: never load it
    ref_weights: str | None = None  # the reference's weights after its steps when not held
    grads: bool = False  # each run's first-step gradients measured against the reference's too
    ref_grads: str | None = None
    grads_only: bool = False  # one step, its gradients only


@op("drop_held", DropHeldReply)
@dataclass(frozen=True, kw_only=True)
class DropHeldRequest(Request[DropHeldReply]):
    """Drop what earlier jobs of the run hold in this worker (one slot, or all)."""

    slot: str | None = None


@op("export", ExportReply)
@dataclass(frozen=True, kw_only=True)
class ExportRequest(Keras3Model[ExportReply]):
    """Export the .keras with Keras 3's exporter, then run the file in a fresh process of its own runtime."""

    format: str  # onnx | litert | savedmodel | torch
    path: str
    inputs: str
    out: str


@op("loaded", LoadedReply)
@dataclass(frozen=True, kw_only=True)
class LoadedRequest(Request[LoadedReply]):
    """Which of `names` this worker has really imported (for the tests and a slow start's diagnosis)."""

    names: list[str]


# -- the lines ------------------------------------------------------------------------------------------------------
def encode_request(req: Request[Any]) -> str:
    """The request as its JSON line (without the newline)."""
    if not isinstance(req, Request) or not dataclasses.is_dataclass(req):
        raise ProtocolError(f"a worker op takes a typed request (k2to3.workers.protocol), not {type(req).__name__}")
    spec = OPS.get(req.OP)
    if spec is None or spec.request is not type(req):
        raise ProtocolError(f"{type(req).__name__} is not a registered op's request (protocol.op)")
    return json.dumps({"op": req.OP, **dataclasses.asdict(req)})


def decode_request(line: str | bytes) -> Request[Any] | None:
    """The request a line holds (None: the shutdown line)."""
    data = json.loads(line)
    if not isinstance(data, dict):
        raise ProtocolError(f"a request line holds a JSON object, not {type(data).__name__}")
    name = data.pop("op", None)
    if name == SHUTDOWN and not data:
        return None
    spec = OPS.get(name) if isinstance(name, str) else None
    if spec is None:
        raise ProtocolError(f"unknown op {name!r} (the ops: {', '.join(OPS)})")
    fields = dataclasses.fields(spec.request)
    required = {f.name for f in fields if f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING}
    _check_keys(f"op {name!r} ({spec.request.__name__})", set(data), required, {f.name for f in fields})
    return spec.request(**data)


def decode_reply(req: Request[R], data: dict[str, Any]) -> R:
    """A successful reply to `req`, its keys checked against the op's reply type."""
    reply = OPS[req.OP].reply
    _check_keys(f"the reply to op {req.OP!r} ({reply.__name__})", set(data), set(reply.__required_keys__),
                set(reply.__required_keys__) | set(reply.__optional_keys__))
    return data  # type: ignore[return-value]  # a TypedDict is its dict


def _check_keys(what: str, got: set[str], required: set[str], known: set[str]) -> None:
    unknown, missing = sorted(got - known), sorted(required - got)
    if unknown or missing:
        raise ProtocolError(f"{what}: " + "; ".join(
            [*([f"unknown keys {unknown}"] if unknown else []), *([f"missing keys {missing}"] if missing else [])])
            + f" (it takes {sorted(known)})")


def fields_of(op_name: str) -> tuple[list[str], list[str]]:
    """An op's request fields (without the switches every request has) and its reply keys (without ok and memory;
    an optional key ends in `?`): docs/architecture.md's op table."""
    spec = OPS[op_name]
    req = [f.name for f in dataclasses.fields(spec.request) if f.name not in SWITCHES]
    common = set(Reply.__required_keys__)
    reply = [k + ("?" if k in spec.reply.__optional_keys__ else "") for k in spec.reply.__annotations__
             if k not in common]
    return req, reply
