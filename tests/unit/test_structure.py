"""The structure holds: the folder tree is the architecture (no loose module), no import
cycle between modules, modules sized by job, and each class name defined once. Read from
the source as text (ast), nothing is imported.

- Folders: every module lives in the package of its layer (pyproject.toml's layers
  contract names folders); only the entry points sit at the top.

- Cycles: the imports a module runs (at its top or lazily in a function), not those
  under `if TYPE_CHECKING:`, which never run. Two modules that import each other are
  one job split badly, or a shared name in the wrong place (race/core/state.py, the
  recording's file format apart from its player were both such).
- Size: a module over the limit does more than one job, unless its docstring says why it
  is one job that long (a paragraph starting "Long because": the engine's hot path); and
  every module's docstring names its job.
- Names: a class name defined in two modules means two things, and a reader needs the
  import line to know which (Verdict, Placement and LaunchError did).
"""

from __future__ import annotations

import ast
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


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in _runtime_imports(ast.parse(path.read_text(), str(path))):
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


def test_no_import_cycle_between_modules():
    assert cycles(import_graph()) == []


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
