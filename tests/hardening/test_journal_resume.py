"""A journal's resume, end to end (issue 48, item 5): a journal its run is still
writing is not resumed (one line, exit 2, the run goes on untouched), and after a
`kill -9` a resume given nothing but `--resume J` writes every output the first run
was asked for, `--csv` included (it was dropped). Real bench runs on a test server;
the file-level checks are in test_journal_integrity.py."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pytest

from tests.hardening.conftest import assert_one_line_error
from tests.helpers import STACKS_FIXTURE, run_cli
from tests.integration.test_journal import entries, start, wait_for_line

pytestmark = [pytest.mark.slow]


def test_a_live_journal_is_refused_and_a_resume_writes_the_first_runs_csv(tmp_path: Path):
    out, table = tmp_path / "run.json", tmp_path / "run.csv"
    journal = tmp_path / "run.json.journal"
    # /delay: each level takes its second at 320 req/s at most (tests/integration/test_journal.py)
    proc = start(
        "--stacks-file", str(STACKS_FIXTURE), "bench", "--stacks", "plain",
        "--concurrency", "2,4,8,16", "--duration", "1s", "--warmup", "0.2s",
        "--path", "/delay?ms=50", "--json", str(out), "--csv", str(table),
    )  # fmt: skip
    try:
        wait_for_line(proc, "c=2 ")  # measuring: the journal is open and locked
        r = run_cli("--stacks-file", str(STACKS_FIXTURE), "bench", "--resume", str(journal))
        assert_one_line_error(r, str(journal), "its run is still writing it")
        assert proc.poll() is None, "the refused resume disturbed the live run"
        wait_for_line(proc, "c=4 ")
        time.sleep(0.3)
    finally:
        proc.kill()  # SIGKILL: the kernel drops its lock
        proc.wait(timeout=10)
    assert not out.exists() and not table.exists()
    # beside the journal: kept by their path from its directory
    assert entries(journal)[0]["outputs"] == {"--json": out.name, "--csv": table.name}

    r = run_cli(
        "--stacks-file", str(STACKS_FIXTURE), "bench", "--resume", str(journal), timeout=120
    )
    assert r.returncode == 0, r.stdout + r.stderr
    run = json.loads(out.read_text())
    assert sorted(lv["concurrency"] for lv in run["stacks"][0]["levels"]) == [2, 4, 8, 16]
    with table.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4, rows  # the --csv the first run named, written by the resume


def test_the_first_of_two_runs_sharing_cores_records_the_second(tmp_path: Path):
    """The first run once recorded `"other_runs": []` and no note: it looked for other
    runs only when it started. The second (--share-cores) now tells it, and the first
    run's file names it."""
    first_out = tmp_path / "first.json"
    first = start(
        "--stacks-file", str(STACKS_FIXTURE), "bench", "--stacks", "plain",
        "--concurrency", "2,4,8", "--duration", "3s", "--warmup", "0.2s",
        "--path", "/delay?ms=50", "--json", str(first_out),
    )  # fmt: skip
    try:
        wait_for_line(first, "c=2 ")
        second = run_cli(
            "--stacks-file", str(STACKS_FIXTURE), "bench", "--stacks", "plain", "--share-cores",
            "--concurrency", "2", "--duration", "0.3s", "--warmup", "0s", "--no-progress",
            "--path", "/delay?ms=50", "--json", str(tmp_path / "second.json"),
        )  # fmt: skip
        assert second.returncode == 0, second.stdout + second.stderr
        _, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=10)
    assert first.returncode == 0, err
    notes = json.loads(first_out.read_text())["notes"]
    assert any(
        n.startswith("measured while another stackrace run shared the cores: pid ")
        and "stackrace bench" in n
        for n in notes
    ), notes
