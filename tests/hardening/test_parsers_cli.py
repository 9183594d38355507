"""Parsers mean what they say, as a user meets them (issue 37): the real `stackrace`
command, one line and exit 2 for what it refuses, and what it accepts sent exactly as
written (a server here records the raw bytes it was sent).

The parsers themselves, case by case: tests/unit/test_strict_parsers.py."""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import subprocess
import sys
import threading
import venv
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackrace.db import ManagedMariaDB
from tests.hardening.cli_forks import run_forked
from tests.hardening.conftest import assert_one_line_error
from tests.helpers import CLI, ROOT, TestServer, free_port, needs_mariadb, run_cli


class RawServer:
    """A loopback HTTP/1.1 server in a thread that keeps every request's raw bytes
    (framed by Content-Length or chunked, as a server reads them) and answers 200."""

    def __init__(self) -> None:
        self.requests: list[bytes] = []
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        with conn, contextlib.suppress(OSError):
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, _, buf = buf.partition(b"\r\n\r\n")
                lower = head.lower()
                if b"transfer-encoding: chunked" in lower:
                    while b"0\r\n\r\n" not in buf:
                        buf += conn.recv(65536)
                    end = buf.index(b"0\r\n\r\n") + 5
                else:
                    length = 0
                    for line in lower.split(b"\r\n")[1:]:
                        if line.startswith(b"content-length:"):
                            length = int(line.split(b":", 1)[1])
                    while len(buf) < length:
                        buf += conn.recv(65536)
                    end = length
                self.requests.append(head + b"\r\n\r\n" + buf[:end])
                buf = buf[end:]
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def raw_server() -> Iterator[RawServer]:
    s = RawServer()
    yield s
    s.close()


# --- requests go out as written, or are refused -------------------------------------


def test_a_user_transfer_encoding_goes_out_chunked_without_a_length(raw_server: RawServer) -> None:
    r = run_cli(
        "load", raw_server.url("/in"), "-m", "POST", "--body", "hello",
        "-H", "Transfer-Encoding: chunked", "-c", "1", "-d", "0.3s",
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    first = raw_server.requests[0]
    head, _, body = first.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head, first
    assert b"content-length" not in head.lower(), first  # never both: request smuggling
    assert body == b"5\r\nhello\r\n0\r\n\r\n", first


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["-H", "Content-Length: 999999"], "Content-Length '999999' does not match the body"),
        (
            ["-m", "POST", "--body", "hi", "-H", "Transfer-Encoding: chunked",
             "-H", "Content-Length: 2"],
            "not both",
        ),
        (["-m", "POST", "--body", "hi", "-H", "Content-Length: 3"], "does not match the body"),
    ],
)  # fmt: skip
def test_framing_headers_that_disagree_with_the_body_are_refused(
    raw_server: RawServer, args: list[str], words: str
) -> None:
    r = run_forked("load", raw_server.url("/"), "-c", "1", "-d", "0.3s", *args)
    assert_one_line_error(r, "stackrace load:", words)
    assert raw_server.requests == []  # nothing was sent


def test_a_path_with_a_query_is_sent_whole(raw_server: RawServer) -> None:
    r = run_cli(
        "load", raw_server.url(), "--path", "/search?from=10:30", "--path", "/h?ip=::1",
        "--path", "/w:2", "-c", "1", "-d", "0.3s",
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    lines = {req.split(b"\r\n", 1)[0] for req in raw_server.requests}
    assert lines == {
        b"GET /search?from=10:30 HTTP/1.1",
        b"GET /h?ip=::1 HTTP/1.1",
        b"GET /w HTTP/1.1",
    }, lines
    bad = run_forked("load", raw_server.url(), "--path", "/a:-1", "-c", "1", "-d", "0.3s")
    assert_one_line_error(bad, "--path", "must be 1..1000, got -1")


def test_clients_of_your_own_as_the_help_writes_them(raw_server: RawServer) -> None:
    ok = run_cli(
        "load", raw_server.url("/"), "--clients", "mine:upload=5ms", "-c", "1", "-d", "0.3s"
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "mine:upload=5ms" in ok.stdout
    twice = run_forked("load", raw_server.url("/"), "--clients", "slow:upload=5ms,upload=9ms")
    assert_one_line_error(twice, "--clients", "upload is given twice")


# --- objectives and gates ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("slo", "words"),
    [
        ("p101<5ms", "a percentile is p0 to p100"),
        ("p99<1e308s", "finite"),
        ("p99>5ms", "a target to stay below"),
        ("failures<200%", "at most 100%"),
        ("p99 fast", "METRIC<TARGET"),
    ],
)
def test_an_objective_that_would_mean_something_else_is_refused(slo: str, words: str) -> None:
    line = assert_one_line_error(
        run_forked("load", "http://127.0.0.1:9/", "--slo", slo), "--slo", words
    )
    assert "METRIC>VALUE" not in line  # --fail-on's syntax is not the objective's


def test_an_empty_gate_is_an_error_not_a_gate_that_vanished() -> None:
    run = str(ROOT / "results" / "vps-2011.json")
    assert_one_line_error(run_forked("report", run, "--fail-on", ""), "--fail-on: no rule given")


# --- values beyond the machine -----------------------------------------------------------


def test_tune_refuses_values_above_the_ceiling_and_settings_the_stack_lacks() -> None:
    r = run_forked("tune", "uvicorn", "--workers", "1,999", "--slo", "p99<5ms")
    assert_one_line_error(r, "--workers 999", "ceiling")
    r = run_forked("tune", "uvicorn", "--threads", "1,4", "--slo", "p99<5ms")
    assert_one_line_error(r, "--threads: uvicorn has no threads setting")
    r = run_forked("tune", "--url", "http://127.0.0.1:9/", "--workers", "4", "--slo", "p99<5ms")
    assert_one_line_error(r, "a server you started (--url) is measured as it runs")


def test_cpus_beyond_the_machine_and_port_zero_are_refused() -> None:
    r = run_forked("bench", "--stacks", "uvicorn", "--cpus", "99", "--duration", "1s")
    assert_one_line_error(r, "--cpus 99: a stack can have at most")
    r = run_forked("db", "up", "--port", "0")
    assert_one_line_error(r, "--port", "a TCP port from 1 to 65535")


def test_a_pid_must_hold_the_urls_listening_socket() -> None:
    server = TestServer()
    idle = subprocess.Popen(["sleep", "30"])
    try:
        url = server.url("/hello")
        base = ("bench", "--url", url, "--concurrency", "1", "--duration", "0.5s", "--no-progress")
        # --pid 1 was the whole machine's process tree, sampled as the server's
        assert_one_line_error(
            run_forked(*base, "--pid", "1"), "--pid 1", "stackrace or a process above"
        )
        line = assert_one_line_error(run_forked(*base, "--pid", str(idle.pid)), f"--pid {idle.pid}")
        assert f"does not listen on port {server.port}" in line
        ok = run_cli(*base, "--pid", str(server.proc.pid))
        assert ok.returncode == 0, ok.stdout + ok.stderr
    finally:
        idle.kill()
        idle.wait()
        server.kill()


# --- files with figures no run gives -------------------------------------------------------


def test_a_negative_baseline_or_recording_is_refused_naming_the_file(tmp_path: Path) -> None:
    data = json.loads((ROOT / "results" / "vps-2011.json").read_bytes())
    data["stacks"][0]["levels"][0]["window"]["rps"] = -100.0
    old = tmp_path / "old.json"
    old.write_text(json.dumps(data))
    run = str(ROOT / "results" / "vps-2011.json")
    # "qps -100 req/s → 2,935 req/s (-3034.7 %)" was shown
    line = assert_one_line_error(run_forked("report", run, "--baseline", str(old)), f"{old}:")
    assert "window.rps = -100.0" in line
    junk = tmp_path / "junk.json"
    junk.write_bytes(b'{"schema": 2, "stacks": [')
    assert_one_line_error(run_forked("--ghost", str(junk), "--stacks", "uvicorn"), f"{junk}:")
    records = [
        {"type": "header", "version": 1, "created": "2026-11-27T00:00:00+0000", "settings": {}},
        {"type": "member", "t": 0.0, "member": {"id": "a", "name": "a", "family": "sync"}},
        {"type": "command", "t": 0.5, "what": "concurrency", "value": -4000},
    ]  # fmt: skip
    rec = tmp_path / "rec.jsonl.gz"
    rec.write_bytes(gzip.compress(b"".join(json.dumps(x).encode() + b"\n" for x in records)))
    assert_one_line_error(run_forked("replay", str(rec)), f"{rec}: line 3", "value = -4000")


# --- who limited the run -------------------------------------------------------------------


def test_a_rate_the_connections_cannot_carry_is_put_on_the_connections() -> None:
    server = TestServer()
    try:
        r = run_cli("load", server.url("/hello"), "-c", "2", "--rate", "50000", "-d", "1s")
    finally:
        server.kill()
    assert r.returncode in (0, 1), r.stdout + r.stderr
    assert "the 2 connections (-c) limited the run" in r.stdout, r.stdout
    assert "did not keep up" not in r.stdout, r.stdout


# --- a server missing from the app's interpreter ---------------------------------------------


def test_a_named_server_missing_from_the_apps_python_names_its_fix(tmp_path: Path) -> None:
    """`--python` a venv without gunicorn: the named server is refused before anything
    starts, with the `stackrace install --into` line (it was "python exited with code 1
    before it was ready", with no log tail and no fix)."""
    env = tmp_path / "venv"
    venv.create(env, with_pip=False)
    (tmp_path / "wapp.py").write_text(
        "def app(environ, start_response):\n"
        "    start_response('200 OK', [('Content-Type', 'text/plain')])\n"
        "    return [b'hi']\n"
    )
    python = env / "bin" / "python"
    r = run_forked(
        "bench", "--app", str(tmp_path / "wapp.py") + ":app", "--python", str(python),
        "--stacks", "gunicorn-sync[app]", "--duration", "1s",
    )  # fmt: skip
    assert_one_line_error(
        r, "gunicorn-sync[app]: cannot run with", f"stackrace install --into {python} gunicorn-sync"
    )
    assert sys.executable != str(python)


# --- the private database, started twice at once --------------------------------------------


@needs_mariadb
def test_a_second_db_up_at_once_says_it_found_it_starting(tmp_path: Path) -> None:
    """Two `db up` at once: one starts the server, the other waits for it and says so
    (both printed "started" before)."""
    root = tmp_path / "db"
    port = str(free_port())
    argv = [*CLI, "db", "up", "--dir", str(root), "--port", port]
    try:
        procs = [
            subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)
        ]
        outs = [p.communicate(timeout=180) for p in procs]
        assert all(p.returncode == 0 for p in procs), outs
        said = sorted(out for out, _ in outs)
        assert sum("private MariaDB started in" in s for s in said) == 1, said
        assert sum("already starting/running" in s for s in said) == 1, said
    finally:
        ManagedMariaDB(root).reset(wipe=True)
