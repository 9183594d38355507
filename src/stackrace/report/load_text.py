"""`stackrace load`'s texts: the summary, as a person reads it (success first, then
latency), and the latency histogram as HdrHistogram's interval log (--hdr-out).

    for line in summary_lines(doc): print(line)      # doc: report/load.py LoadResult
    hdr_log(doc, hist, start)                         # the .hlog that --hdr-out writes

The order is what a reader asks first: did it work, and how much of it (answers that
counted a second, the share that failed, the verdict on the load), then how fast
(latency, a small histogram), then where every request went (status codes, bytes, sent
= answered + failed + waiting), then anything that makes the figures doubtful (a
starving client, Little's law, the engine's own limit, said once from rules/engine.py).
The wrk lines stay where a wrk reader looks for them ("Requests/sec:", "Transfer/sec:",
"N requests in Xs, Y read"), with wrk's number format, so a script that reads wrk's
output reads these too. Nothing is computed here that the JSON lacks. The log is
HdrHistogram's own interval format, so its readers and plotters take it.
"""

from __future__ import annotations

from datetime import UTC, datetime

from stackrace.engine.histogram import LatencyHistogram
from stackrace.engine.model import HTTP_STATUS, LatencySummary, WindowStats
from stackrace.report.load import LoadResult, abandoned
from stackrace.rules.level import ENGINE_LIMITED, MEASURING
from stackrace.settings.units import fmt_bytes, fmt_us

BAR = 30  # the histogram's longest bar, in characters
_EIGHTHS = " ▏▎▍▌▋▊▉"


def summary_lines(doc: LoadResult) -> list[str]:
    w = doc.total
    out = [f"stackrace load {doc.loaded}", "  " + _how(doc)]
    out += _success(doc)
    out += _latency(w)
    out += _histogram(doc)
    out += _where(doc)
    out += _doubts(doc)
    out += _failures(w)
    out += h2_lines(doc)
    out.append("  " + _engine(doc))
    out += [f"  engine: {e}" for e in doc.errors]
    if len(doc.requests) > 1:
        out += _per_request(doc)
    return out


def _how(doc: LoadResult) -> str:
    w = doc.total
    mode = f"{doc.rate:g} req/s constant rate" if doc.rate else "closed loop"
    if not doc.keepalive:
        mode += ", a new connection per request"
    if doc.clients is not None:
        mode += f", {100 * doc.slow_share:g}% slow clients ({doc.clients})"
    procs = f"{doc.procs} engine process" + ("es" if doc.procs > 1 else "")
    asked = f", {doc.requests_asked:,} requests asked" if doc.requests_asked else ""
    end = " (stopped early)" if doc.interrupted else ""
    timed = w.span_seconds or w.seconds
    conns = f"{doc.concurrency} connections"
    if doc.http != "1.1":
        conns = f"{doc.http}, {doc.concurrency} connections × {doc.streams} streams"
    return f"{conns}, {mode}, {procs}{asked}, {timed:.2f}s measured{end}"


def _success(doc: LoadResult) -> list[str]:
    """Answers that counted a second, the share that failed, and the verdict."""
    w = doc.total
    # wrk's label and number format: a script that reads wrk reads this; the figure is
    # goodput (a 404 answered in a millisecond is no throughput)
    line = f"  Requests/sec: {doc.goodput:.2f} answered with success (goodput)"
    if w.requests > w.ok:
        line += f"; {w.rps:.2f} answers a second in all, {w.requests - w.ok:,} of them errors"
    out = [line]
    if doc.failed:
        kinds = ", ".join(_kind(k, n, w) for k, n in _by_count(w.failures) if k != "abandoned")
        share = f"{100 * doc.failed_share:.2f}% of {doc.ended:,} requests that ended"
        out.append(f"  Failures: {share} — {kinds}")
    else:
        out.append("  Failures: none")
    gone = abandoned(w)
    if gone:
        out.append(
            f"  Abandoned: {gone:,} in flight when the engine let them go (not the server's)"
        )
    if doc.verdict is not None:
        v = doc.verdict
        label = "too little measured to judge" if v.state == MEASURING else v.label
        out.append(f"  Verdict: {label}" + (f" — {v.why}" if v.why else ""))
    if doc.slo is not None:
        s = doc.slo
        out.append(f"  SLO met ({s.slo})" if s.meets else f"  SLO MISSED ({s.slo}): {s.why}")
    return out


def _kind(kind: str, n: int, w: WindowStats) -> str:
    if kind == HTTP_STATUS:
        codes = ", ".join(f"{c}: {k:,}" for c, k in sorted(w.status.items()) if c >= 400)
        return f"{kind} {n:,} ({codes})"
    return f"{kind} {n:,}"


def _by_count(counts: dict[str, int]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: -kv[1])


def _latency(w: WindowStats) -> list[str]:
    label = "Latency (corrected)" if w.latency_uncorrected is not None else "Latency"
    cols = "".join(f"{c:>10}" for c in ("p50", "p90", "p99", "p99.9", "max", "mean"))
    out = [f"  {label:<22}{cols}", _row("", w.latency)]
    if w.latency_uncorrected is not None:
        out.append(_row("Latency (uncorrected)", w.latency_uncorrected))
    out += tls_lines(w)
    return out


def _row(name: str, s: LatencySummary) -> str:
    if not s.count:
        # no answer, no latency: a row of zeros would read as instant answers
        return f"  {name:<22}{'no answers':>10}"
    vals = [s.p50, s.p90, s.p99, s.p999, s.max, s.mean]
    return f"  {name:<22}" + "".join(f"{fmt_us(v):>10}" for v in vals)


def h2_lines(doc: LoadResult) -> list[str]:
    """HTTP/2: what the server's connections and streams did (engine/h2.py)."""
    if doc.http == "1.1":
        return []
    w = doc.total
    said = [
        f"{w.goaways} GOAWAY" + ("s" if w.goaways != 1 else "") + " (each: a new connection)",
        f"{w.resets} streams reset (RST_STREAM)",
        f"{w.refused} refused or left unprocessed",
    ]
    out = ["  HTTP/2: " + ", ".join(said)]
    if w.max_streams and w.max_streams < doc.streams:
        out.append(
            f"  ! the server allows {w.max_streams} streams per connection "
            f"(SETTINGS_MAX_CONCURRENT_STREAMS), fewer than --streams {doc.streams}: the "
            "others waited in the client's queue, their time counted"
        )
    return out


def tls_lines(w: WindowStats) -> list[str]:
    """https: the phases of a request apart (new connections' connect and handshake, the
    first byte), and how many handshakes resumed a session."""
    if w.handshakes == 0 and w.first_byte is None:
        return []
    out = [
        _row(name, s)
        for name, s in (
            ("TCP connect", w.connect),
            ("TLS handshake", w.tls),
            ("First byte", w.first_byte),
        )
        if s is not None and s.count
    ]
    out.append(
        f"  TLS handshakes: {w.handshakes}, {w.resumed} resumed"
        + (f" ({100 * w.resumed / w.handshakes:.0f}%)" if w.handshakes else "")
    )
    return out


def _histogram(doc: LoadResult) -> list[str]:
    """The answers by latency, one row per bucket: its bound, a bar, the count, the share."""
    if not doc.histogram:
        return []
    total = sum(b.count for b in doc.histogram) or 1
    most = max(b.count for b in doc.histogram) or 1
    out = ["  Latency histogram (answers):"]
    for b in doc.histogram:
        eighths = round(8 * BAR * b.count / most)
        bar = "█" * (eighths // 8) + (_EIGHTHS[eighths % 8] if eighths % 8 else "")
        if b.count and not bar:
            bar = "▏"  # a few answers are not none
        share = 100 * b.count / total
        out.append(f"    ≤ {_bound(b.le_us):>5}  {bar:<{BAR}}  {b.count:>11,}  {share:5.1f}%")
    return out


def _bound(us: int) -> str:
    """A round bound as written: 500µs, 1ms, 20ms, 2s."""
    if us >= 1_000_000:
        return f"{us / 1_000_000:g}s"
    return f"{us / 1000:g}ms" if us >= 1000 else f"{us}µs"


def _where(doc: LoadResult) -> list[str]:
    """Status codes, bytes (wrk's lines) and where every request sent went."""
    w = doc.total
    out = []
    if doc.status_codes:
        codes = ", ".join(f"{c}: {n:,}" for c, n in doc.status_codes.items())
        out.append(f"  Status codes: {codes}")
    timed = w.span_seconds or w.seconds  # -n: from the first send to the last answer
    out.append(f"  {w.requests} requests in {timed:.2f}s, {fmt_bytes(w.bytes)} read")
    out.append(f"  Transfer/sec: {fmt_bytes(doc.transfer_per_sec)}")
    # every request sent is answered, failed or still waiting: say where each one is
    out.append(
        f"  Sent {w.sent}: {w.requests} answered, {w.lost} failed without an answer, "
        f"{w.waiting} still waiting when the load stopped"
        + (f" (oldest {fmt_us(w.oldest_wait_us)})" if w.waiting else "")
        + (f", {w.connecting} of them still connecting" if w.connecting else "")
        + (f" ({w.handshaking} in the TLS handshake)" if w.handshaking else "")
    )
    return out


def _doubts(doc: LoadResult) -> list[str]:
    """What makes the figures doubtful (report/load.py `doubts`), and the engine's
    scheduler's own delays in rate mode."""
    w = doc.total
    out = [f"  ! {d}" for d in doc.doubts]
    if w.send_lateness is not None and w.send_lateness.count:
        s = w.send_lateness
        out.append(
            f"  Send lateness (the engine's scheduler, due time to write): p50 "
            f"{fmt_us(s.p50)}, p99 {fmt_us(s.p99)}, max {fmt_us(s.max)}"
        )
    if w.late:
        out.append(f"  Late sends (every connection busy): {w.late}")
    return out


def _failures(w: WindowStats) -> list[str]:
    """Why requests failed (the reasons the engine saw), and the certificate's hint."""
    out = []
    if w.errors:
        why = _by_count(w.errors)
        out.append("  Why: " + ", ".join(f"{reason} ({n})" for reason, n in why[:4]))
    if any(reason.startswith("certificate:") for reason in w.errors):
        out.append(
            "  ! the server's certificate was not trusted: give its CA with --cacert "
            "FILE, or skip the check with --insecure (-k)"
        )
    return out


def _engine(doc: LoadResult) -> str:
    """The engine, said once: its CPU, and whether it limited the figures (rules/engine.py)."""
    e = doc.engine
    sat = f", saturated in {e.saturated_intervals} of {e.intervals} intervals"
    # summed over engine processes it can pass one core: then said in cores, never
    # "190% of one core"
    used = (
        f"{e.cpu_percent:.0f}% of one core"
        if e.cpu_percent <= 100
        else f"{e.cpu_percent / 100:.1f} cores"
    )
    cpu = f"Engine CPU: {used}" + (sat if e.saturated_intervals else "")
    if not doc.engine_limited:
        return f"{cpu}: not the limit"
    w = doc.total
    lag = f", lag mean {fmt_us(w.lag.mean)}, p99 {fmt_us(w.lag.p99)}" if w.lag.count else ""
    # the verdict says why when the engine's limit is the verdict; else it is said here
    said = doc.verdict is not None and doc.verdict.state == ENGINE_LIMITED
    why = "see the verdict" if said else doc.engine_limit
    return f"{cpu}{lag}: the engine LIMITED the figures ({why}); {doc.engine_advice}"


def _per_request(doc: LoadResult) -> list[str]:
    out = ["  Per request (sent = answered + failed + waiting):"]
    labels = [f"{r.name} ×{r.weight}" if r.weight != 1 else r.name for r in doc.requests]
    width = max(len(x) for x in labels)
    for label, r in zip(labels, doc.requests, strict=True):
        line = (
            f"    {label:<{width}}  sent {r.sent} = {r.answered} answered + "
            f"{r.failed} failed + {r.waiting} waiting"
        )
        if r.errors:
            bad = ", ".join(f"{c}: {n}" for c, n in sorted(r.status.items()))
            line += f"; {r.errors} answers not expected ({bad})"
        out.append(line)
    if doc.unassigned:
        out.append(
            f"    {doc.unassigned} more never had a connection to be sent on (failed connects)"
        )
    return out


def hdr_log(doc: LoadResult, hist: LatencyHistogram, start: float) -> str:
    """The latency histogram as an HdrHistogram interval log (the `.hlog` format that
    HdrHistogram's own log readers and plotters take): comment lines say what was
    loaded, then one interval, the measured window. Latencies are in microseconds; the
    interval's max column is in milliseconds."""
    w = doc.total
    mode = f"{doc.rate:g} req/s" if doc.rate else "closed loop"
    when = datetime.fromtimestamp(start, UTC).isoformat(timespec="seconds")
    lines = [
        f"#stackrace load {doc.loaded}",
        f"#{doc.concurrency} connections, {mode}, {w.seconds:.3f}s measured, "
        f"{w.requests} answers; latency in microseconds",
        f"#[StartTime: {start:.3f} (seconds since epoch), {when}]",
        f"#[BaseTime: {start:.3f} (seconds since epoch)]",
        '"StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"',
        f"0.000,{w.seconds:.3f},{w.latency.max / 1000:.3f},{hist.encode_base64()}",
    ]
    return "\n".join(lines) + "\n"
