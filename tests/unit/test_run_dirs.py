"""Old run directories are pruned unless in use (stackrace.stacks.run_roots), on directories
made by the test."""

from __future__ import annotations

import os
from pathlib import Path


def test_run_dirs_are_pruned_unless_in_use(tmp_path: Path, monkeypatch) -> None:
    import time

    from stackrace.stacks.run_roots import new_run_root

    monkeypatch.setenv("STACKRACE_RUNS_DIR", str(tmp_path))
    held, held_fd = new_run_root(keep=2)  # a stackrace that still runs
    roots = []
    for _ in range(4):
        time.sleep(0.01)  # distinct modification times
        root, fd = new_run_root(keep=2)
        os.close(fd)  # that stackrace ended
        roots.append(root)
    left = sorted(tmp_path.iterdir())
    assert held in left  # in use: never removed, however old
    assert roots[-1] in left and roots[0] not in left
    os.close(held_fd)
    new_run_root(keep=2)
    assert held not in list(tmp_path.iterdir())
