#!/usr/bin/env python3
"""How fast stackrace starts, beside hey, wrk and oha: one request, whole processes.

    .venv/bin/python bench/startup.py [--rounds 10] [--picker]

One local server (bench/target, the Go net/http server engine_vs_wrk.py loads, pinned to
no core) answers every tool. Each round runs, in a fresh order, every command below once
and times it as a whole process: wall time from fork to exit, and the CPU seconds
(user + sys) of the process and every child it waited for, as wait4 reports them (the
engine process is stackrace's child: its start-up is in the figure). Medians over the
rounds are printed with the spread (min–max); a round is one sample, never an interval.

  stackrace load URL -n 1    one request, the summary printed (the goal: <= 0.4 s wall,
                             <= 0.3 CPU-s on this 2-core machine)
  stackrace --help           the app's help (goal: <= 0.15 s)
  stackrace --version        the interpreter and the entry point, nothing else: the floor
  hey -n 1 -c 1 URL          ~/go/bin/hey (`go install github.com/rakyll/hey@latest`)
  oha -n 1 -c 1 URL          when installed (`cargo install oha`)
  wrk -t1 -c1 -d1s URL       wrk has no request count: its shortest run is one second, so
                             its wall time is that by design; its CPU is the comparison

`--load SECONDS`: also a load of that long at c=50, `stackrace load` against `wrk -t1`,
interleaved: each one's whole-process CPU per request the server answered (the target
counts them: /_count), and their ratio in the same round (the goal: <= 1.1 for 5 s).
engine_vs_wrk.py measures the marginal cost, pinned; this is what a user's `time` sees.

`--baseline-src DIR`: stackrace's rows again on the sources in DIR/src (main's, say:
`git worktree add /tmp/main main`), in the same rounds, as `(baseline)` rows: the
commands, the picker and the load's ratio.

`--picker`: also the app's start, the command to its picker drawn: `stackrace` in a
pseudo-terminal of 120x40, timed until the picker's title is on the screen (goal: <= 1 s).

The machine is shared: figures bend with what else runs. `--rounds` more for a steadier
median; the spread says how much the machine moved meanwhile. Needs: go (the target).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import pty
import random
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STACKRACE = str(Path(sys.executable).with_name("stackrace"))
PICKER_TITLE = b"race web-server stacks side by side"
PICKER = "stackrace (the picker drawn)"


def _free_port() -> int:
    # asked of the OS: other people's servers run on this machine too
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_target() -> tuple[subprocess.Popen[bytes], str]:
    """bench/target built (when its sources are newer) and started; its /hello URL."""
    out = ROOT / ".stackrace" / "bench" / "target"
    src = ROOT / "bench" / "target"
    out.parent.mkdir(parents=True, exist_ok=True)
    if not out.exists() or out.stat().st_mtime < max(p.stat().st_mtime for p in src.iterdir()):
        subprocess.run(["go", "build", "-o", str(out), "."], cwd=src, check=True)
    port = _free_port()
    proc = subprocess.Popen(
        [str(out), str(port)],
        env={**os.environ, "GOMAXPROCS": "1"},
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/hello"
    for _ in range(100):
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                r.read()
            return proc, url
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("bench/target did not start")


# --baseline-src DIR: the same stackrace commands on the sources in DIR (its `src`, e.g.
# `git worktree add /tmp/main main`), as rows of their own in the same rounds
BASELINE = "(baseline) "


def env_for(label: str, baseline_src: str | None) -> dict[str, str] | None:
    """The environment of a row: a baseline row imports stackrace from DIR/src."""
    if baseline_src is None or not label.startswith(BASELINE):
        return None
    return {**os.environ, "PYTHONPATH": str(Path(baseline_src).resolve() / "src")}


def timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (the process and its waited-for children) and the exit
    status of one run, its output thrown away."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode


def picker_drawn(
    timeout: float = 20.0, env: dict[str, str] | None = None
) -> tuple[float, float, int]:
    """`stackrace` in a pseudo-terminal: seconds until the picker's title is drawn, the
    CPU seconds it had used by then (from /proc), and 0 (or 1: never drawn). `env`: the
    environment of a baseline row."""
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the app, as a person starts it
        if env is not None:
            os.environ.update(env)
        os.environ.update(TERM="xterm-256color", COLUMNS="120", LINES="40")
        os.execv(STACKRACE, [STACKRACE])
    import fcntl
    import struct
    import termios

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    seen, drawn = b"", None
    while time.perf_counter() - t0 < timeout:
        ready, _, _ = select.select([fd], [], [], 0.05)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            seen = (seen + chunk)[-65536:]
            if PICKER_TITLE in seen:
                drawn = time.perf_counter() - t0
                break
    cpu = _cpu_of(pid)
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while not os.waitpid(pid, os.WNOHANG)[0]:
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            break
        if select.select([fd], [], [], 0.05)[0]:  # drain the screen: the app may block on it
            with contextlib.suppress(OSError):
                os.read(fd, 65536)
    os.close(fd)
    return (drawn if drawn is not None else timeout), cpu, 0 if drawn is not None else 1


def _cpu_of(pid: int) -> float:
    """User + system seconds of a running process (its threads included)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def answered(url: str) -> int:
    """Requests the target answered since the last call (bench/target's /_count)."""
    with urllib.request.urlopen(url.replace("/hello", "/_count"), timeout=5) as r:
        return int(r.read())


def load_ratio(url: str, seconds: float, rounds: int, baseline_src: str | None = None) -> None:
    """Whole-process CPU per answered request, stackrace load vs wrk, at c=50 (and the
    baseline's stackrace, in the same rounds, when given)."""
    cmds = {
        "stackrace": [STACKRACE, "load", url, "-c", "50", "-d", f"{seconds:g}s"],
        "wrk": [shutil.which("wrk") or "wrk", "-t1", "-c50", f"-d{seconds:g}s", url],
    }
    if baseline_src:
        cmds[BASELINE + "stackrace"] = cmds["stackrace"]
    per: dict[str, list[float]] = {k: [] for k in cmds}
    ratios: list[float] = []
    base_ratios: list[float] = []
    for _ in range(rounds):
        got = {}
        for label in random.sample(list(cmds), len(cmds)):
            answered(url)
            _, cpu, _ = timed(cmds[label], env_for(label, baseline_src))
            got[label] = cpu / max(1, answered(url))
            per[label].append(got[label] * 1e6)
        ratios.append(got["stackrace"] / got["wrk"])
        if baseline_src:
            base_ratios.append(got[BASELINE + "stackrace"] / got["wrk"])
    print(
        f"\n{seconds:g} s at c=50, {rounds} interleaved rounds: whole-process CPU µs per "
        "answered request, median (min–max)"
    )
    for label, xs in per.items():
        print(f"  {label:10} {_spread(xs)}")
    print(f"  ratio stackrace/wrk, round by round: {_spread(ratios)}")
    if base_ratios:
        print(f"  ratio (baseline) stackrace/wrk, round by round: {_spread(base_ratios)}")


def commands(url: str) -> dict[str, list[str]]:
    """The commands measured, by label: stackrace's, and each tool that is installed."""
    out = {
        "stackrace load URL -n 1": [STACKRACE, "load", url, "-n", "1"],
        "stackrace --help": [STACKRACE, "--help"],
        "stackrace --version": [STACKRACE, "--version"],
    }
    hey = shutil.which("hey") or str(Path.home() / "go" / "bin" / "hey")
    if Path(hey).exists():
        out["hey -n 1 -c 1"] = [hey, "-n", "1", "-c", "1", url]
    oha = shutil.which("oha") or str(Path.home() / ".cargo" / "bin" / "oha")
    if Path(oha).exists():
        out["oha -n 1 -c 1"] = [oha, "--no-tui", "-n", "1", "-c", "1", url]
    wrk = shutil.which("wrk")
    if wrk:
        out["wrk -t1 -c1 -d1s (1 s by design)"] = [wrk, "-t1", "-c1", "-d1s", url]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    ap.add_argument("--picker", action="store_true", help="also the app's picker drawn")
    ap.add_argument("--load", type=float, metavar="SECONDS", help="also a load at c=50 vs wrk")
    ap.add_argument(
        "--baseline-src", metavar="DIR", help="also stackrace's rows on DIR/src, same rounds"
    )
    opts = ap.parse_args()
    server, url = start_target()
    try:
        cmds = commands(url)
        if opts.baseline_src:
            for label in [k for k in cmds if k.startswith("stackrace")]:
                cmds[BASELINE + label] = cmds[label]
        pickers = [PICKER] + ([BASELINE + PICKER] if opts.baseline_src else [])
        labels = list(cmds) + (pickers if opts.picker else [])
        samples: dict[str, list[tuple[float, float]]] = {k: [] for k in labels}
        failed: dict[str, int] = dict.fromkeys(labels, 0)
        for label in cmds:  # one warm-up each: the page cache, .pyc files
            timed(cmds[label], env_for(label, opts.baseline_src))
        for r in range(opts.rounds):
            order = labels[:]
            random.shuffle(order)  # a fresh order each round: no command always first
            for label in order:
                if label in cmds:
                    wall, cpu, rc = timed(cmds[label], env_for(label, opts.baseline_src))
                else:
                    wall, cpu, rc = picker_drawn(env=env_for(label, opts.baseline_src))
                samples[label].append((wall, cpu))
                failed[label] += rc != 0
            print(f"round {r + 1}/{opts.rounds} done", file=sys.stderr)
        load = os.getloadavg()[0]
        print(
            f"{opts.rounds} interleaved rounds, {os.cpu_count()} cores, load average "
            f"{load:.1f} at the end; medians (min–max)"
        )
        print(f"{'command':40} {'wall s':>22} {'CPU s':>22}")
        for label in labels:
            walls = [w for w, _ in samples[label]]
            cpus = [c for _, c in samples[label]]
            note = f"  ({failed[label]} failed)" if failed[label] else ""
            print(f"{label:40} {_spread(walls):>22} {_spread(cpus):>22}{note}")
        if opts.load:
            load_ratio(url, opts.load, opts.rounds, opts.baseline_src)
    finally:
        server.kill()
        server.wait()
    return 0


def _spread(xs: list[float]) -> str:
    return f"{statistics.median(xs):.3f} ({min(xs):.3f}–{max(xs):.3f})"


if __name__ == "__main__":
    sys.exit(main())
