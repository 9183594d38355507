"""A run as one offline HTML page: what a team hands on (a PR link, a CI artifact, a
page put up after a talk), readable by someone without stackrace.

    page(run)                 # one run
    page(new, baseline=old)   # two runs on the same axes, differences judged

**One file, no request.** Everything is inline: the CSS, the SVG charts (built in
Python, report/html_chart.py) and one small script for the values under the pointer.
No URL of any kind is written (no CDN, font or image), and the page's
Content-Security-Policy (`default-src 'none'`, the script allowed by its hash alone)
makes the browser refuse any request and any script it did not come with — a stack
name that smuggled `<script>` in would be text anyway (every string goes through
`esc`), and would not run if it were not.

**What it shows**, in the order a reader asks: which stack broke first and when (the
summary), each figure over time with the stacks side by side on shared axes (goodput
and failures by kind; p50/p99/p99.9; clients waiting and the oldest's age; CPU and
RSS), the level steps, the verdicts as bands and the breaking point marked; then the
level table (the terminal's, as an HTML table: numbers select as text), the breaking
points with their evidence where the run has it (`levels[].why`), the settings, the
machine, the noise statement, and each stack's version and command line.

**Two runs** (`baseline`): each chart draws the baseline dashed beside the run, and the
differences are the regression gate's verdicts (report/gate.py, DEFAULT_RULES and its
measured-spread rule) with both runs' noise statements (race/core/noise.py): this page
judges nothing by rules of its own.

A run without a series (written before series existed, or a capacity search) still
gets its tables, settings and verdicts; the charts say there is no time series.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable

import msgspec

from stackrace.report import capacity, gate, tables, why
from stackrace.report.html_chart import Band, Chart, Line, esc, share_axes, svg
from stackrace.report.judged import breaking, judgments, rate_mode
from stackrace.report.schema import BenchRun, StackResult
from stackrace.report.series import StackSeries
from stackrace.rules.level import BROKEN

CSS = """
:root{--bg:#fff;--fg:#1b1f24;--mute:#5b6570;--grid:#e3e6ea;--card:#f6f8fa;--line:#d0d7de;
--good:#1f6feb;--p50:#2da44e;--p99:#d4a72c;--p999:#cf222e;--wait:#8250df;--old:#9a6700;
--cpu:#0a7f8c;--rss:#57606a;--bad:#cf222e}
@media (prefers-color-scheme:dark){:root{--bg:#0d1117;--fg:#e6edf3;--mute:#9aa5b1;
--grid:#30363d;--card:#161b22;--line:#30363d;--good:#58a6ff;--p50:#3fb950;--p99:#e3b341;
--p999:#ff7b72;--wait:#bc8cff;--old:#d29922;--cpu:#39c5cf;--rss:#8b949e;--bad:#ff7b72}}
*{box-sizing:border-box}
body{margin:0 auto;padding:1rem clamp(.5rem,2vw,2rem);max-width:1800px;background:var(--bg);
color:var(--fg);font:clamp(14px,1.1vw,18px)/1.45 system-ui,-apple-system,"Segoe UI",sans-serif}
h1{font-size:1.5em;margin:.2em 0}h2{font-size:1.2em;margin:1.4em 0 .4em}
.mute{color:var(--mute)}code,pre{font:0.9em ui-monospace,Menlo,Consolas,monospace}
pre{white-space:pre-wrap;word-break:break-all;margin:.2em 0}
.row{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,300px),1fr));gap:.6rem}
figure{margin:0;padding:.4rem;background:var(--card);border:1px solid var(--line);border-radius:6px}
figcaption{font-size:.85em;display:flex;flex-wrap:wrap;gap:.2em .8em}
figcaption b{margin-right:auto}
.key::before{content:"";display:inline-block;width:1em;height:.25em;vertical-align:middle;
margin-right:.3em;background:currentColor}
.key.dashed::before{background:none;border-top:.2em dashed currentColor;height:0}
svg.chart{width:100%;height:auto;display:block;touch-action:pan-y}
.grid{stroke:var(--grid);stroke-width:1}.tick,.steplabel,.marklabel{fill:var(--mute);font-size:11px}
.marklabel{fill:var(--bad);font-weight:600}
.step{stroke:var(--mute);stroke-dasharray:2 3;stroke-width:1}
.mark{stroke:var(--bad);stroke-width:2}.cursor{stroke:var(--fg);stroke-width:1}
.line{fill:none;stroke-width:1.6;stroke-linejoin:round;vector-effect:non-scaling-stroke}
.dashed{stroke-dasharray:5 4;opacity:.75}
.c-good{stroke:var(--good);color:var(--good)}.c-p50{stroke:var(--p50);color:var(--p50)}
.c-p99{stroke:var(--p99);color:var(--p99)}.c-p999{stroke:var(--p999);color:var(--p999)}
.c-wait{stroke:var(--wait);color:var(--wait)}.c-old{stroke:var(--old);color:var(--old)}
.c-cpu{stroke:var(--cpu);color:var(--cpu)}.c-rss{stroke:var(--rss);color:var(--rss)}
.c-f0{stroke:#cf222e;color:#cf222e}.c-f1{stroke:#bc4c00;color:#bc4c00}
.c-f2{stroke:#8250df;color:#8250df}.c-f3{stroke:#6e7781;color:#6e7781}
.band{opacity:.16}.v-queueing,.v-saturated{fill:#d4a72c}.v-failing,.v-wedged{fill:#cf222e}
.v-starving{fill:#8250df}
table{border-collapse:collapse;font-variant-numeric:tabular-nums;font-size:.9em}
.scroll{overflow-x:auto}
th,td{padding:.2em .6em;border-bottom:1px solid var(--line);text-align:right}
th:first-child,td:first-child{text-align:left}th{background:var(--card)}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.1em 1em;margin:.3em 0}
dt{color:var(--mute)}dd{margin:0;overflow-wrap:anywhere}
.beyond{color:var(--bad);font-weight:600}.noise{color:var(--mute)}
ul.verdicts{padding-left:1.2em}
@media (max-width:640px){.tick,.steplabel,.marklabel{font-size:17px}}
#tip{position:fixed;pointer-events:none;background:var(--card);border:1px solid var(--line);
border-radius:4px;padding:.3em .5em;font-size:.8em;white-space:pre;display:none;z-index:9}
@media print{#tip,.cursor{display:none}body{max-width:none;font-size:11pt}
figure,table,section{break-inside:avoid}.row{grid-template-columns:repeat(2,1fr)}}
"""

# the values under the pointer: each chart's scale is in its data-* attributes, so the
# drawn points are turned back into figures; text is set with textContent, never HTML
HOVER_JS = """(()=>{const tip=document.getElementById('tip');
const fmt=v=>Math.abs(v)>=100?Math.round(v).toLocaleString():+v.toPrecision(3);
for(const s of document.querySelectorAll('svg.chart')){const d=s.dataset,L=+d.l,R=+d.r,
T=+d.t,B=+d.b,x1=+d.x1,y0=+d.y0,y1=+d.y1,lg=d.log==='1',cur=s.querySelector('.cursor');
const pts=d=>d.split('M').filter(Boolean).flatMap(r=>{const[a,b]=r.split('l'),q=[a.split(',')
.map(Number)];for(const s of(b?b.split(' '):[])){const[x,y]=s.split(',').map(Number),
z=q[q.length-1];q.push([z[0]+x,z[1]+y])}return q});
const ls=[...s.querySelectorAll('path.line')].map(p=>({n:p.dataset.name,
p:pts(p.getAttribute('d'))}));
const val=y=>{const f=(B-y)/(B-T);return lg?10**(Math.log10(y0)+f*(Math.log10(y1)-Math.log10(y0)))
:y0+f*(y1-y0)};
const show=e=>{const r=s.getBoundingClientRect(),
x=(e.clientX-r.left)*s.viewBox.baseVal.width/r.width;
if(x<L||x>R){hide();return}const out=[];let t=(x-L)/(R-L)*x1;
for(const l of ls){let b=null;for(const q of l.p)if(!b||Math.abs(q[0]-x)<Math.abs(b[0]-x))b=q;
if(b&&Math.abs(b[0]-x)<(R-L)/20){out.push(l.n+': '+fmt(val(b[1]))+' '+d.unit)}}
cur.setAttribute('x1',x);cur.setAttribute('x2',x);cur.setAttribute('visibility','visible');
tip.textContent=Math.round(t)+' s\\n'+(out.join('\\n')||'no figure');tip.style.display='block';
tip.style.left=Math.min(e.clientX+12,innerWidth-tip.offsetWidth-4)+'px';tip.style.top=(e.clientY+12)+'px'};
const hide=()=>{tip.style.display='none';cur.setAttribute('visibility','hidden')};
s.addEventListener('pointermove',show);s.addEventListener('pointerdown',show);
s.addEventListener('pointerleave',hide)}})();"""


def _csp() -> str:
    digest = base64.b64encode(hashlib.sha256(HOVER_JS.encode()).digest()).decode()
    return (
        "default-src 'none'; style-src 'unsafe-inline'; "
        f"script-src 'sha256-{digest}'; img-src data:; base-uri 'none'; form-action 'none'"
    )


# --- one figure a row, one chart per stack ------------------------------------------------

SeriesOf = Callable[[StackSeries], list[tuple[str, list[float | None], str]]]


def _ms(col: list[int], answered: list[int]) -> list[float | None]:
    # no answer, or no histogram for the second (a replay's first moments): a gap
    return [v / 1000 if n and v else None for v, n in zip(col, answered, strict=False)]


def _goodput(s: StackSeries) -> list[tuple[str, list[float | None], str]]:
    return [("goodput", list(s.goodput), "c-good")]


def _failures(s: StackSeries) -> list[tuple[str, list[float | None], str]]:
    kinds = sorted(s.failures, key=lambda k: -sum(s.failures[k]))
    out: list[tuple[str, list[float | None], str]] = [
        (k, [float(v) / s.step for v in s.failures[k]], f"c-f{min(i, 3)}")
        for i, k in enumerate(kinds[:4])
    ]
    if len(kinds) > 4:  # the rarest kinds as one line: the legend stays readable
        rest = [sum(s.failures[k][i] for k in kinds[4:]) / s.step for i in range(len(s))]
        out.append(("other kinds", list(rest), "c-f3"))
    return out or [("failures", [0.0] * len(s), "c-f0")]


def _latency(s: StackSeries) -> list[tuple[str, list[float | None], str]]:
    if not s.p99:  # no histogram was kept (a recording without them)
        return []
    return [
        ("p50", _ms(s.p50, s.answered), "c-p50"),
        ("p99", _ms(s.p99, s.answered), "c-p99"),
        ("p99.9", _ms(s.p999, s.answered), "c-p999"),
    ]


def _waiting(s: StackSeries) -> list[tuple[str, list[float | None], str]]:
    return [("waiting", [float(v) for v in s.waiting], "c-wait")]


def _oldest(s: StackSeries) -> list[tuple[str, list[float | None], str]]:
    return [("oldest wait", [v / 1000 for v in s.oldest_us], "c-old")]


def _cpu(s: StackSeries) -> list[tuple[str, list[float | None], str]]:
    return [("cpu", list(s.cpu), "c-cpu")] if s.cpu else []


def _rss(s: StackSeries) -> list[tuple[str, list[float | None], str]]:
    return [("rss", [v / 2**20 for v in s.rss], "c-rss")] if s.rss else []


# (title, unit, log scale, the lines, the line a baseline is drawn with)
ROWS: list[tuple[str, str, bool, SeriesOf, str]] = [
    ("Goodput", "req/s", False, _goodput, "goodput"),
    ("Failures by kind", "/s", False, _failures, ""),
    ("Latency: p50, p99, p99.9", "ms", True, _latency, "p99"),
    ("Clients waiting", "", False, _waiting, "waiting"),
    ("The oldest waiting request's age", "ms", False, _oldest, "oldest wait"),
    ("Server CPU (whole process tree)", "% of a core", False, _cpu, "cpu"),
    ("Server memory (RSS of the process tree)", "MiB", False, _rss, "rss"),
]


def _level_label(level: int, rate: bool) -> str:
    return f"{level}/s" if rate else f"c={level}"


def _spans(s: StackSeries) -> dict[int, tuple[float, float]]:
    """Each level's start and end time: its last unbroken run of seconds (a level set
    again later, as a ramp after exploring does, is judged on that last visit)."""
    out: dict[int, tuple[float, float]] = {}
    prev = None
    for t, lv in zip(s.t, s.level, strict=False):
        if lv > 0:
            out[lv] = (out[lv][0] if lv == prev else t - s.step, t)
        prev = lv
    return out


def aligned(s: StackSeries) -> StackSeries:
    """The series on the time of its stack's own load: seconds since its first row began.
    Stacks raced together start together anyway; stacks raced one after another (bench's
    rotation on a small machine) then meet on the same axis, level for level."""
    t0 = s.t[0] - s.step if s.t else 0.0
    return msgspec.structs.replace(s, t=[round(t - t0, 2) for t in s.t])


def _marks(
    st: StackResult, s: StackSeries, run: BenchRun
) -> tuple[list[Band], list[tuple[float, str]]]:
    """The stack's broken verdicts as bands, and its breaking point marked."""
    spans = _spans(s)
    bands = []
    for lv, j in judgments(st, run).items():
        if j.state in BROKEN and lv in spans:
            a, z = spans[lv]
            label = f"{_level_label(lv, rate_mode(run))}: {j.state} — {j.why}"
            bands.append(Band(a, z, "v-" + j.state.replace(" ", "-"), label))
    broke = breaking(st, run)
    marks = []
    if broke is not None and broke.level in spans:
        marks.append((spans[broke.level][0], f"broke: {broke.kind}"))
    return bands, marks


def _steps(s: StackSeries, rate: bool) -> list[tuple[float, str]]:
    out = []
    for i, lv in enumerate(s.level):
        if lv > 0 and (i == 0 or lv != s.level[i - 1]):
            out.append((s.t[i] - s.step, _level_label(lv, rate)))
    return out


def _figure(st: StackResult, chart: Chart, note: str = "") -> str:
    keys = "".join(
        f'<span class="key {esc(line.css)}{" dashed" if line.dashed else ""}">{esc(line.name)}'
        f"{' (baseline)' if line.dashed else ''}</span>"
        for line in chart.lines
    )
    return (
        f'<figure data-stack="{esc(st.name)}"><figcaption><b>{esc(st.name)}</b>{keys}'
        f"</figcaption>{svg(chart)}{note}</figure>"
    )


def charts(run: BenchRun, baseline: BenchRun | None = None) -> str:
    """Every figure's row: one chart per stack with a series, all on shared axes."""
    with_series = [st for st in run.stacks if st.series is not None and len(st.series)]
    if not with_series:
        return (
            '<p class="mute">This run has no time series (made before stackrace kept '
            "one, or a capacity search): the tables below are all there is.</p>"
        )
    old = {
        st.name: aligned(st.series)
        for st in (baseline.stacks if baseline is not None else [])
        if st.series is not None and len(st.series)
    }
    rate = rate_mode(run)
    series = {st.name: aligned(st.series) for st in with_series if st.series is not None}
    marks = {st.name: _marks(st, series[st.name], run) for st in with_series}
    out = []
    labelled = False  # the levels and verdicts are named on the first row drawn alone
    for title, unit, log, lines_of, base_line in ROWS:
        row: list[tuple[StackResult, Chart]] = []
        for st in with_series:
            s = series[st.name]
            lines = [Line(n, v, css) for n, v, css in lines_of(s)]
            if not lines:
                continue
            chart = Chart(title, unit, list(s.t), lines, log=log, steps=_steps(s, rate))
            chart.bands, chart.marks = marks[st.name]
            chart.step_labels = not labelled
            b = old.get(st.name)
            if b is not None and base_line:
                for n, v, css in lines_of(b):
                    if n == base_line:
                        chart.lines.append(Line(n, v, css, dashed=True))
                        chart.t_other = list(b.t)
            row.append((st, chart))
        if not row:
            continue
        labelled = True
        share_axes([c for _, c in row])
        figs = "".join(_figure(st, c) for st, c in row)
        unit_note = f" <span class=mute>({esc(unit)})</span>" if unit else ""
        out.append(
            f'<section><h2>{esc(title)}{unit_note}</h2><div class="row">{figs}</div></section>'
        )
    return "".join(out)


# --- the tables ---------------------------------------------------------------------------


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    table = f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"
    return f'<div class="scroll">{table}</div>'


def _dl(pairs: list[tuple[str, object]]) -> str:
    items = "".join(
        f"<dt>{esc(k)}</dt><dd>{_value(v)}</dd>" for k, v in pairs if v not in (None, "", [], {})
    )
    return f"<dl>{items}</dl>"


def _value(v: object) -> str:
    """Any decoded value as escaped HTML: nested mappings as lists, the rest as text."""
    if isinstance(v, dict):
        return _dl([(str(k), x) for k, x in v.items()])
    if isinstance(v, list | tuple):
        if all(not isinstance(x, dict | list) for x in v):
            return esc(", ".join(str(x) for x in v))
        return "<ol>" + "".join(f"<li>{_value(x)}</li>" for x in v) + "</ol>"
    if isinstance(v, float):
        return esc(f"{v:g}")
    return esc(v)


def _summary(run: BenchRun) -> str:
    """Which stack broke first and when: the breaking points in the order they came."""
    items = []
    for st in run.stacks:
        broke = breaking(st, run)
        when = None
        if broke is not None and st.series is not None and len(st.series):
            span = _spans(aligned(st.series)).get(broke.level)
            when = span[0] if span else None
        items.append((when if when is not None else float("inf"), st, broke))
    items.sort(key=lambda x: (x[2] is None, x[0]))
    lis = []
    for when, st, _broke in items:
        at = f" <span class=mute>({when:.0f} s into its load)</span>" if when < 1e12 else ""
        lis.append(f"<li>{esc(tables.breaking_line(st, run))}{at}</li>")
    return f"<ul>{''.join(lis)}</ul>"


def _capacity(run: BenchRun) -> str:
    """`bench --capacity`, `tune`, `k` in the app: each stack's capacity under the SLO,
    best first, as report/capacity.py ranks and words it (the terminal's table)."""

    best = capacity.ranked(run.stacks)
    if not best:
        return ""
    rows = [
        [str(n), st.name, *capacity.row(st.capacity)] for n, st in enumerate(best, 1) if st.capacity
    ]
    said = "".join(
        f"<li>{esc(st.name)}: {esc(st.capacity.sentence)}</li>" for st in best if st.capacity
    )
    first = best[0].capacity
    slo = first.slo if first is not None and first.slo else run.settings.slo or ""
    return (
        f"<section><h2>Capacity under the SLO ({esc(slo)}), best first</h2>"
        f"{_table(list(capacity.HEADER), rows)}<ul>{said}</ul></section>"
    )


def _evidence(run: BenchRun) -> str:
    """Each breaking point with its reason and, where the run has it, why (issue 46's
    `levels[].why`: shown when present, never required)."""
    out = []
    for st in run.stacks:
        broke = breaking(st, run)
        if broke is None:
            continue
        found = why.why_at(st, broke.level)
        body = _dl([("kind", broke.kind), ("reason", broke.reason)])
        if found is not None:  # what the workers were doing (report/why.py, as bench says it)
            lines = [why.cause_line(found), *why.evidence_lines(found)]
            body += "<h3>Why</h3><ul>" + "".join(f"<li>{esc(x)}</li>" for x in lines) + "</ul>"
        if knee := why.knee_line(st):
            body += f'<p class="mute">{esc(knee)}</p>'

        level = _level_label(broke.level, rate_mode(run))
        out.append(f"<section><h3>{esc(st.name)} at {esc(level)}</h3>{body}</section>")
    return "".join(out) or '<p class="mute">No stack broke in this run.</p>'


def _about(run: BenchRun, label: str = "") -> str:
    settings = {
        k: v
        for k, v in msgspec.to_builtins(run.settings).items()
        if v not in (None, "", [], {}, False)
    }
    machine = msgspec.to_builtins(run.machine)
    recipes = {r.name: r for r in (run.provenance.stacks if run.provenance else [])}
    stacks = []
    for st in run.stacks:
        r = recipes.get(st.name)
        cmd = " ".join(r.command) if r is not None else ""
        stacks.append(
            f"<li><b>{esc(st.name)}</b> {esc(st.title)} <span class=mute>{esc(st.version)}</span>"
            + (f"<pre>{esc(cmd)}</pre>" if cmd else "")
            + (f"<pre>{esc(st.url)}</pre>" if st.url else "")
            + "</li>"
        )
    noise = _noise(run, "not measured in this run (bench --capacity and tune measure it)")
    return (
        f"<h2>{esc(label)}Noise</h2><p>{esc(noise)}</p>"
        f"<h2>{esc(label)}Stacks</h2><ul>{''.join(stacks)}</ul>"
        f"<h2>{esc(label)}Settings</h2>{_dl(list(settings.items()))}"
        f"<h2>{esc(label)}Machine</h2>{_dl(list(machine.items()))}"
    )


def _noise(run: BenchRun, otherwise: str) -> str:
    return run.noise.sentence if run.noise is not None and run.noise.sentence else otherwise


def _compare(run: BenchRun, baseline: BenchRun) -> str:
    """The gate's verdict of the run against the baseline, in its own words: beyond the
    rules (a regression), within the measured spread (noise), within the rules."""
    v = gate.gate_verdict(run, baseline, gate.parse_rules(gate.DEFAULT_RULES))
    items = [f'<li class="beyond">{esc(x)}</li>' for x in v.problems + v.failed]
    spread = "within the measured spread"
    items += [f'<li class="noise">noise: {esc(x)}</li>' for x in v.passed if spread in x]
    within = [f"<li>{esc(x)}</li>" for x in v.passed if spread not in x]
    within += [f'<li class="mute">not in the baseline: {esc(x)}</li>' for x in v.unmatched]
    if not items:
        items.append("<li>no difference beyond the gate's rules or the noise</li>")
    noise = [
        f"<li>{esc(name)}: {esc(_noise(r, 'noise not measured'))}</li>"
        for name, r in (("this run", run), ("the baseline", baseline))
    ]
    return (
        "<section><h2>Against the baseline</h2>"
        f"<p>The regression gate's rules ({esc(gate.DEFAULT_RULES)}); a change smaller than "
        "the level's measured spread is noise, not a difference. Dashed lines in the charts "
        "are the baseline.</p>"
        f'<ul class="verdicts">{"".join(items)}</ul>'
        f"<details><summary>{len(within)} within the rules</summary>"
        f'<ul class="verdicts">{"".join(within)}</ul></details>'
        f"<ul>{''.join(noise)}</ul></section>"
    )


def page(run: BenchRun, baseline: BenchRun | None = None, title: str | None = None) -> str:
    """The run (and a baseline beside it) as one self-contained HTML document."""
    s = run.settings
    heading = title or (
        f"stackrace: {', '.join(st.name for st in run.stacks)} — "
        f"{s.path if s.own_requests else s.workload}"
    )
    levels = _table(list(tables.COLUMNS), tables.rows(run))
    notes = "".join(f"<li>† {esc(n)}</li>" for n in tables.notes_lines(run))
    interrupted = (
        f'<p class="beyond">interrupted ({esc(run.interrupted)}): later levels are missing</p>'
        if run.interrupted
        else ""
    )
    compare = _compare(run, baseline) if baseline is not None else ""
    base_about = ""
    if baseline is not None:
        base_about = (
            f"<section><h2>The baseline ({esc(baseline.started)})</h2>"
            f"{_about(baseline, 'Baseline: ')}</section>"
        )
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width,initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(_csp())}">'
        f'<meta name="color-scheme" content="light dark"><title>{esc(heading)}</title>'
        f"<style>{CSS}</style></head><body>"
        f"<header><h1>{esc(heading)}</h1><p class=mute>{esc(run.started)} · "
        f"{esc(run.machine.hostname)} · {esc(run.machine.cores)} cores · stackrace "
        f"{esc(run.machine.stackrace)}</p></header>{interrupted}"
        f"{_capacity(run)}"
        f"<section><h2>Where each stack broke</h2>{_summary(run)}</section>{compare}"
        f"{charts(run, baseline)}"
        f"<section><h2>Levels</h2>{levels}<ul>{notes}</ul></section>"
        f"<section><h2>Breaking points and their evidence</h2>{_evidence(run)}</section>"
        f"<section>{_about(run)}</section>{base_about}"
        f'<div id="tip" role="status"></div><script>{HOVER_JS}</script></body></html>\n'
    )
