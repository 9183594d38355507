"""The race core: stacks up, sampled, loaded by the engine — what the app and bench drive.

    core = RaceCore(engine, source, settings)
    await core.start(["uvicorn", "gunicorn-sync"], urls=[], placement=placement)
    await core.poll()                        # ~4x/s: readiness, targets, resources
    await core.set_concurrency(200)          # every attached stack at once, live
    core.target("uvicorn")                   # the engine's latest TargetSnapshot
    await core.stop()

Bench is the core driven by a plan (race/bench/driver.py; its levels, race/bench/protocol.py); the
app's `Session` is the core driven by the user (race/live/session.py). Each member is a stack
stackrace launched, or a URL it did not: both are a `MemberHandle` (race/core/members.py),
and both get an engine target of their own once they are ready (per-target engine
processes, placed by `placement.py`). Time and waits are the core's clock's
(race/core/clock.py): real, or the synthetic engine's steps.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from stackrace.engine.model import BodyCheck, TargetSnapshot, TargetSpec
from stackrace.race.core import streams
from stackrace.race.core.clock import RaceClock, RealClock
from stackrace.race.core.evidence_keeper import EvidenceKeeper
from stackrace.race.core.members import (
    LoadEngine,
    Member,
    MemberHandle,
    StackSource,
)
from stackrace.race.core.placement import CorePlacement
from stackrace.race.core.state import StackState
from stackrace.race.core.urls import target_url
from stackrace.rules import cores
from stackrace.settings.race_settings import RaceSettings
from stackrace.settings.scenario import RequestKind, target_spec
from stackrace.settings.workloads import WORKLOADS
from stackrace.stacks.listen import exposure_line, listen_states
from stackrace.stacks.sampler import ResourceSample

SAMPLE_EVERY = 1.0  # seconds between resource samples of one member (smaps reads cost)
SIGNS_EVERY = 1.0  # seconds between looks at the members' sockets and logs


@dataclass
class RaceCore:
    engine: LoadEngine
    source: StackSource | None
    settings: RaceSettings = field(default_factory=RaceSettings)
    # time and waits for every driver of this race (race/core/clock.py): real on a real
    # race, the engine's steps on the synthetic one
    clock: RaceClock = field(default_factory=RealClock)
    sample_every: float = SAMPLE_EVERY
    signs_every: float = SIGNS_EVERY
    interval: float = 0.25  # the engine's report interval
    members: dict[str, Member] = field(default_factory=dict)
    placement: CorePlacement | None = None
    concurrency: int = 10
    rate: float | None = None
    errors: list[str] = field(default_factory=list)
    # members that become ready are not loaded while this is set (a ramp's clean start)
    hold_attach: bool = False
    # the requests every member is sent when the front end decided them itself (`load`'s
    # URLs, shaped by -m, -H, --body); None: the settings' own (--path, --scenario),
    # else the workload's path
    requests: list[RequestKind] | None = None
    # an answer whose body is not exactly this fails (`load --expect-body`); None: the
    # workload's check on a stack's own app, none on your requests
    expect_body: str | None = None
    # closed loop: the requests each member is sent in all, from its first (`load -n`,
    # as ab -n); set with the target, so not one more goes out. None: no limit
    budget: int | None = None
    # evidence windows started at breaking points, kept by level (race/core/evidence_keeper.py)
    evidence: EvidenceKeeper = field(default_factory=EvidenceKeeper)
    _engine_started: bool = False
    _cores: int = 1
    _kinds: list[RequestKind] | None = None
    _signs_at: float = float("-inf")

    def __post_init__(self) -> None:
        # rate mode comes with the settings (`--rate`) unless the front end set its own:
        # `set_level` then sends req/s from the first level, and a member attaches with
        # the rate's connections, never with the rate's figure taken as connections
        if self.rate is None and self.settings.rate is not None:
            self.rate = self.settings.rate

    # --- lifecycle ------------------------------------------------------------------

    async def start(
        self,
        stack_ids: Sequence[str],
        urls: Sequence[MemberHandle] = (),
        placement: CorePlacement | None = None,
    ) -> None:
        """Start the engine, every stack (in the background) and the URL targets."""

        self.placement = placement
        self._cores = len(os.sched_getaffinity(0))
        if WORKLOADS[self.settings.workload].needs_db and self.source is not None:
            await self.source.start_database()
        if not self._engine_started:
            await self.engine.start()
            self._engine_started = True
        for handle in urls:
            self.add_member(handle)
        for i, stack_id in enumerate(stack_ids):
            self.launch(stack_id, i)

    def _engine_cpus(self) -> list[int] | None:
        return self.placement.engine_cpus if self.placement else None

    def add_member(self, handle: MemberHandle, stack_cpus: list[int] | None = None) -> Member:
        """A server started elsewhere (bench starts resolved stacks itself, a --url
        server is nobody's to start) joins the race: loaded once ready, by the engine
        processes the placement gives the engines."""
        member = Member(handle, stack_cpus=stack_cpus, engine_cpus=self._engine_cpus())
        self.members[handle.id] = member
        return member

    def launch(self, stack_id: str, index: int = 0) -> Member | None:
        """Start one stack in the background, on the cores the placement gives it."""
        if self.source is None:
            self.errors.append(f"{stack_id}: no stacks file: only --url targets can be loaded")
            return None
        cpus = None
        if self.placement is not None and index < len(self.placement.stack_cpus):
            cpus = self.placement.stack_cpus[index]
        try:
            handle = self.source.start(stack_id, cpus)
        except Exception as exc:  # a stack that cannot start must not stop the race
            self.errors.append(f"{stack_id}: {exc}")
            return None
        return self.add_member(handle, cpus)

    async def stop_member(self, member_id: str) -> None:
        m = self.members.get(member_id)
        if m is None:
            return
        await self._detach(m)
        await m.handle.stop()

    async def attach(self, member_id: str) -> bool:
        """Load one ready member (`hold_attach` keeps poll() from it): attached now?"""
        m = self.members[member_id]
        if not m.attached and m.refused is None:
            m.baseline = m.baseline or m.resources
            await self._attach(m)
        return m.attached

    async def detach(self, member_id: str) -> None:
        """Stop loading one member: its engine target goes, with its connections."""
        m = self.members.get(member_id)
        if m is not None:
            await self._detach(m)

    async def restart(self, member_id: str) -> None:
        """Stop a stack and start it again on the same cores (a clean start); it is
        loaded again once ready, unless `hold_attach`."""
        m = self.members.get(member_id)
        if m is None or m.handle.external or self.source is None:
            return
        await self._detach(m)
        with contextlib.suppress(Exception):
            await m.handle.stop()
        try:
            handle = self.source.start(member_id, m.stack_cpus)
        except Exception as exc:  # it started once: say why it does not now
            self.errors.append(f"{member_id}: {exc}")
            return
        self.members[member_id] = Member(handle, stack_cpus=m.stack_cpus, engine_cpus=m.engine_cpus)

    async def stop(self) -> None:
        """Stop the evidence captures, the engine and every stack. Each step runs
        whatever the one before it ran into (an error in a capture's close once left
        eight stacks and their engine loading for the rest of a test run); an
        error is raised only once every stack is stopped."""
        try:
            await self.evidence.close()  # no sampler outlives the race
        finally:
            try:
                if self._engine_started:
                    await self.engine.stop()
                    self._engine_started = False
            finally:
                await self._stop_members()

    async def _stop_members(self) -> None:
        async def stop(m: Member) -> None:
            with contextlib.suppress(Exception):
                await m.handle.stop()

        # every stack at once: a stack's grace period (gevent's worker takes a second)
        # does not hold up the others, and quitting eight stacks takes as long as one
        await asyncio.gather(*(stop(m) for m in self.members.values()))
        if self.source is not None:
            await self.source.close()

    # --- each tick ------------------------------------------------------------------

    async def poll(self) -> None:
        """Attach members that became ready, detach crashed ones, sample resources."""
        now = self.clock()
        for m in list(self.members.values()):
            state = m.handle.state
            if state in (StackState.READY, StackState.WARMING):
                if now - m.sampled_at >= self.sample_every or m.resources is None:
                    self._sample(m, now)
                if not m.attached and m.refused is None and not self.hold_attach:
                    if m.baseline is None:
                        m.baseline = m.resources
                    await self._attach(m)
            elif (
                m.attached
                and state in (StackState.CRASHED, StackState.STOPPED)
                and not m.handle.external
            ):
                await self._detach(m)
        if now - self._signs_at >= self.signs_every:
            self._signs_at = now
            await self._gather_signs(now)

    async def _gather_signs(self, now: float) -> None:
        """Each running member's signs (stacks/signs.py). The kernel's view of the
        ports comes from one dump of the machine's sockets, off the event loop, and
        only for members with something to explain (clients stuck in connect, waiting
        with no answer, timeouts): the dump walks every socket the kernel holds, ~1 ms
        on a quiet machine but ~30 ms on one holding 30,000 (bench/listen_cost.py)."""

        running = [
            m
            for m in self.members.values()
            if m.handle.state in (StackState.READY, StackState.WARMING)
        ]
        ports = {m.id: m.handle.listen_port if self._troubled(m) else None for m in running}
        wanted = sorted({p for p in ports.values() if p})
        states = {}
        if wanted:
            try:
                states = await asyncio.to_thread(listen_states, wanted)
            except OSError:
                states = {}
        for m in running:
            port = ports[m.id]
            try:
                m.signs = m.handle.signs(now, states.get(port) if port else None)
            except OSError:
                m.signs = None

    def _troubled(self, m: Member) -> bool:
        t = self.target(m.id)
        if t is None:
            return False
        w = t.interval
        stalled = w.requests == 0 and w.waiting > 0
        # requests wait while its core is busy: whose queue it is, the server's accept
        # queue says (rules/level.py `held_at_the_door`)
        r = m.resources
        busy = r is not None and r.cpu_wait_percent >= 100.0 * cores.SHARE_WAIT and w.waiting > 1
        return bool(w.connecting or stalled or w.failures.get("timeout") or busy)

    async def accept_queues(self, member_ids: list[str]) -> dict[str, int]:
        """The connections each member's accept queue holds now (the kernel's view of
        its port, one dump of the machine's sockets, off the event loop); members not on
        this host or without a known port are left out."""
        ports = {i: self.members[i].handle.listen_port for i in member_ids if i in self.members}
        wanted = sorted({p for p in ports.values() if p})
        if not wanted:
            return {}
        try:
            states = await asyncio.to_thread(listen_states, wanted)
        except OSError:
            return {}
        return {
            i: states[p].accept_queue
            for i, p in ports.items()
            if p and p in states and states[p].listening
        }

    def _sample(self, m: Member, now: float) -> None:
        s = m.handle.sample()
        m.sampled_at = now
        if s is not None:
            m.resources = s
            m.mem_peak = max(m.mem_peak, s.rss)
        for address in m.handle.exposed():
            if address not in m.exposed:  # said once, on screen (the status line)
                m.exposed.append(address)
                self.errors.append(exposure_line(m.handle.name, address))

    def sample_now(self, member_id: str) -> ResourceSample | None:
        """A fresh sample (a level's start or end needs one, whatever the rhythm)."""
        m = self.members[member_id]
        self._sample(m, self.clock())
        return m.resources

    def request_kinds(self) -> list[RequestKind] | None:
        """The front end's requests, else yours (--path, --scenario, read once per race);
        None: the workload's."""
        if self.requests is not None:
            return self.requests
        if self._kinds is None and self.settings.own_requests:
            self._kinds = self.settings.request_kinds()
        return self._kinds

    def spec(self, m: Member) -> TargetSpec:
        """What the engine sends this member: your requests (one, or a weighted mix
        counted per kind: engine/mix.py) or the workload's path, with the race's
        connections, rate, keep-alive, TLS and slow clients, the same for every front end."""
        s = self.settings
        kinds = self.request_kinds()
        rate_mode = self.rate is not None
        conns = s.rate_connections if rate_mode else self.concurrency
        if kinds:
            # your app's answers: no body check but the one asked for
            spec = target_spec(
                m.id, m.handle.base_url, kinds, concurrency=conns, rate=self.rate,
                keepalive=s.keepalive,
            )  # fmt: skip
            check = None
        else:
            url = url_for(m.handle.base_url, s)
            own_app = not m.handle.external or url != m.handle.base_url
            spec = TargetSpec(
                id=m.id, url=url, concurrency=conns, rate=self.rate, keepalive=s.keepalive
            )
            # a URL given with its own path is not necessarily one of our apps: no check
            check = WORKLOADS[s.workload].check(s.queries) if own_app else None
        if self.expect_body is not None:
            check = BodyCheck(kind="exact", arg=self.expect_body)
        spec.check = check
        # https: a stack stackrace made TLS for is verified against its own
        # certificate; a --url target as the settings say
        spec.tls_verify = s.tls_verify or m.handle.cacert is not None
        spec.cacert = m.handle.cacert or s.cacert
        spec.tls_resume = s.tls_resume
        spec.clients = s.client_profile
        spec.slow_share = s.slow_share
        spec.budget = self.budget if not rate_mode else None
        # an h2 variant (`hypercorn:http=2`), or every member with --http2 (a --url
        # target, `load`): the same requests in flight as streams (race/core/streams.py;
        # the URL's scheme says h2 by ALPN or h2c, engine/h2.py)
        http = m.handle.http
        if s.http2 and not streams.is_h2(http):
            http = "2"
        return streams.with_protocol(spec, http, s.streams)

    async def _attach(self, m: Member) -> None:
        try:
            spec = self.spec(m)
        except RuntimeError as exc:  # an h2 member and an engine without HTTP/2
            m.refused = str(exc)
            self.errors.append(f"{m.handle.name}: {exc}")
            return
        m.url = spec.url
        m.check = spec.check
        try:
            await self.engine.add_target(spec, cpus=m.engine_cpus)
        except Exception as exc:  # refused by the engine: show why, keep the others going
            m.refused = str(exc)
            self.errors.append(f"{m.handle.name}: {exc}")
            return
        m.attached = True

    async def _detach(self, m: Member) -> None:
        if m.attached:
            with contextlib.suppress(Exception):
                await self.engine.remove_target(m.id)
            m.attached = False

    async def wait_ready(self, ids: Sequence[str], timeout: float = 120.0) -> None:
        """Poll until each member is ready and attached, or has failed (bench)."""
        end = self.clock() + timeout
        while self.clock() < end:
            await self.poll()
            # "attached", not "no longer starting": a member can become ready while poll()
            # awaits another's attach, and would be left out of the race unattached
            pending = [
                i
                for i in ids
                if i in self.members
                and not self.members[i].attached
                and self.members[i].refused is None
                and self.members[i].handle.state not in (StackState.CRASHED, StackState.STOPPED)
            ]
            if not pending:
                return
            await self.clock.sleep(0.05)

    # --- commands -------------------------------------------------------------------

    def attached(self, ids: Sequence[str] | None = None) -> list[str]:
        return [i for i, m in self.members.items() if m.attached and (ids is None or i in ids)]

    async def set_level(self, level: float, ids: Sequence[str] | None = None) -> None:
        """The level a user, a ramp or a plan sets, in the race's own unit: req/s per
        member in rate mode, connections per member otherwise. The one place that
        decides which (the app's slider, bench's levels and the ramp all come here)."""
        if self.rate is not None:
            await self.set_rate(float(level), ids)
        else:
            await self.set_concurrency(round(level), ids)

    async def set_concurrency(self, n: int, ids: Sequence[str] | None = None) -> None:
        """Connections per member (closed loop); members attached later get it too."""
        self.concurrency = n
        for i in self.attached(ids):
            await self.engine.set_concurrency(self.connections(i, n), i)

    async def set_rate(self, rate: float | None, ids: Sequence[str] | None = None) -> None:
        """Constant rate per member in req/s, or None for closed loop."""
        was_closed = self.rate is None
        self.rate = rate
        for i in self.attached(ids):
            if rate is not None and was_closed:
                await self.engine.set_concurrency(
                    self.connections(i, self.settings.rate_connections), i
                )
            await self.engine.set_rate(rate, i)
            if rate is None:
                await self.engine.set_concurrency(self.connections(i, self.concurrency), i)

    def level_of(self, t: TargetSnapshot) -> int:
        """A target's level as the race counts it: the requests in flight it was asked
        (an h2 member's connections × its streams per connection), or its rate."""
        m = self.members.get(t.id)
        if t.rate or m is None or not streams.is_h2(m.handle.http):
            return t.level
        return t.concurrency * streams.split(t.concurrency, self.settings.streams, "2")[1]

    def connections(self, member_id: str, level: int) -> int:
        """The connections that carry `level` requests in flight for this member: the
        level itself over HTTP/1.1, level / --streams over h2 (race/core/streams.py)."""
        m = self.members.get(member_id)
        http = m.handle.http if m is not None else streams.H1
        return streams.split(level, self.settings.streams, http)[0]

    async def set_budget(self, n: int | None, ids: Sequence[str] | None = None) -> None:
        for i in self.attached(ids):
            await self.engine.set_budget(n, i)

    def reset_totals(self, warmup: float = 0.0, ids: Sequence[str] | None = None) -> None:
        """A new level: the engine's running totals restart; CPU is counted from here."""
        if ids is None:
            self.engine.reset_totals(warmup)
        else:
            for i in self.attached(ids):
                self.engine.reset_totals(warmup, i)
        for i in self.attached(ids):
            self.members[i].level_mark = self.sample_now(i)

    async def next_interval(self, timeout: float = 5.0) -> bool:
        """Wait for the engine's next snapshot (a fresh interval boundary: totals reset
        now start on one); False when none came within `timeout`."""
        engine = self.engine
        seen = engine.latest.seq if engine.latest else -1
        end = self.clock() + timeout
        while self.clock() < end:
            await self.clock.sleep(0.01)
            if engine.latest is not None and engine.latest.seq != seen:
                return True
        return False

    # --- reading --------------------------------------------------------------------

    def host_lost(self) -> str:
        """See StackSource.host_lost."""
        return self.source.host_lost() if self.source is not None else ""

    def target(self, member_id: str) -> TargetSnapshot | None:
        snap = self.engine.latest
        m = self.members.get(member_id)
        if snap is None or m is None or not m.attached:
            return None
        return snap.target(member_id)

    def capacity(self, member_id: str) -> float:
        """The most CPU (% of one core) a member can use: its cores, at most one per
        process (a one-process server cannot use two cores)."""
        m = self.members[member_id]
        cores = len(m.stack_cpus) if m.stack_cpus else self._cores
        procs = m.resources.processes if m.resources is not None else cores
        return 100.0 * max(1, min(cores, procs))

    def cpu_per_request_us(self, member_id: str, answered: int) -> float | None:
        """The stack's CPU time per answered request since the level began (µs)."""
        m = self.members[member_id]
        if m.level_mark is None or m.resources is None or answered <= 0:
            return None
        used = m.resources.cpu_seconds - m.level_mark.cpu_seconds
        return 1e6 * used / answered if used > 0 else None


def url_for(base: str, settings: RaceSettings) -> str:
    return target_url(base, settings.workload, settings.io_ms, settings.queries)
