"""The capacity search on real engine levels against a server whose capacity is known
exactly (tests/servers/fixed_capacity.py: N = 50 workers each holding a request M = 50
ms, so N/M = 1,000 req/s, and in closed loop C ≤ 50 connections answer in 50 ms while
C = 51 makes one request in 51 wait 100 ms). The target, 75 ms, sits 25 ms from both:
with 20 ms and 30 ms, the machine's noise at p99 beside the other test lanes (about
10 ms) sat on the target, and CI's open-loop search missed at half the capacity.
On a quiet machine the answer is exact; beside the rest of ./dev test (the cluster and
walkthrough lanes run at the same time on 2 cores) a stall of 60-130 ms now and then
makes one probe's p99 miss below the true capacity (CI saw c=19 for 20, and 459 then
648 req/s for 1,000 in open loop). A stall can only lower a p99, never raise it, so
the checks below hold the answer to "never above the truth, and near it": the break
is re-checked once (race/core/capacity_search.py), and the search's rules are checked exactly,
noise-free, in tests/unit/test_capacity_search.py. Issue 25, "How it is checked": the
search finds it for p99 and for mean, in open and closed loop; a latency floor above
the target is "cannot meet". The real CLI, as a user runs it: `stackrace bench --slo …
--capacity`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.helpers import run_cli

# A timing figure on a shared 2-core machine, beside the other test lane (./dev test).
# These searches needed reruns once: on 2026-11-27's host the p99 search missed twice
# in a row in one full run of three (two stalls of 40 and 67 ms in one search, more than
# its one re-check of the break absorbs). Now the search itself measures a miss again
# when it saw the machine busy (race/core/capacity_search.py), as it must for a user on
# a dev box, and the tests run once.
pytestmark = pytest.mark.slow

STACKS = """
[stacks.fixed]
title = "50 workers, 50 ms each: capacity 1,000 req/s"
language = "python"
family = "async"
command = ["{python}", "{root}/tests/servers/fixed_capacity.py", "{port}",
           "--workers", "50", "--ms", "50"]
"""
FAST = ["--warmup", "0", "--duration", "2s", "--path", "/work"]


@pytest.fixture(scope="module")
def stacks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("capacity") / "stacks.toml"
    path.write_text(STACKS)
    return path


def search(stacks: Path, tmp_path: Path, *args: str, stack: str = "fixed") -> tuple[dict, str]:
    """One capacity search on a quiet core (tests/helpers.py `take_quiet_core`): the
    probes judge a p99 against a 50 ms service time with 25 ms to spare, and beside the
    other test lanes at niceness -10 (what it ran at before) a run on 2026-11-27 read
    p99 90 ms at c=16 of 50 workers (a ~40 ms stall) and reported c=15, and CI on
    2026-11-29 answered c=43 while "the servers got a core 31 % of the time they wanted
    one". The search's own re-measures of busy misses are for users; this test checks
    the answer, so it takes the core a user's quiet machine would have."""
    out = tmp_path / "run.json"
    r = run_cli(
        "--stacks-file", str(stacks), "bench", "--stacks", stack, "--capacity",
        *FAST, *args, "--json", str(out), timeout=180, quiet_core=True,
    )  # fmt: skip
    assert "Traceback" not in r.stderr, r.stderr
    assert out.exists(), r.stdout + r.stderr
    return json.loads(out.read_text())["stacks"][0]["capacity"], r.stdout + r.stderr


def unstable_on_a_busy_machine(cap: dict, said: str, truth: float) -> bool:
    """A search beside the other test lane may see two stalls at loads the server meets,
    and a quiet one may meet and miss at a load whose p99 sits on the target (c=54 of
    50 workers, measured): it cannot tell either from a server whose speed comes and
    goes, and says "unstable" with the range. That answer is true too, if it claims
    nothing above the truth: an assertion on a model of the noise, not a rerun."""
    if cap["stopped"] != "unstable boundary":
        return False
    lo, hi = cap["unstable"]
    assert lo <= hi <= truth, said
    assert cap["load"] is None or cap["load"] < lo, said
    return True


# where the closed-loop searches start: at 32 of 50 workers nothing is in doubt, and below
# it a probe waits seconds for the 1,000 answers a p99 needs (c=8: 160 req/s, 6.3 s; c=16:
# 3.1 s), 9 s of a search that decided nothing. A start that misses goes down (the floor
# test below, and tests/unit/test_capacity_search.py).
START = "32"


def test_closed_loop_p99_finds_the_worker_count(stacks: Path, tmp_path: Path) -> None:
    # the default precision (5 %): at 10 % the bisection may stop at 54 met, 59 missed,
    # a true answer whose break lies above the truth's top (57) checked below (seen)
    cap, said = search(stacks, tmp_path, "--slo", "p99<75ms", "--concurrency", START)
    # Where p99 passes 75 ms above N = 50 depends on the workers' turns: in step, C = N + 1
    # makes one request in N + 1 wait 2M = 100 ms; drifted apart, a freed worker takes a
    # waiting request at once, and each waits about (C - N)/N × M. The top is arithmetic:
    # at 1,000 req/s the mean is C ms, so from c=75 even the mean misses. Busy runs with
    # the workers' turns drifting met up to c=56 and broke by c=57; on a quiet core (the
    # turns stay closer in step) one met at c=59 and missed at 56 (unstable, rightly).
    if unstable_on_a_busy_machine(cap, said, 74):
        return
    assert cap["mode"] == "concurrency" and 45 <= cap["load"] <= 74, said
    assert cap["breaks_at"] <= 75 and "p99" in cap["breaks_why"], said
    # every SLO carries its failure budget (report/slo.py)
    assert f"meets p99 < 75 ms, failures < 1 % up to c={cap['load']:g} (" in said
    # the evidence: every probe with its level, the answers its percentile needs
    assert cap["needed_answers"] == 1000
    # (a start that missed while the machine was busy is measured again: that first
    # probe is marked busy, and the bracket's own probe at the same load follows it)
    probes = cap["probes"]
    first = next(p for p in probes if p["phase"] != "busy")
    assert first["phase"] == "bracket" and first["load"] == probes[0]["load"], probes
    assert [p["phase"] for p in probes].count("confirm") >= 2
    for p in cap["probes"]:
        lv = p["level"]
        assert lv["concurrency"] == p["load"]
        assert p["answers"] == lv["window"]["requests"]
        assert p["meets"] == (not p["why"])
    assert 0.72 * 1000 <= cap["capacity"] <= 1050


def test_rounds_start_the_server_afresh_and_carry_the_interval(
    stacks: Path, tmp_path: Path
) -> None:
    """--repeat 3: after the search, two more rounds each start the server again and
    probe it at its answer; the capacity is the rounds' median with their 90 % interval
    (never a search's repeats in a row), and the A/A says how it was measured."""
    cap, said = search(
        stacks, tmp_path, "--slo", "p99<75ms", "--concurrency", START, "--precision", "20%",
        "--repeat", "3",
    )  # fmt: skip
    if cap["load"] is None:  # nothing met on a very busy box: no round to measure
        assert "cannot meet" in said or "unstable" in said, said
        return
    assert said.count("a fresh start for its round") == 2, said
    rounds = [p for p in cap["probes"] if p["phase"] == "round"]
    assert len(rounds) == 2 and all(p["load"] == cap["load"] for p in rounds), cap["probes"]
    assert len(cap["rounds"]) == 3 and cap["lo"] <= cap["capacity"] <= cap["hi"], cap
    assert "from 3 rounds" in cap["sentence"] and "one round: no interval" not in cap["sentence"]
    # the noise line's A/A, and how it was measured; a box too busy for one says that
    assert "in rounds of their own" in said or "the machine was busy" in said, said


def test_closed_loop_mean_finds_its_concurrency(stacks: Path, tmp_path: Path) -> None:
    """mean = C / throughput: under 75 ms up to C = 74 at 1,000 req/s (the server's own
    overhead lowers its throughput, and so the answer, by a few percent on a loaded
    machine: the stated precision, 10 %, plus that)."""
    cap, said = search(
        stacks, tmp_path, "--slo", "mean<75ms", "--concurrency", START, "--precision", "10%"
    )
    if unstable_on_a_busy_machine(cap, said, 75):
        return
    # the answer the throughput measured allows (Little's law: mean = C / req/s, so the
    # mean reaches 75 ms at C = 0.075 x req/s), less the 10 % precision: beside the other
    # lane the server did 900-970 req/s, not 1,000, and c=70 met once, then missed twice
    # (77 ms): "up to c=64" was true there, and a fixed floor of 65 called it wrong
    assert cap["load"] is not None and cap["capacity"] is not None, said
    little = 0.075 * cap["capacity"]
    assert little * 0.9 - 1 <= cap["load"] <= 75, said
    assert cap["breaks_at"] is not None and cap["breaks_at"] <= 80, said


def test_open_loop_p99_finds_the_rate(stacks: Path, tmp_path: Path) -> None:
    """At a constant rate below N/M no request waits; above it the queue grows without
    end, so p99 passes the target within the probe."""
    cap, said = search(stacks, tmp_path, "--slo", "p99<75ms", "--rate", "500", "--precision", "10%")
    if unstable_on_a_busy_machine(cap, said, 1050):
        return
    assert cap["mode"] == "rate", said
    assert cap["load"] is not None and cap["load"] <= 1050, said
    if cap["load"] < 500:
        # beside CI's other lanes the Python server itself got a core ~60 % of the time
        # and met p99 < 75 ms only up to ~460 req/s: true of that machine then, if the
        # answer says the machine was busy and what the server got (seen 2026-11-29)
        assert "the machine was busy" in said and "the servers got a core" in said, said
    assert cap["breaks_at"] is not None and cap["breaks_at"] <= 1.1 * 1050, said
    assert "req/s" in cap["sentence"]


def test_a_latency_floor_above_the_target_cannot_be_met(stacks: Path, tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    junit = tmp_path / "junit.xml"
    # a probe that misses ends at --duration: 1 s, not FAST's 2 s, for three probes of
    # p99 ≥ 50 ms against 10 ms (a miss by 5x is no closer call at 40 answers than at 80)
    r = run_cli(
        "--stacks-file", str(stacks), "bench", "--stacks", "fixed", "--capacity",
        "--warmup", "0", "--duration", "1s", "--path", "/work", "--slo", "p99<10ms",
        "--concurrency", "2", "--json", str(out), "--junit", str(junit), timeout=120,
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    cap = json.loads(out.read_text())["stacks"][0]["capacity"]
    assert cap["load"] is None and cap["stopped"] == "cannot meet the SLO at any load"
    # it went down to one connection before saying so (a miss at c=2 proves nothing
    # below), and measured that again (one stall must not say "cannot meet"); on a busy
    # machine a miss at 2 is measured again first (phase "busy"), not counted
    probes = cap["probes"]
    loads = [p["load"] for p in probes]
    assert loads == sorted(loads, reverse=True) and set(loads) == {1, 2}, probes
    assert loads.count(1) == 2
    assert loads.count(2) == 1 + sum(p["phase"] == "busy" and p["load"] == 2 for p in probes)
    assert "cannot meet p99 < 10 ms, failures < 1 % at any load: p99 " in r.stdout
    assert 'type="slo"' in junit.read_text()


def test_capacity_needs_an_objective(stacks: Path) -> None:
    r = run_cli("--stacks-file", str(stacks), "bench", "--stacks", "fixed", "--capacity")
    assert r.returncode == 2 and "give --slo" in r.stderr and "Traceback" not in r.stderr


FLAPPING = """
[stacks.flap]
title = "fast 4 s at 40 slots, slow 1 s at 10: meets p99 < 50 ms up to c=80, then c=20"
language = "python"
family = "async"
command = ["{python}", "{root}/tests/servers/fixed_capacity.py", "{port}",
           "--workers", "40", "--ms", "20", "--flap", "4,1", "--slow-slots", "10"]
"""


def test_a_flapping_server_is_reported_unstable_with_its_range(tmp_path: Path) -> None:
    """Issue 36: a server that alternates fast and slow seconds was reported "meets …
    up to c=26 … stopped: precision reached" while five loads above it each both met
    and missed. Fast (4 s) it holds p99 < 50 ms up to c=80, slow (1 s) up to c=20: a
    probe of ~1.3 s at a load between lands in a fast stretch or not. The search must
    end on "unstable boundary" and state the range; when its probes saw only the slow
    seconds it answers what held every time, never "precision reached" over a load that
    both met and missed more than once."""
    stacks = tmp_path / "stacks.toml"
    stacks.write_text(FLAPPING)
    cap, said = search(stacks, tmp_path, "--slo", "p99<50ms", "--concurrency", "8", stack="flap")
    # (a miss on a busy machine that was measured again: its re-measure stands for it)
    counted = [p for p in cap["probes"] if p["phase"] != "busy"]
    below = [p for p in counted if cap["load"] and p["load"] <= cap["load"]]
    if cap["stopped"] != "unstable boundary":
        # the probes happened to fall on one speed at the loads that decided (a probe of
        # ~1.3 s misses a 1 s slow stretch about half the time): the search saw at most
        # one contradiction, which is a stall's, and answered what held every time,
        # never above what the server ever does. The search's rules on such a server are
        # held exactly in tests/unit/test_capacity_search.py (30 of 40 seeds unstable).
        assert cap["stopped"] == "precision reached" and cap["load"] <= 80, said
        contradicted = {p["load"] for p in counted if not p["meets"]} & {
            p["load"] for p in counted if p["meets"]
        }
        assert len(contradicted) <= 1, said
        # at or below the answer, every probe met but the one miss the re-check forgave
        assert sum(not p["meets"] for p in below) <= 1, said
        return
    # unstable: every probe at or below the answer met
    assert all(p["meets"] for p in below), said
    lo, hi = cap["unstable"]
    assert lo <= hi <= 80, said  # (a stall beside a test lane may contradict below c=20)
    assert cap["load"] is None or cap["load"] < lo
    # the range's loads both met and missed
    assert any(not p["meets"] and p["load"] <= hi for p in cap["probes"])
    assert re.search(r"unstable (from|at) c=", said) and "precision reached" not in said
