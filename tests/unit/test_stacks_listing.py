"""`stackrace stacks` fits pipes and narrow terminals: a stack's name, what a reader
types next, is never cut (the listing's rendering, on the shipped stacks' names)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from stackrace.commands.stacks_listing import StackRow, print_rows, tsv_lines
from stackrace.stacks.catalogue import load_stacks

WHY = "pip package gevent not installed; pip package django>=5.2,<6 not installed"


def shipped_rows() -> list[StackRow]:
    """Every shipped stack, every other one unavailable with a long reason."""
    stacks = load_stacks(None)
    return [
        StackRow(name, s.title, s.family, s.language, "hello json io db", i % 2 == 0,
                 f"{WHY} — stackrace install {name}")
        for i, (name, s) in enumerate(stacks.items())
    ]  # fmt: skip


def rendered(rows: list[StackRow], width: int, terminal: bool) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=terminal, color_system=None)
    print_rows(rows, console)
    return out.getvalue()


@pytest.mark.parametrize("width", [60, 72, 80, 100, 132, 200])
def test_no_name_is_cut_on_a_terminal_of_any_width(width: int) -> None:
    rows = shipped_rows()
    assert max(len(r.name) for r in rows) >= 20  # the shipped names the check is about
    text = rendered(rows, width, terminal=True)
    words = set(text.split())
    for r in rows:
        assert r.name in words, f"{r.name!r} cut at {width} columns:\n{text}"
    assert "…" not in text
    if width >= 80:  # a table, within the terminal's width
        assert all(len(line) <= width for line in text.splitlines()), text
    else:  # too narrow for one: the pipe's lines, which the terminal wraps, name first
        assert text.startswith("stack\ttitle\t"), text
    # why a stack cannot start, and its fix, whole (on a line of its own, or a field)
    flat = " ".join(text.split())
    for r in rows[1::2]:
        assert f"stackrace install {r.name}" in flat


def test_a_pipe_gets_one_tab_separated_line_per_stack_name_first() -> None:
    rows = shipped_rows()
    text = rendered(rows, 80, terminal=False)
    lines = text.splitlines()
    assert lines[0].split("\t") == ["stack", "title", "family", "language", "workloads",
                                    "available", "h2"]  # fmt: skip
    assert [line.split("\t")[0] for line in lines[1:]] == [r.name for r in rows]
    assert all(line.count("\t") == 6 for line in lines)
    assert lines[1].split("\t")[5] == "yes"
    assert lines[2].split("\t")[5] == f"no: {rows[1].why}"


def test_a_field_never_carries_a_tab_or_a_line_break() -> None:
    row = StackRow("mine", "two\tcolumns\nand lines", "sync", "python", "all", False, "x\ty")
    (_header, line) = tsv_lines([row])
    assert line.split("\t") == ["mine", "two columns and lines", "sync", "python", "all",
                                "no: x y", "-"]  # fmt: skip
