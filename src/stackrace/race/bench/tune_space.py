"""The space a tune searches (race/bench/tune_search.py): each server with its axes, the
configurations' names, the coarse pass's points, a point's neighbours and edges.

    space = Space({"gunicorn-gthread": {"workers": ["1", "2", "3", "5"],
                                        "threads": ["1", "2", "4", "8", "16", "32"]}})
    space.coarse("gunicorn-gthread")   # workers 1/2/5 × threads 1/8/32, log-spaced

A point is a tuple of indices, one per axis, in the order of the server's axes; a
numeric axis (whole numbers, ascending) has neighbours one step each way and edges, a
choice axis has every other choice as a neighbour and no edge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

COARSE_PER_AXIS = 3


Point = tuple[int, ...]


@dataclass(frozen=True)
class Space:
    """The configurations: each server (a stack's base name, or a --url label) with its
    axes, tunable → values in order (numeric axes ascending)."""

    servers: dict[str, dict[str, list[str]]]

    def name(self, server: str, point: Point) -> str:
        axes = self.servers[server]
        if not axes:
            return server
        return f"{server}:" + ",".join(
            f"{k}={v[i]}" for (k, v), i in zip(axes.items(), point, strict=True)
        )

    def numeric(self, server: str, axis: str) -> bool:
        return all(v.isdigit() for v in self.servers[server][axis])

    def points(self, server: str) -> list[Point]:
        sizes = [len(v) for v in self.servers[server].values()]
        out: list[Point] = [()]
        for n in sizes:
            out = [(*p, i) for p in out for i in range(n)]
        return out

    def coarse(self, server: str) -> list[Point]:
        """Up to COARSE_PER_AXIS values on each numeric axis (log-spaced), every choice;
        the middle point first (its answer is measured again at once, the A/A noise: in
        the middle of the space it is quick, where threads=1 needs 12 s a probe to get a
        p99's 1,000 answers from a server doing 80 req/s), then the others."""
        picks: list[list[int]] = []
        for axis, values in self.servers[server].items():
            if self.numeric(server, axis) and len(values) > COARSE_PER_AXIS:
                picks.append(_log_spread([int(v) for v in values], COARSE_PER_AXIS))
            else:
                picks.append(list(range(len(values))))
        out: list[Point] = [()]
        for idx in picks:
            out = [(*p, i) for p in out for i in idx]
        middle = tuple(idx[len(idx) // 2] for idx in picks)
        return [middle] + [p for p in out if p != middle]

    def neighbours(self, server: str, point: Point) -> list[Point]:
        """One step each way on every numeric axis; every other value of a choice axis."""
        out = []
        for k, (axis, values) in enumerate(self.servers[server].items()):
            if self.numeric(server, axis):
                steps = [point[k] - 1, point[k] + 1]
            else:
                steps = [i for i in range(len(values)) if i != point[k]]
            for i in steps:
                if 0 <= i < len(values):
                    out.append((*point[:k], i, *point[k + 1 :]))
        return out

    def edges(self, server: str, point: Point) -> list[str]:
        """Where a point sits on the edge of its numeric range (the best may lie beyond)."""
        out = []
        for k, (axis, values) in enumerate(self.servers[server].items()):
            if not self.numeric(server, axis) or len(values) < 2:
                continue
            if point[k] == len(values) - 1:
                out.append(f"{axis}={values[-1]} is the highest tried: more may do better")
            elif point[k] == 0 and int(values[0]) > 1:
                out.append(f"{axis}={values[0]} is the lowest tried: fewer may do better")
        return out


def _log_spread(values: list[int], k: int) -> list[int]:
    """Indices of k values spread evenly on a log scale between the ends (each the
    nearest value to its target; the ends always)."""
    lo, hi = math.log(values[0]), math.log(values[-1])
    picked: list[int] = []
    for j in range(k):
        target = lo + (hi - lo) * j / (k - 1)
        best = min(range(len(values)), key=lambda i: (abs(math.log(values[i]) - target), i))
        if best not in picked:
            picked.append(best)
    return sorted(picked)
