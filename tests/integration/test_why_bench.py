"""`bench` says why a stack broke: the real gunicorn sync worker on /io (a 10 ms sleep),
its evidence captured at the breaking level by py-spy and the kernel while the load
goes on, the cause on the breaking-point line, in the JSON and as a flame graph; the
knee predicted from its one worker and the service time at c=1."""

from __future__ import annotations

import json

from stackrace.report.schema import loads
from tests.helpers import run_cli


def test_a_sync_worker_breaks_on_a_blocking_wait_and_bench_says_so(tmp_path):
    out, flames = tmp_path / "run.json", tmp_path / "flames"
    flames.mkdir()
    r = run_cli(
        "bench", "--stacks", "gunicorn-sync", "--workload", "io",
        "--concurrency", "1,32", "--duration", "2s", "--warmup", "0.5s",
        "--json", str(out), "--flame", str(flames), "--share-cores",
        timeout=180,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    run = loads(out.read_bytes())
    (st,) = run.stacks
    assert st.breaking_point == 32, st.breaking_reason
    at = next(lv for lv in st.levels if lv.level == 32)
    assert at.why is not None, r.stderr
    cause = at.why.cause
    assert cause.kind.value == "blocking wait", cause
    # the app's own function, asleep in its backend call (apps/python's /io handler)
    assert cause.function is not None and cause.function.file.endswith(".py"), cause
    assert at.why.window.sampled, at.why.window.not_sampled
    assert at.why.window.collapsed  # what a flame graph is drawn from
    raw = json.loads(out.read_text())
    assert raw["stacks"][0]["levels"][1]["why"]["cause"]["kind"] == "blocking wait"
    # the breaking-point line carries it, with the knob
    line = next(x for x in r.stdout.splitlines() if "gunicorn-sync: queueing at c=32" in x)
    assert "why: blocking wait" in r.stdout.replace("\n", " ")
    assert "predicted: 1 worker" in r.stdout.replace("\n", " "), line
    # one worker at ~10 ms: ~100 req/s from c≈1, where it broke
    assert st.knee is not None and st.knee.servers == 1
    assert 40 < st.knee.rate < 110, st.knee
    svgs = list(flames.glob("flame-*.svg"))
    assert len(svgs) == 1 and svgs[0].read_text().startswith("<?xml")
