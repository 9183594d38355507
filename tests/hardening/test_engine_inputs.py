"""The engine sends only what was asked, counts only what it asked for, and refuses a
rate it cannot schedule (docs/development.md, "Guarantees").

Real servers (tests/servers/testserver.py) and the real `stackrace load` command.
"""

from __future__ import annotations

import json

import pytest

from tests.hardening.cli_forks import run_forked
from tests.hardening.conftest import assert_one_line_error
from tests.helpers import TestServer, run_cli


def _load_json(*args: str) -> dict:
    r = run_cli("load", *args, "--json", "--no-progress")
    assert "Traceback" not in r.stderr, r.stderr
    return json.loads(r.stdout)


def _balanced(out: dict) -> None:
    a = out["accounting"]
    assert a["sent"] == a["answered"] + a["failed_no_answer"] + a["waiting"], a


def test_a_second_response_to_one_request_is_never_an_answer(server: TestServer):
    # the server answers every request twice, in one write: the second response was
    # here before the next request was written, so it can answer nothing
    out = _load_json(server.url("/twice"), "-c", "4", "-d", "0.5s")  # thousands of pairs
    read = server.stats()["by_path"]["/twice"]
    total = out["total"]
    assert 0 < out["accounting"]["answered"] <= read, (out["accounting"], read)
    assert total["unsolicited"] >= 1
    # the request written meanwhile on such a connection cannot be matched any more
    assert total["failures"].get("protocol", 0) >= 1
    _balanced(out)


def test_a_response_on_an_idle_connection_is_not_an_answer(server: TestServer):
    # rate mode leaves a keep-alive connection idle between requests; the server sends
    # an unasked response 5 ms after each answer
    out = _load_json(server.url("/extra?ms=5"), "--rate", "40", "-c", "2", "-d", "1s")
    read = server.stats()["by_path"]["/extra"]
    total = out["total"]
    assert 0 < out["accounting"]["answered"] <= read
    assert total["unsolicited"] >= 1
    # no answer with the age of the process clock (a response with no request in flight)
    assert total["latency"]["max"] < 1_000_000
    _balanced(out)


def test_an_informational_response_is_not_the_answer(server: TestServer):
    out = _load_json(server.url("/early"), "-c", "2", "-d", "0.5s")  # thousands of 103s
    read = server.stats()["by_path"]["/early"]
    total = out["total"]
    answered = out["accounting"]["answered"]
    assert read - 2 <= answered <= read  # at most the two in flight at the end
    assert total["failures"] == {} and total["unsolicited"] == 0
    assert total["status"] == {}  # no 103 counted among the answers


@pytest.mark.parametrize(
    "path",
    [
        "/hello world",
        "/hello\r\nX-Inj: 1",
        "/hello\nX-Inj: 1",
        "/a\tb",
        '/say"hi"',
        "/<x>",
    ],
)
def test_a_url_that_would_break_the_request_line_is_refused(idle_server: TestServer, path: str):
    r = run_forked("load", f"http://127.0.0.1:{idle_server.port}{path}", "-d", "1s")
    assert_one_line_error(r, "stackrace load:", "not allowed", rc=2)
    assert idle_server.stats()["requests"] == 0  # nothing was sent


@pytest.mark.parametrize(
    ("option", "value", "words"),
    [
        ("-m", "GET /evil HTTP/1.1\r\nX:", "method"),
        ("-m", "G(E)T", "method"),
        ("-H", "X Y: 1", "a header is 'Name: value'"),
        ("-H", "X-A: one\x01two", "header X-A: the value has control characters"),
        ("-H", "X-A: caf\u00e9", "header 'X-A'"),
    ],
)
def test_methods_and_headers_are_tokens_and_field_values(
    idle_server: TestServer, option: str, value: str, words: str
):
    r = run_forked("load", idle_server.url("/hello"), option, value, "-d", "1s")
    assert_one_line_error(r, "stackrace load:", words, rc=2)
    assert idle_server.stats()["requests"] == 0


@pytest.mark.parametrize("rate", ["1e12", "1e308", "50001"])
def test_a_rate_beyond_the_engine_is_refused_by_load(idle_server: TestServer, rate: str):
    r = run_forked("load", idle_server.url("/hello"), "--rate", rate, "-d", "1s")
    assert_one_line_error(r, "--rate", "beyond what 1 engine process can schedule", rc=2)
    assert idle_server.stats()["requests"] == 0


def test_a_rate_beyond_the_engine_is_refused_by_bench():
    r = run_forked("bench", "--stacks", "uvicorn", "--rate", "1e12")
    assert_one_line_error(r, "--rate", "at most 50,000", rc=2)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--clients", "slow:upload=fast"], "not a duration"),
        (["--slow-share", "20%"], "--slow-share needs --clients"),
    ],
)
def test_a_client_profile_is_checked_before_anything_starts(
    idle_server: TestServer, args: list[str], words: str
):
    # every rule of a profile: tests/unit/test_slow_clients_profile.py
    r = run_forked("load", idle_server.url("/hello"), "-d", "1s", *args)
    assert_one_line_error(r, words, rc=2)
    assert idle_server.stats()["requests"] == 0


def test_a_bad_client_profile_in_bench_is_one_line():
    r = run_forked("bench", "--stacks", "uvicorn", "--clients", "slow:upload=2h")
    assert_one_line_error(r, "--clients", rc=2)


def test_the_new_options_and_the_rate_ceiling_are_in_every_help():
    # every option is in each command's help, and the help itself prints (a bare % in a
    # help text made argparse raise); load's help also gives the rate's ceiling (one run
    # of `load --help` checks both: each run of the CLI costs ~0.4 CPU-s to start)
    for args in (["bench", "--help"], ["--help"], ["load", "--help"]):
        r = run_forked(*args)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        text = " ".join(r.stdout.split())
        for flag in ("--clients", "--slow-share", "--insecure", "--cacert", "--tls-resume"):
            assert flag in text, (args, flag)
        if args[0] == "load":
            assert "at most 50,000 per engine process" in text
