"""Why a stack broke, in words: the cause line and the evidence, for every sink.

    cause_line(why)          # "blocking wait: 1 worker: 97 % … → more threads, or async"
    evidence_lines(why)      # top frames, states, the accept queue, each process,
                             # the stack's own status page (status_line)
    why_at(stack, level)     # a bench run's window at its breaking level (or nearest)
    knee_line(stack)         # "predicted: 1 worker, ~11 ms each: queueing expected …"

Plain text, one meaning for every front end: the pane's cause line and `w` (the TUI
escapes it for Textual markup), the `t` and ramp summaries, bench's breaking-point
line, the Markdown report (escaped here for Markdown: a function name or a file path
comes from the app, hostile like any input) and the JSON (report/schema.py `Why`).
"""

from __future__ import annotations

from pathlib import Path

from stackrace.base import printable
from stackrace.base.atomicfile import write_atomic
from stackrace.base.slug import slug
from stackrace.evidence.flame import flame_svg
from stackrace.evidence.model import ThreadState
from stackrace.report.schema import BenchRun, StackResult, Why

TOP_FRAMES = 5  # the app's functions shown in the evidence


def process_cpu(cpu: float, wait: float) -> str:
    """A process's CPU and wait for a core in shares a room reads (never above 100 %:
    its threads' CPU and waits add up to more than one core): "CPU 45 %, waited for a
    core 12 %"; "CPU 1.8 cores, got a core 60 % of the time it wanted one"."""
    if cpu <= 1 and wait <= 1:
        return f"CPU {cpu:.0%}, waited for a core {wait:.0%}"
    got = f", got a core {cpu / (cpu + wait):.0%} of the time it wanted one" if wait > 0 else ""
    return f"CPU {cpu:.1f} cores{got}"


def cause_line(why: Why, advice: bool = True) -> str:
    """The cause named, its proof, and the knob where it implies one; printable (an app's
    function name is outside text: no control character leaves here, whatever the sink
    escapes after)."""
    c = why.cause
    line = f"{c.kind.value}: {c.sentence}" if c.sentence else c.kind.value
    if advice and c.advice:
        line += f" → {c.advice}"
    if c.confidence:
        line += f" ({c.confidence})"
    return printable.terminal(line)


def evidence_lines(why: Why) -> list[str]:
    """The window's figures as a person reads them, most telling first; printable, as
    `cause_line` (names of functions, files and processes are outside text)."""
    w = why.window
    out = [
        f"{w.stack} at level {w.level:,}: {w.seconds:.1f} s of evidence",
        f"cause: {cause_line(why)}",
    ]
    if not w.sampled:
        out.append(f"workers not sampled: {w.not_sampled or 'no sampler'}")
    else:
        out.append(f"{w.samples:,} thread samples of {w.threads} thread(s)")
    if w.states and w.samples:
        states = sorted(w.states.items(), key=lambda kv: -kv[1])
        out.append(
            "states: " + ", ".join(f"{_state(k)} {n / w.samples:.0%}" for k, n in states if n)
        )
    for f in w.frames[:TOP_FRAMES]:
        out.append(f"  {f.share:4.0%}  {f.where()}  {f.state.value}")
    q = w.queue
    if q is not None:
        limit = f" (limit {q.limit:,})" if q.limit is not None else ""
        out.append(
            f"accept queue: up to {q.depth_max:,}, ~{q.depth_mean:,.0f} on average{limit}"
            + (f"; {q.overflows:,} overflows, {q.drops:,} drops" if q.overflows or q.drops else "")
        )
    for p in w.processes:
        where = ", ".join(x for x in (p.syscall, p.wchan) if x)
        out.append(
            f"pid {p.pid} {p.name}: {p.threads} thread(s), "
            + process_cpu(p.cpu_share, p.core_wait_share)
            + (f", in {where}" if where else "")
        )
    if w.status:
        out.append(status_line(w.status_source, w.status))
    if w.db_connections is not None:
        pool = f" of a pool of {w.db_pool}" if w.db_pool is not None else ""
        out.append(f"database connections in use: {w.db_connections}{pool}")
    if w.restarts:
        out.append(f"worker restarts during the window: {w.restarts}")
    return [printable.terminal(x) for x in out]


# the figures of a status page a tuner reads first (who is busy, who waits), in order;
# the rest follow by name
_TELLING = (
    "active processes", "idle processes", "total processes", "listen queue",
    "max listen queue", "listen queue len", "max children reached",  # PHP-FPM
    "busy workers", "idle workers", "workers", "listen_queue", "listen_queue_errors",  # uWSGI
    "active", "reading", "writing", "waiting",  # nginx
)  # fmt: skip


def status_line(source: str, figures: dict[str, float]) -> str:
    """ "php-fpm status: active processes 2, idle processes 0, listen queue 14, …": the
    page's figures named as the page names them, the telling ones first."""
    first = [k for k in _TELLING if k in figures]
    rest = sorted(k for k in figures if k not in _TELLING)
    said = ", ".join(f"{k} {figures[k]:g}" for k in (*first, *rest))
    return f"{source or 'status page'}: {said}"


def _state(value: str) -> str:
    try:
        return ThreadState(value).value
    except ValueError:
        return value  # a state a newer capture names: shown as it is


def why_at(stack: StackResult, level: int | None) -> Why | None:
    """The window at `level`, else the nearest one captured above it, else any."""
    found = [lv for lv in stack.levels if lv.why is not None]
    if not found:
        return None
    if level is not None:
        for lv in found:
            if lv.level == level:
                return lv.why
        above = [lv for lv in found if lv.level > level]
        if above:
            return min(above, key=lambda lv: lv.level).why
    return found[-1].why


def capacity_why(stack: StackResult) -> Why | None:
    """The window at a capacity search's boundary (its first probe that missed)."""
    probes = stack.capacity.probes if stack.capacity is not None else []
    return next((p.level.why for p in probes if p.level.why is not None), None)


def cause_removed(run: BenchRun, winner: str) -> str:
    """What a tune's winner changed about why it breaks: the cause seen at the first
    configuration's boundary against the winner's own ("" no window was captured)."""
    seen = [(st.name, w) for st in run.stacks if (w := capacity_why(st)) is not None]
    if not seen:
        return ""
    first_name, first = seen[0]
    own = next((w for name, w in seen if name == winner), None)
    kind = first.cause.kind.value
    if winner == first_name or (own is not None and own.cause.kind == first.cause.kind):
        return f"past its capacity it still breaks on {kind}"
    said = f"it removes the {kind} seen at {first_name}"
    return said + (f"; past its capacity it breaks on {own.cause.kind.value}" if own else "")


def knee_line(stack: StackResult) -> str:
    """The knee predicted, and how far the measured one came from it ("" none)."""
    if stack.knee is None:
        return ""
    line = f"predicted: {stack.knee.sentence()}"
    if stack.knee_miss:
        line += f"; {stack.knee_miss} (the evidence says why)"
    return line


def flame_files(run: BenchRun, directory: str) -> list[tuple[str, str]]:
    """Each evidence window of a run as a flame graph: (path, SVG), one per stack and
    level with a window; the file name is a slug of the stack (never its raw name)."""
    out = []
    for st in run.stacks:
        for lv in st.levels:
            if lv.why is None or not lv.why.window.collapsed:
                continue
            title = f"{st.name} at level {lv.level:,}: {lv.why.cause.kind.value}"
            name = f"flame-{slug(st.name)}-{lv.level}.svg"
            out.append((str(Path(directory) / name), flame_svg(lv.why.window.collapsed, title)))
    return out


def write_flames(run: BenchRun, directory: str) -> tuple[list[str], list[str]]:
    """Write `flame_files` (`bench --flame DIR`, `report --flame DIR`): the files
    written, and the problems (one line each, naming the option)."""
    if not Path(directory).is_dir():
        return [], [f"--flame {directory}: not a directory"]
    written, problems = [], []
    for path, svg in flame_files(run, directory):
        try:
            write_atomic(path, svg)
        except OSError as exc:
            problems.append(f"--flame {path}: {exc.strerror or exc}")
        else:
            written.append(path)
    return written, problems
