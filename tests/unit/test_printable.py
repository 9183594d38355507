"""One escaping function per sink (stackrace.base.printable), each checked against the
sink's own reader: a terminal's control bytes, Rich's and Textual's markup parsers, an
XML 1.0 parser, Markdown's table syntax, and the report writers that use them on a run
whose stack names and notes hold an escape sequence, `<script>`, `|` and markup."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from rich.text import Text
from textual.content import Content

from stackrace.base import printable
from stackrace.report import chart, tables
from stackrace.report.junit import junit_xml
from stackrace.report.write import print_run
from tests.unit.test_report import make_run

ATTACK = "\x1b]0;PWNED\x07\x1b[2J"
HOSTILE = f"x{ATTACK}<script>alert(1)</script>|`[red]red[/] [$x] \\[b]\u202e\x85\ud800\x00"
# what no sink may carry raw: C0 and C1 controls, DEL, bidi overrides, surrogates
FORBIDDEN = {chr(c) for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]} | {"\u202e", "\ud800"}


def _raw(text: str, allowed: str = "") -> set[str]:
    return {c for c in text if c in FORBIDDEN and c not in allowed}


def test_terminal_shows_every_control_character_and_keeps_newlines_only_when_asked() -> None:
    out = printable.terminal(HOSTILE)
    assert not _raw(out)
    assert "\\x1b]0;PWNED\\x07\\x1b[2J" in out  # visible: the evidence stays readable
    assert printable.terminal("a\r\nb\tc") == "a b c"
    assert printable.terminal("a\r\nb\nc", newlines=True) == "a\nb\nc"
    assert printable.terminal("plain text, é ✓") == "plain text, é ✓"


MARKUP_CASES = [HOSTILE, "a[1]b", "[$accent]x", "[Red]x", "[ red]x", "\\[b]x", "a\\b"]


@pytest.mark.parametrize("text", MARKUP_CASES)
def test_markup_renders_as_the_text_itself_in_rich(text: str) -> None:
    safe = printable.markup(text)
    assert Text.from_markup(safe).plain == printable.terminal(text)
    # followed by markup of ours, a trailing backslash does not escape it
    assert Text.from_markup(f"[b]{printable.markup(text + chr(92))}[/b]!").plain.endswith("!")


@pytest.mark.parametrize("text", MARKUP_CASES)
def test_textual_markup_renders_as_the_text_itself_in_textual(text: str) -> None:
    safe = printable.textual_markup(text)
    assert Content.from_markup(safe).plain == printable.terminal(text)
    assert Content.from_markup(f"[b]{safe}[/b]!").plain == printable.terminal(text) + "!"


def test_markdown_cell_holds_no_html_no_pipe_no_newline() -> None:
    cell = printable.markdown(HOSTILE + "\nnext")
    assert not _raw(cell)
    assert "<" not in cell and "\n" not in cell
    assert "|" not in cell.replace("\\|", "")
    assert "`" not in cell.replace("\\`", "")


@pytest.mark.parametrize("fn", [printable.xml, printable.html])
def test_xml_and_html_are_always_well_formed(fn) -> None:
    doc = f'<r a="{fn(HOSTILE)}">{fn(HOSTILE)}</r>'
    root = ET.fromstring(doc)  # an XML 1.0 parser: it refuses any control character
    assert root.get("a") == printable.terminal(HOSTILE)
    assert root.text == printable.terminal(HOSTILE)


def _hostile_run():
    run = make_run()
    run.stacks[0].name = HOSTILE  # in memory: a file's reader refuses such a name
    run.notes = [HOSTILE]
    run.interrupted = HOSTILE
    run.machine.cpu_model = HOSTILE
    return run


def test_every_report_writer_escapes_for_its_sink(capsys: pytest.CaptureFixture[str]) -> None:
    run = _hostile_run()
    md = tables.markdown(run)
    assert not _raw(md, "\n") and "<script>" not in md
    for row in md.splitlines():
        if row.startswith("| "):  # a table row: exactly its own columns
            assert row.replace("\\|", "").count("|") == len(tables.COLUMNS) + 1, row
    svg = chart.svg(run)
    assert not _raw(svg, "\n")
    ET.fromstring(svg)  # valid XML
    junit = junit_xml(run, None, None)
    assert not _raw(junit, "\n")
    ET.fromstring(junit.split("\n", 1)[1])
    print_run(run)  # the terminal's table (rich), to the captured stdout
    out = capsys.readouterr().out
    assert not _raw(out, "\n"), sorted(_raw(out, "\n"))
    assert "\\x1b]0;PWNED" in out  # shown, escaped


def test_capacity_markdown_and_svg_escape_a_files_text() -> None:
    from stackrace.report import capacity
    from tests.unit.test_capacity_chart import result

    runs = [result(HOSTILE, 900.0), result("uvicorn", 700.0)]
    md = capacity.markdown(runs, HOSTILE)
    assert not _raw(md, "\n") and "<script>" not in md
    for row in (x for x in md.splitlines() if x.startswith("| ")):
        assert row.replace("\\|", "").count("|") == len(capacity.HEADER) + 1, row
    svg = capacity.svg(runs, HOSTILE)
    assert not _raw(svg, "\n")
    ET.fromstring(svg)


def test_a_recorded_log_tail_is_printable_in_the_log_view() -> None:
    """A replay shows a recording's log lines (the `l` view) as a file's text."""
    from stackrace.race.live.replay import ReplayMember
    from stackrace.race.playback.recording import MemberInfo

    member = ReplayMember(MemberInfo("m0", "evil", "sync"), log=[ATTACK, "next"])
    tail = member.log_tail()
    assert tail == ["\\x1b]0;PWNED\\x07\\x1b[2J", "next"]
