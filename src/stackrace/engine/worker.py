"""The engine process: `python -m stackrace.engine.worker`, driven over stdin/stdout.

See channel.py for the protocol. Runs on uvloop; exits when stdin closes or the parent
dies (PR_SET_PDEATHSIG, asked for by supervise/procs.py's `follow_parent`), so an
engine never outlives whoever started it.
"""

from __future__ import annotations

import asyncio
import gc
import os
import resource
import signal
import stat
import sys
import time
from time import perf_counter_ns

import msgspec
import uvloop

from stackrace.engine.channel import (
    Add,
    Command,
    Configure,
    ErrorMsg,
    Message,
    Pause,
    Ready,
    Remove,
    Report,
    ReportMsg,
    Resume,
    SetBudget,
    SetConcurrency,
    SetRate,
    Spent,
    Stop,
    command_decoder,
)
from stackrace.engine.histogram import index_of
from stackrace.engine.model import EngineSettings, rate_problem
from stackrace.engine.request import RequestError
from stackrace.engine.target import Target
from stackrace.engine.timer import fine_timer_slack
from stackrace.supervise.procs import follow_parent

_SWEEP_S = 0.1
# How often the loop's lag is sampled. A sample is the time a callback made ready now
# waits before it runs: the rest of this loop turn and the I/O of the next, which is
# what a response that has just arrived waits before the engine can act on it.
_LAG_PROBE_S = 0.005
_INFLIGHT_EVERY = 10  # probes between samples of the requests in flight (every 50 ms)
# The stop waits at most this long (and never past a target's connect timeout) for the
# TLS handshakes under way to end and write their requests; asked again this often.
_HANDSHAKE_GRACE_S = 2.0
_HANDSHAKE_POLL_S = 0.002
_SWEEP_MARGIN_NS = 20_000_000  # the wait ends this long before a connect timeout's sweep


def runq_wait() -> tuple[float, int]:
    """(seconds this thread has spent runnable but waiting for a CPU, times it was put on
    a CPU): their ratio is how long a wake-up — a response arriving — waits for a core."""
    try:
        with open("/proc/thread-self/schedstat", "rb") as f:
            fields = f.read().split()
        return int(fields[1]) / 1e9, int(fields[2])
    except (OSError, IndexError, ValueError):
        return 0.0, 0


def raise_nofile() -> int:
    """Raise the open-files limit as far as allowed; return the soft limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = 1 << 20
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


class EngineProcess:
    def __init__(self, loop: asyncio.AbstractEventLoop, nofile: int) -> None:
        self.loop = loop
        self.nofile = nofile
        self.settings = EngineSettings()
        self.targets: dict[str, Target] = {}
        self.removed: list[Target] = []
        self.seq = 0
        self.last_wall = time.perf_counter()
        self.last_cpu = time.process_time()
        self.last_wait, self.last_runs = runq_wait()
        self.done = loop.create_future()
        self.encoder = msgspec.json.Encoder()
        self.loop_lag: dict[int, int] = {}  # lag samples since the last report (µs, sparse)
        self._probe_at = 0
        self._probes = 0
        self._stopping = False

    def send(self, msg: Message) -> None:
        data = self.encoder.encode(msg) + b"\n"
        view = memoryview(data)
        while view:
            n = os.write(1, view)
            view = view[n:]

    def error(self, message: str) -> None:
        self.send(ErrorMsg(message=message))

    def start(self) -> None:
        self.send(Ready(pid=os.getpid(), nofile=self.nofile))
        self.loop.call_later(_SWEEP_S, self.sweep)
        self.loop.call_later(_LAG_PROBE_S, self._probe)

    def _probe(self) -> None:
        self._probe_at = perf_counter_ns()
        self.loop.call_soon(self._probed)

    def _probed(self) -> None:
        i = index_of((perf_counter_ns() - self._probe_at) // 1000)
        self.loop_lag[i] = self.loop_lag.get(i, 0) + 1
        self._probes += 1
        if self._probes % _INFLIGHT_EVERY == 0:
            for t in self.targets.values():
                t.sample_inflight()
        if not self.done.done():
            self.loop.call_later(_LAG_PROBE_S, self._probe)

    def sweep(self) -> None:
        now = perf_counter_ns()
        for t in self.targets.values():
            t.sweep(now)
        self.loop.call_later(_SWEEP_S, self.sweep)

    def _selected(self, target_id: str | None) -> list[Target]:
        if target_id is None:
            return list(self.targets.values())
        t = self.targets.get(target_id)
        if t is None:
            self.error(f"no target {target_id!r}")
            return []
        return [t]

    def handle(self, cmd: Command) -> None:
        if isinstance(cmd, Report):
            self.report()
        elif isinstance(cmd, SetConcurrency):
            for t in self._selected(cmd.id):
                t.set_concurrency(cmd.n)
        elif isinstance(cmd, SetRate):
            problem = rate_problem(cmd.rate, 1)
            if problem:
                self.error(problem)  # the driver checks first (client.Engine): a guard
                return
            for t in self._selected(cmd.id):
                t.set_rate(cmd.rate)
        elif isinstance(cmd, SetBudget):
            for t in self._selected(cmd.id):
                t.set_budget(cmd.n)
        elif isinstance(cmd, Add):
            self.add(cmd)
        elif isinstance(cmd, Remove):
            gone = self.targets.pop(cmd.id, None)
            if gone is None:
                self.error(f"no target {cmd.id!r}")
            else:
                gone.remove()
                self.removed.append(gone)  # its last counts (what it abandoned) still go out
        elif isinstance(cmd, Pause):
            for t in self.targets.values():
                t.pause()
        elif isinstance(cmd, Resume):
            for t in self.targets.values():
                t.resume()
        elif isinstance(cmd, Configure):
            self.settings = cmd.settings
        elif isinstance(cmd, Stop):
            self.stop()

    def add(self, cmd: Add) -> None:
        spec = cmd.target
        problem = rate_problem(spec.rate, 1)
        if problem:
            self.error(f"target {spec.id!r}: {problem}")
            return
        if spec.id in self.targets:
            self.error(f"target {spec.id!r} exists already")
            return
        try:
            t = Target(spec, self.settings, self.loop)
        except (RequestError, ValueError) as exc:
            self.error(f"target {spec.id!r}: {exc}")
            return
        self.targets[spec.id] = t
        t.spent_hook = lambda tid: self.send(Spent(id=tid))
        t.set_rate(spec.rate)
        if spec.budget is not None:
            # before any connection opens: on loopback the first requests go out inside
            # set_concurrency, and a budget that came after would miss them
            t.set_budget(spec.budget)
        t.set_concurrency(spec.concurrency)

    def report(self, final: bool = False) -> None:
        wall = time.perf_counter()
        cpu = time.process_time()
        wait, runs = runq_wait()
        self.seq += 1
        lag, self.loop_lag = self.loop_lag, {}
        targets = [*self.targets.values(), *self.removed]
        self.removed = []
        self.send(
            ReportMsg(
                seq=self.seq,
                seconds=wall - self.last_wall,
                cpu=cpu - self.last_cpu,
                targets=[t.take_report(lag) for t in targets],
                final=final,
                wait=wait - self.last_wait,
                runs=runs - self.last_runs,
            )
        )
        self.last_wall = wall
        self.last_cpu = cpu
        self.last_wait = wait
        self.last_runs = runs

    def stop(self) -> None:
        """End the load: the closed-loop targets start nothing more, the TLS handshakes
        under way end and write their requests, then the final report and the close.

        A request is counted `sent` when it starts, and with a connection per request over
        HTTPS most of the 50 in flight at a c=50 stop are in their handshake: closed then,
        they were counted sent and no server ever read them (issue 47: sent exceeded the
        server's count by `connecting`). The server has taken each of those connections
        (TCP is up), so its handshake ends within milliseconds; waiting for it (at most
        _HANDSHAKE_GRACE_S, and never into a handshake's connect timeout) makes every
        request counted sent one the server read, as on plain TCP, where a loopback
        connect writes the request inside connect(). A connect the server's kernel has
        not completed (a full accept queue) is not waited for: it stays `connecting` in
        the final report, the server's own doing. Rate-mode targets are not paused
        (pausing abandons their schedule): they go on sending during the wait, and
        nothing of theirs is waited for."""
        if self._stopping:
            return
        self._stopping = True
        held = [t for t in self.targets.values() if t.rate is None]
        for t in held:
            t.pause()
        # A stalled handshake is not waited into its connect timeout: the sweep would
        # fail it during the wait, and it was waiting, not failed, when the load stopped.
        now = perf_counter_ns()
        ends = [start + t.connect_timeout_ns for t in held for start in t.in_handshake()]
        deadline = min([now + int(_HANDSHAKE_GRACE_S * 1e9), *ends]) - _SWEEP_MARGIN_NS
        self._finish_handshakes(held, deadline)

    def _finish_handshakes(self, held: list[Target], deadline: int) -> None:
        if perf_counter_ns() < deadline and any(t.in_handshake() for t in held):
            self.loop.call_later(_HANDSHAKE_POLL_S, self._finish_handshakes, held, deadline)
            return
        # The last report comes first: what is still in flight when the load stops is
        # reported as waiting (with its age), then the connections close.
        self.report(final=True)
        for t in self.targets.values():
            t.remove()
        if not self.done.done():
            self.done.set_result(None)


class _CommandReader(asyncio.Protocol):
    def __init__(self, engine: EngineProcess) -> None:
        self.engine = engine
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            try:
                cmd = command_decoder.decode(line)
            except msgspec.ValidationError as exc:
                self.engine.error(f"bad command {line[:200]!r}: {exc}")
                continue
            self.engine.handle(cmd)

    def connection_lost(self, exc: Exception | None) -> None:
        # The driver went away: nothing will read our reports, so stop.
        if not self.engine.done.done():
            self.engine.done.set_result(None)


async def _main() -> None:
    loop = asyncio.get_running_loop()
    engine = EngineProcess(loop, raise_nofile())
    await loop.connect_read_pipe(lambda: _CommandReader(engine), sys.stdin)
    engine.start()
    await engine.done


def main() -> None:
    if not stat.S_ISFIFO(os.fstat(0).st_mode) and not stat.S_ISSOCK(os.fstat(0).st_mode):
        sys.exit("stackrace engine: stdin must be the driver's pipe (see engine/channel.py)")
    if not follow_parent(signal.SIGKILL):
        # the parent died before we could ask to follow it: said, and not status 0 (a
        # remote engine's actor reports the status: cluster/engine_actor.py)
        sys.exit("stackrace engine: its parent ended before the engine could follow it")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    fine_timer_slack()  # rate mode's sends are due to the microsecond (timer.py)
    # Everything imported so far lives as long as the process: keep the cyclic collector
    # from walking it again and again (connections themselves leave no cycles).
    gc.freeze()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(_main())


if __name__ == "__main__":
    main()
