"""A bench run's journal and its resumption: what race/bench/driver.py writes as each
level, probe and stack ends, and how a journal read back (`bench --resume`) puts the
work it holds into the report so that it is not measured again.

- `RunLog`: each finished level, probe, started and finished stack, appended to the
  journal (race/core/journal.py) with the seconds since the run began (counted on across
  resumes);
- `resume_finished`: the stacks a journal holds whole go into the report from it and
  are not started;
- `resumed_levels`: a stack cut off in the middle keeps its journalled levels and is
  measured at the others only; a capacity search cut off is replayed from its probes
  (race/bench/capacity_driver.py, `prior`) and goes on.
"""

from __future__ import annotations

import time

from stackrace.race.bench.protocol import BenchPlan, Progress
from stackrace.race.bench.results import BenchResults
from stackrace.race.core.capacity_plan import bounds_for, replay, result, unit
from stackrace.race.core.capacity_search import CapacitySearch, needed_answers
from stackrace.race.core.journal import JournalDone, JournalLevel, JournalProbe, JournalStack
from stackrace.race.core.placement import CorePlacement
from stackrace.report.schema import CapacityProbe, Level, StackResult
from stackrace.report.slo import Slo


class RunLog:
    """The run's journal, written as each piece of work ends (race/core/journal.py); the
    times are seconds since the run began, counted on from a resumed run's."""

    def __init__(self, plan: BenchPlan) -> None:
        self.journal = plan.journal
        self.t0 = time.monotonic() - (plan.resume.t if plan.resume is not None else 0.0)

    def _t(self) -> float:
        return round(time.monotonic() - self.t0, 3)

    def started(self, st: StackResult) -> None:
        if self.journal is not None:
            self.journal.write(
                JournalStack(
                    stack=st.name, title=st.title, family=st.family, version=st.version,
                    cpus=st.cpus, t=self._t(),
                )
            )  # fmt: skip

    def level(self, stack: str, lv: Level) -> None:
        if self.journal is not None:
            self.journal.write(JournalLevel(stack=stack, level=lv, t=self._t()))

    def probe(self, stack: str, p: CapacityProbe) -> None:
        if self.journal is not None:
            self.journal.write(JournalProbe(stack=stack, probe=p, t=self._t()))

    def done(self, stack: str, error: str | None) -> None:
        if self.journal is not None:
            self.journal.write(JournalDone(stack=stack, error=error, t=self._t()))


def resume_finished(
    plan: BenchPlan,
    rec: BenchResults,
    placement: CorePlacement,
    group: list[int],
    progress: Progress,
) -> list[int]:
    """A resumed run: the stacks of the group whose part the journal holds whole are
    put in the report from it and not started again; the rest of the group is left."""
    if plan.resume is None:
        return group
    left = []
    for k in group:
        if k >= len(plan.stacks):
            left.append(k)
            continue
        stack = plan.stacks[k]
        if not plan.resume.finished(stack.name):
            left.append(k)
            continue
        res = rec.stack(stack, placement.stack_cpus[k])
        _restore(plan, res)
        res.error = plan.resume.done[stack.name]
        progress(f"{stack.name}: measured before (the journal): not run again")
    return left


def _restore(plan: BenchPlan, res: StackResult) -> None:
    """A stack's journalled work into its result: levels, or its capacity so far."""
    assert plan.resume is not None
    r = plan.resume
    res.levels.extend(r.levels.get(res.name, []))
    meta = r.started.get(res.name)
    if meta is not None:
        res.version = meta.version or res.version
    probes = r.probes.get(res.name)
    if probes and plan.capacity is not None:
        s = plan.settings
        slo = Slo.parse(plan.capacity.slo)
        rate_mode = s.rate is not None
        start = float(s.rate) if s.rate is not None else float(s.concurrency_levels[0])
        search = CapacitySearch(bounds_for(start, rate_mode, plan.capacity))
        replay(search, res.name, probes, unit(rate_mode))
        res.capacity = result(
            search, [p.level for p in probes], slo, rate_mode, needed_answers(slo.quantile),
            plan.capacity, [p.noise for p in probes],
        )  # fmt: skip


def resumed_levels(plan: BenchPlan, rec: BenchResults, running: list[str]) -> dict[str, set[int]]:
    """A resumed run: each running stack's journalled levels, put in its result (in the
    order measured), and the set of them, which are not measured again."""
    if plan.resume is None or plan.capacity is not None:
        return {}
    out = {}
    for i in running:
        levels = plan.resume.levels.get(i, [])
        if levels and not rec.by_name[i].levels:
            rec.by_name[i].levels.extend(levels)
        out[i] = {lv.level for lv in levels}
    return out
