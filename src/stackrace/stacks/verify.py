"""`stackrace verify`: every endpoint of a running stack against the contract."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from stackrace.config import HOST
from stackrace.stacks import probe
from stackrace.workloads import HELLO, JSON_BODY

IO_MS = 100


@dataclass
class Check:
    endpoint: str
    ok: bool
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0


def _framing(r: probe.ProbeResponse) -> list[str]:
    if r.chunked:
        return []
    if r.content_length is None:
        return ["neither Content-Length nor chunked framing"]
    if r.content_length != len(r.body):
        return [f"Content-Length {r.content_length} but {len(r.body)} body bytes"]
    return []


def _common(r: probe.ProbeResponse, ctype: str) -> list[str]:
    problems = []
    if r.status != 200:
        problems.append(f"status {r.status}")
    if not r.content_type.lower().startswith(ctype):
        problems.append(f"Content-Type {r.content_type or '(none)'!r}, expected {ctype}")
    return problems + _framing(r)


async def check_endpoint(port: int, endpoint: str) -> Check:
    path = {"io": f"/io?ms={IO_MS}"}.get(endpoint, f"/{endpoint}")
    try:
        r = await probe.get(HOST, port, path, timeout=10.0)
    except (OSError, TimeoutError, ValueError) as exc:
        return Check(endpoint, False, [f"GET {path}: {exc or type(exc).__name__}"])
    if endpoint == "hello":
        problems = _common(r, "text/plain")
        if r.body != HELLO.encode():
            problems.append(f"body {r.body[:60]!r}, expected {HELLO!r}")
    elif endpoint == "json":
        problems = _common(r, "application/json")
        try:
            if json.loads(r.body) != json.loads(JSON_BODY):
                problems.append(f"body {r.body[:60]!r} is not {JSON_BODY}")
        except ValueError:
            problems.append(f"body {r.body[:60]!r} is not JSON")
    elif endpoint == "io":
        problems = _common(r, "text/plain")
        if r.body != b"ok":
            problems.append(f"body {r.body[:60]!r}, expected 'ok'")
        if r.seconds < IO_MS / 1000:
            problems.append(
                f"/io?ms={IO_MS} answered in {r.seconds * 1000:.0f} ms: it did not wait"
            )
    else:
        raise ValueError(f"unknown endpoint {endpoint}")
    return Check(endpoint, not problems, problems, r.seconds)


async def verify_port(
    port: int, endpoints: tuple[str, ...] = ("hello", "json", "io")
) -> list[Check]:
    return [await check_endpoint(port, e) for e in endpoints]
