"""What the app shows of its race, one tick at a time: the views a session draws up.

    view = session_view(session)   # Session.view(): a SessionView, one PaneView a stack

The data (PaneView, SessionView, SummaryRow) and how it is drawn up from the race core,
the level log and the verdicts kept (race/live/verdict_keeper.py). Apart from the session's
commands (race/live/session.py): a view reads the race and never changes it, so the UI,
a recorder and a replay all take the same view.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stackrace.engine.model import TargetSnapshot
from stackrace.evidence.model import KneePrediction
from stackrace.race.core import streams
from stackrace.race.core.state import StackState
from stackrace.race.live import explain
from stackrace.race.live.slo_flag import slo_flag
from stackrace.race.live.thennow import ThenNow, judge_live
from stackrace.race.live.why_view import pane_why, summary_why
from stackrace.race.playback.ghost import GhostView
from stackrace.rules import accounting, wedge
from stackrace.rules.breaking import LevelVerdict, StepResult, peak
from stackrace.rules.cores import SharedCore
from stackrace.rules.head_of_line import StreamLoad as HeadOfLine
from stackrace.rules.level import ENGINE_LIMITED, Judgment, judge_steps
from stackrace.settings.scenario import describe
from stackrace.stacks.sampler import ResourceSample

if TYPE_CHECKING:
    from stackrace.race.live.session_state import SessionState


@dataclass
class PaneView:
    """Everything one pane shows for one tick."""

    id: str
    name: str
    family: str
    state: StackState
    target: TargetSnapshot | None = None
    resources: ResourceSample | None = None
    baseline: ResourceSample | None = None  # before load
    breaking: LevelVerdict | None = None  # the first level that broke it (the ramp's mark)
    # the level running now, judged (stackrace.rules.level): its state and the figures
    # that prove it, from the same window as every figure the pane shows
    judgment: Judgment | None = None
    verdict: LevelVerdict | None = None  # the judgment as a breaking point (broken only)
    log_tail: list[str] = field(default_factory=list)
    external: bool = False
    refused: str | None = None  # the engine would not load it
    cpus: list[int] | None = None  # its pinned cores
    cpu_us_per_request: float | None = None
    cpu_capacity: float | None = None  # the most CPU it can use, % of one core
    little: accounting.LittleCheck | None = None
    proof: str = ""  # the figures that prove the judgment
    annotation: str = ""  # one plain-language sentence, when it matters
    behind: str = ""  # rate mode: how far behind schedule ("" when it keeps up)
    warm_climb: float | None = None  # while warming: req/s rise since its first second
    url: str = ""  # what the engine loads
    loads: str = ""  # your requests, when they are what is loaded ("GET / ×3, /slow ×1")
    synthetic: bool = False  # a model's figures (--demo), not a measurement
    verdict_since: float | None = None  # race seconds: since when the judgment's state held
    wedged: bool = False  # it answers nothing while clients wait (rules/wedge.py)
    # with --slo: whether the level running now meets it (None: too few answers yet),
    # and the line that says so with its figures (race/live/slo_flag.py)
    slo_meets: bool | None = None
    slo_text: str = ""
    capacity_load: float | None = None  # `k`: the load of its capacity probe running now
    # why it broke (race/live/why_view.py): the cause named from its evidence window,
    # "capturing evidence…" meanwhile, or why none could be captured; "" not broken
    cause: str = ""
    cause_kind: str = ""  # its kind alone ("blocking wait"), for projector mode
    knee: KneePrediction | None = None  # where it must start queueing (rules/knee.py)
    knee_text: str = ""  # the prediction in words, or how far the knee came from it
    # its protocol and how its level is carried: "h2 4×25 · 97 streams · 0 GOAWAY · 0
    # RST", "h1" beside h2 panes, "" in a race of HTTP/1.1 alone (race/core/streams.py)
    protocol: str = ""


@dataclass
class SessionView:
    seq: int
    panes: list[PaneView]
    concurrency: int
    rate: float | None
    engine_cpu: float = 0.0
    saturated: bool = False
    ramp: str | None = None  # "ramp 3/11 → 20" while a ramp runs
    ramp_done: bool = False  # a ramp has just ended: show its summary
    errors: list[str] = field(default_factory=list)
    placement: str = ""  # where stacks and engines run ("4 stacks share 1 core …")
    shared_cores: bool = False
    timeout: float = 10.0
    keepalive: bool = True
    synthetic: bool = False  # --demo: nothing here was measured
    caption: str = ""  # a talk track's line for this moment
    replay: str = ""  # a replay's position ("replay 0:42 / 3:10 ×2")
    ghosts: list[GhostView] = field(default_factory=list)  # one per stack of each ghost
    ramp_top: int = 0  # the top level of the ramp running (or last run)
    # "" while the database is fine or unused; else what happened to it (the figures
    # are then the database's, not the stacks', and no verdict is drawn)
    database: str = ""
    shared: SharedCore | None = None  # the cores the stacks share (None: each its own)
    clock: float = 0.0  # race seconds now (what a verdict's `since` is counted in)
    # "" while the race runs; else why it ended on its own (a cluster's app host lost)
    ended: str = ""
    slo: str = ""  # the objective as shown ("p99 < 50 ms"), "" without --slo
    capacity: str | None = None  # `k`: the search's progress while it runs
    capacity_done: bool = False  # a capacity search has just ended: show its ranking
    # how a level is split when h2 stacks race: "h1: 100 connections · h2: 4 connections
    # x 25 streams" ("" when every stack is HTTP/1.1)
    load_split: str = ""

    @property
    def level(self) -> int:
        """The level the slider shows, in the race's unit (RaceCore.set_level's): req/s
        per stack at a constant rate, connections per stack otherwise."""
        return round(self.rate) if self.rate is not None else self.concurrency


@dataclass(frozen=True)
class SummaryRow:
    id: str
    name: str
    peak: StepResult | None
    breaking: LevelVerdict | None
    mem_before: ResourceSample | None
    mem_peak: int  # highest RSS seen, bytes
    steps: tuple[StepResult, ...] = ()
    why: str = ""  # the proof of the breaking verdict, in figures
    # each level of `steps` measured long enough, judged on its own (ascending): what
    # the summary says of the levels below the break, or of every level when none
    judgments: tuple[Judgment, ...] = ()
    cause: str = ""  # why it broke, from its evidence window ("" none captured)
    knee: str = ""  # the knee predicted, and how far the measured one came from it
    knee_point: tuple[float, float] | None = None  # predicted (level, req/s), for charts


def session_view(s: SessionState) -> SessionView:
    """The race as it stands: every member's pane, the ramp, the race's own lines."""
    snap = s.core.engine.latest
    panes = []
    rate_mode = s.rate is not None
    # h2 stacks in the race: every pane says its protocol (race/core/streams.py)
    mixed = any(streams.is_h2(m.handle.http) for m in s.core.members.values())
    probing = s.ranking.loads()
    for mid, m in s.core.members.items():
        target = s.core.target(mid)
        state = m.handle.state
        little = None
        cpu_us = None
        judgment, since = (
            s.keeper.judgment(mid, s.core.clock(), s.started_at)
            if target is not None
            else (None, 0.0)
        )
        warm = s.keeper.warmups.get(mid)
        warming = (
            warm is not None and warm.warming and state == StackState.READY and target is not None
        )
        if warming:
            state = StackState.WARMING
        annotation = behind = ""
        # the requests in flight its level asks, and how they are carried (h2: streams)
        level = (
            s.core.settings.rate_connections
            if rate_mode
            else round(probing.get(mid) or s.concurrency)
        )
        carried = streams.split(level, s.core.settings.streams, m.handle.http)
        if target is not None:
            if not rate_mode:
                little = accounting.little_check(target.total, s.core.level_of(target))
            cpu_us = s.core.cpu_per_request_us(mid, target.total.requests)
            behind = explain.behind_schedule(s.rate, target.total)
            res = m.resources
            stall = s.keeper.wedge(mid)
            capacity = s.core.capacity(mid)
            annotation = explain.annotate(
                judgment=judgment,
                interval=target.interval,
                total=target.total,
                rate=s.rate,
                timeout=s.core.settings.timeout,
                cpu_capacity=capacity,
                cpu_us_per_request=cpu_us,
                timeout_cause=wedge.timeout_cause(m.signs),
                climb=warm.climb() if warm is not None else None,
                load=HeadOfLine(m.handle.http, *carried),
            )
            slow = s.core.settings.client_profile
            held = explain.held_by_slow_clients(
                m.handle.family,
                slow.upload if slow is not None else 0.0,
                s.core.settings.slow_share,
                target.total,
                busy_percent=(res.cpu_percent + res.cpu_wait_percent) if res is not None else None,
                capacity=capacity,
            )
            if held and (judgment is None or judgment.state != ENGINE_LIMITED):
                annotation = held  # the cause of its queue, named
            if stall is not None and stall.evidence and not annotation:
                annotation = f"wedged: {stall.evidence[0]}"
        loss = _lost_host_of(s, mid)
        if loss:
            annotation = loss
        flag = slo_flag(s.slo, target.total) if s.slo and target is not None else None
        panes.append(
            PaneView(
                id=mid,
                name=m.handle.name,
                family=m.handle.family,
                state=state,
                target=target,
                resources=m.resources,
                baseline=m.baseline,
                breaking=s.levels.breaking_point(mid),
                judgment=judgment,
                verdict=judgment.verdict() if judgment is not None else None,
                log_tail=m.handle.log_tail(12) if state == StackState.CRASHED or m.refused else [],
                external=m.handle.external,
                refused=m.refused,
                cpus=m.stack_cpus,
                cpu_us_per_request=cpu_us,
                cpu_capacity=s.core.capacity(mid) if target is not None else None,
                little=little,
                proof=judgment.why if judgment is not None else "",
                annotation=annotation,
                behind=behind,
                warm_climb=warm.climb() if warming and warm is not None else None,
                url=m.url,
                loads=_loads(s),
                synthetic=s.synthetic,
                verdict_since=since if judgment is not None else None,
                wedged=s.keeper.wedge(mid) is not None and target is not None,
                slo_meets=flag.meets if flag is not None else None,
                slo_text=flag.text if flag is not None else "",
                capacity_load=probing.get(mid),
                protocol=streams.pane_words(
                    m.handle.http,
                    level,
                    s.core.settings.streams,
                    # the level's: a GOAWAY a second is 0 in most quarter-second windows
                    target.total if target is not None else None,
                    mixed,
                ),
                **pane_why(s, mid, judgment),
            )
        )
    ramp = s.replay_ramp
    if s.prep is not None:
        ramp = s.prep.status()
    if s.ramp is not None and s.ramp.level is not None:
        ramp = f"ramp {s.ramp.progress()} → {s.ramp.level}"
    placement = s.core.placement
    database = ""
    if s.core.source is not None:
        database = s.core.source.database_state()
        if database:
            for pane in panes:
                pane.verdict = pane.judgment = None
    # during a capacity search each stack has a load of its own: the slider shows
    # the highest being probed (each pane's head shows its own)
    top = max(probing.values(), default=None)
    concurrency, rate = s.concurrency, s.rate
    if top is not None:
        if rate_mode:
            rate = top
        else:
            concurrency = round(top)
    return SessionView(
        seq=snap.seq if snap is not None else 0,
        panes=panes,
        concurrency=concurrency,
        rate=rate,
        engine_cpu=snap.engine_cpu if snap is not None else 0.0,
        saturated=snap.saturated if snap is not None else False,
        ramp=ramp,
        ramp_done=s.ramp_finished,
        errors=[*s.core.errors, *s.core.engine.errors],
        load_split=streams.header_line(
            concurrency, s.core.settings.streams, [m.handle.http for m in s.core.members.values()]
        )
        if rate is None
        else "",
        placement=placement.note if placement else "",
        shared_cores=placement.shared if placement else False,
        timeout=s.core.settings.timeout,
        keepalive=s.core.settings.keepalive,
        synthetic=s.synthetic,
        caption=s.caption,
        ramp_top=s.ramp_top,
        replay=s.replay_status,
        ghosts=[pv for g in s.ghosts for pv in g.view(s.level, rate_mode)],
        database=database,
        shared=s.shared_core(),
        clock=s.core.clock() - s.started_at,
        ended=s.ended,
        slo=s.slo.text if s.slo else "",
        capacity=s.ranking.search.status() if s.ranking.search is not None else None,
        capacity_done=s.ranking.finished,
    )


def _loads(s: SessionState) -> str:
    """Your requests as a pane's header names them (empty: the workload's path)."""
    kinds = s.core.request_kinds() if s.core.settings.own_requests else None
    if not kinds:
        return ""

    return ("" if kinds[0].method != "GET" or len(kinds) > 1 else "GET ") + describe(kinds)


def _lost_host_of(s: SessionState, member_id: str) -> str:
    """The latest loss of an engine host that carried this member's load, in words."""
    snap = s.core.engine.latest
    if snap is None:
        return ""
    for loss in reversed(snap.lost):
        if member_id in loss.abandoned:
            return loss.describe()
    return ""


def then_now_of(s: SessionState) -> ThenNow | None:
    """The classic experiment's claims judged on every level measured so far (the
    last ramp's and those explored since); None when the race replays none."""
    if s.then is None or s.rate is not None:
        return None
    steps = {}
    for mid in s.core.members:
        by = {s.level: s for s in s.ramp_steps.get(mid, [])}
        by.update({s.level: s for s in s.levels.results(mid)})
        steps[mid] = [by[k] for k in sorted(by)]
    names = {mid: m.handle.name for mid, m in s.core.members.items()}
    return judge_live(s.then, steps, names)


def summary_rows(s: SessionState) -> list[SummaryRow]:
    """Per member: the last finished ramp's levels if there was one (its findings
    survive the exploring that follows), else the levels measured so far."""
    rows = []
    from_ramp = s.summary_from_ramp
    for mid, m in s.core.members.items():
        if from_ramp:
            steps = list(s.ramp_steps.get(mid, []))
            breaking = s.ramp_breaking.get(mid)
        else:
            steps = s.levels.results(mid)
            breaking = s.levels.breaking_point(mid)
        rows.append(
            SummaryRow(
                id=mid,
                name=m.handle.name,
                peak=peak(steps),
                breaking=breaking,
                mem_before=m.baseline,
                mem_peak=m.mem_peak,
                steps=tuple(steps),
                why=breaking.reason if breaking else "",
                judgments=tuple(judge_steps(steps, s.rate is not None)),
                **summary_why(s, mid, steps, breaking),
            )
        )
    return rows


def percentile_curve(
    s: SessionState, pane_id: str, points: Sequence[float]
) -> list[tuple[float, int]]:
    """Latency at each percentile, at the current level (empty before any data)."""
    if pane_id not in s.core.attached():
        return []
    pts = list(points)
    try:
        values = s.core.engine.total_percentiles(pane_id, pts)
    except KeyError:
        return []
    return list(zip(pts, values, strict=True)) if any(values) else []
