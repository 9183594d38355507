"""A race member's state: what the core, the URL targets and every view agree on.

Its own module so that the URL targets (race/core/urls.py), which the core builds, and the
core (race/core/core.py) can both name it without importing each other.
"""

from __future__ import annotations

from enum import StrEnum


class StackState(StrEnum):
    STARTING = "starting"
    WARMING = "warming"
    READY = "ready"
    CRASHED = "crashed"
    STOPPED = "stopped"
