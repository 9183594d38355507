"""Evidence windows of a race's members: started at a breaking point, kept by level.

    keeper = core.evidence                   # one per race core
    keeper.want("gunicorn-sync", 32)         # a verdict turned to a breaking state
    keeper.at("gunicorn-sync", 32)           # report.schema.Why, once captured
    await keeper.settle()                    # bench: every window started has ended

Every front end starts windows here — the app's live verdicts and its ramp
(race/live/session.py), bench at its breaking point (race/bench/driver.py), the capacity
search at its boundary (race/bench/capacity_driver.py) — so "at most one window per stack at
a time, kept with its level" is decided once. A window is an asyncio task that captures
for a few seconds while the load goes on (stackrace.evidence.capture) and names its
cause (stackrace.rules.cause); nothing awaits it but `settle`, so neither the UI's tick
nor a level's measurement waits for the sampler. A failed capture is one line in
`failed` (what a pane shows instead), never an exception into the race.

What a member offers the capture is decided here (`capture_facts`): a stack stackrace
launched gives its root pid, its port and its status page's URL (stacks.toml
`status`); a --url server its port (kernel-side evidence) and the --pid given, if any;
a demo or a replay's member has no process to look at.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stackrace.race.core.members import Member

if TYPE_CHECKING:
    # names for the hints alone: the evidence's model and the report's schema (~10 ms of
    # imports) are imported at the first window kept (_run), which keeps start-up fast
    # (`load` keeps none)
    from stackrace.evidence.capture import CaptureTarget  # lazy: keeps load's start-up fast
    from stackrace.evidence.model import Cause, EvidenceWindow
    from stackrace.report.schema import Why  # lazy: keeps load's start-up fast

SECONDS = 3.0  # a window's length: a few seconds of samples while the load goes on


@dataclass(frozen=True)
class CaptureFacts:
    """What the capture may look at of one member, and what its cause is named with."""

    target: CaptureTarget
    workers: int | None = None  # its pool, where stackrace knows it (stacks.toml)
    threads: int | None = None
    family: str = ""


# (facts, stack, level, seconds) → the window; the real one is stackrace.evidence.capture's
Capture = Callable[[CaptureFacts, str, int, float], Awaitable["EvidenceWindow"]]
# (window, facts) → the cause; the real one is stackrace.rules.cause's
Namer = Callable[["EvidenceWindow", CaptureFacts], "Cause"]

NOT_OURS = (
    "started with --url: stackrace did not start it, so its workers cannot be sampled "
    "(give --pid, or race it as a stack: --app or stacks.toml); the kernel's side is shown"
)


def capture_facts(m: Member) -> CaptureFacts | None:
    """What can be looked at of this member (None: nothing — a model's, a replay's)."""
    from stackrace.evidence.capture import CaptureTarget  # lazy: keeps load's start-up fast

    # lazy for start-up: stack_source brings the launcher and the database with it,
    # which `load` and a replay never use (isinstance needs the class, not an import
    # at the top)
    from stackrace.race.core.stack_source import LaunchedStack  # lazy: keeps load's start-up fast
    from stackrace.race.core.urls import UrlHandle  # lazy: keeps load's start-up fast

    h = m.handle
    if isinstance(h, LaunchedStack):
        rs = h.running
        if rs is None or not rs.root_pids:
            return None
        st = h.stack
        # every process it started (php-fpm beside nginx): each one's tree is looked at
        first, *others = rs.root_pids
        target = CaptureTarget(
            root_pid=first,
            port=rs.port,
            log_path=str(rs.log_path),
            other_roots=tuple(others),
            status_url=rs.status_url,  # the page its definition turns on (`status`)
        )
        return CaptureFacts(target, st.workers, st.threads, st.spec.family)
    if isinstance(h, UrlHandle):
        port = h.listen_port
        if h.pid is None and port is None:
            return None
        if h.pid is None:
            return CaptureFacts(CaptureTarget(0, port, sample=False, not_sampled=NOT_OURS))
        return CaptureFacts(CaptureTarget(h.pid, port))
    return None


@dataclass
class EvidenceKeeper:
    """Per member: the windows kept by level, the one capturing now, why one failed."""

    capture: Capture | None = None  # None: stackrace.evidence.capture's
    namer: Namer | None = None  # None: stackrace.rules.cause's
    seconds: float = SECONDS
    facts: Callable[[Member], CaptureFacts | None] = capture_facts
    # per member: (family, workers, threads) where it is not a stack launched here (a
    # replay's members, from the recording): what the knee is predicted from
    pools: dict[str, tuple[str, int, int]] = field(default_factory=dict)
    kept: dict[str, dict[int, Why]] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    _tasks: dict[str, tuple[int, asyncio.Task[None]]] = field(default_factory=dict)
    _closed: bool = False

    def want(self, m: Member, level: int) -> bool:
        """Start a window of `m` at `level` unless one is running for it, one is kept
        at this level already, or the race is ending (`close`): whether one started."""
        mid = m.id
        if self._closed or self.capturing(mid) or level in self.kept.get(mid, {}):
            return False
        facts = self.facts(m)
        if facts is None:
            return False
        self.failed.pop(mid, None)
        task = asyncio.ensure_future(self._run(mid, facts, level))
        self._tasks[mid] = (level, task)
        return True

    def pool(self, m: Member) -> tuple[str, int, int] | None:
        """The member's (family, workers, threads): its definition's for a stack
        launched here, else what a recording said (None: not known)."""
        from stackrace.race.core.stack_source import LaunchedStack  # lazy: keeps load's start fast

        h = m.handle
        if isinstance(h, LaunchedStack):
            return h.stack.spec.family, h.stack.workers, h.stack.threads
        facts = self.facts(m)
        if facts is not None and facts.workers is not None and facts.threads is not None:
            return facts.family, facts.workers, facts.threads
        return self.pools.get(m.id)

    def capturing(self, mid: str) -> int | None:
        """The level a window of `mid` is being captured at, or None."""
        running = self._tasks.get(mid)
        if running is None or running[1].done():
            return None
        return running[0]

    def at(self, mid: str, level: int) -> Why | None:
        return self.kept.get(mid, {}).get(level)

    def latest(self, mid: str) -> Why | None:
        """The last window captured of `mid` (its highest level first)."""
        by_level = self.kept.get(mid)
        return by_level[max(by_level)] if by_level else None

    def nearest(self, mid: str, level: int) -> Why | None:
        """The window at `level`, else the one at the closest level above it, else
        below (a live verdict's window may have come a level after it turned)."""
        by_level = self.kept.get(mid, {})
        if not by_level:
            return None
        if level in by_level:
            return by_level[level]
        above = [lv for lv in by_level if lv > level]
        return by_level[min(above) if above else max(by_level)]

    def keep(self, mid: str, why: Why) -> None:
        """A window from elsewhere (a replay's recording, a resumed run)."""
        self.kept.setdefault(mid, {})[why.window.level] = why

    async def settle(self, timeout: float | None = None) -> None:
        """Wait for every window started to end (bench, before it moves on)."""
        tasks = [t for _lv, t in self._tasks.values() if not t.done()]
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)

    async def close(self) -> None:
        """Stop every capture (the race ends: no sampler outlives it), and start none
        after: the session's tick goes on while the race stops and may judge a level
        meanwhile (a capture asked then once made this loop's dict change under it,
        and the race's stacks outlived it)."""
        self._closed = True
        running = [task for _lv, task in self._tasks.values()]
        for task in running:
            task.cancel()
        for task in running:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks.clear()

    async def _run(self, mid: str, facts: CaptureFacts, level: int) -> None:
        try:
            window = await (self.capture or real_capture)(facts, mid, level, self.seconds)
            cause = (self.namer or real_namer)(window, facts)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a capture must never stop the race: say why instead
            first = (str(exc) or type(exc).__name__).splitlines()[0]
            self.failed[mid] = f"no evidence captured: {first}"
            return
        from stackrace.report.schema import Why  # lazy: keeps load's start-up fast

        self.kept.setdefault(mid, {})[level] = Why(cause=cause, window=window)


async def real_capture(
    facts: CaptureFacts, stack: str, level: int, seconds: float
) -> EvidenceWindow:
    """stackrace.evidence.capture's window of this member."""
    # imported at the first window, not with the core: capture brings py-spy's reader,
    # /proc's and a status page's (urllib), and it keeps start-up fast (`load` has none)
    from stackrace.evidence.capture import capture_window  # lazy: keeps load's start-up fast

    return await capture_window(facts.target, stack=stack, level=level, seconds=seconds)


def real_namer(window: EvidenceWindow, facts: CaptureFacts) -> Cause:
    """stackrace.rules.cause's cause of this window."""
    from stackrace.rules.cause import name_cause  # lazy: keeps load's start-up fast

    return name_cause(window, workers=facts.workers, threads=facts.threads)
