"""The protocol between the parent and the backend workers (workers/protocol.py, workers/replies.py): every op the
child serves has one registered request type and reply type, and every registered op is served; a request is its
typed dataclass on both sides (a dict, an unknown key or a missing key is refused with a clear error, in the parent
before anything is written and in the child before any op runs); docs/architecture.md's op table is the registry's.
One real worker answers typed requests and refuses a malformed line without dying. No mock of Keras."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any

import pytest
from conftest import ROOT

from k2to3.workers import child, protocol, replies
from k2to3.workers.process import Worker, with_switches
from k2to3.workers.protocol import (
    OPS,
    DropHeldRequest,
    LoadedRequest,
    ProtocolError,
    Request,
    VerifyRequest,
    decode_reply,
    decode_request,
    encode_request,
)

SAMPLE = {str: "x", int: 2, float: 0.5, bool: True}


def value(t: Any) -> Any:
    """A value of type `t` (the first of a union; lists and dicts empty)."""
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        return value(next(a for a in typing.get_args(t) if a is not type(None)))
    base = typing.get_origin(t) or t
    return base() if base in (list, dict) else SAMPLE[base]


def sample(req_type: type) -> Request[Any]:
    """The request with a value of its type in every field."""
    return req_type(**{f.name: value(f.type) for f in dataclasses.fields(req_type)})


def test_every_op_the_child_serves_is_registered_with_a_request_and_a_reply_type_and_the_reverse():
    assert len(OPS) == 17
    assert set(child.OPS) == {spec.request for spec in OPS.values()}
    for name, spec in OPS.items():
        assert spec.request.OP == name and issubclass(spec.request, Request)
        params = spec.request.__dataclass_params__  # type: ignore[attr-defined]
        assert params.frozen and dataclasses.fields(spec.request)[0].kw_only, name
        assert "__doc__" in vars(spec.request) and not spec.request.__doc__.startswith(spec.request.__name__ + "("), \
            f"{name}: its request type says what the op does (the docs' op table)"
        assert issubclass(spec.reply, dict) and {"ok", "memory"} <= spec.reply.__required_keys__, name
        assert spec.reply.__module__ == replies.__name__


def test_every_op_function_takes_its_typed_request():
    for req_type, fn in child.OPS.items():
        hints = typing.get_type_hints(fn)
        param = next(iter(hints))  # the first parameter: the request
        accepted = typing.get_args(hints[param]) or (hints[param],)
        assert req_type in accepted, f"{fn.__module__}.{fn.__name__} takes {hints[param]}, not {req_type.__name__}"


@pytest.mark.parametrize("name", sorted(OPS))
def test_a_request_makes_the_round_trip_through_its_json_line(name):
    req = sample(OPS[name].request)
    line = encode_request(req)
    assert json.loads(line)["op"] == name
    assert decode_request(line) == req
    assert decode_request(line.encode()) == req


def test_a_line_with_an_unknown_or_a_missing_key_or_op_is_refused():
    line = json.loads(encode_request(VerifyRequest(keras="m.keras", inputs="x.npz", out="o.npz")))
    with pytest.raises(ProtocolError, match=r"op 'verify' \(VerifyRequest\): unknown keys \['kears'\]"):
        decode_request(json.dumps({**line, "kears": "m.keras"}))
    del line["inputs"]
    with pytest.raises(ProtocolError, match=r"missing keys \['inputs'\]"):
        decode_request(json.dumps(line))
    with pytest.raises(ProtocolError, match="unknown op 'verifi'"):
        decode_request(json.dumps({**line, "op": "verifi"}))
    with pytest.raises(ProtocolError, match="a JSON object"):
        decode_request("[1]")
    # a key with a default may be left out; the shutdown line is no request
    assert decode_request('{"op": "drop_held"}') == DropHeldRequest()
    assert decode_request(json.dumps({"op": protocol.SHUTDOWN})) is None


def test_the_parent_sends_typed_requests_only():
    """A dict or an unregistered type never reaches a worker: Worker.call refuses it before it writes a line (no
    process is needed to see it)."""
    worker = Worker.__new__(Worker)  # not started: the call must fail before it touches the process
    with pytest.raises(ProtocolError, match="typed request"):
        worker.call({"op": "verify", "keras": "m.keras"})  # type: ignore[arg-type]

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Unregistered(Request[dict]):
        """Not an op."""

        x: int = 1

    with pytest.raises(ProtocolError, match="not a registered op"):
        worker.call(Unregistered())
    with pytest.raises(TypeError, match="kears"):
        VerifyRequest(kears="m.keras", inputs="x.npz", out="o.npz")  # type: ignore[call-arg]


def test_a_reply_is_checked_against_its_type():
    req = DropHeldRequest()
    ok = {"ok": True, "memory": {"peak_rss_mb": 1.0, "idle_rss_mb": 1.0}, "dropped": []}
    assert decode_reply(req, ok) == ok
    with pytest.raises(ProtocolError, match=r"reply to op 'drop_held' \(DropHeldReply\): unknown keys \['extra'\]"):
        decode_reply(req, {**ok, "extra": 1})
    with pytest.raises(ProtocolError, match=r"missing keys \['dropped'\]"):
        decode_reply(req, {k: v for k, v in ok.items() if k != "dropped"})
    fit = {"ok": True, "memory": ok["memory"], "available": False, "reason": "no compile config"}
    assert decode_reply(sample(protocol.FitRequest), fit) == fit  # the keys of a reply that says why not


def test_per_job_switches_are_request_fields():
    seen = []

    class Recorder:
        def call(self, req):
            seen.append(req)
            return {}

    with_switches(lambda w: w.call(DropHeldRequest(slot="keras3")), fixed_random=True)(Recorder())
    assert seen == [DropHeldRequest(slot="keras3", fixed_random=True)]
    with pytest.raises(ProtocolError, match="not a per-job switch"):
        with_switches(lambda w: None, hold=True)


def test_the_architecture_map_lists_the_registered_ops():
    from k2to3.interfaces.docgen.worker_ops import BEGIN, updated

    doc = (ROOT / "docs" / "architecture.md").read_text()
    assert BEGIN in doc and updated(doc) == doc, "run: python -m k2to3.interfaces.docgen.worker_ops --write"
    for name in OPS:
        assert f"| `{name}` |" in doc


def test_a_real_worker_answers_typed_requests_and_refuses_a_malformed_line(tmp_path):
    """A jax worker (the lightest start): typed requests in, typed replies out; a line with an unknown key gets an
    error reply naming it, and the worker serves the next request."""
    with Worker("jax", tmp_path) as w:
        got = w.call(LoadedRequest(names=["json", "k2to3_no_such_module"]))
        assert got["ok"] and got["loaded"] == {"json": True, "k2to3_no_such_module": False}
        assert set(got["memory"]) == {"peak_rss_mb", "idle_rss_mb"}
        assert w.stats["peak_by_op_mb"]["loaded"] > 0
        w.wait_ready()
        assert w.proc.stdin and w.proc.stdout
        w.proc.stdin.write(b'{"op": "drop_held", "slots": "keras3"}\n')
        w.proc.stdin.flush()
        bad = json.loads(w.proc.stdout.readline())
        assert not bad["ok"] and "ProtocolError" in bad["error"] and "unknown keys ['slots']" in bad["error"]
        assert w.call(DropHeldRequest())["dropped"] == []
