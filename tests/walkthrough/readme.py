"""The `stackrace …` command lines the README shows, read from the README itself.

A command line is a line of a fenced code block that runs `stackrace` (after a `$ `
prompt where the block shows output too, after `taskset …` or inside `eval "$(…)"`,
continued over lines ending in `\\`, each part of `a && b`), or an inline code span
that does (`stackrace --stacks gunicorn-sync,uvicorn --workload io -c 10 --go`) with
an option or an argument (a span naming a command, `stackrace load`, is prose). Each
comes with the README line it is on, so a failure names it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

README = Path(__file__).parents[2] / "README.md"
_INLINE = re.compile(r"`(stackrace(?: [^`]*)?)`")
# a word standing for what the reader supplies: FILE, NAME, RUN.json, HEAD:6379, …
_PLACEHOLDER = re.compile(r"^\[|\b[A-Z][A-Z0-9_]{2,}\b|…|^\.\.\.$")


@dataclass(frozen=True)
class Line:
    """One command line of the README: where it is, and its words."""

    number: int  # 1-based line of README.md
    text: str  # as written (continuations joined)
    inline: bool

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
    `taskset -c 1 stackrace …`, `stackrace … > file` (the redirection dropped)."""
    text = text.split(" # ")[0].strip()
    inner = re.match(r'eval "\$\((.*)\)"', text)
    if inner:
        text = inner.group(1)
    out = []
    for part in text.split("&&"):
        words = part.strip()
        words = re.sub(r"^taskset -c \S+ ", "", words)
        words = words.split(" > ")[0].strip()
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
    return words[1] in {name for name, _m, _h in COMMANDS} or words[1].startswith("-")


def command_lines(readme: Path = README) -> list[Line]:
    lines = readme.read_text(encoding="utf-8").splitlines()
    found: list[Line] = []
    in_block = False
    block: list[tuple[int, str]] = []
    for n, raw in enumerate(lines, 1):
        if raw.startswith("```"):
            if in_block:
                found += _block(block)
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
                found.append(Line(n, span, inline=True))
    # a command shown twice is run once, under its first line
    seen: set[str] = set()
    return [x for x in found if not (x.text in seen or seen.add(x.text))]


def _block(block: list[tuple[int, str]]) -> list[Line]:
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
        out += [Line(start, c, inline=False) for c in _commands_in(text)]
    return out
