"""--src: the Python files a conversion reads definitions from (never runs), the build function of a weights-only
file, and the modules the resolution writes (the Keras 3 one beside the .keras, the Keras 2 one for tf_keras)."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from k2to3.core.findings import Finding
from k2to3.errors import InputError
from k2to3.formats.artifact import LegacyArtifact
from k2to3.source.buildargs import parse_build_args
from k2to3.source.classify import SEED_CALL
from k2to3.source.extract import index_sources
from k2to3.source.files import SKIP_DIRS, notebook_source
from k2to3.source.resolution import Resolution
from k2to3.source.source_index import SourceIndex
from k2to3.source.standalone_defaults import standalone_before_tf2, with_standalone_defaults
from k2to3.upgrade.needed_code import module_name_for


@dataclass
class Sources:
    files: list[Path]
    build_fn: str | None
    index: SourceIndex | None
    build_args: dict[str, Any] | None = None  # --build-args, or the values matched to a weights-only file
    match: dict[str, Any] | None = None  # how the build function and its arguments were matched to the file
    # build functions read from a script's top-level statements (source/script_builds.py): name -> what they are
    scripts: dict[str, str] = field(default_factory=dict)


def has_fn(spec: str) -> bool:
    head, sep, tail = spec.rpartition(":")
    # FUNCTION, CLASS (a keras.Model subclass) or CLASS.METHOD (a builder class's method that makes the model)
    return bool(sep) and bool(head) and all(p.isidentifier() for p in tail.split(".")) and tail.count(".") <= 1


def installed_package(spec: str) -> Path | None:
    """`--src NAME` for an installed package or module (keras_self_attention): the folder or file its import would
    load, found without importing it; None when `spec` is a path or no such package is installed."""
    import importlib.util

    if Path(spec).exists() or not all(p.isidentifier() for p in spec.split(".")) or spec.endswith((".py", "ipynb")):
        return None
    try:
        found = importlib.util.find_spec(spec.split(".")[0])
    except (ImportError, ValueError):
        return None
    if found is None:
        return None
    if found.submodule_search_locations:
        return Path(next(iter(found.submodule_search_locations)))
    return Path(found.origin) if found.origin and found.origin.endswith(".py") else None


def spec_path(spec: str) -> Path:
    return Path(spec.rsplit(":", 1)[0] if has_fn(spec) else spec)


def parse_sources(specs: tuple[str, ...]) -> tuple[list[Path], str | None]:
    """--src values -> (files, build function). `FILE:FUNCTION` names the build function; a directory stands for
    the .py files under it."""
    files, build_fn = [], None
    for spec in specs:
        if has_fn(spec):
            path, fn = spec.rsplit(":", 1)
            if build_fn and build_fn != fn:
                raise InputError(f"--src {spec}: a second build function (already {build_fn})",
                                 hint="name one build function")
            build_fn = fn
            files.append(Path(path))
        elif Path(spec).is_dir():
            files.extend(p for p in sorted(Path(spec).rglob("*.py")) if not SKIP_DIRS & set(p.parts))
        elif (package := installed_package(spec)) is not None:  # --src keras_self_attention: its files, read
            files.extend(p for p in sorted(package.rglob("*.py")) if not SKIP_DIRS & set(p.parts)) \
                if package.is_dir() else files.append(package)
        else:
            files.append(Path(spec))
    files = list(dict.fromkeys(files))  # a file named and also under a named directory: once
    for f in files:
        if not f.is_file():
            raise InputError(f"--src {f}: no such file (nor an installed package of that name)",
                             hint="pass the Python file that defines the model, a folder, or an installed package")
        if f.suffix not in (".py", ".ipynb"):
            raise InputError(f"--src {f}: not a .py file or notebook",
                             hint="pass the Python source (or the .ipynb notebook) that builds the model")
    named = [spec_path(s) for s in specs if not spec_path(s).is_dir() and installed_package(s) is None]
    siblings = [s for s in followed_imports(named) if s not in files]
    importers = [s for f in named for s in package_importers(f) if s not in files]
    return list(dict.fromkeys(siblings + files + importers)), build_fn


def package_importers(path: Path) -> list[Path]:
    """The files of the same package that import a --src file relatively (`from .model import textgenrnn_model`
    in textgenrnn.py): where the package calls its build function, with the arguments the search reads."""
    if not (path.parent / "__init__.py").is_file():
        return []
    import re

    pattern = re.compile(rf"^\s*from\s+\.{re.escape(path.stem)}\s+import\b", re.M)
    out = []
    for cand in sorted(path.parent.glob("*.py"))[:200]:
        if cand.resolve() == path.resolve():
            continue
        try:
            if pattern.search(cand.read_text(errors="replace")):
                out.append(cand)
        except OSError:
            continue
    return out


_NOT_LOCAL = frozenset({"keras", "tensorflow", "tf_keras", "numpy", "scipy", "h5py", "os", "sys", "math", "re",
                        "json", "time", "random", "pickle", "collections", "functools", "itertools", "typing",
                        "argparse", "logging", "pandas", "matplotlib", "sklearn", "torch", "jax", "cv2", "PIL"})
MAX_FOLLOWED = 200  # files read by following imports from the named --src files


def _module_files(base: Path, module: str, names: list[str]) -> list[Path]:
    """The files `from module import names` (or `import module`) reads under `base`, when they exist there."""
    out = []
    head = base.joinpath(*module.split(".")) if module else base
    for cand in (head.with_suffix(".py"), head / "__init__.py"):
        if module and cand.is_file():
            out.append(cand)
    for n in names:  # `from pkg import submodule`
        cand = head / f"{n}.py"
        if cand.is_file():
            out.append(cand)
    return out


def local_imports(path: Path) -> list[Path]:
    """The repository files a --src file imports, as Python would find them beside it (a sibling module, a
    package of the repository, a relative import), anywhere in the file (an import inside a function too): read
    as if named, definitions only. Installed frameworks are never looked for on disk."""
    try:
        text = path.read_text(errors="replace")
        tree = ast.parse(notebook_source(text) if path.suffix == ".ipynb" else text)
    except (SyntaxError, ValueError, OSError):
        return []
    roots = [path.parent, *list(path.parent.parents)[:3]]
    out: list[Path] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names if a.name != "*"]
            if node.level:
                base = path.parent
                for _ in range(node.level - 1):
                    base = base.parent
                out += _module_files(base, node.module or "", names)
            elif node.module and node.module.split(".")[0] not in _NOT_LOCAL:
                out += next((found for r in roots if (found := _module_files(r, node.module, names))), [])
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] not in _NOT_LOCAL:
                    out += next((found for r in roots if (found := _module_files(r, a.name, []))), [])
    return [p for p in dict.fromkeys(out) if p.resolve() != path.resolve() and not SKIP_DIRS & set(p.parts)]


def followed_imports(named: list[Path]) -> list[Path]:
    """`local_imports` of the named files, transitively (at most MAX_FOLLOWED files)."""
    seen = {p.resolve() for p in named}
    out: list[Path] = []
    todo = list(named)
    while todo and len(out) < MAX_FOLLOWED:
        for p in local_imports(todo.pop(0)):
            if p.resolve() not in seen:
                seen.add(p.resolve())
                out.append(p)
                todo.append(p)
    return out


def read_sources(specs: tuple[str, ...], build_args: str | None = None) -> Sources:
    """Parse and index the --src files. A Python 2 file is read after the 2->3 step; one that parses neither way
    is skipped, and the resolution warns once (K2T908). A missing or unreadable file named one by one stops the
    run; under a --src directory it is skipped."""
    files, build_fn = parse_sources(specs)
    args = parse_build_args(build_args)
    if args is not None and not files:
        raise InputError("--build-args applies to a build function from --src", hint="add --src FILE.py:FUNCTION")
    index = index_sources(files, skip_bad=any(Path(s).is_dir() or installed_package(s) for s in specs)) \
        if files else None
    return Sources(files, build_fn, index, args)


def module_path(output: Path) -> Path:
    """model.keras -> model_k3.py beside it: the generated Keras 3 module."""
    return output.with_name(module_name_for(output.stem) + ".py")


def resolve(sources: Sources, artifact: LegacyArtifact, output: Path,
            required_layers: set[str | None] | None = None) -> Resolution | None:
    """What the artifact needs, found in the --src files (None without --src). `required_layers`: the layers the
    file alone cannot convert; what the others need is taken from the sources only where they define it."""
    if sources.index is None:
        return None
    from k2to3.source.hoist import AUTO_NAMES_FROM, auto_names_from
    from k2to3.source.resolve_files import resolve_in_files  # imports libcst, slow: only a model with --src pays for it

    token = AUTO_NAMES_FROM.set(auto_names_from(artifact.keras_version))
    try:
        return resolve_in_files(sources.index, artifact.model_config, artifact.training_config,
                                module_name_for(output.stem), sources.build_fn, required_layers,
                                bound=(sources.build_args or {}).get("globals"))
    finally:
        AUTO_NAMES_FROM.reset(token)


def for_file_version(sources: Sources, keras_version: str | None) -> list[Finding]:
    """The --src texts as the Keras that saved the file read them: a standalone Keras 2.0-2.3 file's `GRU(...)`
    calls get that release's `reset_after=False` (source/standalone_defaults.py). One K2T492 finding per call."""
    if sources.index is None or not standalone_before_tf2(keras_version):
        return []
    sources.index, where = with_standalone_defaults(sources.index)
    return [Finding("K2T492", "info", f"reset_after=False written into the GRU call at {w} (Keras {keras_version}'s "
                    "default, where tf_keras and Keras 3 default to True)") for w in where]


def report_section(sources: Sources, resolution: Resolution | None, output: Path) -> dict[str, Any] | None:
    if resolution is None:
        return None
    return {"files": [str(f) for f in sources.files], "build_fn": sources.build_fn, "module": str(module_path(output)),
            "package": resolution.package, "objects": resolution.objects, "build_args": sources.build_args,
            "match": sources.match}


@dataclass
class Modules:
    """The generated modules of a --src conversion, written into the job directory."""

    k3: Path  # imported by every worker (under its final name) and renamed beside the .keras
    k2: Path  # the Keras 2 module tf_keras imports for the golden
    needed_at_load: bool  # the .keras references objects of the generated module


def write_modules(resolution: Resolution, work: Path, partial: Path) -> Modules:
    """The Keras 3 module under its final name in the job directory (workers import it from there) and at
    `partial` beside the output (renamed into place with the .keras); the Keras 2 one for the golden."""
    k3 = work / f"{resolution.module}.py"
    k3.write_text(resolution.k3_code)
    partial.write_text(resolution.k3_code)
    k2 = work / f"_k2to3_golden_{resolution.module}.py"
    k2.write_text(resolution.k2_code)
    return Modules(k3, k2, resolution.needed_at_load)


def golden_config(resolution: Resolution, model_config: dict[str, Any], work: Path) -> Path:
    """The artifact's config with every Lambda pointing at the Keras 2 module's functions by name."""
    cfg = work / "golden_config.json"
    cfg.write_text(json.dumps(resolution.golden_config(model_config)))
    return cfg


def draws_random(modules: list[str]) -> bool:
    """Whether a generated module draws random numbers (its calls take `seed=_k2to3_seed()`): the golden file was
    computed with the fixed pattern in place of the draws (workers/fixed_random.py), and so is the model under test."""
    return any(SEED_CALL in Path(m).read_text(errors="replace") for m in modules)


def generated_modules(specs: tuple[str, ...], model: Path) -> list[str]:
    """`--src` with `--golden` (verify, export): a golden file holds outputs, not the Keras 2 model a source file is
    resolved against, so each --src must be the module `convert` generated for the .keras (MODEL_k3.py: it defines
    K2TO3_OBJECTS, read here as text, never run); the workers import it before loading, as after a convert."""
    out = []
    for spec in specs:
        path = spec_path(spec)
        try:
            tree = ast.parse(path.read_text(errors="replace"), str(path))
        except (OSError, SyntaxError, ValueError) as exc:
            raise InputError(f"--src {spec}: not a readable Python file ({type(exc).__name__})",
                             hint="pass the module convert wrote beside the .keras") from None
        if has_fn(spec) or not any(isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id ==
                                                                        "K2TO3_OBJECTS" for t in n.targets)
                                   for n in tree.body):
            raise InputError(f"--src {spec} with --golden: not a module generated by k2to3 convert; a golden file "
                             "holds outputs, not the Keras 2 model a source is resolved against",
                             hint=f"pass --src {module_path(model).name} (written beside the .keras by convert), "
                                  "or --reference LEGACY.h5 with this source")
        out.append(str(path.resolve()))
    return out
