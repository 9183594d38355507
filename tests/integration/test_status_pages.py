"""Status pages turned on by a stack's definition (stacks.toml `status`): the shipped
stacks start with their page on a loopback port of its own, the evidence keeper hands
its URL to the capture, and a window captured under load carries the page's figures —
PHP-FPM's active and idle children and listen queue, uWSGI's busy workers and listen
queue — in the lines `w`, bench and the report show.

Real stacks from the real stacks.toml, started by the launcher, loaded by `stackrace
load` as a user runs it, captured by the keeper the race core uses. The load's own port
must not serve the page: the page is the server's, never one of the workload's paths.
"""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from stackrace.race.core.evidence_keeper import EvidenceKeeper, capture_facts
from stackrace.race.core.members import Member
from stackrace.race.core.stack_source import LaunchedStack
from stackrace.report.schema import Why
from stackrace.report.why import evidence_lines
from stackrace.stacks.launcher import Launcher
from tests.conftest_stacks import real_stack
from tests.integration.test_why_catalogue import WARM_S, loaded

WINDOW_S = 2.0


async def _launched(stack_ref: str, launcher: Launcher) -> LaunchedStack:
    handle = LaunchedStack(real_stack(stack_ref), launcher)
    for _ in range(600):  # up to a minute on a busy machine
        if handle.running is not None or handle.error is not None:
            break
        await asyncio.sleep(0.1)
    assert handle.running is not None, handle.error
    return handle


async def _window(handle: LaunchedStack, level: int, path: str) -> Why:
    """The keeper's window of the stack at `level`, captured while `path` is loaded."""
    keeper = EvidenceKeeper(seconds=WINDOW_S)
    member = Member(handle)
    rs = handle.running
    assert rs is not None
    async with loaded(rs.port, level, WARM_S + WINDOW_S + 3, path=path):
        assert keeper.want(member, level)
        await keeper.settle(timeout=30)
    why = keeper.at(member.id, level)
    assert why is not None, keeper.failed
    return why


def _not_on_the_load_port(port: int, path: str) -> None:
    """The page is not reachable where the load goes: the load's port answers 404."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with pytest.raises(urllib.error.HTTPError) as got:
        opener.open(f"http://127.0.0.1:{port}{path}", timeout=5).read()
    assert got.value.code == 404


async def test_php_fpm_status_page_figures_are_in_the_window(tmp_path: Path) -> None:
    """php-fpm-nginx: FPM's own page through nginx's loopback status port; under a load
    past its two children, the window says how many were active and the listen queue."""
    async with Launcher(tmp_path) as launcher:
        handle = await _launched("php-fpm-nginx:workers=2", launcher)
        rs = handle.running
        assert rs is not None and rs.status_url is not None
        assert rs.status_url.startswith("http://127.0.0.1:") and f":{rs.port}/" not in rs.status_url
        facts = capture_facts(Member(handle))
        assert facts is not None and facts.target.status_url == rs.status_url
        _not_on_the_load_port(rs.port, "/fpm-status?json")
        why = await _window(handle, 16, "/io?ms=50")
    w = why.window
    assert w.status_source == "php-fpm status", (w.status_source, w.status)
    # 16 clients on 2 children that each sleep 50 ms: both busy when the page was read
    # (FPM's own status pool answers it, so the page is never one of the busy ones)
    assert w.status["total processes"] == 2, w.status
    assert w.status["active processes"] >= 1, w.status
    assert "listen queue" in w.status and "idle processes" in w.status, w.status
    line = next(x for x in evidence_lines(why) if x.startswith("php-fpm status:"))
    assert "active processes" in line and "listen queue" in line, line
    print(line)


async def test_uwsgi_stats_figures_are_in_the_window(tmp_path: Path) -> None:
    """uwsgi: its stats server (`--stats … --stats-http`) on a loopback port of its own;
    under load past its one worker, the window says the worker was busy."""
    async with Launcher(tmp_path) as launcher:
        handle = await _launched("uwsgi", launcher)
        rs = handle.running
        assert rs is not None and rs.status_url is not None
        assert f":{rs.port}" not in rs.status_url
        why = await _window(handle, 8, "/io?ms=50")
    w = why.window
    assert w.status_source == "uwsgi stats", (w.status_source, w.status)
    assert w.status["workers"] == 1 and "listen_queue" in w.status, w.status
    line = next(x for x in evidence_lines(why) if x.startswith("uwsgi stats:"))
    assert "busy workers" in line and "listen_queue" in line, line
    print(line)
