"""The OpenMetrics figures (stackrace.metrics.figures), fed by the demo's synthetic engine
(a product feature: deterministic snapshots), read back with prometheus_client's strict
OpenMetrics parser. The demo's histograms are approximate (their counts are rounded
shares of the answers), so the buckets here come from the percentiles; that they come
from the engine's own histogram, exactly, is tests/integration/test_metrics.py's, with a
real engine and server."""

from __future__ import annotations

from prometheus_client.openmetrics.parser import text_string_to_metric_families

from stackrace.engine.model import LatencySummary, TargetSpec
from stackrace.metrics.figures import (
    BUCKETS_US,
    RaceFigures,
    estimated_buckets,
)
from stackrace.race.live.demo import SyntheticEngine


def parse(text: str) -> dict[str, dict[tuple, float]]:
    """family → {(sample name, sorted labels): value}."""
    out: dict[str, dict[tuple, float]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            key = (s.name, tuple(sorted(s.labels.items())))
            out.setdefault(fam.name, {})[key] = s.value
    return out


async def test_counters_stay_exact_and_only_grow_across_restarted_totals() -> None:
    engine = SyntheticEngine()
    await engine.add_target(TargetSpec(id="uvicorn", url="http://127.0.0.1:1/hello"))
    await engine.add_target(TargetSpec(id="gunicorn-sync", url="http://127.0.0.1:2/hello"))
    figures = RaceFigures()
    answered = {"uvicorn": 0, "gunicorn-sync": 0}
    before: dict[str, int] = {}
    for step in range(1, 41):
        if step == 15:  # the app's slider: totals restart, the first 0.5 s do not count
            engine.reset_totals(warmup=0.5)
        snap = engine.step()
        assert snap is not None
        figures.ingest(snap, engine, engine=1)
        figures.ingest(snap, engine, engine=1)  # a snapshot seen twice counts once
        for t in snap.targets:
            answered[t.id] += t.interval.requests
        if step == 14:
            before = {tid: sum(figures.targets[tid].buckets) for tid in answered}
    for tid, n in answered.items():
        f = figures.targets[tid]
        assert sum(f.responses.values()) == n  # every answer, warm-up included
        assert sum(f.buckets) == n
        assert sum(f.buckets) > before[tid] > 0  # the restart did not restart the counts
    families = parse(figures.render())
    hist = families["stackrace_request_duration_seconds"]
    count = hist[("stackrace_request_duration_seconds_count", (("target", "uvicorn"),))]
    assert count == answered["uvicorn"]
    sent = families["stackrace_requests_sent"]
    assert sent[("stackrace_requests_sent_total", (("target", "uvicorn"),))] >= count


def test_estimated_buckets_follow_the_percentiles() -> None:
    lat = LatencySummary(
        count=1000, min=100, p50=1_000, p90=2_000, p99=9_000, p999=20_000, max=40_000
    )
    b = estimated_buckets(lat)
    assert sum(b) == 1000
    cumulative = [sum(b[: j + 1]) for j in range(len(BUCKETS_US))]
    at = dict(zip(BUCKETS_US, cumulative, strict=False))
    assert at[1_000] == 500  # p50 exactly on a bound
    assert at[10_000] in range(990, 993)  # between p99 and p99.9
    assert at[50_000] == 1000 and at[100] == 0
    assert estimated_buckets(LatencySummary()) == [0] * (len(BUCKETS_US) + 1)


async def test_exposition_is_strict_openmetrics_with_units_and_escaped_labels() -> None:
    engine = SyntheticEngine()
    odd = 'http://127.0.0.1:1/q?a="b"\\c'
    await engine.add_target(TargetSpec(id=odd, url=odd, rate=500.0))
    figures = RaceFigures()
    for _ in range(4):
        snap = engine.step()
        assert snap is not None
        figures.ingest(snap, engine)
    text = figures.render()
    assert text.endswith("# EOF\n")
    kinds = {f.name: (f.type, f.unit) for f in text_string_to_metric_families(text)}
    assert kinds["stackrace_requests_sent"] == ("counter", "")
    assert kinds["stackrace_response_bytes"] == ("counter", "bytes")
    assert kinds["stackrace_request_duration_seconds"] == ("histogram", "seconds")
    assert kinds["stackrace_rate_wanted_requests_per_second"] == ("gauge", "")
    assert kinds["stackrace_build"] == ("info", "")
    families = text_string_to_metric_families(text)
    labels = {s.labels.get("target") for f in families for s in f.samples}
    assert odd in labels
    # a target that leaves keeps its counters, and loses its gauges
    await engine.remove_target(odd)
    snap = engine.step()
    assert snap is not None
    figures.ingest(snap, engine)
    names = {f.name for f in text_string_to_metric_families(figures.render())}
    assert "stackrace_requests_sent" in names and "stackrace_connections" not in names
