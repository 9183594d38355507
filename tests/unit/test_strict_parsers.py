"""Parsers mean what they say (issue 37): each value a user writes is read one way, the
way its help and error say, or refused in one line, never read as something else.

`--slo` and `--fail-on` terms, `--path` weights, the request's framing headers, tune's
lists, `--cpus`, `--pid`, the hint of a refusal at readiness, the figures of a run file
or a recording, and who limited a rate-mode run. The refusals as a user meets them, in
the real CLI: tests/hardening/test_parsers_cli.py."""

from __future__ import annotations

import gzip
import json
import os
import re
from pathlib import Path

import msgspec
import pytest

from stackrace.engine.model import LatencySummary, WindowStats
from stackrace.engine.request import RequestError, build_request, check_framing
from stackrace.race.core.placement import cpus_problem
from stackrace.race.core.urls import pid_problem
from stackrace.race.playback.recording import RecordingError, load_recording
from stackrace.report import gate
from stackrace.report.schema import loads
from stackrace.report.slo import Slo
from stackrace.rules import accounting
from stackrace.settings import terms
from stackrace.settings.scenario import ScenarioError, kinds_from, parse_path_item
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.probe import ProbeResponse
from stackrace.stacks.refusal import body_text, hint, refusal_line
from stackrace.stacks.variants import resolve
from tests.helpers import ROOT

# --- --slo and --fail-on ------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        # p101 was read as p10.1 and "met"
        ("p101<5ms", "a percentile is p0 to p100 with at most two decimals"),
        ("p99.999<5ms", "at most two decimals"),
        ("p100.5<5ms", "a percentile is p0 to p100"),
        ("p99999<5ms", "a percentile is p0 to p100"),
        # 1e308 s in µs is an infinity: it printed "inf s"
        ("p99<1e308s", "finite"),
        ("p99<2000000000s", "at most 1h"),
        # an objective is a target to stay below
        ("p99>5ms", "a target to stay below"),
        ("p99>=5ms", "a target to stay below"),
        ("failures<200%", "failures is a share: at most 100%"),
        ("waiting<101%", "at most 100%"),
        ("qps<5000", "throughput is not an objective"),
        ("p99<0ms", "a target of 0 can never be met"),
        ("p99<=0ms", "a target of 0 can never be met"),
        ("qps<-10%", "an objective is absolute"),
        ("", "no rule given"),
        (" , ", "no rule given"),
    ],
)
def test_an_objective_that_means_something_else_is_refused(spec: str, words: str) -> None:
    with pytest.raises(terms.TermError, match=words) as caught:
        terms.check_objective(spec)
    assert "--slo" in str(caught.value)


def test_an_objective_error_shows_the_objectives_syntax_not_the_gates() -> None:
    with pytest.raises(terms.TermError) as caught:
        terms.check_objective("p99 fast")
    text = str(caught.value)
    assert "METRIC<TARGET" in text and "p99<50ms" in text
    assert "METRIC>VALUE" not in text and "CHANGE%" not in text


@pytest.mark.parametrize(
    ("spec", "metric", "quantile", "value"),
    [
        ("p10.1<5ms", "p10.1", 0.101, 5000.0),  # written with its dot, read as written
        ("p99.9<5ms", "p999", 0.999, 5000.0),
        ("p999<5ms", "p999", 0.999, 5000.0),  # the short forms of the tail
        ("p9999<1s", "p9999", 0.9999, 1e6),
        ("p99.95<1s", "p9995", 0.9995, 1e6),
        ("p5<1ms", "p5", 0.05, 1000.0),
        ("p0<1ms", "p0", 0.0, 1000.0),  # the fastest answer
        ("p100<1ms", "max", None, 1000.0),  # the slowest: max
        ("p99<=5ms", "p99", 0.99, 5000.0),
        ("failures<=0%", "failures", None, 0.0),  # no failure at all
        ("mean<20ms", "mean", None, 20000.0),
    ],
)
def test_known_percentiles_read_as_written(
    spec: str, metric: str, quantile: float | None, value: float
) -> None:
    (t,) = terms.check_objective(spec)
    assert (t.metric, t.quantile, t.value) == (metric, quantile, value)


def test_the_gate_refuses_the_same_percentiles_and_an_empty_rule() -> None:
    for bad in ("p101>5ms", "p99>1e308s", "failures>200%"):
        with pytest.raises(terms.TermError, match="--fail-on"):
            gate.parse_rules(bad)
    # `--fail-on ''` made the gate vanish without a word
    for empty in ("", ",", " "):
        with pytest.raises(terms.TermError, match="--fail-on: no rule given"):
            gate.check_rules(empty, None)
    # a gate may still fail when a latency rises (>), which an objective may not say
    assert [t.op for t in gate.parse_rules("p99>50ms,qps<-10%")] == [">", "<"]


def test_p0_reads_the_fastest_answer_without_a_histogram() -> None:
    lat = LatencySummary(count=10, mean=500.0, p50=400, p90=800, p99=900, p999=950, max=990, min=7)
    w = WindowStats(seconds=1.0, sent=10, requests=10, ok=10, rps=10.0, latency=lat)
    verdict = Slo.parse("p0<10us").judge_window(w)
    assert verdict.meets and verdict.checks[0].value == 7.0


# --- --path ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("/search?from=10:30", ("/search?from=10:30", 1)),  # was /search?from=10, weight 30
        ("/h?ip=::1", ("/h?ip=::1", 1)),  # was /h?ip=:
        ("/a:3", ("/a", 3)),
        ("/a", ("/a", 1)),
        ("/t/12:30:1", ("/t/12:30", 1)),  # a path ending in :N, given with its weight
        ("/a:b", ("/a:b", 1)),
    ],
)
def test_a_path_weighs_only_by_its_one_rule(text: str, parsed: tuple[str, int]) -> None:
    assert parse_path_item(text) == parsed


@pytest.mark.parametrize("text", ["/a:0", "/a:-1", "/a:1001"])
def test_a_weight_out_of_range_is_an_error_never_a_path(text: str) -> None:
    # /a:-1 became a path while /a:0 was an error
    with pytest.raises(
        ScenarioError, match=re.escape("the weight after the last ':' must be 1..1000")
    ):
        parse_path_item(text)


def test_the_shipped_examples_weights_still_read() -> None:
    kinds = kinds_from(["/:3", "/slow:1"])
    assert kinds is not None and [(k.target, k.weight) for k in kinds] == [("/", 3), ("/slow", 1)]


# --- the request as written, or refused ------------------------------------------------


def test_a_user_transfer_encoding_chunks_the_body_and_sends_no_length() -> None:
    raw = build_request(
        "http://127.0.0.1:8000/x", "POST", [("Transfer-Encoding", "chunked")], b"hello"
    )
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"Transfer-Encoding: chunked" in head and b"content-length" not in head.lower()
    assert body == b"5\r\nhello\r\n0\r\n\r\n"


@pytest.mark.parametrize(
    ("method", "headers", "body", "words"),
    [
        # the request-smuggling shape: both framings at once
        ("POST", [("Transfer-Encoding", "chunked"), ("Content-Length", "5")], b"hello", "not both"),
        ("GET", [("Content-Length", "999999")], b"", "does not match the body (0 bytes)"),
        ("POST", [("Content-Length", "4")], b"hello", "does not match the body (5 bytes)"),
        ("POST", [("Content-Length", "5"), ("Content-Length", "6")], b"hello", "does not match"),
        ("POST", [("Transfer-Encoding", "gzip, chunked")], b"x", "only 'chunked'"),
    ],
)
def test_framing_headers_that_disagree_with_the_body_are_refused(
    method: str, headers: list[tuple[str, str]], body: bytes, words: str
) -> None:
    with pytest.raises(RequestError, match=re.escape(words)):
        check_framing(method, headers, body)
    with pytest.raises(RequestError, match=re.escape(words)):
        build_request("http://127.0.0.1:8000/x", method, headers, body)


def test_framing_is_refused_before_anything_starts() -> None:
    with pytest.raises(ScenarioError, match=r"--path: /: Content-Length '9' does not match"):
        kinds_from(["/"], headers=["Content-Length: 9"])
    kinds = kinds_from(["/"], method="POST", headers=["Content-Length: 2"], body="hi")
    assert kinds is not None  # a length that is the body's goes out as written


# --- tune's lists ------------------------------------------------------------------------


def test_tune_refuses_values_above_the_ceiling_and_settings_the_stack_lacks() -> None:
    from stackrace.commands.tune_space import axes

    stacks = load_stacks()
    uvicorn = resolve("uvicorn", stacks)
    # `tune uvicorn --workers 1,999` dropped 999 silently
    with pytest.raises(ValueError, match=r"--workers 999: is above this machine's ceiling"):
        axes(uvicorn, 2, "1,999", None)
    # `--threads` on a stack without threads was ignored
    with pytest.raises(ValueError, match="--threads: uvicorn has no threads setting"):
        axes(uvicorn, 2, None, "1,4")
    assert axes(uvicorn, 2, "1,2", None)["workers"] == ["1", "2"]


def test_tune_sweeps_a_variant_without_redoing_what_it_fixes() -> None:
    from stackrace.commands.tune_space import axes
    from stackrace.race.bench.tune_search import Space

    stacks = load_stacks()
    # `tune uvicorn:workers=2 --workers 1,2` made "uvicorn:workers=2:workers=1"
    with pytest.raises(ValueError, match="sets workers already"):
        axes(resolve("uvicorn:workers=2", stacks), 2, "1,2", None)
    fixed = resolve("gunicorn-gthread:threads=2", stacks)
    grid = axes(fixed, 2, "1,2", None)
    assert grid == {"workers": ["1", "2"], "threads": ["2"]}  # threads as the variant says
    space = Space({"gunicorn-gthread": grid})
    names = [space.name("gunicorn-gthread", p) for p in space.points("gunicorn-gthread")]
    assert names == [
        "gunicorn-gthread:workers=1,threads=2",
        "gunicorn-gthread:workers=2,threads=2",
    ]
    for name in names:
        assert resolve(name, stacks).overrides["threads"] == "2"


# --- --cpus and --pid --------------------------------------------------------------------


def test_cpus_beyond_the_machine_are_refused() -> None:
    assert "at most 1 core here: 2 usable (one is the load engine's)" in cpus_problem(2, [0, 1])
    assert cpus_problem(99, [0, 1]).startswith("--cpus 99:")
    assert cpus_problem(1, [0, 1]) == "" and cpus_problem(None, [0]) == ""
    assert cpus_problem(1, [0]) == ""  # one core: everything shares it
    assert cpus_problem(4, [0, 1, 2, 3], engine_here=False) == ""  # the engines elsewhere


def test_a_pid_that_is_stackrace_or_above_it_is_refused() -> None:
    # `--pid 1` showed the whole machine's process tree as the server's
    assert "stackrace or a process above it" in pid_problem(1, 8000)
    assert "stackrace or a process above it" in pid_problem(os.getpid(), 8000)
    assert pid_problem(2**22 + 12345, 8000) == "no such process"


# --- a refusal at readiness, in one line --------------------------------------------------

DJANGO_400 = b"""<!doctype html>
<html lang="en">
<head>
  <title>Bad Request (400)</title>
</head>
<body>
  <h1>Bad Request (400)</h1><p></p>
</body>
</html>
"""


def _resp(status: int, body: bytes, ctype: str = "text/html") -> ProbeResponse:
    return ProbeResponse(status, {"content-type": ctype}, body, 0.01)


def test_a_4xx_at_readiness_is_one_line_with_the_text_and_a_hint() -> None:
    line = refusal_line(_resp(400, DJANGO_400), {}, "200-399")
    assert line == (
        '400 "Bad Request (400)", not 200-399: the app may reject the Host header: '
        "set -H 'Host: …' or its allowed hosts"
    )
    sent = {"Host": "myapp.example.com"}
    assert "'myapp.example.com': check its allowed hosts" in hint(400, sent)
    assert "Authorization" in hint(401, {}) and "--path" in hint(404, {})
    assert refusal_line(_resp(418, b""), {}, "200") == "418 (no body), not 200"


def test_the_body_text_is_its_first_line_without_markup_or_escapes() -> None:
    page = b"<html><body><script>x()</script><p>Access &amp; denied</p><p>more</p></body></html>"
    assert body_text(_resp(403, page)) == "Access & denied"
    assert body_text(_resp(400, b"\n\n  plain text\nsecond", "text/plain")) == "plain text"
    # a server's bytes never reach the terminal as control sequences
    assert (
        body_text(_resp(400, b"\x1b[2J\x1b]0;pwned\x07oops", "text/plain")) == "[2J ]0;pwned oops"
    )
    assert len(body_text(_resp(400, b"x" * 5000, "text/plain"))) == 120


# --- figures no measurement gives ---------------------------------------------------------


def test_a_run_file_with_a_negative_figure_is_refused_naming_file_and_place() -> None:
    data = json.loads((ROOT / "results" / "vps-2011.json").read_bytes())
    loads(json.dumps(data).encode(), "vps.json")  # as written: read
    data["stacks"][0]["levels"][0]["window"]["rps"] = -100.0  # a baseline's -100 req/s
    with pytest.raises(ValueError, match=r"^old\.json: stacks\[0\]\.levels\[0\]\.window\.rps"):
        loads(json.dumps(data).encode(), "old.json")
    with pytest.raises(ValueError, match=r"^bad\.json: not a run file"):
        loads(b'{"schema": 2, "x": ', "bad.json")


def _recording(tmp_path: Path, edit: object) -> list[dict[str, object]]:
    """A small recording: a header, a member and three ticks, edited by `edit`."""
    from stackrace.settings.race_settings import RaceSettings

    settings = msgspec.to_builtins(RaceSettings())
    records: list[dict[str, object]] = [
        {"type": "header", "version": 1, "created": "2026-11-27T00:00:00+0000",
         "settings": settings},
        {"type": "member", "t": 0.0, "member": {"id": "a", "name": "a", "family": "sync"}},
    ]  # fmt: skip
    for i in range(1, 4):
        records.append({"type": "command", "t": i * 0.25, "what": "concurrency", "value": 10})
    assert callable(edit)
    edit(records)
    return records


def _write(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_bytes(b"".join(json.dumps(r).encode() + b"\n" for r in records))
    return path


def test_a_recording_with_a_negative_figure_or_a_far_time_is_refused(tmp_path: Path) -> None:
    def negative(rs: list[dict[str, object]]) -> None:
        rs[3]["value"] = -4000

    def far(rs: list[dict[str, object]]) -> None:
        rs[-1]["t"] = 1e12  # played as "0:05 / 16666666666:40"

    def back(rs: list[dict[str, object]]) -> None:
        rs[-1]["t"] = 0.1

    for edit, words in ((negative, "value = -4000"), (far, "more than a week"), (back, "back")):
        path = _write(tmp_path / f"{edit.__name__}.jsonl", _recording(tmp_path, edit))
        with pytest.raises(RecordingError, match=words) as caught:
            load_recording(path)
        assert str(caught.value).startswith(f"{path}: line ")


def test_a_recording_cut_short_plays_and_says_so(tmp_path: Path) -> None:
    whole = _write(tmp_path / "whole.jsonl", _recording(tmp_path, lambda rs: None))
    assert not load_recording(whole).truncated
    raw = whole.read_bytes()
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(raw[:-10])
    rec = load_recording(cut)
    assert rec.truncated and len(rec.records) == 3
    packed = tmp_path / "cut.jsonl.gz"
    packed.write_bytes(gzip.compress(raw)[:-12])
    assert load_recording(packed).truncated


def test_a_damaged_recording_is_refused_at_its_first_line(tmp_path: Path) -> None:
    junk = tmp_path / "junk.jsonl"
    junk.write_bytes(b"x" * (17 << 20))  # one line longer than any record
    with pytest.raises(RecordingError, match=r"junk\.jsonl: line 1: longer than 16 MiB"):
        load_recording(junk)


# --- who limited a rate-mode run ----------------------------------------------------------


def test_connections_that_held_the_requests_are_named_not_the_server() -> None:
    lat = LatencySummary(count=24_000, mean=125.0, p50=120, p90=200, p99=600, p999=900, max=5000)
    w = WindowStats(
        seconds=2.0, sent=100_000, waiting=76_000, unsent=75_998, requests=24_000, ok=24_000,
        rps=12_000.0, latency=lat, latency_uncorrected=lat, oldest_wait_us=1_500_000,
    )  # fmt: skip
    line = accounting.connections_limit(w, 2, 50_000)
    assert "the 2 connections (-c) limited the run" in line and "16,000 req/s" in line
    assert "needs -c 7 or more" in line and "did not keep up" not in line
    # requests waiting at the server, not in the engine: not the connections' doing
    sent = msgspec.structs.replace(w, unsent=10)
    assert accounting.connections_limit(sent, 2, 50_000) == ""
