"""`stackrace load URL…`: drive one server with the engine and print a wrk-like summary.

What is loaded is one target on one server, always:
- `load URL`: that URL, as wrk would;
- `load URL1 URL2 …` on one server (same host and port): one weighted mix of their
  paths, each of weight 1, counted per request (engine/mix.py);
- `load http://host:port --path /a:3 --path /b:1` or `--scenario FILE`: your requests
  on that server, as `bench` and the app load them.
URLs of several servers are refused rather than loaded side by side: a summary, a JSON
document and a histogram describe one target, and racing servers against each other is
`bench`'s job (`bench --url NAME=URL …` gives every output for servers started by
hand). The request options (`--path`, `-m`, `-H`, `--body`, `--body-file`,
`--scenario`, `--expect-status`) are the race settings' own (settings/race_settings.py), read
into requests by stackrace.settings.scenario, so they mean and check the same everywhere.

Ctrl-C, SIGTERM and SIGHUP (the terminal closed) end the load early; the figures so far
are printed, then `--hdr-out` is written (whole or not at all: stackrace.base.atomicfile).
Stopped during the warm-up, it says how many requests the warm-up sent and got back.
Exit status: 0; 1 when nothing succeeded (or one request of a mix never got an expected
answer), or the load missed its objective (`--slo 'p99<50ms'`: report/slo.py, waiting
and timed-out requests counted against a latency, and failures beyond the objective's
budget, 1 % unless it names its own); 2 for a usage error; 74 when
--hdr-out could not be written (the summary is printed all the same); 130 when stopped
in the warm-up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import uvloop

from stackrace.base.atomicfile import write_atomic
from stackrace.base.netguard import RemoteTargetError, require_loopback
from stackrace.commands.cluster_args import add_cluster_arguments, connect_from_args, wants_cluster
from stackrace.commands.metrics_args import add_metrics_arguments, open_metrics
from stackrace.commands.settings_args import add_options, given
from stackrace.engine.client import Engine, EngineError
from stackrace.engine.clients import ClientProfile, ProfileError, parse_profile, parse_share
from stackrace.engine.histogram import LatencyHistogram
from stackrace.engine.model import (
    HTTP_STATUS,
    MAX_RATE_PER_PROCESS,
    BodyCheck,
    EngineSettings,
    EngineSnapshot,
    LatencySummary,
    TargetSnapshot,
    TargetSpec,
    WindowStats,
    rate_problem,
)
from stackrace.engine.request import RequestError, build_request, parse_url
from stackrace.engine.tls import TlsConfigError, check_cacert
from stackrace.metrics.exporter import MetricsError, MetricsExporter
from stackrace.race.live.explain import starved_sentence
from stackrace.report.failures import requests_failed
from stackrace.report.schema import PathResult
from stackrace.report.slo import Slo
from stackrace.report.write import EXIT_NOT_WRITTEN, check_output_paths
from stackrace.rules import accounting
from stackrace.rules.engine import engine_limit, engine_limited, engine_share
from stackrace.rules.level import starves
from stackrace.settings import options, scenario
from stackrace.settings.race_settings import REQUEST_FIELDS, RaceSettings
from stackrace.settings.race_settings import options as options_of
from stackrace.settings.units import fmt_bytes, fmt_count, fmt_us
from stackrace.supervise.procs import keep_off

if TYPE_CHECKING:
    from stackrace.cluster.run import ClusterRun

# `warmup` means the same in load and bench: load this long before the figures count.
# Only its default differs, on purpose: `load` is one measurement of one target, read
# beside wrk's and ab's (which count from the first request), so it counts everything
# unless asked; bench compares stacks level by level, and a level's first seconds
# (connections opening, a JIT's first requests) would blur that, so its levels warm up
# (RaceSettings.warmup, 2 s).
LOAD_WARMUP = 0.0


def register(p: argparse.ArgumentParser) -> None:
    # every value is checked by its parser before anything starts (stackrace.settings.options)
    p.add_argument(
        "urls",
        nargs="+",
        metavar="URL",
        help="http:// or https:// URL to load (loopback only unless --allow-remote). Several "
        "URLs of one server (same host and port) are one weighted mix of their paths, one "
        "each; URLs of different servers are refused (race servers with `stackrace bench "
        "--url NAME=URL …`). With --path or --scenario: the server's base URL",
    )
    p.add_argument(
        "-c",
        "--concurrency",
        type=options.positive_int,
        default=10,
        help="connections (default 10)",
    )
    # duration, warm-up and timeout are the race settings' (settings/race_settings.py): the same
    # parser and meaning, and the same defaults but for the warm-up's (LOAD_WARMUP)
    settings, race = options_of(), RaceSettings()
    duration, warmup, timeout = (settings[k].parse for k in ("duration", "warmup", "timeout"))
    assert duration and warmup and timeout  # each has a parser (settings/race_settings.py)
    p.add_argument(
        "-d",
        "--duration",
        type=duration,
        default=race.duration,
        help=f"how long to load (default {race.duration:g}s)",
    )
    p.add_argument(
        "--warmup",
        type=warmup,
        default=LOAD_WARMUP,
        help=f"{settings['warmup'].help} (default {LOAD_WARMUP:g}s)",
    )
    p.add_argument(
        "--rate",
        type=options.positive_rate,
        default=None,
        help="constant request rate per second (open loop, latency corrected for "
        f"coordinated omission); at most {MAX_RATE_PER_PROCESS:,} per engine process "
        "(--procs); default: closed loop",
    )
    p.add_argument(
        "--timeout",
        type=timeout,
        default=race.timeout,
        help=f"{settings['timeout'].help} (default {race.timeout:g}s)",
    )
    p.add_argument(
        "--connect-timeout",
        type=options.timeout_duration,
        default="5s",
        help="connect timeout (default 5s)",
    )
    p.add_argument(
        "--procs",
        type=options.procs,
        default="1",
        help="engine processes: a number or 'auto' (capped at the usable cores)",
    )
    p.add_argument(
        "--engine-cpus",
        type=options.cpu_list,
        default=None,
        help="pin engine processes to these CPUs, e.g. '1' or '2,3'",
    )
    # --path, -m, -H, --body, --body-file, --scenario, --expect-status: declared once
    add_options(
        p.add_argument_group("your requests (as in bench and the app)"), only=REQUEST_FIELDS
    )
    add_options(p, only=("slo",))  # --slo, as in bench and the app
    p.add_argument(
        "--expect-body",
        default=None,
        help="count a response whose body differs from this as invalid_body",
    )
    p.add_argument(
        "--no-keepalive",
        dest="keepalive",
        action="store_false",
        help="every request on a new connection (Connection: close), as ab without -k",
    )
    add_tls_arguments(p)
    p.add_argument(
        "--clients",
        type=client_profile,
        default=None,
        metavar="PROFILE",
        help="slow clients: 'slow', 'mobile', 'wan', or NAME:upload=20ms,read=64KB/s "
        "(each request sent in pieces over `upload`, responses read at `read`; "
        "see stackrace.engine.clients)",
    )
    p.add_argument(
        "--slow-share",
        type=slow_share,
        default=None,
        metavar="SHARE",
        help="the share of connections that are slow clients, e.g. 20%% (default: all, "
        "with --clients)",
    )
    p.add_argument(
        "--allow-remote", action="store_true", help="allow a target that is not on this machine"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no live progress line on stderr (it is shown only on a terminal anyway)",
    )
    add_metrics_arguments(p)
    p.add_argument(
        "--hdr-out",
        default=None,
        help="write the latency histogram (HdrHistogram V2 base64) to this file",
    )
    add_cluster_arguments(p)
    p.set_defaults(func=run)


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


def client_profile(text: str) -> ClientProfile:
    try:
        return parse_profile(text)
    except ProfileError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def slow_share(text: str) -> float:
    try:
        return parse_share(text)
    except ProfileError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_tls_arguments(p: argparse.ArgumentParser) -> None:
    """--insecure, --cacert and --tls-resume (https:// URLs)."""
    tls = p.add_argument_group("https")
    tls.add_argument(
        "-k",
        "--insecure",
        action="store_true",
        help="https: do not check the server's certificate or name (as curl -k)",
    )
    tls.add_argument(
        "--cacert",
        default=None,
        metavar="FILE",
        help="https: trust the certificates in this PEM file instead of the system's "
        "(a self-signed server's own certificate)",
    )
    tls.add_argument(
        "--tls-resume",
        action="store_true",
        help="https: offer the last TLS session when connecting, so the server can resume "
        "it (default: a full handshake on every connection, as distinct clients make)",
    )


def run(args: argparse.Namespace) -> int:
    """`load`, holding a run lock (race/core/runlocks.py): a bench or a tune started meanwhile
    sees this load on its cores; one already running is named here."""
    from stackrace.race.core.runlocks import RunLock, other_runs

    if not wants_cluster(args):
        for other in other_runs():
            print(f"stackrace load: note: another stackrace run shares the cores: {other}",
                  file=sys.stderr)  # fmt: skip
    lock = None if wants_cluster(args) else RunLock.take("load")
    try:
        return _run(args)
    finally:
        if lock is not None:
            lock.release()


def _run(args: argparse.Namespace) -> int:
    problem = check_output_paths({"--hdr-out": args.hdr_out})
    if problem:
        print(f"stackrace load: {problem}", file=sys.stderr)
        return 2
    try:
        duration: float = args.duration
        warmup: float = args.warmup
        settings = EngineSettings(timeout=args.timeout, connect_timeout=args.connect_timeout)
        cpus: list[int] | None = args.engine_cpus
        if cpus and not wants_cluster(args):
            # the engines' cores are theirs: the driver's reports wait elsewhere
            keep_off(cpus)
        procs, capped = options.cap_procs(args.procs, cpus)
        if capped:
            options.note("stackrace load", capped)
        problem = rate_problem(args.rate, procs)
        if problem:
            raise ValueError(f"--rate {args.rate:g}: {problem}")
        request_settings = RaceSettings(
            **{k: v for k, v in given(args).items() if k in REQUEST_FIELDS}
        )
        target = load_target(args.urls, request_settings)
        spec = scenario.target_spec(
            target.url,  # the target's name in --metrics (and nowhere else in `load`)
            target.base,
            target.kinds,
            concurrency=args.concurrency,
            rate=args.rate,
            keepalive=args.keepalive,
        )
        if args.expect_body:
            spec.check = BodyCheck(kind="exact", arg=args.expect_body)
        if args.slow_share is not None and args.clients is None:
            raise ValueError("--slow-share needs --clients (which profile is slow)")
        spec.tls_verify = not args.insecure
        spec.cacert = str(Path(args.cacert).resolve()) if args.cacert else None
        spec.tls_resume = args.tls_resume
        spec.clients = args.clients
        spec.slow_share = 1.0 if args.slow_share is None else args.slow_share
        if args.cacert:
            check_cacert(args.cacert)
        # the URL, method and headers are checked here, before anything starts: a space
        # or CR/LF would otherwise reach the request line (stackrace.engine.request)
        build_request(spec.url, spec.method, spec.headers, spec.body)
        for e in spec.mix:
            build_request(f"{target.base}{e.target}", e.method, e.headers, e.body)
        if not wants_cluster(args):  # a cluster run checks against its nodes instead
            require_loopback(parse_url(spec.url).host, args.allow_remote)
    except (ValueError, OSError, RequestError, RemoteTargetError, TlsConfigError) as exc:
        # (ScenarioError is a ValueError)
        print(f"stackrace load: {exc}", file=sys.stderr)
        return 2
    try:
        metrics = open_metrics(args, "stackrace load")
    except MetricsError as exc:
        print(f"stackrace load: {exc}", file=sys.stderr)
        return 2
    cluster = None
    if wants_cluster(args):  # --cluster: the engine processes run on the load nodes
        cluster = connect_from_args(args, "stackrace load")
        if cluster is None:
            if metrics is not None:
                metrics.close()
            return 2
    try:
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(
                _load(args, target, spec, settings, procs, cpus, duration, warmup, cluster, metrics)
            )
    except EngineError as exc:
        print(f"stackrace load: {exc}", file=sys.stderr)
        return 1
    finally:
        if cluster is not None:
            cluster.close()
        if metrics is not None:
            metrics.close()


async def _load(
    args: argparse.Namespace,
    target: LoadTarget,
    spec: TargetSpec,
    settings: EngineSettings,
    procs: int,
    cpus: list[int] | None,
    duration: float,
    warmup: float,
    cluster: ClusterRun | None = None,
    metrics: MetricsExporter | None = None,
) -> int:
    if cluster is not None:
        engine: Engine = cluster.engine(settings, warmup=warmup)
        procs = engine.nprocs
    else:
        engine = Engine(
            settings, procs=procs, warmup=warmup, cpus=cpus, allow_remote=args.allow_remote
        )
    if metrics is None:
        return await _drive(args, engine, target, spec, procs, duration, warmup)
    metrics.follow(lambda: engine)
    async with metrics.serving():
        return await _drive(args, engine, target, spec, procs, duration, warmup)


async def _drive(
    args: argparse.Namespace,
    engine: Engine,
    target: LoadTarget,
    spec: TargetSpec,
    procs: int,
    duration: float,
    warmup: float,
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    # SIGHUP (the terminal closed) ends the load as SIGTERM does: what was measured is
    # still reported and written, not lost to the signal's default action
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    progress = sys.stderr.isatty() and not args.no_progress
    cpu_samples: list[float] = []
    saturated = 0
    every = _Seen()  # every interval the engine reported, warm-up included
    await engine.start()
    started = time.monotonic()
    measured_from = time.time() + warmup  # wall clock, for --hdr-out's log
    end = started + warmup + duration

    async def watch() -> None:
        nonlocal saturated
        async for snap in engine.snapshots():
            every.add(snap)
            if not snap.warming:
                cpu_samples.append(snap.engine_cpu)
                saturated += snap.saturated
            if progress:
                _progress(snap, warmup + duration)
            if time.monotonic() >= end - 0.01:
                stop.set()

    watcher = asyncio.create_task(watch())
    await asyncio.sleep(0)  # subscribed before the first interval: none is missed
    try:
        await engine.add_target(spec)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), warmup + duration + 1.0)
        final = await engine.stop()
        watcher.cancel()
    finally:
        await engine.stop()
    if progress:
        _say(lambda: sys.stderr.write("\r\033[K"))
    if final is None or not final.targets:
        line = "stackrace load: no figures (the engine stopped at once)"
        _say(lambda: print(line, file=sys.stderr))
        return 1
    every.add(final)
    t = final.targets[0]
    cpu = sum(cpu_samples) / len(cpu_samples) if cpu_samples else 0.0
    hist = engine.total_histogram(spec.id)
    per_request, unassigned = _per_request(target, t)
    warm = every.warmup(t.total) if warmup > 0 else None
    if final.warming and warm is not None:
        # stopped (Ctrl-C, SIGTERM, SIGHUP) before the warm-up was over: nothing was
        # counted, but requests were sent and answered, and the user must hear how many
        _say(
            lambda: print(
                f"stackrace load: interrupted during the warm-up ({final.elapsed:.1f} of "
                f"{warmup:g}s): {warm.describe()}; no figures were counted (they start "
                "after the warm-up)",
                file=sys.stderr,
            )
        )
        return 130
    if args.json:
        little = accounting.little_check(t.total, spec.concurrency) if not spec.rate else None
        out = {
            "url": spec.url,
            # what was loaded: one line, and each request as sent
            "loaded": target.describe(),
            "method": spec.method,
            "concurrency": spec.concurrency,
            "rate": spec.rate,
            "keepalive": spec.keepalive,
            "duration": duration,
            "warmup": warmup,
            "procs": procs,
            # sent == requests (answered) + lost (failed, no answer) + waiting; the
            # latencies are in microseconds (total.latency.unit)
            "total": t.total,
            # answers that count, a second (2xx/3xx, or the statuses expected): the
            # figure of throughput; total.rps counts every answer, an error too
            "goodput": t.total.goodput,
            "accounting": {
                "sent": t.total.sent,
                "answered": t.total.requests,
                "failed_no_answer": t.total.lost,
                "waiting": t.total.waiting,
                # of waiting: the connect was still under way, no byte of it was written
                "connecting": t.total.connecting,
                # of connecting: TCP was up, the TLS handshake under way
                "handshaking": t.total.handshaking,
                "oldest_wait_us": t.total.oldest_wait_us,
            },
            "little": None
            if little is None
            else {
                "connections": little.connections,
                "in_flight": little.in_flight,
                "explained": little.explained,
                "ok": little.ok,
                "reason": little.reason,
            },
            "engine_share": engine_share(t.total),
            "engine_limited": engine_limited(t.total, t.saturated),
            "engine_limit": engine_limit(t.total, t.saturated),
            "engine": {
                "cpu_percent": cpu,
                "saturated_intervals": saturated,
                "intervals": len(cpu_samples),
            },
            # each request (one URL: the totals): sent = answered + failed + waiting;
            # errors: answered with a status not expected of it; unassigned: requests that
            # never had a connection to be sent on (a failed connect), of no request
            "requests": [
                {
                    **msgspec.structs.asdict(p),
                    "method": k.method,
                    "target": k.target,
                    "weight": k.weight,
                    "expect": k.expect,
                }
                for k, p in zip(target.kinds, per_request, strict=True)
            ],
            "unassigned": unassigned,
            # the warm-up's requests, not in `total`: sent, answered, failed without an
            # answer (None without a warm-up)
            "warmup_accounting": None
            if warm is None
            else {"sent": warm.sent, "answered": warm.answered, "failed_no_answer": warm.lost},
            "errors": engine.errors,
            # engine processes lost during the load (a cluster's load host): where,
            # when, why, and the requests in flight counted abandoned
            "lost": final.lost,
            # what each host's engine processes sent and got back (a cluster's load
            # hosts; "local" on one machine)
            "hosts": {h: vars(share) for h, share in engine.by_host(spec.id).items()},
            # --slo: whether the load met it, term by term (report/slo.py)
            "slo": _slo_json(args.slo, t.total, hist),
            "hdr": hist.encode_base64(),
        }
        _say(lambda: sys.stdout.write(msgspec.json.encode(out).decode() + "\n"))
    else:
        _say(
            lambda: _summary(
                target, spec, t, procs, cpu, saturated, len(cpu_samples), engine.errors
            )
        )
        if target.mixed or spec.mix:
            _say(lambda: _request_lines(target, per_request, unassigned))
        if warm is not None:
            line = f"  Warm-up ({warmup:g}s, not counted above): {warm.describe(carried=True)}"
            _say(lambda: print(line))
    # the file after the figures: a file that cannot be written must not cost the summary
    if args.hdr_out:
        try:
            write_atomic(Path(args.hdr_out), _hdr_log(target, spec, t, hist, measured_from))
        except OSError as exc:
            line = f"stackrace load: --hdr-out {exc} (the figures are above)"
            _say(lambda: print(line, file=sys.stderr))
            return EXIT_NOT_WRITTEN
    missed = requests_failed(per_request) if target.mixed else []
    slo_missed = False
    if args.slo:
        slo = Slo.parse(args.slo)
        judged = slo.judge_window(t.total, hist)
        slo_missed = not judged.meets
        line = f"SLO met ({slo.text})" if judged.meets else f"SLO MISSED ({slo.text}): {judged.why}"
        _say(lambda: print(line, file=sys.stderr if args.json else sys.stdout))
    if t.total.ok == 0:
        # a run where nothing succeeded is not a measurement: scripts must see it fail
        f = t.total.failures
        # failures counted beside a response (an HTTP error, a wrong body) are in `requests`
        attempts = (
            t.total.requests + t.total.failed - f.get("http_status", 0) - f.get("invalid_body", 0)
        )
        w = t.total
        if attempts:
            why = f"every request failed ({attempts} attempts, none succeeded)"
        elif w.waiting:
            why = f"no answer: {w.waiting} requests were still waiting when the load stopped" + (
                f" ({w.connecting} of them still connecting"
                + (f", {w.handshaking} in the TLS handshake" if w.handshaking else "")
                + ")"
                if w.connecting
                else ""
            )
        else:
            why = "no request was made"
        _say(lambda: print(f"stackrace load: {why}", file=sys.stderr))
        return 1
    if missed:
        # a typo'd path in a mix of good ones fails the run, as in bench (report/failures)
        for name, why in missed:
            line = f"stackrace load: {name}: {why}"
            _say(lambda: print(line, file=sys.stderr))  # noqa: B023 (called at once)
        return 1
    return 1 if slo_missed else 0


def _slo_json(spec: str | None, total: WindowStats, hist: LatencyHistogram) -> object:
    if not spec:
        return None
    slo = Slo.parse(spec)
    judged = slo.judge_window(total, hist)
    return {
        "slo": slo.text,
        "meets": judged.meets,
        "why": judged.why,
        "figures": judged.figures(),
    }


def _say(show: Callable[[], object]) -> None:
    """Print, unless the terminal is gone (closed: EIO, after SIGHUP) or the pipe closed:
    the exit status and the files must not depend on a reader being there."""
    try:
        show()
    except OSError:
        sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (for the exit flush)


class _Seen:
    """Every interval the engine reported (by seq), summed: with the totals, what the
    warm-up sent and got back, which `total` leaves out by design."""

    def __init__(self) -> None:
        self.seqs: set[int] = set()
        self.sent = self.answered = self.lost = 0

    def add(self, snap: EngineSnapshot) -> None:
        if snap.seq in self.seqs or not snap.targets:
            return
        self.seqs.add(snap.seq)
        w = snap.targets[0].interval
        self.sent += w.started
        self.answered += w.requests
        self.lost += w.lost

    def warmup(self, total: WindowStats) -> _Warmup:
        """What was not counted in `total`: the warm-up (and an interval that straddled
        its end, which the engine counts in neither)."""
        return _Warmup(
            sent=max(0, self.sent - total.started),
            answered=max(0, self.answered - total.requests),
            lost=max(0, self.lost - total.lost),
        )


@dataclass(frozen=True)
class _Warmup:
    sent: int
    answered: int
    lost: int

    def describe(self, carried: bool = False) -> str:
        """`carried`: the warm-up ended and the load went on, so the requests still in
        flight then were carried into the measured time (and are counted there)."""
        waiting = max(0, self.sent - self.answered - self.lost)
        where = "in flight when the measured time began" if carried else "still waiting"
        return (
            f"{self.sent:,} requests sent, {self.answered:,} answered, "
            f"{self.lost:,} failed without an answer, {waiting:,} {where}"
        )


def _per_request(target: LoadTarget, t: TargetSnapshot) -> tuple[list[PathResult], int]:
    """Each request's figures over the measured window, and how many requests never had
    a connection (a failed connect is of no request: the kind is chosen as one is
    written). One request without a mix: the target's totals are its figures."""
    w = t.total
    if w.kinds is None:
        one = PathResult(
            name=target.kinds[0].label,
            sent=w.sent,
            answered=w.requests,
            errors=w.failures.get(HTTP_STATUS, 0),
            failed=w.lost,
            waiting=w.waiting,
            status=dict(w.status),
        )
        return [one], 0
    out = [
        PathResult(
            name=kind.label,
            sent=k.sent,
            answered=k.answered,
            errors=k.errors,
            failed=k.failed,
            waiting=k.waiting,
            status=dict(k.status),
        )
        for kind, k in zip(target.kinds, w.kinds, strict=True)
    ]
    return out, max(0, w.sent - sum(p.sent for p in out))


def _request_lines(target: LoadTarget, results: list[PathResult], unassigned: int) -> None:
    print("  Per request (sent = answered + failed + waiting):")
    width = max(len(_kind_label(k)) for k in target.kinds)
    for kind, p in zip(target.kinds, results, strict=True):
        line = (
            f"    {_kind_label(kind):<{width}}  sent {p.sent} = {p.answered} answered + "
            f"{p.failed} failed + {p.waiting} waiting"
        )
        if p.errors:
            bad = ", ".join(f"{c}: {n}" for c, n in sorted(p.status.items()))
            line += f"; {p.errors} answers not expected ({bad})"
        print(line)
    if unassigned:
        print(f"    {unassigned} more never had a connection to be sent on (failed connects)")


def _kind_label(kind: scenario.RequestKind) -> str:
    return f"{kind.label} ×{kind.weight}" if kind.weight != 1 else kind.label


def _hdr_log(
    target: LoadTarget,
    spec: TargetSpec,
    t: TargetSnapshot,
    hist: LatencyHistogram,
    start: float,
) -> str:
    """The latency histogram as an HdrHistogram interval log (the `.hlog` format that
    HdrHistogram's own log readers and plotters take): comment lines say what was
    loaded, then one interval, the measured window. Latencies are in microseconds; the
    interval's max column is in milliseconds."""
    w = t.total
    mode = f"{spec.rate:g} req/s" if spec.rate else "closed loop"
    when = datetime.fromtimestamp(start, UTC).isoformat(timespec="seconds")
    lines = [
        f"#stackrace load {target.describe()}",
        f"#{spec.concurrency} connections, {mode}, {w.seconds:.3f}s measured, "
        f"{w.requests} answers; latency in microseconds",
        f"#[StartTime: {start:.3f} (seconds since epoch), {when}]",
        f"#[BaseTime: {start:.3f} (seconds since epoch)]",
        '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"',
        f"0.000,{w.seconds:.3f},{w.latency.max / 1000:.3f},{hist.encode_base64()}",
    ]
    return "\n".join(lines) + "\n"


def tls_lines(w: WindowStats) -> None:
    """https: the phases of a request apart (new connections' connect and handshake, the
    first byte), and how many handshakes resumed a session."""
    if w.handshakes == 0 and w.first_byte is None:
        return
    for name, s in (
        ("TCP connect", w.connect),
        ("TLS handshake", w.tls),
        ("First byte", w.first_byte),
    ):
        if s is not None and s.count:
            vals = [s.p50, s.p90, s.p99, s.p999, s.max, s.mean]
            print(f"  {name:<22}" + "".join(f"{fmt_us(v):>10}" for v in vals))
    print(
        f"  TLS handshakes: {w.handshakes}, {w.resumed} resumed"
        + (f" ({100 * w.resumed / w.handshakes:.0f}%)" if w.handshakes else "")
    )


def _progress(snap: EngineSnapshot, planned: float) -> None:
    t = snap.targets[0] if snap.targets else None
    if t is None:
        return
    phase = "warming" if snap.warming else f"{snap.elapsed:4.1f}/{planned:.0f}s"
    fails = t.total.failed if not snap.warming else t.interval.failed
    good = fmt_count(t.interval.goodput)  # answers that count, as the summary's req/s
    line = (
        f"{phase}  {good:>6} req/s  p99 {fmt_us(t.interval.latency.p99):>8}"
        f"  failures {fails}  waiting {t.interval.waiting}"
        f"  conns {t.connections}  engine {snap.engine_cpu:3.0f}%"
        + ("  SATURATED" if snap.saturated else "")
    )
    sys.stderr.write("\r\033[K" + line)
    sys.stderr.flush()


def _summary(
    target: LoadTarget,
    spec: TargetSpec,
    t: TargetSnapshot,
    procs: int,
    cpu: float,
    saturated: int,
    intervals: int,
    errors: list[str],
) -> None:
    w = t.total
    lat = w.latency
    mode = f"{spec.rate:g} req/s constant rate" if spec.rate else "closed loop"
    if not spec.keepalive:
        mode += ", a new connection per request"
    if spec.clients is not None:
        mode += f", {100 * spec.slow_share:g}% slow clients ({spec.clients.describe()})"
    print(f"stackrace load {target.describe()}")
    print(
        f"  {spec.concurrency} connections, {mode}, {procs} engine process"
        f"{'es' if procs > 1 else ''}, {w.seconds:.2f}s measured"
    )
    label = "Latency (corrected)" if w.latency_uncorrected is not None else "Latency"
    print(f"  {label:<22}{'p50':>10}{'p90':>10}{'p99':>10}{'p99.9':>10}{'max':>10}{'mean':>10}")

    def row(name: str, s: LatencySummary) -> None:
        if not s.count:
            # no answer, no latency: a row of zeros would read as instant answers
            print(f"  {name:<22}{'no answers':>10}")
            return
        vals = [s.p50, s.p90, s.p99, s.p999, s.max, s.mean]
        print(f"  {name:<22}" + "".join(f"{fmt_us(v):>10}" for v in vals))

    row("", lat)
    if w.latency_uncorrected is not None:
        row("Latency (uncorrected)", w.latency_uncorrected)
    tls_lines(w)
    print(f"  {w.requests} requests in {w.seconds:.2f}s, {fmt_bytes(w.bytes)} read")
    # answers that count (goodput): a 404 answered in a millisecond is no throughput
    print(f"  Requests/sec: {w.goodput:.2f}")
    if w.requests > w.ok:
        # a 404 answered is no throughput: the figure above counts 2xx/3xx (or the
        # expected statuses); every answer, the errors with them, is said apart
        print(f"  Answers/sec:  {w.rps:.2f} in all, {w.requests - w.ok} of them errors")
    # every request sent is answered, failed or still waiting: say where each one is
    print(
        f"  Sent {w.sent}: {w.requests} answered, {w.lost} failed without an answer, "
        f"{w.waiting} still waiting when the load stopped"
        + (f" (oldest {fmt_us(w.oldest_wait_us)})" if w.waiting else "")
        + (f", {w.connecting} of them still connecting" if w.connecting else "")
        + (f" ({w.handshaking} in the TLS handshake)" if w.handshaking else "")
    )
    if starves(w):
        # not "did not keep up": others were answered all along (rules/breaking.py STARVING)
        # where the starved are, from the last interval's figures, or the run's when
        # the last interval was a sliver too short to sample them
        last = t.interval if t.interval.starved_share else w
        print(f"  ! starving: {starved_sentence(last, w)}, while the others were answered")
    elif held := (
        accounting.connections_limit(w, spec.concurrency, spec.rate) if spec.rate else ""
    ):
        # most of those waiting were never written: the connections, not the server, held
        # them, however long they waited (a busy machine moves the oldest's age)
        print(f"  ! {held}")
    elif w.waiting and w.oldest_wait_us >= 0.5 * w.seconds * 1e6:
        print(
            f"  ! {w.waiting} clients were still waiting at the end, the oldest for "
            f"{fmt_us(w.oldest_wait_us)}: the server did not keep up with {spec.concurrency} "
            "connections (their wait is in no latency figure above)"
        )
    if not spec.rate:
        little = accounting.little_check(w, spec.concurrency)
        if little is not None and not little.ok:
            print(f"  ! {little.describe()}")
    limit = engine_limit(w, t.saturated)
    if limit:
        print(
            f"  ! engine-limited: {limit} (lag mean {fmt_us(w.lag.mean)}, "
            f"p99 {fmt_us(w.lag.p99)}); use --procs or a core of its own"
        )
    if w.send_lateness is not None and w.send_lateness.count:
        s = w.send_lateness
        print(
            f"  Send lateness (the engine's scheduler, due time to write): p50 "
            f"{fmt_us(s.p50)}, p99 {fmt_us(s.p99)}, max {fmt_us(s.max)}"
        )
    if w.late:
        print(f"  Late sends (every connection busy): {w.late}")
    if w.failures:
        parts = []
        for kind, n in sorted(w.failures.items(), key=lambda kv: -kv[1]):
            if kind == "http_status":
                codes = ", ".join(f"{c}: {k}" for c, k in sorted(w.status.items()) if c >= 400)
                parts.append(f"{kind} {n} ({codes})")
            else:
                parts.append(f"{kind} {n}")
        print(f"  Failures: {sum(w.failures.values())} — " + ", ".join(parts))
        if w.errors:
            why = sorted(w.errors.items(), key=lambda kv: -kv[1])
            print("  Why: " + ", ".join(f"{reason} ({n})" for reason, n in why[:4]))
        if any(reason.startswith("certificate:") for reason in w.errors):
            print(
                "  ! the server's certificate was not trusted: give its CA with --cacert "
                "FILE, or skip the check with --insecure (-k)"
            )
    else:
        print("  Failures: none")
    sat = f"saturated in {saturated} of {intervals} intervals" if saturated else "not saturated"
    print(f"  Engine CPU: {cpu:.0f}% of one core, {sat}")
    for e in errors:
        print(f"  engine: {e}")
