"""Whether a stack can start on this machine, and if not, why and what fixes it."""

from __future__ import annotations

from dataclasses import dataclass

from stackrace.config import Stack
from stackrace.stacks import install


@dataclass(frozen=True)
class Availability:
    available: bool
    reason: str = ""
    fix: str = ""


def check(stack: Stack) -> Availability:
    """What the installer knows of the stack's `needs`: installed, or why not and the fix."""
    ok, reason, fix = install.availability(stack)
    return Availability(ok, reason, fix)
