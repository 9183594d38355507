"""The safety net that stops every stack when stackrace dies, even by SIGKILL.

PR_SET_PDEATHSIG reaches only the processes stackrace starts itself, not their workers
(gunicorn's, nginx's, php-fpm's children are forked by the server). So the launcher also
starts this small process in a session of its own and tells it, over a pipe, the session
ids of everything it launches (a server started with setsid() has sid == its pid, and a
server that calls setsid() itself, like php-fpm, gets sid == its own pid), each stack's
environment token and its cgroup (stackrace.supervise.sweep: how a process that left
its session, a `setsid sleep` or a double-forked daemon, is found). When the pipe
closes without a goodbye — stackrace exited or was killed — the watchdog sends SIGTERM to
every process it finds those ways, then SIGKILL to what is left (`cgroup.kill` too),
and exits.

It also folds the stacks' short run directories (see `stackrace.supervise.rundirs`): their
logs move back under the runs dir and the directories in the temp dir are removed.

The private MariaDB uses it too: mariadbd switches to the `mysql` account, and the
kernel clears PR_SET_PDEATHSIG on that change of user, so a scoped server needs this
watchdog to stop with its owner (given a longer grace: a clean shutdown keeps MyISAM
tables from being marked crashed).

Protocol on its stdin, one line each: "+SID" watch a session, "-SID" forget it,
"tok\tTOKEN" / "untok\tTOKEN" a stack's environment token, "cg\tDIR" / "uncg\tDIR" a
stack's cgroup, "fold\tSHORT\tLINK" fold this short run dir if stackrace dies,
"unfold\tSHORT" forget it, "bye" a clean exit (nothing to clean).
`python -m stackrace.supervise.watchdog [GRACE_SECONDS] [--detach]` (default 2 s).

`--detach` (Watchdog(detach=True)): the watchdog forks away at once, so that it is not
a child of the launcher's process. A supervisor that kills a dead process's children —
Ray does, for a dead actor (kill_child_processes_on_worker_exit) — would otherwise kill
the watchdog together with the servers it should clean up after, and the servers' own
workers, which nobody else kills, would outlive them. The pipe ties it to its launcher
all the same.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from stackrace.supervise import rundirs, sweep
from stackrace.supervise.procs import pids_in_sessions, signal_sessions

_GRACE_S = 2.0


def main(grace: float = _GRACE_S, detach: bool = False) -> None:
    if detach and os.fork() > 0:
        os._exit(0)  # the child goes on, a child of init now, reading the same pipe
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is for stackrace, not for us
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nor is the terminal closing
    sessions: set[int] = set()
    tokens: set[str] = set()
    cgroups: set[str] = set()
    dirs: dict[str, str] = {}  # short run dir -> its link under the runs dir
    for raw in sys.stdin:
        line = raw.rstrip("\n")
        if line == "bye":
            return
        what, _, arg = line.partition("\t")
        if line[:1] == "+" and line[1:].isdigit():
            sessions.add(int(line[1:]))
        elif line[:1] == "-" and line[1:].isdigit():
            sessions.discard(int(line[1:]))
        elif what in ("tok", "untok", "cg", "uncg") and arg:
            kept = tokens if what.endswith("tok") else cgroups
            (kept.discard if what.startswith("un") else kept.add)(arg)
        elif line.startswith("fold\t") and line.count("\t") == 2:
            _, short, link = line.split("\t")
            dirs[short] = link
        elif line.startswith("unfold\t"):
            dirs.pop(line.partition("\t")[2], None)
    dirs_cg = [Path(d) for d in cgroups if _is_ours(Path(d))]
    if sessions or tokens or dirs_cg:
        found = sweep.stack_pids(sessions, (), dirs_cg, tokens)
        sweep.signal_pids(found, signal.SIGTERM)
        end = time.monotonic() + grace
        while time.monotonic() < end and (sweep.alive(found) or pids_in_sessions(sessions)):
            time.sleep(0.05)
        found |= sweep.stack_pids(sessions, (), dirs_cg, tokens)
        for d in dirs_cg:
            sweep.kill_cgroup(d)
        sweep.signal_pids(found, signal.SIGKILL)
        signal_sessions(sessions, signal.SIGKILL)
        end = time.monotonic() + _GRACE_S  # until the killed are gone: they hold the logs
        while time.monotonic() < end and (sweep.alive(found) or pids_in_sessions(sessions)):
            time.sleep(0.05)
        for d in dirs_cg:
            sweep.remove_cgroup(d)
    for short, link in dirs.items():
        with contextlib.suppress(OSError):
            rundirs.fold(Path(link), Path(short))


def _is_ours(d: Path) -> bool:
    """A cgroup directory the launcher made (supervise.sweep.tracking_cgroup, or a memory
    cap's): a guard for the watchdog, which kills what it is told to."""
    return d.parent.name == "stackrace" and "cgroup" in str(d) and (d / "cgroup.procs").exists()


class Watchdog:
    """The launcher's end of the pipe."""

    def __init__(self, grace: float = _GRACE_S, detach: bool = False) -> None:
        """`grace`: seconds between SIGTERM and SIGKILL when it has to act; `detach`:
        fork away from the launcher's process (see the module docstring)."""
        self.detach = detach
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "stackrace.supervise.watchdog",
                f"{grace:g}",
                *(["--detach"] if detach else []),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )

    def _send(self, line: str) -> None:
        # (detached, the process we started exits at once; the pipe says if the rest lives)
        if self.proc.stdin is None or (not self.detach and self.proc.poll() is not None):
            return
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def watch(self, sid: int) -> None:
        self._send(f"+{sid}")

    def forget(self, sid: int) -> None:
        self._send(f"-{sid}")

    def watch_token(self, token: str) -> None:
        self._send(f"tok\t{token}")

    def forget_token(self, token: str) -> None:
        self._send(f"untok\t{token}")

    def watch_cgroup(self, d: Path) -> None:
        self._send(f"cg\t{d}")

    def forget_cgroup(self, d: Path) -> None:
        self._send(f"uncg\t{d}")

    def fold_on_death(self, link: Path, short: Path) -> None:
        self._send(f"fold\t{short}\t{link}")

    def forget_dir(self, short: Path) -> None:
        self._send(f"unfold\t{short}")

    def close(self) -> None:
        """Everything was stopped cleanly: let the watchdog go without acting."""
        self._send("bye")
        if self.proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--detach"]
    main(float(args[0]) if args else _GRACE_S, detach="--detach" in sys.argv[1:])
