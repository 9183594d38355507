"""How `verify` weighs a stack's facts (stackrace.stacks.verify), on figures given by hand."""

from __future__ import annotations

from stackrace.stacks.verify import check_facts, persistence


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
