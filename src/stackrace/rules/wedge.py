"""A wedged or backlogged server, named with what stackrace can see.

A server that has stopped answering looks alive from the client side: its clients sit
in connect or wait for an answer, and nothing fails until the timeout; after a c=1000
overload a gunicorn sync worker left at c=1 showed "1 connecting … measuring c=1" for a
minute, its border still "ready". The breaking rule (rules/breaking.py) judges a level's totals
against the levels below it, so a level where *nothing* comes back has nothing to
compare; this module watches the time instead:

- **wedged**: clients wait and not one answer came back for `WEDGED_AFTER` seconds in a
  row. That is FAILING, whatever the level, and the proof says what was seen: clients
  stuck in connect (the server accepts nothing), the accept queue and its limit from the
  kernel (`stacks/listen.py`), connections the clients already closed that the server
  still holds (CLOSE-WAIT), the server's own log lines in the last minute
  (`WORKER TIMEOUT ×6`, `stacks/logwatch.py`) and worker processes that exited.
- **backlogged**: answers still come, but the accept queue is full and clients wait in
  connect: the kernel, not the server, is turning them away (`backlog_note`). Timeouts
  at high load say whether they came from a full accept queue (`timeout_cause`).

Logic only (no I/O): fed the engine's intervals and the `ServerSigns` the core gathers,
so the rules are unit-tested on recorded intervals, and a replay names the same reasons.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from stackrace.engine.model import WindowStats
from stackrace.rules.breaking import FAILING, LevelVerdict
from stackrace.stacks.signs import ServerSigns

WEDGED_AFTER = 5.0  # seconds with clients waiting and no answer at all: wedged
SIGNS_WINDOW = 60.0  # log lines and worker exits counted over the last minute


@dataclass(frozen=True)
class Wedge:
    """A stall: since when, how long, and what was seen."""

    since: float
    seconds: float
    waiting: int
    connecting: int
    evidence: tuple[str, ...]  # what was seen, each with its figure

    def reason(self) -> str:
        return f"no answer for {self.seconds:.0f} s while {self.waiting:,} wait"

    def proof(self) -> str:
        head = f"no answer for {self.seconds:.0f} s"
        if self.connecting and self.connecting >= self.waiting:
            head += f", {self.connecting:,} stuck in connect (it accepts nothing)"
        elif self.connecting:
            head += f", {self.waiting:,} waiting ({self.connecting:,} stuck in connect)"
        else:
            head += f", {self.waiting:,} waiting"
        return " · ".join((head, *self.evidence))

    def verdict(self, level: int) -> LevelVerdict:
        return LevelVerdict(level, FAILING, self.reason(), 0, 0.0)


def evidence(signs: ServerSigns | None, history: deque[ServerSigns] | None = None) -> list[str]:
    """What the kernel, the log and the process tree say, each with its figure: the
    log lines and exits counted over the signs in `history` (oldest first)."""
    if signs is None:
        return []
    out = []
    listen = signs.listen
    if listen is not None:
        if not listen.listening:
            out.append("nothing listens on its port")
        elif listen.full or listen.accept_queue or listen.close_wait:
            out.append(listen.describe())
    first = history[0] if history else None
    if signs.log:
        grown = {
            label: n - (first.log.get(label, 0) if first is not None else 0)
            for label, n in signs.log.items()
        }
        said = [
            f"{label} ×{n:,}" for label, n in grown.items() if n > 0 and label != "worker booted"
        ]
        if said:
            out.append("its log: " + ", ".join(said))
    exited = signs.exited - (first.exited if first is not None else 0)
    if exited > 0:
        out.append(f"{exited:,} of its processes exited (restarted)")
    return out


class WedgeWatch:
    """One member's stall clock, fed each new engine interval and the latest signs."""

    def __init__(self, after: float = WEDGED_AFTER) -> None:
        self.after = after
        self._since: float | None = None
        self._history: deque[ServerSigns] = deque()

    def feed(
        self, now: float, interval: WindowStats | None, signs: ServerSigns | None
    ) -> Wedge | None:
        """The stall now (None while answers come or nobody waits)."""
        if signs is not None and (not self._history or self._history[-1] is not signs):
            self._history.append(signs)
            while self._history and signs.t - self._history[0].t > SIGNS_WINDOW:
                self._history.popleft()
        if interval is None:
            return self.current(now, None, signs)
        if interval.requests > 0 or interval.waiting == 0:
            self._since = None
        elif self._since is None:
            self._since = now - interval.seconds
        return self.current(now, interval, signs)

    def current(
        self, now: float, interval: WindowStats | None, signs: ServerSigns | None
    ) -> Wedge | None:
        if self._since is None or interval is None or now - self._since < self.after:
            return None
        return Wedge(
            since=self._since,
            seconds=now - self._since,
            waiting=interval.waiting,
            connecting=interval.connecting,
            evidence=tuple(evidence(signs, self._history)),
        )


def backlog_note(signs: ServerSigns | None, interval: WindowStats | None) -> str:
    """ "" unless the accept queue is full while clients wait in connect: then says so,
    with the figures (the kernel turns them away, not the server)."""
    if signs is None or signs.listen is None or interval is None:
        return ""
    listen = signs.listen
    if not listen.full or not interval.connecting:
        return ""
    return (
        f"its listen backlog is full ({listen.accept_queue:,} of {listen.backlog:,}): "
        f"{interval.connecting:,} clients wait in connect"
    )


def timeout_cause(signs: ServerSigns | None) -> str:
    """For timeouts: whether the accept queue was full ("" when it is not known)."""
    if signs is None or signs.listen is None or signs.listen.backlog is None:
        return ""
    listen = signs.listen
    if listen.full:
        return (
            f"its accept queue is full ({listen.accept_queue:,} of {listen.backlog:,}): "
            "they waited in the kernel, never reached the server"
        )
    return (
        f"its accept queue is not full ({listen.accept_queue:,} of {listen.backlog:,}): "
        "the server took them and did not answer in time"
    )
