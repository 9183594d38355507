"""The real `stackrace` command for a run that starts nothing, without its start-up:
`run_forked(*args)` runs
it as `run_cli` does (its own process, stdin closed, stdout and stderr apart, the exit
status as it ends), forked from one Python that has already imported stackrace's CLI.

Why: a run that is refused before anything starts spends ~0.35 CPU-s importing
stackrace (the parser of the command imports most of it) and ~0.01 s on the refusal
itself; the hardening tests make about a hundred such runs. The child of the fork is
a fresh process in all that a run can see: it takes the test's working directory and
environment before it calls `stackrace.cli.main()` as the console script does (argv
from sys.argv, so the subreaper is set as in a real run), its exit status is
`sys.exit(main())`'s, atexit handlers run, and nothing of an earlier run is in it (each
run is forked from the same parent, which never runs a command). stackrace reads its
environment when a command runs, not at import (tests/hardening/test_cli_forks.py
checks that a variable given to one run reaches it).

Only for runs that start nothing (refused, or reading and writing files): a command that
starts stacks or engines would have them as children of the fork server, not of the
test (whose checks of leftover processes walk its own children), so those keep
`run_cli`.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from tests.helpers import ROOT

# The server: imports the CLI and every command's module, then forks a child per line
# of JSON read from stdin ({"argv", "cwd", "env", "out", "err"}) and answers each with
# one line, the child's exit status (as subprocess gives it: -N for a signal).
_SERVER = r"""
import atexit, gc, importlib, json, os, sys
import stackrace.cli as cli

cli.build_parser()  # imports every command's module, as a run's parser would its own
# and what the app's refusals import on their way (Textual: 0.25 CPU-s a run)
for name in ("stackrace.tui.app", "stackrace.race.live.setup", "stackrace.stacks.catalogue"):
    importlib.import_module(name)
gc.freeze()  # what is imported stays out of the children's collections (fewer copies)
for line in sys.stdin:
    req = json.loads(line)
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, req["out"]), (2, req["err"])):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        os.close(null)
        sys.stdin = open(0, closefd=False)
        sys.argv = [cli.__file__, *req["argv"]]
        try:
            code = cli.main()
        except SystemExit as exc:  # argparse's refusals and --help
            code = exc.code
        if code is None:
            rc = 0
        elif isinstance(code, int):
            rc = code & 0xFF
        else:
            print(code, file=sys.stderr)
            rc = 1
        # the end of `sys.exit(main())`: atexit handlers, the streams flushed; not the
        # teardown of every module (most of a fork's cost, and nothing a run can see)
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    _, status = os.waitpid(pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    sys.stdout.write(json.dumps({"pid": pid, "rc": rc}) + "\n")
    sys.stdout.flush()
"""


class _Server:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        self.lock = threading.Lock()
        self.dir = Path(tempfile.mkdtemp(prefix="stackrace-forks-"))
        atexit.register(self.close)

    def close(self) -> None:
        """End the server (its stdin closed: it leaves its loop) and reap it."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def run(
        self, args: tuple[str, ...], cwd: Path, env: dict[str, str], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        out, err = self.dir / "out", self.dir / "err"
        req = {"argv": list(args), "cwd": str(cwd), "env": env, "out": str(out), "err": str(err)}
        with self.lock:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            answer = _readline(self.proc, timeout)
            rc = json.loads(answer)["rc"]
            return subprocess.CompletedProcess(
                ["stackrace", *args], rc, out.read_text(), err.read_text()
            )


def _readline(proc: subprocess.Popen[str], timeout: float) -> str:
    """The server's answer; a run that takes longer than `timeout` ends the server (and
    the test: a refusal is immediate)."""
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(proc.stdout.readline()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    if not got or not got[0]:
        proc.kill()
        raise subprocess.TimeoutExpired(["stackrace (forked)"], timeout)
    return got[0]


_server: _Server | None = None


def run_forked(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`run_cli(*args)` for a run that starts nothing: refused, or one that only reads
    and writes files (`report`, `stacks`, `--help`); see above."""
    global _server
    if _server is None or _server.proc.poll() is not None:
        _server = _Server()
    return _server.run(args, cwd, {**os.environ, **(env or {})}, timeout)
