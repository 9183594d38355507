"""A tune's answer in words (report/tune.py): the printed lines and the Markdown carry
the winner with its confidence, the deploy line, the noise, the points tried and not,
the edges and the placement; a tie or an interrupted tune names no winner."""

from __future__ import annotations

import msgspec

from stackrace.report.schema import (
    SCHEMA_VERSION,
    BenchRun,
    Machine,
    Noise,
    Settings,
    TunePoint,
    TuneResult,
)
from stackrace.report.tune import markdown, text_lines
from stackrace.settings.race_settings import RaceSettings


def run(tune: TuneResult, interrupted: str | None = None) -> BenchRun:
    s = RaceSettings(slo="p99<50ms", workload="io")
    return BenchRun(
        schema=SCHEMA_VERSION,
        started="2026-11-27T12:00:00+00:00",
        machine=Machine("h", "cpu", 2, 1 << 30, "6", "Debian", "3.11", "1"),
        settings=Settings(**msgspec.structs.asdict(s), path="/io"),
        stacks=[],
        interrupted=interrupted,
        noise=Noise(cores=2, busy=True, sentence="the machine was busy: other processes …"),
        tune=tune,
    )


POINTS = [
    TunePoint("g:workers=1,threads=16", "refine", 1288, 1190, 1330, 6),
    TunePoint("g:workers=1,threads=32", "coarse", 881, 850, 910, 5),
]


def test_a_winner_with_its_deploy_line_noise_points_and_confidence() -> None:
    t = TuneResult(
        stacks=["g"],
        axes={"g": {"workers": ["1", "2"], "threads": ["16", "32"]}},
        verdict="winner: g:workers=1,threads=16: 1,288 req/s …; it beats the runner-up … with "
        "97 % confidence (over 5 interleaved rounds)",
        winner="g:workers=1,threads=16",
        confidence=0.97,
        deploy="gunicorn --bind HOST:PORT --worker-class gthread --threads 16 wsgi_app:app",
        deploy_note="stackrace's own test app (wsgi_app:app): …; needs gunicorn>=27",
        points=POINTS,
        not_measured=["g:workers=2,threads=32"],
        edges=[],
        rounds=5,
        placement="server on 1 of 2 cores, engine on the other …",
        stopped="decided",
    )
    text = "\n".join(text_lines(run(t)))
    md = markdown(run(t))
    for out in (text, md):
        assert "97 % confidence" in out and "gunicorn --bind HOST:PORT" in out
        assert "needs gunicorn>=27" in out and "the machine was busy" in out
        assert "1,190–1,330" in out and "refine" in out
        assert "not measured (1): g:workers=2,threads=32" in out
        assert "server on 1 of 2 cores" in out and "5 interleaved rounds" in out


def test_a_tie_or_an_interrupted_tune_names_no_winner() -> None:
    t = TuneResult(
        stacks=["g"],
        axes={},
        verdict="interrupted (Ctrl-C) after 2 configurations; … led",
        points=POINTS,
    )
    md = markdown(run(t, "Ctrl-C"))
    assert "Interrupted (Ctrl-C)" in md and "winner" not in md.lower().replace("no winner", "")
    assert "Run it in production" not in md


def test_a_confidence_is_never_said_as_certain() -> None:
    """Two noisy figures far apart: rounding says "100 % confidence", which no
    measurement on a shared machine earns."""
    from stackrace.race.bench.tune_search import sure

    assert sure(0.97) == "97 %" and sure(0.994) == "99 %"
    assert sure(0.9999) == "over 99 %" and sure(1.0) == "over 99 %"
