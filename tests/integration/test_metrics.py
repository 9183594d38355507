"""`--metrics`: the OpenMetrics exporter scraped for real over HTTP while real load runs
against real servers, parsed with prometheus_client's strict OpenMetrics parser."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import struct
import subprocess
import termios
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from stackrace.engine.client import Engine
from stackrace.engine.model import EngineSettings, TargetSpec
from stackrace.metrics.exporter import MetricsExporter
from stackrace.metrics.figures import BUCKETS_US, CONTENT_TYPE, buckets_of
from tests.helpers import CLI, ROOT, STACKS_FIXTURE, TestServer

T = TypeVar("T")


class Scrape:
    """One scrape: family → sample name → {labels: value}."""

    def __init__(self, url: str) -> None:
        with urllib.request.urlopen(url, timeout=5) as r:
            assert r.headers["Content-Type"] == CONTENT_TYPE
            self.text = r.read().decode()
        self.samples: dict[str, dict[frozenset, float]] = {}
        for fam in text_string_to_metric_families(self.text):
            for s in fam.samples:
                self.samples.setdefault(s.name, {})[frozenset(s.labels.items())] = s.value

    def get(self, name: str, **labels: str) -> float:
        """The sum over the samples of `name` whose labels include `labels`."""
        want = set(labels.items())
        return sum(v for k, v in self.samples.get(name, {}).items() if want <= k)

    def targets(self) -> set[str]:
        rows = self.samples.get("stackrace_requests_sent_total", {})
        return {dict(k)["target"] for k in rows}

    def accounted(self, target: str) -> None:
        """sent = answered (responses) + failures without an answer + waiting."""
        lost = sum(
            v
            for k, v in self.samples["stackrace_request_failures_total"].items()
            if dict(k)["target"] == target
            and dict(k)["kind"] not in ("http_status", "invalid_body")
        )
        sent = self.get("stackrace_requests_sent_total", target=target)
        answered = self.get("stackrace_responses_total", target=target)
        waiting = self.get("stackrace_requests_waiting", target=target)
        assert sent == answered + lost + waiting, (sent, answered, lost, waiting)
        count = self.get("stackrace_request_duration_seconds_count", target=target)
        assert count == answered


@contextlib.asynccontextmanager
async def exported(settings: EngineSettings) -> AsyncIterator[tuple[Engine, MetricsExporter]]:
    """A real engine, started, and an exporter serving its figures on a free port."""
    engine = Engine(settings)
    exporter = MetricsExporter("127.0.0.1", 0)
    exporter.follow(lambda: engine)
    try:
        async with exporter.serving():
            await engine.start()
            yield engine, exporter
    finally:
        await engine.stop()  # (once stopped, stopping again does nothing)
        exporter.close()


async def test_scraped_counters_and_buckets_equal_the_engines_figures(server: TestServer) -> None:
    async with exported(EngineSettings(timeout=5.0)) as (engine, exporter):
        await engine.add_target(TargetSpec(id="ok", url=server.url("/hello"), concurrency=6))
        await engine.add_target(
            TargetSpec(id="503", url=server.url("/status?code=503"), concurrency=2)
        )
        await asyncio.sleep(1.2)
        during = await asyncio.to_thread(Scrape, exporter.url)
        for target in ("ok", "503"):
            during.accounted(target)
        await asyncio.sleep(0.8)
        final = await engine.stop()
        await asyncio.sleep(0.2)  # the feed counts the last snapshot
        after = await asyncio.to_thread(Scrape, exporter.url)
    assert final is not None
    for target in ("ok", "503"):
        t = final.target(target)
        assert t is not None and t.total.requests > 100
        w = t.total
        assert after.get("stackrace_requests_sent_total", target=target) == w.sent
        assert after.get("stackrace_responses_total", target=target) == w.requests
        assert after.get("stackrace_response_bytes_total", target=target) == w.bytes
        for kind, n in w.failures.items():
            assert after.get("stackrace_request_failures_total", target=target, kind=kind) == n
        # the buckets are the engine's own histogram, bucket for bucket
        want = buckets_of(engine.total_histogram(target))
        upto = 0
        for bound, n in zip(BUCKETS_US, want, strict=False):
            upto += n
            le = repr(bound / 1e6)
            got = after.get("stackrace_request_duration_seconds_bucket", target=target, le=le)
            assert got == upto, (target, le)
        assert after.get("stackrace_request_duration_seconds_count", target=target) == w.requests
        total_s = w.latency.mean * w.latency.count / 1e6
        got_s = after.get("stackrace_request_duration_seconds_sum", target=target)
        assert got_s == pytest.approx(total_s, rel=1e-6)
        assert after.get("stackrace_request_duration_seconds_count", target=target) >= during.get(
            "stackrace_request_duration_seconds_count", target=target
        )
    assert after.get("stackrace_responses_total", target="503", code="503") > 100
    assert after.get("stackrace_request_failures_total", target="503", kind="http_status") > 100


ONE_AT_A_TIME = ROOT / "tests" / "servers" / "one_at_a_time.py"


async def test_starving_clients_show_in_the_scrape() -> None:
    """One worker that stays on a keep-alive connection (the shape of uWSGI's native
    socket): of three clients one is served, two wait unread in the server's kernel.
    The scrape says so — the starved share of the clients' time, the oldest wait, and
    that the two are neither stuck in the connect nor unacknowledged."""
    server = TestServer(ONE_AT_A_TIME, "--keepalive", "--ms", "2")
    try:
        async with exported(EngineSettings(timeout=30.0)) as (engine, exporter):
            await engine.add_target(TargetSpec(id="one", url=server.url("/"), concurrency=3))
            await asyncio.sleep(3.5)
            scrape = await asyncio.to_thread(Scrape, exporter.url)
    finally:
        server.kill()
    assert scrape.get("stackrace_responses_total", target="one") > 100  # one client served
    # the two starved, and the served client's request when it is in flight
    assert scrape.get("stackrace_requests_waiting", target="one") in (2, 3)
    # the last interval's: two of three clients waited through all of it (2/3)
    assert 0.6 < scrape.get("stackrace_clients_starved_ratio", target="one") <= 0.7
    assert scrape.get("stackrace_requests_oldest_wait_seconds", target="one") > 2.5
    assert scrape.get("stackrace_requests_connecting", target="one") == 0
    assert scrape.get("stackrace_requests_unacked", target="one") == 0
    scrape.accounted("one")


def _address(proc: subprocess.Popen[str]) -> str:
    assert proc.stderr is not None
    for _ in range(20):
        line = proc.stderr.readline()
        m = re.search(r"metrics at (http://\S+)", line)
        if m:
            return m.group(1)
    raise AssertionError("no 'metrics at' line")


def _until(take: Callable[[], T], good: Callable[[T], bool], timeout: float = 20.0) -> T:
    """`take()` every 0.1 s until `good` says so (the last taken, asserted, if not)."""
    end = time.monotonic() + timeout
    got = take()
    while not good(got) and time.monotonic() < end:
        time.sleep(0.1)
        got = take()
    assert good(got), f"not seen within {timeout:g}s"
    return got


def test_load_serves_metrics_while_it_runs(server: TestServer) -> None:
    proc = subprocess.Popen(
        [
            *CLI,
            "load",
            # a path that waits 5 ms: the scrapes count answers and connections, not a
            # throughput, so the load need not burn the cores for its 3 s
            server.url("/delay?ms=5"),
            "-c",
            "4",
            "-d",
            "3s",
            "--metrics",
            "127.0.0.1:0",
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = _address(proc)
        target = server.url("/delay?ms=5")  # `load` names its one target by its URL

        def answered(scrape: Scrape) -> float:
            if scrape.targets() != {target}:
                return 0.0
            return scrape.get("stackrace_responses_total", target=target)

        # the first scrape with answers (the exporter listens before the engine has
        # attached: beside a load average of 17, a scrape 1 s in had no target yet),
        # then a later one with more
        first = _until(lambda: Scrape(url), lambda sc: answered(sc) > 0)
        second = _until(lambda: Scrape(url), lambda sc: answered(sc) > answered(first))
        for scrape in (first, second):
            assert scrape.targets() == {target}
            scrape.accounted(target)
        assert second.get("stackrace_connections", target=target) == 4
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert '"total"' in out


def test_bench_serves_every_stack_with_its_resources(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            *CLI,
            "--stacks-file",
            str(STACKS_FIXTURE),
            "bench",
            "--stacks",
            "plain,forking",
            "--isolation",
            "parallel",
            "--concurrency",
            "4",
            # 2 s of level (was 3.5): the scrapes every 0.3 s need both stacks' answers
            # once while it runs, and how many is not checked
            "--duration",
            "1.5s",
            "--warmup",
            "0.5s",
            "--metrics",
            "127.0.0.1:0",
            "--no-progress",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        url = _address(proc)
        seen: Scrape | None = None
        end = time.monotonic() + 30
        while time.monotonic() < end:
            scrape = Scrape(url)
            if scrape.targets() == {"plain", "forking"} and all(
                scrape.get("stackrace_responses_total", target=t) > 0 for t in ("plain", "forking")
            ):
                seen = scrape
                break
            time.sleep(0.3)
        assert seen is not None, "both stacks never showed answers"
        for t in ("plain", "forking"):
            seen.accounted(t)
            assert seen.get("stackrace_stack_resident_memory_bytes", target=t) > 1e6
            assert seen.get("stackrace_connections_wanted", target=t) == 4
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    # --no-progress: nothing on stderr but the address line
    assert [line for line in err.splitlines() if line.strip()] == [], err


def test_the_app_serves_metrics(server: TestServer, tmp_path: Path) -> None:
    """The real app in a pseudo-terminal, loading a URL target (no stacks file: no picker)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 140, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "STACKRACE_RUNS_DIR": str(tmp_path)}
    proc = subprocess.Popen(
        [
            *CLI,
            "--stacks-file",
            str(tmp_path / "none.toml"),
            "--url",
            server.url("/hello"),
            "-c",
            "3",
            "--metrics",
            "127.0.0.1:0",
        ],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        env=env,
        start_new_session=True,
    )
    os.close(slave)
    output = bytearray()
    reading = threading.Thread(target=_drain, args=(master, output), daemon=True)
    reading.start()
    try:
        end = time.monotonic() + 20
        url = None
        while url is None and time.monotonic() < end:
            m = re.search(rb"metrics at (http://[0-9.:]+/metrics)", bytes(output))
            url = m.group(1).decode() if m else None
            time.sleep(0.1)
        assert url is not None, bytes(output)[-500:]
        answered = 0.0
        while time.monotonic() < end and answered == 0:
            scrape = Scrape(url)
            answered = sum(scrape.samples.get("stackrace_responses_total", {}).values())
            time.sleep(0.3)
        assert answered > 0
        os.write(master, b"q")
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)


def _drain(fd: int, into: bytearray) -> None:
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        into.extend(chunk)


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("0.0.0.0:0", "not a loopback address"),
        ("127.0.0.1:nope", "use [HOST:]PORT"),
    ],
)
def test_metrics_address_is_checked_before_any_load(
    server: TestServer, address: str, words: str
) -> None:
    r = subprocess.run(
        [*CLI, "load", server.url("/hello"), "-d", "1s", "--metrics", address],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2 and words in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert server.stats()["by_path"].get("/hello", 0) == 0


def test_a_port_in_use_is_one_line(server: TestServer) -> None:
    busy = MetricsExporter("127.0.0.1", 0)
    try:
        port = busy.address[1]
        r = subprocess.run(
            [*CLI, "load", server.url("/hello"), "-d", "1s", "--metrics", f"{port}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        busy.close()
    assert r.returncode == 2 and "in use" in r.stderr, r.stderr


async def test_an_engine_without_a_stream_is_polled() -> None:
    """The app's demo engine publishes `latest` only: the feed polls it."""
    from stackrace.race.live.demo import SyntheticEngine

    engine = SyntheticEngine()
    await engine.add_target(TargetSpec(id="uvicorn", url="http://127.0.0.1:1/hello"))
    exporter = MetricsExporter("127.0.0.1", 0)
    exporter.follow(lambda: engine)
    answered = 0
    try:
        async with exporter.serving():
            for _ in range(8):
                snap = engine.step()
                assert snap is not None
                answered += snap.targets[0].interval.requests
                await asyncio.sleep(0.12)  # longer than the feed's poll
            scrape = await asyncio.to_thread(Scrape, exporter.url)
    finally:
        exporter.close()
    assert scrape.get("stackrace_responses_total", target="uvicorn") == answered
