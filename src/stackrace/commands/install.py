"""`stackrace install [NAME…|--all]`: install what the chosen stacks' `needs` declare.

apt packages (one `apt-get update` first; sudo when not root), pip packages into the venv
stackrace runs in or the PyPy venv, npm packages and builds (in a checkout beside the
apps; for a package in the data directory: stackrace.base.paths). Everything is checked
first, so a run with nothing to do takes well under a second. Exit status 1 when any
stack could not be completed.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from stackrace.commands._common import announce, load, resolve_all, trusted_names
from stackrace.commands.namespace import typed_options
from stackrace.commands.parser import describe, examples
from stackrace.commands.target_args import your_app_options
from stackrace.settings.parsers import COMMAND_LINE
from stackrace.stacks.app_spec import YourApp, choose_python
from stackrace.stacks.availability import forget_importable, importable
from stackrace.stacks.catalogue import StackFile
from stackrace.stacks.install import Installer, InstallOutcome, _run
from stackrace.stacks.userapp import APP_TAG

EXAMPLES = examples(
    (
        "stackrace install uvicorn aiohttp",
        "what two stacks need (pip here; apt, Go, npm for others)",
    ),
    ("stackrace install --all --dry-run", "what every stack would need, doing nothing"),
    ("stackrace install -n php-fpm-nginx", "what one would need (-n: --dry-run)"),
    (
        'stackrace install --into "$(which python)" gunicorn-sync uwsgi',
        "servers for your app, in your app's environment",
    ),
)


def register(p: argparse.ArgumentParser) -> None:
    describe(
        p,
        "Install what the chosen stacks need: Python packages into stackrace's environment, "
        "system packages with apt, Go and Node builds. Nothing is installed unasked.",
        EXAMPLES,
        "docs/stacks.md",
    )
    p.add_argument(
        "names", nargs="*", metavar="NAME", help="stacks to install (see `stackrace stacks`)"
    )
    p.add_argument("--all", action="store_true", help="every stack in stacks.toml")
    p.add_argument(
        "-n", "--dry-run", action="store_true", help="print what would be done, do nothing"
    )
    p.add_argument(
        "--into",
        metavar="PYTHON",
        help="install the named servers for your app (`stackrace --app …`) into this interpreter's "
        "environment (PYTHON -m pip install …), not stackrace's",
    )
    p.set_defaults(func=run, read_options=install_options)


def _summary(r: InstallOutcome) -> str:
    if r.error is not None:
        return f"FAILED: {r.error}"
    if not r.before:
        return "ok (nothing to do)"
    what = []
    if r.before.apt:
        what.append("apt " + " ".join(r.before.apt))
    if r.before.venv:
        what.append("the PyPy venv")
    if r.before.pip or r.before.pip_no_deps:
        what.append("pip " + " ".join(r.before.pip + r.before.pip_no_deps))
    if r.before.npm:
        what.append("npm " + " ".join(r.before.npm))
    if r.before.builds:
        what.append("built")
    return "installed: " + "; ".join(what)


@dataclass(frozen=True)
class InstallOptions:
    """`stackrace install`'s command line, typed."""

    names: tuple[str, ...]
    all: bool
    dry_run: bool
    into: str | None
    stacks_file: str | None
    your_app: YourApp


def install_options(args: argparse.Namespace) -> InstallOptions:
    return typed_options(InstallOptions, args, your_app=your_app_options(args))


def run(o: InstallOptions) -> int:
    stacks = load(o.stacks_file, o.your_app)
    if o.into is not None:
        return install_into(o, stacks)
    if o.all == bool(o.names):
        print("stackrace install: name one or more stacks, or --all", file=sys.stderr)
        return 2
    chosen = resolve_all(
        trusted_names(stacks, "stackrace install") if o.all else list(o.names),
        stacks,
        named_in=COMMAND_LINE,
    )
    announce(stacks, "stackrace install")
    t0 = time.monotonic()
    print(f"stackrace install: checking {len(chosen)} stack{'s' * (len(chosen) != 1)}")
    results = Installer(chosen, log=lambda line: print(line, flush=True), dry_run=o.dry_run).run()
    width = max((len(r.stack.base) for r in results), default=0)
    for r in results:
        print(f"  {r.stack.base:<{width}}  {_summary(r) if not o.dry_run else _plan(r)}")
    failed = [r for r in results if r.error is not None]
    changed = sum(bool(r.before) for r in results) - len(failed)
    # a dry run installed nothing: it says what it would do, never "installed"
    done, broke = (
        ("would be installed", "cannot be installed") if o.dry_run else ("installed", "failed")
    )
    print(
        f"{changed} {done}, {len(results) - changed - len(failed)} already complete, "
        f"{len(failed)} {broke} ({time.monotonic() - t0:.1f}s)"
    )
    if failed:
        names = " ".join(r.stack.base for r in failed)
        print(f"stackrace install: could not complete: {names}", file=sys.stderr)
        return 1
    return 0


def _plan(r: InstallOutcome) -> str:
    if r.error is not None:
        return f"cannot install: {r.error}"
    if not r.before:
        return "nothing to do"
    return "would install: " + "; ".join(
        [f"apt package {p}" for p in r.before.apt] + r.before.runtime()
    )


_PYTHON_PROBE = "import sys; print('stackrace-python', sys.version_info[0], sys.version_info[1])"


def python_problem(python: str) -> str | None:
    """None when `python` is a Python 3 interpreter, else why not. It is run once, the way
    pip will be run: isolated (-I: neither the current directory nor PYTHONPATH on its
    path) and from /, so that what it runs is its own (`install --into /bin/sh` ran
    `/bin/sh -m pip`, that is ./pip of the current directory)."""
    try:
        out = subprocess.run(
            [python, "-I", "-c", _PYTHON_PROBE],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=30,
            stdin=subprocess.DEVNULL,
            cwd="/",
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot run it as a Python interpreter: {exc}"
    words = out.stdout.split()
    if out.returncode != 0 or words[:1] != ["stackrace-python"] or len(words) != 3:
        return "not a Python interpreter (it does not run `-I -c` as Python does)"
    if words[1] != "3":
        return f"Python {words[1]}.{words[2]}: servers need Python 3"
    return None


def install_into(o: InstallOptions, stacks: StackFile) -> int:
    """`install --into PYTHON SERVER…`: the app templates' pip packages, with that
    interpreter's own pip, then a check that each server imports there. Nothing goes
    into the environment stackrace runs in unless PYTHON is its interpreter."""
    prog = "stackrace install"
    if o.all or not o.names:
        print(
            f"{prog}: --into needs the servers by name (e.g. gunicorn-sync uvicorn)",
            file=sys.stderr,
        )
        return 2
    python = choose_python(o.into)
    problem = python_problem(python)
    if problem:
        print(f"{prog}: --into {o.into}: {problem}", file=sys.stderr)
        return 2
    plain: list[str] = []
    no_deps: list[str] = []
    modules: list[str] = []
    for name in o.names:
        base = name.removesuffix(APP_TAG).partition(":")[0]
        if base in stacks.untrusted:  # its pip packages are a stranger's choice too
            print(f"{prog}: {stacks.untrusted[base]}", file=sys.stderr)
            return 2
        spec = stacks.get(base)
        if spec is None or spec.app is None:
            able = ", ".join(n for n, d in stacks.items() if d.app is not None)
            print(f"{prog}: {name!r} is not a server that runs your app ({able})", file=sys.stderr)
            return 2
        plain += [p for p in spec.app.pip if p not in plain]
        no_deps += [p for p in spec.app.pip_no_deps if p not in no_deps]
        modules += [m for m in spec.app.modules if m not in modules]
    print(f"{prog}: into {python} (its own pip): {' '.join(plain + no_deps)}", flush=True)
    # -I: pip from the interpreter's own packages, never a ./pip or ./pip.py of the
    # current directory (nor PYTHONPATH); run from / besides (see python_problem)
    base_argv = [
        python,
        "-I",
        "-m",
        "pip",
        "install",
        "-q",
        "--prefer-binary",
        "--disable-pip-version-check",
    ]
    for reqs, extra in ((plain, []), (no_deps, ["--no-deps"])):
        if not reqs:
            continue
        argv = [*base_argv, *extra, *reqs]
        if o.dry_run:
            print(f"  $ {' '.join(argv)}")
            continue
        # a StepError (pip failed: its command and its output's end) is said by cli.py
        seconds = _run(argv, cwd=Path("/"))
        print(f"  pip install {' '.join(extra + reqs)}: done in {seconds:.1f}s", flush=True)
    if o.dry_run:
        return 0
    forget_importable(python)
    absent = [m for m, ok in importable(python, modules).items() if not ok]
    if absent:
        print(f"{prog}: still not importable by {python}: {', '.join(absent)}", file=sys.stderr)
        return 1
    print(f"installed for {python}: {', '.join(o.names)}")
    return 0
