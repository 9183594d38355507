"""No byte from a server, an app or a file reaches a terminal or a document raw (issue 48,
item 1): a server that writes `ESC]0;PWNED BEL ESC[2J` in its log, an app whose import
error carries the same, run files, recordings and journals whose stack names hold
`<script>`, `|`, ESC and BEL, and a run file whose other text does. The real CLI on real
files and real processes; every output is read back by its own kind of reader (an XML
parser for the SVG and the JUnit file)."""

from __future__ import annotations

import json
import os
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import msgspec

from stackrace.race.core.journal import JournalStart
from stackrace.race.playback.recording import FORMAT, Header, MemberInfo
from stackrace.report.schema import dumps
from stackrace.settings.race_settings import RaceSettings
from tests.hardening.cli_forks import run_forked
from tests.hardening.conftest import assert_one_line_error
from tests.helpers import run_cli
from tests.unit.test_report import make_run

ATTACK = "\x1b]0;PWNED\x07\x1b[2J"
HOSTILE_NAME = f"sync<script>alert(1)</script>|{ATTACK}"
# what a terminal or an XML parser takes as a command: C0 controls but newline, and DEL
RAW = {chr(c) for c in range(0x20) if c != 0x0A} | {"\x7f"}


def _raw(text: str) -> set[str]:
    return {c for c in text if c in RAW}


def test_a_servers_escape_sequences_in_its_log_reach_no_terminal(tmp_path: Path) -> None:
    """The log tail of a stack that dies at start: `serve`, `verify` and `bench` (its
    table, its lines) show it with the escape sequence made visible, never sent."""
    stacks = tmp_path / "evil.toml"
    stacks.write_text(
        textwrap.dedent(
            """
            [stacks.evil]
            title = "writes escape sequences and dies"
            language = "python"
            family = "sync"
            command = ["{python}", "-c",
                       'import sys; sys.stderr.write("\\x1b]0;PWNED\\x07\\x1b[2J\\n"); sys.exit(3)']
            """
        )
    )
    env = {**os.environ, "STACKRACE_RUNS_DIR": str(tmp_path / "runs")}
    bench = ["bench", "--stacks", "evil", "--concurrency", "1", "--duration", "1", "--warmup", "0"]
    for command in (["serve", "evil"], ["verify", "evil"], bench):
        r = run_cli("--stacks-file", str(stacks), *command, env=env, timeout=60)
        out = r.stdout + r.stderr
        assert r.returncode != 0 and "Traceback" not in out, out
        assert "PWNED" in out, out  # the tail is shown ...
        assert not _raw(out), (command, sorted(_raw(out)), out)  # ... made printable
        assert "\\x1b]0;PWNED\\x07" in out, out


def test_an_apps_import_error_with_escape_sequences_is_one_printable_line(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    (app / "evilmod.py").write_text(f"raise RuntimeError({ATTACK!r} + ' boom')\n")
    r = run_cli("serve", "--app", "evilmod:app", "--app-dir", str(app), timeout=60)
    line = assert_one_line_error(r, "cannot import it", "RuntimeError", "boom", rc=r.returncode)
    assert r.returncode != 0
    assert not _raw(r.stdout + r.stderr), line
    assert "\\x1b]0;PWNED\\x07" in line


def _run_file(tmp_path: Path, name: str = "run.json", **changes: object) -> Path:
    run = make_run()
    for key, value in changes.items():
        if key == "stack_name":
            run.stacks[0].name = str(value)
        elif key == "cpu_model":
            run.machine.cpu_model = str(value)
        else:
            setattr(run, key, value)
    path = tmp_path / name
    path.write_bytes(dumps(run))
    return path


def test_a_run_file_whose_stack_name_breaks_the_rule_is_one_line(tmp_path: Path) -> None:
    bad = _run_file(tmp_path, "bad.json", stack_name=HOSTILE_NAME)
    good = _run_file(tmp_path, "good.json")
    for args in (
        ["report", str(bad)],
        ["report", str(bad), "--markdown", str(tmp_path / "r.md")],
        ["report", str(good), "--baseline", str(bad)],
        ["bench", "--from", str(bad)],
        ["tune", "--from", str(bad)],
    ):
        r = run_forked(*args, cwd=tmp_path)
        line = assert_one_line_error(r, str(bad), "stack name", "edited or damaged")
        assert not _raw(r.stdout + r.stderr) and "<script>" not in r.stdout, (args, line)
    assert not (tmp_path / "r.md").exists()


def test_a_run_files_text_is_escaped_in_the_terminal_markdown_svg_and_junit(tmp_path: Path) -> None:
    """Text the name rule does not cover (a note, the machine's words, why it stopped)
    is escaped for each sink; the SVG and the JUnit file are valid XML."""
    hostile = f"{HOSTILE_NAME} `code` *em* [link](x)"
    run_file = _run_file(tmp_path, notes=[hostile], interrupted=hostile, cpu_model=hostile)
    md, svg, junit = tmp_path / "r.md", tmp_path / "r.svg", tmp_path / "r.xml"
    r = run_forked(
        "report", str(run_file), "--markdown", str(md), "--chart", str(svg), "--junit", str(junit)
    )
    assert r.returncode in (0, 1), r.stdout + r.stderr  # 1: the JUnit's interrupted run
    assert "Traceback" not in r.stderr
    assert not _raw(r.stdout + r.stderr), sorted(_raw(r.stdout + r.stderr))
    assert "PWNED" in r.stdout  # the note is shown, escaped
    text = md.read_text()
    assert not _raw(text) and "<script>" not in text, text
    assert "&lt;script>" in text  # shown as text: `<` escaped, so no tag
    for row in (x for x in text.splitlines() if x.startswith("| ")):
        # every table row has its own columns: no `|` of a name splits a cell
        assert row.replace("\\|", "").count("|") == text.splitlines()[2].count("|"), row
    for path in (svg, junit):
        body = path.read_text()
        assert not _raw(body), (path, sorted(_raw(body)))
        ET.parse(path)  # valid XML (ESC and BEL are not allowed in XML 1.0)


def test_a_recording_whose_stack_name_breaks_the_rule_is_one_line(tmp_path: Path) -> None:
    rec = tmp_path / "race.jsonl"
    header = Header(
        version=FORMAT,
        created="2026-11-29T00:00:00Z",
        settings=RaceSettings(),
        members=[MemberInfo("m0", HOSTILE_NAME, "sync")],
    )
    rec.write_bytes(msgspec.json.encode(header) + b"\n")
    r = run_forked("replay", str(rec), cwd=tmp_path)
    line = assert_one_line_error(r, str(rec), "line 1", "is not a name stackrace records")
    assert not _raw(r.stderr), line


def test_a_journal_whose_stack_name_breaks_the_rule_is_one_line(tmp_path: Path) -> None:
    run = make_run()
    run.stacks[0].name = HOSTILE_NAME
    journal = tmp_path / "run.journal"
    start = JournalStart(command="bench", run=run)
    journal.write_bytes(msgspec.json.encode(start) + b"\n")
    r = run_forked("bench", "--resume", str(journal), cwd=tmp_path)
    line = assert_one_line_error(r, str(journal), "stack name")
    assert not _raw(r.stderr), line
    assert json.loads(journal.read_text())["kind"] == "start"  # left as it was
