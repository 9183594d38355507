"""The results tables in the docs, copied from the result files by a program, never by hand.

    .venv/bin/python scripts/doc_tables.py            # rewrite every marked block
    .venv/bin/python scripts/doc_tables.py --check    # list the blocks that differ; exit 1
    .venv/bin/python scripts/doc_tables.py --results  # first render results/*.md from their
                                                      # runs (after a change to the tables)

A block in a Markdown page is the text of one file of results/, between two markers:

    <!-- table: results/sync-ceiling.md -->
    (the file's text, as `stackrace report results/sync-ceiling.json --markdown` wrote it)
    <!-- /table -->

A table copied by hand stayed wrong for days once (the README's async-drivers section
showed the sync-ceiling table under prose about the async servers); generated, it cannot
drift from its file, and `tests/unit/test_front_door.py` fails when a block and its file
disagree (or a result file and the run it was rendered from: results/NAME.md is
`stackrace report results/NAME.json --markdown results/NAME.md`).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OPEN = re.compile(r"^<!-- table: (?P<source>\S+) -->$")
CLOSE = "<!-- /table -->"


def pages(root: Path = ROOT) -> list[Path]:
    """The Markdown pages that may hold blocks: README.md, docs/*.md, bench/README.md."""
    docs = sorted((root / "docs").glob("*.md"))
    found = [root / "README.md", *docs, root / "bench" / "README.md"]
    return [p for p in found if p.is_file()]


@dataclass(frozen=True)
class Block:
    """One marked block: its page, its source, and the 0-based lines of its markers."""

    page: Path
    source: str  # as written in the marker, relative to the repository
    open_line: int
    close_line: int


class MarkerError(ValueError):
    """A block that opens and never closes, or a source that is not a result file."""


def blocks(page: Path, lines: list[str]) -> list[Block]:
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = OPEN.match(lines[i].strip())
        if m:
            source = m.group("source")
            if not re.fullmatch(r"results/[A-Za-z0-9._-]+\.md", source):
                raise MarkerError(f"{page.name}:{i + 1}: {source}: not a file of results/")
            try:
                end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == CLOSE)
            except StopIteration:
                raise MarkerError(f"{page.name}:{i + 1}: {source}: no {CLOSE}") from None
            out.append(Block(page, source, i, end))
            i = end
        i += 1
    return out


def rendered(page: Path, root: Path = ROOT) -> str:
    """The page with every block's text replaced by its result file's."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[str] = []
    at = 0
    for b in blocks(page, lines):
        source = root / b.source
        if not source.is_file():
            raise MarkerError(f"{page.name}:{b.open_line + 1}: {b.source}: no such file")
        out += lines[at : b.open_line + 1]
        out += source.read_text(encoding="utf-8").strip("\n").splitlines()
        at = b.close_line
    out += lines[at:]
    return "\n".join(out) + "\n"


def stale(root: Path = ROOT) -> list[str]:
    """One line per page whose blocks differ from their result files (or are broken)."""
    problems = []
    for page in pages(root):
        try:
            if rendered(page, root) != page.read_text(encoding="utf-8"):
                names = [b.source for b in blocks(page, page.read_text().splitlines())]
                problems.append(
                    f"{page.relative_to(root)}: a table differs from its file "
                    f"(one of {', '.join(names)}): run scripts/doc_tables.py"
                )
        except MarkerError as exc:
            problems.append(str(exc))
    return problems


def render_results(root: Path = ROOT) -> list[Path]:
    """Write each results/NAME.md as `stackrace report results/NAME.json --markdown`
    would; return those that changed."""
    from stackrace.report import tables
    from stackrace.report.write import read_run

    changed = []
    for run in sorted((root / "results").glob("*.json")):
        md = run.with_suffix(".md")
        text = tables.markdown(read_run(str(run)))
        if not md.is_file() or md.read_text(encoding="utf-8") != text:
            md.write_text(text, encoding="utf-8")
            changed.append(md)
    return changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if stale")
    parser.add_argument(
        "--results", action="store_true", help="first render results/*.md from their runs"
    )
    args = parser.parse_args()
    if args.results and not args.check:
        for md in render_results():
            print(f"rewrote {md.relative_to(ROOT)}")
    if args.check:
        problems = stale()
        for line in problems:
            print(line, file=sys.stderr)
        return 1 if problems else 0
    for page in pages():
        text = rendered(page)
        if text != page.read_text(encoding="utf-8"):
            page.write_text(text, encoding="utf-8")
            print(f"rewrote {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
