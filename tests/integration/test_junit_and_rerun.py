"""`bench --junit` / `report --junit` (JUnit XML for CI), and a saved run's provenance
run again with `bench --from`: real bench runs of the fixture's test servers."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import msgspec

from stackrace.report.schema import loads
from tests.helpers import ROOT, STACKS_FIXTURE, run_cli

SHORT = ["--concurrency", "2,4", "--duration", "0.5s", "--warmup", "0.2s", "--timeout", "4s"]
# the runs of --from's tests: one level, as their checks are of the settings, provenance
# and definitions a run records and reruns, not of levels (the JUnit test has two)
ONE_LEVEL = ["--concurrency", "2", *SHORT[2:]]


def cases(path: Path) -> dict[tuple[str, str], ET.Element]:
    """The test cases of a JUnit file, checked for the shape CI systems read."""
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    suite = suites[0]
    found = suite.findall("testcase")
    for key in ("tests", "failures", "errors", "skipped"):
        assert root.get(key) == suite.get(key)
    assert int(suite.get("tests", "-1")) == len(found)
    for tag, key in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        assert int(suite.get(key, "-1")) == sum(c.find(tag) is not None for c in found)
    assert abs(float(suite.get("time", "0")) - sum(float(c.get("time", "x")) for c in found)) < 0.01
    for c in found:
        outcome = [e.tag for e in c if e.tag in ("failure", "error", "skipped")]
        assert len(outcome) <= 1, outcome  # the common schemas allow one
        tags = [e.tag for e in c]
        assert tags == sorted(tags, key=lambda t: t.startswith("system-")), tags
    return {(c.get("classname", ""), c.get("name", "")): c for c in found}


def test_junit_has_a_case_per_stack_and_level_with_the_gates_failures(tmp_path: Path) -> None:
    run, first = tmp_path / "run.json", tmp_path / "first.xml"
    r = run_cli(
        "--stacks-file", str(STACKS_FIXTURE), "bench", "--stacks", "plain,missing-binary", *SHORT,
        "--json", str(run), "--junit", str(first), "--no-progress",
    )  # fmt: skip
    assert r.returncode == 1, r.stderr  # a stack could not be measured
    got = cases(first)
    assert set(got) == {
        ("plain", "c=2"),
        ("plain", "c=4"),
        ("missing-binary", "c=2"),
        ("missing-binary", "c=4"),
        ("stackrace", "run"),
    }
    assert len(got[("plain", "c=2")]) == 1  # system-out only: passed
    assert "req/s" in (got[("plain", "c=2")].findtext("system-out") or "")
    error = got[("missing-binary", "c=2")].find("error")
    assert error is not None and "/nonexistent/server" in error.get("message", "")
    assert got[("missing-binary", "c=4")].find("skipped") is not None
    # a baseline that was ten times faster at c=2: that level fails the gate, the rest
    # pass (req/s is goodput: ten times the answers that count, in the same time)
    raw = json.loads(run.read_text())
    window = raw["stacks"][0]["levels"][0]["window"]
    window["ok"] *= 10
    window["requests"] *= 10
    base = tmp_path / "base.json"
    base.write_text(json.dumps(raw))
    judged = tmp_path / "judged.xml"
    r = run_cli("report", str(run), "--baseline", str(base), "--junit", str(judged))
    assert r.returncode == 1 and "REGRESSION plain @ c=2: qps" in r.stdout, r.stdout
    got = cases(judged)
    failure = got[("plain", "c=2")].find("failure")
    assert failure is not None and failure.get("type") == "regression"
    assert failure.get("message", "").startswith("qps ") and "qps<-10%" in (failure.text or "")
    assert got[("plain", "c=4")].find("failure") is None
    assert ("stackrace", "gate") in got and got[("stackrace", "gate")].find("failure") is None


def test_a_run_records_where_it_came_from_and_runs_again_from_its_file(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks.toml"
    shutil.copy(STACKS_FIXTURE, stacks)
    run = tmp_path / "run.json"
    r = run_cli(
        "--stacks-file", str(stacks), "bench", "--stacks", "plain:workers=2", *ONE_LEVEL,
        "--isolation", "rotate", "--json", str(run), "--no-progress",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    first = loads(run.read_bytes())
    p = first.provenance
    assert p is not None and first.machine.stackrace
    assert (
        p.stacks_file == str(stacks)
        and p.stacks_sha256 == hashlib.sha256(stacks.read_bytes()).hexdigest()
    )
    (recipe,) = p.stacks
    assert (recipe.name, recipe.block) == ("plain:workers=2", "plain")
    assert recipe.overrides == {"workers": "2"}
    python = str(Path(sys.executable).parent / "python")  # {python}: the venv's
    # the fixture's command (tests/stacks_fixture.toml), the per-run port kept a placeholder
    assert recipe.command[:3] == [python, str(ROOT / "tests/servers/testserver.py"), "{port}"]
    assert recipe.command[3] == "--host" and "--stats-file" in recipe.command
    assert set(p.definitions) == {"plain"}
    # run again from a directory without a stacks file: the shipped file has no 'plain',
    # and the run's recorded blocks are never started in its place
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = tmp_path / "again.json"
    r = run_cli("bench", "--from", str(run), "--json", str(again), cwd=elsewhere)
    assert r.returncode == 2 and "no stack 'plain'" in r.stderr, r.stderr
    assert not again.exists()
    # with the stacks file it ran: the same settings and stacks, the same definitions
    r = run_cli(
        "--stacks-file", str(stacks), "bench", "--from", str(run), "--json", str(again),
        cwd=elsewhere,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    second = loads(again.read_bytes())
    placed = msgspec.structs.replace(first.settings, placement=second.settings.placement)
    assert second.settings == placed
    assert [s.name for s in second.stacks] == ["plain:workers=2"]
    assert second.provenance is not None and second.provenance.rerun_of == str(run)
    assert second.provenance.definitions == p.definitions
    # a title changed: noted, and run; options given override the run's settings
    stacks.write_text(
        STACKS_FIXTURE.read_text().replace('title = "test server"', 'title = "changed"')
    )
    third = tmp_path / "third.json"
    r = run_cli(
        "--stacks-file", str(stacks), "bench", "--from", str(run), "--concurrency", "3",
        "--json", str(third), cwd=elsewhere,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "stack 'plain': title differs from" in r.stderr
    rerun = loads(third.read_bytes())
    assert rerun.settings.concurrency_levels == [3] and rerun.settings.duration == 0.5
    assert rerun.stacks[0].title.startswith("changed")


def test_from_never_runs_a_command_the_run_file_names(tmp_path: Path) -> None:
    """An edited run file names a command that would create a file: --from resolves the
    stack in the stacks file in use, sees the definitions differ and refuses; with
    --accept-definition-changes it runs the stack as defined now. The command in the
    file never runs either way."""
    stacks = tmp_path / "stacks.toml"
    shutil.copy(STACKS_FIXTURE, stacks)
    run = tmp_path / "run.json"
    r = run_cli(
        "--stacks-file", str(stacks), "bench", "--stacks", "plain", *ONE_LEVEL,
        "--json", str(run), "--no-progress",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    planted = tmp_path / "planted"
    raw = json.loads(run.read_text())
    evil = ["/bin/sh", "-c", f"touch {planted}; exec sleep 30"]
    raw["provenance"]["definitions"]["plain"]["command"] = evil
    raw["provenance"]["stacks"][0]["command"] = evil
    run.write_text(json.dumps(raw))  # the recorded sha256 of the stacks file still matches
    base = ("--stacks-file", str(stacks), "bench", "--from", str(run), "--no-progress")
    r = run_cli(*base)
    assert r.returncode == 2, r.stderr
    assert "defined differently" in r.stderr and "stack 'plain': command" in r.stderr
    assert "--accept-definition-changes" in r.stderr
    assert not planted.exists()
    r = run_cli(*base, "--accept-definition-changes")
    assert r.returncode == 0, r.stderr
    assert "stack 'plain': command differs from" in r.stderr
    assert not planted.exists()


def test_from_is_checked_before_any_load(tmp_path: Path) -> None:
    r = run_cli("bench", "--from", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and "missing.json: no such file" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    (tmp_path / "x.json").write_text("{}")
    r = run_cli("bench", "--from", str(tmp_path / "x.json"), "--preset", "sync-ceiling")
    assert r.returncode == 2 and "give one of them" in r.stderr
