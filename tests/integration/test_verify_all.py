"""Every stack in stacks.toml is available on a machine set up by the README, and passes
`stackrace verify` (hello, json, io and db against the private MariaDB)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from stackrace.config import load_stacks, resolve
from stackrace.stacks.availability import check

ROOT = Path(__file__).parents[2]


def test_every_stack_is_available():
    stacks = load_stacks()
    missing = {n: check(resolve(n, stacks)) for n in stacks}
    missing = {n: a.reason for n, a in missing.items() if not a.available}
    assert not missing, f"unavailable after set-up: {missing}"


def test_verify_passes_for_every_stack():
    r = subprocess.run(
        [sys.executable, "-m", "stackrace.cli", "verify"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    assert f"{len(load_stacks())} of {len(load_stacks())} stacks verified" in r.stderr
