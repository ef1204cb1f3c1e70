"""Generate rules/keras_layer_params.json: for each Keras 3 minor release, the keyword arguments each public
`keras.layers` class's constructor takes (its own and those it passes on to its bases through **kwargs; "*" when it
takes **kwargs and passes them nowhere, so any key is accepted), and for the
newest release their defaults. Read from the released wheels' source with `ast` (nothing is imported), so any release
can be described without installing it:

    pip download --no-deps keras==3.3.3 keras==3.4.1 ... -d WHEELS/
    python rules/make_keras_layer_params.py WHEELS/*.whl

core/keras_versions.py uses it for `--target-keras 3.N` (K2T709): a layer key release 3.N does not take is dropped
when it holds the default the newest release computes, else the conversion stops naming the lowest release that
takes it."""

from __future__ import annotations

import ast
import json
import re
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
_MISSING = "<required>"


def _classes(wheel: Path) -> tuple[str, dict[str, ast.ClassDef], set[str]]:
    """(version, class name -> definition under keras/src, public keras.layers names) of one wheel."""
    version = re.search(r"keras-(\d+\.\d+\.\d+)", wheel.name).group(1)  # type: ignore[union-attr]
    classes: dict[str, ast.ClassDef] = {}
    public: set[str] = set()
    with zipfile.ZipFile(wheel) as z:
        for name in z.namelist():
            if not name.endswith(".py"):
                continue
            text = z.read(name).decode("utf-8", errors="replace")
            if name.startswith("keras/src/"):
                for node in ast.parse(text).body:
                    if isinstance(node, ast.ClassDef) and (node.name not in classes or name.startswith(
                            "keras/src/layers/")):  # a layers/ class wins over a same-named one elsewhere
                        classes[node.name] = node
            elif name in ("keras/api/layers/__init__.py", "keras/layers/__init__.py"):
                public |= {a.name for n in ast.parse(text).body if isinstance(n, ast.ImportFrom)
                           for a in n.names if a.asname is None or a.asname == a.name}
    return version, classes, public


def _params(cls: str, classes: dict[str, ast.ClassDef], seen: frozenset[str] = frozenset()) -> dict[str, str]:
    """The constructor keywords of `cls` (and of its bases where **kwargs reaches them) -> default source."""
    node = classes.get(cls)
    if node is None or cls in seen:
        return {}
    init = next((b for b in node.body if isinstance(b, ast.FunctionDef) and b.name == "__init__"), None)
    bases = [ast.unparse(b).split(".")[-1] for b in node.bases]
    if init is None:  # inherited
        return next((p for b in bases if (p := _params(b, classes, seen | {cls}))), {})
    a = init.args
    out: dict[str, str] = {}
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    for arg, d in zip(positional[1:], defaults[1:]):
        out[arg.arg] = _MISSING if d is None else ast.unparse(d)
    for arg, d in zip(a.kwonlyargs, a.kw_defaults):
        out[arg.arg] = _MISSING if d is None else ast.unparse(d)
    if a.kwarg is not None:  # `rms_scaling = kwargs.pop("rms_scaling", False)`: a keyword taken from **kwargs
        for n in ast.walk(init):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("pop", "get") \
                    and isinstance(n.func.value, ast.Name) and n.func.value.id == a.kwarg.arg and n.args \
                    and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str):
                out.setdefault(n.args[0].value, ast.unparse(n.args[1]) if len(n.args) > 1 else "None")
    # Layer checks the rest of its **kwargs itself and raises on an unknown one: not "*"
    if a.kwarg is not None and cls != "Layer" and not any(isinstance(n, ast.keyword) and n.arg is None and isinstance(n.value, ast.Name)
                                       and n.value.id == a.kwarg.arg for n in ast.walk(init)):
        out["*"] = ""  # **kwargs taken and passed nowhere: any other key is accepted (and ignored)
    elif a.kwarg is not None:
        for b in bases:
            for k, v in _params(b, classes, seen | {cls}).items():
                out.setdefault(k, v)
    return out


def _lines(data: dict) -> str:
    """The JSON with one class per line (a diff between two generations reads as what changed)."""
    out = [f'{{"generated_by": {json.dumps(data["generated_by"])},', '"releases": {']
    rel = list(data["releases"].items())
    for i, (r, classes) in enumerate(rel):
        out.append(f" {json.dumps(r)}: {{")
        items = list(classes.items())
        out += [f"  {json.dumps(c)}: {json.dumps(p)}" + ("," if j < len(items) - 1 else "") for j, (c, p) in
                enumerate(items)]
        out.append(" }" + ("," if i < len(rel) - 1 else ""))
    out += ["},", '"defaults": {']
    items = list(data["defaults"].items())
    out += [f" {json.dumps(c)}: {json.dumps(p)}" + ("," if j < len(items) - 1 else "") for j, (c, p) in
            enumerate(items)]
    return "\n".join([*out, "}}"]) + "\n"


def main(wheels: list[str]) -> None:
    releases: dict[str, dict[str, list[str]]] = {}
    newest: tuple[tuple[int, ...], dict[str, dict[str, str]]] = ((0,), {})
    for w in sorted(wheels):
        version, classes, public = _classes(Path(w))
        minor = ".".join(version.split(".")[:2])
        table = {c: _params(c, classes) for c in sorted(public) if c in classes}
        base = set(_params("Layer", classes))  # every layer takes these: listed once, under "Layer"
        releases[minor] = {"Layer": sorted(base), **{c: sorted(set(p) - base) for c, p in table.items()
                                                     if p and c != "Layer"}}
        key = tuple(int(x) for x in version.split("."))
        if key > newest[0]:
            newest = (key, table)
    defaults = {c: {k: v for k, v in p.items() if v != _MISSING} for c, p in newest[1].items()}
    defaults = {c: d for c, d in defaults.items() if d}
    out = {"generated_by": "rules/make_keras_layer_params.py", "releases": dict(sorted(
        releases.items(), key=lambda kv: tuple(int(x) for x in kv[0].split(".")))), "defaults": defaults}
    (HERE / "keras_layer_params.json").write_text(_lines(out))
    print(f"{len(releases)} releases, {len(defaults)} classes", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
