"""`stackrace tune STACK --slo 'p99<50ms'`: the best configuration of a server for this
machine, found by measuring, and named with the command line that runs it.

    stackrace tune gunicorn-gthread --slo 'p99<50ms' --workload io --budget 2m
    stackrace tune --url http://127.0.0.1:8000/ --slo 'p99<50ms'   # the search alone
    stackrace tune --from tune.json                                 # the saved table again

The sweep: each tunable the stack uses (config.tunables) over values bounded by the
machine — workers 1 … 2 × cores + 1, threads 1 … 32 on a log scale, at most the
ceilings from cores and memory (config.tunable_ceilings), and every choice a param
lists — one candidate at a time (each pinned to cores of its own by the bench core,
`isolation rotate`), and for each its capacity under the SLO found by the search of
`bench --capacity` (race/core/capacity_run.py). Before it starts, tune estimates the time
(probes × probe time per candidate) and, when that exceeds `--budget`, thins the grid
(every other value of the longest axis, again and again) until it fits. The budget
is then kept by the clock: each candidate's search gets an equal share of the time
left, less what the candidates so far spent starting and stopping; the search checks
its share before each probe, so the whole tune ends within one probe (`--duration`
plus the settle time) and one start-up of `--budget`, and candidates the budget had no
room for are named, not silently dropped (tests/integration/test_tune_vs_grid.py holds
it). It prints a progress line with an ETA per candidate, then a table ranked by
capacity (memory and CPU per request beside it), names the winner and prints its
production command line (stacks/production.py).

The result is a bench run file (`--json`): every candidate is a stack result with its
`capacity` and every probe, so `report` reads it and `tune --from` renders it again.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from stackrace.commands._common import load
from stackrace.commands.bench import add_search_arguments, build_plan
from stackrace.race.bench.run import run_bench
from stackrace.race.core.capacity_run import CapacityPlan
from stackrace.race.core.urls import add_url_arguments
from stackrace.report import capacity as captable
from stackrace.report.schema import BenchRun, StackResult
from stackrace.report.write import check_output_paths, read_run
from stackrace.settings.race_settings import add_options
from stackrace.stacks.catalogue import (
    ConfigError,
    Stack,
    StackFile,
    check_kind,
    tunable_ceilings,
    tunables,
)
from stackrace.stacks.production import Production

PROG = "stackrace tune"
PROBES_PER_SEARCH = 10  # a bracket of 3–4, a bisection of 3, two confirmations, a re-check
STARTUP_GUESS_S = 3.0  # a candidate's start and stop, until one has been measured
MIN_SHARE_S = 4.0  # less than this for a candidate's probes: not worth starting it


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("stack", nargs="?", help="the stack to tune (a name from stacks.toml)")
    p.add_argument("--from", dest="from_run", metavar="TUNE.json", help="render a saved tune")
    add_options(p, skip=("stacks", "isolation", "repeat", "requests"))
    servers = p.add_argument_group("a server you started: the capacity search alone")
    add_url_arguments(servers)
    servers.add_argument("--allow-remote", action="store_true", help=argparse.SUPPRESS)
    from stackrace.stacks import userapp

    userapp.add_arguments(p.add_argument_group("your app (README: Your app)"))
    add_search_arguments(p.add_argument_group("the search"))
    p.add_argument(
        "--workers", dest="tune_workers", metavar="LIST", help="workers to try, e.g. 1,2,3,5"
    )
    p.add_argument(
        "--threads", dest="tune_threads", metavar="LIST", help="threads to try, e.g. 1,4,16"
    )
    p.add_argument("--json", dest="json_out", help="write every candidate and probe here")
    p.add_argument("--markdown", dest="md_out", help="write the ranked table here")
    p.add_argument("--chart", dest="chart_out", help="write an SVG chart here")
    p.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=run, preset=None)


def _fail(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return 2


def axes(
    stack: Stack, cores: int, workers: str | None, threads: str | None
) -> dict[str, list[str]]:
    """The values each tunable is swept over, bounded by the machine. Values given
    (`--workers`, `--threads`) are checked, never dropped: one above the machine's
    ceiling, or a list for a setting the stack does not have, is a ValueError."""
    ceil = tunable_ceilings()
    keys = {t.key for t in tunables(stack.spec)}
    for key, given in (("workers", workers), ("threads", threads)):
        if given and key not in keys:
            has = ", ".join(sorted(keys)) or "none"
            raise ValueError(
                f"--{key}: {stack.name} has no {key} setting to tune (its settings: {has})"
            )
        if given and key in stack.overrides:
            raise ValueError(
                f"--{key}: {stack.name} sets {key} already: name {stack.base} to sweep it"
            )
    out: dict[str, list[str]] = {}
    # a setting the variant fixes (gunicorn-gthread:threads=2) is not swept
    for t in [t for t in tunables(stack.spec) if t.key not in stack.overrides]:
        if t.key == "workers":
            values = (
                _ints(workers, "--workers")
                if workers
                else _spread(1, min(2 * cores + 1, ceil.workers))
            )
            out["workers"] = [str(v) for v in values]
        elif t.key == "threads":
            top = min(32, ceil.threads)
            values = (
                _ints(threads, "--threads") if threads else [2**k for k in range(6) if 2**k <= top]
            )
            out["threads"] = [str(v) for v in values]
        elif t.choices:
            out[t.key] = list(t.choices)
    return {k: v for k, v in out.items() if v}


def _ints(text: str, option: str) -> list[int]:
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        raise ValueError(f"{option} must be whole numbers like 1,2,4, got {text!r}") from None
    if not values or values[0] < 1:
        raise ValueError(f"{option} must be whole numbers of at least 1, got {text!r}")
    key = option.removeprefix("--")
    for v in values:
        problem = check_kind("count", key, str(v))  # the machine's ceiling, as a variant's
        if problem:
            raise ValueError(f"{option} {v}: {problem.removeprefix(f'{v} ')}")
    return values


def _spread(lo: int, hi: int) -> list[int]:
    """lo … hi: every value up to 3, then about ×1.6 apart, and hi itself."""
    out, v = [], lo
    while v < hi:
        out.append(v)
        v = v + 1 if v < 3 else math.ceil(v * 1.6)
    return [*out, hi]


def thin(grid: dict[str, list[str]], fits: int) -> dict[str, list[str]]:
    """Every other value of the longest axis (its ends kept) until the grid has at most
    `fits` candidates."""
    grid = {k: list(v) for k, v in grid.items()}
    while math.prod(len(v) for v in grid.values()) > max(1, fits):
        key = max(grid, key=lambda k: len(grid[k]))
        values = grid[key]
        if len(values) <= 1:
            break
        kept = values[::2] if len(values) > 2 else values[:1]
        if values[-1] not in kept and len(values) > 2:
            kept[-1] = values[-1]
        grid[key] = kept
    return grid


def candidates(name: str, grid: dict[str, list[str]]) -> list[str]:
    """Each combination as a variant of `name` (its own settings kept first)."""
    keys = list(grid)
    sep = "," if ":" in name else ":"
    return [
        name + sep + ",".join(f"{k}={v}" for k, v in zip(keys, combo, strict=True))
        for combo in itertools.product(*(grid[k] for k in keys))
    ] or [name]


def stack_to_tune(name: str | None, stacks: StackFile) -> tuple[str | None, str]:
    """The stack a tune sweeps, and a note when it is not the name as given: with
    --app, `gunicorn-gthread` means `gunicorn-gthread[app]` (your app on it), and no
    name means the first of the common servers of the app's kind that runs here."""
    from stackrace.stacks.userapp import APP_TAG, app_stack_name, default_app_stacks

    if getattr(stacks, "app", None) is None:
        return name, ""
    if name is None:
        chosen, _ = default_app_stacks(stacks)
        if not chosen:
            return None, "no server here runs your app (stackrace install --into …)"
        return chosen[0], f"no stack named: tuning {chosen[0]} (name one to choose)"
    base, sep, variant = name.partition(":")
    if APP_TAG not in base and app_stack_name(base) in stacks:
        return app_stack_name(base) + sep + variant, ""
    return name, ""


def run(args: argparse.Namespace) -> int:
    problem = check_output_paths(
        {"--json": args.json_out, "--markdown": args.md_out, "--chart": args.chart_out}
    )
    if problem:
        return _fail(problem)
    if args.from_run:
        try:
            result = read_run(args.from_run)
        except ValueError as exc:
            return _fail(str(exc))
        if not any(st.capacity for st in result.stacks):
            return _fail(f"{args.from_run}: not a tune or capacity run (no capacity in it)")
        return _finish(args, result, [])
    if not args.slo:
        return _fail("give the objective to tune for: --slo 'p99<50ms'")
    if (args.stack and args.url) or not (args.stack or args.url or args.app):
        return _fail("name one stack to tune, or a server you started (--url URL)")
    if args.url and (args.tune_workers or args.tune_threads):
        return _fail(
            "--workers and --threads sweep a stack's settings: a server you started (--url) "
            "is measured as it runs (the capacity search alone)"
        )
    budget = args.budget or 180.0
    per_probe = (0.3 + (args.warmup or 0.0) + (args.duration or 2.0)) * 1.15
    per_candidate = PROBES_PER_SEARCH * per_probe
    args.isolation = "rotate"  # one candidate at a time, on cores of its own
    if args.duration is None:
        args.duration = 2.0  # a probe's longest; it ends as soon as it has its answers
    if args.warmup is None:
        args.warmup = 0.0
    progress = (lambda s: None) if args.no_progress else _progress
    if args.url:
        names: list[str] = []
    else:
        try:
            stacks = load(args, None, PROG)
        except ConfigError as exc:
            return _fail(str(exc))
        if stacks is None:
            return 2
        args.stack, note = stack_to_tune(args.stack, stacks)
        if args.stack is None:
            return _fail(note)
        if note:
            progress(f"tune: {note}")
        if args.stack.partition(":")[0] not in stacks:
            return _fail(f"no stack {args.stack!r} (`stackrace stacks` lists them)")
        from stackrace.stacks.catalogue import resolve

        try:
            base = resolve(args.stack, stacks)
            grid = axes(base, len(os.sched_getaffinity(0)), args.tune_workers, args.tune_threads)
        except (ConfigError, ValueError) as exc:
            return _fail(str(exc))
        full = math.prod(len(v) for v in grid.values()) if grid else 1
        grid = thin(grid, int(budget // per_candidate))
        names = candidates(args.stack, grid)
        note = f" (of {full}: thinned to fit --budget)" if len(names) < full else ""
        progress(
            f"tune {args.stack}: {len(names)} candidates{note} over "
            + (", ".join(f"{k} {'/'.join(v)}" for k, v in grid.items()) or "its defaults")
            + f"; about {len(names) * per_candidate:.0f}s (budget {budget:.0f}s)"
        )
    runs: list[BenchRun] = []
    started = time.monotonic()
    overhead = STARTUP_GUESS_S  # a candidate's time outside its probes (start, stop)
    todo = names or [None]  # type: ignore[list-item]
    for n, name in enumerate(todo):
        # The budget is kept by the clock, not by the estimate: each candidate's search
        # gets an equal share of what is left, less the start-up and stop the candidates
        # so far took outside their probes; a search checks its share before each probe
        # (race/core/capacity_search.py), so a candidate overruns by at most one probe. When too
        # little is left for one probe, the candidates not measured are named.
        left = budget - (time.monotonic() - started)
        share = left / (len(todo) - n) - overhead
        if n and share < MIN_SHARE_S:
            skipped = ", ".join(str(x) for x in todo[n:])
            progress(f"budget spent after {n} candidates: not measured: {skipped}")
            break
        args.stacks = [name] if name else None
        built = build_plan(args)
        if built is None:
            return 2
        plan, _ = built
        plan.capacity = CapacityPlan(
            args.slo, budget_s=max(MIN_SHARE_S, share), precision=args.precision
        )
        done = time.monotonic() - started
        eta = done / n * (len(todo) - n) if n else len(todo) * per_candidate
        progress(
            f"[{n + 1}/{len(todo)}] {name or args.url[0]}  "
            f"(ETA {min(eta, max(0.0, left)):.0f}s, budget left {max(0.0, left):.0f}s)"
        )
        t0 = time.monotonic()
        try:
            runs.append(asyncio.run(run_bench(plan, _indent(progress))))
        except KeyboardInterrupt:
            print(f"{PROG}: interrupted; the candidates measured are below", file=sys.stderr)
            break
        probed = sum(p.seconds for st in runs[-1].stacks if st.capacity for p in st.capacity.probes)
        overhead = max(0.0, time.monotonic() - t0 - probed)
    progress(f"tune took {time.monotonic() - started:.0f}s of a {budget:.0f}s budget")
    if not runs:
        return 1
    result = msgspec.structs.replace(runs[0], stacks=[st for r in runs for st in r.stacks])
    commands = {}
    if names:
        from stackrace.stacks.catalogue import resolve
        from stackrace.stacks.production import production_command

        assert stacks is not None  # (names come from the stacks file read above)
        for st in result.stacks:
            commands[st.name] = production_command(resolve(st.name, stacks))
    return _finish(args, result, [], commands)


def _indent(progress: Callable[[str], None]) -> Callable[[str], None]:
    return lambda line: progress("    " + line.lstrip())


def _progress(line: str) -> None:
    with contextlib.suppress(OSError):  # the terminal may be gone: the files hold it
        print(line, file=sys.stderr, flush=True)


def _finish(
    args: argparse.Namespace,
    result: BenchRun,
    problems: list[str],
    commands: dict[str, Production] | None = None,
) -> int:
    slo = result.settings.slo or ""
    print(f"Capacity under the SLO ({slo}), best first:")
    for line in captable.table_lines(result.stacks):
        print("  " + line)
    best = captable.ranked(result.stacks)
    winner: StackResult | None = next(
        (st for st in best if st.capacity is not None and st.capacity.load is not None), None
    )
    if winner is None:
        why = best[0].capacity.sentence if best and best[0].capacity else "nothing measured"
        print(f"no configuration meets {slo}: {why}")
    else:
        assert winner.capacity is not None
        measured = [st for st in result.stacks if st.capacity is not None]
        if len(measured) > 1:
            print(f"winner: {winner.name}: {winner.capacity.sentence}")
        else:  # nothing was compared: no winner, only a figure
            print(
                f"one configuration measured, nothing to compare it with: {winner.name}: "
                f"{winner.capacity.sentence}"
            )
        prod = (commands or {}).get(winner.name)
        if prod is not None and prod.command:
            print(f"run it in production: {prod.command}")
            print(f"  ({prod.note})")
        elif prod is not None:
            print(f"no production command line: {prod.note}")
    from stackrace.base.atomicfile import write_atomic
    from stackrace.report.schema import dumps

    files = [
        (args.json_out, lambda: dumps(result)),
        (args.md_out, lambda: captable.markdown(result.stacks, slo).encode()),
        (args.chart_out, lambda: captable.svg(result.stacks, slo).encode()),
    ]
    for path, make in files:
        if path:
            try:
                write_atomic(Path(path), make())
            except OSError as exc:
                print(f"{PROG}: {path}: {exc}", file=sys.stderr)
                return 74
    return 0 if winner is not None else 1
