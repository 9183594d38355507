"""The engine processes as the driver holds them, what they reply, and what that adds
up to.

Each process is an `EngineProc`: its link (local child or remote, engine/link.py), the
replies its reader queues, the targets it carries, and its latest gauges and counts of
each. A tick asks every process for a report (engine/client.py) and `gather`s the
replies within a bounded wait, so one silent process never holds the others' figures
back; `losses` tells the late from the lost (its link ended, or it has been silent
longer than allowed); `merge` adds the replies into each target's figures
(engine/aggregate.py) exactly, a late process's last gauges carried; `abandon` counts
what a lost one had in flight. `by_host` is each host's share of a target's figures.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass

from stackrace.engine.aggregate import TargetAggregate
from stackrace.engine.channel import (
    Command,
    ErrorMsg,
    Ready,
    ReportMsg,
    Spent,
    Stop,
    TargetReport,
)
from stackrace.engine.link import EngineLink
from stackrace.engine.model import LostEngine

# How long a tick waits for the processes' reports: far above a healthy reply (a pipe or
# a Ray call, milliseconds), so only a late process is left out of a tick.
TICK_WAIT = 1.0
FINAL_WAIT = 5.0  # how long stop() waits for each process's final report


@dataclass
class HostShare:
    """One host's share of a target's figures (Engine.by_host): counts as its engine
    processes reported them; `waiting` as of their latest report (0 once lost)."""

    sent: int = 0
    requests: int = 0
    ok: int = 0
    failed: int = 0
    waiting: int = 0


class EngineProc:
    """One engine process: its link, its replies, the targets it carries."""

    def __init__(self, index: int, link: EngineLink) -> None:
        self.index = index
        self.link = link
        self.nofile = 0
        self.ready: asyncio.Future[Ready] = asyncio.get_running_loop().create_future()
        self.reports: asyncio.Queue[ReportMsg] = asyncio.Queue()
        self.errors: list[str] = []
        self.reader: asyncio.Task[None] | None = None
        self.targets: set[str] = set()
        self.exited = False
        self.last_heard = time.monotonic()  # when its link last delivered a message
        self.last_error = ""  # what its link said when it failed
        self.gauges: dict[str, TargetReport] = {}  # its latest report of each target
        # per target: [sent, answered, ok, failed] it reported (its host's share)
        self.counts: dict[str, list[int]] = {}
        self.lost = False
        self.spent: set[str] = set()  # targets whose budget it said spent (`Spent`)
        self.on_spent: Callable[[EngineProc, str], None] = lambda p, target_id: None

    def send(self, cmd: Command) -> None:
        self.link.send(cmd)

    @property
    def alive(self) -> bool:
        return not self.exited and self.link.alive

    async def read(self, errors: list[str], failed: type[Exception]) -> None:
        """The process's reader: its link's messages into `reports` (and `ready`, and
        `errors`, the engine's list too) until the link ends; then `failed` if it never
        said Ready, and a closing report, so no wait for it outlasts it."""
        async for msg in self.link.messages():
            self.last_heard = time.monotonic()
            if isinstance(msg, str):
                self.last_error = msg
                errors.append(f"engine {self.index}: {msg}")
            elif isinstance(msg, ReportMsg):
                self.reports.put_nowait(msg)
            elif isinstance(msg, Ready):
                if not self.ready.done():
                    self.ready.set_result(msg)
            elif isinstance(msg, ErrorMsg):
                self.errors.append(msg.message)
                errors.append(msg.message)
            elif isinstance(msg, Spent):
                self.spent.add(msg.id)
                self.on_spent(self, msg.id)
        self.exited = True
        if not self.ready.done():
            # what its link said of the end (a remote engine's exit status), when it did
            why = f" ({self.last_error})" if self.last_error else ""
            self.ready.set_exception(failed(f"engine process {self.index} exited at start{why}"))
        self.reports.put_nowait(ReportMsg(seq=-1, seconds=0.0, cpu=0.0, targets=[], final=True))

    async def take(self, deadline: float, final: bool) -> list[ReportMsg]:
        """A tick: one reply, and any earlier ones still queued (a late process's). A
        stop: everything up to the process's final report."""
        out: list[ReportMsg] = []
        while True:
            if out and not final:
                try:
                    out.append(self.reports.get_nowait())
                    continue
                except asyncio.QueueEmpty:
                    return out
            # `exited`, not `alive`: a process that has exited may still have lines in
            # its pipe (its final report among them) that the reader has not taken yet;
            # once the reader has taken them all, `exited` is set (and a closing report
            # queued, so the wait below never outlasts it)
            if self.exited and self.reports.empty():
                return out
            left = deadline - time.monotonic()
            if left <= 0:
                return out
            try:
                async with asyncio.timeout(left):
                    msg = await self.reports.get()
            except TimeoutError:
                return out
            out.append(msg)
            if final and msg.final:
                return out

    def let_go(self) -> None:
        """A lost process: marked so, its link discarded (whatever state it is in), its
        reader stopped; nothing more of it is waited for."""
        self.lost = True
        self.exited = True
        with contextlib.suppress(Exception):
            self.link.discard()
        if self.reader is not None:
            self.reader.cancel()

    def why_lost(self, silent: str) -> str:
        if self.alive:
            return silent
        return self.last_error or "the process exited"


async def gather(procs: list[EngineProc], final: bool) -> dict[EngineProc, list[ReportMsg]]:
    """Each process's replies, waiting a bounded time: one that is late is left out
    (the caller carries its gauges, or finds it lost)."""
    deadline = time.monotonic() + (FINAL_WAIT if final else TICK_WAIT)
    got = await asyncio.gather(*(p.take(deadline, final) for p in procs))
    return dict(zip(procs, got, strict=True))


async def final_reports(
    live: list[EngineProc],
) -> tuple[dict[EngineProc, list[ReportMsg]], list[tuple[EngineProc, str]]]:
    """The stop: each live process told to stop, its replies up to its final report, and
    the processes lost (no final report within FINAL_WAIT)."""
    for p in live:
        if p.alive:
            p.send(Stop())
    got = await gather(live, final=True)
    lost = [
        (p, p.why_lost(f"no final report within {FINAL_WAIT:g}s"))
        for p in live
        if not any(r.final and r.seq >= 0 for r in got[p])
    ]
    return got, lost


def losses(
    live: list[EngineProc], got: dict[EngineProc, list[ReportMsg]], lost_after: float | None
) -> list[tuple[EngineProc, str]]:
    """The processes lost by now: their link ended, or they have been silent longer than
    `lost_after` (None: only when the link ends)."""
    now = time.monotonic()
    out = []
    for p in live:
        if p.exited:
            # whatever came before the end is merged: the reader has queued every
            # report the process sent (`alive` turns false at its exit, perhaps
            # before its last lines are read: not yet a loss)
            while not p.reports.empty():
                got[p].append(p.reports.get_nowait())
            out.append((p, p.why_lost("")))
        elif lost_after is not None and now - p.last_heard > lost_after:
            out.append((p, f"no report for {now - p.last_heard:.1f}s"))
    return out


def by_host(procs: list[EngineProc], target_id: str) -> dict[str, HostShare]:
    """What each host's engine processes reported for a target, since the start (lost
    ones included): the share of the merged figures each host sent."""
    out: dict[str, HostShare] = {}
    for p in procs:
        c = p.counts.get(target_id)
        if c is None:
            continue
        host = p.link.host
        share = out.setdefault(host, HostShare())
        share.sent += c[0]
        share.requests += c[1]
        share.ok += c[2]
        share.failed += c[3]
        last = p.gauges.get(target_id)
        if last is not None and not p.lost:
            share.waiting += last.waiting
    return out


def merge(
    targets: dict[str, TargetAggregate],
    real: dict[EngineProc, list[ReportMsg]],
    gone: set[EngineProc],
) -> None:
    """A tick's replies into the targets' figures, each target's interval begun afresh:
    every report's counts, the gauges of each process's latest report only (a process
    that sent several at once: the others are past), none from a process `gone` (what it
    had in flight is abandoned: `abandon`), and a late process's last gauges carried (its
    requests are still in flight). Each process keeps its host's share (`by_host`)."""
    for t in targets.values():
        t.begin_interval()
    for p, rs in real.items():
        if not rs:
            continue
        secs = sum(r.seconds for r in rs)
        cpu = sum(r.cpu for r in rs)
        wait = sum(r.wait for r in rs)
        runs = sum(r.runs for r in rs)
        for k, r in enumerate(rs):
            # a lost process's reports bring their counts, never gauges: what it had
            # in flight is abandoned
            latest = k == len(rs) - 1 and p not in gone
            for tr in r.targets:
                p.gauges[tr.id] = tr
                c = p.counts.setdefault(tr.id, [0, 0, 0, 0])
                c[0] += tr.sent
                c[1] += tr.requests
                c[2] += tr.ok
                c[3] += sum(tr.failures.values())
                agg = targets.get(tr.id)
                if agg is not None:
                    agg.add_report(
                        tr,
                        secs if latest else 0.0,
                        cpu if latest else 0.0,
                        latest,
                        wait if latest else 0.0,
                        runs if latest else 0,
                    )
    for p, rs in real.items():
        if not rs and p not in gone:
            for tid in p.targets:  # late: its requests are still in flight
                agg, last = targets.get(tid), p.gauges.get(tid)
                if agg is not None and last is not None:
                    agg.carry(last)


def abandon(p: EngineProc, targets: dict[str, TargetAggregate], why: str, at: float) -> LostEngine:
    """What a lost process costs, in the interval being published: what it had in flight
    at its last report is `abandoned` (no answer will ever reach us), in its targets'
    figures and its host's share; and the loss as it is kept (`at`: seconds into the
    run)."""
    abandoned: dict[str, int] = {}
    for tid in sorted(p.targets):
        agg, last = targets.get(tid), p.gauges.get(tid)
        n = last.waiting if last is not None else 0
        if agg is not None:
            agg.abandon(n)
        abandoned[tid] = n
        p.counts.setdefault(tid, [0, 0, 0, 0])[3] += n
    return LostEngine(
        host=p.link.host,
        where=p.link.description,
        at=at,
        wall=time.time(),
        why=why,
        abandoned=abandoned,
    )
