"""The regression gate never passes on nothing; output paths are checked before a run;
a run file that cannot be read is named. Real bench runs against a real test server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.hardening.cli_forks import run_forked
from tests.hardening.conftest import assert_one_line_error
from tests.helpers import STACKS_FIXTURE, TestServer, blocking, run_cli

# half a second after a tenth of warm-up: thousands of answers; the checks are statuses,
# rules and files, no throughput
LEVEL = ["--duration", "0.5s", "--warmup", "0.1s"]


def bench(*args: str, block_ms: int = 0) -> tuple[int, str, str]:
    """`bench` on the test stacks' `plain` (blocking `block_ms` in every request)."""
    plain = ["--stacks-file", str(STACKS_FIXTURE), "bench", "--stacks", "plain", *LEVEL]
    r = run_cli(*plain, *args, env=blocking(block_ms))
    assert "Traceback" not in r.stderr, r.stderr
    return r.returncode, r.stdout, r.stderr


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("gate")
    path = tmp / "base.json"
    rc, _, err = bench("--concurrency", "4", "--json", str(path))
    assert rc == 0, err
    return path


def doctored(baseline: Path, tmp_path: Path, **settings: object) -> Path:
    raw = json.loads(baseline.read_text())
    raw["settings"].update(settings)
    for st in raw["stacks"]:
        for lv in st["levels"]:
            lv["concurrency"] = settings.get("_level", lv["concurrency"])
    raw["settings"].pop("_level", None)
    path = tmp_path / "doctored.json"
    path.write_text(json.dumps(raw))
    return path


def test_gate_fails_when_settings_differ(baseline: Path, tmp_path: Path) -> None:
    """One line per differing setting; exit 1; no "gate passed"."""
    other = doctored(baseline, tmp_path, workload="io", path="/io?ms=10", timeout=3.0)
    r = run_forked("report", str(baseline), "--baseline", str(other))
    assert r.returncode == 1, r.stdout + r.stderr
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("GATE FAILED")]
    assert len(lines) == 3, r.stdout
    assert any("workload differs: 'hello' here, 'io' in the baseline" in ln for ln in lines)
    assert any("path differs" in ln for ln in lines)
    assert any("timeout differs: 10 here, 3 in the baseline" in ln for ln in lines)
    assert "gate passed" not in r.stdout


def test_gate_fails_when_nothing_was_compared(baseline: Path, tmp_path: Path) -> None:
    other = doctored(baseline, tmp_path, _level=999)
    r = run_forked("report", str(baseline), "--baseline", str(other))
    assert r.returncode == 1
    assert "GATE FAILED nothing compared: no stack and level of this run is in the baseline" in (
        r.stdout
    )
    assert "(no baseline for plain @ c=4)" in r.stdout and "gate passed" not in r.stdout


def test_bench_with_another_workload_fails_the_gate(baseline: Path) -> None:
    """The issue's case end to end: bench with a different workload against a baseline
    gave "gate passed: 0 checks", exit 0."""
    rc, out, _ = bench("--concurrency", "4", "--workload", "json", "--baseline", str(baseline))
    assert rc == 1, out
    assert "GATE FAILED setting workload differs: 'json' here, 'hello' in the baseline" in out
    assert "gate passed" not in out


def test_unmatched_level_is_held_to_absolute_rules(baseline: Path) -> None:
    """Every request times out (50 ms of work, 10 ms timeout) at a level the baseline does
    not have: the absolute failures rule still applies, and nothing was compared."""
    rc, out, _ = bench(
        "--concurrency",
        "8",
        "--timeout",
        "10ms",
        "--baseline",
        str(baseline),
        "--fail-on",
        "qps<-10%,failures>0.1%",
        block_ms=50,
    )
    assert rc == 1, out
    assert "REGRESSION plain @ c=8: failures 100.00% (rule failures>0.1%, no baseline)" in out
    assert "GATE FAILED nothing compared" in out
    assert "GATE FAILED setting timeout differs" in out


def test_the_same_run_still_passes(baseline: Path) -> None:
    r = run_forked("report", str(baseline), "--baseline", str(baseline))
    assert r.returncode == 0, r.stdout
    assert "gate passed: " in r.stdout and "on 1 level against" in r.stdout


@pytest.mark.parametrize(
    "option", ["--json", "--csv", "--markdown", "--chart", "--html", "--series-csv"]
)
def test_bench_checks_output_paths_before_any_load(option: str) -> None:
    rc, out, err = bench("--concurrency", "2", option, "/nonexistent/dir/x.out")
    assert rc == 2 and out == ""
    why = "directory /nonexistent/dir does not exist"
    assert err == f"stackrace bench: {option} /nonexistent/dir/x.out: {why}\n"


def test_load_checks_hdr_out_before_any_load(server: TestServer) -> None:
    r = run_forked("load", server.url("/hello"), "-d", "1s", "--hdr-out", "/nonexistent/dir/x.hdr")
    assert_one_line_error(r, "stackrace load: --hdr-out /nonexistent/dir/x.hdr: directory")
    assert server.stats()["by_path"].get("/hello", 0) == 0


@pytest.mark.parametrize(
    ("content", "why"),
    [(b'{"schema": 1, "started": "2026', "not a run file"), (b"", "not a run file"), (b"[1]", "")],
)
def test_report_names_a_file_it_cannot_read(tmp_path: Path, content: bytes, why: str) -> None:
    bad = tmp_path / "broken.json"
    bad.write_bytes(content)
    r = run_forked("report", str(bad))
    assert_one_line_error(r, f"stackrace report: {bad}: ", why)
    r = run_forked("report", str(tmp_path / "missing.json"))
    assert_one_line_error(r, f"{tmp_path / 'missing.json'}: no such file")


def test_html_in_a_stacks_title_shows_as_text_in_the_page(tmp_path: Path) -> None:
    """A stacks file's text reaches the HTML page escaped: no element, no script."""
    hostile = "<img src=x onerror=alert(2)><script>alert(1)</script>"
    stacks = tmp_path / "stacks.toml"
    stacks.write_text(
        STACKS_FIXTURE.read_text().replace(
            'title = "test server"', f"title = {json.dumps(hostile)}"
        )
    )
    page = tmp_path / "r.html"
    r = run_cli(
        "--stacks-file", str(stacks), "bench", "--stacks", "plain", *LEVEL,
        "--concurrency", "2", "--html", str(page), env=blocking(0),
    )  # fmt: skip
    assert r.returncode in (0, 1), r.stderr
    text = page.read_text()
    assert "<img" not in text and text.count("<script>") == 1  # the page's own alone
    assert "&lt;img src=x onerror=alert(2)&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in text
