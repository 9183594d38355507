"""Why a pane's stack broke, and where it was predicted to: the app's words for both.

    pane_why(session, "gunicorn-sync", judgment)   # {"cause": …, "knee": …, "knee_text": …}
    summary_why(session, mid, steps, breaking)     # the `t` and ramp summaries' clauses
    evidence_text(session, mid)                    # what `w` shows of the focused stack

The evidence windows are the race core's (race/core/evidence_keeper.py); the session
starts one when a pane's verdict turns to a breaking state (race/live/session.py). The
cause's words are report/why.py's (the same as bench's line and the Markdown), the
knee's rules/knee.py's: here they are only picked for the level on screen. Apart from
view.py, which draws up every other figure of a pane: this is one job (the why), and
it grows with the evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from stackrace.base.slug import slug
from stackrace.evidence.flame import flame_svg
from stackrace.evidence.model import KneePrediction
from stackrace.report.why import cause_line, evidence_lines
from stackrace.rules.breaking import LevelVerdict, StepResult
from stackrace.rules.knee import knee_miss, predict_knee, stack_pool
from stackrace.rules.level import Judgment

if TYPE_CHECKING:
    from stackrace.race.live.session_state import SessionState


def knee_of(
    s: SessionState, mid: str, steps: Sequence[StepResult]
) -> tuple[KneePrediction | None, str]:
    """The member's knee predicted from its pool and `steps`, or why there is none
    ("" when nothing can be said: a model's member, a server stackrace did not start)."""
    m = s.core.members.get(mid)
    known = s.core.evidence.pool(m) if m is not None else None
    if known is None:
        return None, ""
    pool = stack_pool(*known)
    if pool.servers <= 0:
        return None, pool.words
    # its CPU per request at the first calm level: fewer cores than the pool cap it
    calm = [st for st in steps if st.enough and st.level <= pool.servers and st.rps > 0]
    cpu_us = cores = None
    if calm and calm[0].cpu_percent and calm[0].cpu_capacity:
        cpu_us = calm[0].cpu_percent / 100 / calm[0].rps * 1e6
        cores = max(1, round(calm[0].cpu_capacity / 100))
    pred = predict_knee(pool, steps, cpu_us_per_request=cpu_us, cores=cores)
    if pred is None:
        return None, f"{pool.words}: knee predicted once the first level is measured"
    return pred, pred.sentence()


def pane_why(s: SessionState, mid: str, judgment: Judgment | None) -> dict[str, Any]:
    """The pane's cause line (broken only) and its knee line."""
    steps = s.levels.results(mid)
    knee, knee_text = knee_of(s, mid, steps)
    cause = kind = ""
    ev = s.core.evidence
    if judgment is not None and judgment.broken:
        level = ev.capturing(mid)
        found = ev.nearest(mid, judgment.level)
        if found is not None:
            cause, kind = "why: " + cause_line(found), found.cause.kind.value
        elif level is not None:
            cause = f"why: capturing evidence at {_level(s, level)}…"
        elif mid in ev.failed:
            cause = ev.failed[mid]
        if knee is not None:
            bp = s.levels.breaking_point(mid)
            miss = _miss(s, knee, bp, steps)
            if miss:
                knee_text = f"{miss} (w: the evidence)"
    return {"cause": cause, "cause_kind": kind, "knee": knee, "knee_text": knee_text}


def summary_why(
    s: SessionState, mid: str, steps: Sequence[StepResult], breaking: LevelVerdict | None
) -> dict[str, Any]:
    """The summary's clauses: the cause at its breaking level, and the knee (words, and
    the point the level chart marks)."""
    found = s.core.evidence.nearest(mid, breaking.level) if breaking is not None else None
    knee, words = knee_of(s, mid, steps)
    point = None
    if knee is not None:
        miss = _miss(s, knee, breaking, steps) if breaking is not None else ""
        words = f"predicted: {knee.sentence()}" + (f"; {miss}" if miss else "")
        point = (knee.rate if s.rate is not None else knee.concurrency, knee.rate)
    cause = cause_line(found) if found is not None else ""
    return {"cause": cause, "knee": words, "knee_point": point}


def _miss(
    s: SessionState, knee: KneePrediction, bp: LevelVerdict | None, steps: Sequence[StepResult]
) -> str:
    if bp is None:
        return ""
    below = max((st.level for st in steps if st.level < bp.level), default=None)
    peak = max((st.rps for st in steps if st.enough), default=None)
    return knee_miss(
        knee, broke_at=bp.level, below=below, peak_rps=peak, rate_mode=s.rate is not None
    )


def _level(s: SessionState, level: int) -> str:
    return f"{level:,} req/s" if s.rate is not None else f"c={level:,}"


def evidence_text(s: SessionState, mid: str) -> list[str]:
    """What `w` shows of one member: its latest window's figures, or what is going on."""
    ev = s.core.evidence
    found = ev.latest(mid)
    lines = evidence_lines(found) if found is not None else []
    level = ev.capturing(mid)
    if level is not None:
        lines.insert(0, f"capturing evidence at {_level(s, level)} ({ev.seconds:g} s)…")
    elif mid in ev.failed:
        lines.insert(0, ev.failed[mid])
    if not lines:
        m = s.core.members.get(mid)
        if m is None or ev.facts(m) is None:
            lines = ["no evidence: nothing of this server can be looked at here (a model's or "
                     "a replay's member, or a server on another host)"]  # fmt: skip
        else:
            lines = ["no evidence yet: it has not broken (w captures one now)"]
    return lines


def capture_now(s: SessionState, mid: str) -> bool:
    """`w` on a stack with no window: capture one at the level running now."""
    m = s.core.members.get(mid)
    if m is None or s.stopping:
        return False
    return s.core.evidence.want(m, s.level)


def flame_of(s: SessionState, mid: str) -> tuple[str, str] | None:
    """`e` on the evidence: the latest window's flame graph, (file name, SVG); None
    when there is no window or it holds no samples."""
    found = s.core.evidence.latest(mid)
    if found is None or not found.window.collapsed:
        return None
    w = found.window
    title = f"{w.stack} at level {w.level:,}: {found.cause.kind.value}"
    return f"flame-{slug(w.stack)}-{w.level}.svg", flame_svg(w.collapsed, title)
