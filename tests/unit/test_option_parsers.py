"""One parser per kind of option value (stackrace.settings.parsers): what each accepts and refuses.

The refusals as a user meets them (one line, exit 2, no load):
tests/hardening/test_options.py."""

from __future__ import annotations

import os
import re
from collections.abc import Callable

import pytest

from stackrace.settings import parsers

CPUS = sorted(os.sched_getaffinity(0))


CASES = [
    (
        parsers.positive_duration,
        {"10s": 10.0, "500ms": 0.5, "2m": 120.0, "1.5": 1.5},
        ["0", "0s", "-1s", "soon", "", "nan", "1e999"],
    ),
    (parsers.non_negative_duration, {"0": 0.0, "0s": 0.0, "2s": 2.0}, ["-1s", "x"]),
    (parsers.positive_rate, {"500": 500.0, "0.5": 0.5}, ["0", "-5", "nan", "inf", "-inf", ""]),
    (parsers.positive_int, {"1": 1, "40": 40}, ["0", "-5", "1.5", "x", ""]),
    (parsers.positive_int_list, {"10,100": [10, 100], "1": [1]}, ["10,,100", "0,10", "-1", ""]),
    # `db up --port 0` would mean "any port" and start on another one silently
    (parsers.port_number, {"1": 1, "13306": 13306, "65535": 65535}, ["0", "65536", "-1", "x"]),
    (parsers.procs, {"auto": "auto", "AUTO": "auto", "3": 3}, ["0", "-1", "many", ""]),
    (parsers.cpu_list, {str(CPUS[0]): [CPUS[0]]}, ["-1", "99", "999", "a", "0,0", "1-0"]),
]


@pytest.mark.parametrize(("parser", "good", "bad"), CASES)
def test_parsers_accept_and_refuse(
    parser: Callable[[str], object], good: dict[str, object], bad: list[str]
) -> None:
    for text, value in good.items():
        assert parser(text) == value
    for text in bad:
        with pytest.raises(parsers.OptionValueError, match=re.escape(repr(text))):
            parser(text)


def test_cpu_ranges_and_procs_cap() -> None:
    assert parsers.cpu_list(f"{CPUS[0]}-{CPUS[-1]}") == CPUS
    n = len(CPUS)
    assert parsers.cap_procs(1) == (1, None)
    assert parsers.cap_procs("auto") == (min(4, n), None)
    capped, note = parsers.cap_procs(n + 38)
    assert capped == n and note is not None and f"--procs {n + 38} capped at {n}" in note
    capped, note = parsers.cap_procs(2, cpus=[CPUS[0]])
    assert capped == 1 and note is not None and "--engine-cpus" in note
