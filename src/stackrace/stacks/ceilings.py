"""The most workers and threads a stack may be given on this machine.

Ceilings for workers and threads come from the machine (cores and available memory) so
that a typo like `workers=99999999` is an error, not 873 processes booting;
`stackrace --no-tunable-limits …` lifts them (`lift_limits`) for one run. The check of a
value against them is stackrace.stacks.tunables'.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Ceilings:
    """The most workers and threads a stack may be given on this machine."""

    workers: int
    threads: int


_limits_lifted = False


def lift_limits() -> None:
    """`--no-tunable-limits`: no ceiling on workers and threads for this process."""
    global _limits_lifted
    _limits_lifted = True


def limits_lifted() -> bool:
    """Whether `--no-tunable-limits` was given (read at each check: the flag is set after
    the modules that check are imported)."""
    return _limits_lifted


def _available_memory() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 1 << 30  # unknown: assume a small machine (1 GiB)


def tunable_ceilings() -> Ceilings:
    """The ceilings of workers and threads on this machine.

    workers: 32 per usable core (at least 64: a prefork server with 50 spare processes
    is a classic set-up, seed-004), and no more than one per 16 MiB of available memory
    (a Python worker's own memory is 15-30 MB). threads: 128 per core (at least 256),
    and one per 2 MiB of available memory. Far above anything a tuner needs on the
    machine, far below what takes it down (`workers=99999999999999999999` booted 873
    gunicorn workers in 60 s before it was refused).
    """
    cores = max(1, len(os.sched_getaffinity(0)))
    memory = _available_memory()
    workers = min(max(64, 32 * cores), max(1, memory // (16 << 20)))
    threads = min(max(256, 128 * cores), max(1, memory // (2 << 20)))
    return Ceilings(workers=workers, threads=threads)
