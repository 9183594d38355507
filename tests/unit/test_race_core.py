"""The race core and the app's session without a UI, and where a race's processes run."""

from __future__ import annotations

import pytest

from stackrace.race.core.core import RaceCore
from stackrace.race.core.evidence_keeper import EvidenceKeeper
from stackrace.race.core.placement import choose_isolation, place
from stackrace.race.core.plan import RacePlan
from stackrace.race.core.state import StackState
from stackrace.race.live.demo import DemoSource, SyntheticEngine
from stackrace.race.live.session import Session
from stackrace.settings.race_settings import RaceSettings


def demo_core() -> tuple[RaceCore, SyntheticEngine]:
    engine = SyntheticEngine()
    return RaceCore(engine, DemoSource(engine), clock=engine.clock, sample_every=0.0), engine


async def test_members_attach_when_ready_and_detach_when_they_crash():
    core, engine = demo_core()
    await core.start(["uvicorn", "bjoern"], placement=place("parallel", 2, None, [0, 1]))
    assert set(core.members) == {"uvicorn", "bjoern"}
    await core.poll()
    assert core.attached() == []  # still starting
    for _ in range(6):
        engine.step()
        await core.poll()
    assert set(core.attached()) == {"uvicorn", "bjoern"}
    assert set(engine.targets) == {"uvicorn", "bjoern"}
    for _ in range(40):  # the synthetic bjoern crashes after 40 steps
        engine.step()
        await core.poll()
    assert core.members["bjoern"].handle.state == StackState.CRASHED
    assert core.attached() == ["uvicorn"] and "bjoern" not in engine.targets
    await core.stop()
    assert not engine.started


class _BrokenKeeper(EvidenceKeeper):
    async def close(self) -> None:
        raise RuntimeError("dictionary changed size during iteration")


async def test_a_stop_whose_first_step_fails_still_stops_the_engine_and_every_stack():
    """The evidence keeper's close raised once (a capture asked while the race stopped)
    and core.stop() ended there: the engine and eight stacks went on loading for the
    rest of the test run. Every step runs now; the error still reaches the caller."""
    core, engine = demo_core()
    core.evidence = _BrokenKeeper()
    await core.start(["uvicorn", "bjoern"])
    for _ in range(6):
        engine.step()
        await core.poll()
    assert engine.started and set(core.attached()) == {"uvicorn", "bjoern"}
    with pytest.raises(RuntimeError, match="changed size"):
        await core.stop()
    assert not engine.started
    assert all(m.handle.stopped for m in core.members.values())


async def test_one_level_for_every_member_including_those_attached_later():
    core, engine = demo_core()
    await core.start(["go-nethttp", "aiohttp"])  # go starts in 1 step, aiohttp in 6
    engine.step()
    await core.poll()
    await core.set_concurrency(50)
    for _ in range(8):
        engine.step()
        await core.poll()
    assert {t.concurrency for t in engine.targets.values()} == {50}


async def test_settings_shape_every_target():
    engine = SyntheticEngine()
    settings = RaceSettings(workload="db", queries=3, keepalive=False)
    core = RaceCore(engine, DemoSource(engine), settings, clock=engine.clock)
    await core.start(["uvicorn"])
    for _ in range(5):
        engine.step()
        await core.poll()
    spec = engine.targets["uvicorn"].spec
    assert spec.url.endswith("/db?queries=3") and spec.keepalive is False
    assert spec.check is not None and spec.check.kind == "float_range"


async def test_session_verdicts_and_a_ramp_from_a_clean_state():
    engine = SyntheticEngine()
    session = Session(RaceCore(engine, DemoSource(engine), clock=engine.clock, sample_every=0))
    await session.start(
        RacePlan(stacks=("gunicorn-sync", "uvicorn"), settings=RaceSettings(workload="io"))
    )
    for _ in range(8):
        engine.step()
        await session.poll()
    await session.set_level(1000)  # exploring: sync is swamped
    for _ in range(12):
        engine.step()
        await session.poll()
    view = session.view()
    sync = next(p for p in view.panes if p.id == "gunicorn-sync")
    assert sync.verdict is not None and sync.verdict.level == 1000
    assert sync.target is not None and sync.target.interval.waiting > 100
    # a ramp forgets the exploration and starts from 1, once every stack is idle
    session.start_ramp(top=100, dwell=2.0)
    for _ in range(20):
        engine.step()
        await session.poll()
        if session.ramp is not None:
            break
    assert session.ramp is not None and session.levels.steps == {}
    for _ in range(60):
        engine.step()
        view = await session.poll()
    assert session.ramp is None and view.ramp_done
    first = session.ramp_breaking["gunicorn-sync"]
    assert first is not None and first.level <= 10, first
    assert session.ramp_breaking["uvicorn"] is None or session.ramp_breaking["uvicorn"].level > 10
    assert session.level == 1000  # back where it was


async def test_rate_mode_has_its_own_history():
    engine = SyntheticEngine()
    session = Session(RaceCore(engine, DemoSource(engine), clock=engine.clock, sample_every=0))
    await session.start(RacePlan(stacks=("uvicorn",), settings=RaceSettings(workload="io")))
    for _ in range(12):
        engine.step()
        await session.poll()
    assert session.levels.results("uvicorn")
    await session.set_rate(100.0)
    assert session.levels.steps == {}  # closed-loop levels never judge a rate


@pytest.mark.parametrize(
    ("cores", "stacks", "shared", "engine"),
    [
        ([0, 1], 4, True, [1]),  # this machine: four stacks share core 0
        (list(range(8)), 4, False, [7]),  # enough: a core each, the engines on the last
        ([0], 2, True, None),  # one core: nothing pinned
    ],
)
def test_placement(cores, stacks, shared, engine):
    p = place("parallel", stacks, None, cores)
    assert p.shared is shared and p.engine_cpus == engine
    assert len(p.stack_cpus) == stacks
    if not shared:
        assert len({tuple(c) for c in p.stack_cpus if c}) == stacks  # no two share
    if engine:
        assert all(engine[0] not in (c or []) for c in p.stack_cpus)  # never with servers


def test_bench_auto_isolation_matches_what_the_cores_allow():
    assert choose_isolation("auto", 4, None, 2)[0] == "rotate"
    assert choose_isolation("auto", 2, 1, 4)[0] == "parallel"
    assert choose_isolation("parallel", 4, None, 2)[0] == "parallel"


class SlowAttachEngine(SyntheticEngine):
    """Adding a target takes time, as a cluster's engine does: other stacks' starts go
    on meanwhile (here: the engine's clock runs a few steps)."""

    async def add_target(self, spec, cpus=None, procs=None) -> None:
        for _ in range(8):
            self.step()
        await super().add_target(spec, cpus, procs)


async def test_wait_ready_attaches_a_member_that_became_ready_during_another_attach():
    # CI caught bench saying "did not start in time" of a stack that was ready: it
    # became ready while wait_ready's poll awaited the other stack's attach
    engine = SlowAttachEngine()
    core = RaceCore(engine, DemoSource(engine), clock=engine.clock, sample_every=0.0)
    # aiohttp first: poll() has looked at it (starting) before go's attach lets it start
    await core.start(["aiohttp", "go-nethttp"])  # go starts in 1 step, aiohttp in 6
    engine.step()
    await core.wait_ready(["aiohttp", "go-nethttp"], timeout=5)
    assert set(core.attached()) == {"go-nethttp", "aiohttp"}
    await core.stop()
