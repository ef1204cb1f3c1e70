"""The one result cache of a store: finished results by key, one JSON file in the output directory or store,
rewritten atomically after each result, so an interrupted audit --verify or convert STORE/ resumes. Keys begin with
the k2to3 version: a new version verifies again."""

from __future__ import annotations

import json
from typing import Any

from k2to3.stores import locations
from k2to3.version import __version__

AUDIT_CACHE = ".k2to3-audit-cache.json"  # audit --verify: by artifact content
BATCH_CACHE = ".k2to3-batch-cache.json"  # convert STORE/: by content, options, sources and output path


def content_key(sha256: str) -> str:
    return f"{__version__}:{sha256}"


class StoreCache:
    def __init__(self, out_root: str, name: str):
        self.location = locations.join(out_root, name)
        text = locations.read_text(self.location)
        try:
            self.data: dict[str, Any] = json.loads(text) if text else {}
        except ValueError:
            self.data = {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self.data.get(key)

    def put(self, key: str, value: dict[str, Any]) -> None:
        self.data[key] = value
        locations.write_text(self.location, json.dumps(self.data))
