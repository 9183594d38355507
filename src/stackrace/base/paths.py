"""Where stackrace's files live, decided in one place.

                      checkout (`pip install -e .`)     package (`pip`/`pipx install`)
    shipped data      the repository's top level:       stackrace/_shipped in site-packages
    (stacks.toml,     stacks.toml, apps/, presets/,     (setup.py copies them in at build
    apps/, presets/,  docs/                             time; read-only from then on)
    docs/)
    {apps} as run     <repo>/apps: builds in place      $XDG_DATA_HOME/stackrace/apps: a
    (Go binaries,     (apps/go/*/bin, node_modules),    working copy of the shipped apps/,
    node_modules)     exactly as before packaging       kept in step with them (`apps_dir`)
    PyPy venv         <repo>/.venv-pypy                 $XDG_DATA_HOME/stackrace/venv-pypy
    user stacks file  $XDG_CONFIG_HOME/stackrace/stacks.toml (both)
    runs, MariaDB     $XDG_CACHE_HOME/stackrace/{runs,mariadb} (both; as before)

A checkout keeps building where it always has, so `./dev` and the stamps of
scripts/setup.sh stay as they were. A package never writes into site-packages (it may
not be writable, and an upgrade would wipe or mix the builds): what `stackrace install`
makes goes to the data directory. Builds are *data*, not cache: a PyPy venv or a Go
build costs minutes, and a cache cleaner must not silently make stacks unavailable.

The {apps} of a package is a copy rather than the shipped directory itself because the
stacks build next to their sources (`go build -o bin/server`, npm's node_modules beside
the app, which Node resolves from the script's directory): a copy keeps every stack
block, and every user's own block that uses {apps}, working unchanged.

`STACKRACE_HOME=DIR` puts config, data and cache under DIR/config, DIR/data and
DIR/cache (one directory to throw away: tests, a trial); the narrower STACKRACE_RUNS_DIR
and STACKRACE_DB_DIR still win for their own directory.

XDG by hand rather than platformdirs: stackrace is Linux-only (PR_SET_PDEATHSIG,
/proc, cgroups), where the rules are three variables and their defaults; platformdirs
would only add the paths of systems the rest of the tool cannot run on.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from stackrace.base.errors import StackraceError

_PACKAGE = Path(__file__).resolve().parents[1]  # base/paths.py → the stackrace package
_PACKAGED = _PACKAGE / "_shipped"  # where a wheel carries stacks.toml, apps/, presets/
_CHECKOUT = _PACKAGE.parents[1]  # src/stackrace → the repository

ENV_HOME = "STACKRACE_HOME"
STACKS_FILE = "stacks.toml"
# made by a stack's build or by Python next to the sources: never shipped, kept in the copy
_OUTPUTS = frozenset({"bin", "node_modules", "__pycache__"})
APPS_STAMP = ".stackrace-shipped"  # in the copy: the manifest of the shipped apps it matches
APPS_COPY = "the apps as run, and their builds"  # what the copy's markers say


def is_checkout() -> bool:
    """True when stackrace runs from a repository checkout (an editable install)."""
    return not (_PACKAGED / STACKS_FILE).exists() and (_CHECKOUT / "pyproject.toml").exists()


def shipped_dir() -> Path:
    """The directory holding the shipped stacks.toml, apps/ and presets/."""
    return _CHECKOUT if is_checkout() else _PACKAGED


def shipped_stacks_file() -> Path:
    return shipped_dir() / STACKS_FILE


def presets_dir() -> Path:
    return shipped_dir() / "presets"


def docs_dir() -> Path:
    """The documentation (docs/*.md): a checkout's docs/, or the copy a wheel carries."""
    return shipped_dir() / "docs"


def doc(name: str) -> str:
    """Where a document is, for a help text or a message: `docs/db.md` in a checkout
    (its readers are in the repository), the file's full path in a package."""
    return f"docs/{name}" if is_checkout() else str(docs_dir() / name)


def _xdg(variable: str, default: str, sub: str) -> Path:
    home = os.environ.get(ENV_HOME)
    if home:
        return Path(home).expanduser() / sub
    # the spec: an unset, empty or relative value means the default
    value = os.environ.get(variable, "")
    base = Path(value) if value and os.path.isabs(value) else Path.home() / default
    return base / "stackrace"


class UnwritableDirError(StackraceError, OSError):
    """A directory stackrace must write cannot be made or written; the message names it,
    the cause, and the variable that moves it."""

    exit_code = 2


def writable_dir(
    path: Path, what: str, variable: str = ENV_HOME, made_for: str | None = None
) -> Path:
    """`path`, made if missing, or UnwritableDirError (a read-only home, a full disk,
    a file where the directory should be). `made_for`: what stackrace keeps there, for
    the marker written into the directory when this call made it (stackrace.base.madeby:
    what `clean` may remove)."""
    try:
        if made_for is not None:
            # imported here, as in sync_apps: madeby's msgspec and uuid stay out of the
            # start-up of every command that only asks where a file lives
            from stackrace.base import madeby  # lazy: keeps every start fast

            madeby.make_dir(path, made_for)
        else:
            path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as exc:
        raise UnwritableDirError(
            f"cannot write {what} in {path}: {exc.strerror or exc} "
            f"(${variable} or ${ENV_HOME} puts it elsewhere)"
        ) from None
    return path


def config_dir() -> Path:
    """$XDG_CONFIG_HOME/stackrace (~/.config/stackrace): the user's own stacks.toml."""
    return _xdg("XDG_CONFIG_HOME", ".config", "config")


def data_dir() -> Path:
    """$XDG_DATA_HOME/stackrace (~/.local/share/stackrace): a package's builds."""
    return _xdg("XDG_DATA_HOME", ".local/share", "data")


def cache_dir() -> Path:
    """$XDG_CACHE_HOME/stackrace (~/.cache/stackrace): run directories, the MariaDB."""
    return _xdg("XDG_CACHE_HOME", ".cache", "cache")


ENV_LOCKS = "STACKRACE_LOCKS_DIR"


def run_locks_dir() -> Path:
    """Where running stackrace processes hold their run locks (race/core/runlocks.py):
    $STACKRACE_LOCKS_DIR, else $XDG_RUNTIME_DIR/stackrace (a per-user tmpfs), else
    stackrace-UID in the temp directory. Not under $STACKRACE_HOME on purpose: two runs
    with two homes still share the machine's cores."""
    given = os.environ.get(ENV_LOCKS, "")
    if given:
        return Path(given).expanduser()
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime and os.path.isabs(runtime) and os.path.isdir(runtime):
        return Path(runtime) / "stackrace"
    import tempfile  # lazy: tempfile off start-up

    return Path(tempfile.gettempdir()) / f"stackrace-{os.getuid()}"


def user_stacks_file() -> Path:
    return config_dir() / STACKS_FILE


def work_root() -> Path:
    """{root}: the directory whose apps/ the stacks run from (and build in)."""
    return _CHECKOUT if is_checkout() else data_dir()


def apps_dir() -> Path:
    """{apps}: where the stacks' apps run and build. A package's copy is brought in step
    with the shipped apps/ on first use in a process (a stat of ~60 files when nothing
    changed)."""
    if is_checkout():
        return _CHECKOUT / "apps"
    target = data_dir() / "apps"
    if target not in _synced:
        sync_apps(_PACKAGED / "apps", target)
        _synced.add(target)
    return target


def pypy_venv() -> Path:
    """The PyPy venv of the stacks that ask for one (`needs.venv = "pypy"`)."""
    return _CHECKOUT / ".venv-pypy" if is_checkout() else data_dir() / "venv-pypy"


# --- the package's working copy of apps/ -------------------------------------------------

_synced: set[Path] = set()


def _shipped_files(src: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if d not in _OUTPUTS)
        for name in sorted(filenames):
            if not name.endswith(".pyc"):
                yield Path(dirpath, name)


def _manifest(src: Path) -> str:
    import hashlib  # here, where it is used: every command imports paths; keeps start-up fast

    h = hashlib.sha256()
    for f in _shipped_files(src):
        st = f.stat()
        h.update(f"{f.relative_to(src)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # two stackrace processes starting at once
        yield
    finally:
        os.close(fd)


def sync_apps(src: Path, dst: Path) -> None:
    """Make `dst` hold exactly the shipped files of `src`, keeping build outputs.

    A file whose content changed is rewritten with a fresh mtime, and an unchanged one is
    left alone: `stackrace install`'s staleness rule (a built file older than a source)
    then rebuilds exactly what an upgrade changed. Files no longer shipped are removed,
    except inside build-output directories (bin/, node_modules/).
    """
    # imported here: see writable_dir
    from stackrace.base import madeby  # lazy: keeps every start fast

    stamp = dst / APPS_STAMP
    manifest = _manifest(src)
    if stamp.is_file() and stamp.read_text() == manifest:
        return
    with _locked(dst.parent / ".apps.lock"):
        if stamp.is_file() and stamp.read_text() == manifest:
            return  # another process made it while this one waited
        madeby.make_dir(dst, APPS_COPY)
        shipped = set()
        for f in _shipped_files(src):
            rel = f.relative_to(src)
            shipped.add(rel)
            target = dst / rel
            data = f.read_bytes()
            if target.is_file() and target.read_bytes() == data:
                continue
            top = dst / rel.parts[0]
            if len(rel.parts) > 1 and not top.exists():
                # each top-level directory of the copy is marked too: `clean` removes the
                # marked ones and leaves what a user put beside them (stackrace.base.madeby)
                madeby.make_dir(top, APPS_COPY)
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.tmp")
            tmp.write_bytes(data)
            os.chmod(tmp, f.stat().st_mode & 0o777 | 0o200)
            os.replace(tmp, target)
        for old in list(_shipped_files(dst)):
            rel = old.relative_to(dst)
            if rel not in shipped and rel != Path(APPS_STAMP) and rel.name != madeby.MARKER:
                old.unlink()
        stamp.write_text(manifest)


def locked(path: Path) -> contextlib.AbstractContextManager[None]:
    """An exclusive lock on `path` (made if missing) for a `with` block."""
    return _locked(path)
