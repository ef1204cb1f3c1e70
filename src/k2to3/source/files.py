"""Which files to read, [tool.k2to3] configuration, notebooks, and a content-hash cache."""

from __future__ import annotations

import fnmatch
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from k2to3.core import tables
from k2to3.core.paths import cache_dir
from k2to3.version import __version__

SKIP_DIRS = {".git", ".hg", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache", ".ruff_cache", "node_modules",
             "build", "dist", ".ipynb_checkpoints"}


@dataclass
class Config:
    select: list[str] = field(default_factory=list)  # code prefixes; empty = all
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)  # glob patterns
    source: Path | None = None

    def wants(self, code: str) -> bool:
        if self.select and not any(code.startswith(s) for s in self.select):
            return False
        return not any(code.startswith(i) for i in self.ignore)


def load_config(start: Path) -> Config:
    """[tool.k2to3] from the nearest pyproject.toml at or above `start`."""
    d = start.resolve()
    if d.is_file():
        d = d.parent
    for p in (d, *d.parents):
        py = p / "pyproject.toml"
        if py.is_file():
            import tomllib  # only when there is a pyproject.toml to read

            try:
                data = tomllib.loads(py.read_text())
            except (tomllib.TOMLDecodeError, OSError):
                return Config()
            t = data.get("tool", {}).get("k2to3", {})
            return Config(list(t.get("select", [])), list(t.get("ignore", [])), list(t.get("exclude", [])), py)
    return Config()


def discover(paths: list[Path], cfg: Config) -> Iterator[Path]:
    for root in paths:
        if root.is_file():
            yield root
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                if name.endswith((".py", ".ipynb")):
                    p = Path(dirpath) / name
                    rel = str(p)
                    if not any(fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(name, pat) for pat in cfg.exclude):
                        yield p


def notebook_cells(text: str) -> list[tuple[int, str]]:
    """(cell index, code) for code cells; IPython magics and shell lines become comments."""
    nb = json.loads(text)
    out = []
    for i, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        src = cell.get("source", "")
        src = "".join(src) if isinstance(src, list) else src
        lines = ["# " + ln if ln.lstrip().startswith(("%", "!", "?")) else ln for ln in src.splitlines()]
        out.append((i, "\n".join(lines) + "\n"))
    return out


def notebook_source(text: str) -> str:
    """A notebook's code cells as one module, in order (a later definition replaces an earlier one, as re-running
    the notebook does); a cell that does not parse is left out, with a comment where it was."""
    import ast

    parts = []
    for i, code in notebook_cells(text):
        try:
            ast.parse(code)
        except SyntaxError:
            code = f"# cell {i}: not Python 3, left out\n"
        parts.append(f"# cell {i}\n{code}")
    return "".join(parts)


class Cache:
    """Lint results keyed by file content hash, in one index file per tool version and rule set
    (~/.cache/k2to3 or K2TO3_CACHE_DIR): a warm run reads one JSON file instead of parsing."""

    def __init__(self, directory: Path | None = None, enabled: bool = True):
        self.path = (directory or cache_dir()) / f"lint-{__version__}-{tables.key()}.json"
        self.enabled = enabled
        self._index: dict[str, dict] | None = None
        self._dirty = False

    @staticmethod
    def key(data: bytes) -> str:
        import hashlib  # only with the cache: loading its OpenSSL slows a cold start

        return hashlib.blake2b(data, digest_size=16).hexdigest()

    def load(self) -> dict[str, dict]:
        if self._index is None:
            try:
                self._index = json.loads(self.path.read_text())
            except (OSError, ValueError):
                self._index = {}
        return self._index

    def get(self, data: bytes) -> dict | None:
        return self.load().get(self.key(data)) if self.enabled else None

    def put(self, data: bytes, value: dict) -> None:
        self.put_key(self.key(data), value)

    def put_key(self, key: str, value: dict) -> None:
        if self.enabled:
            self.load()[key] = value
            self._dirty = True

    def flush(self) -> None:
        if not (self.enabled and self._dirty):
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(self._index))
            tmp.replace(self.path)
        except OSError:
            pass  # a read-only home must not break lint
