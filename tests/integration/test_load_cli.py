"""`stackrace load` as a user runs it: a real process against a real local server."""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

import jsonschema
from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

from stackrace.report.load import SCHEMA_FILE
from tests.helpers import TestServer, run_cli


@cache
def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA_FILE.read_text())


def load_json(stdout: str) -> Any:
    """`--json`'s document, validated against the shipped schema (report/load.schema.json):
    every test's run is a shape the contract must hold for (see the schema test below)."""
    doc = json.loads(stdout)
    jsonschema.validate(doc, _schema())
    assert doc["version"] == 1
    return doc


def test_summary_is_printed(server: TestServer):
    # half a second: the check is of the words and of the count against the server's
    r = run_cli("load", server.url("/hello"), "-c", "5", "-d", "0.5s")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    for word in ("Requests/sec:", "p99.9", "Failures: none", "Engine CPU:"):
        assert word in out, out
    served = server.stats()["by_path"]["/hello"]
    reported = int(next(line for line in out.splitlines() if "requests in" in line).split()[0])
    assert 0 <= served - reported <= 5


def test_json_output_and_hdr_export(server: TestServer, tmp_path):
    hdr = tmp_path / "run.hdr"
    r = run_cli(
        "load",
        server.url("/status?code=503"),
        "-c",
        "3",
        "-d",
        "1s",
        "--json",
        "--hdr-out",
        str(hdr),
    )
    # every request failed (503): the figures are still printed and written, and the
    # exit status says the run failed
    assert r.returncode == 1, r.stderr
    assert "every request failed" in r.stderr
    data = load_json(r.stdout)
    total = data["total"]
    assert total["requests"] > 20
    assert total["failures"]["http_status"] == total["requests"]
    assert total["status"]["503"] == total["requests"]
    assert data["engine"]["intervals"] >= 3
    h = _read_hlog(hdr)
    assert h.get_total_count() == total["requests"]


def _read_hlog(path) -> HdrHistogram:
    """--hdr-out's file through HdrHistogram's own interval-log reader."""
    h = HistogramLogReader(str(path), HdrHistogram(1, 10**9, 3)).get_next_interval_histogram()
    assert h is not None, path.read_text()
    return h


def test_weighted_paths_on_a_base_url_are_sent_in_proportion_and_counted_per_request(
    server: TestServer, tmp_path
):
    """`load http://host:port --path /a:3 --path /b:1`: one target, a weighted mix, each
    request's count in the summary and the JSON, and what the server counted between
    what was answered and what was sent."""
    base = server.url("")
    hdr = tmp_path / "mix.hlog"
    args = ("load", base, "--path", "/hello:3", "--path", "/json:1", "-c", "4", "-d", "1s")
    r = run_cli(*args, "--json", "--hdr-out", str(hdr))
    assert r.returncode == 0, r.stderr
    data = load_json(r.stdout)
    assert data["loaded"] == f"{base} /hello ×3, /json ×1"
    hello, js = data["requests"]
    assert (hello["target"], hello["weight"], js["target"], js["weight"]) == (
        "/hello",
        3,
        "/json",
        1,
    )
    served = server.stats()["by_path"]
    for req in (hello, js):
        assert req["sent"] == req["answered"] + req["failed"] + req["waiting"], req
        assert req["answered"] > 100 and req["failed"] == 0 and req["errors"] == 0, req
        assert req["answered"] <= served[req["target"]], (req, served)
    # the mix is a precomputed sequence (engine/mix.py): exact over every whole turn of 4
    assert abs(hello["sent"] - 3 * js["sent"]) <= 3, (hello, js)
    assert data["accounting"]["answered"] == hello["answered"] + js["answered"]
    assert data["unassigned"] == 0
    text = hdr.read_text()
    assert text.startswith(f"#stackrace load {base} /hello ×3, /json ×1\n"), text
    assert _read_hlog(hdr).get_total_count() == data["accounting"]["answered"]
    # the summary names the requests and gives each one's count
    r = run_cli(*args)
    assert r.returncode == 0, r.stderr
    assert f"stackrace load {base} /hello ×3, /json ×1" in r.stdout
    counted = re.findall(
        r"^ +(/\S+)(?: ×\d+)? +sent (\d+) = (\d+) answered \+ (\d+) failed \+ (\d+) waiting$",
        r.stdout,
        re.M,
    )
    assert [c[0] for c in counted] == ["/hello", "/json"], r.stdout
    for _, sent, answered, failed, waiting in counted:
        assert int(sent) == int(answered) + int(failed) + int(waiting) and int(answered) > 100


def test_several_urls_of_one_server_are_one_mix_and_a_path_never_answered_fails(
    server: TestServer,
):
    r = run_cli("load", server.url("/hello"), server.url("/nothere"), "-c", "2", "-d", "1s")
    assert r.returncode == 1, r.stderr
    assert f"stackrace load {server.url('')} /hello, /nothere" in r.stdout
    assert "answers not expected (404:" in r.stdout
    # the good path does not hide the one that never worked
    assert "stackrace load: /nothere: no expected answer in" in r.stderr
    assert "/hello:" not in r.stderr
    served = server.stats()["by_path"]
    assert served["/hello"] > 50 and served["/nothere"] > 50


def test_a_scenario_and_expected_statuses(server: TestServer, tmp_path):
    scenario = tmp_path / "requests.toml"
    scenario.write_text(
        '[[requests]]\npath = "/echo"\nmethod = "POST"\nbody = "hi"\nweight = 2\n'
        '[[requests]]\npath = "/status?code=404"\nexpect = "404"\nname = "gone"\n'
    )
    r = run_cli(
        "load", server.url(""), "--scenario", str(scenario), "-c", "2", "-d", "1s", "--json"
    )
    assert r.returncode == 0, r.stderr
    data = load_json(r.stdout)
    echo, gone = data["requests"]
    assert (echo["method"], echo["name"], gone["name"], gone["expect"]) == (
        "POST",
        "POST /echo",
        "gone",
        "404",
    )
    assert gone["errors"] == 0 and gone["status"] == {"404": gone["answered"]}
    assert data["total"]["failures"].get("http_status", 0) == 0  # expected: not failures
    # one URL that answers what it was told to expect: a success, counted as one request
    r = run_cli(
        "load", server.url("/status?code=404"), "--expect-status", "404", "-d", "1s", "--json"
    )
    assert r.returncode == 0, r.stderr
    (only,) = load_json(r.stdout)["requests"]
    assert only["target"] == "/status?code=404" and only["errors"] == 0 and only["answered"] > 0


def test_what_load_cannot_load_is_one_line():
    cases = {
        ("http://127.0.0.1:9/a", "http://127.0.0.1:8/b"): "the URLs name 2 servers",
        ("http://127.0.0.1:9/a", "--path", "/x"): "with --path or --scenario give one base URL",
        ("http://127.0.0.1:9", "--path", "/x", "--scenario", "s.toml"): "not both",
        ("http://127.0.0.1:9/a b",): "a space is not allowed in a URL",
        ("http://127.0.0.1:9", "--path", "x"): "argument --path: a path starts with '/'",
        ("http://10.254.0.1", "--path", "/a"): "--allow-remote",
    }
    for args, expected in cases.items():
        r = run_cli("load", *args, "-d", "1s")
        assert r.returncode == 2, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], (args, r.stderr)


def test_rate_mode_shows_both_latencies(server: TestServer):
    r = run_cli("load", server.url("/hello"), "-c", "4", "-d", "1s", "--rate", "200")
    assert r.returncode == 0, r.stderr
    assert "Latency (corrected)" in r.stdout and "Latency (uncorrected)" in r.stdout


def test_dead_target_is_failures_not_a_crash():
    r = run_cli("load", "http://127.0.0.1:9/", "-c", "2", "-d", "0.5s")
    # the summary is printed; the exit status says that nothing succeeded
    assert r.returncode == 1, r.stderr
    assert "refused" in r.stdout and "every request failed" in r.stderr
    assert "Traceback" not in r.stderr


def test_remote_target_refused_without_flag():
    r = run_cli("load", "http://10.254.0.1/", "-d", "1s")
    assert r.returncode == 2
    assert "--allow-remote" in r.stderr
    assert "Traceback" not in r.stderr


def test_bad_arguments_are_clear():
    r = run_cli("load", "ftp://127.0.0.1/")
    assert r.returncode == 2 and "only http:// and https://" in r.stderr
    r = run_cli("load", "http://127.0.0.1/", "-d", "soon")
    assert r.returncode == 2 and "argument -d/--duration: must be a duration" in r.stderr
    r = run_cli("load", "http://127.0.0.1/", "-H", "nocolon")
    # the request options are bench's (settings/race_settings.py): the same parser, the same line
    assert r.returncode == 2 and "argument -H/--header: a header is 'Name: value'" in r.stderr


def test_n_requests_sends_exactly_n_as_ab_and_hey(server: TestServer):
    """`load URL -n 1000`: exactly 1,000 sent, each answered, none more (the server counts)."""
    server.reset()
    r = run_cli("load", server.url("/hello"), "-n", "1000", "-c", "7", "--json")
    assert r.returncode == 0, r.stderr
    data = load_json(r.stdout)
    assert data["requests_asked"] == 1000 and data["duration"] is None
    acc = data["accounting"]
    assert (acc["sent"], acc["answered"], acc["waiting"]) == (1000, 1000, 0), acc
    assert server.stats()["by_path"]["/hello"] == 1000
    # after a warm-up: the warm-up apart, then exactly N
    server.reset()
    r = run_cli("load", server.url("/hello"), "-n", "300", "--warmup", "0.5s", "--json")
    assert r.returncode == 0, r.stderr
    data = load_json(r.stdout)
    assert data["accounting"]["sent"] == 300 and data["accounting"]["answered"] == 300
    warm = data["warmup_accounting"]["sent"]
    assert warm > 0 and server.stats()["by_path"]["/hello"] == 300 + warm
    # and the summary says what was asked
    r = run_cli("load", server.url("/hello"), "-n", "200")
    assert r.returncode == 0 and "200 requests asked" in r.stdout, r.stdout
    assert "Sent 200: 200 answered" in r.stdout, r.stdout


def test_z_is_a_duration_as_in_hey_and_oha_and_n_with_a_rate_is_refused(server: TestServer):
    # a slow path: the check is of the run's length, not of a throughput, so the load
    # need not burn the cores; the slack above is the one a 2 s run had (0.6 s)
    r = run_cli("load", server.url("/delay?ms=20"), "-z", "1s", "-c", "2", "--json")
    assert r.returncode == 0, r.stderr
    assert 0.9 <= load_json(r.stdout)["total"]["seconds"] <= 1.6
    r = run_cli("load", server.url("/hello"), "-n", "100", "--rate", "50")
    assert r.returncode == 2 and r.stderr.startswith("stackrace load: -n/--requests"), r.stderr


def test_an_all_404_load_leads_with_no_goodput_and_every_request_failed(server: TestServer):
    # the check is of the summary's lines: half a second of load writes them all
    r = run_cli("load", server.url("/status?code=404"), "-c", "5", "-d", "0.5s")
    assert r.returncode == 1, r.stderr
    lines = r.stdout.splitlines()
    assert lines[2].startswith("  Requests/sec: 0.00 answered with success (goodput)"), r.stdout
    assert lines[3].startswith("  Failures: 100.00% of "), r.stdout
    assert "(404: " in lines[3]
    # the latency comes after: a fast error is no success
    assert min(i for i, x in enumerate(lines) if x.lstrip().startswith("Latency")) > 3


def test_json_output_validates_against_the_shipped_schema(server: TestServer):
    """`--json` is a contract: every shape of run validates against report/load.schema.json.
    The other tests' `--json` runs are validated where they are read (load_json): a
    duration (-z), all failed (503), a weighted mix, a scenario with an expected status,
    -n with and without a warm-up. Here the shapes no other test reads as JSON."""
    runs = [
        ("load", server.url("/hello"), "--rate", "100", "-d", "0.5s", "--slo", "p99<1s"),
        ("load", "http://127.0.0.1:9/", "-d", "0.5s"),
    ]
    for args in runs:
        r = run_cli(*args, "--json")
        assert r.returncode in (0, 1), (args, r.stderr)
        load_json(r.stdout)
