"""Whether a stack can start on this machine, and if not, why and what fixes it."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from stackrace.config import Stack, placeholders, render


@dataclass(frozen=True)
class Availability:
    available: bool
    reason: str = ""
    fix: str = ""


def check(stack: Stack) -> Availability:
    """Delegates to the installer's knowledge of `needs` when present; else checks bins."""
    try:
        from stackrace.stacks import install
    except ImportError:
        install = None  # type: ignore[assignment]
    if install is not None and hasattr(install, "availability"):
        ok, reason, fix = install.availability(stack)
        return Availability(ok, reason, fix)
    values = placeholders(stack, 0, Path("/nonexistent"))
    for arg in [stack.spec.command[0], *stack.spec.needs.bins]:
        exe = render(arg, values)
        if not (Path(exe).exists() if "/" in exe else shutil.which(exe)):
            return Availability(False, f"{exe} not found", f"stackrace install {stack.base}")
    return Availability(True)
