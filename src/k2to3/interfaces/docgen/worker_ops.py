"""Render docs/architecture.md's table of the worker ops from their registry, workers/protocol.py `OPS`
(`python -m k2to3.interfaces.docgen.worker_ops --write`; without --write, print the section)."""

from __future__ import annotations

import dataclasses

from k2to3.interfaces.docgen import replace_section, section_main
from k2to3.workers.protocol import OPS, SWITCHES, Keras2Source, fields_of

BEGIN, END = "<!-- worker-ops:begin -->", "<!-- worker-ops:end -->"
# how tf_keras loads the Keras 2 model: the fields several requests share, named once
SOURCE = [f.name for f in dataclasses.fields(Keras2Source) if f.name not in SWITCHES]


def _request(fields: list[str]) -> str:
    if set(SOURCE) <= set(fields):
        fields = [*(f for f in fields if f not in SOURCE), "*tf_keras source*"]
    return ", ".join(fields)


def render() -> str:
    out = [BEGIN, f"\n\nGenerated from `workers/protocol.py` by `python -m k2to3.interfaces.docgen.worker_ops --write` "
           f"(a test checks it is current). Every request also takes the per-job switches "
           f"({', '.join(f'`{s}`' for s in SWITCHES)}); every reply also carries `ok` and the job's `memory`; "
           f"*tf_keras source*: {', '.join(SOURCE)} (how tf_keras loads the Keras 2 model); `?`: a key a reply may "
           "lack.\n\n| op | what it does | request | reply |\n|---|---|---|---|\n"]
    for name, spec in OPS.items():
        req, reply = fields_of(name)
        out.append(f"| `{name}` | {spec.what} | {_request(req)} | {', '.join(reply)} |\n")
    out.append("\n" + END)
    return "".join(out)


def updated(doc: str) -> str:
    return replace_section(doc, BEGIN, END, render())


if __name__ == "__main__":
    section_main("architecture.md", render, updated)
