"""The saved result of `stackrace bench`: a documented, versioned JSON schema.

A run file holds the machine, the settings, and per stack per level the figures and
the full latency histogram (HdrHistogram V2 base64), so percentiles can be recomputed
and runs merged or compared later; and where the run came from (`Provenance`: the
stacks file and the blocks of it the run used, each stack's command line), so the file
alone can run it again (`stackrace bench --from RUN.json`). `SCHEMA_VERSION` changes
when a field changes meaning; readers refuse a version they do not know. Fields added
with a default (as `provenance` was) keep the version: older files still read.

Long because it is one document: every struct here is a part of the one file, and the
reader (`loads`) checks them together; split, a field's meaning and its check would
sit in two modules, which is how a file format drifts from its reader.
"""

from __future__ import annotations

import inspect
import statistics
from typing import Any

import msgspec

from stackrace.base import inputfile
from stackrace.base.inputfile import bad_figure
from stackrace.engine.model import LatencySummary, WindowStats
from stackrace.evidence.model import Cause, EvidenceWindow, KneePrediction
from stackrace.report.series import StackSeries, check, one_line_columns
from stackrace.rules.breaking import attempts, step_result
from stackrace.settings.race_settings import RaceSettings, check_values
from stackrace.stacks.definition import StackDef
from stackrace.stacks.validate import name_in_file_problem

# Repeats of one level further apart than this (relative to their median) make the
# level's figure a range, not a point: a ranking within it can flip on the next run.
NOISY_SPREAD = 0.10

SCHEMA_VERSION = 2  # 2: every request accounted (window.sent/waiting), latency units named


class Machine(msgspec.Struct, forbid_unknown_fields=True):
    hostname: str
    cpu_model: str
    cores: int
    memory_bytes: int
    kernel: str
    os: str
    python: str
    stackrace: str  # the version of stackrace that made the run


class StackRecipe(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """How one stack of the run was started, as this machine resolved it."""

    name: str  # as raced: "gunicorn-sync:workers=4"
    block: str  # its [stacks.NAME] block (in Provenance.definitions)
    overrides: dict[str, str] = {}  # the variant's settings
    # rendered: paths and params filled in, {port}, {run_dir} (and {upstream_port}) left
    # as placeholders, since they change on every start
    command: list[str] = []
    cwd: str = ""
    processes: list[list[str]] = []  # helpers started before the command (php-fpm)
    upstream: str | None = None  # the stack it forwards to, as raced (nginx-proxy)


class Provenance(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """Where a run came from: what `stackrace bench --from RUN.json` runs again."""

    stacks_file: str = ""  # the stacks file read (absolute path)
    stacks_sha256: str = ""  # its content's hash then
    stacks: list[StackRecipe] = []
    # the blocks of that file the run's stacks (and the stacks behind them) use, as
    # written: enough to start them again without the file
    definitions: dict[str, StackDef] = {}
    rerun_of: str | None = None  # `--from`: the run file this one repeats


class Settings(RaceSettings, forbid_unknown_fields=True, kw_only=True):
    """The race settings as run, and what was decided when it ran."""

    path: str = ""  # the path loaded on every stack
    # your requests as run (labels and weights, in the order of each level's window.kinds)
    kinds: list[str] = msgspec.field(default_factory=list)
    isolation_reason: str = ""
    placement: str = ""  # where the stacks and the engines ran
    preset: str | None = None
    # `--repeat N` measured as independent rounds, interleaved in a shuffled order (runs
    # since issue 47: their spread is an interval); False: repeats in a row, whose
    # spread is only a range (runs before it, still read as they were measured)
    rounds: bool = False

    def race_settings(self) -> RaceSettings:
        """The race settings alone, as run (`isolation` is the one chosen, not `auto`)."""
        return RaceSettings(**{f: getattr(self, f) for f in RaceSettings.__struct_fields__})


class Memory(msgspec.Struct, forbid_unknown_fields=True):
    rss: int = 0
    uss: int = 0


class LittleLaw(msgspec.Struct, forbid_unknown_fields=True):
    """Closed loop: C connections, L requests in flight on average (measured), and λW =
    req/s × mean latency, what the answers explain (rules/accounting.py)."""

    connections: int
    in_flight: float
    explained: float
    ok: bool
    reason: str = ""


class Why(msgspec.Struct, forbid_unknown_fields=True):
    """Why a stack broke at a level: the cause (stackrace.rules.cause) and the evidence
    window it was named from (stackrace.evidence.model, collapsed stacks included)."""

    cause: Cause
    window: EvidenceWindow


class Level(msgspec.Struct, forbid_unknown_fields=True):
    """One stack at one load level.

    `window` is the engine's accounting of the measured time: sent = requests (answered)
    + failures without an answer + waiting; latencies in µs (`latency.unit`).

    `rps`, `requests`, `waiting` and `latency` repeat the window's at the level's top, so
    a reader of the file without stackrace (`jq '.stacks[].levels[].rps'`, a check of
    req/s × mean latency + waiting against the connections) finds them where schema 1
    had them. They are derived, never read: every construction, replace and decode sets
    them from `window` (`__post_init__`), so they cannot disagree with it. `rps` is the
    goodput (`WindowStats.goodput`: answers that count, a second; a 404 is a failure,
    never throughput), and so is each repeat's in `samples`."""

    concurrency: int
    rate: float | None
    window: WindowStats
    memory_before: Memory
    memory_after: Memory
    cpu_percent: float  # the stack's whole process tree, percent of one core
    engine_cpu: float  # percent of one core, this stack's engine processes
    engine_saturated: bool
    hdr: str  # HdrHistogram V2 compressed, base64
    samples: list[float] = msgspec.field(default_factory=list)  # goodput of each repeat
    cpu_us_per_request: float | None = None  # the stack's CPU time per answered request
    cpu_wait_percent: float = 0.0  # runnable but waiting for a core (starved of CPU)
    engine_share: float = 0.0  # the engine's lag as a share of the mean latency
    engine_limited: bool = False
    engine_limit: str = ""  # why and by how much (rules/accounting.py)
    little: LittleLaw | None = None  # None in rate mode or with too little to judge
    # the database failed during the level (down, restarted, or the table it reads gone:
    # stackrace.db.watch): the figures are the database's, not the stack's, and not judged
    db_down: bool = False
    keepalive: bool = True
    # its fastest answer, warm-up included (a level started from idle answers its first
    # request at once): how long the server takes to serve one, for the rules (µs)
    fastest_us: int | None = None
    why: Why | None = None  # why it broke here (None: no window captured at this level)
    # connections its accept queue held while measured (the kernel's; the median of one
    # look a second), None: not looked at (not on this host, an older file)
    accept_queue: int | None = None
    # derived from `window` (see the docstring)
    rps: float = 0.0
    requests: int = 0
    waiting: int = 0
    latency: LatencySummary = msgspec.field(default_factory=LatencySummary)

    def __post_init__(self) -> None:
        w = self.window
        self.rps, self.requests, self.waiting, self.latency = (
            w.goodput,
            w.requests,
            w.waiting,
            w.latency,
        )

    # the figures every report reads, named as before
    @property
    def seconds(self) -> float:
        return self.window.seconds

    @property
    def ok(self) -> int:
        return self.window.ok

    @property
    def latency_uncorrected(self) -> LatencySummary | None:
        return self.window.latency_uncorrected

    @property
    def failures(self) -> dict[str, int]:
        return self.window.failures

    @property
    def status(self) -> dict[int, int]:
        return self.window.status

    @property
    def level(self) -> int:
        return self.concurrency or int(self.rate or 0)

    @property
    def answered(self) -> bool:
        """Whether any response came back: without one the level has no latency (its
        summary is all zeros, which reports must show as "no answers", never 0 µs)."""
        return self.window.requests > 0

    @property
    def failed_entirely(self) -> bool:
        """Requests ended and not one succeeded: each was an HTTP error, a wrong body,
        refused, reset or timed out (100 % HTTP 404: a stack that is misconfigured, not
        measured). `stackrace bench` exits non-zero on such a level.

        A level where nothing ended at all (every request still waiting when it was
        over) is not this: that is a server that stopped keeping up, which the
        breaking-point rule calls queueing; a verdict about the stack, not a failed run."""
        w = self.window
        return w.ok == 0 and w.requests + w.lost > 0

    @property
    def rps_range(self) -> tuple[float, float]:
        """The lowest and highest req/s of the level's repeats (its req/s if measured once)."""
        return (min(self.samples), max(self.samples)) if self.samples else (self.rps, self.rps)

    @property
    def spread(self) -> float:
        """Relative run-to-run spread of req/s over the level's repeats: (max − min) /
        median of `samples`; 0 when measured once."""
        s = [x for x in self.samples if x > 0]
        if len(s) < 2:
            return 0.0
        return (max(s) - min(s)) / statistics.median(s)

    @property
    def failure_rate(self) -> float:
        """Failed (or stale: waiting longer than the level) among attempts (rules/breaking.py)."""

        return step_result(self.level, self.window).failure_ratio

    @property
    def error_rate(self) -> float:
        """Failed among the requests that ended (answered or failed): the share that
        matches the failure count; stale waiting clients are reported apart."""

        ended = attempts(self.window)
        return step_result(self.level, self.window).errors / ended if ended else 0.0


class PathResult(msgspec.Struct, forbid_unknown_fields=True):
    """One kind of your requests on one stack, over the whole run (warm-up and every
    level: what the server saw): sent = answered + failed (+ waiting at the end, none
    after the final drain); `errors`: answered with a status not expected of it."""

    name: str
    sent: int
    answered: int
    errors: int = 0
    failed: int = 0
    waiting: int = 0
    status: dict[int, int] = msgspec.field(default_factory=dict)


class ProbeNoise(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """How busy the machine was during one probe (race/core/noise.py): the CPU other
    processes took on the cores stackrace runs on (in cores), and how long the engine's
    processes were runnable but waiting for a core (% of their time). The stack's own
    wait is its level's `cpu_wait_percent`."""

    others_cores: float = 0.0
    engine_wait_percent: float = 0.0


class ProbeSlice(msgspec.Struct, forbid_unknown_fields=True, array_like=True):
    """One engine interval of a capacity probe (rules/steadiness.py judges the series);
    an array in the file ([answers, p50, p90, p99, p999, max, goodput] µs, req/s)."""

    answers: int
    p50: int
    p90: int
    p99: int
    p999: int
    max: int
    goodput: float


class CapacityProbe(msgspec.Struct, forbid_unknown_fields=True):
    """One probe of a capacity search (race/core/capacity_search.py): the load asked, whether it met
    the SLO and why not, whether it had the answers its percentile needs, and the level
    it measured, in full (the evidence)."""

    load: float
    meets: bool
    why: str  # the terms missed, with their figures ("p99 74.1ms ≥ 50 ms")
    phase: str  # bracket, bisect, confirm, recheck (the break measured again) or busy (a miss
    # while the machine was busy: measured again, not counted; race/core/capacity_search.py)
    answers: int
    enough: bool  # at least `CapacityResult.needed_answers` answers
    seconds: float
    figures: dict[str, float]  # each SLO term's value (µs, shares, req/s)
    level: Level
    noise: ProbeNoise | None = None  # the machine meanwhile (None: not measured)
    slices: list[ProbeSlice] = []  # its own time series; the proof they disagreed:
    unsteady: str = ""


# a capacity search that did not end (Ctrl-C, a kill): its probes, never a capacity
CAPACITY_INTERRUPTED = "interrupted"


class CapacityResult(msgspec.Struct, forbid_unknown_fields=True):
    """A stack's capacity under the SLO, found by a search (`bench --capacity`, `tune`):
    the highest load that met it (`load`: connections in closed loop, req/s asked in
    open loop; None: it cannot be met at any load), the req/s answered there
    (`capacity`, the median of its confirming probes, ± `margin`), where it broke and
    why, why the search stopped, and every probe."""

    slo: str
    mode: str  # "concurrency" (closed loop) or "rate" (open loop)
    load: float | None
    capacity: float | None  # req/s answered at `load`
    margin: float | None  # ± share, the spread of the confirming probes
    breaks_at: float | None
    breaks_why: str
    stopped: str
    sentence: str  # "meets p99 < 50 ms up to c=24 (1,240 req/s; …), breaks at c=26: …"
    needed_answers: int  # what a probe needs for its percentile
    precision: float
    rss: int = 0  # memory at the capacity (bytes, the stack's tree after the probe)
    cpu_us_per_request: float | None = None  # CPU time per answer at the capacity
    probes: list[CapacityProbe] = msgspec.field(default_factory=list)
    # [lowest miss, highest pass] when it both met and missed there (race/core/capacity_search.py:
    # an unstable boundary; `load` is then the highest pass below every miss)
    unstable: list[float] | None = None
    thin: bool = False  # the passes at `load` had fewer answers than the percentile needs
    # every miss at `breaks_at` was starved by the machine (the stack got a core half the
    # time it wanted one or less): `load` is a floor on this machine then, not the limit
    starved_break: bool = False
    # `bench --capacity --repeat N`: req/s at `load` in each independent round (the
    # search's answer first; 0: it missed the SLO there that round), and the 90 %
    # interval of the next run's figure from their spread (rules/confidence.estimate);
    # `capacity` is then their median. Empty and None: one round, no interval.
    rounds: list[float] = msgspec.field(default_factory=list)
    lo: float | None = None
    hi: float | None = None

    @property
    def claimed(self) -> bool:
        """A capacity is claimed: the search ended (not CAPACITY_INTERRUPTED) on a load
        that met the SLO."""
        return self.load is not None and self.stopped != CAPACITY_INTERRUPTED


class StackResult(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    title: str
    family: str
    version: str  # the server's version as installed
    levels: list[Level]
    breaking_point: int | None = None  # the first level it broke at (stackrace.rules.level)
    breaking_kind: str = ""  # wedged, failing, starving, queueing or saturated
    breaking_reason: str = ""
    error: str | None = None  # why the stack could not be measured (start-up failure…)
    cpus: list[int] | None = None  # the cores it was pinned to
    # your requests (--path, --scenario) in a mix: each kind over the whole run
    paths: list[PathResult] = msgspec.field(default_factory=list)
    # a server stackrace did not start (--url): the URL it was raced at
    url: str = ""
    # False: its memory and CPU were not sampled (a --url without --pid); the levels'
    # memory and CPU figures are then zeros that mean nothing, and every output says so
    sampled: bool = True
    # `bench --capacity`, `tune`: its capacity under the SLO and the probes that found it
    capacity: CapacityResult | None = None
    # one row a second over the whole run, latency histograms included (report/series.py)
    series: StackSeries | None = None
    # the knee predicted (stackrace.rules.knee), and how far the measured one came from it
    knee: KneePrediction | None = None
    knee_miss: str = ""


CLAIM_KINDS = (
    "ratio",  # stacks [a, b]: req/s of a / req/s of b at `level`, within the bounds
    "ranking",  # stacks best first by req/s at `level` (pairs within `tolerance` count as tied)
    "breaking_point",  # stacks [x]: its breaking point (stackrace.rules) within the bounds
    "failures_from",  # stacks [x]: the lowest level failing more than `threshold`, in bounds
    "no_failures",  # stacks [x, …]: failure rate at most `at_most` (0) at `level` (or every level)
    "untestable",  # cannot be tested here at all: `why` says why
)


class Claim(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """One claim of an original experiment, in a form a run can be judged against
    (stackrace.report.claims). Bounds are on the measured figure: a ratio, or a level."""

    id: str
    text: str  # the original's claim, in a sentence, with its figures
    kind: str
    stacks: list[str] = []
    level: int | None = None  # the concurrency it is about
    then: float | None = None  # the original's figure (a ratio, a level) shown beside now
    at_least: float | None = None
    at_most: float | None = None
    tolerance: float = 0.0  # ranking: a relative gap this small counts as a tie
    threshold: float = 0.01  # failures_from: a failure rate above this is failing
    why: str = ""  # untestable: why; otherwise an optional note on what differs now


class Figure(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A figure the original reported (req/s), beside the same stack's figure now."""

    stack: str
    then: float
    level: int | None = None  # the concurrency it was measured at (None: the run's highest)
    label: str = ""  # what ran then, when it differs from the stack (e.g. "uWSGI 1.0")


class Then(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """The original experiment a preset replays: its figures and claims, so that a run's
    report can put then beside now (rankings and ratios: the hardware differs)."""

    experiment: str  # "000"…"004"
    source: str = ""
    figures: list[Figure] = []
    claims: list[Claim] = []


class Noise(msgspec.Struct, forbid_unknown_fields=True):
    """How noisy the machine was, measured and stated (race/core/noise.py): other processes'
    CPU before the first stack started and during the probes, the stacks' and the
    engine's wait for a core, the A/A noise (the same configuration at the same load
    measured again: the pooled spread of its req/s, rules/confidence.py), and other
    stackrace runs on the same cores (race/core/runlocks.py)."""

    cores: int = 0
    before_others_cores: float | None = None
    others_cores: float | None = None  # median over the probes
    others_cores_max: float | None = None
    stack_wait_percent: float | None = None  # median over the probes
    engine_wait_percent: float | None = None  # median over the probes
    aa_sigma: float | None = None  # ± share of req/s (one standard deviation)
    aa_repeats: int = 0  # the repeats it rests on
    other_runs: list[str] = []
    busy: bool = False
    sentence: str = ""


class TunePoint(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A configuration a tune measured: its capacity (the median of its repeats) with a
    90 % interval, how many repeats, and why it was measured (the coarse pass, the
    refinement around the leader, the interleaved rounds)."""

    name: str
    phase: str
    capacity: float
    lo: float
    hi: float
    repeats: int
    unstable: list[float] | None = None  # its search's unstable range (loads)


class TuneResult(msgspec.Struct, forbid_unknown_fields=True):
    """A tune's answer (race/bench/tune_search.py): the winner with its confidence, or the
    leaders tied within noise; the deploy line; every point tried and the points of the
    space not measured; the leader's place on the edges of the range; the placement it
    was measured with and what that means for a deploy."""

    stacks: list[str]
    axes: dict[str, dict[str, list[str]]]
    verdict: str
    winner: str | None = None
    confidence: float | None = None
    tied: list[str] = []
    deploy: str | None = None
    deploy_note: str = ""
    points: list[TunePoint] = []
    not_measured: list[str] = []
    edges: list[str] = []
    rounds: int = 0
    placement: str = ""
    stopped: str = ""


class BenchRun(msgspec.Struct, forbid_unknown_fields=True):
    schema: int
    started: str  # ISO 8601, UTC
    machine: Machine
    settings: Settings
    stacks: list[StackResult]
    interrupted: str | None = None  # why the run stopped early (its levels are all here)
    notes: list[str] = msgspec.field(default_factory=list)  # e.g. the database went down
    # the original experiment's figures and claims, when the run came from a preset that
    # replays one (stackrace.report.claims judges them again on every report)
    then: Then | None = None
    provenance: Provenance | None = None  # None in runs made before it was recorded
    noise: Noise | None = None  # `bench --capacity`, `tune`: the machine's noise, stated
    tune: TuneResult | None = None  # `tune`: its answer
    journal: str = ""  # where every finished level and probe was journalled as it ended


_RUN_DECODER = msgspec.json.Decoder(BenchRun)


def dumps(run: BenchRun) -> bytes:
    return one_line_columns(msgspec.json.format(msgspec.json.encode(run), indent=1))


# the largest run file read: the biggest written here (a tune's every probe, each with
# its histogram) is a few MB; a file far above it is not one, and is refused before it
# is read into memory whole
RUN_FILE_LIMIT = 64 << 20


def loads(data: bytes | str, source: str = "run") -> BenchRun:
    """A run file's content, checked; every problem is a ValueError that names
    `source`: not JSON, another schema version, a field of the wrong type, or a figure
    no measurement gives (negative: stackrace.base.inputfile.bad_figure)."""
    try:
        raw = inputfile.parse_json(source, data)
    except msgspec.DecodeError as exc:
        raise ValueError(
            f"{source}: not a run file written by `stackrace bench --json` ({exc})"
        ) from None
    version = raw.get("schema") if isinstance(raw, dict) else None
    if version != SCHEMA_VERSION:
        raise ValueError(
            f"{source}: schema version {version!r}, this stackrace reads {SCHEMA_VERSION}"
        )
    try:
        # decoded again as the type (not converted from the dicts): JSON object keys are
        # strings, and the typed decoder reads `"503"` into the int key of `status`
        run = _RUN_DECODER.decode(data)  # its depth is known to be bounded
    except msgspec.ValidationError as exc:
        raise ValueError(f"{source}: {exc}") from None
    check_values(run.settings, f"{source}: settings")
    names = [st.name for st in run.stacks] + [
        f.stack for f in (run.then.figures if run.then else [])
    ]
    bad = bad_figure(run)
    problems = [
        *(f"{source}: {p}" for p in map(name_in_file_problem, names) if p),
        *(check(st.series, f"{source}: {st.name}") for st in run.stacks if st.series is not None),
        f"{source}: {bad}: not a figure a run can have (edited or damaged)" if bad else None,
    ]
    first = next((p for p in problems if p), None)
    if first:
        raise ValueError(first)
    return run


def struct_schema(kind: type) -> dict[str, Any]:
    """msgspec's JSON Schema of `kind`, each description cleaned as Python 3.13 and
    msgspec 0.23 clean docstrings (earlier ones keep the indentation): a shipped schema
    must not change with the library's version (a CI install took 0.23 and failed)."""
    cleaned: dict[str, Any] = _clean_descriptions(msgspec.json.schema(kind))
    return cleaned


def _clean_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            k: inspect.cleandoc(v)
            if k == "description" and isinstance(v, str)
            else _clean_descriptions(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_clean_descriptions(v) for v in node]
    return node


def json_schema() -> dict[str, Any]:
    """The JSON Schema of a run file (for docs and external validators)."""
    return struct_schema(BenchRun)
