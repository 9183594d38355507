"""Waiting for a starting stack to be ready, or to fail in a way that says why.

Ready means the first answer with a status of the stack's `health_status` (200) on its
health path within `ready_timeout`, asked with its `health_headers` and over TLS
trusting its own certificate where it serves HTTPS. Any other answer but a 5xx is
definite and ends the start at once, with the status, the body's first line and the
likely cause (stackrace.stacks.refusal): a 404 will not become a 200 by waiting, a 502
of a proxy whose backend is still starting may. A helper process (php-fpm before nginx)
is ready when the file it makes appears. A process of the stack that dies first ends
the wait with the last line it logged.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from pathlib import Path

from stackrace.stacks import probe, probe_h2
from stackrace.stacks.refusal import refusal_line
from stackrace.stacks.running import POLL_S, LaunchError, RunningStack, program_of


def statuses_text(codes: frozenset[int]) -> str:
    """The statuses a stack is ready on, as a message says them ("200", "200-299")."""
    if codes == frozenset({200}):
        return "200"
    lo, hi = min(codes), max(codes)
    return (
        f"{lo}-{hi}" if len(codes) == hi - lo + 1 else ", ".join(list(map(str, sorted(codes)))[:8])
    )


async def wait_path(rs: RunningStack, p: subprocess.Popen[bytes], path: Path) -> None:
    """Until a helper process's file appears (php-fpm's socket); LaunchError when the
    process exits first or the stack's `ready_timeout` is up."""
    deadline = time.monotonic() + rs.stack.spec.ready_timeout
    while not path.exists():
        if p.poll() is not None:
            raise LaunchError(
                f"{rs.name}: {program_of(p)} exited with code {p.returncode} before it was ready"
            )
        if time.monotonic() > deadline:
            raise LaunchError(
                f"{rs.name}: {path.name} did not appear within {rs.stack.spec.ready_timeout:g}s"
            )
        await asyncio.sleep(POLL_S)


async def wait_http(
    rs: RunningStack,
    port: int,
    health: str,
    timeout: float,
    ready: frozenset[int] = frozenset({200}),
    tls: bool = False,
    headers: dict[str, str] | None = None,
) -> None:
    """Until `health` on `port` answers a status of `ready` (200), over TLS trusting
    the stack's own certificate with `tls`, asked with `headers` (the user's: an app
    set for production serves its own Host only); LaunchError when a process of the
    stack dies first (with the last line it logged), the time is up, or the answer
    is definite: a status that is neither ready nor a 5xx (a 404 will not become a
    200 by waiting; a 502 of a proxy whose backend is still starting may), said in
    one line with the body's first line of text and the likely cause
    (stacks/refusal.py). An h2 variant's own port is asked over HTTP/2 (ready is
    answering over h2, stacks.probe_h2), by ALPN with `tls`, else with prior knowledge;
    an upstream behind it (another port) speaks HTTP/1.1."""
    h2 = port == rs.port and rs.stack.http != "1.1"
    sent = dict(headers or {})
    deadline = time.monotonic() + timeout
    context = None
    if tls and rs.cert is not None:
        context = probe_h2.h2_context(str(rs.cert)) if h2 else probe.trusting(rs.cert)
    last = "no answer yet"
    what = "" if port == rs.port else f" (its upstream on port {port})"
    while True:
        if rs.stopping:  # (set first thing in stop(), before it reaps)
            raise LaunchError(f"{rs.name}: stopped while it was starting")
        dead = rs.dead_process()
        if dead is not None:
            rs.exit_code = dead.returncode
            said = rs.last_log_line()
            raise LaunchError(
                f"{rs.name}: {Path(program_of(dead)).name} exited with code "
                f"{dead.returncode} before it was ready" + (f": {said}" if said else "")
            )
        try:
            ask = probe_h2.get if h2 else probe.get
            resp = await ask(
                rs.host, port, health, timeout=2.0, headers=tuple(sent.items()), tls=context
            )
            if resp.status in ready:
                return
            last = f"HTTP {resp.status} on {health}"
            if resp.status < 500:
                raise LaunchError(
                    f"{rs.name}: GET {health}{what} answered "
                    + refusal_line(resp, sent, statuses_text(ready))
                )
        except (OSError, TimeoutError, ValueError) as exc:
            last = str(exc) or type(exc).__name__
        if time.monotonic() > deadline:
            raise LaunchError(f"{rs.name}: not ready within {timeout:g}s{what} ({last})")
        await asyncio.sleep(POLL_S)
