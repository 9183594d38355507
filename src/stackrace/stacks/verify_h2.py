"""`stackrace verify` over HTTP/2: the endpoint contract of a stack's h2 variant, read
by the engine that will load it.

An h2 variant (`hypercorn:http=2`, `:http=h2c`, stackrace.stacks.protocols) is raced
by the engine speaking h2 (issue 51's TargetSpec.http = "2"), so its contract is
checked by that engine too: each endpoint is sent `REQUESTS` requests on one connection
of `STREAMS` streams, and every answer must be a 2xx whose body passes the workload's
own check (settings.workloads: the exact "Hello, World!", the JSON object, "ok" from
/io), counted per stream by the engine — a reset stream, a refused one, a GOAWAY or a
protocol error is a failure of its kind. That is what a race relies on; an h1 probe
would prove nothing about h2, and some h2 servers answer no HTTP/1.1 at all (granian
`--http 2`, nginx 1.22's cleartext `http2`, Node's cleartext http2 server).

Until the engine speaks h2 (h2engine's branch), each endpoint is one problem naming
that (`protocols.NEEDS_ENGINE`): never a pass.
"""

from __future__ import annotations

import asyncio
import time

import msgspec

from stackrace.engine.client import Engine
from stackrace.engine.model import EngineSettings, TargetSpec
from stackrace.settings.workloads import WORKLOADS
from stackrace.stacks.protocols import NEEDS_ENGINE, engine_speaks_h2
from stackrace.stacks.verify import IO_MS, Check

REQUESTS = 20  # per endpoint: enough streams to overlap on one connection
STREAMS = 4  # per connection: the answers interleave, as in a race
WAIT_S = 15.0  # the most an endpoint's requests may take, /io's 100 ms included


async def verify_h2(
    base_url: str,
    cacert: str | None,
    endpoints: tuple[str, ...] = ("hello", "json", "io"),
) -> list[Check]:
    """The contract of each endpoint at `base_url` (https: h2 by ALPN trusting `cacert`;
    http: h2c with prior knowledge), read by the engine over h2."""
    if not engine_speaks_h2():
        return [Check(e, False, [f"not verified over h2: {NEEDS_ENGINE}"]) for e in endpoints]
    checks = []
    async with Engine(EngineSettings(timeout=10.0), procs=1) as engine:
        for e in endpoints:
            checks.append(await _endpoint(engine, base_url, cacert, e))
    return checks


async def _endpoint(engine: Engine, base_url: str, cacert: str | None, endpoint: str) -> Check:
    path = {"io": f"/io?ms={IO_MS}"}.get(endpoint, f"/{endpoint}")
    spec = TargetSpec(
        id=f"verify-{endpoint}",
        url=f"{base_url}{path}",
        check=WORKLOADS[endpoint].check(),
        concurrency=1,
        budget=REQUESTS,
        cacert=cacert,
        tls_verify=cacert is not None,
    )
    spec = msgspec.structs.replace(spec, http="2", streams=STREAMS)
    t0 = time.monotonic()
    await engine.add_target(spec)
    try:
        total = None
        while time.monotonic() - t0 < WAIT_S:
            await asyncio.sleep(0.1)
            snap = engine.latest
            t = snap.target(spec.id) if snap is not None else None
            if t is None:
                continue
            total = t.total
            if total.waiting == 0 and total.sent >= REQUESTS:
                break
    finally:
        await engine.remove_target(spec.id)
    seconds = time.monotonic() - t0
    if total is None:
        return Check(endpoint, False, [f"GET {path} over h2: no figures from the engine"], seconds)
    problems = []
    if total.ok != REQUESTS:
        problems.append(
            f"GET {path} over h2: {total.ok} of {REQUESTS} answered as the contract says"
        )
    bad_status = {c: n for c, n in total.status.items() if not 200 <= c < 300}
    if bad_status:
        problems.append(f"statuses {dict(sorted(bad_status.items()))}")
    failed = {k: n for k, n in total.failures.items() if n}
    if failed:
        problems.append(f"failed: {', '.join(f'{k} {n}' for k, n in sorted(failed.items()))}")
    if total.waiting:
        problems.append(f"{total.waiting} still waiting after {WAIT_S:g} s")
    return Check(endpoint, not problems, problems, seconds)
