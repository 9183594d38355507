"""The `stackrace …` command lines the README and the docs show, read from the pages
themselves (README.md and docs/*.md: every page a reader is sent to from the README),
and those of every command's `--help` (its Examples section: `help_lines`).

A command line is a line of a fenced code block that runs `stackrace` (after a `$ `
prompt where the block shows output too, after `taskset …` or inside `eval "$(…)"`,
continued over lines ending in `\\`, each part of `a && b`), or an inline code span
that does (`stackrace --stacks gunicorn-sync,uvicorn --workload io -c 10 --go`) with
an option or an argument (a span naming a command, `stackrace load`, is prose). Each
comes with the page and line it is on, so a failure names it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"


def pages() -> list[Path]:
    """The README, then the docs' pages in name order."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]


_INLINE = re.compile(r"`(stackrace(?: [^`]*)?)`")
# a word standing for what the reader supplies: FILE, NAME, RUN.json, HEAD:6379, N, …
_PLACEHOLDER = re.compile(r"^\[|\b[A-Z][A-Z0-9_]{2,}\b|^[A-Z]$|…|^\.\.\.$")
# a block of results copied from results/ by scripts/doc_tables.py: measured output
# (a claim's reason may quote a command line), not a line to run
_TABLE_OPEN = "<!-- table: "
_TABLE_CLOSE = "<!-- /table -->"


@dataclass(frozen=True)
class Line:
    """One command line of a page: where it is, and its words."""

    number: int  # 1-based line of the page
    text: str  # as written (continuations joined)
    inline: bool
    page: str = "README.md"  # relative to the repository

    @property
    def where(self) -> str:
        return f"{self.page}:{self.number}"

    @property
    def words(self) -> list[str]:
        return shlex.split(self.text, comments=not self.inline)

    @property
    def placeholder(self) -> str:
        """A word standing for what the reader supplies (FILE, NAME, RUN.json, …)."""
        for word in self.words:
            if _PLACEHOLDER.search(word):
                return word
        return ""


def _commands_in(text: str) -> list[str]:
    """The stackrace commands of one shell line: `a && b`, `eval "$(stackrace …)"`,
    `taskset -c 1 stackrace …`, `stackrace … > file` and `stackrace … | grep x` (the
    redirection and the pipe dropped)."""
    text = text.split(" # ")[0].strip()
    inner = re.match(r'eval "\$\((.*)\)"', text)
    if inner:
        text = inner.group(1)
    out = []
    for part in text.split("&&"):
        words = part.strip()
        words = re.sub(r"^taskset -c \S+ ", "", words)
        words = words.split(" > ")[0].split(" | ")[0].strip()
        if (words == "stackrace" or words.startswith("stackrace ")) and _is_command(words):
            out.append(words)
    return out


def _is_command(text: str) -> bool:
    """`stackrace`, `stackrace SUBCOMMAND …` or `stackrace --option …`: not a table row
    or a message that happens to start with the word."""
    from stackrace.cli import COMMANDS

    words = text.split()
    if len(words) == 1:
        return True
    return words[1] in {name for name, _h in COMMANDS} or words[1].startswith("-")


def command_lines(paths: list[Path] | None = None) -> list[Line]:
    """Every command line of the pages (README.md and docs/*.md by default), in page
    order; a command shown twice is run once, under its first line."""
    found: list[Line] = []
    for path in pages() if paths is None else paths:
        found += _lines_of(path)
    first: dict[str, Line] = {}
    for x in found:
        first.setdefault(x.text, x)
    return list(first.values())


def _lines_of(path: Path) -> list[Line]:
    page = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Line] = []
    in_block = in_table = False
    block: list[tuple[int, str]] = []
    for n, raw in enumerate(lines, 1):
        if raw.startswith(_TABLE_OPEN) or raw.startswith(_TABLE_CLOSE):
            in_table = raw.startswith(_TABLE_OPEN)
            continue
        if in_table:
            continue
        if raw.lstrip().startswith("```"):
            if in_block:
                found += _block(block, page)
                block = []
            in_block = not in_block
            continue
        if in_block:
            block.append((n, raw))
            continue
        for m in _INLINE.finditer(raw):
            span = m.group(1)
            words = span.split()
            second = words[1] if len(words) > 1 else ""
            wanted = len(words) >= 3 or second.startswith("-") or span == "stackrace"
            if wanted and _is_command(span):  # (an error message quoted is not)
                found.append(Line(n, span, inline=True, page=page))
    return found


def _block(block: list[tuple[int, str]], page: str) -> list[Line]:
    prompted = any(raw.startswith("$ ") for _n, raw in block)
    out = []
    pending = ""
    start = 0
    for n, raw in block:
        text = raw.rstrip()
        if prompted:
            if not text.startswith("$ "):
                continue  # the output shown under a command
            text = text[2:]
        if pending:
            text = pending + " " + text.strip()
        else:
            start = n
        if text.endswith("\\"):
            pending = text[:-1].rstrip()
            continue
        pending = ""
        out += [Line(start, c, inline=False, page=page) for c in _commands_in(text)]
    return out


def help_lines() -> list[Line]:
    """The command lines of every help's Examples section (the app's, each command's,
    each `db` action's), each under its help's name (`stackrace load --help`) and the
    line it is on; a command shown twice is run once."""
    import argparse

    from stackrace.cli import build_parser
    from stackrace.commands.parser import EXAMPLES

    def parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
        out = [parser]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    out += parsers(sub)
        return out

    found: list[Line] = []
    seen: set[str] = set()
    for parser in parsers(build_parser()):
        page = f"{parser.prog} --help"
        text = parser.format_help()
        _, head, rest = text.partition(f"\n{EXAMPLES}\n")
        if not head:
            continue
        start = text[: len(text) - len(rest)].count("\n") + 1
        for n, raw in enumerate(rest.splitlines(), start):
            if not raw.startswith("  "):
                break
            for command in _commands_in(raw.strip()):
                if command not in seen:
                    seen.add(command)
                    found.append(Line(n, command, inline=False, page=page))
    return found
