"""Nothing measured is lost (issue 36): every finished level and probe is in the journal
as it ends, a `kill -9` leaves it, `--resume` finishes the run; Ctrl-C ends a capacity
search or a tune with exit 130, its files marked interrupted and no claim (capacity,
winner) made from the unfinished evidence. Real processes, real signals."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.helpers import CLI, ROOT, STACKS_FIXTURE, run_cli, take_quiet_core

pytestmark = [pytest.mark.slow]

STACKS = """
[stacks.fixed]
title = "N workers, 20 ms each"
language = "python"
family = "async"
command = ["{python}", "{root}/tests/servers/fixed_capacity.py", "{port}",
           "--workers", "{workers}", "--ms", "20"]
workers = 4
"""

# The tunes of the Ctrl-C and kill -9 tests: two configurations 4x apart (200 and 800
# req/s), each probe as cheap as the claim allows. Nothing here is about how exact a
# capacity is, only about what an interrupted tune keeps, claims and resumes to:
# - a mean rests on 100 answers where a p99 needs 1,000: every probe ends after its
#   0.5 s (with a p99 and 1 s, each probe of workers=16 ran 800 req/s for 1 s);
# - mean < 25 ms (1.25x the 20 ms each request holds) and 50 % precision put every
#   probe far from its boundary: c=16 of workers=16 and c=4 of workers=4 answer in
#   20 ms (20 % below the target: a 100 ms stall in a 0.5 s probe makes it ~25 ms
#   at worst, a miss the search measures again on a busy machine), c=23 and c=6
#   take 29-32 ms. Each search: a bracket (16, 32 / 16, 8, 4), one bisection
#   (23 / 6), its confirms and re-check: ~13 probes in all, then 2 rounds. A stall
#   that lowers an answer does not change the winner: 4x apart.
TUNE = [
    "tune", "fixed", "--slo", "mean<25ms", "--path", "/work", "--workers", "4,16",
    "--concurrency", "16", "--precision", "50%", "--duration", "0.5s", "--budget", "2m",
]  # fmt: skip


# The searches and tunes here take a quiet core (tests/helpers.py `take_quiet_core`):
# these tests are about what an interrupted run keeps and resumes to, and a resumed tune
# beside the other test lanes once read "the servers got a core 10 % of the time they
# wanted one" and found workers=16 meeting the SLO nowhere (the tool now searches such a
# configuration again and leaves it unranked if starved twice: honest, and not this
# test's question).
def start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        stdin=subprocess.DEVNULL, preexec_fn=take_quiet_core,
    )  # fmt: skip


def wait_for_line(proc: subprocess.Popen[str], needle: str, timeout: float = 90) -> list[str]:
    assert proc.stderr is not None
    seen: list[str] = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"{needle!r} never came:\n" + "".join(seen))


def entries(journal: Path) -> list[dict]:
    return [json.loads(line) for line in journal.read_text().splitlines() if line.strip()]


def test_kill_9_in_level_3_of_4_keeps_levels_1_and_2_and_resume_finishes(tmp_path: Path):
    out = tmp_path / "run.json"
    md, csv = tmp_path / "run.md", tmp_path / "run.csv"
    journal = tmp_path / "run.json.journal"
    # a path answered 50 ms late (tests/servers/testserver.py /delay): what is journalled
    # is the same, and 16 connections send 320 req/s, not /hello's full throttle on both
    # cores; the levels still take their second each, so the kill lands in level 3
    proc = start(
        "--stacks-file", str(STACKS_FIXTURE), "bench", "--stacks", "plain",
        "--concurrency", "2,4,8,16", "--duration", "1s", "--warmup", "0.2s",
        "--path", "/delay?ms=50", "--json", str(out), "--markdown", str(md),
        "--csv", str(csv),
    )  # fmt: skip
    wait_for_line(proc, "c=4 ")  # level 2 is measured: level 3 is under way
    time.sleep(0.3)
    proc.kill()  # SIGKILL: no handler, no last write
    proc.wait(timeout=10)
    assert not out.exists()
    got = entries(journal)
    assert got[0]["kind"] == "start"
    levels = [e["level"]["concurrency"] for e in got if e["kind"] == "level"]
    assert levels[:2] == [2, 4] and len(levels) <= 3, levels
    assert not any(e["kind"] == "end" for e in got)

    r = run_cli(
        "--stacks-file", str(STACKS_FIXTURE), "bench", "--resume", str(journal), timeout=120
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "resuming" in r.stderr
    run = json.loads(out.read_text())  # written where the first run would have
    measured = [lv["concurrency"] for lv in run["stacks"][0]["levels"]]
    assert sorted(measured) == [2, 4, 8, 16] and measured[:2] == [2, 4], measured
    assert run["interrupted"] is None
    # every file the first run was asked for, written by the resume (issue 47), though
    # only the journal was named: each level in the CSV once
    assert "plain" in md.read_text()
    rows = [ln for ln in csv.read_text().splitlines()[1:] if ln.strip()]
    assert len(rows) == 4, rows
    assert not journal.exists()  # the run ended whole: its journal's job is done


def test_a_second_run_refuses_a_journal_it_would_overwrite(tmp_path: Path):
    journal = tmp_path / "run.json.journal"
    journal.write_text('{"kind":"start"}\n')
    r = run_cli(
        "--stacks-file", str(STACKS_FIXTURE), "bench", "--stacks", "plain", "--concurrency", "2",
        "--duration", "0.5s", "--json", str(tmp_path / "run.json"),
    )  # fmt: skip
    assert r.returncode == 2 and "exists: the journal of a run that did not end" in r.stderr
    assert journal.read_text() == '{"kind":"start"}\n'


def test_ctrl_c_in_a_capacity_search_keeps_its_probes_and_claims_nothing(tmp_path: Path):
    """Issue 36: Ctrl-C during `bench --capacity` lost every probe and printed "no
    breaking point up to the highest level"."""
    stacks = tmp_path / "stacks.toml"
    stacks.write_text(STACKS.replace('"{workers}"', '"50"'))
    out = tmp_path / "cap.json"
    # the bracket from c=32 (640 req/s): a probe has its 1,000 answers in ~1.6 s, where
    # from c=4 (80 req/s) the first one ran 12.5 s for them
    proc = start(
        "--stacks-file", str(stacks), "bench", "--stacks", "fixed", "--capacity",
        "--slo", "p99<75ms", "--concurrency", "32", "--warmup", "0", "--duration", "1s",
        "--path", "/work", "--json", str(out),
    )  # fmt: skip
    wait_for_line(proc, "bracket")
    wait_for_line(proc, "bracket")  # two probes measured
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout + stderr
    run = json.loads(out.read_text())
    assert run["interrupted"] == "Ctrl-C"
    cap = run["stacks"][0]["capacity"]
    assert cap["stopped"] == "interrupted" and len(cap["probes"]) >= 2
    assert "no capacity claimed" in cap["sentence"]
    assert "no breaking point" not in stdout + stderr
    assert "interrupted: no capacity" in stdout
    assert "--resume" in stderr  # and how to go on


def test_ctrl_c_in_a_tune_exits_130_marked_interrupted_without_a_winner(tmp_path: Path):
    """Issue 36: Ctrl-C during `tune` exited 0 with a "winner" from 1 of 2 candidates.
    (the cheap tune of TUNE: workers=16's search is done after ~7 probes of 0.5 s, then
    workers=4 starts)"""
    stacks = tmp_path / "stacks.toml"
    stacks.write_text(STACKS)
    out, md = tmp_path / "tune.json", tmp_path / "tune.md"
    proc = start(
        "--stacks-file", str(stacks), *TUNE, "--json", str(out), "--markdown", str(md),
    )  # fmt: skip
    # the middle of the space first (workers=16), then workers=4: one of two measured
    wait_for_line(proc, "fixed:workers=4: starting", timeout=120)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout + stderr
    assert "winner:" not in stdout and "run it in production" not in stdout
    run = json.loads(out.read_text())
    assert run["interrupted"] == "Ctrl-C" and run["tune"]["winner"] is None
    assert run["tune"]["verdict"].startswith("interrupted (Ctrl-C)")
    assert "Interrupted (Ctrl-C)" in md.read_text()
    journal = Path(str(out) + ".journal")
    assert journal.exists() and any(e["kind"] == "probe" for e in entries(journal))
    # issue 47: --resume measures the rest and writes again every file the first run
    # wrote, not only the JSON (its Markdown kept saying "Interrupted (Ctrl-C)")
    md.write_text("the first run's")
    r = run_cli(
        "--stacks-file", str(stacks), "tune", "--resume", str(journal), timeout=300, quiet_core=True
    )
    assert r.returncode == 0, r.stdout + r.stderr
    run = json.loads(out.read_text())
    assert run["interrupted"] is None and run["tune"]["winner"] == "fixed:workers=16", run["tune"]
    text = md.read_text()
    assert "Interrupted" not in text and "fixed:workers=16" in text, text
    assert not journal.exists()  # the run ended whole


def test_a_killed_tune_resumes_to_the_answer_of_an_uninterrupted_one(tmp_path: Path):
    """fixed:workers=4 holds a mean < 25 ms up to c=4 and workers=16 up to c=16 (20 ms
    each, exact: 200 and 800 req/s): an uninterrupted tune names workers=16 (test_tune.py
    runs whole tunes; the replay itself is exact: tests/unit/test_tune_search.py), and so
    does a tune killed in the middle of its second configuration and resumed from its
    journal, with the first one's search taken from the journal, not measured again (the
    tune measures the middle of its space first: workers=16, then workers=4). The two
    capacities are 4x apart: no noise of a shared machine turns one into the other (see
    TUNE)."""
    stacks = tmp_path / "stacks.toml"
    stacks.write_text(STACKS)
    args = ["--stacks-file", str(stacks), *TUNE]
    cut = tmp_path / "cut.json"
    proc = start(*args, "--json", str(cut))
    wait_for_line(proc, "fixed:workers=4: starting", timeout=120)  # (the middle first)
    wait_for_line(proc, "fixed:workers=4 ")  # a probe of it measured
    proc.kill()
    proc.wait(timeout=10)
    journal = Path(str(cut) + ".journal")
    before = [e for e in entries(journal) if e["kind"] == "probe"]
    assert {e["stack"] for e in before} == {"fixed:workers=4", "fixed:workers=16"}

    r = run_cli(
        "--stacks-file", str(stacks), "tune", "--resume", str(journal), timeout=300, quiet_core=True
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "resuming" in r.stderr
    resumed = json.loads(cut.read_text())["tune"]
    assert resumed["winner"] == "fixed:workers=16", (resumed["verdict"], r.stderr[-3000:])
    assert {p["name"] for p in resumed["points"]} == {"fixed:workers=4", "fixed:workers=16"}
    probes = json.loads(cut.read_text())["stacks"]
    # the first configuration's search came from the journal whole, not measured again
    first = next(st for st in probes if st["name"] == "fixed:workers=16")["capacity"]["probes"]
    searched = [p for p in first if p["phase"] != "round"]
    assert len(searched) == len([e for e in before if e["stack"] == "fixed:workers=16"])
