"""The engine's HTTP/2 against a real server: Go's net/http (tests/apps/h2go), over TLS
with h2 chosen by ALPN and in cleartext (h2c, prior knowledge), through the real CLI.

Every request is accounted per stream (sent = answered + failed + waiting) and held
against what the server counted; a server's SETTINGS_MAX_CONCURRENT_STREAMS below
--streams is obeyed and said; rate mode, a mix, methods, bodies and body checks ride on
streams as on HTTP/1.1 connections. The misbehaving servers are in test_h2_hostile.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from stackrace.engine.client import Engine
from stackrace.engine.model import EngineSettings, TargetSpec
from tests.h2servers import GoH2, build_h2go
from tests.helpers import TestServer, run_cli, until


@pytest.fixture(scope="module")
def h2go(tmp_path_factory: pytest.TempPathFactory) -> Path:
    try:
        return build_h2go(tmp_path_factory.mktemp("h2go"))
    except RuntimeError as exc:
        pytest.skip(str(exc))


def load(*args: str) -> dict[str, Any]:
    r = run_cli("load", *args, "--http2", "--json", "--no-progress")
    assert r.stdout, r.stderr
    return json.loads(r.stdout)


def balanced(out: dict[str, Any]) -> bool:
    a = out["accounting"]
    return a["sent"] == a["answered"] + a["failed_no_answer"] + a["waiting"]


@pytest.mark.parametrize("tls", [False, True], ids=["h2c", "h2-alpn"])
def test_every_stream_is_a_request_the_server_counted(h2go: Path, tls: bool) -> None:
    server = GoH2(h2go, tls=tls)
    try:
        out = load(server.url("/hello"), "-c", "4", "--streams", "8", "-n", "3000", "-k")
        assert out["http"] == ("h2" if tls else "h2c") and out["streams"] == 8, out["http"]
        total = out["total"]
        assert total["http"] == "2"
        assert balanced(out) and out["accounting"]["sent"] == 3000, out["accounting"]
        assert total["requests"] == 3000 and total["ok"] == 3000, total["failures"]
        assert server.count() == 3000
        assert total["goaways"] == total["resets"] == total["refused"] == 0
        # the text says the protocol and the split of the load
        r = run_cli("load", server.url("/hello"), "--http2", "-c", "2", "--streams", "4",
                    "-d", "1s", "-k", "--no-progress")  # fmt: skip
        assert r.returncode == 0, r.stderr
        proto = "h2" if tls else "h2c"
        assert f"{proto}, 2 connections × 4 streams" in r.stdout, r.stdout
        assert "HTTP/2: 0 GOAWAYs" in r.stdout
    finally:
        server.kill()


def test_a_servers_stream_limit_below_streams_is_obeyed_and_said(h2go: Path) -> None:
    server = GoH2(h2go, max_streams=4)
    try:
        out = load(server.url("/hello"), "-c", "2", "--streams", "16", "-n", "2000")
        total = out["total"]
        assert total["max_streams"] == 4, total
        # obeyed: nothing refused, every stream answered
        assert total["requests"] == 2000 and not total["failures"], total["failures"]
        assert server.count() == 2000
        r = run_cli("load", server.url("/hello"), "--http2", "-c", "1", "--streams", "16",
                    "-d", "1s", "--no-progress")  # fmt: skip
        assert "allows 4 streams per connection" in r.stdout, r.stdout
    finally:
        server.kill()


def test_rate_mode_on_streams_corrects_for_coordinated_omission(h2go: Path) -> None:
    server = GoH2(h2go)
    try:
        out = load(server.url("/hello"), "-c", "2", "--streams", "8", "--rate", "400", "-d", "2s")
        total = out["total"]
        assert balanced(out), out["accounting"]
        # 800 due in 2 s: a busy machine may leave a few unsent at the end, never many
        assert 600 <= total["requests"] <= 820, total["requests"]
        assert total["latency_uncorrected"] is not None
        assert server.count() >= total["requests"]
    finally:
        server.kill()


def test_methods_bodies_checks_and_a_mix_ride_on_streams(h2go: Path) -> None:
    server = GoH2(h2go)
    try:
        body = "x" * 70_000  # above the default 64 KiB window: flow control moves it
        ok = load(server.url("/echo"), "-m", "POST", "--body", body, "--expect-body", body,
                  "-c", "2", "--streams", "4", "-n", "200")  # fmt: skip
        assert ok["total"]["ok"] == 200 and not ok["total"]["failures"], ok["total"]["failures"]
        bad = load(server.url("/echo"), "-m", "POST", "--body", "abc", "--expect-body", "abd",
                   "-c", "1", "--streams", "4", "-n", "100")  # fmt: skip
        assert bad["total"]["failures"] == {"invalid_body": 100}
        mixed = load(server.url("/"), "--path", "/hello:3", "--path", "/nothing", "-c", "2",
                     "--streams", "4", "-n", "800")  # fmt: skip
        kinds = {k["name"]: k for k in mixed["requests"]}
        assert kinds["/hello"]["sent"] == 600 and kinds["/hello"]["answered"] == 600, kinds
        assert kinds["/nothing"]["status"] == {"404": 200}, kinds
    finally:
        server.kill()


def test_a_server_without_http2_is_a_protocol_failure_said_in_one_line(
    server: TestServer,
) -> None:
    # the HTTP/1.1 test server answers the h2c preface with an HTTP/1.1 error: no
    # request is taken for answered, each fails as `protocol` with nghttp2's reason
    out = load(server.url("/hello"), "-c", "1", "--streams", "2", "-d", "1s")
    total = out["total"]
    assert total["requests"] == 0 and set(total["failures"]) == {"protocol"}, total["failures"]
    assert any(k.startswith("HTTP/2") for k in total["errors"]), total["errors"]
    assert balanced(out)


def test_a_tls_server_that_does_not_choose_h2_fails_its_handshake_saying_so(h2go: Path) -> None:
    server = GoH2(h2go, tls=True, h1only=True)
    try:
        out = load(server.url("/hello"), "-c", "1", "--streams", "2", "-d", "1s", "-k")
        total = out["total"]
        assert total["requests"] == 0 and set(total["failures"]) == {"tls"}, total["failures"]
        assert any("did not choose h2 by ALPN" in k for k in total["errors"]), total["errors"]
    finally:
        server.kill()


def test_http2_options_that_cannot_apply_are_refused_in_one_line(server: TestServer) -> None:
    r = run_cli("load", server.url("/hello"), "--streams", "4")
    assert r.returncode != 0 and "give --http2 too" in r.stderr, r.stderr
    r = run_cli("load", server.url("/hello"), "--http2", "--no-keepalive")
    assert r.returncode != 0 and "drop --no-keepalive" in r.stderr, r.stderr


async def test_the_concurrency_counts_connections_and_lowering_it_closes_whole_ones(
    h2go: Path,
) -> None:
    server = GoH2(h2go)
    try:
        async with Engine(EngineSettings(timeout=5.0)) as engine:
            spec = TargetSpec(id="h", url=server.url("/hello"), concurrency=4, http="2",
                              streams=8)  # fmt: skip
            await engine.add_target(spec)
            latest: list[Any] = []

            async def collect() -> None:
                async for s in engine.snapshots():
                    latest[:] = [s.targets[0]]

            task = asyncio.create_task(collect())
            assert await until(lambda: latest and latest[0].connections == 4, 10.0)
            assert latest[0].concurrency == 4 and latest[0].interval.streams_open <= 32
            await engine.set_concurrency(1)
            assert await until(lambda: latest and latest[0].connections == 1, 10.0)
            assert latest[0].interval.streams_open <= 8
            task.cancel()
            final = await engine.stop()
        assert final is not None
        total = final.targets[0].total
        assert total.sent == total.requests + total.lost + total.waiting
        assert set(total.failures) <= {"abandoned"}, total.failures
        assert total.http == "2"
    finally:
        server.kill()


def test_bench_races_a_url_over_http2_with_the_same_options(h2go: Path, tmp_path: Path) -> None:
    server = GoH2(h2go)
    try:
        run = tmp_path / "run.json"
        r = run_cli("bench", "--url", f"go={server.url('/hello')}", "--http2", "--streams", "4",
                    "--concurrency", "2", "--duration", "1s", "--warmup", "0s",
                    "--share-cores", "--json", str(run))  # fmt: skip
        assert r.returncode == 0, r.stderr
        doc = json.loads(run.read_text())
        assert doc["settings"]["http2"] is True and doc["settings"]["streams"] == 4
        window = doc["stacks"][0]["levels"][0]["window"]
        assert window["http"] == "2" and window["requests"] > 100, window
        assert window["streams_open"] <= 8
    finally:
        server.kill()
