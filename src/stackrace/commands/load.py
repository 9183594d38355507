"""`stackrace load URL…`: load one server and print what came back, as wrk, hey and oha do.

What is loaded is one target on one server, always:
- `load URL`: that URL, as wrk would;
- `load URL1 URL2 …` on one server (same host and port): one weighted mix of their
  paths, each of weight 1, counted per request (engine/mix.py);
- `load http://host:port --path /a:3 --path /b:1` or `--scenario FILE`: your requests
  on that server, as `bench` and the app load them.
URLs of several servers are refused rather than loaded side by side: a summary, a JSON
document and a histogram describe one target, and racing servers against each other is
`bench`'s job (`bench --url NAME=URL …`). The request options (`--path`, `-m`, `-H`,
`--body`, `--body-file`, `--scenario`, `--expect-status`) are the race settings' own
(settings/race_settings.py), read into requests by stackrace.settings.scenario, so they
mean and check the same everywhere.

This module checks the command line (its options: commands/load_args.py), runs the load
and prints; nothing else. The server is the race core's one member and the load is
race/load/driver.py's (the core that bench and the app drive: the same accounting, the
same judgment); the document it prints, as JSON or as the summary, is report/load.py's
(its JSON Schema ships beside it: load.schema.json).

How long: `-d` (`-z`, oha's and hey's name for it) of measured time, or `-n N` requests
(as ab and hey: exactly N are sent, each answered or failed, then the load ends). Both
at once are refused in one line: `-n 5 -d 1s` read as "5 requests" silently dropped the
second, and "whichever ends first" makes a figure whose size nobody asked for.
`--warmup` loads first, uncounted.

Ctrl-C, SIGTERM and SIGHUP (the terminal closed) end the load early; the figures so far
are printed, then `--hdr-out` is written (whole or not at all: stackrace.base.atomicfile).
Stopped during the warm-up, it says how many requests the warm-up sent and got back.
Exit status: 0; 1 when nothing succeeded (or one request of a mix never got an expected
answer), or the load missed its objective (`--slo 'p99<50ms'`: report/slo.py, waiting
and timed-out requests counted against a latency, and failures beyond the objective's
budget, 1 % unless it names its own); 2 for a usage error; 74 when --hdr-out could not
be written (the summary is printed all the same); 130 when stopped in the warm-up.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import uvloop

from stackrace.base import printable
from stackrace.base.atomicfile import write_atomic
from stackrace.base.netguard import RemoteTargetError, require_loopback
from stackrace.cluster.options import connect
from stackrace.commands.load_args import LoadOptions, add_load_arguments, load_options
from stackrace.commands.parser import note
from stackrace.engine import early
from stackrace.engine.client import Engine
from stackrace.engine.model import (
    EngineSettings,
    EngineSnapshot,
    rate_problem,
)
from stackrace.engine.request import RequestError, build_request, parse_url
from stackrace.engine.slow_clients import ClientProfile
from stackrace.engine.tls import TlsConfigError, check_cacert
from stackrace.race.core.core import RaceCore
from stackrace.race.core.runlocks import RunLock, other_runs
from stackrace.race.core.streams import h2_conflict, h2_speakers
from stackrace.race.load.driver import LoadPlan, LoadRun, Phase, drive, member
from stackrace.report.load import HostCount, LoadFacts, failed_lines, load_result
from stackrace.report.load_text import hdr_log, summary_lines
from stackrace.report.write import EXIT_NOT_WRITTEN, check_output_paths
from stackrace.settings import parsers, scenario
from stackrace.settings.race_settings import RaceSettings
from stackrace.settings.terms import unsampled_terms
from stackrace.settings.units import fmt_count, fmt_us
from stackrace.supervise.procs import keep_off

if TYPE_CHECKING:
    from stackrace.cluster.run import ClusterRun
    from stackrace.metrics.exporter import MetricsExporter


def register(p: argparse.ArgumentParser) -> None:
    add_load_arguments(p)  # commands/load_args.py: every option, grouped, with its help
    p.set_defaults(func=run, read_options=load_options)


class LoadTarget:
    """What one `load` run sends: the server's base URL and its requests."""

    def __init__(self, base: str, url: str, kinds: list[scenario.RequestKind]) -> None:
        self.base = base  # http://host:port
        self.url = url  # the one URL given (its name in --metrics), or the base
        self.kinds = kinds

    @property
    def mixed(self) -> bool:
        return len(self.kinds) > 1

    def describe(self) -> str:
        """`GET http://127.0.0.1:8000/hello`, or `http://127.0.0.1:8000 / ×3, /slow ×1`."""
        if not self.mixed:
            k = self.kinds[0]
            return f"{k.method} {self.base}{k.target}"
        return f"{self.base} {scenario.describe(self.kinds)}"


def load_target(urls: list[str], settings: RaceSettings) -> LoadTarget:
    """The URLs and request options as one target (ValueError, RequestError or
    ScenarioError: one line naming what is wrong)."""
    parsed = [parse_url(u) for u in urls]
    servers = sorted({f"{p.host_header}" for p in parsed})
    if len(servers) > 1:
        raise ValueError(
            f"the URLs name {len(servers)} servers ({', '.join(servers)}): `load` loads one; "
            "race several with `stackrace bench --url NAME=URL --url NAME=URL`"
        )
    scheme = "https" if parsed[0].tls else "http"
    if any(p.tls != parsed[0].tls for p in parsed):
        raise ValueError("the URLs mix http:// and https://: `load` loads one server")
    base = f"{scheme}://{parsed[0].host_header}"
    if settings.own_requests:
        if len(urls) > 1 or parsed[0].target != "/":
            raise ValueError(
                f"with --path or --scenario give one base URL ({base}): the paths come "
                "from those options"
            )
        kinds = settings.request_kinds() or []
    else:
        kinds = scenario.url_kinds(
            [p.target for p in parsed],
            settings.method,
            settings.header,
            settings.body,
            settings.body_file,
            settings.expect_status,
        )
    return LoadTarget(base, urls[0] if len(urls) == 1 else base, kinds)


def run(o: LoadOptions) -> int:
    """`load`, holding a run lock (race/core/runlocks.py): a bench or a tune started meanwhile
    sees this load on its cores; one already running is named here."""
    if not o.cluster.wanted:
        for other in other_runs():
            print(f"stackrace load: note: another stackrace run shares the cores: {other}",
                  file=sys.stderr)  # fmt: skip
    lock = None if o.cluster.wanted else RunLock.take("load")
    try:
        return _run(o)
    finally:
        if lock is not None:
            lock.release()


class _Load:
    """One load as checked from the command line: what to load, how, and on what."""

    def __init__(self, o: LoadOptions) -> None:
        """ValueError, OSError, RequestError, RemoteTargetError or TlsConfigError: one
        line naming what is wrong, before anything starts."""
        self.o = o
        cpus: list[int] | None = o.engine_cpus
        self.cpus = cpus
        procs, capped = parsers.cap_procs(o.procs, cpus)
        if capped:
            note("stackrace load", capped)
        self.procs = procs
        problem = rate_problem(o.rate, procs)
        if problem:
            raise ValueError(f"--rate {o.rate:g}: {problem}")
        if o.requests and o.rate is not None:
            raise ValueError(
                f"-n/--requests counts a closed loop's requests: with --rate give -d "
                f"instead ({o.requests:,} requests at {o.rate:g} req/s take "
                f"{o.requests / o.rate:g}s)"
            )
        unsampled = unsampled_terms(o.slo)
        if unsampled:  # zeros of a server never sampled would meet any target
            raise ValueError(
                f"--slo {o.slo!r}: `load` samples no server's memory or CPU, so "
                f"{', '.join(repr(t) for t in unsampled)} would never be measured (hold a "
                "server to it with `stackrace bench --stacks NAME --slo …`, or `bench --url "
                "URL --pid PID`)"
            )
        if o.requests and o.duration is not None:
            raise ValueError(
                f"-n/--requests and -d/--duration both say how long to load: give one "
                f"(-n {o.requests:,}: exactly that many requests; -d: that long)"
            )
        if o.slow_share is not None and o.clients is None:
            raise ValueError("--slow-share needs --clients (which profile is slow)")
        if o.cacert:
            check_cacert(o.cacert)
        if o.streams is not None and not o.http2:
            raise ValueError("--streams is HTTP/2's streams per connection: give --http2 too")
        conflict = h2_conflict(h2_speakers([], o.http2), o.keepalive, o.clients)
        if conflict:  # the one rule of every front end (race/core/streams.py)
            raise ValueError(conflict)
        requests = RaceSettings(**o.requests_given)
        self.target = load_target(list(o.urls), requests)
        # the URL, method and headers are checked here, before anything starts: a space
        # or CR/LF would otherwise reach the request line (stackrace.engine.request)
        for k in self.target.kinds:
            build_request(f"{self.target.base}{k.target}", k.method, list(k.headers), k.body)
        if not o.cluster.wanted:  # a cluster run checks against its nodes instead
            require_loopback(parse_url(self.target.base).host, o.allow_remote)
        self.duration: float | None = o.duration
        if self.duration is None and not o.requests:
            self.duration = RaceSettings().duration
        clients: ClientProfile | None = o.clients
        # the requests in flight the core splits (race/core/streams.py): -c connections,
        # of --streams streams each with --http2 (as h2load's -c and -m)
        self.level: int = o.concurrency * (o.streams or 1) if o.http2 else o.concurrency
        # what the race core loads the member with (race/core/core.py RaceCore.spec)
        self.settings = RaceSettings(
            timeout=o.timeout,
            keepalive=o.keepalive,
            rate=o.rate,
            rate_connections=self.level,
            tls_verify=not o.insecure,
            cacert=str(Path(o.cacert).resolve()) if o.cacert else None,
            tls_resume=o.tls_resume,
            clients=clients.describe() if clients is not None else None,
            slow_share=1.0 if o.slow_share is None else o.slow_share,
            http2=o.http2,
            streams=o.streams or 1,
        )
        self.plan = LoadPlan(
            duration=self.duration,
            warmup=o.warmup,
            requests=o.requests,
            timeout=o.timeout,
        )

    def facts(self, procs: int) -> LoadFacts:
        s, a = self.settings, self.o
        return LoadFacts(
            url=self.target.url,
            loaded=self.target.describe(),
            kinds=self.target.kinds,
            concurrency=a.concurrency,
            rate=a.rate,
            keepalive=a.keepalive,
            duration=self.duration,
            warmup=a.warmup,
            requests_asked=a.requests,
            procs=procs,
            slo=a.slo,
            clients=s.clients,
            slow_share=s.slow_share,
            http2=s.http2,
            streams=s.streams if s.http2 else 1,
        )


def _run(o: LoadOptions) -> int:
    problem = check_output_paths({"--hdr-out": o.hdr_out})
    if problem:
        print(f"stackrace load: {problem}", file=sys.stderr)
        return 2
    try:
        load = _Load(o)
    except (ValueError, OSError, RequestError, RemoteTargetError, TlsConfigError) as exc:
        # (ScenarioError is a ValueError)
        print(f"stackrace load: {printable.terminal(str(exc))}", file=sys.stderr)
        return 2
    if not o.cluster.wanted:
        # the engine process, a fork of this one now that its imports are done (before
        # any loop or thread: engine/early.py); none when cli.py did not ask for it
        early.fork()
    if load.cpus and not o.cluster.wanted:
        keep_off(load.cpus)  # the engines' cores are theirs: the driver's reports wait elsewhere
    metrics = None
    if o.metrics is not None:
        # the exporter (its figures, the sampler's types: ~3 ms of imports) only with
        # --metrics
        from stackrace.metrics.exporter import open_exporter  # lazy: keeps load's start-up fast

        metrics = open_exporter(o.metrics, "stackrace load")
    cluster = None
    if o.cluster.wanted:  # --cluster: the engine processes run on the load nodes
        cluster = connect(o.cluster, "stackrace load")
        if cluster is None:
            if metrics is not None:
                metrics.close()
            return 2
    try:  # an EngineError (exit 1) is said by cli.py, after the cluster and --metrics close
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(_load(load, cluster, metrics))
    finally:
        if cluster is not None:
            cluster.close()
        if metrics is not None:
            metrics.close()


async def _load(
    load: _Load, cluster: ClusterRun | None = None, metrics: MetricsExporter | None = None
) -> int:
    o = load.o
    settings = EngineSettings(timeout=o.timeout, connect_timeout=o.connect_timeout)
    if cluster is not None:
        engine: Engine = cluster.engine(settings)
    else:
        engine = Engine(settings, procs=load.procs, cpus=load.cpus, allow_remote=o.allow_remote)
    core = RaceCore(
        engine,
        None,
        load.settings,
        concurrency=load.level,
        rate=o.rate,
        requests=load.target.kinds,
        expect_body=o.expect_body,
    )
    if metrics is None:
        return await _drive(load, core, engine)
    metrics.follow(lambda: engine)
    async with metrics.serving():
        return await _drive(load, core, engine)


async def _drive(load: _Load, core: RaceCore, engine: Engine) -> int:
    o = load.o
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # SIGHUP (the terminal closed) ends the load as SIGTERM does: what was measured is
    # still reported and written, not lost to the signal's default action
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    progress = sys.stderr.isatty() and not o.no_progress
    handle = member(load.target.base, load.target.url)
    try:
        run = await drive(core, handle, load.plan, stop, _progress if progress else _quiet)
    finally:
        await core.stop()  # (done already unless the driver failed)
    if progress:
        _say(lambda: sys.stderr.write("\r\033[K"))
    return _report(load, run, engine)


def _report(load: _Load, run: LoadRun, engine: Engine) -> int:
    o = load.o
    if run.refused:
        line = f"stackrace load: {run.refused}"
        _say(lambda: print(line, file=sys.stderr))
        return 1
    if run.target is None:
        line = "stackrace load: no figures (the engine stopped at once)"
        _say(lambda: print(line, file=sys.stderr))
        return 1
    if run.in_warmup:
        # stopped (Ctrl-C, SIGTERM, SIGHUP) before the warm-up was over: nothing was
        # counted, but requests were sent and answered, and the user must hear how many
        warm = run.warmup
        said = warm.describe() if warm is not None else "no request was sent"
        elapsed = run.snapshot.elapsed if run.snapshot is not None else 0.0
        line = (
            f"stackrace load: interrupted during the warm-up ({elapsed:.1f} of "
            f"{o.warmup:g}s): {said}; no figures were counted (they start after the warm-up)"
        )
        _say(lambda: print(line, file=sys.stderr))
        return 130
    tid = run.target_id
    hist = engine.total_histogram(tid)
    hosts = {h: HostCount(**vars(s)) for h, s in engine.by_host(tid).items()}
    doc = load_result(load.facts(engine.nprocs), run, hist, hosts)
    if o.json:
        _say(lambda: sys.stdout.write(msgspec.json.encode(doc).decode() + "\n"))
        if doc.slo is not None:
            s = doc.slo
            line = f"SLO met ({s.slo})" if s.meets else f"SLO MISSED ({s.slo}): {s.why}"
            _say(lambda: print(line, file=sys.stderr))
    else:
        lines = summary_lines(doc)
        if run.warmup is not None:
            lines.append(
                f"  Warm-up ({o.warmup:g}s, not counted above): {run.warmup.describe(carried=True)}"
            )
        _say(lambda: print("\n".join(lines)))
    # the file after the figures: a file that cannot be written must not cost the summary
    if o.hdr_out:
        try:
            write_atomic(Path(o.hdr_out), hdr_log(doc, hist, run.measured_from))
        except OSError as exc:
            line = f"stackrace load: --hdr-out {exc} (the figures are above)"
            _say(lambda: print(line, file=sys.stderr))
            return EXIT_NOT_WRITTEN
    failed = failed_lines(doc)
    for why in failed:
        line = f"stackrace load: {why}"
        _say(lambda: print(line, file=sys.stderr))  # noqa: B023 (called at once)
    if failed:
        return 1
    return 1 if doc.slo is not None and not doc.slo.meets else 0


def _say(show: Callable[[], object]) -> None:
    """Print, unless the terminal is gone (closed: EIO, after SIGHUP) or the pipe closed:
    the exit status and the files must not depend on a reader being there."""
    try:
        show()
    except OSError:
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (for the exit flush)


def _quiet(snap: EngineSnapshot, phase: Phase) -> None:
    return None


def _progress(snap: EngineSnapshot, phase: Phase) -> None:
    t = snap.targets[0] if snap.targets else None
    if t is None:
        return
    if phase.warming:
        where = f"warming {phase.elapsed:4.1f}/{phase.planned or 0:g}s"
    elif phase.requests:
        where = f"{t.total.attempts:,}/{phase.requests:,} requests"
    else:
        where = f"{phase.elapsed:4.1f}/{phase.planned or 0:.0f}s"
    fails = t.interval.failed if phase.warming else t.total.failed
    good = fmt_count(t.interval.goodput)  # answers that count, as the summary's req/s
    line = (
        f"{where}  {good:>6} req/s  p99 {fmt_us(t.interval.latency.p99):>8}"
        f"  failures {fails}  waiting {t.interval.waiting}"
        f"  conns {t.connections}  engine {snap.engine_cpu:3.0f}%"
        + ("  SATURATED" if snap.saturated else "")
    )
    _say(lambda: (sys.stderr.write("\r\033[K" + line), sys.stderr.flush()))
