"""Finding a store's artifacts and sources, by content (HDF5 signature, a Keras zip archive, a SavedModel directory),
not only by extension: a local tree or an fsspec URL, listed without copying it."""

from __future__ import annotations

import os
import posixpath
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from k2to3.core.text import clip
from k2to3.errors import InputError
from k2to3.formats.artifact import sniff
from k2to3.source.files import SKIP_DIRS
from k2to3.stores.locations import filesystem, is_url

ARTIFACT_SUFFIXES = (".h5", ".hdf5", ".keras", ".hd5", ".model", ".weights")


@dataclass
class Tree:
    artifacts: list[Path] = field(default_factory=list)
    sources: list[Path] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)  # named like a model, but not one: why


def walk(paths: list[Path]) -> Tree:
    """Artifacts by content (HDF5 signature, zip, SavedModel dir), not only by extension."""
    tree = Tree()
    for root in paths:
        if root.is_file():
            (tree.sources if root.suffix in (".py", ".ipynb") else tree.artifacts).append(root)
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            d = Path(dirpath)
            if (d / "saved_model.pb").exists():
                tree.artifacts.append(d)
                dirnames[:] = []
                continue
            dirnames[:] = sorted(x for x in dirnames if x not in SKIP_DIRS)
            for name in sorted(filenames):
                p = d / name
                if name.endswith((".py", ".ipynb")):
                    tree.sources.append(p)
                    continue
                why = _not_artifact(p)
                if why is None:
                    tree.artifacts.append(p)
                elif name.lower().endswith(ARTIFACT_SUFFIXES):
                    tree.skipped.append((p, why))
    return tree


def _not_artifact(p: Path) -> str | None:
    """None for a Keras artifact, else why it is not one (said for files named like one)."""
    try:
        size = p.stat().st_size
        if size < 8:
            return f"{size} bytes: too short for HDF5 or a Keras archive"
        kind = sniff(p)
    except OSError as exc:
        return f"cannot read it ({exc.strerror})"
    if kind == "zip":  # a Keras archive, not any zip: it holds the model config
        try:
            with zipfile.ZipFile(p) as z:
                return None if "config.json" in z.namelist() else "a zip archive without config.json"
        except (OSError, zipfile.BadZipFile):
            return "a damaged zip archive"
    return None if kind == "hdf5" else "no HDF5 signature and not a Keras archive"


HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
SOURCE_SUFFIXES = (".py",)


@dataclass
class Entry:
    rel: str  # path relative to the store root, with '/' separators
    location: str  # local path or URL
    kind: str  # "artifact", "source" or "skipped" (named like a model, but not one)
    reason: str = ""  # why a "skipped" entry is not an artifact


def _sniff_bytes(head: bytes) -> str | None:
    if head.startswith(HDF5_SIGNATURE):
        return "hdf5"
    if head.startswith(b"PK\x03\x04"):
        return "zip"
    return None


def discover(root: str) -> list[Entry]:
    """Artifacts by content (HDF5 signature, Keras zip archive, SavedModel directory) and Python sources."""
    if not is_url(root):
        base = Path(root)
        if base.is_file():
            return [Entry(base.name, str(base), "source" if base.suffix == ".py" else "artifact")]
        tree = walk([base])
        out = [Entry(p.relative_to(base).as_posix(), str(p), "artifact") for p in tree.artifacts]
        out += [Entry(p.relative_to(base).as_posix(), str(p), "skipped", why) for p, why in tree.skipped]
        return out + [Entry(p.relative_to(base).as_posix(), str(p), "source") for p in tree.sources
                      if p.suffix == ".py"]
    fs, base = filesystem(root)
    base = base.rstrip("/")
    protocol = root.split("://", 1)[0]
    try:
        found = fs.find(base, detail=True)
    except FileNotFoundError:
        raise InputError(f"{root}: no such store", hint="check the URL and the credentials in the environment") \
            from None
    except Exception as exc:  # botocore/gcsfs errors (no credentials, access denied, no endpoint) share no base
        raise InputError(f"{root}: cannot list the store ({type(exc).__name__}: {clip(str(exc), 200)})",
                         hint="set the filesystem's usual credentials in the environment (docs/scale.md#storage)"
                         ) from None
    if not found and fs.isfile(base):  # a single artifact named by URL
        found = {base: fs.info(base)}
        base = posixpath.dirname(base)
    saved = sorted({posixpath.dirname(p) for p in found if posixpath.basename(p) == "saved_model.pb"})
    out = [Entry(posixpath.relpath(d, base), f"{protocol}://{d}", "artifact") for d in saved]
    for path, info in sorted(found.items()):
        if any(path.startswith(d + "/") for d in saved) or info.get("type") == "directory":
            continue
        rel = posixpath.relpath(path, base)
        if path.endswith(SOURCE_SUFFIXES):
            out.append(Entry(rel, f"{protocol}://{path}", "source"))
            continue
        named = path.lower().endswith(ARTIFACT_SUFFIXES)
        size = int(info.get("size") or 0)
        if size < 8:
            if named:
                out.append(Entry(rel, f"{protocol}://{path}", "skipped",
                                 f"{size} bytes: too short for HDF5 or a Keras archive"))
            continue
        why = None
        with fs.open(path, "rb") as f:
            kind = _sniff_bytes(f.read(8))
            if kind == "zip":  # a Keras archive holds its config; zipfile reads only the central directory
                f.seek(0)
                try:
                    kind = "zip" if "config.json" in zipfile.ZipFile(f).namelist() else None
                    why = None if kind else "a zip archive without config.json"
                except (OSError, zipfile.BadZipFile):
                    kind, why = None, "a damaged zip archive"
        if kind:
            out.append(Entry(rel, f"{protocol}://{path}", "artifact"))
        elif named:
            out.append(Entry(rel, f"{protocol}://{path}", "skipped", why or "no HDF5 signature and not a Keras "
                             "archive"))
    return sorted(out, key=lambda e: (e.kind, e.rel))
