"""A started stack as the launcher keeps it (`RunningStack`): its processes, port, run
directory, log, cgroup and state, and the error a start that fails raises (`LaunchError`).

States: starting, ready, crashed (died after it was ready), failed (never ready),
stopped; `exit_code` and `error` say why for the last two kinds of ending. Starting,
watching and stopping are stackrace.stacks.launcher's.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from stackrace.base.errors import WithLogTail
from stackrace.base.printable import terminal
from stackrace.stacks.definition import Stack
from stackrace.stacks.placeholders import HOST
from stackrace.supervise import sweep
from stackrace.supervise.procs import pids_in_sessions

STARTING = "starting"
READY = "ready"
CRASHED = "crashed"  # died after it was ready
FAILED = "failed"  # never became ready
STOPPED = "stopped"
POLL_S = 0.05


def program_of(p: subprocess.Popen[bytes]) -> str:
    """The program a stack's process runs (the launcher starts each from a list)."""
    args = p.args
    return str(args[0] if isinstance(args, list | tuple) else args)


class LaunchError(WithLogTail, RuntimeError):
    """A stack could not be started; `log_tail` holds the end of its output."""


@dataclass
class RunningStack:
    stack: Stack
    port: int
    run_dir: Path
    log_path: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    state: str = STARTING
    exit_code: int | None = None
    error: str | None = None
    started_at: float = 0.0
    memory_cap: str | None = None  # "256M", or why a requested cap is unavailable
    # the stack's cgroup: its memory cap's, else one that only tracks its processes
    # (supervise.sweep), where this machine lets stackrace make one
    cgroup_dir: Path | None = None
    # STACKRACE_STACK in every process of the stack: how a daemon that left its session
    # and its parents is still found (supervise.sweep)
    token: str = field(default_factory=sweep.new_token)
    tracking_only: bool = False  # cgroup_dir only tracks the processes (no memory cap)
    # its own listening sockets bound beyond loopback ("0.0.0.0:8080"), seen so far
    exposed: list[str] = field(default_factory=list)
    reaped: bool = False  # stopped and waited for: its pids may belong to others now
    # being stopped by us: a process that exits now was told to (poll() must not call
    # that a crash; a cluster's status poll came in the middle of a stop and did)
    stopping: bool = False
    host: str = HOST  # the address it binds (a cluster's app node: see stackrace.cluster)
    # a stack with `tls = true`: the certificate it serves (stacks.certificate), which
    # its probes and the engine trust
    cert: Path | None = None
    # a stack with `status`: its status page's URL, rendered at start (on loopback, a port
    # of its own): what an evidence window reads (stackrace.evidence.status)
    status_url: str | None = None

    @property
    def name(self) -> str:
        return self.stack.name

    @property
    def url(self) -> str:
        scheme = "https" if self.stack.spec.tls else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def main(self) -> subprocess.Popen[bytes] | None:
        return self.procs[-1] if self.procs else None

    @property
    def sessions(self) -> list[int]:
        # a process started with setsid(), or one that calls it itself, leads a session
        # whose id is its own pid
        return [p.pid for p in self.procs]

    @property
    def root_pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def all_pids(self) -> list[int]:
        return pids_in_sessions(self.sessions)

    def log_tail(self, lines: int = 20) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 16384))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        # a server's own bytes: printable wherever the tail is shown (an `ESC]0;…BEL`
        # in a log set the terminal's title through a launch failure's message)
        return "\n".join(terminal(line) for line in text.splitlines()[-lines:])

    def last_log_line(self) -> str:
        """The last line the stack logged, printable and cut to one line ('' if none):
        what a process that died at start said last ("No module named gunicorn")."""
        for line in reversed(self.log_tail(10).splitlines()):
            text = " ".join("".join(c if c.isprintable() else " " for c in line).split())
            if text:
                return text if len(text) <= 200 else text[:199] + "…"
        return ""

    def dead_process(self) -> subprocess.Popen[bytes] | None:
        for p in self.procs:
            if p.poll() is not None:
                return p
        return None


StateCallback = Callable[[RunningStack], None]
