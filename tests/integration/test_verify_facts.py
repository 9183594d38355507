"""verify's `expect` check is not vacuous: a stack that does not run as its block expects
is caught (opcache on while `expect` says off), and one that does passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackrace.stacks.launcher import Launcher
from stackrace.stacks.verify import check_facts, persistence
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


async def test_measured_facts_win_and_unknown_ones_are_problems() -> None:
    # no server needed: measured keys are not fetched, and nothing else is asked
    check = await check_facts(1, None, {"db_persistent": "on"}, {"db_persistent": "off"})
    assert not check.ok and "db_persistent is 'off' (measured), expected 'on'" in check.problems[0]
    check = await check_facts(1, None, {"opcache": "on"}, {})
    assert not check.ok and "neither measured here nor reported" in check.problems[0]


def test_persistence_from_new_connections() -> None:
    assert [persistence(n, 7) for n in (0, 1, 7, 9)] == ["on", "on", "off", "off"]
    assert persistence(3, 7) == "3 new connections for 7 requests"
    # ten workers may each open one the first time they serve a request
    assert [persistence(n, 16, holders=10) for n in (10, 16)] == ["on", "off"]
