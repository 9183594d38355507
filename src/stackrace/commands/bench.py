"""`stackrace bench`: a headless comparison that ends with a table, files and a verdict."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import msgspec

from stackrace.benchrun import BenchPlan, run_bench
from stackrace.commands._common import load, resolve_all, serves_workload
from stackrace.config import ConfigError
from stackrace.presets import load_preset
from stackrace.report import gate
from stackrace.report.schema import BenchRun, loads
from stackrace.report.write import print_run, write_outputs
from stackrace.units import parse_duration
from stackrace.workloads import WORKLOADS


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--preset",
        help="a stored scenario from presets/ (its settings are "
        "the defaults; options given here override them)",
    )
    p.add_argument("--stacks", help="comma-separated stacks or variants")
    p.add_argument("--workload", choices=sorted(WORKLOADS), default=None)
    p.add_argument("--io-ms", type=int, default=None, help="delay of /io (default 10)")
    p.add_argument("--queries", type=int, default=None, help="queries per /db request (10)")
    p.add_argument("--concurrency", default=None, help="levels, e.g. 10,100,500")
    p.add_argument("--duration", default=None, help="per level (default 10s)")
    p.add_argument("--warmup", default=None, help="before each level (default 2s)")
    p.add_argument("--rate", type=float, default=None, help="constant rate instead of levels")
    p.add_argument(
        "--requests",
        type=int,
        default=None,
        help="end each level after this many requests, as ab -n",
    )
    p.add_argument("--isolation", choices=("auto", "rotate", "parallel"), default=None)
    p.add_argument("--repeat", type=int, default=None, help="measure each level N times")
    p.add_argument("--timeout", default=None, help="request timeout (default 10s)")
    p.add_argument("--cpus", type=int, default=None, help="cores to give each stack")
    p.add_argument("--memory-max", default=None, help="memory cap per stack, e.g. 128M")
    p.add_argument("--json", dest="json_out", help="write the run (versioned schema) here")
    p.add_argument("--csv", dest="csv_out", help="write a CSV table here")
    p.add_argument("--markdown", dest="md_out", help="write a Markdown table here")
    p.add_argument("--chart", dest="chart_out", help="write an SVG chart here")
    p.add_argument("--baseline", help="a saved run to compare against (with --fail-on)")
    p.add_argument(
        "--fail-on",
        default="qps<-10%,p99>+25%,failures>0.1%",
        help="regression rules (default: %(default)s)",
    )
    p.set_defaults(func=run)


def build_plan(args: argparse.Namespace) -> BenchPlan | None:
    stacks = load(args)
    if stacks is None:
        return None
    preset = None
    if args.preset:
        try:
            preset = load_preset(args.preset)
        except ConfigError as exc:
            print(f"stackrace bench: {exc}", file=sys.stderr)
            return None

    def pick(name: str, default: object) -> object:
        given = getattr(args, name)
        if given is not None:
            return given
        if preset is not None:
            return getattr(preset, name)
        return default

    names = args.stacks.split(",") if args.stacks else (preset.stacks if preset else None)
    if not names:
        print("stackrace bench: name the stacks (--stacks A,B) or a --preset", file=sys.stderr)
        return None
    chosen = resolve_all([",".join(names)], stacks)
    if chosen is None:
        return None
    try:
        conc = pick("concurrency", "10,100")
        levels = [int(c) for c in conc.split(",")] if isinstance(conc, str) else list(conc)
        plan = BenchPlan(
            stacks=chosen,
            workload=str(pick("workload", "hello")),
            io_ms=int(pick("io_ms", 10)),
            queries=int(pick("queries", 10)),
            concurrency=levels,
            duration=parse_duration(str(pick("duration", "10s"))),
            warmup=parse_duration(str(pick("warmup", "2s"))),
            rate=pick("rate", None),  # type: ignore[arg-type]
            requests=pick("requests", None),  # type: ignore[arg-type]
            isolation=str(pick("isolation", "auto")),
            repeat=int(pick("repeat", 1)),
            timeout=parse_duration(str(pick("timeout", "10s"))),
            cpus=pick("cpus", None),  # type: ignore[arg-type]
            memory_max=pick("memory_max", None),  # type: ignore[arg-type]
            preset=args.preset,
            keepalive=preset.keepalive if preset is not None else True,
            warmup_requests=preset.warmup_requests if preset is not None else 0,
        )
    except ValueError as exc:
        print(f"stackrace bench: {exc}", file=sys.stderr)
        return None
    if any(c < 1 for c in plan.concurrency) or plan.repeat < 1:
        print("stackrace bench: concurrency levels and --repeat must be >= 1", file=sys.stderr)
        return None
    if not serves_workload(plan.stacks, plan.workload, "stackrace bench"):
        return None
    return plan


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    plan = build_plan(args)
    preset = load_preset(args.preset) if plan is not None and args.preset else None
    if plan is None:
        return 2
    baseline: BenchRun | None = None
    rules = []
    if args.baseline:
        try:
            baseline = loads(Path(args.baseline).read_bytes(), args.baseline)
            rules = gate.parse_rules(args.fail_on)
        except (OSError, ValueError) as exc:
            print(f"stackrace bench: {exc}", file=sys.stderr)
            return 2
    db = None
    if WORKLOADS[plan.workload].needs_db:
        from stackrace.commands.db_hook import open_for_workload

        opened = open_for_workload()
        if opened is None:
            return 2
        db, plan.db_env = opened
    try:
        result = asyncio.run(run_bench(plan, _progress))
        if preset is not None:  # a replayed experiment: its figures and claims go with the run
            result = msgspec.structs.replace(result, then=preset.then())
        verdict = None
        if baseline is not None:
            verdict = gate.judge(result, baseline, rules)
            if verdict.uncertain:
                result = asyncio.run(_remeasure(plan, result, verdict.uncertain))
                verdict = gate.judge(result, baseline, rules)
    finally:
        if db is not None:
            db.close()
    print_run(result)
    write_outputs(result, args.json_out, args.csv_out, args.md_out, args.chart_out)
    failed = any(st.error for st in result.stacks)
    if verdict is not None:
        for line in verdict.failed:
            print(f"REGRESSION {line}")
        for where in verdict.unmatched:
            print(f"(no baseline for {where})")
        if verdict.ok:
            print(f"gate passed: {len(verdict.passed)} checks against {args.baseline}")
        return 1 if not verdict.ok else 0
    return 1 if failed else 0


async def _remeasure(
    plan: BenchPlan, result: BenchRun, uncertain: list[tuple[str, int]]
) -> BenchRun:
    """Measure the levels whose verdict fell within the noise again, three times, and keep
    every sample: the verdict then rests on the median of all of them."""
    from dataclasses import replace

    by_name = {s.name: s for s in plan.stacks}
    for name, level in uncertain:
        _progress(f"{name} @ {level}: within the measured spread of the baseline; measuring again")
        again = await run_bench(
            replace(plan, stacks=[by_name[name]], concurrency=[level], repeat=3), _progress
        )
        if not again.stacks or not again.stacks[0].levels:
            continue
        fresh = again.stacks[0].levels[0]
        for st in result.stacks:
            if st.name != name:
                continue
            for i, lv in enumerate(st.levels):
                if lv.concurrency == level:
                    fresh.samples = lv.samples + fresh.samples
                    st.levels[i] = fresh
    return result
