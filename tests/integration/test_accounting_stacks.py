"""The accounting on real stacks: gunicorn sync and uWSGI, one worker each.

These are the servers whose queues the engine used to hide: gunicorn's sync worker
answers one request at a time and makes every client reconnect; uWSGI's single worker on
its native socket (uwsgi-http11) serves one keep-alive connection until it closes, so one
connection could take a whole request budget while the others waited unseen, and with
no budget the others starve.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from stackrace.report.schema import loads
from stackrace.stacks.availability import availability
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.variants import resolve
from tests.helpers import run_cli

pytestmark = pytest.mark.slow


def needs(name: str) -> None:
    avail = availability(resolve(name, load_stacks()))
    if not avail.available:
        pytest.skip(f"{name}: {avail.reason}")


def bench(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "run.json"
    return run_cli("bench", *args, "--json", str(out), timeout=240), out


@pytest.fixture(scope="module")
def gunicorn_sync_pair(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One bench for two tests: gunicorn-sync, then gunicorn-sync:workers=1, one at a time.
    The first stack's levels are those of a bench of it alone (the rotation's first
    stack starts at the first level, on cores nothing else loads): the queue test reads
    them; the rotation test reads both stacks' first level."""
    needs("gunicorn-sync")
    # ~90 answers a second; 300 clients wait ~3.3 s each, longer than the 1.5 s level
    return bench(
        tmp_path_factory.mktemp("gunicorn-sync-pair"),
        "--stacks", "gunicorn-sync,gunicorn-sync:workers=1", "--isolation", "rotate",
        "--workload", "io", "--io-ms", "10", "--concurrency", "1,300",
        "--duration", "1.5s", "--warmup", "0.5s",
    )  # fmt: skip


def test_gunicorn_sync_queue_is_counted_and_judged(
    gunicorn_sync_pair: tuple[subprocess.CompletedProcess[str], Path],
):
    r, out = gunicorn_sync_pair
    assert r.returncode == 0, r.stderr
    st = loads(out.read_bytes()).stacks[0]
    high = st.levels[1]
    for lv in st.levels:
        w = lv.window
        assert w.sent == w.requests + w.lost + w.waiting, w
    w = high.window
    assert w.waiting >= 250 and w.stale > 50, w  # clients that got no answer in the level
    assert high.little is not None and not high.little.ok
    assert "waited without an answer" in high.little.reason
    # the rule sees the queue: the level where clients wait without an answer is queueing
    # (waiting is not failing: nothing was refused, reset, timed out or answered wrong)
    assert st.breaking_point == 300 and st.breaking_kind == "queueing", st.breaking_reason
    # the wait and the service time, the fastest answer (~10 ms), named with its level
    # when another level gave it (at c=1 on a quiet core; beside a 50 % burner on the
    # stack's core, the fastest came at c=300 itself: "one takes ~11 ms (its fastest
    # answer)")
    assert st.breaking_reason.startswith("300 wait ~"), st.breaking_reason
    assert re.search(
        r"one takes ~1\d(\.\d)? ms \(its fastest answer(, at c=1)?\)", st.breaking_reason
    ), st.breaking_reason
    assert "DATABASE" not in r.stderr and "waiting" in r.stderr


def test_uwsgi_one_worker_budget_is_spread_over_every_connection(tmp_path: Path):
    needs("uwsgi-http11")
    r, out = bench(
        tmp_path,
        "--stacks", "uwsgi-http11", "--workload", "io", "--io-ms", "10",
        "--concurrency", "30", "--requests", "300", "--duration", "0.5s", "--warmup", "0.3s",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    lv = loads(out.read_bytes()).stacks[0].levels[0]
    w = lv.window
    assert w.requests + w.lost == 300 and w.waiting == 0, w
    assert w.sent == w.requests + w.lost + w.waiting
    # 300 requests of 10 ms, one at a time: ~3 s, not cut at --duration
    assert w.span_seconds is not None and w.span_seconds > 2.5, w.span_seconds
    # each connection had its share, so each waited for the others: mean latency is the
    # queue's (about 30 × 10 ms), not the 10 ms one connection alone would see
    assert w.latency.mean > 100_000, w.latency
    assert lv.little is None or lv.little.ok, lv.little


def test_a_worker_held_by_one_keepalive_connection_is_starving_not_healthy(tmp_path: Path):
    """uWSGI's native socket, one worker, c=4: one client gets every answer in ~0.1 ms
    and three get nothing until their timeout. Under 1 % of the attempts fail, so before
    the starving rule the verdict was "no breaking point". The same worker behind
    uWSGI's HTTP router (the shipped `uwsgi`) serves all four in turn: no verdict."""
    needs("uwsgi-http11")
    r, out = bench(
        tmp_path,
        "--stacks", "uwsgi-http11,uwsgi", "--concurrency", "4",
        "--duration", "3s", "--warmup", "0.5s", "--no-progress",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    native, router = loads(out.read_bytes()).stacks
    w = native.levels[0].window
    assert w.requests > 1_000 and w.failed / w.requests < 0.01, w  # under the failing rule
    assert w.starved_share > 0.3 and w.starved_wait_us > 2_000_000, w
    assert native.breaking_kind == "starving" and native.breaking_point == 4
    assert "of 4 clients' time: no answer for up to " in native.breaking_reason
    assert "uwsgi-http11: starving at c=4: " in r.stdout
    assert router.breaking_kind == "" and router.levels[0].window.starved_share == 0.0


def test_rotation_starts_each_stack_at_the_first_level_not_the_last(
    gunicorn_sync_pair: tuple[subprocess.CompletedProcess[str], Path],
):
    """`--isolation rotate`: each stack starts loading once it is ready, at the core's
    level. That was the previous stack's last level (c=300), so the second one-worker
    server got 300 connections with their requests before its c=1 level lowered them to
    one, and served those closed connections' requests first (3 s at 10 ms each): its
    c=1 level answered nothing, and was reported as "no breaking point"."""
    r, out = gunicorn_sync_pair
    assert r.returncode == 0, r.stderr
    first, second = loads(out.read_bytes()).stacks
    for st in (first, second):
        low = st.levels[0].window
        assert st.levels[0].concurrency == 1
        # one client, one worker, 10 ms a request: ~90 answers a second, each in ~10 ms
        assert low.requests > 60 and low.latency.p99 < 100_000, (st.name, low)
