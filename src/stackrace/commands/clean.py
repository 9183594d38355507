"""`stackrace clean [--dry-run]`: stop the private MariaDB and remove what stackrace made.

Uninstalling the package removes the code, not what running it made: the private
MariaDB's data, the apps' working copy and their builds (Go binaries, node_modules),
the PyPy venv, run directories with their logs, crash logs — 145 MB on a machine that
ran every stack. This command finds them, says what each is and how big, and (without
`--dry-run`) stops the database and removes them.

What it may remove is what it marked as its own: every directory stackrace creates
for its files holds a marker (`.stackrace-made`, stackrace.base.madeby) written when it was
created, and only a directory with that marker, a real directory of this user's, is
removed. A known name is not enough: with `STACKRACE_HOME=~`, `~/data/apps` or
`~/cache/runs` may be the user's own, or hold the user's own beside stackrace's. So it
looks at a fixed list of names it makes (`_MADE`) directly inside its data and cache
directories (stackrace.base.paths), and inside three of them, the runs directory, the
journals and the apps' working copy (`_CONTAINERS`), at each entry: a marked run
directory or apps directory (or a journal, a file in the marked journals directory) is
removed, anything unmarked (`cache/runs/my-notes/`, `data/apps/my-django-site/`) is
listed as "left alone", and the container goes only when nothing of the user's is left
in it. A run directory whose lock a live launcher holds (stacks.run_roots.in_use) and
a journal a live run still writes (race/core/journal.py: in_use) are left alone and
said so: `clean` during a bench must not take that run's logs, sockets or journal. A
marker proves a directory stackrace's only where it was written (stackrace.base.madeby:
path, device and inode): a copy of a run directory is the user's. Outside them it
removes two places stackrace made, each marked and checked for being exactly that: the
private MariaDB's server directory when it had to live under /var/tmp (named
`stackrace-mariadb-*` there, recorded in the instance's instance.json), and the crash
logs' fallback in the temp directory (`stackrace-crashes-UID`, owned by this user). A
directory made by a stackrace older than the markers (or than their identity) is
unmarked, and left alone like any other: the listing says so, and the user removes it
by hand.

Links are never followed: a candidate that is a symlink is left (and said so), a
directory is removed by shutil.rmtree, which on Linux walks by file descriptor and
unlinks the links inside rather than following them, and every path is resolved and
checked to be inside the directory it was found in before anything is removed. The
config directory (the user's own stacks.toml, the last race's choices) is kept: it is
the user's, not stackrace's; the command names it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from stackrace.base import crashlog, madeby, paths
from stackrace.commands.namespace import typed_options
from stackrace.commands.parser import describe, examples
from stackrace.db import DbError, ManagedMariaDB
from stackrace.db.paths import default_dir, shadow_base
from stackrace.race.core.journal import in_use as journal_in_use
from stackrace.settings.units import fmt_bytes
from stackrace.stacks.run_roots import in_use as run_in_use
from stackrace.stacks.run_roots import runs_dir

# what stackrace makes directly in its directories, and what each is
_MADE = {
    "cache": {
        "runs": "run directories (the stacks' logs)",
        "mariadb": "the private MariaDB (data, passwords, logs)",
        "crashes": "crash logs",
        "journals": "journals of runs that did not end (what --resume continues)",
    },
    "data": {
        "apps": "the apps as run, and their builds (Go binaries, node_modules)",
        "venv-pypy": "the PyPy venv of the PyPy stacks",
        "tls": "the TLS stacks' certificate",
        ".apps.lock": "a lock file",
    },
}
# directories whose entries are each stackrace's or the user's: looked into, one by one;
# the files stackrace keeps in them besides its marked directories
_CONTAINERS = {
    "runs": frozenset(),
    "apps": frozenset({paths.APPS_STAMP}),
    "journals": frozenset(),
}
_LIVE_RUN = "a live run's (its lock is held): left alone"
_UNMARKED = "not marked as made by stackrace: left alone"


EXAMPLES = examples(
    ("stackrace clean --dry-run", "what it would stop and remove, and its size"),
    ("stackrace clean", "stop the private MariaDB and remove what stackrace made"),
    ("stackrace clean && pip uninstall stackrace", "and then stackrace itself"),
)


def register(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "Stop the private MariaDB and remove what stackrace made in its data and cache "
        "directories: only names it made, no link followed, your config kept. Then "
        "`pip uninstall stackrace` removes stackrace itself.",
        EXAMPLES,
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="list what would be stopped and removed, and its size; change nothing",
    )
    p.set_defaults(func=run, read_options=clean_options)


@dataclass(frozen=True)
class Item:
    path: Path
    what: str
    size: int  # bytes on disk
    keep: str = ""  # why it is left alone ("" : it is removed)


@dataclass(frozen=True)
class CleanOptions:
    """`stackrace clean`'s command line, typed."""

    dry_run: bool


def clean_options(args: argparse.Namespace) -> CleanOptions:
    return typed_options(CleanOptions, args)


def run(o: CleanOptions) -> int:
    db_root = default_dir()
    items, db, db_pid, problems = survey(db_root)
    print("stackrace clean: what stackrace made on this machine")
    if db_pid is not None:
        verb = "would stop" if o.dry_run else "stop"
        print(f"  {verb:<12} the private MariaDB (pid {db_pid}, {db_root})")
    width = max((len(str(it.path)) for it in items), default=0)
    for it in items:
        if it.keep:
            print(f"  {'keep':<12} {it.path!s:<{width}}  {'':>9}  {it.keep}")
        else:
            verb = "would remove" if o.dry_run else "remove"
            print(f"  {verb:<12} {it.path!s:<{width}}  {fmt_bytes(it.size):>9}  {it.what}")
    total = sum(it.size for it in items if not it.keep)
    removable = [it for it in items if not it.keep]
    if not removable and db_pid is None:
        print("  nothing to remove")
    for line in problems:
        print(f"stackrace clean: {line}", file=sys.stderr)
    if o.dry_run:
        print(f"{fmt_bytes(total)} in all; nothing changed (--dry-run)")
        return 1 if problems else 0
    if db is not None and db_pid is not None:
        try:
            db.down()
        except DbError as exc:
            print(f"stackrace clean: the private MariaDB did not stop: {exc}", file=sys.stderr)
            return 1
    failed = 0
    for it in removable:
        why = _remove(it.path)
        if why:
            failed += 1
            print(f"stackrace clean: {it.path}: not removed: {why}", file=sys.stderr)
    for base in (paths.cache_dir(), paths.data_dir()):
        _rmdir_if_empty(base)
    print(f"removed {fmt_bytes(total)}" + (f"; {failed} not removed" if failed else ""))
    return 1 if failed or problems else 0


def survey(db_root: Path) -> tuple[list[Item], ManagedMariaDB | None, int | None, list[str]]:
    """What there is: the items (removable, or kept and why), the private MariaDB and its
    pid when it runs, and problems (one line each) that keep something from being
    removed."""
    items: list[Item] = []
    problems: list[str] = []
    dirs = {"cache": paths.cache_dir(), "data": paths.data_dir()}
    for kind, base in dirs.items():
        items += _inside(base, _MADE[kind])
    # the narrower variables put runs and the database elsewhere: stop, but never remove
    # what is outside stackrace's own directories
    for variable, where in (("STACKRACE_RUNS_DIR", runs_dir()), ("STACKRACE_DB_DIR", db_root)):
        if os.environ.get(variable) and not any(_within(where, b) for b in dirs.values()):
            items.append(Item(where, "", 0, keep=f"outside stackrace's directories ({variable})"))
    db: ManagedMariaDB | None = None
    pid: int | None = None
    if (db_root / "instance.json").exists():
        db = ManagedMariaDB(db_root)
        pid = db.pid()
        server = db.paths.server_dir  # from instance.json: checked before it is trusted
        removed = any(it.path == db_root and not it.keep for it in items)
        # its server files outside it go with it (and only then: an instance kept must
        # keep its data)
        shadow = _shadow_server_dir(server) if not _within(server, db_root) else None
        if shadow is not None and removed:
            items.append(Item(shadow, "the private MariaDB's server files", _size(shadow)))
    # the crash logs' fallback is one per user, shared by every STACKRACE_HOME: a trial
    # home's clean must not take the real one's logs
    crashes = crashlog.fallback_dir()
    if not os.environ.get(paths.ENV_HOME) and madeby.made(crashes) is not None:
        items.append(Item(crashes, "crash logs (written where the cache was not)", _size(crashes)))
    items.append(Item(paths.config_dir(), "", 0, keep="your settings: stacks.toml, the last race"))
    return items, db, pid, problems


def _inside(base: Path, made: dict[str, str]) -> list[Item]:
    """The known entries of `base` that stackrace marked (removable), and the others
    (kept, and why); the runs directory and the apps' copy are looked into."""
    try:
        st = os.lstat(base)
    except FileNotFoundError:
        return []
    if stat.S_ISLNK(st.st_mode):
        return [Item(base, "", 0, keep=f"a link to {os.path.realpath(base)}: not followed")]
    out = []
    real_base = os.path.realpath(base)
    for entry in sorted(os.scandir(base), key=lambda e: e.name):
        path = Path(entry.path)
        what = made.get(entry.name)
        if what is None:
            out.append(Item(path, "", 0, keep="not made by stackrace: left alone"))
        elif entry.is_symlink():
            out.append(Item(path, "", 0, keep=f"a link to {os.path.realpath(path)}: not followed"))
        elif os.path.dirname(os.path.realpath(path)) != real_base:
            out.append(Item(path, "", 0, keep="resolves outside its directory: left alone"))
        elif not entry.is_dir():
            out.append(Item(path, what, _size(path)))  # a file of ours by name: a lock
        elif madeby.made(path) is None:
            out.append(Item(path, "", 0, keep=_UNMARKED))
        elif entry.name in _CONTAINERS:
            out += _container(path, what, _CONTAINERS[entry.name])
        else:
            out.append(Item(path, what, _size(path)))
    return out


def _container(path: Path, what: str, own_files: frozenset[str]) -> list[Item]:
    """A marked directory whose entries are checked one by one: the whole of it when
    every entry is stackrace's, else its marked entries (removed) and the rest (kept)."""
    mine: list[Item] = []
    kept: list[Item] = []
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        child = Path(entry.path)
        if entry.name == madeby.MARKER:
            continue
        if entry.name in own_files and entry.is_file(follow_symlinks=False):
            # the copy's manifest goes with any of its directories: kept, it would say
            # the copy is whole and nothing would make it again
            mine.append(Item(child, "its list of what it holds", _size(child)))
            continue
        if path.name == "journals" and entry.name.endswith(".journal"):
            # a journal is a file, not a marked directory: stackrace's by its name in
            # stackrace's marked folder; one a run still writes is that run's
            if not entry.is_file(follow_symlinks=False):
                kept.append(Item(child, "", 0, keep=_UNMARKED))
            elif journal_in_use(child):
                kept.append(Item(child, "", 0, keep=_LIVE_RUN))
            else:
                mine.append(Item(child, "a journal of a run that did not end", _size(child)))
            continue
        if entry.is_symlink() or not entry.is_dir() or madeby.made(child) is None:
            kept.append(Item(child, "", 0, keep=_UNMARKED))
        elif run_in_use(child):  # a launcher holds it: its stacks' logs, sockets, lock
            kept.append(Item(child, "", 0, keep=_LIVE_RUN))
        else:
            mine.append(Item(child, what, _size(child)))
    if not kept:
        return [Item(path, what, _size(path))]
    return mine + kept


def _shadow_server_dir(server: Path) -> Path | None:
    """The instance's server directory outside its own, if it is exactly what stackrace
    makes there: a real directory named stackrace-mariadb-* directly in /var/tmp or the
    temp directory (db/instance.py: make_server_dir)."""
    try:
        st = os.lstat(server)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or not server.name.startswith("stackrace-mariadb-"):
        return None
    parents = {os.path.realpath(shadow_base()), os.path.realpath(tempfile.gettempdir())}
    if os.path.dirname(os.path.realpath(server)) not in parents:
        return None
    return server if madeby.made(server, handed_over=True) is not None else None


def _within(path: Path, base: Path) -> bool:
    real, root = os.path.realpath(path), os.path.realpath(base)
    return real == root or real.startswith(root + os.sep)


def _size(path: Path) -> int:
    """Bytes on disk, links not followed (du's figure: what removing it frees)."""
    total = 0
    try:
        st = os.lstat(path)
    except OSError:
        return 0
    if not stat.S_ISDIR(st.st_mode):
        return st.st_blocks * 512
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        for name in dirnames + filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total + st.st_blocks * 512


def _remove(path: Path) -> str:
    """Remove a file or a directory tree, never following a link; "" or why not."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return exc.strerror or str(exc)
    if stat.S_ISLNK(st.st_mode):
        return "a link: not followed"
    try:
        if stat.S_ISDIR(st.st_mode):
            # fd-based on Linux (shutil.rmtree.avoids_symlink_attacks): links inside are
            # unlinked, never followed, even if one is swapped in while it runs
            shutil.rmtree(path)
        else:
            path.unlink()
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename and exc.filename != str(path) else ""
        return (exc.strerror or str(exc)) + where
    return ""


def _rmdir_if_empty(path: Path) -> None:
    if os.path.islink(path):
        return
    with contextlib.suppress(OSError):  # not empty (the user's files), or gone already
        path.rmdir()
