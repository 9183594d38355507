"""What a server says about itself in its log: worker timeouts, restarts, full queues.

The launcher writes each stack's output to a log file of its own. Most servers say
there, in words, why they stopped answering: gunicorn's arbiter kills a worker stuck
past its timeout (`WORKER TIMEOUT`) and boots another, uWSGI respawns workers, php-fpm
says it reached `pm.max_children`, waitress that its task queue is deep, nginx that its
backend's socket refused it. `LogWatch` reads what the log gained since it last looked
and counts the lines that match `SIGNS`, so a pane can name the reason with its figure
("log: WORKER TIMEOUT ×6") instead of leaving the room to guess.

Reads are bounded (`MAX_READ` per poll: a server logging every request cannot make a
poll slow; the skipped part is counted as skipped, never read late), and a line cut by
a read is finished on the next one.
"""

from __future__ import annotations

import re
from pathlib import Path

MAX_READ = 1 << 20  # bytes read per poll at most

# (label shown in a pane, pattern): the servers' own words for trouble
SIGNS: tuple[tuple[str, re.Pattern[bytes]], ...] = (
    ("WORKER TIMEOUT", re.compile(rb"WORKER TIMEOUT")),  # gunicorn's arbiter
    ("worker booted", re.compile(rb"Booting worker with pid")),  # gunicorn
    ("worker killed", re.compile(rb"was sent SIGKILL|Worker exiting|worker \d+ killed")),
    ("worker respawned", re.compile(rb"[Rr]espawned")),  # uWSGI
    ("max_children reached", re.compile(rb"reached pm\.max_children")),  # php-fpm
    ("child exited", re.compile(rb"child \d+ exited")),  # php-fpm
    ("task queue deep", re.compile(rb"Task queue depth")),  # waitress
    ("backend refused", re.compile(rb"Resource temporarily unavailable\) while connecting")),
    ("backend timed out", re.compile(rb"upstream timed out")),  # nginx
    ("too many open files", re.compile(rb"Too many open files")),
    ("worker_connections not enough", re.compile(rb"worker_connections are not enough")),
    ("traceback", re.compile(rb"Traceback \(most recent call last\)")),
)


class LogWatch:
    """Counts, since it was made, the lines of one log file that match `SIGNS`."""

    def __init__(self, path: str | Path, from_start: bool = True) -> None:
        self.path = Path(path)
        self.counts: dict[str, int] = {}
        self.skipped = 0  # bytes not read (more than MAX_READ arrived between polls)
        self._offset = 0
        self._partial = b""
        if not from_start:
            try:
                self._offset = self.path.stat().st_size
            except OSError:
                self._offset = 0

    def poll(self) -> dict[str, int]:
        """Read what the log gained; the counts so far, by label."""
        try:
            with open(self.path, "rb") as f:
                size = f.seek(0, 2)
                if size < self._offset:  # rotated or truncated: start again
                    self._offset, self._partial = 0, b""
                if size - self._offset > MAX_READ:
                    self.skipped += size - self._offset - MAX_READ
                    self._offset, self._partial = size - MAX_READ, b""
                f.seek(self._offset)
                data = f.read(MAX_READ)
        except OSError:
            return self.counts
        self._offset += len(data)
        data = self._partial + data
        cut = data.rfind(b"\n") + 1
        self._partial = data[cut:][-4096:]
        for label, pattern in SIGNS:
            n = len(pattern.findall(data, 0, cut))
            if n:
                self.counts[label] = self.counts.get(label, 0) + n
        return self.counts
