"""The worker environment of `--target-keras 3.N`: a venv under the cache directory (K2TO3_CACHE_DIR, else
~/.cache/k2to3) holding keras==3.N.* beside the backend rules/keras_versions.toml names, created on demand from the
package index with pip (timed and measured, locked against a concurrent creation), or the interpreter the user
names with --target-python. It holds no k2to3: each run puts a copy of k2to3/portable alone on its PYTHONPATH."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
import venv
from dataclasses import dataclass
from pathlib import Path

from k2to3.core.keras_versions import Version, env_spec, show
from k2to3.errors import Exit, InputError, K2to3Error

PORTABLE_DIR = Path(__file__).resolve().parents[1] / "portable"


@dataclass
class TargetEnv:
    python: Path
    backend: str
    created: bool  # made by this run (else found in the cache or named by the user)
    seconds: float
    size_bytes: int
    keras_version: str

    def to_json(self) -> dict[str, object]:
        return {"python": str(self.python), "backend": self.backend, "created": self.created,
                "seconds": round(self.seconds, 1), "size_mb": round(self.size_bytes / 2**20, 1),
                "keras_version": self.keras_version}


def cache_root() -> Path:
    return Path(os.environ.get("K2TO3_CACHE_DIR") or Path.home() / ".cache" / "k2to3") / "targets"


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


BACKEND_PREFERENCE = ("jax", "torch", "tensorflow")  # the lightest import first


def _probe(python: Path) -> tuple[str, list[str]]:
    """The keras release `python` has and the backends installed beside it, from metadata (nothing imported)."""
    code = ("import importlib.metadata as m, importlib.util as u; print(m.version('keras')); "
            f"print(' '.join(b for b in {BACKEND_PREFERENCE!r} if u.find_spec(b)))")
    try:
        r = subprocess.run([str(python), "-s", "-c", code], capture_output=True, text=True, timeout=120)
    except OSError as exc:
        raise InputError(f"--target-python {python}: cannot run it ({exc.strerror})",
                         hint="name a python executable") from None
    lines = r.stdout.splitlines()
    if r.returncode != 0 or not lines:
        raise InputError(f"--target-python {python}: it has no keras", hint="pip install keras==3.N and a backend")
    return lines[0].strip(), (lines[1].split() if len(lines) > 1 else [])


def _keras_of(python: Path) -> str:
    return _probe(python)[0]


def named(python: Path, target: Version) -> TargetEnv:
    """--target-python: an interpreter the user keeps (a machine without index access); its keras must be 3.N and
    one backend must be installed beside it (jax, else torch, else tensorflow)."""
    if not python.is_file():
        raise InputError(f"--target-python {python}: no such interpreter", hint="name a python executable")
    found, backends = _probe(python)
    if not backends:
        raise InputError(f"--target-python {python}: no backend beside keras {found}",
                         hint="pip install jax (or torch, or tensorflow) there")
    backend = backends[0]
    if ".".join(found.split(".")[:2]) != show(target):
        raise InputError(f"--target-python {python}: it has keras {found}, not {show(target)}",
                         hint=f"pip install 'keras=={show(target)}.*' there, or pass --target-keras "
                              f"{'.'.join(found.split('.')[:2])}")
    return TargetEnv(python=python, backend=backend, created=False, seconds=0.0, size_bytes=0, keras_version=found)


def ensure(target: Version, progress: object = None) -> TargetEnv:
    """The cached environment of `target`, created first if missing. Built in a private directory and renamed into
    place under a lock: a concurrent run waits for it and a failed one leaves nothing behind."""
    spec = env_spec(target)
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    home = root / f"keras-{show(target)}-{spec.backend}"
    python = home / "bin" / "python"
    with open(root / f".{home.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = home / "k2to3-target.json"
        if stamp.is_file():
            info = json.loads(stamp.read_text())
            return TargetEnv(python=python, backend=spec.backend, created=False, seconds=info["seconds"],
                             size_bytes=info["size_bytes"], keras_version=info["keras_version"])
        if callable(progress):
            progress(f"creating the Keras {show(target)} environment ({spec.backend}) from the package index")
        t0 = time.perf_counter()
        tmp = root / f".{home.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            venv.EnvBuilder(with_pip=True, symlinks=True).create(tmp)
            # the venv's own pip reads the same pip.conf and index as the user's
            r = subprocess.run([str(tmp / "bin" / "python"), "-m", "pip", "install", "-q", "--no-input",
                                f"keras=={show(target)}.*", *spec.packages], capture_output=True, text=True)
            if r.returncode != 0:
                last = (r.stderr.strip().splitlines() or ["no output"])[-1]
                raise K2to3Error(f"--target-keras {show(target)}: pip could not install keras {show(target)}: {last}",
                                 Exit.USAGE, hint="check the package index, or pass --target-python")
            if home.exists():
                shutil.rmtree(home)
            os.replace(tmp, home)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        seconds, size = time.perf_counter() - t0, _size(home)
        found = _keras_of(python)
        stamp.write_text(json.dumps({"seconds": round(seconds, 1), "size_bytes": size, "keras_version": found,
                                     "packages": list(spec.packages), "python": sys.version.split()[0]}))
        return TargetEnv(python=python, backend=spec.backend, created=True, seconds=seconds, size_bytes=size,
                         keras_version=found)


def portable_path(work: Path) -> Path:
    """A directory holding k2to3/portable and an empty k2to3/__init__.py: what a converted model imports, alone."""
    root = work / "target-path"
    pkg = root / "k2to3"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text("")
    shutil.copytree(PORTABLE_DIR, pkg / "portable", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))
    return root
