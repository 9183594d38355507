"""The front door holds: the README stays a user's guide, and the docs stay true to the tree.

- README.md has at most 300 lines, no dates and no issue numbers (a reader cannot see
  the tracker; history belongs in bench/results/, beside the scripts that measured it);
- every relative link of the README, docs/*.md, bench/README.md and bench/results/*.md
  resolves, its #anchor included;
- every file a page names in code (`src/…`, `tests/…`, `bench/…`, `results/…`, …)
  exists, and every test it names (`tests/x.py::test_y`, `::test_z`) is defined there;
- every results table in the pages is its file of results/ (scripts/doc_tables.py), and
  every results/NAME.md is what `stackrace report results/NAME.json --markdown` writes.

That every command line of the README and the docs runs is the walkthrough tier's job
(tests/walkthrough/test_readme_commands.py): it starts processes.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from stackrace.report import tables
from stackrace.report.write import read_run
from tests.helpers import ROOT

README = ROOT / "README.md"
PAGES = [
    README,
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "bench" / "README.md",
    *sorted((ROOT / "bench" / "results").glob("*.md")),  # the history, moved whole
]
ids = [p.relative_to(ROOT).as_posix() for p in PAGES]


def _doc_tables() -> ModuleType:
    spec = importlib.util.spec_from_file_location("doc_tables", ROOT / "scripts" / "doc_tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["doc_tables"] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


def prose(text: str) -> str:
    """The page with its fenced code blocks blanked (a link or heading there is not
    one), line for line."""
    return re.sub(r"^```.*?^```", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S | re.M)


def slug(heading: str) -> str:
    """The anchor GitHub makes of a heading: lower case, code marks and punctuation
    dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in prose(page.read_text(encoding="utf-8")).splitlines():
        m = re.match(r"^#{1,6} +(.*?) *#*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def test_the_readme_is_a_users_guide() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines: at most 300 (the rest: docs/)"
    dated = [f"{n}: {x}" for n, x in enumerate(lines, 1) if re.search(r"20\d\d-\d\d-\d\d|2026-", x)]
    assert not dated, "dates in README.md (history goes to bench/results/):\n" + "\n".join(dated)
    numbered = [
        f"{n}: {x}" for n, x in enumerate(lines, 1) if re.search(r"\bissues? \d+|#\d+\b", x)
    ]
    assert not numbered, "issue numbers in README.md:\n" + "\n".join(numbered)
    # the heading the hooks and the reader look for, and the two commands under it
    assert any(re.match(r"^#+ *quick ?start", x, flags=re.I) for x in lines)
    assert "./dev app" in text and "./dev test" in text


@pytest.mark.parametrize("page", PAGES, ids=ids)
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for n, line in enumerate(prose(page.read_text(encoding="utf-8")).splitlines(), 1):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            where = (page.parent / path).resolve() if path else page
            if not where.exists():
                broken.append(f"line {n}: {target}: no such file")
            elif anchor and where.suffix == ".md" and anchor not in anchors(where):
                broken.append(f"line {n}: {target}: no heading #{anchor} in {where.name}")
    assert not broken, f"{page.relative_to(ROOT)}:\n  " + "\n  ".join(broken)


# a path of the repository a page names in code: `src/stackrace/base/paths.py`, `bench/x.py`
_NAMED = re.compile(
    r"`((?:src/stackrace|tests|bench|scripts|results|presets|examples|apps)/[^`\s:]+)"
)
_TEST = re.compile(r"`(?:(tests/[\w/]+\.py)(?:::(\w+))?|::(\w+))`")


@pytest.mark.parametrize("page", PAGES, ids=ids)
def test_every_file_and_test_a_page_names_exists(page: Path) -> None:
    missing = []
    for line in page.read_text(encoding="utf-8").splitlines():
        for name in _NAMED.findall(line):
            name = name.rstrip(".,;)")
            if re.search(r"[A-Z]{3,}|…|\{", name):  # results/NAME.json: the reader's
                continue
            if not (list(ROOT.glob(name)) if "*" in name else (ROOT / name).exists()):
                missing.append(name)
        current = None  # `::test_b` names a test of the file named before it on the line
        for path, test, alone in _TEST.findall(line):
            current = path or current
            name = test or alone
            if current and name:
                source = (ROOT / current).read_text(encoding="utf-8")
                if not re.search(rf"^(async )?def {name}\b", source, flags=re.M):
                    missing.append(f"{current}::{name}")
    assert not missing, f"{page.relative_to(ROOT)} names what is not there: {missing}"


def test_every_results_table_is_its_result_file() -> None:
    stale = _doc_tables().stale(ROOT)
    assert not stale, "\n".join(stale)


def test_a_marked_table_cannot_drift(tmp_path: Path) -> None:
    """The check itself: a block whose text is not its file's is found, and the script
    rewrites it; a block that never closes, or names no result file, is an error."""
    doc_tables = _doc_tables()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "a.md").write_text("| x |\n|---|\n| 1 |\n")
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "p.md"
    page.write_text("# p\n<!-- table: results/a.md -->\n| x |\n|---|\n| 2 |\n<!-- /table -->\n")
    assert doc_tables.stale(tmp_path) == [
        "docs/p.md: a table differs from its file (one of results/a.md): run scripts/doc_tables.py"
    ]
    assert "| 1 |" in doc_tables.rendered(page, tmp_path)
    page.write_text("<!-- table: results/a.md -->\n| x |\n")
    assert "no <!-- /table -->" in doc_tables.stale(tmp_path)[0]
    page.write_text("<!-- table: ../secret.md -->\n<!-- /table -->\n")
    assert "not a file of results/" in doc_tables.stale(tmp_path)[0]


@pytest.mark.parametrize("path", sorted((ROOT / "results").glob("*.json")), ids=lambda p: p.name)
def test_every_results_markdown_is_its_run_rendered(path: Path) -> None:
    """results/NAME.md is `stackrace report results/NAME.json --markdown results/NAME.md`:
    a table edited by hand, or a run replaced without its Markdown, fails here."""
    md = path.with_suffix(".md")
    assert md.is_file(), f"{md.name}: missing (stackrace report {path.name} --markdown …)"
    assert md.read_text(encoding="utf-8") == tables.markdown(read_run(str(path))), (
        f"{md.name} is not what `stackrace report results/{path.name} --markdown` writes: "
        "run scripts/doc_tables.py --results"
    )
