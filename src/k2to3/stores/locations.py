"""Model stores: a local directory or an fsspec URL (s3://, gs://, file://, ...), read one artifact at a time.

A store is never copied whole: discovery lists it and sniffs each file's first bytes; an artifact is
downloaded to a private temporary directory just before it is converted (h5py then reads a local file, so
the h5safe checks apply unchanged) and deleted after. Credentials come from the usual environment of the
filesystem (AWS_* and AWS_ENDPOINT_URL for S3-compatible servers, GOOGLE_APPLICATION_CREDENTIALS, ...), never
from k2to3 flags. fsspec is imported only for URLs (the `cluster` extra)."""

from __future__ import annotations

import os
import posixpath
import tempfile
from pathlib import Path
from typing import Any

from k2to3.errors import InputError


def is_url(location: str | os.PathLike) -> bool:
    return "://" in str(location)


def filesystem(url: str) -> tuple[Any, str]:
    """(fsspec filesystem, path inside it) for a URL; a clear error when the extra is missing."""
    try:
        import fsspec
    except ImportError:
        raise InputError(f"{url}: reading URLs needs fsspec", hint="pip install 'k2to3[cluster]'") from None
    try:
        return fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as exc:
        raise InputError(f"{url}: no filesystem for this URL ({exc})",
                         hint="install the fsspec backend for it, e.g. s3fs for s3:// or gcsfs for gs://") from None


def join(root: str, rel: str) -> str:
    return root.rstrip("/") + "/" + rel if is_url(root) else str(Path(root) / rel)








class Staging:
    """A private temporary directory holding local copies of one artifact (and its sources) while it is worked
    on. Local locations are used in place."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="k2to3-stage-"))

    def local(self, location: str, rel: str | None = None) -> Path:
        if not is_url(location):
            return Path(location)
        fs, path = filesystem(location)
        target = self.dir / "in" / (rel or posixpath.basename(path.rstrip("/")))
        target.parent.mkdir(parents=True, exist_ok=True)
        if fs.isdir(path):
            fs.get(path.rstrip("/") + "/", str(target), recursive=True)
        else:
            fs.get(path, str(target))
        return target

    def output(self, location: str) -> Path:
        """Where to write `location`: itself when local, else a staging path uploaded by `publish`."""
        if not is_url(location):
            return Path(location)
        target = self.dir / "out" / posixpath.basename(location)
        target.parent.mkdir(parents=True, exist_ok=True)
        return target

    def close(self) -> None:
        import shutil

        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def publish(local: Path, location: str) -> None:
    """Upload a finished local file (or directory) to `location` (a URL); an object store's put is atomic."""
    fs, path = filesystem(location)
    if local.is_dir():
        fs.put(str(local).rstrip("/") + "/", path, recursive=True)
    else:
        fs.put(str(local), path)


def read_text(location: str) -> str | None:
    try:
        if not is_url(location):
            return Path(location).read_text()
        fs, path = filesystem(location)
        with fs.open(path, "r") as f:
            return f.read()
    except (FileNotFoundError, OSError):
        return None


def write_text(location: str, text: str) -> None:
    """Atomically: temp file + rename locally, one put on an object store."""
    if not is_url(location):
        p = Path(location)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.replace(p)
        return
    fs, path = filesystem(location)
    with fs.open(path, "w") as f:
        f.write(text)


def exists(location: str) -> bool:
    if not is_url(location):
        return Path(location).exists()
    fs, path = filesystem(location)
    return fs.exists(path)
