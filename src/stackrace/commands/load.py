"""`stackrace load URL`: drive one URL with the engine and print a wrk-like summary."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec
import uvloop

from stackrace import options
from stackrace.cluster.flags import add_cluster_arguments, connect_from_args, wants_cluster
from stackrace.engine.client import Engine, EngineError
from stackrace.engine.model import (
    BodyCheck,
    EngineSettings,
    EngineSnapshot,
    LatencySummary,
    TargetSnapshot,
    TargetSpec,
)
from stackrace.engine.request import RequestError, parse_url
from stackrace.metrics.exporter import MetricsError, MetricsExporter
from stackrace.metrics.exporter import open_from_args as open_metrics
from stackrace.metrics.flags import add_metrics_arguments
from stackrace.netguard import RemoteTargetError, require_loopback
from stackrace.race import accounting
from stackrace.report.write import check_output_paths
from stackrace.units import fmt_bytes, fmt_count, fmt_us

if TYPE_CHECKING:
    from stackrace.cluster.run import ClusterRun


def register(p: argparse.ArgumentParser) -> None:
    # every value is checked by its parser before anything starts (stackrace.options)
    p.add_argument("url", help="http:// URL to load (loopback only unless --allow-remote)")
    p.add_argument(
        "-c",
        "--concurrency",
        type=options.positive_int,
        default=10,
        help="connections (default 10)",
    )
    p.add_argument(
        "-d",
        "--duration",
        type=options.positive_duration,
        default="10s",
        help="how long to load (default 10s)",
    )
    p.add_argument(
        "--warmup",
        type=options.non_negative_duration,
        default="0s",
        help="load this long before figures count",
    )
    p.add_argument(
        "--rate",
        type=options.positive_rate,
        default=None,
        help="constant request rate per second (open loop, latency corrected "
        "for coordinated omission); default: closed loop",
    )
    p.add_argument(
        "--timeout",
        type=options.positive_duration,
        default="10s",
        help="request timeout (default 10s)",
    )
    p.add_argument(
        "--connect-timeout",
        type=options.positive_duration,
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
    p.add_argument("-m", "--method", default="GET", help="HTTP method (default GET)")
    p.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="'K: V'",
        help="extra request header, repeatable",
    )
    body = p.add_mutually_exclusive_group()
    body.add_argument("--body", default=None, help="request body")
    body.add_argument("--body-file", default=None, help="read the request body from a file")
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


def _headers(raw: list[str]) -> list[tuple[str, str]]:
    out = []
    for h in raw:
        key, sep, value = h.partition(":")
        if not sep or not key.strip():
            raise ValueError(f"bad header {h!r} (use 'Name: value')")
        out.append((key.strip(), value.strip()))
    return out


def run(args: argparse.Namespace) -> int:
    problem = check_output_paths({"--hdr-out": args.hdr_out})
    if problem:
        print(f"stackrace load: {problem}", file=sys.stderr)
        return 2
    try:
        duration: float = args.duration
        warmup: float = args.warmup
        settings = EngineSettings(timeout=args.timeout, connect_timeout=args.connect_timeout)
        cpus: list[int] | None = args.engine_cpus
        procs, capped = options.cap_procs(args.procs, cpus)
        if capped:
            options.note("stackrace load", capped)
        body = b""
        if args.body is not None:
            body = args.body.encode()
        elif args.body_file is not None:
            body = Path(args.body_file).read_bytes()
        spec = TargetSpec(
            id=args.url,  # the target's name in --metrics (and nowhere else in `load`)
            url=args.url,
            method=args.method,
            headers=_headers(args.header),
            body=body,
            concurrency=args.concurrency,
            rate=args.rate,
            keepalive=args.keepalive,
            check=BodyCheck(kind="exact", arg=args.expect_body) if args.expect_body else None,
        )
        if not wants_cluster(args):  # a cluster run checks against its nodes instead
            require_loopback(parse_url(args.url).host, args.allow_remote)
    except (ValueError, OSError, RequestError, RemoteTargetError) as exc:
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
                _load(args, spec, settings, procs, cpus, duration, warmup, cluster, metrics)
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
        return await _drive(args, engine, spec, procs, duration, warmup)
    metrics.follow(lambda: engine)
    async with metrics.serving():
        return await _drive(args, engine, spec, procs, duration, warmup)


async def _drive(
    args: argparse.Namespace,
    engine: Engine,
    spec: TargetSpec,
    procs: int,
    duration: float,
    warmup: float,
) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    progress = sys.stderr.isatty() and not args.no_progress
    cpu_samples: list[float] = []
    saturated = 0
    await engine.start()
    try:
        await engine.add_target(spec)
        started = time.monotonic()
        end = started + warmup + duration

        async def watch() -> None:
            nonlocal saturated
            async for snap in engine.snapshots():
                if not snap.warming:
                    cpu_samples.append(snap.engine_cpu)
                    saturated += snap.saturated
                if progress:
                    _progress(snap, warmup + duration)
                if time.monotonic() >= end - 0.01:
                    stop.set()

        watcher = asyncio.create_task(watch())
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), warmup + duration + 1.0)
        final = await engine.stop()
        watcher.cancel()
    finally:
        await engine.stop()
    if progress:
        sys.stderr.write("\r\033[K")
    if final is None or not final.targets:
        print("stackrace load: no figures (the engine stopped at once)", file=sys.stderr)
        return 1
    t = final.targets[0]
    cpu = sum(cpu_samples) / len(cpu_samples) if cpu_samples else 0.0
    hist = engine.total_histogram(spec.id)
    if args.hdr_out:
        Path(args.hdr_out).write_text(hist.encode_base64() + "\n")
    if args.json:
        little = accounting.little_check(t.total, spec.concurrency) if not spec.rate else None
        out = {
            "url": spec.url,
            "concurrency": spec.concurrency,
            "rate": spec.rate,
            "keepalive": spec.keepalive,
            "duration": duration,
            "warmup": warmup,
            "procs": procs,
            # sent == requests (answered) + lost (failed, no answer) + waiting; the
            # latencies are in microseconds (total.latency.unit)
            "total": t.total,
            "accounting": {
                "sent": t.total.sent,
                "answered": t.total.requests,
                "failed_no_answer": t.total.lost,
                "waiting": t.total.waiting,
                # of waiting: the connect was still under way, no byte of it was written
                "connecting": t.total.connecting,
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
            "engine_share": accounting.engine_share(t.total),
            "engine_limited": accounting.engine_limited(t.total, t.saturated),
            "engine_limit": accounting.engine_limit(t.total, t.saturated),
            "engine": {
                "cpu_percent": cpu,
                "saturated_intervals": saturated,
                "intervals": len(cpu_samples),
            },
            "errors": engine.errors,
            # engine processes lost during the load (a cluster's load host): where,
            # when, why, and the requests in flight counted abandoned
            "lost": final.lost,
            # what each host's engine processes sent and got back (a cluster's load
            # hosts; "local" on one machine)
            "hosts": {h: vars(share) for h, share in engine.by_host(spec.id).items()},
            "hdr": hist.encode_base64(),
        }
        sys.stdout.write(msgspec.json.encode(out).decode() + "\n")
    else:
        _summary(spec, t, procs, cpu, saturated, len(cpu_samples), engine.errors)
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
                f" ({w.connecting} of them still connecting)" if w.connecting else ""
            )
        else:
            why = "no request was made"
        print(f"stackrace load: {why}", file=sys.stderr)
        return 1
    return 0


def _progress(snap: EngineSnapshot, planned: float) -> None:
    t = snap.targets[0] if snap.targets else None
    if t is None:
        return
    phase = "warming" if snap.warming else f"{snap.elapsed:4.1f}/{planned:.0f}s"
    fails = t.total.failed if not snap.warming else t.interval.failed
    line = (
        f"{phase}  {fmt_count(t.interval.rps):>6} req/s  p99 {fmt_us(t.interval.latency.p99):>8}"
        f"  failures {fails}  waiting {t.interval.waiting}"
        f"  conns {t.connections}  engine {snap.engine_cpu:3.0f}%"
        + ("  SATURATED" if snap.saturated else "")
    )
    sys.stderr.write("\r\033[K" + line)
    sys.stderr.flush()


def _summary(
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
    print(f"stackrace load {spec.method} {spec.url}")
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
    print(f"  {w.requests} requests in {w.seconds:.2f}s, {fmt_bytes(w.bytes)} read")
    print(f"  Requests/sec: {w.rps:.2f}")
    # every request sent is answered, failed or still waiting: say where each one is
    print(
        f"  Sent {w.sent}: {w.requests} answered, {w.lost} failed without an answer, "
        f"{w.waiting} still waiting when the load stopped"
        + (f" (oldest {fmt_us(w.oldest_wait_us)})" if w.waiting else "")
        + (f", {w.connecting} of them still connecting" if w.connecting else "")
    )
    if w.waiting and w.oldest_wait_us >= 0.5 * w.seconds * 1e6:
        print(
            f"  ! {w.waiting} clients were still waiting at the end, the oldest for "
            f"{fmt_us(w.oldest_wait_us)}: the server did not keep up with {spec.concurrency} "
            "connections (their wait is in no latency figure above)"
        )
    if not spec.rate:
        little = accounting.little_check(w, spec.concurrency)
        if little is not None and not little.ok:
            print(f"  ! {little.describe()}")
    limit = accounting.engine_limit(w, t.saturated)
    if limit:
        print(
            f"  ! engine-limited: {limit} (lag mean {fmt_us(w.lag.mean)}, "
            f"p99 {fmt_us(w.lag.p99)}); use --procs or a core of its own"
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
    else:
        print("  Failures: none")
    sat = f"saturated in {saturated} of {intervals} intervals" if saturated else "not saturated"
    print(f"  Engine CPU: {cpu:.0f}% of one core, {sat}")
    for e in errors:
        print(f"  engine: {e}")
