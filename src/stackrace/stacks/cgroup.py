"""Optional memory caps through cgroup v2, where this machine lets us create cgroups."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PARENT = CGROUP_ROOT / "stackrace"


def unavailable_reason() -> str | None:
    """None when memory caps work here, else why not."""
    controllers = CGROUP_ROOT / "cgroup.controllers"
    if not controllers.exists():
        return "no cgroup v2 hierarchy at /sys/fs/cgroup"
    if "memory" not in controllers.read_text().split():
        return "the memory controller is not enabled in this cgroup tree"
    if not os.access(CGROUP_ROOT, os.W_OK):
        return "/sys/fs/cgroup is not writable (run as root, or delegate a cgroup)"
    return None


def _enable_memory(parent: Path) -> None:
    control = parent / "cgroup.subtree_control"
    if "memory" not in control.read_text().split():
        control.write_text("+memory")


def create(name: str, memory_max: str) -> tuple[Path | None, str]:
    """A cgroup with memory.max set; returns (dir, description) or (None, reason)."""
    why = unavailable_reason()
    if why:
        return None, f"memory cap unavailable: {why}"
    try:
        _enable_memory(CGROUP_ROOT)
        PARENT.mkdir(exist_ok=True)
        _enable_memory(PARENT)
        d = PARENT / f"{name}-{os.getpid()}"
        d.mkdir(exist_ok=True)
        (d / "memory.max").write_text(_bytes(memory_max))
        swap = d / "memory.swap.max"
        if swap.exists():  # a cap that swaps instead of failing would hide the limit
            swap.write_text("0")
    except OSError as exc:
        return None, f"memory cap unavailable: {exc.strerror or exc}"
    return d, memory_max


def remove(d: Path) -> None:
    with contextlib.suppress(OSError):
        d.rmdir()


def _bytes(size: str) -> str:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if size[-1] in units:
        return str(int(size[:-1]) * units[size[-1]])
    return size
