"""Run a `stackrace` command line the way a person does: in a terminal of its own.

The app needs a terminal, so a command is run on a pseudo-terminal of a given size
(`run_in_terminal`), keys are typed into it at given times ("q" after 4 s), and what
it wrote is kept (escape sequences and all: a traceback or a crash line is found in it
as plain words). Every process the command starts is found afterwards by a marker in
its environment (`left_running`), so a test can say nothing was left behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import select
import signal
import struct
import subprocess
import termios
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

MARK = "STACKRACE_WALKTHROUGH_MARK"
_ESCAPES = re.compile(
    rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()][0-9A-B]|\x1b[=>78]"
)


@dataclass
class Ran:
    argv: list[str]
    status: int | None  # None: it did not end within the time allowed (it was killed)
    output: bytes
    seconds: float
    mark: str

    @property
    def text(self) -> str:
        """What it wrote, without escape sequences."""
        return _ESCAPES.sub(b"", self.output).decode("utf-8", "replace")

    def tail(self, lines: int = 15) -> str:
        """The last non-blank lines it wrote (for a failure's message)."""
        text = [line.rstrip() for line in self.text.replace("\r", "\n").splitlines()]
        return "\n".join([line for line in text if line.strip()][-lines:])


def _set_size(fd: int, columns: int, rows: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))


def run_in_terminal(
    argv: list[str],
    *,
    keys: Sequence[tuple[float, str]] = (),
    signals: Sequence[tuple[float, int]] = (),
    size: tuple[int, int] = (160, 48),
    timeout: float = 60.0,
    cwd: str | Path | None = None,
    env: dict[str, str] | None = None,
    until: bytes | None = None,
    latest: float | None = None,
) -> Ran:
    """Run `argv` on a terminal of `size`; type each key at its second (or, with
    `until`, that many seconds after `until` first appears in the output, or after
    `latest` seconds if it has not appeared by then); send each signal likewise; wait
    for the end, at most `timeout` seconds (then SIGKILL)."""
    mark = uuid.uuid4().hex
    master, slave = os.openpty()
    _set_size(slave, *size)
    full_env = {**os.environ, **(env or {}), MARK: mark, "TERM": "xterm-256color"}
    full_env.pop("NO_COLOR", None)
    start = time.monotonic()
    proc = subprocess.Popen(
        argv,
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=cwd,
        env=full_env,
        start_new_session=True,
        close_fds=True,
    )
    os.close(slave)
    out = bytearray()
    events = sorted(
        [(t, "key", k) for t, k in keys] + [(t, "signal", s) for t, s in signals],
        key=lambda e: e[0],
    )
    t0: float | None = None if until else start
    seen = 0  # how much of the output was looked through for `until`
    status: int | None = None
    try:
        while True:
            now = time.monotonic()
            if now - start > timeout:
                break
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    chunk = b""
                out += chunk
                if not chunk and proc.poll() is not None:
                    break
            if t0 is None and until is not None and ready:
                # what came since the last look, and a little before it (an escape
                # sequence may have cut the words in two): the screen is redrawn in a
                # stream of tens of kilobytes a second, too much to look through whole
                if until in _ESCAPES.sub(b"", bytes(out[max(0, seen - 4096) :])):
                    t0 = time.monotonic()
                seen = len(out)
            if t0 is None and latest is not None and time.monotonic() - start >= latest:
                t0 = time.monotonic()
            while events and t0 is not None and time.monotonic() - t0 >= events[0][0]:
                _t, kind, what = events.pop(0)
                if kind == "key":
                    os.write(master, str(what).encode())
                else:
                    proc.send_signal(int(what))
            if proc.poll() is not None and not ready:
                break
        status = proc.poll()
        if status is None:
            proc.kill()
            proc.wait(10)
        else:
            # what it wrote last (the crash line, the summary) may still be buffered
            while select.select([master], [], [], 0.1)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
    finally:
        os.close(master)
    return Ran(argv, status, bytes(out), time.monotonic() - start, mark)


def left_running(mark: str) -> list[str]:
    """Processes still alive that a run started (its environment holds the marker)."""
    found = []
    needle = f"{MARK}={mark}".encode()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            if needle in environ:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                found.append(f"{pid}: {cmd.decode(errors='replace')[:120]}")
        except OSError:
            continue
    return found


def wait_none_left(mark: str, timeout: float = 10.0) -> list[str]:
    """Wait for the run's processes to be gone (a server's stop takes its grace
    period); those still there after `timeout`."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        left = left_running(mark)
        if not left:
            return []
        time.sleep(0.2)
    return left_running(mark)


def kill_left(left: list[str]) -> None:
    """SIGKILL the processes `left_running` listed ("PID: command")."""
    for line in left:
        with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
            os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
