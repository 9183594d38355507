"""A bench run (and the gate's verdict) as JUnit XML, the format CI systems show tests in.

    <testsuites>                                  one <testsuite> per run
      <testsuite name="stackrace bench hello">
        <testcase classname="uvicorn" name="c=10">        one per stack and planned level
          <failure type="regression" .../>                the gate's crossed rules
        <testcase classname="uvicorn" name="c=50">
          <failure type="no success" .../>                every request of the level failed
        <testcase classname="uvicorn" name="c=100">
          <error type="not measured" .../>                 the stack could not be measured
        <testcase classname="stackrace" name="gate">      the verdict's other causes
        <testcase classname="stackrace" name="run">       an interrupted run is an error

A level where every request failed is a failure too (report/failures.py), and each of
your requests (`--path`) is a case of its own that fails when it never got an expected
answer: a run of 404s is not a pass. Every planned level of every stack is a test case,
measured or not, so the same tests
appear in every run and a CI system can follow each one's history: a level the stack
never reached is an error (the stack failed: its reason), or skipped (the run was
interrupted, or the stack answered nothing at a lower level). All the rules a level
crosses go into one <failure> (the first as its message, all of them as its text): the
common schemas allow one failure per test case. A level where nothing succeeded (every
request failed: 100 % HTTP 404, all refused) is a failure with or without a gate, as it
makes `bench` exit non-zero; a level measured while the database failed is an error (the
figures are the database's, not the stack's). Rules are judged when a gate ran: against a
baseline, or absolute rules (`--fail-on 'p99>50ms'`) alone; a level that misses the
objective (`--slo 'p99<50ms'`, no baseline needed) is a failure of type "slo".
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from stackrace.base.printable import xml_chars
from stackrace.report.failures import path_failed
from stackrace.report.gate import GateVerdict, level_name
from stackrace.report.schema import BenchRun, Level, StackResult
from stackrace.report.tables import no_success


def junit_xml(
    run: BenchRun, verdict: GateVerdict | None = None, baseline: str | None = None
) -> str:
    s = run.settings
    suite = ET.Element(
        "testsuite",
        name=f"stackrace bench {s.label()} ({s.path})",
        # the schema's timestamp has no time zone: the run's is UTC
        timestamp=run.started.split("+")[0].removesuffix("Z"),
        hostname=run.machine.hostname,
    )
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("stackrace", run.machine.stackrace),
        ("workload", s.workload),
        ("path", s.path),
        ("isolation", s.isolation),
        ("duration", f"{s.duration:g}"),
        ("baseline", baseline or ""),
        ("slo", s.slo or ""),
        ("cpu", run.machine.cpu_model),
    ):
        ET.SubElement(props, "property", name=name, value=value)
    lines = [*verdict.failed, *verdict.slo_missed] if verdict is not None else []
    filed: set[str] = set()
    for st in run.stacks:
        filed |= _stack_cases(suite, run, st, lines)
    if verdict is not None:
        rest = [line for line in lines if line not in filed and not _not_measured(line, run)]
        gate = _case(suite, "stackrace", "gate")
        causes = verdict.problems + rest
        if causes:
            _fail(gate, "failure", "gate", causes)
    run_case = _case(suite, "stackrace", "run")
    if run.interrupted:
        _fail(run_case, "error", "interrupted", [f"run interrupted ({run.interrupted})"])
    if run.notes:
        ET.SubElement(run_case, "system-out").text = "\n".join(run.notes)
    _count(suite)
    root = ET.Element("testsuites", name="stackrace bench")
    root.append(suite)
    for key in ("tests", "failures", "errors", "skipped", "time"):
        root.set(key, suite.get(key, "0"))
    _printable(root)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def _stack_cases(suite: ET.Element, run: BenchRun, st: StackResult, lines: list[str]) -> set[str]:
    """One test case per planned level of the stack; returns the verdict lines filed."""
    s = run.settings
    rate_mode = s.rate is not None
    measured = {lv.level: lv for lv in st.levels}
    # a capacity search (`bench --capacity`) has no planned levels: one case, its answer
    planned = list(dict.fromkeys([*s.levels, *measured])) if st.capacity is None else []
    if st.capacity is not None:
        case = _case(suite, st.name, "capacity", sum(p.seconds for p in st.capacity.probes))
        ET.SubElement(case, "system-out").text = st.capacity.sentence
        if st.capacity.load is None:
            _fail(case, "failure", "slo", [f"{st.name}: {st.capacity.sentence}"])
    # a stack that failed: its error goes to the first level it did not finish (the one
    # it crashed in, when that level was recorded, else the first one missing)
    crashed_at = next((lv for lv in planned if lv not in measured), None)
    if st.error and crashed_at is None and st.levels:
        crashed_at = st.levels[-1].level
    filed: set[str] = set()
    for level in planned:
        name = f"rate={level}" if rate_mode else f"c={level}"
        lv = measured.get(level)
        case = _case(suite, st.name, name, lv.seconds if lv is not None else 0.0)
        mine: list[str] = []
        if lv is not None:
            prefix = level_name(st.name, lv) + ": "
            mine = [line.removeprefix(prefix) for line in lines if line.startswith(prefix)]
            filed |= {prefix + m for m in mine}
            ET.SubElement(case, "system-out").text = _figures(lv, st.sampled)
        if st.error and level == crashed_at:
            _fail(case, "error", "not measured", [st.error, *mine])
        elif lv is not None and lv.db_down:
            why = "measured while the database failed (down, restarted or its tables gone)"
            _fail(case, "error", "database", [f"{why}: not the stack's figures, not judged"])
        elif lv is not None and lv.failed_entirely:
            _fail(case, "failure", "no success", [no_success(lv), *mine])
        elif mine:
            kind = "slo" if all("misses the SLO" in m for m in mine) else "regression"
            _fail(case, "failure", kind, mine)
        elif lv is None:
            why = (
                f"not measured: run interrupted ({run.interrupted})"
                if run.interrupted
                else "not measured: " + (st.error or "the stack answered nothing at a lower level")
            )
            ET.SubElement(case, "skipped", message=why)
    bad = dict(path_failed(st))
    for p in st.paths:  # your requests: a case each, failed when never answered as expected
        case = _case(suite, st.name, f"request {p.name}")
        ET.SubElement(case, "system-out").text = (
            f"sent {p.sent} = {p.answered} answered + {p.failed} failed + {p.waiting} waiting; "
            f"{p.errors} answers not expected"
        )
        if p.name in bad:
            _fail(case, "failure", "failed", [bad[p.name]])
    return filed


def _not_measured(line: str, run: BenchRun) -> bool:
    return any(line.startswith(f"{st.name}: not measured") for st in run.stacks if st.error)


def _case(suite: ET.Element, classname: str, name: str, seconds: float = 0.0) -> ET.Element:
    return ET.SubElement(suite, "testcase", classname=classname, name=name, time=f"{seconds:.3f}")


def _fail(case: ET.Element, tag: str, kind: str, lines: list[str]) -> None:
    # before any system-out: the schemas order a test case's children
    element = ET.Element(tag, type=kind, message=lines[0])
    element.text = "\n".join(lines)
    case.insert(0, element)


def _figures(lv: Level, sampled: bool = True) -> str:
    w = lv.window
    fails = ", ".join(f"{k} {n}" for k, n in sorted(w.failures.items())) or "none"
    latency = (
        f"latency p50 {lv.latency.p50} µs, p99 {lv.latency.p99} µs, max {lv.latency.max} µs"
        if lv.answered
        else "latency: no answers"
    )
    resources = (
        f"CPU {lv.cpu_percent:.0f} %; RSS after {lv.memory_after.rss} bytes"
        if sampled
        else "CPU and memory not sampled (no --pid)"
    )
    return (
        f"{lv.rps:,.0f} req/s; {latency}; sent {w.sent} = {w.requests} answered + {w.lost} failed "
        f"+ {w.waiting} waiting; failures: {fails}; {resources}"
    )


def _printable(root: ET.Element) -> None:
    """Every text and attribute of the tree made valid XML (printable.xml_chars): a stack
    name, a note or a server's words may hold an ESC or a BEL, which ElementTree writes
    raw, and an XML 1.0 parser refuses the whole file for it."""
    for el in root.iter():
        if el.text:
            el.text = xml_chars(el.text)
        for key, value in list(el.attrib.items()):
            el.set(key, xml_chars(value, newlines=False))


def _count(suite: ET.Element) -> None:
    cases = suite.findall("testcase")
    suite.set("tests", str(len(cases)))
    suite.set("failures", str(sum(c.find("failure") is not None for c in cases)))
    suite.set("errors", str(sum(c.find("error") is not None for c in cases)))
    suite.set("skipped", str(sum(c.find("skipped") is not None for c in cases)))
    suite.set("time", f"{sum(float(c.get('time', '0')) for c in cases):.3f}")
