"""What stackrace can see of a server besides its answers, gathered once a second.

`ServerSigns` is one member's: the kernel's view of its port (`listen.ListenState`:
the accept queue, its limit, connections the clients have closed), the lines of its
own log that name trouble (`logwatch.SIGNS`, counted since it started) and how many
of its processes have exited (worker restarts). The race turns them into reasons
(rules/wedge.py); a recording keeps them, so a replay names the same reasons.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stackrace.stacks.listen import ListenState


@dataclass(frozen=True)
class ServerSigns:
    t: float  # the race clock when gathered
    listen: ListenState | None = None  # None: not on this host, or no port known
    log: dict[str, int] = field(default_factory=dict)  # logwatch.SIGNS label → lines
    exited: int = 0  # processes of its tree gone since it started
