"""`stackrace tune` against a server whose capacity is known exactly (N workers × 20 ms
each: N/20 ms req/s, closed-loop capacity C = N under p99 < 30 ms): the sweep over
`workers` names the one with more workers, prints its command line, and `tune --from`
renders the saved table again. The real CLI, as a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import run_cli

pytestmark = pytest.mark.slow

STACKS = """
[stacks.fixed]
title = "N workers, 20 ms each"
language = "python"
family = "async"
command = ["{python}", "{root}/tests/servers/fixed_capacity.py", "{port}",
           "--workers", "{workers}", "--ms", "20"]
workers = 4
"""


def test_tune_names_the_best_worker_count_and_its_command(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks.toml"
    stacks.write_text(STACKS)
    out, svg = tmp_path / "tune.json", tmp_path / "tune.svg"
    r = run_cli(
        "--stacks-file", str(stacks), "tune", "fixed", "--slo", "p99<30ms", "--path", "/work",
        "--workers", "4,16", "--concurrency", "4", "--budget", "2m",
        "--json", str(out), "--chart", str(svg), timeout=240,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ETA" in r.stderr and "[2/2]" in r.stderr
    assert "winner: fixed:workers=16: meets p99 < 30 ms up to c=16" in r.stdout, r.stdout
    assert "run it in production: " in r.stdout and "--workers 16" in r.stdout
    run = json.loads(out.read_text())
    caps = {st["name"]: st["capacity"] for st in run["stacks"]}
    assert caps["fixed:workers=4"]["load"] == 4 and caps["fixed:workers=16"]["load"] == 16
    assert all(c["probes"] and c["capacity"] > 0 for c in caps.values())
    assert "<svg" in svg.read_text()
    again = run_cli("tune", "--from", str(out))
    assert again.returncode == 0 and "winner: fixed:workers=16" in again.stdout, again.stderr
