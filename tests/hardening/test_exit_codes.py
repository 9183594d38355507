"""Exit codes mean something: a level where nothing succeeded fails the run (and its
JUnit case); absolute --fail-on rules are judged without a baseline; a relative rule
without one is refused before any load, never ignored. Real runs of real servers."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.hardening.cli_forks import run_forked
from tests.hardening.conftest import assert_one_line_error
from tests.helpers import STACKS_FIXTURE, run_cli

# half a second after a tenth of warm-up: thousands of answers at c=2; the checks are
# statuses, rules and files, no throughput
LEVEL = ["--concurrency", "2", "--duration", "0.5s", "--warmup", "0.1s"]


@pytest.fixture(scope="module")
def good_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run of the test server, judged by an absolute rule it cannot meet (p99 > 1 µs):
    bench judges it without a baseline, fails, and still writes the run."""
    run = tmp_path_factory.mktemp("good") / "run.json"
    r = run_cli(
        "--stacks-file", str(STACKS_FIXTURE), "bench", "--stacks", "plain", *LEVEL,
        "--json", str(run), "--fail-on", "p99>1us",
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert "REGRESSION plain @ c=2: p99 " in r.stdout and "(rule p99>1us)" in r.stdout
    assert "Traceback" not in r.stderr
    return run


def cases(junit: Path) -> dict[str, ET.Element]:
    root = ET.parse(junit).getroot()
    return {f"{c.get('classname')} {c.get('name')}": c for c in root.iter("testcase")}


def test_a_level_where_every_request_failed_fails_the_run_and_its_junit_case(
    tmp_path: Path,
) -> None:
    """The issue's case: 100 % HTTP 404 exited 0 with JUnit failures="0"."""
    junit = tmp_path / "junit.xml"
    r = run_cli(
        "--stacks-file", str(STACKS_FIXTURE), "bench", "--stacks", "notfound", *LEVEL,
        "--junit", str(junit),
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert "stackrace bench: notfound @ c=2: every request failed (" in r.stderr
    assert "none succeeded: http_status" in r.stderr and "(404)" in r.stderr
    root = ET.parse(junit).getroot()
    assert root.get("failures") == "1"
    failure = cases(junit)["notfound c=2"].find("failure")
    assert failure is not None and failure.get("type") == "no success"


def test_absolute_rules_are_judged_without_a_baseline(good_run: Path, tmp_path: Path) -> None:
    passed = run_forked("report", str(good_run), "--fail-on", "failures>0.1%,p99>10s")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "gate passed: 2 checks on 1 level (absolute rules, no baseline)" in passed.stdout
    junit = tmp_path / "junit.xml"
    failed = run_forked("report", str(good_run), "--fail-on", "p99>1us", "--junit", str(junit))
    assert failed.returncode == 1
    assert "REGRESSION plain @ c=2: p99 " in failed.stdout
    failure = cases(junit)["plain c=2"].find("failure")
    assert failure is not None and "rule p99>1us" in (failure.text or "")


@pytest.mark.parametrize("command", ["bench", "report"])
def test_a_relative_rule_without_a_baseline_is_refused_before_any_load(
    command: str, good_run: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    args = (
        ["--stacks-file", str(STACKS_FIXTURE), "bench", "--stacks", "plain", *LEVEL]
        if command == "bench"
        else ["report", str(good_run)]
    )
    t0 = time.monotonic()
    r = run_forked(*args, "--fail-on", "qps<-10%,p99>50ms", env={"STACKRACE_RUNS_DIR": str(runs)})
    line = assert_one_line_error(r, f"stackrace {command}: --fail-on qps<-10%: a relative rule")
    assert "--baseline" in line
    assert not runs.exists() and time.monotonic() - t0 < 20  # no stack was started


def test_a_bad_rule_is_one_line(good_run: Path) -> None:
    r = run_forked("report", str(good_run), "--fail-on", "p99>fast")
    assert_one_line_error(r, "stackrace report: bad --fail-on rule 'p99>fast'")
    r = run_forked("report", str(good_run), "--fail-on", "failures>0.1ms")
    assert_one_line_error(r, "--fail-on rule 'failures>0.1ms': failures takes %")
