"""Why it broke, in the app: the cause under the verdict, `w` opens the evidence, the
knee predicted before the load reaches it — on the synthetic engine, with an evidence
keeper whose capture is a test double (the demo's stacks have no process to sample;
the real capture is tested in tests/integration)."""

from __future__ import annotations

from stackrace.evidence.capture import CaptureTarget
from stackrace.evidence.model import (
    Cause,
    CauseKind,
    EvidenceWindow,
    FrameShare,
    QueueEvidence,
    ThreadState,
)
from stackrace.race.core.evidence_keeper import CaptureFacts, EvidenceKeeper
from stackrace.race.core.members import Member
from stackrace.tui.evidence import EvidenceScreen
from stackrace.tui.format import fmt_rate
from stackrace.tui.pane import StackPane
from stackrace.tui.spark import ScaledSparkline
from tests.tui.conftest import Race, open_race, plan, synthetic_session

HOSTILE = "wait[bold]_for[/bold]_backend"  # markup in an app's function name: shown as is


def _facts(m: Member) -> CaptureFacts | None:
    # the demo's gunicorn-sync as stacks.toml defines it: one worker, one thread
    if m.id != "gunicorn-sync":
        return None
    return CaptureFacts(CaptureTarget(0, None), workers=1, threads=1, family="sync")


async def _capture(facts: CaptureFacts, stack: str, level: int, seconds: float) -> EvidenceWindow:
    f = FrameShare(HOSTILE, "app.py", 31, 97, 0.97, ThreadState.BLOCKED)
    return EvidenceWindow(
        stack=stack, level=level, started=0.0, seconds=seconds, sampled=True, samples=100,
        threads=1, states={ThreadState.BLOCKED.value: 97, ThreadState.ON_CPU.value: 3},
        frames=(f,), queue=QueueEvidence(90, 60.0, 2048),
        collapsed={f"app.py:{HOSTILE}": 97, "app.py:<module>": 3},
    )  # fmt: skip


def _namer(w: EvidenceWindow, facts: CaptureFacts) -> Cause:
    f = w.frames[0]
    return Cause(
        CauseKind.BLOCKING_WAIT,
        f"1 worker: 97 % of samples asleep in {f.where()}",
        f,
        "more threads, or an async server",
    )


async def _broken(race: Race, mid: str, steps: int = 60) -> None:
    for _ in range(steps):
        await race.advance(1)
        view = race.session.view()
        pane = next(p for p in view.panes if p.id == mid)
        if pane.cause.startswith("why: blocking wait"):
            return
    raise AssertionError(f"{mid}: no cause shown: {pane.judgment}, {pane.cause!r}")


async def test_the_cause_shows_under_the_verdict_and_w_opens_the_evidence(tmp_path):
    session = synthetic_session()
    session.core.evidence = EvidenceKeeper(capture=_capture, namer=_namer, facts=_facts)
    async for race in open_race(plan(("gunicorn-sync", "uvicorn"), concurrency=1), session):
        await race.advance(12)
        # before the load reaches it: one worker, its service time: the knee predicted
        sync = next(p for p in race.session.view().panes if p.id == "gunicorn-sync")
        assert sync.knee is not None and sync.knee.servers == 1
        assert "queueing expected from" in sync.knee_text and "(c≈1)" in sync.knee_text
        # …and on the pane's own req/s chart, before the slider gets there
        await race.advance(4)
        spark = race.screen.query_one("#pane-gunicorn-sync #qps-spark", ScaledSparkline)
        assert spark.mark == round(sync.knee.rate)
        assert f"◇ knee ~{fmt_rate(sync.knee.rate)}" in race.text("#pane-gunicorn-sync #qps-spark")
        assert race.screen.query_one("#pane-uvicorn #qps-spark", ScaledSparkline).mark is None
        await race.session.set_level(200)
        await _broken(race, "gunicorn-sync")
        await race.advance(2)
        shown = race.text("#pane-gunicorn-sync #annotation")
        # the row fits the cause to the pane's width (tui/fit.py: a clause without a
        # figure, the kind's name, goes first); the whole line is the pane's cause
        assert shown.startswith("why: ") and "1 worker: 97 % of samples asleep in " in shown
        full = next(p for p in race.session.view().panes if p.id == "gunicorn-sync").cause
        assert full.startswith("why: blocking wait: 1 worker: 97 % of samples asleep in ")
        assert HOSTILE in shown  # plain text: the markup in the name is not applied
        # a stack with nothing to look at shows no cause, and no knee
        uv = next(p for p in race.session.view().panes if p.id == "uvicorn")
        assert uv.cause == "" and uv.knee is None
        # w: the focused stack's evidence
        race.screen.query_one("#pane-gunicorn-sync", StackPane).focus()
        await race.pilot.pause()
        await race.pilot.press("w")
        await race.pilot.pause()
        screen = race.app.screen
        assert isinstance(screen, EvidenceScreen)
        text = screen.text
        assert "cause: blocking wait" in text
        assert f"97%  {HOSTILE} (app.py:31)  blocked in a call" in text
        assert "accept queue: up to 90" in text
        # e: its flame graph, into the screenshot directory, the names escaped for SVG
        race.app.screenshot_dir = tmp_path
        await race.pilot.press("e")
        await race.pilot.pause()
        assert screen.exported == tmp_path / "flame-gunicorn-sync-200.svg"
        svg = (tmp_path / "flame-gunicorn-sync-200.svg").read_text()
        assert svg.startswith("<?xml") and "&lt;module&gt;" in svg and "<module>" not in svg
        await race.pilot.press("escape")
        await race.pilot.pause()
        assert race.app.screen is race.screen
        # the t summary carries the cause and the knee
        rows = {r.id: r for r in race.session.summary()}
        assert rows["gunicorn-sync"].cause.startswith("blocking wait: 1 worker")
        assert rows["gunicorn-sync"].knee.startswith("predicted: 1 worker")


async def test_w_on_a_stack_with_nothing_to_look_at_says_so():
    async for race in open_race(plan(("uvicorn",))):
        await race.advance(4)
        race.screen.query_one("#pane-uvicorn", StackPane).focus()
        await race.pilot.pause()
        await race.pilot.press("w")
        await race.pilot.pause()
        screen = race.app.screen
        assert isinstance(screen, EvidenceScreen)
        assert screen.text.startswith("no evidence: nothing of this server can be looked at")
