"""The structure holds: the folder tree is the architecture (no loose module), no import
cycle between modules, modules sized by job, and each class name defined once. Read from
the source as text (ast), nothing is imported.

- Folders: every module lives in the package of its layer (pyproject.toml's layers
  contract names folders); only the entry points sit at the top.

- Cycles: every import a module names, at its top, lazily in a function, or under
  `if TYPE_CHECKING:` (a type name is an arrow a reader follows too: the recording's
  format once named the live Session only for its types, and the playback and live
  folders read as one knot). Two modules that import each other are one job split
  badly, a shared name in the wrong place (race/core/state.py, the recording's file
  format apart from its recorder were both such), or a lower module that should declare
  the Protocol it reads (race/live/session_state.py, report/load.py `MeasuredLoad`).
  One circle is inherent: the engine's connection and its target (see
  INHERENT_CIRCLES).
- Arrows back up: no module names a module of a layer above its own, by any import
  (type-only ones too, which import-linter leaves out), by the layers the folder tree
  and pyproject.toml's layers contracts give; nor a sibling of its own layer that the
  contract keeps independent (bench, live and load).
- Size: a module over the limit does more than one job, unless its docstring says why it
  is one job that long (a paragraph starting "Long because": the engine's hot path); and
  every module's docstring names its job.
- Names: a class name defined in two modules means two things, and a reader needs the
  import line to know which (Verdict, Placement and LaunchError did).
"""

from __future__ import annotations

import ast
import tomllib
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "stackrace"
MAX_LINES = 500
# every module fits (commands/load.py and bench.py were the last, split by job): a module
# over the limit splits, or says "Long because" in its docstring
NOT_YET_SPLIT: set[str] = set()
TOP_LEVEL = {"__init__.py", "__main__.py", "cli.py"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                for other in child.orelse:
                    walk(other)
                continue
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append(child)
            walk(child)

    walk(tree)
    return found


def _every_import(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]


def import_graph(type_only_too: bool = False) -> dict[str, set[str]]:
    """Module -> the project's modules it imports (`type_only_too`: with those under
    `if TYPE_CHECKING:`)."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    read = _every_import if type_only_too else _runtime_imports
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in read(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [
                    f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                    for a in node.names
                ]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


# The engine's connection and its target are one state machine in two classes: the
# target opens, hands over and retires its connections (and mix.py sets a mix's requests
# up on a target), and a connection updates its target's counters inline on every
# answer (the hot path inlines Target's bookkeeping, two calls fewer an answer:
# engine/connection.py), so each must know the other's fields. Only the connection's and
# the mix's names of Target are type-only; a Protocol would restate Target's fields.
# HTTP/2's stream slots (engine/h2.py) are connections of the same machine, packed
# `--streams` to a socket: they join it for the same reason.
INHERENT_CIRCLES = [
    [
        "stackrace.engine.connection",
        "stackrace.engine.h2",
        "stackrace.engine.mix",
        "stackrace.engine.target",
    ],
]
# none left: a circle or an arrow back up is a fault to fix, not a list to grow
KNOWN_CIRCLES: list[list[str]] = []
KNOWN_ARROWS_UP: set[tuple[str, str]] = set()


def test_no_import_cycle_between_modules():
    found = cycles(import_graph(type_only_too=True))
    assert [c for c in found if c not in INHERENT_CIRCLES + KNOWN_CIRCLES] == []


def test_no_cycle_runs_even_the_inherent_one():
    # what runs is stricter still: the engine's circle is closed by type names only
    assert cycles(import_graph()) == []


def layers() -> list[list[list[str]]]:
    """pyproject.toml's layers contracts, each top to bottom: a layer is its
    independent siblings ("a | b")."""
    config = tomllib.loads((SRC.parent / "pyproject.toml").read_text())
    return [
        [[m.strip() for m in layer.split("|")] for layer in contract["layers"]]
        for contract in config["tool"]["importlinter"]["contracts"]
        if contract["type"] == "layers"
    ]


def _place(module: str, contract: list[list[str]]) -> tuple[int, int] | None:
    """(layer, sibling) of `module` in a contract, the deepest that holds it."""
    best = None
    for i, layer in enumerate(contract):
        for j, name in enumerate(layer):
            holds = module == name or module.startswith(name + ".")
            if holds and (best is None or len(name) > best[2]):
                best = (i, j, len(name))
    return None if best is None else (best[0], best[1])


def arrows_back_up(
    graph: dict[str, set[str]], contracts: list[list[list[str]]]
) -> list[tuple[str, str]]:
    """Imports from a lower layer to a higher one, or across independent siblings."""
    out = []
    for contract in contracts:
        for a, targets in graph.items():
            pa = _place(a, contract)
            for b in targets:
                pb = _place(b, contract)
                if pa is None or pb is None:
                    continue
                if pa[0] > pb[0] or (pa[0] == pb[0] and pa[1] != pb[1]):
                    out.append((a, b))
    return sorted(set(out))


def test_no_arrow_runs_back_up():
    """import-linter holds the layers for what runs; a type-only import is an arrow a
    reader follows too (report/load.py once named race/load/driver.py's LoadRun), so
    the layers hold for every import here."""
    up = arrows_back_up(import_graph(type_only_too=True), layers())
    assert [a for a in up if a not in KNOWN_ARROWS_UP] == []


def test_the_layer_check_finds_an_arrow_back_up():
    contracts = [[["p.top"], ["p.mid.a", "p.mid.b"], ["p.low"]]]
    graph = {
        "p.top.x": {"p.low.y"},  # down: fine
        "p.low.y": {"p.mid.a.z"},  # back up
        "p.mid.a.z": {"p.mid.b.w"},  # across independent siblings
        "p.mid.b.w": {"p.low.y"},
    }
    assert arrows_back_up(graph, contracts) == [
        ("p.low.y", "p.mid.a.z"),
        ("p.mid.a.z", "p.mid.b.w"),
    ]
    assert layers(), "the check must read the project's contracts"


def test_the_cycle_finder_finds_a_cycle():
    # the check above must be able to fail: a planted cycle is found
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_type_checking_imports_do_not_count():
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "import os\n"
        "if TYPE_CHECKING:\n    import json\n"
        "def f():\n    import re\n"
    )
    assert [a.name for n in _runtime_imports(tree) for a in n.names] == [
        "TYPE_CHECKING",
        "os",
        "re",
    ]


def test_no_loose_module_beside_the_packages():
    loose = sorted(p.name for p in PACKAGE.glob("*.py") if p.name not in TOP_LEVEL)
    assert loose == [], "a module belongs in the package of its layer (pyproject.toml)"


def _says_why_long(path: Path) -> bool:
    doc = ast.get_docstring(ast.parse(path.read_text(), str(path))) or ""
    return "\nLong because" in "\n" + doc


def test_modules_are_sized_by_job():
    big = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        key = str(path.relative_to(SRC))
        n = len(path.read_text().splitlines())
        if n > MAX_LINES and key not in NOT_YET_SPLIT and not _says_why_long(path):
            big[key] = n
    assert big == {}, f"modules over {MAX_LINES} lines (split them by job, or say why not)"


def test_every_module_names_its_job():
    """A module's docstring says what its one job is (and, past the size limit, why it is
    one job that long): a module that cannot say it is two jobs, or none. Only a
    package's empty face is exempt."""
    silent = [
        str(path.relative_to(SRC))
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.read_text().strip() and not ast.get_docstring(ast.parse(path.read_text()))
    ]
    assert silent == []


def test_each_class_name_is_defined_once():
    where: dict[str, list[str]] = defaultdict(list)
    for name, path in _modules().items():
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.ClassDef):
                where[node.name].append(name)
    twins = {k: v for k, v in where.items() if len(v) > 1}
    assert twins == {}


def test_every_error_a_user_sees_has_the_one_base():
    """Every public exception class derives from StackraceError (base/errors.py), directly
    or through another of ours, so the entry point catches what commands did not, once."""
    classes: dict[str, list[str]] = {}
    for path in _modules().values():
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.ClassDef):
                classes[node.name] = [ast.unparse(b).rpartition(".")[2] for b in node.bases]

    def ours(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name == "StackraceError":
            return True
        return (
            name in classes
            and name not in seen
            and any(ours(b, seen | {name}) for b in classes[name])
        )

    builtin = {"Exception", "ValueError", "RuntimeError", "OSError", "TimeoutError"}
    errors = [
        n
        for n, bases in classes.items()
        if not n.startswith("_") and any(b in builtin or b.endswith("Error") for b in bases)
    ]
    assert errors, "the check must see the project's errors"
    assert [n for n in errors if not ours(n)] == []


def test_only_the_command_layer_parses_a_command_line():
    """argparse is the command layer's (commands/, cli.py): below it, options are typed
    structs and values are checked by parsers that raise ValueError, so a preset and a
    run file are checked by the same rule as a command line (docs/development.md)."""
    found = []
    for name, path in _modules().items():
        if name == "stackrace.cli" or name.startswith("stackrace.commands"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            if "argparse" in names:
                found.append(name)
    assert found == [], f"argparse below the command layer: {found}"


def test_no_test_is_rerun():
    """A test passes the first time or fails: a rerun hides what a user on a busy machine
    would see (docs/development.md). No flaky mark, no rerun plugin."""
    tests = Path(__file__).resolve().parents[1]
    marked = [
        str(path.relative_to(tests))
        for path in sorted(tests.rglob("*.py"))
        if "mark.flaky" in path.read_text() and path != Path(__file__).resolve()
    ]
    assert marked == [], f"tests marked flaky: {marked}"
    pyproject = (tests.parent / "pyproject.toml").read_text()
    assert "rerunfailures" not in pyproject


def test_no_wait_for_in_the_package():
    """`asyncio.timeout`, never `asyncio.wait_for`: on Python 3.11 (the floor this package
    supports) wait_for can swallow a cancellation that arrives as the awaited result does
    (CPython gh-86296, fixed in 3.12 by rebuilding wait_for on timeout), and a Ctrl-C or
    a stop that is lost leaves something running."""
    users = [
        str(path.relative_to(SRC))
        for path in sorted(PACKAGE.rglob("*.py"))
        if "asyncio.wait_for(" in path.read_text()
    ]
    assert users == []


def _namespace_takers(tree: ast.AST) -> list[str]:
    """The functions of a module with a parameter annotated as argparse's Namespace."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = node.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
        if any(p is not None and "Namespace" in ast.unparse(p.annotation or ast.Constant(""))
               for p in params):  # fmt: skip
            found.append(node.name)
    return found


def test_no_function_below_commands_takes_a_namespace():
    """Options end at the command layer: below it, functions take typed structs, never
    the argparse Namespace (docs/development.md)."""
    found = []
    for name, path in _modules().items():
        if name == "stackrace.cli" or name.startswith("stackrace.commands"):
            continue
        text = path.read_text()
        takers = _namespace_takers(ast.parse(text))
        if takers or "argparse.Namespace" in text:
            found.append((name, takers))
    assert found == [], f"a Namespace below the command layer: {found}"


def test_in_commands_only_the_builders_take_the_namespace():
    """In commands/, the parsed line is read once, by a builder (`*_options`, or
    settings_args' `given`) into the command's frozen options struct; run() and all it
    calls take the struct (an argparse Action's __call__ is argparse's own hook)."""
    found = []
    for name, path in _modules().items():
        if not name.startswith("stackrace.commands"):
            continue
        for fn in _namespace_takers(ast.parse(path.read_text())):
            # argparse's and argcomplete's hooks: an Action, OneLineArgumentParser's
            # override, the completer of stack names
            hooks = {"__call__", "parse_known_args", "stack_names"}
            if not (fn.endswith("_options") or fn == "given" or fn in hooks):
                found.append(f"{name}.{fn}")
    assert found == [], f"functions of commands/ that take the Namespace: {found}"


def test_the_namespace_finder_finds_one():
    tree = ast.parse("def run(args: argparse.Namespace) -> int: ...\ndef f(o: X): ...")
    assert _namespace_takers(tree) == ["run"]


# Why an import stays inside a function: it keeps a command's start-up fast (Textual
# only for the app, Ray only with --cluster, ...) or it breaks a type-only cycle; each
# says which on its line, so a reader can tell a deliberate deferral from an accident.
_REASON = ("start-up", "fast", "cycle", "lazy", "only when", "only with")


def test_every_import_inside_a_function_says_why():
    unsaid = []
    for path in sorted(SRC.rglob("*.py")):
        lines = path.read_text().splitlines()
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if not isinstance(node, ast.Import | ast.ImportFrom):
                    continue
                said = " ".join(lines[node.lineno - 1 : node.end_lineno]).partition("#")[2]
                if not any(word in said for word in _REASON):
                    unsaid.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert unsaid == [], f"imports inside functions that do not say why: {unsaid}"
