"""Audit report forms: JSON, Markdown and one self-contained HTML page (inline CSS, SVG and script, no network),
all rendered from one report model (model.build)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from k2to3.core.writable import write_atomic
from k2to3.stores.auditreport.markdown import to_markdown
from k2to3.stores.auditreport.model import SCHEMA, build
from k2to3.stores.auditreport.page import layer_plot, to_html

__all__ = ["SCHEMA", "build", "layer_plot", "to_html", "to_markdown", "write"]


def write(rep: dict[str, Any], out_dir: Path, formats: list[str], model: dict[str, Any] | None = None
          ) -> list[Path]:
    """Write audit.{json,md,html} for run_audit's report (`model`: its build() when the caller has it); each file
    goes through a temporary name, so a failure leaves no partial report."""
    model = model or build(rep)
    indent = 2 if len(model["artifacts"]) <= 1000 else None  # no indent: json's C encoder, fast on a large store
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for fmt in formats:
        p = out_dir / f"audit.{fmt}"
        text = {"json": lambda: json.dumps(model, indent=indent, default=str) + "\n", "md": lambda: to_markdown(model),
                "html": lambda: to_html(model)}[fmt]()
        write_atomic(p, text)
        written.append(p)
    return written
