"""The catalogue: which stacks files are read, in which order, trusted or not, merged
into one `StackFile` of typed, checked definitions (stackrace.stacks.definition).

Which files: `--stacks-file FILE` alone; else the one shipped with stackrace, with
~/.config/stackrace/stacks.toml ($XDG_CONFIG_HOME) and ./stacks.toml on top when they
exist, each adding stacks and replacing those of the same name (`replace = true` at a
file's top: that file alone). `stacks_files` says which, `load_stacks` merges them.
A ./stacks.toml that replaces a stack of the files below it (a shipped "uvicorn" with
a command of its own: what a cloned repository could do) is refused until the user
trusts it (`stackrace stacks --trust ./stacks.toml`, stackrace.stacks.trust: remembered by its
content) or names it with --stacks-file. One that only adds stacks is read, so that the
shipped stacks stay usable beside it, but the stacks it adds are `untrusted`: each
carries the line that refuses it, and choosing one (stackrace.stacks.variants.resolve:
every build, install, verify, serve and race goes through it) raises that line. An
added stack's `build` or `command` is as much a cloned repository's command as a
replaced one's. Every command that runs stacks prints the files it read first
(`announcement`).

Each file's blocks are checked when it is read (stackrace.stacks.validate); a stack is
chosen from the merged catalogue by name or variant (stackrace.stacks.variants).
"""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from stackrace.base import inputfile, paths
from stackrace.stacks import trust
from stackrace.stacks.definition import ConfigError, StackDef
from stackrace.stacks.validate import display_path, stack_defs

if TYPE_CHECKING:
    from stackrace.stacks.app_spec import AppSpec


class StackFile(dict[str, StackDef]):
    """The stacks of the files read, by name; `source` names them as error messages do,
    `path` is the topmost file read (None: definitions recorded in a run file), `origin`
    why that file (STACKS_ORIGINS), `sha256` its content's hash (what a saved run
    records), and `files` every file read, lowest first, as (path, origin, sha256)."""

    def __init__(
        self,
        stacks: dict[str, StackDef],
        source: str,
        path: Path | None = None,
        origin: str = "",
        sha256: str = "",
        files: list[tuple[Path, str, str]] | None = None,
    ) -> None:
        super().__init__(stacks)
        self.source = source
        self.path = path
        self.origin = origin
        self.sha256 = sha256
        self.files = files if files is not None else ([(path, origin, sha256)] if path else [])
        # stacks made from --app or --cmd (stackrace.stacks.userapp): name → that option
        self.generated: dict[str, str] = {}
        self.app: AppSpec | None = None  # the --app they were made for
        # stacks of a ./stacks.toml not trusted yet: name → the line that refuses it
        # (read to be listed; never built, installed or run: variants.resolve)
        self.untrusted: dict[str, str] = {}


# Why a stacks file was read, in the search order `stacks_files` follows.
GIVEN = "given with --stacks-file"
HERE = "found in this directory"
USER = "found in your config directory"
SHIPPED = "shipped with stackrace"
STACKS_ORIGINS = (GIVEN, HERE, USER, SHIPPED)


def stacks_files(given: str | Path | None = None) -> list[tuple[Path, str]]:
    """The stacks files to read, lowest first, and why each (STACKS_ORIGINS).

    `--stacks-file FILE` is used whole: it is asked for by name. Otherwise the shipped
    file comes first, then $XDG_CONFIG_HOME/stackrace/stacks.toml and ./stacks.toml when
    they exist: each adds stacks and replaces a stack of the same name, so a user's file
    of one block leaves every shipped stack available. A file whose top says
    `replace = true` is used alone (with any file above it). In a checkout ./stacks.toml
    is the shipped file itself, and is read once, as that."""
    if given:
        return [(Path(given), GIVEN)]
    shipped = paths.shipped_stacks_file()
    out = [(shipped, SHIPPED)]
    user = paths.user_stacks_file()
    if user.is_file():
        out.append((user, USER))
    here = Path.cwd() / paths.STACKS_FILE
    if here.is_file():
        try:
            same = shipped.is_file() and here.samefile(shipped)
        except OSError:
            same = False
        if not same:
            out.append((here, HERE))
    return out


def _read_layer(p: Path) -> tuple[dict[str, Any], str]:
    try:
        data = inputfile.read_bytes(p, limit=4 * inputfile.MiB)
        raw = inputfile.parse_toml(str(p), data.decode())
    except inputfile.InputFileError as exc:
        raise ConfigError(str(exc).replace(str(p), display_path(p), 1)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{display_path(p)}: not UTF-8 text ({exc.reason})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{display_path(p)}: not valid TOML: {exc}") from None
    return raw, hashlib.sha256(data).hexdigest()


def load_stacks(path: str | Path | None = None, *, check_trust: bool = True) -> StackFile:
    """Read and validate the stacks files (`stacks_files`: the shipped one and the
    user's, merged by name; or the one given); raise ConfigError naming file, stack and
    key. A ./stacks.toml that replaces a stack of the files below it is refused until it
    is trusted (stackrace.stacks.trust; `check_trust=False`: read it all the same, to list)."""
    merged: dict[str, StackDef] = {}
    below: dict[str, StackDef] = {}  # every stack of the files read before this one
    files: list[tuple[Path, str, str]] = []
    untrusted: dict[str, str] = {}
    for p, origin in stacks_files(path):
        defs, replace, sha = read_stacks_file(p)
        if replace:  # this file alone (and those above it)
            merged, files, untrusted = {}, [], {}
        if origin == HERE and not trust.is_trusted(p, sha):
            replaced = replaced_stacks(defs, below)
            if replaced and check_trust:
                raise ConfigError(untrusted_line(p, replaced))
            for name in defs:  # added (or, when only listing, replaced): never run
                if name in below and below[name] == defs[name]:
                    continue  # the same block as the file below: nothing of its own
                untrusted[name] = untrusted_added_line(p, name)
        below.update(defs)
        merged.update(defs)
        files.append((p.resolve(), origin, sha))
    top, origin, sha = files[-1]
    source = " + ".join(display_path(f) for f, _, _ in files)
    out = StackFile(merged, source, top, origin, sha, files)
    out.untrusted = untrusted
    return out


def read_stacks_file(p: Path) -> tuple[dict[str, StackDef], bool, str]:
    """One stacks file's stacks, whether it says `replace = true`, and its content's
    SHA-256; ConfigError naming the file."""
    raw, sha = _read_layer(p)
    replace = raw.pop("replace", False)
    if not isinstance(replace, bool):
        raise ConfigError(f"{display_path(p)}: key 'replace': expected true or false")
    return stack_defs(raw, p), replace, sha


def replaced_stacks(defs: dict[str, StackDef], below: dict[str, StackDef]) -> list[str]:
    """The stacks of `below` that `defs` defines otherwise (same name, another block)."""
    return [name for name, spec in defs.items() if name in below and below[name] != spec]


def typed_path(path: Path) -> str:
    """A path as typed in this directory (`./stacks.toml`), for a command to copy."""
    where = display_path(path)
    return where if where.startswith(("/", ".")) else f"./{where}"  # as typed here


def untrusted_added_line(path: Path, name: str) -> str:
    """Why a stack that an untrusted ./stacks.toml adds is not run, and how to run it."""
    where = typed_path(path)
    return (
        f"{where}: stack '{name}' is defined by a file not trusted yet; nothing of it is "
        f"built, installed or run until you trust the file (`stackrace stacks --trust "
        f"{where}`, remembered until the file changes) or name it (`stackrace "
        f"--stacks-file {where} …`)"
    )


def skipped_line(stacks: StackFile, lead: str = "skipped") -> str:
    """One line for a command that takes every stack (`install --all`, a bare `verify`):
    which stacks it leaves out as untrusted, and the command that trusts them ('' when
    none)."""
    if not stacks.untrusted:
        return ""
    names = sorted(stacks.untrusted)
    where = typed_path(next((p for p, o, _ in stacks.files if o == HERE), Path(paths.STACKS_FILE)))
    shown = ", ".join(f"'{n}'" for n in names[:4]) + (" …" if len(names) > 4 else "")
    return (
        f"{lead} {len(names)} stack{'s' * (len(names) != 1)} of {where}, not trusted yet "
        f"({shown}): `stackrace stacks --trust {where}` to use {'them' if len(names) > 1 else 'it'}"
    )


def untrusted_line(path: Path, replaced: list[str]) -> str:
    """Why a ./stacks.toml is not used, and the two ways to use it."""
    where = typed_path(path)
    names = ", ".join(f"'{n}'" for n in replaced[:4]) + (" …" if len(replaced) > 4 else "")
    return (
        f"{where}: replaces the shipped {'stack' if len(replaced) == 1 else 'stacks'} "
        f"{names} with its own command; not used until you trust it (`stackrace stacks "
        f"--trust {where}`, remembered until the file changes) or name it "
        f"(`stackrace --stacks-file {where} …`)"
    )


def announcement(stacks: StackFile) -> list[str]:
    """The lines a command that runs stacks prints first: every stacks file it read,
    lowest first, and why (a file outside the package must never act unseen)."""
    out = [f"stacks file: {path} ({origin})" for path, origin, _ in stacks.files]
    if len(stacks.files) > 1:
        out.append("  (each file adds its stacks and replaces those of the same name)")
    return out
