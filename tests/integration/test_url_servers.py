"""Servers the user started by hand, raced by `bench --url [NAME=]URL [--pid PID]` with
every output bench has: real test servers, the real CLI and engine, the files read back.
"""

from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET

import pytest

from tests.helpers import TestServer, run_cli

pytestmark = pytest.mark.slow


@pytest.fixture
def two_servers():
    a, b = TestServer(), TestServer()
    yield a, b
    a.kill()
    b.kill()


def _bench(*args: str):
    # half a second a member: the checks are of exact counts, names and outputs, and a
    # gate against itself at qps<-95% (no throughput is compared closer than that)
    return run_cli(
        "bench", "--concurrency", "4", "--duration", "0.5s", "--warmup", "0s", "--no-progress",
        *args,
    )  # fmt: skip


def test_bench_races_servers_started_by_hand_with_every_output(two_servers, tmp_path):
    """Two servers started by hand, one named and sampled (--pid), one named from its
    host:port and not sampled, raced one at a time on two weighted paths: each one's
    per-request counts are exactly what the server counted (the load drains before a
    member leaves, and a member that left is never loaded again), the tables, CSV,
    Markdown, chart and JUnit carry the names, and the memory and CPU cells of the one
    without --pid say "not sampled" rather than 0."""
    a, b = two_servers
    out = {k: tmp_path / f"run.{k}" for k in ("json", "csv", "md", "svg", "xml")}
    r = _bench(
        "--url",
        f"mine={a.url('')}",
        "--pid",
        str(a.proc.pid),
        "--url",
        b.url(""),
        "--path",
        "/hello:3",
        "--path",
        "/json:1",
        "--isolation",
        "rotate",
        "--json",
        str(out["json"]),
        "--csv",
        str(out["csv"]),
        "--markdown",
        str(out["md"]),
        "--chart",
        str(out["svg"]),
        "--junit",
        str(out["xml"]),
    )
    assert r.returncode == 0, r.stdout + r.stderr
    other = f"127.0.0.1:{b.port}"
    run = json.loads(out["json"].read_text())
    stacks = {st["name"]: st for st in run["stacks"]}
    assert list(stacks) == ["mine", other]
    assert (stacks["mine"]["url"], stacks["mine"]["sampled"]) == (a.url(""), True)
    assert (stacks[other]["url"], stacks[other]["sampled"]) == (b.url(""), False)
    assert stacks["mine"]["levels"][0]["memory_after"]["rss"] > 1_000_000
    for name, server in (("mine", a), (other, b)):
        served = server.stats()["by_path"]
        paths = {p["name"]: p for p in stacks[name]["paths"]}
        for path in ("/hello", "/json"):
            p = paths[path]
            assert p["sent"] == p["answered"] == served[path], (name, path, p, served)
        assert abs(paths["/hello"]["sent"] - 3 * paths["/json"]["sent"]) <= 3
    rows = {row["stack"]: row for row in csv.DictReader(io.StringIO(out["csv"].read_text()))}
    assert int(rows["mine"]["rss_after"]) > 1_000_000
    assert rows[other]["rss_after"] == rows[other]["cpu_percent"] == "not sampled"
    md = out["md"].read_text()
    line = next(x for x in md.splitlines() if x.startswith(f"| {other} |"))
    assert line.endswith("| not sampled | not sampled |"), line
    assert f"(started by you: {b.url('')}, not sampled)" in md
    assert "mine" in out["svg"].read_text() and other in out["svg"].read_text()
    cases = ET.parse(out["xml"]).getroot().iter("testcase")
    figures = {
        c.get("classname"): c.findtext("system-out", "") for c in cases if c.get("name") == "c=4"
    }
    assert "RSS after" in figures["mine"]
    assert "not sampled" in figures[other]
    assert other in r.stdout and "not sampled" in r.stdout  # the table printed

    # the gate: a run against itself passes, and the memory rule of the server without
    # --pid is said not to be judged rather than compared as zeros
    r = _bench(
        "--url",
        f"mine={a.url('')}",
        "--pid",
        str(a.proc.pid),
        "--url",
        b.url(""),
        "--path",
        "/hello:3",
        "--path",
        "/json:1",
        "--isolation",
        "rotate",
        "--baseline",
        str(out["json"]),
        "--fail-on",
        "qps<-95%,rss>+200%",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"(not judged: {other} @ c=4: rss>+200% (not sampled: no --pid))" in r.stdout
    assert "(not judged: mine" not in r.stdout and "gate passed" in r.stdout


def test_a_server_that_is_not_there_fails_the_run_and_names_it(server: TestServer, tmp_path):
    out = tmp_path / "run.json"
    r = _bench(
        "--url", "gone=http://127.0.0.1:9", "--url", f"up={server.url('/hello')}",
        "--json", str(out), "--no-progress",
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert "gone: not measured (not reachable at http://127.0.0.1:9: " in r.stdout
    assert server.stats()["by_path"]["/hello"] > 10  # the other one was raced
    # the servers started by hand are placed as members: the isolation recorded is the
    # one the run used, for two members on this machine's cores
    from stackrace.race.bench.driver import plan_placement
    from stackrace.settings.race_settings import RaceSettings

    placement, _ = plan_placement(RaceSettings(), 2)
    assert json.loads(out.read_text())["settings"]["isolation"] == placement.isolation


def test_url_options_are_checked_before_anything_starts(server: TestServer):
    url = server.url("")
    cases = {
        ("--url", "bad name=" + url): "a name is up to 60 letters",
        ("--url", url, "--url", url): "the name '127.0.0.1:",
        ("--url", url, "--pid", "1", "--pid", "2"): "--pid 2 has no --url to go with",
        ("--url", url, "--pid", "999999999"): "--pid 999999999 (for --url 127.0.0.1:",
        ("--url", "far=http://10.254.0.1:80"): "--url far '10.254.0.1' is not on loopback",
        ("--url", f"x={url}/hello", "--path", "/json"): "has a path of its own",
        ("--url", "x=ftp://127.0.0.1:9"): "only http:// and https:// URLs",
        ("--url", "x=http://127.0.0.1:9/a b"): "a space is not allowed in a URL",
        ("--url", f"gunicorn-sync={url}", "--stacks", "gunicorn-sync"): "is taken",
    }
    for args, expected in cases.items():
        r = _bench(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], (args, r.stderr)
    assert server.stats()["requests"] == 0  # nothing was loaded
