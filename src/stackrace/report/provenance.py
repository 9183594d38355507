"""What a saved run records about where it came from, and reading it back (`--from`).

A run file names its stacks, but a name means whatever the stacks file says today: the
file may have changed, or not be on the machine that runs it again. So a run records
the stacks file (path and sha256), the blocks of it that its stacks use as written, and
each stack's command line as resolved here (for a reader: the real argv, the variant's
overrides filled in).

`stackrace bench --from RUN.json` never runs what the file says to run: a run file is
data that travels (a colleague's, an attachment, a CI artifact), and an edited one
could name any command while its recorded checksum still matched. It takes the run's
settings and stack *names* from the file and resolves the names in the stacks file in
use, as any bench does; `definition_changes` compares the blocks it recorded with the
blocks used now, and a difference in what runs (command, processes, files, params…)
refuses the rerun unless the user accepts it (`--accept-definition-changes`). A change
of title or description alone is only noted.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from stackrace.report.schema import BenchRun, Provenance, StackRecipe
from stackrace.stacks.catalogue import StackFile
from stackrace.stacks.definition import Stack
from stackrace.stacks.placeholders import placeholders, render
from stackrace.stacks.validate import stack_defs


def recipe(stack: Stack) -> StackRecipe:
    """The stack's command line as it starts here, with what changes per start kept as
    placeholders."""
    values = placeholders(stack, 0, Path("{run_dir}"))
    values["port"] = "{port}"
    if stack.upstream is not None:
        values["upstream_port"] = "{upstream_port}"
    if stack.spec.status is not None:
        values["status_port"] = "{status_port}"
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


# keys of a stack block that only describe it: a change there does not change what runs
_DESCRIPTIVE = frozenset({"title", "description", "language", "family"})


def definition_changes(run: BenchRun, stacks: StackFile) -> tuple[list[str], list[str]]:
    """How the blocks the run recorded differ from those in `stacks`: (lines about what
    runs, lines about descriptions only). A block the run recorded that `stacks` lacks
    is left to resolving its name, which says so."""
    p = run.provenance
    if p is None:
        return [], []
    runs: list[str] = []
    described: list[str] = []
    for name, then in p.definitions.items():
        now = stacks.get(name)
        if now is None:
            continue
        was, is_ = msgspec.to_builtins(then), msgspec.to_builtins(now)
        keys = sorted(k for k in set(was) | set(is_) if was.get(k) != is_.get(k))
        if not keys:
            continue
        active = [k for k in keys if k not in _DESCRIPTIVE]
        target = runs if active else described
        target.append(f"stack '{name}': {', '.join(active or keys)}")
    return runs, described


def recorded_stacks(run: BenchRun, run_path: str) -> StackFile | None:
    """The stack blocks a run recorded, checked as a stacks file is (None: the run
    records none): for reading and comparing only, never for starting a stack."""
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
