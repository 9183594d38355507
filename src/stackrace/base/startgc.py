"""The cyclic garbage collector paused while a command starts, and on again once it has.

    startgc.pause()     # cli.main, run as the program: before the command's imports
    startgc.resume()    # cli, once the options are read; the app: after its first frame

A start imports a few hundred modules, and what they make (modules, classes, functions:
tens of thousands of objects) lives as long as the process. The collector runs by
allocation counts, so it walked those objects again and again while they were being
made: ~5 % of `stackrace load URL -n 1`'s CPU and ~8 % of the app's start to its
picker (bench/startup.py). Paused, reference counting still frees whatever dies at
once; only cycles wait, for the start's second at most.

`resume` freezes what the start made (gc.freeze: kept out of every later collection's
walk, for a run of hours as for one request) and turns the collector on again. It does
nothing unless `pause` turned the collector off, so a caller that keeps its own (a test
that calls cli.main with arguments, the app under Pilot) is never touched, and calling
it twice (the app's first frame, then cli's `finally`) is harmless.
"""

from __future__ import annotations

import gc

_paused = False  # pause() turned the collector off, and resume() has not turned it on


def pause() -> None:
    """The collector off for the start, when it is on."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """The start's objects frozen out of later walks, and the collector on again, when
    pause() turned it off; else nothing."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()
