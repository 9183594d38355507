"""Why clients starve while others are answered: the sentence every front end shows.

Clients stuck in the TLS handshake (TCP up: the server took them, its TLS does not
answer) point at the server's TLS; clients stuck in connect (the last interval, `w`) or
connects that timed out, at the accept queue; connected ones at one of two causes that
look alike from the client, told apart by whether the server's kernel acknowledged the
request (`WindowStats.unacked`, from TCP_INFO): a server that reads other connections
first leaves the request unread but acknowledged (uwsgi-http11's worker staying on one
keep-alive connection; node-http at c=1000, measured: 235 of 1,000 acknowledged and
unread for the whole level); a handshake whose last ACK a full listen backlog dropped
leaves the client believing it is connected with its request never acknowledged.

The app's explanations (race/live/explain.py) and `load`'s summary (report/load.py)
say it the same way. Pure: no I/O.
"""

from __future__ import annotations

from stackrace.engine.model import CONNECT_TIMEOUT, HANDSHAKE_TIMED_OUT, WindowStats
from stackrace.rules.level import secs


def starved_sentence(w: WindowStats | None, total: WindowStats) -> str:
    """The starved share of `total` and its likely cause (see the module docstring)."""
    share = f"{100 * total.starved_share:.0f}% of clients' time unanswered"
    share += f" (up to {secs(total.starved_wait_us)})"
    starved_now = round(w.starved_share * w.in_flight) if w is not None else 0
    if total.errors.get(HANDSHAKE_TIMED_OUT, 0) > total.failures.get(CONNECT_TIMEOUT, 0) or (
        w is not None and w.handshaking and 2 * w.handshaking >= (starved_now or w.waiting)
    ):
        # TCP is up, so the server took them: its TLS is what does not answer
        return f"{share}: stuck in the TLS handshake, the server's TLS does not answer"
    if total.failures.get(CONNECT_TIMEOUT, 0) or (w is not None and 2 * w.connecting > w.waiting):
        return f"{share}: stuck in connect, the accept queue drops their SYNs"
    if w is None or not starved_now:
        return f"{share}: a worker held by another keep-alive client, or a full listen backlog"
    # the engine asked the kernel (TCP_INFO) whether the server's kernel acknowledged
    # each request over a second old: unacknowledged, its handshake was dropped
    if 2 * w.unacked >= starved_now:
        # what is known: the handshake's last ACK and the request were dropped (by a full
        # listen backlog, as a rule; a firewall does the same)
        return f"{share}: handshakes dropped, requests never acknowledged"
    return f"{share}: its kernel has their requests, the server reads others first"
