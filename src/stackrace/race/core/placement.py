"""Where a race's processes run: cores for each stack and for each stack's engine.

The app and `bench` place processes the same way, so a headless run reproduces what
the room saw:

- every stack gets engine processes of its own (per-target engines: no stack's load
  waits behind another's in an event loop), all on the engine's core(s);
- **own cores**: when the machine has a core for every stack (× `per_stack`) plus one
  for the engines, each stack is pinned to cores of its own;
- **shared cores**: otherwise the stacks share every core but the engines' (two or
  more cores), and the app's header says so; each pane then shows the stack's CPU time
  per request and how long it waited for a core, the fair figures when cores are shared;
- **rotate** (bench): one stack at a time on the servers' cores, the engine beside it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from stackrace.stacks.definition import Stack


@dataclass(frozen=True)
class CorePlacement:
    isolation: str  # "parallel" or "rotate"
    engine_cpus: list[int] | None  # every engine process's cores (None: unpinned)
    stack_cpus: list[list[int] | None]  # per stack, in the order given
    shared: bool  # parallel stacks share cores
    note: str  # one line for headers and reports


def choose_isolation(
    asked: str, n_stacks: int, per_stack: int | None, cores: int
) -> tuple[str, str]:
    """bench's `auto`: parallel only when every stack and the engine get cores of their own."""
    if asked in ("rotate", "parallel"):
        return asked, "as asked"
    need = n_stacks * (per_stack or 1) + 1
    if cores >= need:
        return "parallel", f"{cores} cores: each stack and the engine get their own"
    return "rotate", (
        f"{cores} cores are too few for {n_stacks} stacks and the engine to have cores of "
        "their own: one stack at a time"
    )


def cpus_problem(per_stack: int | None, cores: Sequence[int], engine_here: bool = True) -> str:
    """What is wrong with `--cpus N` on these cores ('' if nothing): a stack can have
    every core but the engines' (all of them when the engines run elsewhere, or on a
    machine of one core, which everything shares). More is refused, never recorded and
    quietly given fewer."""
    if per_stack is None:
        return ""
    top = len(cores) - 1 if engine_here and len(cores) >= 2 else len(cores)
    if per_stack <= top:
        return ""
    engine = " (one is the load engine's)" if engine_here and len(cores) >= 2 else ""
    return (
        f"--cpus {per_stack}: a stack can have at most {top} core{'s' * (top != 1)} here: "
        f"{len(cores)} usable{engine}"
    )


def place(
    isolation: str,
    n_stacks: int,
    per_stack: int | None,
    cores: Sequence[int],
    engine_here: bool = True,
) -> CorePlacement:
    """Cores for the engines (the last core) and for each stack (the others); every core
    is the stacks' when the engines run on other hosts (`engine_here=False`)."""
    cores = sorted(cores)
    if not engine_here:
        return _servers_only(isolation, n_stacks, per_stack, cores)
    if len(cores) < 2:
        return CorePlacement(
            isolation, None, [None] * n_stacks, n_stacks > 1, "one core: everything shares it"
        )
    engine = [cores[-1]]
    rest = cores[:-1]
    if isolation == "rotate":
        take = rest[: per_stack or len(rest)]
        return CorePlacement(
            "rotate",
            engine,
            [take] * n_stacks,
            False,
            f"one stack at a time on cpu {_cpus(take)}, the engine on cpu {_cpus(engine)}",
        )
    per = per_stack or 1
    if len(rest) >= n_stacks * per:
        plan: list[list[int] | None] = [rest[i * per : (i + 1) * per] for i in range(n_stacks)]
        return CorePlacement(
            "parallel",
            engine,
            plan,
            False,
            f"each stack on cores of its own, the engines on cpu {_cpus(engine)}",
        )
    return CorePlacement(
        "parallel",
        engine,
        [list(rest)] * n_stacks,
        n_stacks > 1,
        f"{n_stacks} stacks share {len(rest)} core{'s' if len(rest) > 1 else ''} "
        f"(cpu {_cpus(rest)}); the engines run on cpu {_cpus(engine)}",
    )


def _cpus(cpus: Sequence[int]) -> str:
    return ",".join(str(c) for c in cpus)


def _servers_only(
    isolation: str, n_stacks: int, per_stack: int | None, cores: list[int]
) -> CorePlacement:
    elsewhere = "the engines on other hosts"
    if isolation == "rotate":
        take = cores[: per_stack or len(cores)]
        return CorePlacement(
            "rotate", None, [take] * n_stacks, False,
            f"one stack at a time on cpu {_cpus(take)}, {elsewhere}",
        )  # fmt: skip
    per = per_stack or 1
    if len(cores) >= n_stacks * per:
        plan: list[list[int] | None] = [cores[i * per : (i + 1) * per] for i in range(n_stacks)]
        return CorePlacement(
            "parallel", None, plan, False, f"each stack on cores of its own, {elsewhere}"
        )
    return CorePlacement(
        "parallel", None, [list(cores)] * n_stacks, n_stacks > 1,
        f"{n_stacks} stacks share {len(cores)} cores (cpu {_cpus(cores)}), {elsewhere}",
    )  # fmt: skip


def placed(stack: Stack, cpus: list[int] | None, memory_max: str | None) -> Stack:
    """The stack as the race starts it: on the cores the race gives it and under the
    race's memory cap, wherever its own definition names neither (a stack's `cpus` and
    `memory_max` are its author's, and win). Every stack source starts this one."""
    spec = stack.spec
    if cpus and spec.cpus is None:
        spec = msgspec.structs.replace(spec, cpus=cpus)
    if memory_max and spec.memory_max is None:
        spec = msgspec.structs.replace(spec, memory_max=memory_max)
    return dataclasses.replace(stack, spec=spec)
