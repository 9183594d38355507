"""Installing what the chosen stacks' `needs` declare and this machine lacks
(stackrace.stacks.availability says what that is).

Work is batched across stacks (one `apt-get update` and one `apt-get install`, one pip run
per venv, each build once) because a resolver run or an apt transaction costs seconds;
when a batch fails, it is retried stack by stack so the failure is pinned on the right one.
Every stack is checked again after the work: anything still missing is its error.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from stackrace.base import madeby
from stackrace.base.errors import StackraceError
from stackrace.base.printable import terminal
from stackrace.stacks.availability import (
    PYPY_VENV,
    Missing,
    missing,
    missing_apt,
    rel_path,
)
from stackrace.stacks.definition import Stack
from stackrace.stacks.placeholders import FilledNeeds, filled_needs

_TAIL_LINES = 15
Log = Callable[[str], None]


def _npm_argv(cwd: Path, packages: list[str]) -> list[str]:
    """Install from the lock file or package.json when the app has them (without
    rewriting them); otherwise the named packages, unsaved."""
    quiet = ["--no-audit", "--no-fund"]
    if (cwd / "package-lock.json").exists():
        return ["npm", "ci", *quiet]
    if (cwd / "package.json").exists():
        return ["npm", "install", *quiet]
    return ["npm", "install", *quiet, "--no-save", *packages]


class StepError(StackraceError, RuntimeError):
    """A command failed; the message holds the command and the end of its output."""


def _sudo() -> list[str]:
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") is None:
        raise StepError("apt-get needs root, and sudo is not installed")
    return ["sudo"]


def _run(argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> float:
    """Run a command, output captured; raise StepError with its tail when it fails."""
    t0 = time.monotonic()
    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            check=False,
        )
    except FileNotFoundError:
        raise StepError(f"{argv[0]}: not found") from None
    if proc.returncode != 0:
        # a build's own output: printable before it is shown
        tail = "\n".join(terminal(x) for x in proc.stdout.strip().splitlines()[-_TAIL_LINES:])
        raise StepError(f"`{' '.join(argv)}` exited with {proc.returncode}\n{tail}")
    return time.monotonic() - t0


def _venv_name() -> str:
    """The venv stackrace runs in, as messages name it (.venv in a checkout)."""
    return rel_path(Path(sys.prefix))


def _indent(text: str) -> str:
    return "\n".join("      " + line for line in text.splitlines())


@dataclass
class InstallOutcome:
    stack: Stack
    before: Missing
    done: list[str] = field(default_factory=list)
    error: str | None = None


class Installer:
    """Installs what the chosen stacks need; `run()` returns one result per stack."""

    def __init__(self, stacks: Sequence[Stack], log: Log = print, dry_run: bool = False):
        # variants of one stack need the same things: keep one per base; a stack in front
        # of another (nginx-proxy) brings the one behind it
        expanded = [part for s in stacks for part in (s, s.upstream) if part is not None]
        self.stacks = list({s.base: s for s in expanded}.values())
        self.log = log
        self.dry_run = dry_run
        self.results: dict[str, InstallOutcome] = {}

    # each phase acts on the stacks that still lack something and have not failed
    def _pending(self) -> list[InstallOutcome]:
        return [r for r in self.results.values() if r.error is None]

    def run(self) -> list[InstallOutcome]:
        apt_missing = set(missing_apt(p for s in self.stacks for p in s.spec.needs.apt))
        for s in self.stacks:
            try:
                self.results[s.base] = InstallOutcome(s, missing(s, apt_missing))
            except ValueError as exc:
                self.results[s.base] = InstallOutcome(s, Missing(), error=str(exc))
        if not any(r.before for r in self.results.values()):
            return list(self.results.values())
        for phase in (self._apt, self._pypy_venv, self._pip, self._npm, self._builds):
            phase()
        if not self.dry_run:
            self._recheck()
        return list(self.results.values())

    def _step(
        self,
        what: str,
        owners: list[InstallOutcome],
        argv: list[str],
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> bool:
        """Run one command for the stacks that need it; on failure they all carry the error."""
        self.log(f"  {what}  [{', '.join(r.stack.base for r in owners)}]")
        if self.dry_run:
            self.log(f"      $ {' '.join(argv)}")
            return True
        try:
            seconds = _run(argv, cwd=cwd, env=env)
        except StepError as exc:
            for r in owners:
                r.error = str(exc).split("\n")[0]
            self.log(_indent(str(exc)))
            return False
        self.log(f"      done in {seconds:.1f}s")
        for r in owners:
            r.done.append(what)
        return True

    def _apt(self) -> None:
        owners = [r for r in self._pending() if r.before.apt]
        if not owners:
            return
        packages = list(dict.fromkeys(p for r in owners for p in r.before.apt))
        try:
            sudo = _sudo()
        except StepError as exc:
            for r in owners:
                r.error = str(exc)
            return
        env = {"DEBIAN_FRONTEND": "noninteractive"}
        apt = [*sudo, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get"] if sudo else ["apt-get"]
        if not self._step("apt-get update", owners, [*apt, "update", "-qq"], env=env):
            return
        argv = [*apt, "install", "-y", "-qq", "--no-install-recommends", *packages]
        if self._step(f"apt: {' '.join(packages)}", owners, argv, env=env):
            return
        # find out whose package failed
        for r in owners:
            r.error = None
            argv = [*apt, "install", "-y", "-qq", "--no-install-recommends", *r.before.apt]
            self._step(f"apt: {' '.join(r.before.apt)}", [r], argv, env=env)

    def _pypy_venv(self) -> None:
        owners = [r for r in self._pending() if r.before.venv]
        if owners:
            # made (and marked: what `clean` may remove, stackrace.base.madeby) before the venv
            # is made in it; a directory already there stays unmarked
            with contextlib.suppress(OSError):  # the step itself says why it fails
                madeby.make_dir(PYPY_VENV, "the PyPy venv of the PyPy stacks")
            self._step(
                f"venv: pypy3 -m venv {rel_path(PYPY_VENV)}",
                owners,
                ["pypy3", "-m", "venv", str(PYPY_VENV)],
            )

    def _python(self, which: str) -> str:
        return sys.executable if which == "main" else str(PYPY_VENV / "bin" / "python")

    def _pip(self) -> None:
        # plain requirements before --no-deps ones: meinheld needs the greenlet installed
        # by the first run
        for which in ("main", "pypy"):
            for no_deps in (False, True):
                self._pip_batch(which, no_deps)

    def _pip_batch(self, which: str, no_deps: bool) -> None:
        def reqs(r: InstallOutcome) -> list[str]:
            return r.before.pip_no_deps if no_deps else r.before.pip

        owners = [r for r in self._pending() if r.stack.spec.needs.venv == which and reqs(r)]
        if not owners:
            return
        where = _venv_name() if which == "main" else rel_path(PYPY_VENV)
        label = f"pip{' --no-deps' if no_deps else ''} into {where}:"
        # --prefer-binary: an older wheel beats compiling a newer sdist
        argv = [self._python(which), "-m", "pip", "install", "-q", "--prefer-binary"]
        argv += ["--disable-pip-version-check", *(["--no-deps"] if no_deps else [])]
        batch = list(dict.fromkeys(p for r in owners for p in reqs(r)))
        if self._step(f"{label} {' '.join(batch)}", owners, [*argv, *batch]) or len(owners) == 1:
            return
        self.log("      retrying stack by stack to find the one that fails")
        for r in owners:
            r.error = None
            self._step(f"{label} {' '.join(reqs(r))}", [r], [*argv, *reqs(r)])

    def _npm(self) -> None:
        for r in self._pending():
            if r.before.npm:
                cwd = filled_needs(r.stack).npm_cwd
                self._step(
                    f"npm in {rel_path(cwd)}: {' '.join(r.before.npm)}",
                    [r],
                    _npm_argv(cwd, r.before.npm),
                    cwd=cwd,
                )

    def _builds(self) -> None:
        done: dict[tuple[str, str], str | None] = {}  # (cwd, commands) → error
        for r in self._pending():
            if not r.before.builds:
                continue
            filled = filled_needs(r.stack)
            cwd, commands = filled.build_cwd, filled.build
            key = (str(cwd), repr(commands))
            if key in done:  # another stack built the same thing
                r.error = done[key]
                continue
            if not commands:
                r.error = f"{r.before.builds[0]}, and the stack declares no build"
                self.log(f"  {r.stack.base}: {r.error}")
                continue
            for argv in commands:
                if shutil.which(argv[0]) is None and not Path(argv[0]).exists():
                    r.error = f"{argv[0]} not found on PATH (needed to build {rel_path(cwd)})"
                    self.log(f"  build {rel_path(cwd)}: {r.error}")
                    break
                if not self._step(
                    f"build in {rel_path(cwd)}: {' '.join(argv)}", [r], argv, cwd=cwd
                ):
                    break
            else:
                self._touch_built(filled)
            done[key] = r.error

    def _touch_built(self, filled: FilledNeeds) -> None:
        # `go build` leaves an up-to-date binary as it is, so after a checkout that only
        # touched the sources it would still look older than them: mark it as fresh
        if self.dry_run:
            return
        for path in filled.built:
            if path.exists():
                os.utime(path)

    def _recheck(self) -> None:
        """After the work, each stack must be complete; anything left is its error."""
        apt_missing = set(missing_apt(p for s in self.stacks for p in s.spec.needs.apt))
        for r in self.results.values():
            if r.error is not None or not r.before:
                continue
            left = missing(r.stack, apt_missing)
            problems = [f"apt package {p} not installed" for p in left.apt] + left.runtime()
            if problems:
                r.error = "still missing after install: " + "; ".join(problems)
