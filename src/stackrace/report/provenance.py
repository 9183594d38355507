"""What a saved run records about where it came from, and reading it back (`--from`).

A run file names its stacks, but a name means whatever the stacks file says today: the
file may have changed, or not be on the machine that runs it again. So a run records
the stacks file (path and sha256), the blocks of it that its stacks use as written, and
each stack's command line as resolved here (for a reader: the real argv, the variant's
overrides filled in). `stackrace bench --from RUN.json` starts the recorded blocks, not
whatever the current file holds under those names: the run file alone reproduces it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec

from stackrace.config import Stack, StackFile, placeholders, render, stack_defs
from stackrace.report.schema import BenchRun, Provenance, StackRecipe


def recipe(stack: Stack) -> StackRecipe:
    """The stack's command line as it starts here, with what changes per start kept as
    placeholders."""
    values = placeholders(stack, 0, Path("{run_dir}"))
    values["port"] = "{port}"
    if stack.upstream is not None:
        values["upstream_port"] = "{upstream_port}"
    return StackRecipe(
        name=stack.name,
        block=stack.base,
        overrides=dict(stack.overrides),
        command=[render(a, values) for a in stack.spec.command],
        cwd=render(stack.spec.cwd, values),
        processes=[[render(a, values) for a in p.command] for p in stack.spec.processes],
        upstream=stack.upstream.name if stack.upstream is not None else None,
    )


def provenance(stacks: list[Stack], source: StackFile, rerun_of: str | None = None) -> Provenance:
    blocks = {}
    for s in stacks:
        for part in (s, s.upstream):
            if part is not None:
                blocks[part.base] = part.spec
    return Provenance(
        stacks_file=str(source.path or ""),
        stacks_sha256=source.sha256,
        stacks=[recipe(s) for s in stacks],
        definitions=blocks,
        rerun_of=rerun_of,
    )


def recorded_stacks(run: BenchRun, run_path: str) -> StackFile | None:
    """The stack blocks a run recorded, checked as a stacks file is (None: the run
    records none). The StackFile keeps the recorded file's path and hash, so a run made
    from it records the same origin."""
    p = run.provenance
    if p is None or not p.definitions:
        return None
    raw = {"stacks": msgspec.to_builtins(p.definitions)}
    where = Path(f"{run_path} (recorded stacks)")
    defs = stack_defs(raw, where)
    return StackFile(
        defs,
        str(where),
        Path(p.stacks_file) if p.stacks_file else None,
        f"recorded in {run_path}",
        p.stacks_sha256,
    )


def changed_since(run: BenchRun) -> str | None:
    """A note when the stacks file the run read is still there but no longer the same."""
    p = run.provenance
    if p is None or not p.stacks_file or not p.stacks_sha256:
        return None
    path = Path(p.stacks_file)
    try:
        now = hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None
    if now == p.stacks_sha256:
        return None
    return (
        f"{path} has changed since the run (sha256 {p.stacks_sha256[:12]}… then, "
        f"{now[:12]}… now): the run's own stack definitions are used"
    )
