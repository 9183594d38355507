"""base/startgc.py: the collector paused for a start, on again once, and a caller's own
collector never touched."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from stackrace.base import startgc


@pytest.fixture(autouse=True)
def _collector_restored() -> Iterator[None]:
    was = gc.isenabled()
    yield
    startgc._paused = False
    gc.unfreeze()  # what a resume froze goes back to the test process's collector
    (gc.enable if was else gc.disable)()


def test_paused_then_on_again_once() -> None:
    gc.enable()
    startgc.pause()
    assert not gc.isenabled()
    startgc.resume()
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0  # the start's objects are out of later walks
    gc.disable()  # someone else's choice after the start: a second resume leaves it
    startgc.resume()
    assert not gc.isenabled()


def test_a_callers_collector_is_its_own() -> None:
    gc.disable()  # a caller that runs without the collector
    startgc.pause()
    startgc.resume()
    assert not gc.isenabled()
