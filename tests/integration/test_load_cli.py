"""`stackrace load` as a user runs it: a real process against a real local server."""

from __future__ import annotations

import json

from hdrh.histogram import HdrHistogram

from tests.helpers import TestServer, run_cli


def test_summary_is_printed(server: TestServer):
    r = run_cli("load", server.url("/hello"), "-c", "5", "-d", "1s")
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
    data = json.loads(r.stdout)
    total = data["total"]
    assert total["requests"] > 20
    assert total["failures"]["http_status"] == total["requests"]
    assert total["status"]["503"] == total["requests"]
    assert data["engine"]["intervals"] >= 3
    h = HdrHistogram.decode(hdr.read_text().strip())
    assert h.get_total_count() == total["requests"]


def test_rate_mode_shows_both_latencies(server: TestServer):
    r = run_cli("load", server.url("/hello"), "-c", "4", "-d", "1s", "--rate", "200")
    assert r.returncode == 0, r.stderr
    assert "Latency (corrected)" in r.stdout and "Latency (uncorrected)" in r.stdout


def test_dead_target_is_failures_not_a_crash():
    r = run_cli("load", "http://127.0.0.1:9/", "-c", "2", "-d", "1s")
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
    assert r.returncode == 2 and "bad header" in r.stderr
