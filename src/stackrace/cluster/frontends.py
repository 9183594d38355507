"""What `bench` and the app get from a cluster run: the engine and the launcher they
already drive, placed on the cluster's nodes. These are the only seams the front ends
have with this package (commands/bench.py, commands/app.py), kept thin on purpose: the
race core they drive is being reshaped, and re-wiring it means changing these two
functions, not the cluster.
"""

from __future__ import annotations

from typing import Any

from stackrace.cluster.app_role import ClusterStacksLauncher, RemoteLauncher, RemoteSampler
from stackrace.cluster.load_role import ClusterEngine
from stackrace.cluster.run import ClusterRun
from stackrace.config import StackDef
from stackrace.engine.model import EngineSettings


class _PlacedLauncher:
    """`async with` gives the RemoteLauncher, as `async with Launcher()` gives a Launcher."""

    def __init__(self, run: ClusterRun, env: dict[str, str]) -> None:
        self.run = run
        self.env = env
        self.launcher: RemoteLauncher | None = None

    async def __aenter__(self) -> RemoteLauncher:
        self.launcher = await self.run.launcher(self.env)
        return self.launcher

    async def __aexit__(self, *exc: object) -> None:
        if self.launcher is not None:
            await self.launcher.stop_all()
            self.launcher.close()


class ClusterBenchBackend:
    """benchrun.BenchBackend: stacks on the app node, each target's engine processes on
    the load nodes (one per load slot, per target, as a local race has its own per
    target)."""

    def __init__(self, run: ClusterRun) -> None:
        self.run = run
        run.app_host()  # placed now: bench plans the app node's cores before it starts
        assert run.app_info is not None
        self.cores = list(run.app_info.cores)

    def describe(self) -> str:
        loads = ", ".join(sorted({s.node.address for s in self.run.slots}))
        return (
            f"cluster: {len(self.run.slots)} engine process(es) per stack on {loads}; "
            f"stacks on {self.run.app_node.address}, listening on {self.run.bind_host}"
        )

    def launcher(self, env: dict[str, str]) -> _PlacedLauncher:
        return _PlacedLauncher(self.run, env)

    def engine(self, settings: EngineSettings) -> ClusterEngine:
        return self.run.engine(settings, per_target=True)

    def sampler(self, rs: Any) -> RemoteSampler:
        return RemoteSampler(self.run.app_host(), rs.name)


def app_parts(
    run: ClusterRun, defs: dict[str, StackDef], defaults: tuple[str, ...] = ()
) -> tuple[ClusterEngine, ClusterStacksLauncher]:
    """The app's engine and launcher (session.LoadEngine, session.Launcher) on the
    cluster: the panes' figures and resources come from the nodes."""

    async def start_db() -> None:
        await run.database_env()

    remote = RemoteLauncher(run.app_host(), sample_in_status=True)
    launcher = ClusterStacksLauncher(defs, remote, start_db=start_db, defaults=defaults)
    return run.engine(EngineSettings(interval=0.25), per_target=True), launcher
