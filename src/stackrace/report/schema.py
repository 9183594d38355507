"""The saved result of `stackrace bench`: a documented, versioned JSON schema.

A run file holds the machine, the settings, and per stack per level the figures and
the full latency histogram (HdrHistogram V2 base64), so percentiles can be recomputed
and runs merged or compared later. `SCHEMA_VERSION` changes when a field changes
meaning; readers refuse a version they do not know.
"""

from __future__ import annotations

import msgspec

from stackrace.engine.model import LatencySummary

SCHEMA_VERSION = 1


class Machine(msgspec.Struct, forbid_unknown_fields=True):
    hostname: str
    cpu_model: str
    cores: int
    memory_bytes: int
    kernel: str
    os: str
    python: str
    stackrace: str


class Settings(msgspec.Struct, forbid_unknown_fields=True):
    stacks: list[str]
    workload: str
    path: str
    concurrency: list[int]
    duration: float
    warmup: float
    rate: float | None = None
    isolation: str = "rotate"  # "rotate": one stack loaded at a time; "parallel": all at once
    isolation_reason: str = ""
    timeout: float = 10.0
    preset: str | None = None
    repeat: int = 1


class Memory(msgspec.Struct, forbid_unknown_fields=True):
    rss: int = 0
    uss: int = 0


class Level(msgspec.Struct, forbid_unknown_fields=True):
    """One stack at one load level."""

    concurrency: int
    rate: float | None
    seconds: float
    requests: int
    ok: int
    rps: float
    latency: LatencySummary
    latency_uncorrected: LatencySummary | None
    failures: dict[str, int]
    status: dict[int, int]
    memory_before: Memory
    memory_after: Memory
    cpu_percent: float  # the stack's whole process tree, percent of one core
    engine_cpu: float
    engine_saturated: bool
    hdr: str  # HdrHistogram V2 compressed, base64
    samples: list[float] = msgspec.field(default_factory=list)  # rps of each repeat

    @property
    def failure_rate(self) -> float:
        failed = sum(self.failures.values())
        total = (
            self.requests
            + failed
            - self.failures.get("http_status", 0)
            - self.failures.get("invalid_body", 0)
        )
        return failed / total if total else 0.0


class StackResult(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    title: str
    family: str
    version: str  # the server's version as installed
    levels: list[Level]
    breaking_point: int | None = None  # concurrency of the first level past the limit
    breaking_reason: str = ""
    error: str | None = None  # why the stack could not be measured (start-up failure…)


CLAIM_KINDS = (
    "ratio",  # stacks [a, b]: req/s of a / req/s of b at `level`, within the bounds
    "ranking",  # stacks best first by req/s at `level` (pairs within `tolerance` count as tied)
    "breaking_point",  # stacks [x]: its breaking point (stackrace.ramp) within the bounds
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


class BenchRun(msgspec.Struct, forbid_unknown_fields=True):
    schema: int
    started: str  # ISO 8601, UTC
    machine: Machine
    settings: Settings
    stacks: list[StackResult]
    # set when the run came from a preset that replays an experiment (additive: None in
    # files written before it existed and in runs without a preset)
    then: Then | None = None


def dumps(run: BenchRun) -> bytes:
    return msgspec.json.format(msgspec.json.encode(run), indent=1)


def loads(data: bytes | str, source: str = "run") -> BenchRun:
    raw = msgspec.json.decode(data)
    version = raw.get("schema") if isinstance(raw, dict) else None
    if version != SCHEMA_VERSION:
        raise ValueError(
            f"{source}: schema version {version!r}, this stackrace reads {SCHEMA_VERSION}"
        )
    try:
        return msgspec.convert(raw, BenchRun)
    except msgspec.ValidationError as exc:
        raise ValueError(f"{source}: {exc}") from None


def json_schema() -> dict:
    """The JSON Schema of a run file (for docs and external validators)."""
    return msgspec.json.schema(BenchRun)
