"""An SLO sets the exit status and the JUnit verdict without a baseline (issue 25, item
1): `bench --slo 'p99<1us'` fails with a JUnit failure of type "slo", `--slo 'p99<10s'`
passes; `load --slo` too; a bad objective is refused in one line before any load. Real
runs of a real test server."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.hardening.cli_forks import run_forked
from tests.hardening.conftest import assert_one_line_error
from tests.helpers import STACKS_FIXTURE, TestServer, run_cli

# half a second after a tenth of warm-up: thousands of answers at c=2; the checks are
# statuses, rules and files, no throughput
LEVEL = ["--concurrency", "2", "--duration", "0.5s", "--warmup", "0.1s"]


def test_bench_slo_that_cannot_be_met_fails_with_a_junit_failure(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    run = tmp_path / "run.json"
    r = run_cli(
        "--stacks-file", str(STACKS_FIXTURE), "bench", "--stacks", "plain", *LEVEL,
        "--slo", "p99<1us", "--junit", str(junit), "--json", str(run),
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert "SLO MISSED plain @ c=2: misses the SLO (p99 < 1 µs, failures < 1 %): p99 " in r.stdout
    root = ET.parse(junit).getroot()
    assert root.get("failures") == "1"
    case = next(c for c in root.iter("testcase") if c.get("name") == "c=2")
    failure = case.find("failure")
    assert failure is not None and failure.get("type") == "slo"
    assert json.loads(run.read_text())["settings"]["slo"] == "p99<1us"  # a setting of the run


def test_bench_slo_that_holds_exits_0(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    r = run_cli(
        "--stacks-file", str(STACKS_FIXTURE), "bench", "--stacks", "plain", *LEVEL,
        "--slo", "p99<10s,failures<0.1%,p95<10s,mean<10s,waiting<50%", "--junit", str(junit),
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SLO met (p99 < 10 s, failures < 0.1 %, p95 < 10 s, mean < 10 s, waiting < 50 %)" in (
        r.stdout
    )
    assert ET.parse(junit).getroot().get("failures") == "0"


def test_load_slo_sets_the_exit_status() -> None:
    server = TestServer()
    try:
        url = server.url("/hello")
        ok = run_cli("load", url, "-c", "2", "-d", "0.5s", "--slo", "p99<10s")
        assert ok.returncode == 0, ok.stdout + ok.stderr
        assert "SLO met (p99 < 10 s, failures < 1 %)" in ok.stdout  # its failure budget
        missed = run_cli("load", url, "-c", "2", "-d", "0.5s", "--slo", "p99.9<1us", "--json")
        assert missed.returncode == 1, missed.stdout + missed.stderr
        assert '"meets":false' in missed.stdout
        assert "SLO MISSED (p999 < 1 µs, failures < 1 %)" in missed.stderr
    finally:
        server.kill()


@pytest.mark.parametrize(
    ("slo", "words"),
    [
        ("p99<fast", ["--slo", "p99<fast"]),
        ("qps<-10%", ["--slo", "an objective is absolute"]),
        ("p101<1ms", ["--slo", "a percentile is p0 to p100"]),
    ],
)
def test_a_bad_objective_is_refused_in_one_line(slo: str, words: list[str]) -> None:
    r = run_forked("--stacks-file", str(STACKS_FIXTURE), "bench", "--stacks", "plain", "--slo", slo)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert all(w in r.stderr for w in words), r.stderr
    r = run_forked("load", "http://127.0.0.1:9/", "--slo", slo)
    assert_one_line_error(r, *words[1:])
