"""tests/README.md tells the truth about where the code is tested.

Its table "Where each package is tested" has a row for every package of src/stackrace
that holds modules, and every test file a row names exists and imports that package; its
list "Modules no test imports directly" is exactly today's list, each with how it is
tested all the same (through the CLI a test runs, or the module a test imports) or why
not. A new package needs a row; a new module needs a test that imports it, or a line in
that list; a test that starts importing a listed module takes it off the list.

Imports are read with `ast` (nothing is imported or run): a file imports a module when
an import statement names it, or names what the module's package re-exports from it
(`from stackrace.db import ManagedMariaDB` is stackrace.db.managed). Every file under
tests/ counts, helpers and conftests included: a fixture that builds a module's objects
uses that module.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

from tests.helpers import ROOT

SRC = ROOT / "src"
TESTS = ROOT / "tests"
README = TESTS / "README.md"


@cache
def modules() -> dict[str, Path]:
    """Every module and package of src/stackrace, by dotted name; a C extension by its
    source (engine/_cycle.c is stackrace.engine._cycle)."""
    out = {}
    for path in sorted([*(SRC / "stackrace").rglob("*.py"), *(SRC / "stackrace").rglob("*.c")]):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def package_of(module: str) -> str:
    return module if modules()[module].name == "__init__.py" else module.rpartition(".")[0]


@cache
def packages() -> list[str]:
    """The packages that hold modules of their own (`stackrace` holds cli.py)."""
    return sorted({package_of(m) for m, p in modules().items() if p.name != "__init__.py"})


@cache
def reexports() -> dict[tuple[str, str], str]:
    """(package, name) -> the module a package's __init__ imports that name from."""
    out = {}
    for name, path in modules().items():
        if path.name != "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("stackrace"):
                for alias in node.names:
                    out[(name, alias.asname or alias.name)] = str(node.module)
    return out


def imported_by(path: Path) -> set[str]:
    """The stackrace modules a file imports (its own absolute imports)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            for alias in node.names:
                whole = f"{node.module}.{alias.name}"
                found.add(reexports().get((node.module, alias.name), whole))
    return found & set(modules())


@cache
def imports_of_tests() -> dict[str, set[str]]:
    """Test file (relative to the repository) -> the modules it imports."""
    return {p.relative_to(ROOT).as_posix(): imported_by(p) for p in sorted(TESTS.rglob("*.py"))}


def section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def table_rows() -> dict[str, list[str]]:
    """The package table: package -> the test files its row names."""
    rows: dict[str, list[str]] = {}
    for line in section("Where each package is tested").splitlines():
        m = re.match(r"\| `(stackrace[\w.]*)` \| (.*) \|$", line)
        if m:
            assert m.group(1) not in rows, f"{m.group(1)} has two rows"
            rows[m.group(1)] = re.findall(r"`(tests/[\w/.]+\.py)`", m.group(2))
    return rows


def listed_modules() -> dict[str, str]:
    """The list of modules no test imports directly: module -> what the line says."""
    found = {}
    for line in section("Modules no test imports directly").splitlines():
        m = re.match(r"- `(stackrace[\w.]*)`: (.+)$", line)
        if m:
            found[m.group(1)] = m.group(2)
    return found


def test_every_package_has_a_row_of_test_files_that_import_it() -> None:
    rows = table_rows()
    missing = [p for p in packages() if p not in rows]
    assert not missing, f"tests/README.md: no row for {missing} in 'Where each package is tested'"
    gone = [p for p in rows if p not in packages()]
    assert not gone, f"tests/README.md: rows for packages that do not exist: {gone}"
    imports = imports_of_tests()
    for package, files in rows.items():
        assert files, f"tests/README.md: the row of {package} names no test file"
        for f in files:
            assert f in imports, f"tests/README.md: {package}: {f} does not exist"
            own = {m for m in imports[f] if m != package and package_of(m) == package}
            assert own, f"tests/README.md: {package}: {f} imports none of its modules"


def test_the_modules_no_test_imports_are_listed_with_how_they_are_tested() -> None:
    imported = set().union(*imports_of_tests().values())
    alone = {m for m, p in modules().items() if p.name != "__init__.py" and m not in imported}
    listed = listed_modules()
    unlisted = sorted(alone - set(listed))
    assert not unlisted, (
        f"no test imports {unlisted}: add a test that does, or a line saying how it is "
        "tested to 'Modules no test imports directly' in tests/README.md"
    )
    now_imported = sorted(set(listed) - alone)
    assert not now_imported, (
        f"tests/README.md lists {now_imported} as imported by no test, but a test imports "
        "it now (or it is gone): take it off the list"
    )
    assert all(len(why) > 10 for why in listed.values()), "each line says how, in words"


def test_the_map_reads_imports_as_python_does(tmp_path: Path) -> None:
    """The reader itself: re-exports count for their module, relative and unknown
    imports do not count, a package's own modules are told from its subpackages'."""
    f = tmp_path / "test_x.py"
    f.write_text(
        "import stackrace.engine.histogram\n"
        "from stackrace.db import ManagedMariaDB\n"
        "from stackrace.race.core import plan\n"
        "from .helpers import x\n"
        "from stackrace.nothing import y\n"
    )
    assert imported_by(f) == {
        "stackrace.engine.histogram",
        "stackrace.db",
        "stackrace.db.managed",
        "stackrace.race.core",
        "stackrace.race.core.plan",
    }
    assert package_of("stackrace.race.core.plan") == "stackrace.race.core"
    assert package_of("stackrace.race.core") == "stackrace.race.core"
    assert "stackrace" in packages() and "stackrace.race" not in packages()
