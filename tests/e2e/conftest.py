"""The app end to end: the real engine against real servers through the UI, `stackrace
web` in a real browser, the layers checked in a fresh interpreter. tests/tui is the
Pilot tier on the synthetic stream (no server, no engine process); this is its costly
counterpart."""
