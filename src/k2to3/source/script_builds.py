"""A model a script builds with top-level statements, and no function that builds it, read as a build function.

Training scripts and notebooks often build the model at module level (`inputs = Input(...)`, `x = Dense(...)(x)`,
`vae = Model(inputs, outputs)`) and end with `vae.save_weights("vae.h5")`. A weights-only file needs a build
function (source/build_candidates.py), so each model the script saves (or, failing that, makes with `Model(...)` /
`Sequential(...)`) becomes one: the statements it depends on, sliced backwards from the model's name, wrapped in a
function appended to the file's text for the index (the file on disk is never written).

What the slice leaves out:
- statements the model does not depend on (data preparation, plots, training, `summary()`, `compile()`);
- statements that read data (`mnist.load_data()`, `open`, `np.load`, `glob`, `gym.make`, `parser.parse_args()`)
  and everything computed from them: where such a value reaches the model as a plain size
  (`original_dim = image_size * image_size`, `vocab_size = len(chars)`), that name is left a module global, which
  the builder search binds from the file's weight shapes and the tf_keras build confirms (build_candidates.py `bound`).
Nothing is run: ast only.
"""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass
from pathlib import Path

from k2to3.source.source_index import SourceIndex

BUILDS = frozenset({"Model", "Sequential"})
FUNCTION_PREFIX = "_k2to3_script_"
COUNT_PREFIX = "n_"  # the module name a counted value's size is bound to
MAX_PER_FILE = 4  # models one script builds that become candidates (each one is a tf_keras build to confirm)

# Calls that bring data in from outside the script (files, datasets, the command line, an environment): a value
# computed from one is not something the source says, so the slice stops there.
DATA_CALLS = frozenset({
    "load_data", "read_csv", "read_excel", "read_table", "read_json", "read_pickle", "read_parquet", "read_hdf",
    "read_sql", "read_fwf", "loadtxt", "genfromtxt", "fromfile", "load", "loads", "open", "glob", "iglob",
    "listdir", "scandir", "walk", "imread", "TFRecordDataset", "from_tensor_slices", "from_generator", "input",
    "urlopen", "urlretrieve", "get_file", "flow_from_directory", "flow_from_dataframe",
    "image_dataset_from_directory", "text_dataset_from_directory", "timeseries_dataset_from_array", "make",
    "load_model", "model_from_json", "model_from_yaml", "read", "readlines", "readline", "parse_args",
    "fit_on_texts", "fit_transform", "fit", "predict", "File", "Dataset", "DataFrame", "read_file", "load_img",
})
SIZE_FUNCTIONS = frozenset({"len", "int", "float", "round", "min", "max", "abs", "sum", "prod", "sqrt", "ceil",
                            "floor", "amax", "amin", "count", "index", "unique", "nunique", "item", "keys"})
DATA_NAMES = frozenset({"argv", "environ"})  # sys.argv, os.environ
# Methods that leave a model's structure as it is: a call of one is not part of what builds it.
INERT_METHODS = frozenset({
    "summary", "compile", "fit", "fit_generator", "train_on_batch", "test_on_batch", "predict", "predict_on_batch",
    "predict_generator", "predict_classes", "evaluate", "evaluate_generator", "save", "save_weights", "load_weights",
    "to_json", "to_yaml", "get_weights", "get_config", "count_params", "get_layer", "reset_states", "add_loss",
    "add_metric",
})


@dataclass(frozen=True)
class ScriptBuild:
    fn: str  # the function's name in the index
    model: str  # the script's name for the model
    path: Path
    first: int  # first and last line of the statements taken
    last: int
    code: str  # the function, as appended to the file's text
    unbound: tuple[str, ...]  # module names computed from data that the build reads (sizes the weights give)
    counts: dict[str, int]  # the sizes of counted names (n_vocab_tokens) -> the line the counted name is set on

    @property
    def label(self) -> str:
        return f"the top-level statements of {self.path.name}:{self.first}-{self.last} that build {self.model}"


def _root(node: ast.expr) -> str | None:
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _called(call: ast.Call) -> str:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""


def _is_main_guard(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.If) and isinstance(stmt.test, ast.Compare) \
        and isinstance(stmt.test.left, ast.Name) and stmt.test.left.id == "__name__"


def _top_statements(tree: ast.Module) -> list[ast.stmt]:
    """The statements a script runs at top level, the `if __name__ == "__main__":` block's in place; definitions
    and imports are the module's (the index has them), not statements to take."""
    out: list[ast.stmt] = []
    for s in tree.body:
        if _is_main_guard(s):
            out += _top_statements(ast.Module(body=s.body, type_ignores=[]))  # type: ignore[attr-defined]
        elif not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
            out.append(s)
    return out


def _targets(node: ast.expr) -> set[str]:
    """Names an assignment target binds or changes (`x`, `a, b`, `model.trainable`, `cfg["n"]`)."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return set().union(*(_targets(e) for e in node.elts)) if node.elts else set()
    root = _root(node)
    return {root} if root else set()


def defines(stmt: ast.stmt) -> set[str]:
    """Names a statement binds or changes: assignment targets, loop and `with` targets, and the object of a method
    call that may change it (`model.add(...)`; not `model.summary()`)."""
    out: set[str] = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                out |= _targets(t)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            out |= _targets(node.target)
        elif isinstance(node, ast.For):
            out |= _targets(node.target)
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            out |= _targets(node.optional_vars)
        elif isinstance(node, ast.NamedExpr):
            out |= _targets(node.target)
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) \
                and isinstance(node.value.func, ast.Attribute) and node.value.func.attr not in INERT_METHODS:
            root = _root(node.value.func.value)
            if root:
                out.add(root)
    return out


def uses(stmt: ast.stmt) -> set[str]:
    return {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def reads_data(stmt: ast.stmt) -> bool:
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and _called(node) in DATA_CALLS:
            return True
        if isinstance(node, ast.Attribute) and node.attr in DATA_NAMES:
            return True
    return False


def _plain(stmt: ast.stmt) -> bool:
    """`name = expression` where the expression is not a tuple, list, dict or set display: a value the build can
    take as one size (a display is the build's own arithmetic over sizes, `(original_dim,)`)."""
    return isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name) \
        and not isinstance(stmt.value, (ast.Tuple, ast.List, ast.Dict, ast.Set))


def _size_value(stmt: ast.stmt) -> bool:
    """`n = x_train.shape[1]`, `vocab_size = len(chars) + 1`, `n_actions = env.action_space.n`: arithmetic over
    attributes, items and counting functions, a value the weight shapes can give. Anything else computed from data
    (`inputs = Input(shape=input_shape)`, `outputs = decoder(encoder(inputs)[2])`) is part of the graph: taken."""
    value = getattr(stmt, "value", None)
    if isinstance(value, ast.Call) and _called(value) in DATA_CALLS:
        return False  # `x = np.load(...)`: the data itself
    if isinstance(value, ast.Name):
        return False  # `x = inputs`: another name for what the slice reaches next, not a size of its own
    return all(_called(n) in SIZE_FUNCTIONS | DATA_CALLS for n in ast.walk(stmt) if isinstance(n, ast.Call))


def _tainted(stmts: list[ast.stmt]) -> list[bool]:
    """Which statements compute from data: they read it, or read a name an earlier such statement set."""
    names: set[str] = set()
    out = []
    for s in stmts:
        t = reads_data(s) or bool(uses(s) & names)
        if t:
            names |= defines(s)
        elif isinstance(s, ast.Assign) and all(isinstance(t, ast.Name) for t in s.targets):
            names -= defines(s)  # rebound to something the script says itself
        out.append(t)
    return out


def _saved_models(stmts: list[ast.stmt]) -> list[tuple[str, int]]:
    """(name, index of the statement) of each `NAME.save_weights(...)` / `NAME.save(...)`, first one per name."""
    out: dict[str, int] = {}
    for i, s in enumerate(stmts):
        for node in ast.walk(s):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr in ("save_weights", "save") and isinstance(node.func.value, ast.Name):
                out.setdefault(node.func.value.id, i)
    return list(out.items())


def _made_models(stmts: list[ast.stmt]) -> list[tuple[str, int]]:
    """(name, index after its last statement) of each name assigned a `Model(...)` / `Sequential(...)` call."""
    out: dict[str, int] = {}
    for i, s in enumerate(stmts):
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
                and isinstance(s.value, ast.Call) and _called(s.value) in BUILDS:
            out[s.targets[0].id] = i + 1
    for name in out:  # `model.add(...)` after `model = Sequential()`
        out[name] = max([out[name], *(i + 1 for i, s in enumerate(stmts) if name in defines(s)
                                      and not isinstance(s, ast.Assign))])
    return sorted(out.items(), key=lambda kv: kv[1])


def _builds_model(stmts: list[ast.stmt]) -> bool:
    return any(isinstance(n, ast.Call) and _called(n) in BUILDS for s in stmts for n in ast.walk(s))


def slice_build(stmts: list[ast.stmt], model: str, end: int) -> Sliced | None:
    """The statements before `end` that `model` depends on, in order, and the names left unbound (computed from
    data, each a plain size). None when what the model needs is data itself (an array, an environment)."""
    tainted = _tainted(stmts)
    needed = {model}
    taken: list[int] = []
    unbound: list[str] = []
    counted: dict[str, tuple[str, int]] = {}  # name -> the len(...) the build reads of it, the name's line
    for i in range(end - 1, -1, -1):
        s = stmts[i]
        hit = defines(s) & needed
        if not hit:
            continue
        later = [stmts[j] for j in taken]
        n = _assigned_name(s)
        if tainted[i] and n in hit and not _size_value(s) and (count := _only_counted(n, later)):
            unbound.append(COUNT_PREFIX + n)  # `Embedding(len(vocab_tokens), 20)`: the count is the size to bind
            counted[n] = (count, s.lineno)
            needed -= hit
            continue
        if tainted[i] and ((_plain(s) and _size_value(s)) or reads_data(s)):
            if not (_plain(s) and _size_value(s)):
                return None  # `x_train = np.load(...)` reaches the model: not a size the weights can give
            unbound += sorted(hit)
            needed -= hit
            continue
        taken.append(i)
        if isinstance(s, ast.Assign) and all(isinstance(t, (ast.Name, ast.Tuple, ast.List)) for t in s.targets):
            needed -= hit  # a plain rebinding: the earlier value is not what the model saw
        needed |= uses(s)
    if not taken:
        return None
    body = [_Counts(counted).visit(copy.deepcopy(stmts[i])) if counted else stmts[i] for i in sorted(taken)]
    if not _builds_model(body):
        return None
    assigned = set().union(*(defines(s) for s in body))
    if set(unbound) & assigned:
        return None  # a name both computed from data and reassigned by the build: not one size
    return Sliced(body, sorted(set(unbound)), counted)


def _assigned_name(stmt: ast.stmt) -> str | None:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id
    return None


@dataclass(frozen=True)
class Sliced:
    body: list[ast.stmt]  # the statements taken, in order (a counted name's len(...) replaced by its size)
    unbound: list[str]  # module names the build reads that data gives: bound from the weight shapes
    counted: dict[str, tuple[str, int]]  # name -> the len(...) of it the build reads as written, the name's line


def _len_of(node: ast.AST) -> str | None:
    """The name `len(x)`, `len(x.attr)` or `len(x[k])` counts."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len" \
            and len(node.args) == 1 and not node.keywords:
        return _root(node.args[0])
    return None


def _only_counted(name: str, stmts: list[ast.stmt]) -> str | None:
    """`len(name)` when every use of `name` in `stmts` is inside that one count (a vocabulary read from data whose
    size is all the model keeps), else None."""
    counts, inside = set(), set()
    for s in stmts:
        for node in ast.walk(s):
            if _len_of(node) == name:
                counts.add(ast.unparse(node))
                inside |= {id(n) for n in ast.walk(node)}
    uses_ = [n for s in stmts for n in ast.walk(s) if isinstance(n, ast.Name) and n.id == name]
    return counts.pop() if len(counts) == 1 and uses_ and all(id(n) in inside for n in uses_) else None


class _Counts(ast.NodeTransformer):
    """`len(vocab_tokens)` -> `n_vocab_tokens`, a size the weight shapes give."""

    def __init__(self, names: set[str]):
        self.names = names

    def visit_Call(self, node: ast.Call) -> ast.AST:
        name = _len_of(node)
        if name in self.names:
            return ast.copy_location(ast.Name(id=COUNT_PREFIX + name, ctx=ast.Load()), node)
        return self.generic_visit(node)


def script_builds(path: Path, text: str) -> list[ScriptBuild]:
    """The build functions the top-level statements of one file give."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []
    stmts = _top_statements(tree)
    if not _builds_model(stmts):
        return []
    targets = _saved_models(stmts) or _made_models(stmts)[-MAX_PER_FILE:]
    out: list[ScriptBuild] = []
    for model, end in targets[:MAX_PER_FILE]:
        sliced = slice_build(stmts, model, end)
        if sliced is None:
            continue
        fn = FUNCTION_PREFIX + model
        body = sliced.body
        first, last = body[0].lineno, max(getattr(s, "end_lineno", s.lineno) or s.lineno for s in body)
        counts = "".join(f"{COUNT_PREFIX}{n} = {c}  # the size the build below reads\n"
                         for n, (c, _) in sliced.counted.items())
        code = (counts + f"def {fn}():  # the top-level statements of {path.name}:{first}-{last} that build {model}\n"
                + "".join(_indent(ast.unparse(s)) for s in body) + f"    return {model}\n")
        out.append(ScriptBuild(fn, model, path, first, last, code, tuple(sliced.unbound),
                               {COUNT_PREFIX + n: line for n, (_, line) in sliced.counted.items()}))
    return out


def _indent(code: str) -> str:
    return "".join(f"    {ln}\n" if ln.strip() else "\n" for ln in code.splitlines())


def with_script_builds(index: SourceIndex) -> tuple[SourceIndex, list[ScriptBuild]]:
    """The index again with every script build appended to its file's text (the same index when there is none)."""
    from k2to3.source.extract import index_texts  # extract imports this package's siblings, not this module

    found: list[ScriptBuild] = []
    texts: dict[Path, str] = {}
    for path, text in index.texts.items():
        if any(d.path == path and d.kind == "function" and d.name.startswith(FUNCTION_PREFIX)
               for d in index.defs.values()):
            return index, []  # already read this way
        base = text if text.endswith("\n") else text + "\n"
        builds = [b for b in script_builds(path, base) if b.fn not in index.defs]
        found += builds
        texts[path] = base + "".join(f"\n\n{b.code}" for b in builds) if builds else text
    if not found:
        return index, []
    again = index_texts(index.paths, texts)
    for b in found:  # what a report says of a counted size: where the script computes what it counts
        again.dynamic.update({n: f"{b.path}:{line}" for n, line in b.counts.items()})
    again.py2.update(index.py2)
    again.unparsed.update(index.unparsed)
    again.notes[:0] = index.notes
    return again, found
