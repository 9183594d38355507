"""verify's `expect` check is not vacuous: a stack that does not run as its block expects
is caught (opcache on while `expect` says off), and one that does passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackrace.stacks.launcher import Launcher
from stackrace.stacks.verify import check_facts
from tests.conftest_stacks import real_stack


@pytest.mark.parametrize(
    "variant,claimed,ok",
    [
        ("php-fpm-nginx", "on", True),
        ("php-fpm-nginx:opcache=off", "off", True),
        ("php-fpm-nginx", "off", False),  # opcache is on: a block saying off is caught
        ("php-cgi-nginx:opcache=off", "off", True),
        ("go-beego:runmode=dev", "dev", True),
        ("go-beego", "dev", False),
    ],
)
async def test_facts_are_read_from_the_running_stack(
    variant: str, claimed: str, ok: bool, tmp_path: Path
) -> None:
    stack = real_stack(variant)
    key = "runmode" if stack.base == "go-beego" else "opcache"
    async with Launcher(tmp_path) as launcher:
        rs = await launcher.start(stack)
        check = await check_facts(rs.port, stack.spec.facts, {key: claimed}, {})
    assert check.ok is ok, check.problems
    if not ok:
        assert f"expected '{claimed}'" in check.problems[0]
