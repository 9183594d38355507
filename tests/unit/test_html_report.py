"""The run second by second and its HTML page, on runs of the synthetic engine.

The series is recorded by the same `run_bench` as a real bench (race/core/series.py on
the engine's every interval), so its rows must add up to what the engine counted; the
page is parsed as HTML (stdlib html.parser), and the charts' drawn points, turned back
into figures with the scale the page carries, must be the series' figures.
"""

from __future__ import annotations

import asyncio
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import msgspec
import pytest

from stackrace.engine.histogram import SparseHistogram
from stackrace.race.bench.driver import run_bench
from stackrace.race.bench.protocol import BenchPlan
from stackrace.race.live.demo import StackModel, synthetic_parts
from stackrace.report import html, series
from stackrace.report.html_chart import lttb
from stackrace.report.schema import BenchRun, dumps, loads
from stackrace.settings.race_settings import RaceSettings
from stackrace.stacks.definition import Stack, StackDef
from tests.unit.test_why_display import why, window

HOSTILE = "<script>alert(1)</script>"
# a run file's stack *name* follows the name rule (stacks/validate.py NAME_IN_FILE), its
# title is any printable text: the hostile text rides in the title
TITLES = {"hostile": HOSTILE}
# eight workers of 10 ms with a backlog of 8: refused connections past c=16
EIGHT = StackModel("eight", "sync", 8, 10.0, 0.1, backlog=8)
ASYNC = StackModel("async", "async", 10_000, 2.0, 0.5)


def _run(names: dict[str, StackModel], levels: list[int], duration: float = 3.0) -> BenchRun:
    parts, _ = synthetic_parts(names)
    stacks = [Stack(n, n, StackDef(command=["true"], title=TITLES.get(n, n))) for n in names]
    settings = RaceSettings(concurrency_levels=levels, duration=duration, warmup=0.5)
    return asyncio.run(run_bench(BenchPlan(stacks, settings), parts=parts))


@pytest.fixture(scope="module")
def run() -> BenchRun:
    return _run({"eight": EIGHT, "async": ASYNC, "hostile": EIGHT}, [4, 64])


class Page(HTMLParser):
    """Every start tag with its attributes, the text, and each chart's paths."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.scripts = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self.scripts += tag == "script"

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def parse(text: str) -> Page:
    p = Page()
    p.feed(text)
    return p


# --- the series ----------------------------------------------------------------------------


def test_every_stack_has_one_row_a_second_adding_up_to_the_engines_counts(run: BenchRun):
    for st in run.stacks:
        s = st.series
        assert s is not None and len(s) >= 2 * 3  # two levels of 3 s, warm-ups, set-up
        assert all(b - a == pytest.approx(1.0) for a, b in zip(s.t, s.t[1:], strict=False))
        # the rows hold the warm-ups too: at least every answer the levels measured
        assert sum(s.answered) >= sum(lv.requests for lv in st.levels)
        # each row's histogram holds its answers (the models record every one)
        hists = series.decode_hist(s.hist, len(s))
        assert [h.total for h in hists] == [sum(h.counts.values()) for h in hists]
        assert sum(h.total for h in hists) > 0
        # the levels are the ones raced, in order
        assert [lv for i, lv in enumerate(s.level) if i == 0 or lv != s.level[i - 1]] == [4, 64]


def test_percentiles_over_time_are_the_merged_histograms_not_averages(run: BenchRun):
    s = run.stacks[0].series
    assert s is not None
    hists = series.decode_hist(s.hist, len(s))
    for i, h in enumerate(hists):
        if s.answered[i]:
            assert h.percentiles((99.0,)) == [s.p99[i]]
    whole = series.merged(s, 0, len(s) - 1)
    by_hand = SparseHistogram()
    for h in hists:
        by_hand.add(h)
    assert whole.counts == by_hand.counts
    # the p99 of the whole is a p99 of the answers, and no average of the seconds' p99s
    mean_p99 = sum(s.p99) / len(s.p99)
    assert whole.percentiles((99.0,))[0] != pytest.approx(mean_p99, rel=1e-3)


def test_the_series_survives_the_run_file_and_a_damaged_one_is_refused(run: BenchRun):
    back = loads(dumps(run), "run.json")
    assert back.stacks[0].series == run.stacks[0].series
    raw = msgspec.json.decode(dumps(run))
    raw["stacks"][0]["series"]["p99"].pop()
    with pytest.raises(ValueError, match=r"run.json: eight: series column p99 has"):
        loads(msgspec.json.encode(raw), "run.json")
    raw = msgspec.json.decode(dumps(run))
    raw["stacks"][0]["series"]["hist"] = "bm90IHpsaWI="
    with pytest.raises(ValueError, match=r"run.json: eight: hist is not a series encoding"):
        loads(msgspec.json.encode(raw), "run.json")
    raw = msgspec.json.decode(dumps(run))
    raw["stacks"][0]["series"]["format"] = 9
    with pytest.raises(ValueError, match=r"series format 9, this stackrace reads 1"):
        loads(msgspec.json.encode(raw), "run.json")


def test_a_run_file_without_series_still_reads(run: BenchRun):
    raw = msgspec.json.decode(dumps(run))
    for st in raw["stacks"]:
        del st["series"]
    old = loads(msgspec.json.encode(raw), "old.json")
    assert all(st.series is None for st in old.stacks)
    page = html.page(old)
    assert "This run has no time series" in page and "<svg" not in page


def test_the_series_csv_is_one_row_per_stack_per_second(run: BenchRun):
    from stackrace.report.write import series_of

    text = series.to_csv(series_of(run))
    lines = text.strip().splitlines()
    assert lines[0].split(",") == list(series.CSV_COLUMNS)
    assert len(lines) - 1 == sum(len(st.series or []) for st in run.stacks)
    s = run.stacks[0].series
    assert s is not None
    first = lines[1].split(",")
    assert first[:3] == ["eight", f"{s.t[0]:g}", str(s.level[0])]
    # the sync model refuses past its backlog: the kinds are named in the rows
    assert any("refused=" in ln for ln in lines if ln.startswith("eight,"))


# --- drawing ---------------------------------------------------------------------------


def test_lttb_keeps_the_ends_and_the_spike():
    pts = [(float(i), 1.0) for i in range(3600)]
    pts[1234] = (1234.0, 500.0)
    out = lttb(pts, 200)
    assert len(out) == 200 and out[0] == pts[0] and out[-1] == pts[-1]
    assert (1234.0, 500.0) in out
    assert lttb(pts[:50], 200) == pts[:50]


def _chart_values(svg_attrs: dict[str, str | None], d: str) -> list[tuple[float, float]]:
    """A path's points as (seconds, value), by the scale the chart carries (as the
    page's hover script reads them)."""
    num = {k: float(svg_attrs[f"data-{k}"] or 0) for k in ("l", "r", "t", "b", "x1", "y0", "y1")}
    log = svg_attrs["data-log"] == "1"
    out = []
    points: list[tuple[float, float]] = []
    for run in filter(None, d.split("M")):
        first, _, steps = run.partition("l")
        x, y = map(float, first.split(","))
        points.append((x, y))
        for step in filter(None, steps.split(" ")):
            dx, dy = map(float, step.split(","))
            x, y = x + dx, y + dy
            points.append((x, y))
    for x, y in points:
        if True:
            t = (x - num["l"]) / (num["r"] - num["l"]) * num["x1"]
            f = (num["b"] - y) / (num["b"] - num["t"])
            if log:
                lo, hi = math.log10(num["y0"]), math.log10(num["y1"])
                v = 10 ** (lo + f * (hi - lo))
            else:
                v = num["y0"] + f * (num["y1"] - num["y0"])
            out.append((t, v))
    return out


def _charts(page: Page) -> list[tuple[str, dict[str, str | None], dict[str, str]]]:
    """(stack, the svg's attributes, {line name: path d}) in page order."""
    out: list[tuple[str, dict[str, str | None], dict[str, str]]] = []
    stack = ""
    for tag, attrs in page.tags:
        if tag == "figure":
            stack = attrs.get("data-stack") or ""
        elif tag == "svg":
            out.append((stack, attrs, {}))
        elif tag == "path" and out:
            out[-1][2][attrs.get("data-name") or ""] = attrs.get("d") or ""
    return out


def test_the_charts_draw_the_series_figures(run: BenchRun):
    page = parse(html.page(run))
    charts = _charts(page)
    by_stack = {st.name: html.aligned(st.series) for st in run.stacks if st.series}
    seen = set()
    for stack, attrs, paths in charts:
        s = by_stack[stack]
        for name, want in (("goodput", s.goodput), ("p99", [v / 1000 for v in s.p99])):
            if name not in paths:
                continue
            seen.add((stack, name))
            got = _chart_values(attrs, paths[name])
            assert len(got) == sum(
                1 for i, v in enumerate(want) if name == "goodput" or s.answered[i]
            )
            drawn = dict(zip(s.t, want, strict=True))
            for t, v in got:
                expect = drawn[min(drawn, key=lambda x: abs(x - t))]
                # a tenth of a viewBox unit of rounding on a 134-unit-high axis
                assert v == pytest.approx(expect, rel=0.02, abs=0.01 * float(attrs["data-y1"] or 1))
    assert {(n, "goodput") for n in by_stack} <= seen and {(n, "p99") for n in by_stack} <= seen


def test_the_page_makes_no_request_and_runs_no_script_but_its_own(run: BenchRun):
    text = html.page(run)
    page = parse(text)
    for tag, attrs in page.tags:
        assert tag not in ("link", "img", "iframe", "object", "embed", "base"), tag
        for key in ("src", "href", "srcset", "action"):
            assert key not in attrs, (tag, attrs)
    assert not re.search(r"url\(|@import|https?:|//[a-z]", text.split("<script>")[0], re.I)
    assert page.scripts == 1
    csp = next(a["content"] for t, a in page.tags if t == "meta" and a.get("http-equiv"))
    assert csp is not None and "default-src 'none'" in csp and "'sha256-" in csp


def test_a_stack_titled_with_html_shows_as_text(run: BenchRun):
    text = html.page(run)
    assert HOSTILE not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    page = parse(text)
    assert page.scripts == 1  # its title made no element
    assert any(HOSTILE in t for t in page.text)  # shown, as text


def test_each_breaking_point_is_marked_and_its_why_shown_when_the_run_has_one(run: BenchRun):
    text = html.page(run)
    assert text.count('class="mark"') >= 7  # eight's, on each of its charts
    assert "broke: failing" in text
    assert "<h3>Why</h3>" not in text  # never required
    # a window as bench keeps it (tests/unit/test_why_display.py), its function named
    # with markup: shown as text
    found = why(window(function="<frame>"))
    stacks = [
        msgspec.structs.replace(
            st, levels=[msgspec.structs.replace(lv, why=found) for lv in st.levels]
        )
        for st in run.stacks
    ]
    evidence = html.page(msgspec.structs.replace(run, stacks=stacks))
    assert "<h3>Why</h3>" in evidence
    assert "97 % of samples asleep in &lt;frame&gt; (app.py:31)" in evidence
    assert "accept queue: up to 480" in evidence and "<frame>" not in evidence


def test_two_runs_are_drawn_together_with_the_gates_verdicts(run: BenchRun):
    other = _run({"eight": EIGHT, "async": ASYNC, "hostile": EIGHT}, [4, 64])
    text = html.page(other, baseline=run)
    assert "Against the baseline" in text
    assert text.count('class="line c-good dashed"') == 3  # one per stack
    page = parse(text)
    items = [t for t in page.text if "@ c=" in t]
    assert items  # the gate's lines, one per rule and level
    assert page.scripts == 1


def test_bench_and_report_write_the_page(run: BenchRun, tmp_path: Path):
    from stackrace.report.write import run_outputs, write_files

    out = tmp_path / "r.html"
    csv_out = tmp_path / "s.csv"
    assert write_files(run_outputs(run, html_out=str(out), series_csv_out=str(csv_out))) == []
    assert out.read_text().startswith("<!doctype html>")
    assert csv_out.read_text().startswith("stack,t,level")
    # bench --baseline OLD.json --html: the page compares
    assert write_files(run_outputs(run, html_out=str(out), baseline=run)) == []
    assert "Against the baseline" in out.read_text()


# --- adding intervals into seconds ----------------------------------------------------


def _target(level: int, ok: int, waiting: int, oldest: int, fails: dict[str, int]):
    from stackrace.engine.model import TargetSnapshot, WindowStats

    w = WindowStats(seconds=0.25, requests=ok, ok=ok, waiting=waiting, oldest_wait_us=oldest)
    w.failures = dict(fails)
    return TargetSnapshot("s", "http://x", level, level, None, w, WindowStats())


def _hist(*values: int) -> SparseHistogram:
    from stackrace.engine.histogram import index_of

    h = SparseHistogram()
    for v in values:
        h.add_sparse([index_of(v), 1])
    return h


def test_a_second_is_its_intervals_added_up():
    from stackrace.race.core.series import SecondsAdder

    adder = SecondsAdder()
    # four intervals in the first second, one in the next: the gauge is the last one's,
    # the oldest wait the largest, the counts and histograms summed
    for k, (ok, waiting, oldest) in enumerate(
        [(10, 5, 100), (20, 7, 900), (30, 2, 50), (40, 1, 10)]
    ):
        adder.add(
            0.25 * k + 0.1,
            _target(8, ok, waiting, oldest, {"timeout": 1}),
            _hist(1000 * (k + 1)),
            None,
        )
    adder.add(1.1, _target(16, 5, 0, 0, {}), _hist(7), None)
    adder.flush()
    s = adder.result("s")
    assert s is not None and s.t == [1.0, 2.0] and s.level == [8, 16]
    assert s.answered == [100, 5] and s.goodput == [100.0, 20.0]
    assert s.waiting == [1, 0] and s.oldest_us == [900, 0]
    assert s.failures == {"timeout": [4, 0]}
    # four answers of 1, 2, 3 and 4 ms: the second's max is the 4 ms one's slot
    assert 4000 <= s.max[0] <= 4004 and 2000 <= s.p50[0] <= 2002
    assert s.cpu == [] and s.rss == []  # never sampled: no column, not zeros


def test_a_recordings_series_takes_latency_from_its_running_histograms():
    from stackrace.engine.model import EngineSnapshot
    from stackrace.race.playback.recording import Header, Hist, Record, Recording, Tick
    from stackrace.race.playback.series import recording_series
    from stackrace.settings.race_settings import RaceSettings

    def snap(ok: int) -> EngineSnapshot:
        return EngineSnapshot(0, 0.0, False, False, 1, 0.0, 0.0, False, [_target(8, ok, 0, 0, {})])

    def pairs(h: SparseHistogram) -> list[int]:
        return [x for i in sorted(h.counts) for x in (i, h.counts[i])]

    first = _hist(1000, 1000)
    grown = _hist(1000, 1000, 5000)  # the same level, one more answer of 5 ms
    restarted = _hist(300)  # a new level: the running histogram started again
    records: list[Record] = [
        Tick(0.5, snap(2)), Hist(0.9, "s", pairs(first)),
        Tick(1.5, snap(1)), Hist(1.9, "s", pairs(grown)),
        Tick(2.5, snap(1)), Hist(2.9, "s", pairs(restarted)),
    ]  # fmt: skip
    rec = Recording(Header(1, "now", RaceSettings()), records)
    s = recording_series(rec)["s"]
    assert s.answered == [2, 1, 1]
    assert [round(v, -2) for v in s.p99] == [1000, 5000, 300]
    # a recording that kept no histogram: no latency columns, never zeros
    bare = recording_series(Recording(Header(1, "now", RaceSettings()), records[::2]))["s"]
    assert bare.p99 == [] and bare.hist == "" and series.check(bare, "x") is None


def test_a_ten_minute_six_stack_page_stays_small():
    """Issue's size goal, on the models (bench/html_report_size.py measures it and the
    draw time): a 10-minute race of six stacks, one row a second each, ≤ 250 KB."""
    from stackrace.race.live.demo_model import MODELS

    names = ["gunicorn-sync", "gunicorn-gevent", "uvicorn", "aiohttp", "tornado", "go-nethttp"]
    parts, _ = synthetic_parts({n: MODELS[n] for n in names})
    stacks = [Stack(n, n, StackDef(command=["true"], title=TITLES.get(n, n))) for n in names]
    levels = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000]
    settings = RaceSettings(
        concurrency_levels=levels, duration=58.0, warmup=1.0, isolation="parallel"
    )
    run = asyncio.run(run_bench(BenchPlan(stacks, settings), parts=parts))
    assert all(len(st.series or []) >= 600 for st in run.stacks)
    size = len(html.page(run).encode())
    assert size <= 250 * 1024, size


def test_the_run_file_writes_columns_on_one_line_and_leaves_strings_alone(run: BenchRun):
    odd = "[\n 1,\n 2\n] and [3, 4]"
    st = msgspec.structs.replace(run.stacks[0], title=odd)
    text = dumps(msgspec.structs.replace(run, stacks=[st]))
    assert loads(text, "run.json").stacks[0].title == odd
    s = run.stacks[0].series
    assert s is not None
    line = next(x for x in text.decode().splitlines() if '"p99": [' in x)
    assert line.strip() == '"p99": [' + ",".join(map(str, s.p99)) + "],"
