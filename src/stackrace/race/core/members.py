"""What the race core drives, declared: its members and the parts it is given.

- `MemberHandle`: one raced server, a stack stackrace launched or a URL it did not;
- `StackSource` / `StackStarter`: what starts stacks (stacks.toml and the launcher,
  race/core/stack_source.py; the demo's models, race/live/demo.py; a cluster's app host);
- `LoadEngine`: the part of the engine the core drives (the real one, engine/client.py;
  the synthetic one; a replay's);
- `RaceParts`: an engine, a source and a clock made elsewhere, for bench;
- `Member`: the core's record of one member (its handle, cores, samples, target).

Apart from the core (race/core/core.py) so that the core is the one thing its module does:
the race's lifecycle, ticks and commands.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from stackrace.engine.histogram import LatencyHistogram
from stackrace.engine.model import BodyCheck, EngineSettings, EngineSnapshot, TargetSpec
from stackrace.race.core.clock import RaceClock
from stackrace.race.core.state import StackState
from stackrace.stacks.definition import Stack
from stackrace.stacks.listen import ListenState
from stackrace.stacks.sampler import ResourceSample
from stackrace.stacks.signs import ServerSigns
from stackrace.stacks.tunables import Tunable

if TYPE_CHECKING:
    from stackrace.engine.aggregate import IntervalWatcher


@dataclass(frozen=True)
class StackChoice:
    """One stack the picker offers."""

    id: str
    name: str
    family: str
    available: bool = True
    reason: str = ""  # why it is not available
    default: bool = False
    description: str = ""
    workers: int = 1
    threads: int = 1
    # what a variant may change (stacks.tunables): the picker's keys for workers,
    # threads and every param of the stack
    tunables: tuple[Tunable, ...] = ()


class MemberHandle(Protocol):
    """One raced server, as the core sees it (read-only: a replay's members are
    properties over the recording)."""

    @property
    def id(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def family(self) -> str: ...
    @property
    def external(self) -> bool:
        """Not started by stackrace (a --url target)."""
        ...

    @property
    def state(self) -> StackState: ...
    @property
    def error(self) -> str | None:
        """Why it did not start or stopped (its first line is what bench reports), or
        None: no failure known."""
        ...

    @property
    def base_url(self) -> str: ...
    @property
    def cacert(self) -> str | None:
        """A PEM file to trust for its https:// URL (a TLS stack's own certificate), or
        None: the race settings decide (--cacert, --insecure, the system's CAs)."""
        ...

    @property
    def http(self) -> str:
        """The HTTP it serves, the stack's `http` variant: "1.1", "2" (h2 over TLS) or
        "h2c" (stacks.protocols); what the engine speaks to it follows."""
        ...

    def log_tail(self, lines: int = 20) -> list[str]: ...
    def sample(self) -> ResourceSample | None: ...
    async def stop(self) -> None: ...
    @property
    def listen_port(self) -> int | None:
        """The port its server listens on here, for the kernel's view of it (None: not
        on this host, or not known)."""
        ...

    def signs(self, now: float, listen: ListenState | None) -> ServerSigns | None:
        """What can be seen of it besides its answers (stacks/signs.py): `listen` is
        the kernel's view of `listen_port`, gathered for every member at once."""
        ...

    def exposed(self) -> list[str]:
        """Its own listening sockets bound beyond loopback ("0.0.0.0:8080"), as far as
        they can be seen from here; [] for what stackrace did not start."""
        ...


class StackSource(Protocol):
    """What starts stacks: stacks.toml and the launcher (race/core/stack_source.py), or the demo."""

    def catalog(self) -> list[StackChoice]: ...
    def start(self, stack_id: str, cpus: list[int] | None) -> MemberHandle: ...
    async def start_database(self) -> None: ...
    async def close(self) -> None: ...
    def database_state(self) -> str:
        """ "" while the database is fine or unused; otherwise one line saying what (the
        app marks every verdict as not judged meanwhile)."""
        ...

    def host_lost(self) -> str:
        """ "" while the stacks' host is there; else what happened to it (a cluster's app
        host gone: the race cannot go on, the front end ends it with this message)."""
        ...


class StackStarter(StackSource, Protocol):
    """A source that bench drives: it starts resolved stacks and takes the database's
    settings from the caller."""

    def start_stack(self, stack: Stack, cpus: list[int] | None) -> MemberHandle: ...
    def use_database(self, env: dict[str, str]) -> None: ...


class LoadEngine(Protocol):
    """The part of `stackrace.engine.client.Engine` the core drives."""

    latest: EngineSnapshot | None
    errors: list[str]
    # a model's figures (--demo, or a replay of one), not a measurement: the app says so
    synthetic: bool

    async def start(self) -> None: ...
    async def stop(self) -> EngineSnapshot | None: ...
    async def add_target(
        self, spec: TargetSpec, cpus: Sequence[int] | None = None, procs: int | None = None
    ) -> None: ...
    async def remove_target(self, target_id: str) -> None: ...
    async def set_concurrency(self, n: int, target_id: str | None = None) -> None: ...
    async def set_rate(self, rate: float | None, target_id: str | None = None) -> None: ...
    async def set_budget(self, n: int | None, target_id: str | None = None) -> None: ...
    def reset_totals(self, warmup: float = 0.0, target_id: str | None = None) -> None: ...
    def total_histogram(self, target_id: str, uncorrected: bool = False) -> LatencyHistogram: ...
    def total_percentiles(
        self, target_id: str, points: Sequence[float], uncorrected: bool = False
    ) -> list[int]: ...
    def watch_intervals(self, watcher: IntervalWatcher) -> None:
        """Have `watcher` called with every interval's snapshot and histograms (the run's
        series, race/core/series.py); an engine with no intervals of its own ignores it."""
        ...

    def engine_pids(self, target_id: str | None = None) -> list[int]:
        """Local pids of the engine's processes (none for a model, or on other hosts):
        what race/core/noise.py reads the engine's wait for a core from."""
        ...


@dataclass(frozen=True)
class RaceParts:
    """The engine and the stacks' source, made elsewhere: `--cluster` puts each stack's
    engine processes on load hosts and the stacks on an app host (stackrace.cluster)."""

    engine: Callable[[EngineSettings], LoadEngine]  # per-target engines, these settings
    source: StackStarter
    cores: list[int]  # the stacks' host's cores (the engines run elsewhere)
    note: str = ""  # where things run, for the progress line and the header
    # the race's time when it is not the wall's: the synthetic engine's steps
    # (race/live/demo.py synthetic_parts), so bench's levels run in a unit test
    clock: RaceClock | None = None


class StackHandle:
    """What every member started from a stack definition shares, here
    (race/core/stack_source.py) or on a cluster's app node (cluster/app_role.py): the
    names the race shows, from the stack, and the HTTP it serves. The rest of a
    MemberHandle is where and how it runs."""

    external = False

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.id = stack.name
        self.name = stack.title
        self.family = stack.spec.family

    @property
    def http(self) -> str:
        return self.stack.http


@dataclass
class Member:
    handle: MemberHandle
    stack_cpus: list[int] | None = None
    engine_cpus: list[int] | None = None
    attached: bool = False  # its engine target exists
    refused: str | None = None  # the engine would not load it: why
    url: str = ""
    check: BodyCheck | None = None
    baseline: ResourceSample | None = None  # before any load
    resources: ResourceSample | None = None
    mem_peak: int = 0
    sampled_at: float = 0.0
    level_mark: ResourceSample | None = None  # at the start of the current level
    signs: ServerSigns | None = None  # its accept queue, log lines, exits (once a second)
    exposed: list[str] = field(default_factory=list)  # its listeners beyond loopback

    @property
    def id(self) -> str:
        return self.handle.id
