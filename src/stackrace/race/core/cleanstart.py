"""A ramp from a clean state, in fact: every stack idle (or restarted) before level 1.

`r` used to reset the bookkeeping and not the servers: right after a c=1000 overload a
gunicorn sync worker still held 1,634 connections its clients had long given up on, so
the ramp's first levels measured that queue — "broke at c=20, 5 % failed", on a
server that serves 90 req/s to one client. Before the first level now:

1. every engine target is removed: the engine closes every connection it had open;
2. each stack is **proven idle** — the kernel shows no connection open on its port and
   an empty accept queue (`stacks/listen.py`), and it answers the race's URL within a
   second — or, after `IDLE_WAIT` seconds without that, **restarted** (a stack
   stackrace did not start is only waited for, and said to be busy if it stays so);
3. once every stack is ready, the targets are added again at the ramp's first level,
   and the ramp begins — on an empty level log — once every one of them is loaded
   (`loaded`): a stack restarted last would otherwise miss most of level 1.

What happened is kept (`notes`) for the summary: "gunicorn sync restarted: accept
queue 1,634 of 2,048, 1,634 closed by clients (CLOSE-WAIT)".
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from stackrace.race.core.core import RaceCore
from stackrace.race.core.members import Member
from stackrace.race.core.state import StackState
from stackrace.stacks import probe
from stackrace.stacks.listen import listen_state

IDLE_WAIT = 3.0  # seconds a stack has to prove itself idle before it is restarted
READY_WAIT = 60.0  # seconds restarted stacks have to be ready again
ATTACH_WAIT = 10.0  # seconds the ready stacks have to be loaded again

DRAINING = "draining"
RESTARTING = "restarting"
READY = "ready"
GAVE_UP = "gave up"


@dataclass
class CleanStart:
    """The preparation of one ramp; `step` is called every tick until it says done."""

    started: float
    phase: dict[str, str] = field(default_factory=dict)
    why: dict[str, str] = field(default_factory=dict)  # what was seen when not idle
    notes: list[str] = field(default_factory=list)
    ready: bool = False  # every member ready: the targets are being added again
    _restarted_at: float = 0.0
    _attaching_since: float | None = None

    @classmethod
    async def begin(cls, core: RaceCore, now: float) -> CleanStart:
        """Stop loading (every target removed, its connections closed) and start
        watching each member go idle."""
        prep = cls(now)
        core.hold_attach = True
        for mid in list(core.members):
            await core.detach(mid)
            m = core.members[mid]
            if m.handle.state in (StackState.CRASHED, StackState.STOPPED) and m.handle.external:
                prep.phase[mid] = GAVE_UP
            else:
                prep.phase[mid] = DRAINING
        return prep

    def status(self) -> str:
        """One line for the header while the preparation runs."""
        waiting = [m for m, p in self.phase.items() if p == DRAINING]
        restarting = [m for m, p in self.phase.items() if p == RESTARTING]
        parts = []
        if restarting:
            parts.append(f"restarting {', '.join(restarting)}")
        if waiting:
            parts.append(f"waiting for {', '.join(waiting)} to be idle")
        return "ramp: a clean start — " + ("; ".join(parts) or "ready")

    def loaded(self, core: RaceCore, now: float) -> bool:
        """Every member that is up has its engine target again (or ATTACH_WAIT passed)."""
        if self._attaching_since is None:
            self._attaching_since = now
        pending = [
            m
            for m in core.members.values()
            if m.handle.state in (StackState.READY, StackState.WARMING)
            and not m.attached
            and m.refused is None
        ]
        return not pending or now - self._attaching_since > ATTACH_WAIT

    async def step(self, core: RaceCore, now: float) -> bool:
        """Advance the preparation; True once every member is ready (or given up)."""
        for mid, phase in list(self.phase.items()):
            m = core.members.get(mid)
            if m is None:
                self.phase[mid] = GAVE_UP
                continue
            name = m.handle.name
            if phase == DRAINING:
                idle, why = await member_idle(m)
                if idle:
                    self.phase[mid] = READY
                    continue
                self.why[mid] = why
                if now - self.started < IDLE_WAIT:
                    continue
                if m.handle.external:
                    self.phase[mid] = GAVE_UP
                    self.notes.append(f"{name} was not idle at the start ({why})")
                    continue
                await core.restart(mid)
                self.phase[mid] = RESTARTING
                self._restarted_at = now
                self.notes.append(f"{name} restarted: {why}")
            elif phase == RESTARTING:
                state = m.handle.state
                if state in (StackState.READY, StackState.WARMING):
                    self.phase[mid] = READY
                elif state in (StackState.CRASHED, StackState.STOPPED) or (
                    now - self._restarted_at > READY_WAIT
                ):
                    self.phase[mid] = GAVE_UP
                    self.notes.append(f"{name} did not start again")
        return all(p in (READY, GAVE_UP) for p in self.phase.values())


async def member_idle(m: Member) -> tuple[bool, str]:
    """Whether a member is idle: the kernel shows no connection open on its port
    and an empty accept queue, and it answers the race's URL within a second. A
    member whose port cannot be seen here (a model, another host) counts as idle.
    Else False, with what was seen."""

    state = m.handle.state
    if state not in (StackState.READY, StackState.WARMING):
        return False, f"it is {state.value}"
    port = m.handle.listen_port
    if port is None:
        return True, ""
    seen = await asyncio.to_thread(listen_state, port, False)
    if seen.busy or seen.accept_queue:
        return False, f"{seen.describe()}, {seen.busy:,} connections open"
    url = m.url or m.handle.base_url
    parts = urlsplit(url)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        answer = await probe.get(parts.hostname or "127.0.0.1", port, path, timeout=1.0)
    except (OSError, TimeoutError, ValueError) as exc:
        return False, f"no answer to GET {path} within 1 s ({exc})"
    if answer.status >= 500:
        return False, f"GET {path} answered HTTP {answer.status}"
    return True, ""
