"""The knee predicted on a pane's req/s chart (tui/spark.py): the row its height falls
in, and its words after the scale's label, as long as the room allows."""

from __future__ import annotations

from stackrace.tui.format import fmt_rate
from stackrace.tui.spark import mark_row, mark_text


def test_the_mark_falls_in_the_row_its_height_reaches() -> None:
    assert mark_row(100, 100, 4) == 0  # the top of the scale: the top row
    assert mark_row(10, 100, 4) == 3  # low: the bottom row
    assert mark_row(50, 100, 4) == 2  # half way: 16 eighths of 32, the second row up
    assert mark_row(150, 100, 4) is None  # above the scale: no line, the words say ↑
    assert mark_row(None, 100, 4) is None and mark_row(50, 0, 4) is None


def test_the_mark_is_said_in_the_words_that_fit() -> None:
    assert mark_text(90, 100, fmt_rate, 40) == " ◇ knee ~90"
    assert mark_text(90, 100, fmt_rate, 6) == " ◇90"
    assert mark_text(90, 100, fmt_rate, 3) == ""
    assert mark_text(9000, 1000, fmt_rate, 40) == " ◇ knee ~9.0k↑"
    assert mark_text(None, 100, fmt_rate, 40) == ""
