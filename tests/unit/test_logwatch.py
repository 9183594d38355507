"""A server's own words counted as its log grows (stackrace.stacks.signs), on a log file
written by the test."""

from __future__ import annotations

from pathlib import Path

from stackrace.stacks.logwatch import MAX_READ, LogWatch


def test_logwatch_counts_the_servers_own_words_as_the_log_grows(tmp_path: Path):
    log = tmp_path / "log.txt"
    log.write_bytes(b"[INFO] Booting worker with pid: 10\n")
    watch = LogWatch(log)
    assert watch.poll() == {"worker booted": 1}
    with log.open("ab") as f:
        f.write(b"[CRITICAL] WORKER TIMEOUT (pid:10)\n[INFO] Booting worker with pid: 11\n")
        f.write(b"[CRITICAL] WORKER TIM")  # a line cut by the read
    assert watch.poll() == {"worker booted": 2, "WORKER TIMEOUT": 1}
    with log.open("ab") as f:
        f.write(b"EOUT (pid:11)\n")
    assert watch.poll()["WORKER TIMEOUT"] == 2
    # a server logging a flood: a poll reads at most MAX_READ, the rest is skipped
    with log.open("ab") as f:
        f.write(b"x" * (MAX_READ + 10) + b"\n" + b"WORKER TIMEOUT\n")
    assert watch.poll()["WORKER TIMEOUT"] == 3 and watch.skipped > 0
    # a log that starts afresh is read from its start
    log.write_bytes(b"WORKER TIMEOUT\n")
    assert watch.poll()["WORKER TIMEOUT"] == 4
