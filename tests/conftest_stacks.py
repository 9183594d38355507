"""Helpers for the tests that start real stacks from stacks.toml.

A stack that is not available on the machine is a failure: CI runs scripts/setup.sh,
which installs every stack. For local work on a half-set-up machine,
STACKRACE_ALLOW_MISSING_STACKS=1 turns that failure into a skip.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from pathlib import Path

import pytest

from stackrace.stacks.availability import availability
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.definition import Stack
from stackrace.stacks.variants import resolve

REAL_STACKS = load_stacks()
ALLOW_MISSING = os.environ.get("STACKRACE_ALLOW_MISSING_STACKS") == "1"


def real_stack(ref: str) -> Stack:
    """A stack (or variant) of the real stacks.toml that must be available here."""
    stack = resolve(ref, REAL_STACKS)
    a = availability(stack)
    if not a.available:
        message = f"{ref} is unavailable: {a.reason} (fix: {a.fix})"
        if ALLOW_MISSING:
            pytest.skip(message)
        pytest.fail(message)
    return stack


def live(pids: Iterable[int]) -> list[int]:
    """The pids that still run (a zombie waiting for its parent does not count)."""
    out = []
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_bytes()
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2 :][:1] != b"Z":
            out.append(pid)
    return out


def processes_mentioning(text: str) -> list[int]:
    """Processes whose command line or working directory contains `text` (e.g. a run dir)."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ")
            cwd = os.readlink(f"/proc/{entry.name}/cwd")
        except OSError:
            continue
        if text.encode() in cmdline or cwd.startswith(text):
            found.extend(live([int(entry.name)]))
    return found


def port_is_free(port: int) -> bool:
    """Nothing listens on it (connections left in TIME_WAIT do not count)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
