"""The project's stacks.toml, read and checked without starting anything."""

from __future__ import annotations

from pathlib import Path

from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.placeholders import PLACEHOLDERS, placeholders
from stackrace.stacks.variants import resolve
from tests.helpers import ROOT

GOOD = """
[stacks.ok]
title = "test server"
language = "python"
family = "async"
command = ["{python}", "{root}/tests/servers/testserver.py", "{port}"]
"""


def test_every_filled_placeholder_is_declared() -> None:
    stack = resolve("uvicorn", load_stacks())
    assert set(placeholders(stack, 1, Path("/x"))) - set(stack.params) == set(PLACEHOLDERS)


def test_project_stacks_file_is_valid() -> None:
    stacks = load_stacks(ROOT / "stacks.toml")
    assert stacks.source.endswith("stacks.toml")
    for name in stacks:
        resolve(name, stacks)
