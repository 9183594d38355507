"""`stackrace load`'s result: one document, printed as JSON (`--json`) or as the summary.

    doc = load_result(LoadFacts(...), run, hist)   # a LoadResult
    msgspec.json.encode(doc)                        # --json, as load.schema.json says
    summary_lines(doc)                              # the text (report/load_text.py)
    hdr_log(doc, hist, start)                       # --hdr-out (report/load_text.py)

Every figure of the summary is a field here, so the text and the JSON never disagree,
and both come from the one count of the race core (race/load/driver.py) and the one
judgment of a level (rules/level.py, rules/engine.py), as bench's and the app's do.

**What was asked is declared once**: `LoadAsked` holds the figures of the command line
that the document repeats (connections, rate, duration, …); `LoadFacts`, what the
command hands down, is a `LoadAsked` with what only the building needs (the base URL,
the requests, the SLO's text), and `LoadResult` is a `LoadAsked` with what came back,
so its JSON keeps its flat fields and no field is copied by hand. The driver's run is
read through `MeasuredLoad`, a Protocol declared here: the report sits below the race
and names no type of it (race/load/driver.py `LoadRun` is the one that fits).

**The JSON is a contract.** Its fields are these structs' (`LoadResult` and what it
holds); `load.schema.json`, shipped beside this module, is the JSON Schema generated
from them (`schema()`), and a test holds the file to the structs and real output to the
file. A field is added, never renamed or removed; `version` counts a change that would
break a reader. Latencies are microseconds (`total.latency.unit`); HTTP statuses are
object keys, so strings ("404").

**The histogram a person reads** (`buckets`) has round bounds, 1-2-5 per decade, from
the fastest answer to the slowest, so a wide tail shows as rows of its own rather than
as one long last bar (oha's linear buckets put a 2 s tail and a 200 µs body in eleven
equal slices, ten of them empty); the whole histogram is the document's `hdr`.

Long because the document is one job: each struct of the JSON contract beside the code
that fills it from the run. The bucketing was a module of its own, split off to pass
the line cap (at first the two imported each other): the field and its filling apart.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

import msgspec

from stackrace.engine.histogram import LatencyHistogram, median_equivalent
from stackrace.engine.model import (
    ABANDONED,
    HTTP_STATUS,
    EngineSnapshot,
    LostEngine,
    TargetSnapshot,
    WindowStats,
)
from stackrace.report.failures import path_results, requests_failed
from stackrace.report.schema import LittleLaw, PathResult, struct_schema
from stackrace.report.slo import Slo
from stackrace.rules import accounting
from stackrace.rules.breaking import step_result
from stackrace.rules.engine import engine_limit, engine_share
from stackrace.rules.level import Evidence, judge, starves
from stackrace.rules.starving import starved_sentence
from stackrace.settings.units import fmt_us

if TYPE_CHECKING:
    from stackrace.settings.scenario import RequestKind

SCHEMA_FILE = Path(__file__).with_name("load.schema.json")
VERSION = 1


class LoadAccounting(msgspec.Struct):
    """Where every request sent is: sent = answered + failed_no_answer + waiting."""

    sent: int
    answered: int
    failed_no_answer: int
    waiting: int
    connecting: int  # of waiting: the connect was still under way, nothing written
    oldest_wait_us: int
    handshaking: int = 0  # of connecting: TCP was up, the TLS handshake under way


class LoadEngineUse(msgspec.Struct):
    """The engine's CPU (% of one core, the mean of the measured intervals)."""

    cpu_percent: float
    saturated_intervals: int
    intervals: int


class LoadRequest(msgspec.Struct):
    """One request of the load (one URL: the totals), over the measured window: sent =
    answered + failed + waiting; `errors`: answered with a status not expected of it."""

    name: str
    sent: int
    answered: int
    errors: int
    failed: int
    waiting: int
    status: dict[int, int]
    method: str
    target: str
    weight: int
    expect: str | None


class LoadWarmup(msgspec.Struct):
    """What the warm-up sent, got back and lost: in no figure of `total`."""

    sent: int
    answered: int
    failed_no_answer: int


class HostCount(msgspec.Struct):
    """What one host's engine processes sent and got back ("local" on one machine)."""

    sent: int
    requests: int
    ok: int
    failed: int
    waiting: int


class LoadSlo(msgspec.Struct):
    """--slo: whether the load met it, term by term (report/slo.py)."""

    slo: str
    meets: bool
    why: str
    figures: dict[str, float]


class LatencyBucket(msgspec.Struct):
    """Answers whose latency was at most `le_us` (and above the bucket before)."""

    le_us: int
    count: int


class LoadVerdict(msgspec.Struct):
    """The measured window judged as a level is (rules/level.py): its state, as a
    person reads it, and the figures that prove it."""

    state: str
    label: str
    why: str


class LoadAsked(msgspec.Struct, frozen=True, kw_only=True):
    """What was asked of the load (the command line's, checked), as the document says
    it: declared once, for the command's facts and the result alike."""

    loaded: str  # what was loaded, one line: `GET http://…/x` or `http://… /a ×3, /b ×1`
    concurrency: int  # connections
    rate: float | None  # req/s asked (open loop), or None: closed loop
    keepalive: bool
    duration: float | None  # seconds asked; None: until `requests_asked` ended
    warmup: float
    procs: int  # engine processes
    requests_asked: int | None = None  # -n N: the requests to send, then stop
    clients: str | None = None  # slow clients' profile (engine/slow_clients.py)
    slow_share: float = 1.0  # of the connections, with `clients`
    streams: int = 1  # HTTP/2: streams per connection (`concurrency` stays the connections)


class LoadFacts(LoadAsked, frozen=True, kw_only=True):
    """What the command hands down: what was asked, the base URL and the requests, and
    the SLO's text (the document holds its judgment instead)."""

    url: str
    kinds: list[RequestKind]
    slo: str | None = None
    http2: bool = False


class LoadResult(LoadAsked, frozen=True, kw_only=True):
    """One `stackrace load`: what was loaded, how, and what came back."""

    url: str
    method: str
    # the measured window (engine/model.py WindowStats): sent == requests + lost + waiting
    total: WindowStats
    # answers that count, a second (2xx/3xx, or the statuses expected): the figure of
    # throughput; total.rps counts every answer, an error too
    goodput: float
    accounting: LoadAccounting
    little: LittleLaw | None  # Little's law on the window (rules/accounting.py); closed loop
    engine_share: float  # the engine's delay as a share of the mean latency
    engine_limited: bool
    engine_limit: str  # why the engine limited the figures ("" it did not)
    engine: LoadEngineUse
    requests: list[LoadRequest]
    unassigned: int  # requests that never had a connection to be sent on (failed connects)
    warmup_accounting: LoadWarmup | None
    errors: list[str]  # what the engine reported going wrong
    lost: list[LostEngine]  # engine processes lost (a cluster's load host)
    hosts: dict[str, HostCount]
    slo: LoadSlo | None
    hdr: str  # the latency histogram, HdrHistogram V2, base64
    # since version 1 of the schema
    version: int = VERSION
    # failures the server answers for (abandoned ones left out) over the requests that
    # ended (answered or failed), as the judgment counts them
    failed: int = 0
    failed_share: float = 0.0
    transfer_per_sec: float = 0.0  # response bytes read a second, headers included
    verdict: LoadVerdict | None = None
    histogram: list[LatencyBucket] = []
    interrupted: bool = False  # ended early (Ctrl-C, SIGTERM, SIGHUP): the figures so far
    # -n: nothing ended for longer than the request timeout, the rest still waiting
    stalled: bool = False
    engine_advice: str = ""  # what to change when the engine was the limit
    # requests that ended (answered, or failed without an answer, or waited the whole
    # window): what `failed_share` is a share of
    ended: int = 0
    # answers by status: the engine counts every status from 300 up by its code, and the
    # rest (the 2xx, and 1xx finals) together, as "2xx"
    status_codes: dict[str, int] = {}
    # what makes the figures doubtful, one sentence each (the summary's "!" lines):
    # clients starved or left waiting, Little's law not adding up, a budget cut short
    doubts: list[str] = []
    # the protocol spoken: "1.1", "h2" (TLS, ALPN) or "h2c" (prior knowledge); HTTP/2's
    # streams per connection are LoadAsked's `streams`
    http: str = "1.1"


class WarmupFigures(Protocol):
    """What a warm-up sent, got back and lost (race/load/driver.py `WarmupCount`, frozen:
    read-only here)."""

    @property
    def sent(self) -> int: ...
    @property
    def answered(self) -> int: ...
    @property
    def lost(self) -> int: ...


class MeasuredLoad(Protocol):
    """What a driver measured of one load, as the document reads it (race/load/driver.py
    `LoadRun`): declared here, so the report, below the race, names no type of it."""

    target: TargetSnapshot | None
    snapshot: EngineSnapshot | None
    stopped: bool
    stalled: bool
    engine_cpu: list[float]
    saturated: int
    fastest_us: int | None
    errors: list[str]

    @property
    def warmup(self) -> WarmupFigures | None: ...
    @property
    def mostly_saturated(self) -> bool: ...


def _asked(facts: LoadFacts) -> dict[str, object]:
    """The fields of `facts` that the document repeats, by name (LoadAsked's)."""
    return {name: getattr(facts, name) for name in LoadAsked.__struct_fields__}


def schema() -> dict[str, object]:
    """The JSON Schema of `load --json` (what load.schema.json holds)."""
    out = struct_schema(LoadResult)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "stackrace load --json",
        "description": "One `stackrace load`: what was loaded, how, and what came back "
        "(docs/load.md). Latencies in microseconds.",
        **out,
    }


def schema_text() -> str:
    return json.dumps(schema(), indent=2, sort_keys=True) + "\n"


def load_result(
    facts: LoadFacts,
    run: MeasuredLoad,
    hist: LatencyHistogram,
    hosts: dict[str, HostCount] | None = None,
) -> LoadResult:
    """The document of one finished load (`run.target` set: it was loaded)."""
    assert run.target is not None
    t = run.target
    w = t.total
    saturated = run.mostly_saturated
    limit = engine_limit(w, saturated, facts.procs)
    # in flight at most: each connection's streams (HTTP/1.1: one)
    slots = facts.concurrency * facts.streams
    little = accounting.little_check(w, slots) if facts.rate is None else None
    per_request, unassigned = _per_request(facts.kinds, w)
    level = round(facts.rate) if facts.rate is not None else slots
    step = step_result(level, w, fastest_us=run.fastest_us, engine_limit=limit)
    judged = judge(Evidence(step, rate_mode=facts.rate is not None))
    timed = w.span_seconds or w.seconds
    warm = run.warmup
    return LoadResult(
        **_asked(facts),  # type: ignore[arg-type]  # LoadAsked's fields, typed there
        url=_first_url(facts),
        method=facts.kinds[0].method,
        http=("h2" if facts.url.startswith("https") else "h2c") if facts.http2 else "1.1",
        total=w,
        goodput=w.goodput,
        accounting=LoadAccounting(
            sent=w.sent,
            answered=w.requests,
            failed_no_answer=w.lost,
            waiting=w.waiting,
            connecting=w.connecting,
            oldest_wait_us=w.oldest_wait_us,
            handshaking=w.handshaking,
        ),
        little=None
        if little is None
        else LittleLaw(
            little.connections, little.in_flight, little.explained, little.ok, little.reason
        ),
        engine_share=engine_share(w),
        engine_limited=bool(limit),
        engine_limit=limit,
        engine=LoadEngineUse(
            cpu_percent=w.engine_cpu,
            saturated_intervals=run.saturated,
            intervals=len(run.engine_cpu),
        ),
        requests=[
            LoadRequest(
                name=p.name,
                sent=p.sent,
                answered=p.answered,
                errors=p.errors,
                failed=p.failed,
                waiting=p.waiting,
                status=p.status,
                method=k.method,
                target=k.target,
                weight=k.weight,
                expect=k.expect,
            )
            for k, p in zip(facts.kinds, per_request, strict=True)
        ],
        unassigned=unassigned,
        warmup_accounting=None
        if warm is None
        else LoadWarmup(sent=warm.sent, answered=warm.answered, failed_no_answer=warm.lost),
        errors=list(run.errors),
        lost=list(run.snapshot.lost) if run.snapshot is not None else [],
        hosts=hosts or {},
        slo=_slo(facts.slo, w, hist),
        hdr=hist.encode_base64(),
        failed=judged.failed,
        failed_share=judged.failed_share,
        transfer_per_sec=w.bytes / timed if timed > 0 else 0.0,
        verdict=LoadVerdict(judged.state, judged.label, judged.why),
        histogram=buckets(hist),
        interrupted=run.stopped,
        stalled=run.stalled,
        engine_advice=engine_advice(w, limit, saturated),
        ended=step.attempts,
        status_codes=status_codes(w),
        doubts=doubts(facts, run, little),
    )


def status_codes(w: WindowStats) -> dict[str, int]:
    """Answers by status; those below 300 together (the engine's hot path counts only
    the others by code)."""
    rest = w.requests - sum(w.status.values())
    out = {"2xx": rest} if rest else {}
    return out | {str(c): n for c, n in sorted(w.status.items())}


def doubts(facts: LoadFacts, run: MeasuredLoad, little: accounting.LittleCheck | None) -> list[str]:
    """What makes the figures doubtful, one sentence each (empty: nothing)."""
    assert run.target is not None
    t = run.target
    w = t.total
    out = []
    if starves(w):
        # not "did not keep up": others were answered all along (rules/level.py STARVING);
        # where the starved are, from the last interval's figures, or the run's when the
        # last interval was a sliver too short to sample them
        last = t.interval if t.interval.starved_share else w
        out.append(f"starving: {starved_sentence(last, w)}, while the others were answered")
    elif held := (
        accounting.connections_limit(w, facts.concurrency, facts.rate) if facts.rate else ""
    ):
        # most of those waiting were never written: the connections, not the server, held
        # them, however long they waited (a busy machine moves the oldest's age)
        out.append(held)
    elif w.waiting and w.oldest_wait_us >= 0.5 * w.seconds * 1e6:
        out.append(
            f"{w.waiting} clients were still waiting at the end, the oldest for "
            f"{fmt_us(w.oldest_wait_us)}: the server did not keep up with {facts.concurrency} "
            "connections (their wait is in no latency figure above)"
        )
    if little is not None and not little.ok and not facts.requests_asked:
        out.append(little.describe())
    if run.stalled:
        out.append(
            "nothing was answered or failed for longer than the request timeout: the "
            f"load ended with {w.waiting:,} still waiting"
        )
    asked = facts.requests_asked
    if asked and not run.stopped and not run.stalled and w.attempts + w.waiting < asked:
        out.append(
            f"{asked - w.attempts - w.waiting:,} of the {asked:,} requests asked were never "
            "sent: -d ended the load first"
        )
    return out


def _first_url(facts: LoadFacts) -> str:
    """The first request's URL (the one URL given, or the base and the first path)."""

    base = urlsplit(facts.url)
    return f"{base.scheme}://{base.netloc}{facts.kinds[0].target}"


def engine_advice(w: WindowStats, limit: str, saturated: bool) -> str:
    """What would lift the engine's limit ("" when there is none): a saturated or
    lagging engine wants more processes; one that waited for a core wants a core."""
    if not limit:
        return ""
    if saturated or w.engine_wait_us <= (w.lag.mean if w.lag.count else 0.0):
        return "more engine processes (--procs) or a core of its own (--engine-cpus)"
    return (
        "other processes held its core: give it one of its own (--engine-cpus) or a quieter machine"
    )


def _slo(text: str | None, w: WindowStats, hist: LatencyHistogram) -> LoadSlo | None:
    if not text:
        return None
    slo = Slo.parse(text)
    judged = slo.judge_window(w, hist, unsampled=True)  # `load` samples no server
    return LoadSlo(slo=slo.text, meets=judged.meets, why=judged.why, figures=judged.figures())


def _per_request(kinds: list[RequestKind], w: WindowStats) -> tuple[list[PathResult], int]:
    """Each request's figures over the measured window, and how many requests never had
    a connection (a failed connect is of no request: the kind is chosen as one is
    written). One request without a mix: the target's totals are its figures."""
    if w.kinds is None:
        one = PathResult(
            name=kinds[0].label,
            sent=w.sent,
            answered=w.requests,
            errors=w.failures.get(HTTP_STATUS, 0),
            failed=w.lost,
            waiting=w.waiting,
            status=dict(w.status),
        )
        return [one], 0
    out = path_results([kind.label for kind in kinds], w.kinds)
    return out, max(0, w.sent - sum(p.sent for p in out))


# --- the histogram as a person reads it -----------------------------------------------


MAX_BUCKETS = 10
_NICE = (1, 2, 5)  # bounds 1-2-5 per decade: 100µs, 200µs, 500µs, 1ms, …


def buckets(hist: LatencyHistogram) -> list[LatencyBucket]:
    """The answers by latency in a few buckets whose bounds are round (1-2-5 per decade,
    or one per decade when that takes more than `MAX_BUCKETS`), from the fastest answer's
    to the slowest's: a wide tail shows as its own rows, not as one long last bar."""
    counts = hist.counts
    values = [(median_equivalent(i), counts[i]) for i in hist.nonzero()]
    if not values:
        return []
    lo, hi = values[0][0], values[-1][0]
    bounds = _bounds(lo, hi, _NICE)
    if len(bounds) > MAX_BUCKETS:
        bounds = _bounds(lo, hi, (1,))
    out = [LatencyBucket(le_us=b, count=0) for b in bounds]
    k = 0
    for value, n in values:
        while k < len(out) - 1 and value > out[k].le_us:
            k += 1
        out[k].count += n
    return out


def _bounds(lo: int, hi: int, steps: tuple[int, ...]) -> list[int]:
    """Round bounds from the first at or above `lo` to the first at or above `hi`."""
    decade = 10 ** max(0, math.floor(math.log10(max(1, lo))))
    out: list[int] = []
    while not out or out[-1] < hi:
        for s in steps:
            b = s * decade
            if b >= lo and (not out or b > out[-1]):
                out.append(b)
            if out and out[-1] >= hi:
                break
        decade *= 10
    return out


# --- what fails a load -----------------------------------------------------------------


def failed_lines(doc: LoadResult) -> list[str]:
    """Why the load failed, one line each (empty: it did not): nothing succeeded, one
    request of a mix never got an expected answer (a typo'd path among good ones), or
    the SLO was missed (said on its own line, by the summary)."""
    w = doc.total
    if w.ok == 0:
        # failures counted beside a response (an HTTP error, a wrong body) are in `requests`
        f = w.failures
        tried = w.requests + w.failed - f.get(HTTP_STATUS, 0) - f.get("invalid_body", 0)
        if tried:
            return [f"every request failed ({tried} attempts, none succeeded)"]
        if w.waiting:
            return [
                f"no answer: {w.waiting} requests were still waiting when the load stopped"
                + (
                    f" ({w.connecting} of them still connecting"
                    + (f", {w.handshaking} in the TLS handshake" if w.handshaking else "")
                    + ")"
                    if w.connecting
                    else ""
                )
            ]
        return ["no request was made"]
    if len(doc.requests) > 1:
        paths = [
            PathResult(r.name, r.sent, r.answered, r.errors, r.failed, r.waiting, r.status)
            for r in doc.requests
        ]
        return [f"{name}: {why}" for name, why in requests_failed(paths)]
    return []


def abandoned(w: WindowStats) -> int:
    return w.failures.get(ABANDONED, 0)
