"""What `bench` and the app get from a cluster run: the race core's parts, placed on the
cluster's nodes (race.core.RaceParts): per-target engines on the load nodes, the stacks
on the app node. These are the only seams the front ends have with this package.
"""

from __future__ import annotations

from stackrace.cluster.app_role import ClusterStackSource
from stackrace.cluster.run import ClusterRun
from stackrace.engine.model import EngineSettings
from stackrace.race.core.members import LoadEngine, RaceParts
from stackrace.race.core.stack_source import DEFAULT_STACKS
from stackrace.stacks.definition import StackDef


def _parts(run: ClusterRun, source: ClusterStackSource) -> RaceParts:
    run.app_host()  # placed now: the app node's cores are planned before anything starts
    assert run.app_info is not None
    loads = ", ".join(sorted({s.node.address for s in run.slots}))

    def engine(settings: EngineSettings) -> LoadEngine:
        return run.engine(settings, per_target=True)

    note = (
        f"cluster: {len(run.slots)} engine process(es) per stack on {loads}; "
        f"stacks on {run.app_node.address}, listening on {run.bind_host}"
    )
    if run.app_info.nice > 0:
        note += (
            f" (at niceness {run.app_info.nice}, Ray's worker niceness: start the app "
            "node with RAY_worker_niceness=0)"
        )
    return RaceParts(engine=engine, source=source, cores=list(run.app_info.cores), note=note)


def bench_parts(run: ClusterRun) -> RaceParts:
    """bench --cluster: stacks start from the plan's resolved stacks (no file needed)."""
    return _parts(run, ClusterStackSource(run, {}))


def app_parts(run: ClusterRun, defs: dict[str, StackDef]) -> RaceParts:
    """stackrace --cluster: the picker offers what the app node can start."""
    return _parts(run, ClusterStackSource(run, defs, DEFAULT_STACKS))
