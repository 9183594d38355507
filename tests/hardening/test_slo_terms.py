"""An SLO is met only on figures measured (issue 48, item 4): a term on memory or CPU
where no server is sampled (`load URL`, `bench --url` without --pid) is refused up
front, and a level or window of a server not sampled reads it "not measured", never
met; a number without its unit (`p99<5`: 5 µs or 5 ms?) is refused with the units it
takes; two targets on one figure (`p99<5ms,p99<10ms`) are refused; `tune` with no
configuration meeting the SLO prints no deploy line and exits 1. The parser and the
judgment are pure (unit tests here); the refusals are the real CLI's, before anything
starts."""

from __future__ import annotations

import msgspec
import pytest

from stackrace.commands import tune_output
from stackrace.report.schema import (
    SCHEMA_VERSION,
    BenchRun,
    Machine,
    Settings,
    StackResult,
    TunePoint,
    TuneResult,
)
from stackrace.report.slo import Slo
from stackrace.report.tune import add_deploy, met_any, text_lines
from stackrace.settings.race_settings import RaceSettings
from stackrace.settings.terms import TermError, check_objective, parse_terms, unsampled_terms
from stackrace.stacks.catalogue import load_stacks
from tests.hardening.cli_forks import run_forked
from tests.hardening.conftest import assert_one_line_error
from tests.helpers import STACKS_FIXTURE
from tests.unit.test_report import level


@pytest.mark.parametrize(
    ("term", "units"),
    [
        ("p99<5", "p99 takes ms, s, us, µs (e.g. p99<5ms)"),
        ("mean<=20", "mean takes ms, s, us, µs"),
        ("rss<200", "rss takes gb, gib, kb, kib, mb, mib (e.g. rss<200MiB)"),
        ("cpu<80", "cpu takes % (e.g. cpu<80%)"),
    ],
)
def test_a_number_without_its_unit_is_refused_with_the_units(term: str, units: str) -> None:
    with pytest.raises(TermError) as err:
        check_objective(term)
    assert f"--slo rule {term!r}: a number without its unit: {units}" in str(err.value)
    with pytest.raises(TermError, match="without its unit"):  # the gate's terms too
        parse_terms(term.replace("<", ">"))
    assert parse_terms("qps<5000")[0].value == 5000.0  # throughput alone is a bare number


@pytest.mark.parametrize(
    "spec", ["p99<5ms,p99<10ms", "p99<5ms,p99<=5ms", "failures<1%,failures<2%", "p99.9<1s,p999<2s"]
)
def test_two_targets_on_one_figure_are_refused(spec: str) -> None:
    with pytest.raises(TermError, match="give one target per figure"):
        check_objective(spec)


def test_memory_and_cpu_terms_are_found_for_commands_that_sample_no_server() -> None:
    assert unsampled_terms("p99<50ms,rss<1MB,cpu<50%") == ["rss<1MB", "cpu<50%"]
    assert unsampled_terms("p99<50ms") == [] and unsampled_terms(None) == []


def test_a_figure_not_sampled_is_not_measured_and_never_met() -> None:
    slo = Slo.parse("p99<1s,rss<1MB,cpu<0.001%")
    lv = level(2, 100.0, 5_000)
    lv = msgspec.structs.replace(lv, cpu_percent=0.0)
    lv.memory_after.rss = 0  # what a server not sampled records: zeros
    judged = slo.judge_level(lv, sampled=False)
    assert not judged.meets
    assert "rss not measured" in judged.why and "cpu not measured" in judged.why
    window = slo.judge_window(lv.window, unsampled=True)
    assert not window.meets and "never met" in window.why
    # sampled, the same zeros are figures (a server of 0 bytes would meet rss<1MB)
    assert slo.judge_level(lv, sampled=True).meets
    # the app's windows leave them to the level (sampled there): not judged, not missed
    assert slo.judge_window(lv.window).meets


def test_load_bench_and_the_app_refuse_a_term_on_a_figure_they_do_not_sample() -> None:
    r = run_forked("load", "http://127.0.0.1:9/", "--slo", "cpu<0.001%")
    line = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and "samples no server's memory or CPU" in line, r.stderr
    assert "'cpu<0.001%' would never be measured" in line
    r = run_forked("bench", "--url", "http://127.0.0.1:9/", "--slo", "p99<50ms,rss<1MB")
    line = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and "'rss<1MB' would never be measured" in line, r.stderr
    assert "127.0.0.1:9 is not sampled (give --pid PID" in line
    r = run_forked("--url", "http://127.0.0.1:9/", "--slo", "p99<50ms,cpu<5%", "--go")  # the app
    assert_one_line_error(r, "'cpu<5%' would never be measured", "127.0.0.1:9 is not sampled")


@pytest.mark.parametrize("slo", ["p99<5", "p99<5ms,p99<10ms"])
def test_the_cli_refuses_a_bare_number_or_two_targets_in_one_line(slo: str) -> None:
    r = run_forked("load", "http://127.0.0.1:9/", "--slo", slo)
    assert_one_line_error(r, "--slo")
    r = run_forked("--stacks-file", str(STACKS_FIXTURE), "bench", "--stacks", "plain", "--slo", slo)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr


def _tune_run(points: list[TunePoint], tied: list[str]) -> BenchRun:
    s = RaceSettings(slo="p99<1us")
    versions = [
        StackResult(name=p.name, title=p.name, family="sync", version="", levels=[]) for p in points
    ]
    return BenchRun(
        schema=SCHEMA_VERSION,
        started="2026-11-29T12:00:00+00:00",
        machine=Machine("h", "cpu", 2, 1 << 30, "6", "Debian", "3.11", "1"),
        settings=Settings(**msgspec.structs.asdict(s), path="/"),
        stacks=versions,
        tune=TuneResult(
            stacks=["gunicorn-sync"],
            axes={},
            verdict="no configuration met the SLO",
            tied=tied,
            points=points,
        ),
    )


def test_tune_with_no_configuration_meeting_the_slo_prints_no_deploy_line_and_exits_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    names = ["gunicorn-sync:workers=1", "gunicorn-sync:workers=2"]
    run = _tune_run([TunePoint(n, "coarse", 0, 0, 0, 3) for n in names], tied=names)
    assert not met_any(run.tune)  # type: ignore[arg-type]
    add_deploy(run, load_stacks(check_trust=False))
    assert run.tune is not None and run.tune.deploy is None and run.tune.deploy_note == ""
    assert not any("production" in x for x in text_lines(run))
    assert tune_output.show(run) == 1
    assert "production" not in capsys.readouterr().out
    # one that met it: its deploy line, and 0 (the same tie)
    met = _tune_run(
        [TunePoint(n, "coarse", 500 + i, 490, 510, 3) for i, n in enumerate(names)], names
    )
    add_deploy(met, load_stacks(check_trust=False))
    assert met.tune is not None and "any of these will do" in met.tune.deploy_note
    assert tune_output.show(met) == 0
