"""Judgments on recorded races: each case of issue 35, replayed through the session,
the level log, the keeper and the rules the live app runs (race/replay.py), no servers.

The races (tests/unit/races/, recorded with `stackrace … --record FILE`, trimmed of
their histograms) ran on the project's 2-core machine with other work running:
- sync_c500_go: `--stacks gunicorn-sync,uvicorn --workload io -c 500 --go`;
- sync_c10_climb_to_c500: the same from `-c 10`, then `+` five times, 4 s apart;
- go_c1000_engine_starved: `--stacks go-nethttp,uvicorn --workload hello -c 1000 --go`
  beside a busy loop pinned to the engines' core (`taskset -c 1 nice -n -5`);
- uwsgi_http11_c10: `--stacks uwsgi-http11,uwsgi --workload hello -c 10 --go`;
- sync_c200_timeouts: `--stacks gunicorn-sync,uvicorn --workload io --io-ms 100 -c 200
  --timeout 3 --go`;
- c10_404: `--stacks uvicorn,gunicorn-sync --workload hello --path /nonexistent -c 10 --go`.

Each test states what a pane said of them before (a green tick over a drowning server,
QUEUEING for an engine's limit, "no failures" over 404s) and what must hold instead.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from stackrace.race.live.replay import ReplayPlayer
from stackrace.race.live.view import PaneView, SessionView
from stackrace.race.playback.recording import load_recording
from stackrace.report.slo import Slo
from stackrace.rules.breaking import StepResult
from stackrace.rules.level import (
    AT_FULL_CPU,
    BROKEN,
    CORE_LIMITED,
    ENGINE_LIMITED,
    FAILING,
    KEEPING_UP,
    QUEUEING,
    STARVING,
    WEDGED,
    Evidence,
    judge,
)
from stackrace.tui.pane_text import shown_window

RACES = Path(__file__).parent / "races"


async def replay(
    name: str, until: float, step: float = 0.25
) -> AsyncIterator[tuple[float, SessionView]]:
    """The race's view at every `step` seconds up to `until`, as the app draws it."""
    player = ReplayPlayer(load_recording(RACES / f"{name}.jsonl.gz"))
    await player.start()
    t = 0.0
    while t < min(until, player.duration):
        t += step
        await player.seek(t)
        yield t, player.session.view()


def pane(view: SessionView, mid: str) -> PaneView:
    return next(p for p in view.panes if p.id == mid)


def one_story(p: PaneView) -> None:
    """The judgment's figures are the pane's own: the same window, the same goodput
    and p99, failures the judgment counts are in the failures the pane shows."""
    j = p.judgment
    assert j is not None
    w = shown_window(p)
    assert w is not None
    if p.target is not None and w is p.target.total:
        assert j.goodput == w.goodput
        assert j.p99_us == (w.latency.p99 if w.latency.count else None)
        assert j.failed <= sum(w.failures.values())
    if j.state in (FAILING, WEDGED):
        assert sum(w.failures.values()) > 0 or j.state == WEDGED


async def test_started_at_c500_the_sync_worker_queues_within_seconds_and_never_ticks():
    """Before: "✓ no failures at c=500 · no lower level to compare" above p50 5.6 s and
    500 waiting. Now: QUEUEING as soon as the level is judged, with the wait and the
    service time, and never green; uvicorn beside it keeps its answers on time with its
    CPU spent (at full cpu): no tick anywhere on screen."""
    first = None
    async for t, view in replay("sync_c500_go", 10.0):
        sync = pane(view, "gunicorn-sync")
        if sync.judgment is None:
            continue
        assert not sync.judgment.green, (t, sync.judgment)
        if sync.judgment.state == QUEUEING and first is None:
            first = t
        if sync.judgment.state != "measuring":
            one_story(sync)
    assert first is not None and first <= 3.0, first  # judged within a second of figures
    sync, uvi = pane(view, "gunicorn-sync"), pane(view, "uvicorn")
    assert sync.verdict is not None and sync.verdict.kind == QUEUEING
    assert sync.proof.startswith("500 wait ~5.") and "; one takes ~19 ms (its fastest" in sync.proof
    assert sync.annotation.startswith("≈ 500 requests queued, each waits ~5.")
    assert uvi.judgment is not None and uvi.judgment.state == AT_FULL_CPU and uvi.verdict is None
    assert not uvi.judgment.green and "no room for more load" in uvi.judgment.why


async def test_the_same_state_at_c500_whether_started_there_or_climbed_there():
    """Before: climbing from c=10 said QUEUEING at c=500, starting there said ✓. The
    truth does not depend on the path: sync queues at c=500 either way, and at c=10
    already (ten clients, one worker: each waits ten service times); uvicorn is never
    blamed (in the climb its engine waited for a core 26 % of the time: the figures
    are then not judged, and it is never called broken; with its CPU spent it is at
    full cpu, not green)."""
    direct = {}
    async for _t, view in replay("sync_c500_go", 10.0, step=1.0):
        direct = {p.id: p.judgment.state for p in view.panes if p.judgment}
    climbed: dict[int, dict[str, str]] = {}
    async for _t, view in replay("sync_c10_climb_to_c500", 40.0, step=0.5):
        for p in view.panes:
            if p.judgment is not None and p.judgment.state != "measuring":
                climbed.setdefault(p.judgment.level, {})[p.id] = p.judgment.state
    assert sorted(climbed) == [10, 20, 50, 100, 200, 500]
    assert direct["gunicorn-sync"] == climbed[500]["gunicorn-sync"] == QUEUEING
    assert all(states["gunicorn-sync"] == QUEUEING for states in climbed.values())
    assert direct["uvicorn"] == AT_FULL_CPU  # on time, its CPU spent: no tick
    assert {s["uvicorn"] for s in climbed.values()} <= {KEEPING_UP, AT_FULL_CPU, ENGINE_LIMITED}


async def test_an_engine_starved_of_its_core_is_the_limit_and_no_server_is_blamed():
    """Go net/http at c=1,000 beside a busy loop on the engines' core: its engine ran
    16 % and waited 52 % for the core, Go itself used 19 % of its own. Before: Go
    "✓ no failures" beside "ENGINE-LIMITED" (and QUEUEING "· 1,000 waiting" when a lower
    level was measured), the summary "not reached" or "broke at c=…". Now: limited by
    the engine, no breaking point for any server, and the summary says why the level
    was not judged."""
    player = ReplayPlayer(load_recording(RACES / "go_c1000_engine_starved.jsonl.gz"))
    await player.start()
    seen = set()
    t = 0.0
    while t < player.duration:
        t += 0.5
        await player.seek(t)
        go = pane(player.session.view(), "go-nethttp")
        if go.judgment is not None and go.judgment.state != "measuring":
            seen.add(go.judgment.state)
            assert go.verdict is None and not go.judgment.green
    assert seen == {ENGINE_LIMITED}
    assert go.proof.startswith("its engine waited for a core 5")
    assert go.annotation.startswith("the engine, not the server, limits these figures")
    from stackrace.race.live.summary import unbroken_text

    rows = {r.id: r for r in player.session.summary()}
    # no server named broken at that level, and the summary says why
    assert rows["go-nethttp"].breaking is None and rows["uvicorn"].breaking is None
    assert unbroken_text(rows["go-nethttp"]).startswith(
        "not judged at c=1,000: the engine was the limit (its engine waited for a core"
    )
    # uvicorn beside it waited for its shared core 80 % of the time it wanted it (and
    # left clients unread meanwhile): not judged either
    assert unbroken_text(rows["uvicorn"]).startswith("not judged at c=1,000: a busy core")


async def test_one_keepalive_worker_starving_nine_clients_is_starving_never_holding():
    """uWSGI's native socket, one worker, c=10: one client served thousands of times a
    second, nine without an answer until their timeout. Before: "✓ holding" at times.
    Now: STARVING from its first judgment on, never green; its router twin keeps up."""
    states = set()
    async for _t, view in replay("uwsgi_http11_c10", 8.0):
        native = pane(view, "uwsgi-http11")
        if native.judgment is not None and native.judgment.state != "measuring":
            states.add(native.judgment.state)
            one_story(native)
    assert states == {STARVING}
    assert "clients' time unanswered" in native.annotation
    # the same worker behind the router serves every client in turn; it waited for the
    # core the two share (full) most of the time: its figures are a share, never broken
    router = pane(view, "uwsgi")
    assert router.judgment is not None and router.judgment.state == CORE_LIMITED
    # its first second of waits, under the starving rule's 5 % of the clients' time
    # ("✓ holding" before): a request that waited ten thousand times what one takes is
    # never green
    assert native.target is not None
    w = msgspec.structs.replace(native.target.total, starved_share=0.04)
    early = judge(Evidence(StepResult(10, w)))
    assert early.state == QUEUEING and early.why.startswith("a request has waited ")


async def test_every_request_that_ends_timing_out_is_failing_at_once():
    """gunicorn sync at c=200 on a 100 ms wait with a 3 s timeout: after the first ~30
    answers every request that ends is a timeout. Before: QUEUEING for 11 s at 0 req/s
    while timeouts piled up, and "failed none yet" under "FAILING". Now: FAILING within
    a second and a half of the first timeout (then WEDGED: nothing answered for 5 s),
    and the failures shown are the ones judged."""
    first_timeout = failing = None
    async for t, view in replay("sync_c200_timeouts", 8.0):
        sync = pane(view, "gunicorn-sync")
        if sync.target is not None and sync.target.total.failures.get("timeout"):
            first_timeout = first_timeout or t
        j = sync.judgment
        assert j is None or not j.green, (t, j)  # 200 waiting 21 s each is never a tick
        if j is not None and j.state in (FAILING, WEDGED):
            failing = failing or t
            one_story(sync)
            assert sync.verdict is not None and sync.verdict.kind == j.state
    assert first_timeout is not None and failing is not None
    assert failing - first_timeout <= 1.5, (first_timeout, failing)
    assert "timed out" in sync.proof or sync.proof.startswith("no answer for")


async def test_404s_are_no_throughput_and_no_slo_is_met_on_them():
    """Every answer a 404: before, req/s counted them (bench's column said 5,180), the
    pane's verdict was FAILING but `load --slo 'p99<50ms'` said "SLO met". Now goodput
    is 0 everywhere, the state is FAILING, and an SLO naming only a latency misses on
    its failure budget."""
    views = [view async for _t, view in replay("c10_404", 6.0)]
    for p in views[-1].panes:
        assert p.judgment is not None and p.judgment.state == FAILING, p.judgment
        assert p.judgment.goodput == 0.0 and "HTTP 404" in p.proof
        assert p.target is not None
        w = p.target.total
        assert w.requests > 100 and w.rps > 0 and w.goodput == 0.0
        verdict = Slo.parse("p99<50ms").judge_window(w)
        assert not verdict.meets and "failures 100.00% ≥ 1 %" in verdict.why


@pytest.mark.parametrize("levels", ["5,5", "10,5", "1,10,10,100"])
def test_levels_given_twice_or_out_of_order_are_refused(levels: str) -> None:
    """`bench --concurrency 5,5` once judged a level against itself ("queueing at 5,
    latency ×1.1"): the parser behind --concurrency, presets and run files refuses it."""
    from stackrace.settings.parsers import OptionValueError, positive_int_list

    with pytest.raises(OptionValueError, match="must rise level by level"):
        positive_int_list(levels)
    assert positive_int_list("1,10,100") == [1, 10, 100]


def test_no_broken_state_is_green() -> None:
    from stackrace.rules.level import LABELS, Judgment

    for state in BROKEN:
        assert not Judgment(1, state, "", 0.0, None, 0).green and state in LABELS
