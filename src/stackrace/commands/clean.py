"""`stackrace clean [--dry-run]`: stop the private MariaDB and remove what stackrace made.

Uninstalling the package removes the code, not what running it made: the private
MariaDB's data, the apps' working copy and their builds (Go binaries, node_modules),
the PyPy venv, run directories with their logs, crash logs — 145 MB on a machine that
ran every stack. This command finds them, says what each is and how big, and (without
`--dry-run`) stops the database and removes them.

What it may remove is a fixed list of names it knows it made (`_MADE`), directly
inside its data and cache directories (stackrace.base.paths), plus two places outside them
that stackrace made and recorded, each checked for being exactly that: the private
MariaDB's server directory when it had to live under /var/tmp (named
`stackrace-mariadb-*` there, recorded in the instance's instance.json), and the crash
logs' fallback in the temp directory (`stackrace-crashes-UID`, owned by this user).
Nothing else: with `STACKRACE_HOME=~`, `~/cache` holds what stackrace made *and* may
hold the user's own files, so an unknown name is listed and left alone.

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

from stackrace.base import paths
from stackrace.db import DbError, ManagedMariaDB
from stackrace.db.paths import default_dir, shadow_base
from stackrace.settings.options import examples
from stackrace.settings.units import fmt_bytes
from stackrace.stacks.launcher import runs_dir

# what stackrace makes directly in its directories, and what each is
_MADE = {
    "cache": {
        "runs": "run directories (the stacks' logs)",
        "mariadb": "the private MariaDB (data, passwords, logs)",
        "crashes": "crash logs",
    },
    "data": {
        "apps": "the apps as run, and their builds (Go binaries, node_modules)",
        "venv-pypy": "the PyPy venv of the PyPy stacks",
        ".apps.lock": "a lock file",
    },
}


EXAMPLES = examples(
    ("stackrace clean --dry-run", "what it would stop and remove, and its size"),
    ("stackrace clean", "stop the private MariaDB and remove what stackrace made"),
    ("stackrace clean && pip uninstall stackrace", "and then stackrace itself"),
)


def register(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Stop the private MariaDB and remove what stackrace made in its data and cache "
        "directories: only names it made, no link followed, your config kept. Then "
        "`pip uninstall stackrace` removes stackrace itself."
    )
    p.epilog = EXAMPLES
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="list what would be stopped and removed, and its size; change nothing",
    )
    p.set_defaults(func=run)


@dataclass(frozen=True)
class Item:
    path: Path
    what: str
    size: int  # bytes on disk
    keep: str = ""  # why it is left alone ("" : it is removed)


def run(args: argparse.Namespace) -> int:
    db_root = default_dir()
    items, db, db_pid, problems = survey(db_root)
    print("stackrace clean: what stackrace made on this machine")
    if db_pid is not None:
        verb = "would stop" if args.dry_run else "stop"
        print(f"  {verb:<12} the private MariaDB (pid {db_pid}, {db_root})")
    width = max((len(str(it.path)) for it in items), default=0)
    for it in items:
        if it.keep:
            print(f"  {'keep':<12} {it.path!s:<{width}}  {'':>9}  {it.keep}")
        else:
            verb = "would remove" if args.dry_run else "remove"
            print(f"  {verb:<12} {it.path!s:<{width}}  {fmt_bytes(it.size):>9}  {it.what}")
    total = sum(it.size for it in items if not it.keep)
    removable = [it for it in items if not it.keep]
    if not removable and db_pid is None:
        print("  nothing to remove")
    for line in problems:
        print(f"stackrace clean: {line}", file=sys.stderr)
    if args.dry_run:
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
    crashes = Path(tempfile.gettempdir()) / f"stackrace-crashes-{os.getuid()}"
    if not os.environ.get(paths.ENV_HOME) and _ours(crashes):
        items.append(Item(crashes, "crash logs (written where the cache was not)", _size(crashes)))
    items.append(Item(paths.config_dir(), "", 0, keep="your settings: stacks.toml, the last race"))
    return items, db, pid, problems


def _inside(base: Path, made: dict[str, str]) -> list[Item]:
    """The known entries of `base` (removable unless a link), and the unknown ones (kept)."""
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
        else:
            out.append(Item(path, what, _size(path)))
    return out


def _shadow_server_dir(server: Path) -> Path | None:
    """The instance's server directory outside its own, if it is exactly what stackrace
    makes there: a real directory named stackrace-mariadb-* directly in /var/tmp or the
    temp directory (db/managed.py: _make_server_dir)."""
    try:
        st = os.lstat(server)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or not server.name.startswith("stackrace-mariadb-"):
        return None
    parents = {os.path.realpath(shadow_base()), os.path.realpath(tempfile.gettempdir())}
    if os.path.dirname(os.path.realpath(server)) not in parents:
        return None
    return server


def _ours(path: Path) -> bool:
    """A real directory (not a link) owned by this user."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()


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
