"""HTTPS: the engine against the real TLS stacks (nginx terminating TLS, uvicorn's own),
with the certificate the launcher makes, counted as the servers count.

The servers' own counts: behind nginx-tls the backend is tests/servers/testserver.py
(its /_stats, read through nginx); uvicorn-tls runs with its access log on (one line per
request, in the stack's log). Each test loads a request budget, so the counts are exact.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path

import msgspec
import pytest

from stackrace.engine.client import Engine
from stackrace.engine.model import EngineSettings, TargetSpec, WindowStats
from stackrace.stacks import certificate, probe
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.definition import StackDef
from stackrace.stacks.launcher import Launcher
from stackrace.stacks.running import RunningStack
from stackrace.stacks.variants import resolve
from tests.conftest_stacks import real_stack
from tests.helpers import ROOT, run_cli, wait_for

BUDGET = 120


@pytest.fixture(autouse=True)
def own_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """The certificate goes to a data directory of this test session's (made once)."""
    monkeypatch.setenv("STACKRACE_HOME", str(tmp_path_factory.getbasetemp() / "tls-home"))


def stacks() -> dict[str, StackDef]:
    defs = dict(load_stacks())
    defs["echo"] = msgspec.convert(
        {
            "title": "test server",
            "language": "python",
            "family": "async",
            "command": ["{python}", f"{ROOT}/tests/servers/testserver.py", "{port}"],
        },
        StackDef,
    )
    # the real uvicorn-tls block, its access log on: the server's own count of requests
    block = msgspec.to_builtins(defs["uvicorn-tls"])
    command = block["command"]
    command[command.index("--no-access-log")] = "--access-log"
    command[command.index("--log-level") + 1] = "info"
    defs["uvicorn-tls-logged"] = msgspec.convert(block, StackDef)
    return defs


async def load_budget(
    rs: RunningStack, path: str, keepalive: bool, resume: bool = False
) -> WindowStats:
    """Load `path` for exactly BUDGET requests; return the final totals."""
    assert rs.cert is not None
    async with Engine(EngineSettings(timeout=10.0)) as engine:
        await engine.add_target(
            TargetSpec(
                id="t",
                url=rs.url + path,
                concurrency=0,
                keepalive=keepalive,
                cacert=str(rs.cert),
                tls_resume=resume,
            )
        )
        await engine.set_budget(BUDGET, "t")
        await engine.set_concurrency(4, "t")

        def done() -> bool:
            snap = engine.latest
            return bool(snap and snap.targets[0].total.attempts >= BUDGET)

        assert await asyncio.to_thread(wait_for, done, 30.0), engine.latest
        final = await engine.stop()
    assert final is not None
    return final.targets[0].total


async def test_https_through_nginx_tls_counted_as_the_backend_counts(tmp_path: Path):
    real_stack("nginx-tls")
    async with Launcher(tmp_path) as launcher:
        rs = await launcher.start(resolve("nginx-tls:backend=echo", stacks()))
        assert rs.url.startswith("https://") and rs.cert is not None
        ctx = probe.trusting(rs.cert)
        await probe.get("127.0.0.1", rs.port, "/_reset", tls=ctx)
        total = await load_budget(rs, "/hello", keepalive=False)
        served = json.loads((await probe.get("127.0.0.1", rs.port, "/_stats", tls=ctx)).body)
    assert total.requests == total.ok == BUDGET, total.failures
    assert served["by_path"]["/hello"] == BUDGET
    # a new connection per request: a full handshake each, timed apart from the total
    assert total.handshakes == BUDGET and total.resumed == 0
    assert total.connect is not None and total.tls is not None and total.first_byte is not None
    assert total.tls.p50 > 0 and total.tls.p50 < total.latency.p50
    assert total.connect.count == total.tls.count == BUDGET


async def test_https_uvicorn_counted_as_it_logs_and_sessions_resume(tmp_path: Path):
    real_stack("uvicorn-tls")
    async with Launcher(tmp_path) as launcher:
        rs = await launcher.start(resolve("uvicorn-tls-logged", stacks()))
        before = rs.log_path.stat().st_size  # the readiness probe's GET is logged too
        total = await load_budget(rs, "/hello", keepalive=False, resume=True)
        await asyncio.sleep(0.3)  # the log is written as the requests are answered
        with rs.log_path.open() as f:
            f.seek(before)
            logged = f.read().count('"GET /hello HTTP/1.1" 200')
    assert total.requests == total.ok == BUDGET, total.failures
    assert logged == BUDGET
    assert total.handshakes == BUDGET
    # --tls-resume: after the first connections, sessions are offered and resumed
    assert total.resumed >= BUDGET // 2, (total.resumed, total.handshakes)


async def test_a_certificate_nobody_vouches_for_is_a_tls_failure(tmp_path: Path):
    real_stack("uvicorn-tls")
    async with Launcher(tmp_path) as launcher:
        rs = await launcher.start(resolve("uvicorn-tls", stacks()))
        async with Engine(EngineSettings(retry_delay=0.05)) as engine:
            await engine.add_target(TargetSpec(id="t", url=rs.url + "/hello", concurrency=2))
            await asyncio.to_thread(
                wait_for,
                lambda: bool(engine.latest and engine.latest.targets[0].total.failed >= 4),
                10.0,
            )
            final = await engine.stop()
    assert final is not None
    total = final.targets[0].total
    assert total.requests == 0 and total.failures.get("tls", 0) >= 4
    assert any("certificate" in why for why in total.errors), total.errors
    assert total.sent == total.lost + total.waiting


@pytest.mark.slow
def test_load_https_with_cacert_and_insecure(tmp_path: Path):
    """The real command line: --cacert FILE verifies, -k skips the check; a missing or
    non-PEM --cacert is one line."""
    real_stack("uvicorn-tls")

    async def run() -> None:
        async with Launcher(tmp_path) as launcher:
            rs = await launcher.start(resolve("uvicorn-tls", stacks()))
            url = rs.url + "/hello"
            for extra in (["--cacert", str(rs.cert)], ["-k"]):
                r = await asyncio.to_thread(
                    run_cli, "load", url, "-c", "2", "-d", "1s", "--json", *extra
                )
                assert r.returncode == 0, r.stderr
                out = json.loads(r.stdout)
                assert out["total"]["ok"] > 0 and out["total"]["handshakes"] >= 2
            bad = tmp_path / "not-a-cert.pem"
            bad.write_text("hello\n")
            for cafile, words in ((bad, "not a PEM"), (tmp_path / "none.pem", "no such file")):
                r = await asyncio.to_thread(run_cli, "load", url, "--cacert", str(cafile))
                assert r.returncode == 2 and words in r.stderr, r.stderr
                assert len(r.stderr.strip().splitlines()) == 1, r.stderr

    asyncio.run(run())


def test_the_certificate_is_made_once_and_serves_loopback(tmp_path: Path):
    first = certificate.ensure()
    again = certificate.ensure()
    assert first == again and first.cert.read_bytes() == again.cert.read_bytes()
    assert first.key.stat().st_mode & 0o777 == 0o600
    ctx = ssl.create_default_context(cafile=str(first.cert))
    cert = ssl._ssl._test_decode_cert(str(first.cert))  # type: ignore[attr-defined]  # private
    names = {v for _, v in cert["subjectAltName"]}
    assert {"localhost", "127.0.0.1"} <= names
    assert ctx.cert_store_stats()["x509_ca"] >= 0
    # a key left readable by others is not used: a fresh pair replaces it
    first.key.chmod(0o644)
    fresh = certificate.ensure()
    assert fresh.key.stat().st_mode & 0o777 == 0o600
