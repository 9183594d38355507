"""What a stack's `needs` declare that is not here, and so whether it can start (nothing
is installed or changed: installing it is stackrace.stacks.install's).

Everything is read, never run, where it can be, so that the picker, `stackrace stacks`
and a second `stackrace install` know in well under a second:

- apt packages: one `dpkg-query` for all of them;
- pip packages: the installed distributions' metadata, read in-process (importlib.metadata
  for the project's venv, which is the running interpreter's; the dist-info folders of
  .venv-pypy for the PyPy venv), version specifiers and extras included;
- builds: every `built` file exists and is newer than every source file in `build_cwd`;
- npm packages: `node_modules/NAME/package.json` under `npm_cwd`;
- an app's own interpreter (another Python than stackrace's): which modules it can
  import, asked once per interpreter (or told by the app's inspection).
"""

from __future__ import annotations

import glob
import importlib
import importlib.metadata
import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from stackrace.base import paths
from stackrace.stacks.definition import Stack
from stackrace.stacks.placeholders import FilledNeeds, filled_needs

# the PyPy venv: .venv-pypy in a checkout, the data directory for a package (base/paths.py)
PYPY_VENV = paths.pypy_venv()
# not sources of a build: outputs, caches and dependencies
_NOT_SOURCES = {"bin", "node_modules", "__pycache__", ".git", "vendor"}


@dataclass
class Missing:
    """What one stack lacks, by kind; empty when the stack can start."""

    apt: list[str] = field(default_factory=list)
    venv: bool = False  # the PyPy venv does not exist
    pip: list[str] = field(default_factory=list)
    pip_no_deps: list[str] = field(default_factory=list)
    builds: list[str] = field(default_factory=list)  # built files missing or stale
    npm: list[str] = field(default_factory=list)
    bins: list[str] = field(default_factory=list)
    # modules the stack's own interpreter (an app's) cannot import, and that interpreter
    modules: list[str] = field(default_factory=list)
    python: str = ""

    def runtime(self) -> list[str]:
        """What keeps the stack from starting (apt packages count only through bins)."""
        out = [f"{b} not found" for b in self.bins]
        out += [f"{m} is not installed for {self.python}" for m in self.modules]
        if self.venv:
            out.append(f"{rel_path(PYPY_VENV)} does not exist")
        out += [f"pip package {p} not installed" for p in self.pip + self.pip_no_deps]
        out += self.builds
        out += [f"npm package {p} not installed" for p in self.npm]
        return out

    def __bool__(self) -> bool:
        return bool(
            self.apt
            or self.venv
            or self.pip
            or self.pip_no_deps
            or self.builds
            or self.npm
            or self.bins
            or self.modules
        )


def rel_path(path: Path | str) -> str:
    """A path as messages show it: relative to the directory the stacks build in."""
    try:
        return str(Path(path).relative_to(paths.work_root()))
    except ValueError:
        return str(path)


def _find_bin(name: str) -> bool:
    if "/" in name:
        return os.access(name, os.X_OK) and Path(name).is_file()
    return shutil.which(name) is not None


def missing_apt(packages: Iterable[str]) -> list[str]:
    """The packages dpkg does not list as installed ("ii"), in the order given."""
    wanted = list(dict.fromkeys(packages))
    if not wanted:
        return []
    if shutil.which("dpkg-query") is None:
        return wanted
    out = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package} ${db:Status-Abbrev}\n", *wanted],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    installed = set()
    for line in out.splitlines():
        name, _, status = line.partition(" ")
        if status.startswith("ii"):
            installed.add(name.split(":")[0])  # "libfoo:amd64" → "libfoo"
    return [p for p in wanted if p not in installed]


def _site_packages(which: str) -> list[str] | None:
    """The paths to read distributions from: None means the running interpreter's."""
    if which == "main":
        return None
    return sorted(glob.glob(str(PYPY_VENV / "lib" / "*" / "site-packages")))


class _Dists:
    """Installed distributions of one venv, looked up by name and remembered.

    Only the requested ones are read: parsing every METADATA file of a venv takes ~50 ms.
    """

    def __init__(self, which: str) -> None:
        importlib.invalidate_caches()
        self.path = _site_packages(which)
        self._seen: dict[str, importlib.metadata.Distribution | None] = {}

    def get(self, name: str) -> importlib.metadata.Distribution | None:
        key = canonicalize_name(name)
        if key not in self._seen:
            if self.path is not None and not self.path:
                found = None  # the venv does not exist
            else:
                dists = (
                    importlib.metadata.Distribution.discover(name=name)
                    if self.path is None
                    else importlib.metadata.Distribution.discover(name=name, path=self.path)
                )
                found = next(iter(dists), None)
            self._seen[key] = found
        return self._seen[key]


def _satisfied(req: Requirement, dists: _Dists, depth: int = 0) -> bool:
    dist = dists.get(req.name)
    if dist is None:
        return False
    if req.specifier and not req.specifier.contains(dist.version, prereleases=True):
        return False
    if depth > 0 or not req.extras:
        return True
    # an extra is satisfied when the requirements it adds are (one level deep)
    for line in dist.requires or []:
        sub = Requirement(line)
        if sub.marker is None:
            continue
        if not any(sub.marker.evaluate({"extra": extra}) for extra in req.extras):
            continue
        if not _satisfied(sub, dists, depth + 1):
            return False
    return True


def missing_pip(requirements: Iterable[str], which: str = "main") -> list[str]:
    """The requirements (pip syntax) not satisfied in the venv, in the order given."""
    reqs = list(dict.fromkeys(requirements))
    if not reqs:
        return []
    dists = _Dists(which)
    out = []
    for text in reqs:
        try:
            req = Requirement(text)
        except InvalidRequirement as exc:
            raise ValueError(f"pip requirement {text!r} is not valid: {exc}") from None
        if not _satisfied(req, dists):
            out.append(text)
    return out


def _sources(build_cwd: Path, built: Sequence[Path]) -> Iterable[Path]:
    skip = {p.resolve() for p in built}
    for dirpath, dirnames, filenames in os.walk(build_cwd):
        dirnames[:] = [d for d in dirnames if d not in _NOT_SOURCES]
        for f in filenames:
            path = Path(dirpath, f)
            if path.resolve() not in skip:
                yield path


def stale_builds(needs: FilledNeeds) -> list[str]:
    """Why the stack's build must run: a built file missing, or older than a source."""
    if not needs.built:
        return []
    absent = [b for b in needs.built if not b.exists()]
    if absent:
        return [f"{rel_path(b)} not built" for b in absent]
    oldest = min(b.stat().st_mtime for b in needs.built)
    newer = [s for s in _sources(needs.build_cwd, needs.built) if s.stat().st_mtime > oldest]
    if newer:
        return [f"{rel_path(needs.built[0])} is older than {rel_path(newer[0])}"]
    return []


def _npm_name(spec: str) -> str:
    # "@scope/pkg@1.2" → "@scope/pkg"; "pkg@^2" → "pkg"
    at = spec.find("@", 1)
    return spec if at == -1 else spec[:at]


def missing_npm(packages: Iterable[str], cwd: Path) -> list[str]:
    """The npm packages not under `cwd`/node_modules."""
    return [
        p for p in packages if not (cwd / "node_modules" / _npm_name(p) / "package.json").exists()
    ]


# Which modules an interpreter other than stackrace's can import: asked once per
# interpreter (a process start costs ~50 ms), or told by the app's inspection.
_IMPORTABLE: dict[str, dict[str, bool]] = {}


def remember_importable(python: str, found: dict[str, bool]) -> None:
    _IMPORTABLE.setdefault(python, {}).update(found)


def importable(python: str, modules: Iterable[str]) -> dict[str, bool]:
    """Whether `python` can import each module (found on its path, not imported)."""
    known = _IMPORTABLE.setdefault(python, {})
    ask = [m for m in modules if m not in known]
    if ask:
        code = (
            "import importlib.util, json, sys\n"
            "def f(m):\n"
            "    try:\n        return importlib.util.find_spec(m) is not None\n"
            "    except Exception:\n        return False\n"
            "print(json.dumps({m: f(m) for m in sys.argv[1:]}))"
        )
        try:
            out = subprocess.run(
                [python, "-c", code, *ask],
                capture_output=True,
                text=True,
                timeout=30,
                stdin=subprocess.DEVNULL,
                check=False,
            ).stdout

            known.update(json.loads(out.strip().splitlines()[-1]))
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError, RecursionError):
            known.update({m: False for m in ask})
    return {m: known[m] for m in modules}


def forget_importable(python: str) -> None:
    """After an install into `python`: ask again."""
    _IMPORTABLE.pop(python, None)


def missing(stack: Stack, apt_missing: set[str] | None = None) -> Missing:
    """Everything the stack's `needs` declare that is not here."""
    needs = stack.spec.needs
    filled = filled_needs(stack)  # every templated need filled once, then checked
    m = Missing()
    if apt_missing is None:
        m.apt = missing_apt(needs.apt)
    else:
        m.apt = [p for p in needs.apt if p in apt_missing]
    if needs.venv == "pypy" and not (PYPY_VENV / "bin" / "python").exists():
        m.venv = True
        m.pip = list(needs.pip)
        m.pip_no_deps = list(needs.pip_no_deps)
    else:
        m.pip = missing_pip(needs.pip, needs.venv)
        m.pip_no_deps = missing_pip(needs.pip_no_deps, needs.venv)
    m.builds = stale_builds(filled)
    m.npm = missing_npm(needs.npm, filled.npm_cwd)
    m.bins = [b for b in filled.bins if not _find_bin(b)]
    if stack.spec.python and needs.modules and stack.spec.python not in m.bins:
        m.python = stack.spec.python
        m.modules = [k for k, ok in importable(m.python, needs.modules).items() if not ok]
    return m


class Availability(NamedTuple):
    """Whether a stack can start on this machine, and if not, why and what fixes it."""

    available: bool
    reason: str = ""
    fix: str = ""


def availability(stack: Stack) -> Availability:
    """Can the stack start here, and if not, why and what fixes it.

    Unavailable when a program it runs is not found, a pip package is missing (or the
    wrong version), or a built file is missing or older than its sources.
    """
    # a stack in front of another (nginx-proxy) needs that one too
    parts = [stack] if stack.upstream is None else [stack, stack.upstream]
    problems: list[str] = []
    for part in parts:
        try:
            problems += [p for p in missing(part, apt_missing=set()).runtime() if p not in problems]
        except ValueError as exc:
            return Availability(False, str(exc), f"fix stack '{part.base}' in stacks.toml")
    if not problems:
        return Availability(True)
    reason = "; ".join(problems[:3]) + (
        f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
    )
    if stack.spec.python:  # an app's servers go into the app's environment, said so
        server = stack.base.partition("[")[0]
        return Availability(False, reason, f"stackrace install --into {stack.spec.python} {server}")
    return Availability(
        False, reason, f"stackrace install {' '.join(dict.fromkeys(p.base for p in parts))}"
    )
