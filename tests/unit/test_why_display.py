"""Why it broke, shown: the cause line, the evidence, the JSON and Markdown, the flame
files (report/why.py, report/schema.py `Why`) and the keeper that starts windows
(race/core/evidence_keeper.py), on windows built here (no process is sampled)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import jsonschema
import msgspec
import pytest

from stackrace.evidence.model import (
    Cause,
    CauseKind,
    EvidenceWindow,
    FrameShare,
    ProcessEvidence,
    QueueEvidence,
    ThreadState,
)
from stackrace.race.core.evidence_keeper import CaptureFacts, EvidenceKeeper
from stackrace.race.core.members import Member
from stackrace.report import tables
from stackrace.report.judged import breaking
from stackrace.report.schema import Why, dumps, json_schema, loads
from stackrace.report.why import (
    cause_line,
    evidence_lines,
    flame_files,
    process_cpu,
    why_at,
    write_flames,
)
from tests.unit.test_report import make_run

HOSTILE = "<script>x</script>|*bold*_[link](http://e)\x1b[31m"


def window(
    stack: str = "sync", level: int = 100, function: str = "wait_for_backend"
) -> EvidenceWindow:
    f = FrameShare(function, "app.py", 31, 97, 0.97, ThreadState.BLOCKED)
    return EvidenceWindow(
        stack=stack, level=level, started=12.0, seconds=3.0, sampled=True,
        samples=100, threads=1, states={"blocked in a call": 97, "on CPU": 3},
        frames=(f,), processes=(ProcessEvidence(4242, "gunicorn", 1, 0.04, 0.0, "", "recvfrom"),),
        queue=QueueEvidence(480, 300.0, 2048), collapsed={"app.py:app;app.py:" + function: 97},
    )  # fmt: skip


def why(w: EvidenceWindow | None = None) -> Why:
    w = w or window()
    f = w.frames[0]
    sentence = f"1 worker: 97 % of samples asleep in {f.where()}; "
    sentence += "480 connections in the accept queue"
    return Why(Cause(CauseKind.BLOCKING_WAIT, sentence, f, "more threads, or an async server"), w)


def test_the_cause_line_names_the_kind_the_proof_and_the_knob():
    assert cause_line(why()) == (
        "blocking wait: 1 worker: 97 % of samples asleep in wait_for_backend (app.py:31); "
        "480 connections in the accept queue → more threads, or an async server"
    )
    assert "→" not in cause_line(why(), advice=False)


def test_the_evidence_shows_states_frames_queue_and_processes():
    text = "\n".join(evidence_lines(why()))
    assert "states: blocked in a call 97%, on CPU 3%" in text
    assert "97%  wait_for_backend (app.py:31)  blocked in a call" in text
    assert "accept queue: up to 480, ~300 on average (limit 2,048)" in text
    assert "pid 4242 gunicorn: 1 thread(s), CPU 4%" in text and "in recvfrom" in text
    unsampled = replace(window(), sampled=False, not_sampled="started with --url: …")
    assert "workers not sampled: started with --url: …" in evidence_lines(why(unsampled))


def test_a_run_carries_the_why_per_level_through_json_and_its_schema():
    run = make_run()
    run.stacks[0].levels[1].why = why()
    data = dumps(run)
    back = loads(data)
    assert back == run
    got = back.stacks[0].levels[1].why
    assert got is not None and got.cause.kind is CauseKind.BLOCKING_WAIT
    assert got.window.collapsed == {"app.py:app;app.py:wait_for_backend": 97}
    raw = msgspec.json.decode(data)
    assert raw["stacks"][0]["levels"][1]["why"]["cause"]["kind"] == "blocking wait"
    jsonschema.validate(raw, json_schema())
    # a figure no capture gives, edited in: refused like any other
    bad = data.replace(b'"depth_max": 480', b'"depth_max": -480')
    assert bad != data
    with pytest.raises(ValueError, match="depth_max = -480"):
        loads(bad)


def test_the_breaking_line_and_markdown_carry_the_cause_escaped():
    run = make_run()
    run.stacks[0].levels[1].why = why(window(function=HOSTILE))
    broke = breaking(run.stacks[0], run)
    assert broke is not None
    line = tables.breaking_line(run.stacks[0], run)
    assert " · why: blocking wait: 1 worker" in line and "→ more threads" in line
    md = tables.markdown(run)
    assert "<script>" not in md and "&lt;script" in md and "\x1b" not in md
    assert "\x1b" not in line  # the terminal's line: no escape sequence of the app's
    assert "\\|" in md  # a cell's bar escaped by the one Markdown sink (base/printable.py)


def test_the_window_at_the_breaking_level_else_the_nearest_above():
    run = make_run()
    st = run.stacks[0]
    assert why_at(st, 100) is None
    st.levels[1].why = why()
    assert why_at(st, 100) is st.levels[1].why
    assert why_at(st, 10) is st.levels[1].why  # none at 10: the one above


def test_a_flame_graph_per_window_named_by_a_slug(tmp_path):
    run = make_run()
    run.stacks[0].name = "../../etc/x y"
    run.stacks[0].levels[1].why = why(window(function=HOSTILE))
    files = flame_files(run, str(tmp_path))
    assert len(files) == 1
    path, svg = files[0]
    assert path.startswith(str(tmp_path) + "/flame-")
    assert "/etc/" not in path.removeprefix(str(tmp_path))
    assert "<script>" not in svg and svg.startswith("<?xml")
    written, problems = write_flames(run, str(tmp_path))
    assert problems == [] and written == [path]
    assert write_flames(run, str(tmp_path / "missing"))[1] == [
        f"--flame {tmp_path / 'missing'}: not a directory"
    ]


class _Handle:
    """Enough of a member for the keeper (its facts are given by the test)."""

    def __init__(self, id: str) -> None:
        self.id = id


def _member(mid: str) -> Member:
    return Member(handle=_Handle(mid))  # type: ignore[arg-type]


async def test_the_keeper_captures_one_window_a_stack_at_a_time_and_keeps_it_by_level():
    gate = asyncio.Event()
    calls: list[tuple[str, int]] = []

    async def capture(
        facts: CaptureFacts, stack: str, level: int, seconds: float
    ) -> EvidenceWindow:
        calls.append((stack, level))
        await gate.wait()
        return window(stack, level)

    def namer(w: EvidenceWindow, facts: CaptureFacts) -> Cause:
        return why(w).cause

    from stackrace.evidence.capture import CaptureTarget

    facts = CaptureFacts(CaptureTarget(1, 8000), 1, 1, "sync")
    keeper = EvidenceKeeper(capture=capture, namer=namer, facts=lambda m: facts)
    m = _member("sync")
    assert keeper.want(m, 32) is True
    assert keeper.want(m, 64) is False  # one at a time per stack
    assert keeper.want(_member("other"), 32) is True  # another stack: its own
    await asyncio.sleep(0)
    assert keeper.capturing("sync") == 32 and keeper.at("sync", 32) is None
    gate.set()
    await keeper.settle(timeout=5)
    got = keeper.at("sync", 32)
    assert got is not None and got.window.level == 32
    assert keeper.want(m, 32) is False  # kept at this level already
    assert keeper.nearest("sync", 16) is got and keeper.latest("sync") is got
    assert calls == [("sync", 32), ("other", 32)]


async def test_close_ends_every_capture_and_starts_none_asked_meanwhile():
    """The race stops while a capture runs and the session's tick, still going, asks
    for another: close() ends the one running, starts none, and returns (it once
    raised "dictionary changed size during iteration", and the stop it was part of
    left the race's stacks running)."""
    from stackrace.evidence.capture import CaptureTarget

    keeper: EvidenceKeeper
    asked: list[bool] = []

    async def capture(
        facts: CaptureFacts, stack: str, level: int, seconds: float
    ) -> EvidenceWindow:
        try:
            await asyncio.sleep(30)
        finally:  # the tick, on its way while this capture is cancelled
            asked.append(keeper.want(_member("other"), 64))
        return window(stack, level)

    facts = CaptureFacts(CaptureTarget(1, 8000), 1, 1, "sync")
    keeper = EvidenceKeeper(capture=capture, facts=lambda m: facts)
    assert keeper.want(_member("sync"), 32)
    await asyncio.sleep(0)
    await asyncio.wait_for(keeper.close(), 5)
    assert asked == [False] and keeper.capturing("other") is None
    assert keeper.want(_member("sync"), 64) is False  # closed: nothing starts


async def test_a_failed_capture_is_one_line_never_an_exception():
    async def capture(
        facts: CaptureFacts, stack: str, level: int, seconds: float
    ) -> EvidenceWindow:
        raise OSError("py-spy: Permission denied\n(a long trace)")

    from stackrace.evidence.capture import CaptureTarget

    keeper = EvidenceKeeper(capture=capture, facts=lambda m: CaptureFacts(CaptureTarget(1, None)))
    assert keeper.want(_member("sync"), 8)
    await keeper.settle(timeout=5)
    assert keeper.failed["sync"] == "no evidence captured: py-spy: Permission denied"
    assert keeper.latest("sync") is None
    # a member with nothing to look at (a model's, a replay's): nothing starts
    assert EvidenceKeeper(facts=lambda m: None).want(_member("demo"), 8) is False
    await keeper.close()


def test_tune_measures_the_knob_the_cause_implies_first_and_still_all():
    from stackrace.race.bench.tune_search import Space, TunePlan, TuneSearch

    space = Space({"gthread": {"workers": ["1", "2", "5"], "threads": ["1", "8", "32"]}})
    search = TuneSearch(space, TunePlan(budget_s=3600, start=4), seed=1)
    before = sorted(search.queue)
    said = search.steer("blocking wait")
    assert said == (
        "the cause seen (blocking wait): configurations with more threads are measured first"
    )
    threads = [space.servers["gthread"]["threads"][p[1]] for _s, p, _ph in search.queue]
    assert threads[:3] == ["32", "32", "32"] and threads[-3:] == ["1", "1", "1"]
    assert sorted(search.queue) == before  # every point is still measured
    assert search.steer("cpu") == ""  # once per tune
    assert TuneSearch(space, TunePlan(budget_s=60), seed=1).steer("lock") == ""  # no knob


def test_the_deploy_line_says_which_cause_the_winner_removed():
    from stackrace.report.schema import CapacityProbe, CapacityResult
    from stackrace.report.why import cause_removed

    run = make_run()

    def searched(st_index: int, found: Why | None) -> None:
        lv = run.stacks[st_index].levels[1]
        lv.why = found
        probe = CapacityProbe(load=100, meets=False, why="p99", phase="bracket", answers=500,
                              enough=True, seconds=2.0, figures={}, level=lv)  # fmt: skip
        run.stacks[st_index].capacity = CapacityResult(
            slo="p99<50ms", mode="concurrency", load=10, capacity=900.0, margin=None,
            breaks_at=100, breaks_why="", stopped="", sentence="", needed_answers=100,
            precision=0.1, probes=[probe],
        )  # fmt: skip

    assert cause_removed(run, "async") == ""  # no window: nothing said
    searched(0, why())
    cpu = why(window("async"))
    cpu = Why(Cause(CauseKind.CPU, "on CPU 99 %", None, "more processes"), cpu.window)
    searched(1, cpu)
    assert cause_removed(run, "async") == (
        "it removes the blocking wait seen at sync; past its capacity it breaks on cpu"
    )
    assert cause_removed(run, "sync") == "past its capacity it still breaks on blocking wait"


def test_a_url_server_gets_the_kernels_side_and_says_why_it_is_not_sampled():
    from stackrace.race.core.evidence_keeper import capture_facts
    from stackrace.race.core.urls import UrlHandle, UrlTarget

    here = capture_facts(Member(UrlHandle(UrlTarget("http://127.0.0.1:8123/"), 1)))
    assert here is not None
    t = here.target
    assert (t.root_pid, t.port, t.sample) == (0, 8123, False)
    assert t.not_sampled.startswith("started with --url: stackrace did not start it")
    with_pid = capture_facts(Member(UrlHandle(UrlTarget("http://127.0.0.1:8123/", pid=4242), 1)))
    assert with_pid is not None and with_pid.target.root_pid == 4242 and with_pid.target.sample
    # another host: no port here, no pid: nothing to look at
    assert capture_facts(Member(UrlHandle(UrlTarget("http://10.0.0.9:80/"), 1))) is None


def test_a_process_s_cpu_and_wait_are_shares_a_room_reads():
    """Threads' CPU and waits add up past one core: said in cores, and the wait as the
    share of the time it wanted a core that it got one (never "waited 140%")."""
    assert process_cpu(0.45, 0.12) == "CPU 45%, waited for a core 12%"
    said = process_cpu(1.8, 1.2)
    assert said == "CPU 1.8 cores, got a core 60% of the time it wanted one"
    assert "140" not in process_cpu(0.6, 1.4) and "180" not in said
