"""Judgments as pure functions: no I/O, no clock, no Textual; each unit-tested on
recorded figures (tests/unit)."""
