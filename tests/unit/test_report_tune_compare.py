"""`stackrace report A.json B.json` on two tune runs: candidate by candidate capacity
under the SLO with the change against the first run, and each run's winner."""

from __future__ import annotations

from pathlib import Path

import msgspec

from stackrace.cli import main
from stackrace.report.schema import CapacityResult, StackResult, dumps
from tests.unit.test_report import make_run


def tune_run(caps: dict[str, float | None], slo: str = "p99<50ms"):  # -> BenchRun
    base = make_run()
    stacks = []
    for name, rps in caps.items():
        cap = CapacityResult(
            slo="p99 < 50 ms",
            mode="concurrency",
            load=None if rps is None else round(rps / 100),
            capacity=rps,
            margin=0.03,
            breaks_at=None,
            breaks_why="",
            stopped="precision reached",
            sentence=f"meets p99 < 50 ms up to c={round(rps / 100)}" if rps else "cannot meet",
            needed_answers=1000,
            precision=0.05,
        )
        stacks.append(
            StackResult(
                name=name, title=name, family="threaded", version="23", levels=[], capacity=cap
            )
        )
    settings = msgspec.structs.replace(base.settings, slo=slo)
    return msgspec.structs.replace(base, stacks=stacks, settings=settings)


def test_two_tune_runs_compare_candidate_by_candidate(tmp_path: Path, capsys) -> None:
    a, b = tmp_path / "before.json", tmp_path / "after.json"
    a.write_bytes(
        dumps(tune_run({"g:workers=1": 400.0, "g:workers=3": 1200.0, "g:workers=5": None}))
    )
    b.write_bytes(
        dumps(tune_run({"g:workers=1": 500.0, "g:workers=3": 1100.0, "g:workers=5": 1500.0}))
    )
    md = tmp_path / "cmp.md"
    assert main(["report", str(a), str(b), "--markdown", str(md)]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  g:")}
    assert "400 req/s at c=4" in rows["g:workers=1"] and "(+25%)" in rows["g:workers=1"]
    assert "(-8%)" in rows["g:workers=3"]
    assert "cannot meet" in rows["g:workers=5"] and "1,500 req/s at c=15" in rows["g:workers=5"]
    assert "winner of before.json: g:workers=3: meets p99 < 50 ms up to c=12" in out
    assert "winner of after.json: g:workers=5" in out
    assert "the winner changed: g:workers=3 → g:workers=5" in out
    assert "the winner changed" in md.read_text()


def test_one_tune_run_renders_its_ranking(tmp_path: Path, capsys) -> None:
    a = tmp_path / "tune.json"
    a.write_bytes(dumps(tune_run({"g:workers=1": 400.0, "g:workers=3": 1200.0})))
    assert main(["report", str(a)]) == 0
    out = capsys.readouterr().out
    assert out.index("g:workers=3") < out.index("g:workers=1")
    assert "winner: g:workers=3" in out


def test_different_slos_are_said(tmp_path: Path, capsys) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_bytes(dumps(tune_run({"g": 400.0})))
    b.write_bytes(dumps(tune_run({"g": 900.0}, slo="p99<200ms")))
    assert main(["report", str(a), str(b)]) == 0
    assert "different SLOs" in capsys.readouterr().out
