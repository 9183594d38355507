"""Starting, watching and stopping stacks.

    async with Launcher(on_change=print) as launcher:   # run dir: a fresh temp dir
        running = await launcher.start(resolve("uvicorn", load_stacks()))   # waits for ready
        running.url                      # http://127.0.0.1:PORT (https:// with tls = true)
        running.root_pids, running.all_pids(), running.log_path, running.log_tail(20)
        launcher.poll()                  # call a few times a second: notices crashed stacks
        await launcher.stop(running)
    # every stack still running is stopped here (stop_all), the watchdog released

API: `Launcher(run_root=None, env=None, on_change=None)`; `await start(stack, port=None)`
-> RunningStack or LaunchError (message + `.log_tail`); `poll()` -> stacks that just
crashed; `await stop(rs)`; `await stop_all()`; `close()`. `RunningStack.state` is one of
starting, ready, crashed (died after it was ready), failed (never ready), stopped, with
`exit_code` and `error` for the last two kinds of ending. Resource figures come from
`stackrace.stacks.sampler.TreeSampler(rs.root_pids)`.

Guarantees:
- each stack runs on a free loopback port, in its own session, stdin closed, no shell in
  between; `ready` means the first HTTP 200 on its health path within `ready_timeout`
  (or a status of its `health_status`); any other answer but a 5xx is definite and
  ends the start at once, with the status and the end of the body;
- stdout and stderr go to one log file per stack (`running.log_tail()`);
- stop is SIGTERM to the stack's sessions, then SIGKILL after `stop_timeout`; processes
  that made a session of their own (php-fpm) are covered because their pid is watched;
- every process dies with stackrace even when stackrace is SIGKILLed: children get
  PR_SET_PDEATHSIG and a watchdog process kills whatever is left in their sessions;
- a stack that fails to start raises LaunchError with the reason and its log tail, and
  leaves the others running; one that dies later is reported by `poll()`;
- a start that is cancelled (the caller's task) stops what it had started.
- a stack with an `upstream` (nginx-proxy) starts that stack first, on a port of its own
  and in `run_dir/upstream`, and itself once the upstream answers 200: both are one
  RunningStack (one log, one process tree, stopped together).
- a stack with `tls = true` gets the machine's certificate (stacks.certificate, made
  once), and its readiness probe speaks TLS and verifies that certificate.

Start stacks from the event loop's thread (not a short-lived worker thread): the kernel
ties PR_SET_PDEATHSIG to the thread that forked the child.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import itertools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from stackrace.base import madeby, paths
from stackrace.base.errors import StackraceError
from stackrace.base.ports import free_port, port_in_use
from stackrace.base.slug import short as short_name
from stackrace.base.slug import slug
from stackrace.settings import statuses
from stackrace.stacks import certificate, cgroup, listen, probe
from stackrace.stacks.catalogue import HOST, ConfigError, Stack, placeholders, render
from stackrace.stacks.refusal import refusal_line
from stackrace.supervise import hurry, rundirs, sweep
from stackrace.supervise.procs import child_setup, pids_in_sessions, signal_sessions
from stackrace.supervise.watchdog import Watchdog

STARTING = "starting"
READY = "ready"
CRASHED = "crashed"  # died after it was ready
FAILED = "failed"  # never became ready
STOPPED = "stopped"

_POLL_S = 0.05
# the longest run dir that leaves room for a socket name (sun_path holds 107 bytes)
_MAX_RUN_DIR = 80
_KEEP_RUNS = 20  # run directories (logs) kept under runs_dir()
_STORAGE_ERRNOS = (errno.ENOSPC, errno.EROFS, errno.EDQUOT)


def _statuses_text(codes: frozenset[int]) -> str:
    if codes == frozenset({200}):
        return "200"
    lo, hi = min(codes), max(codes)
    return (
        f"{lo}-{hi}" if len(codes) == hi - lo + 1 else ", ".join(list(map(str, sorted(codes)))[:8])
    )


def _program(p: subprocess.Popen[bytes]) -> str:
    """The program a stack's process runs (the launcher starts each from a list)."""
    args = p.args
    return str(args[0] if isinstance(args, list | tuple) else args)


class LaunchError(StackraceError, RuntimeError):
    """A stack could not be started; `log_tail` holds the end of its output."""

    def __init__(self, message: str, log_tail: str = "") -> None:
        super().__init__(message)
        self.log_tail = log_tail

    def __str__(self) -> str:
        text = super().__str__()
        if self.log_tail:
            text += "\n--- log tail ---\n" + self.log_tail
        return text


def runs_dir() -> Path:
    """$STACKRACE_RUNS_DIR, else runs/ in the cache directory (stackrace.base.paths:
    ~/.cache/stackrace/runs)."""
    if os.environ.get("STACKRACE_RUNS_DIR"):
        return Path(os.environ["STACKRACE_RUNS_DIR"])
    return paths.cache_dir() / "runs"


# the name `new_run_root` gives: mkdtemp's prefix (a time) and its 8 random characters
_RUN_ROOT_NAME = re.compile(r"^\d{8}-\d{6}-[A-Za-z0-9_]{8}$")
_RUN_ROOT_MARK = ".lock"
# what the markers of the runs directory and of each run directory say (stackrace.base.madeby)
RUNS_MADE_FOR = "run directories (the stacks' logs)"
RUN_MADE_FOR = "one run's stacks: logs, configs, sockets"


def new_run_root(keep: int = _KEEP_RUNS) -> tuple[Path, int]:
    """A new directory for one launcher's stacks, named by time, and a descriptor that
    holds its lock while the launcher lives. The oldest run directories beyond `keep`
    are removed, unless a live launcher still holds them (the lock dies with its
    process), so the logs of recent runs stay findable and old ones do not pile up.

    Only directories this function made are ever removed: named as it names them,
    holding its lock file, not a link, and inside the runs directory once every link
    is resolved. $STACKRACE_RUNS_DIR may point anywhere (a home directory, a shared
    folder): nothing else in it is touched."""
    base = paths.writable_dir(
        runs_dir(), "its run directories", "STACKRACE_RUNS_DIR", made_for=RUNS_MADE_FOR
    )
    try:
        root = Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=base))
        madeby.mark(root, RUN_MADE_FOR)
    except OSError as exc:  # e.g. a full disk
        raise paths.UnwritableDirError(
            f"cannot make a run directory in {base}: {exc.strerror or exc}"
        ) from None
    fd = os.open(root / _RUN_ROOT_MARK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    old = sorted(_own_run_roots(base), key=lambda d: d.stat().st_mtime)
    for d in old[: max(0, len(old) - keep)]:
        try:
            other = os.open(d / _RUN_ROOT_MARK, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except OSError:
            continue
        try:
            fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # in use by a running stackrace
        else:
            shutil.rmtree(d, ignore_errors=True)
        finally:
            os.close(other)
    return root, fd


def _own_run_roots(base: Path) -> list[Path]:
    """The run directories `new_run_root` made under `base` (see its docstring)."""
    real_base = os.path.realpath(base)
    out = []
    for d in base.iterdir():
        if not _RUN_ROOT_NAME.match(d.name) or d.is_symlink() or not d.is_dir():
            continue
        if os.path.dirname(os.path.realpath(d)) != real_base:
            continue
        mark = d / _RUN_ROOT_MARK
        if mark.is_file() and not mark.is_symlink():
            out.append(d)
    return out


@dataclass
class RunningStack:
    stack: Stack
    port: int
    run_dir: Path
    log_path: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    state: str = STARTING
    exit_code: int | None = None
    error: str | None = None
    started_at: float = 0.0
    memory_cap: str | None = None  # "256M", or why a requested cap is unavailable
    # the stack's cgroup: its memory cap's, else one that only tracks its processes
    # (supervise.sweep), where this machine lets stackrace make one
    cgroup_dir: Path | None = None
    # STACKRACE_STACK in every process of the stack: how a daemon that left its session
    # and its parents is still found (supervise.sweep)
    token: str = field(default_factory=sweep.new_token)
    tracking_only: bool = False  # cgroup_dir only tracks the processes (no memory cap)
    # its own listening sockets bound beyond loopback ("0.0.0.0:8080"), seen so far
    exposed: list[str] = field(default_factory=list)
    reaped: bool = False  # stopped and waited for: its pids may belong to others now
    # being stopped by us: a process that exits now was told to (poll() must not call
    # that a crash; a cluster's status poll came in the middle of a stop and did)
    stopping: bool = False
    host: str = HOST  # the address it binds (a cluster's app node: see stackrace.cluster)
    # a stack with `tls = true`: the certificate it serves (stacks.certificate), which
    # its probes and the engine trust
    cert: Path | None = None

    @property
    def name(self) -> str:
        return self.stack.name

    @property
    def url(self) -> str:
        scheme = "https" if self.stack.spec.tls else "http"
        return f"{scheme}://{self.host}:{self.port}"

    @property
    def main(self) -> subprocess.Popen[bytes] | None:
        return self.procs[-1] if self.procs else None

    @property
    def sessions(self) -> list[int]:
        # a process started with setsid(), or one that calls it itself, leads a session
        # whose id is its own pid
        return [p.pid for p in self.procs]

    @property
    def root_pids(self) -> list[int]:
        return [p.pid for p in self.procs]

    def all_pids(self) -> list[int]:
        return pids_in_sessions(self.sessions)

    def log_tail(self, lines: int = 20) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - 16384))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def last_log_line(self) -> str:
        """The last line the stack logged, printable and cut to one line ('' if none):
        what a process that died at start said last ("No module named gunicorn")."""
        for line in reversed(self.log_tail(10).splitlines()):
            text = " ".join("".join(c if c.isprintable() else " " for c in line).split())
            if text:
                return text if len(text) <= 200 else text[:199] + "…"
        return ""

    def dead_process(self) -> subprocess.Popen[bytes] | None:
        for p in self.procs:
            if p.poll() is not None:
                return p
        return None


StateCallback = Callable[[RunningStack], None]


class Launcher:
    """Starts and supervises stacks; see the module docstring for the guarantees.

    `run_root` holds one directory per stack (log, rendered configs, sockets, pid files);
    by default a new one under the runs directory (see `new_run_root`). `env` is added
    to every stack's environment (e.g. the database settings); `extra_env` may be changed
    between starts.
    `on_change(rs)` is called on every state change (ready, crashed, failed, stopped);
    crashes are noticed by `poll()`, so call it a few times a second.
    """

    def __init__(
        self,
        run_root: Path | None = None,
        env: dict[str, str] | None = None,
        on_change: StateCallback | None = None,
        host: str = HOST,
        detach_watchdog: bool = False,
    ) -> None:
        self._root_lock: int | None = None
        # where stacks listen: loopback, except on a cluster's app node whose load comes
        # from other hosts (stackrace.cluster chooses the node's own address then)
        self.host = host
        # a cluster's app host detaches its watchdog from Ray's reach (see watchdog.py)
        self.detach_watchdog = detach_watchdog
        if run_root:
            self.run_root = Path(run_root)
        else:
            self.run_root, self._root_lock = new_run_root()
        self.run_root.mkdir(parents=True, exist_ok=True)
        self.extra_env = dict(env or {})
        self.on_change = on_change
        self.running: dict[str, RunningStack] = {}
        self._watchdog: Watchdog | None = None
        self._short_dirs: list[tuple[Path, Path]] = []

    def _set_state(self, rs: RunningStack, state: str) -> None:
        if rs.state == state:
            return
        rs.state = state
        if self.on_change is not None:
            self.on_change(rs)

    async def __aenter__(self) -> Launcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop_all()
        self.close()

    def _dog(self) -> Watchdog:
        if self._watchdog is None:
            self._watchdog = Watchdog(detach=self.detach_watchdog)
        return self._watchdog

    # --- start ---------------------------------------------------------------------

    async def start(self, stack: Stack, port: int | None = None) -> RunningStack:
        """Start a stack and wait until it answers 200 on its health path."""
        if stack.name in self.running and self.running[stack.name].state in (STARTING, READY):
            raise LaunchError(f"{stack.name}: already running")
        if port is None:
            port = free_port(self.host)
        elif port_in_use(port, self.host):
            raise LaunchError(f"{stack.name}: port {port} on {self.host} is already in use")
        run_dir = self._make_run_dir(stack)
        rs = RunningStack(
            stack=stack, port=port, run_dir=run_dir, log_path=run_dir / "log.txt", host=self.host
        )
        self.running[stack.name] = rs
        try:
            await self._spawn(rs)
            await self._wait_ready(rs)
        except LaunchError as exc:
            rs.error = str(exc).split("\n")[0]
            if rs.state != STOPPED:  # (stopped by stop_all while starting: stays so)
                self._set_state(rs, FAILED)
            await self.stop(rs)
            exc.log_tail = rs.log_tail()
            raise
        except ConfigError as exc:
            rs.error = str(exc)
            self._set_state(rs, FAILED)
            await self.stop(rs)
            raise LaunchError(f"{stack.name}: {exc}") from None
        except OSError as exc:
            if exc.errno not in _STORAGE_ERRNOS:
                raise
            # a full or read-only disk under its log and configs: the machine's state,
            # said with the directory, not a crash
            rs.error = f"cannot write in its run directory {rs.run_dir}: {exc.strerror or exc}"
            self._set_state(rs, FAILED)
            await self.stop(rs)
            raise LaunchError(f"{stack.name}: {rs.error}") from None
        except asyncio.CancelledError:
            # the caller gave up (e.g. the app quit while it started): nothing may stay
            rs.error = "start cancelled"
            await asyncio.shield(self.stop(rs))
            raise
        return rs

    def _make_run_dir(self, stack: Stack) -> Path:
        """A fresh private directory for the stack's configs, sockets, pid files and log.

        Its name is a slug of the stack's name (stackrace.base.slug): a variant's value is
        user text (`x/../../victim` included) and never becomes a path component. It is
        created exclusively, never reused and never emptied: a stack started again in
        this launcher gets `NAME.2`, so nothing that was there is removed.

        Unix socket paths are cut at 107 bytes, silently by some servers (php-fpm then
        listens somewhere else and nginx answers 502). When run_root/NAME is too long
        for a socket in it, the directory is a short one in /tmp, linked from there.
        """
        base = slug(stack.name)
        for n in itertools.count(1):
            link = self.run_root / (base if n == 1 else f"{base}.{n}")
            if len(str(link)) <= _MAX_RUN_DIR:
                try:
                    link.mkdir()
                except FileExistsError:
                    continue
                return link
            short = rundirs.make_short_dir(short_name(stack.base, 16))
            try:
                link.symlink_to(short, target_is_directory=True)
            except FileExistsError:
                short.rmdir()
                continue
            self._short_dirs.append((link, short))
            self._dog().fold_on_death(link, short)  # even a SIGKILL leaves no short dir
            return short
        raise AssertionError("unreachable")

    def _fold_short_dirs(self) -> None:
        """Logs of stopped stacks' short run dirs move back under run_root; those go."""
        keep = []
        for link, short in self._short_dirs:
            users = [rs for rs in self.running.values() if rs.run_dir == short]
            if any(not rs.reaped for rs in users) or not link.is_symlink():
                keep.append((link, short))
                continue
            rundirs.fold(link, short)
            if self._watchdog is not None:
                self._watchdog.forget_dir(short)
            for rs in users:
                rs.run_dir, rs.log_path = link, link / "log.txt"
        self._short_dirs = keep

    async def _spawn(self, rs: RunningStack) -> None:
        spec = rs.stack.spec
        if spec.cpus:  # resolve() checks this too; a Stack built by hand may not have been
            usable = os.sched_getaffinity(0)
            missing = sorted(set(spec.cpus) - usable)
            if missing:
                raise LaunchError(
                    f"{rs.name}: key 'cpus': CPU {missing[0]} is not one this machine lets "
                    f"stackrace use ({', '.join(map(str, sorted(usable)))})"
                )
        upstream_port = 0
        tls_files = self._certificate(rs) if rs.stack.spec.tls else None
        if rs.stack.upstream is not None:
            # the stack behind this one first, on a port of its own, in a directory of its
            # own (two nginx.conf must not meet), ready before the front starts: a proxy
            # that starts first would answer 502 and look ready to no one
            up = rs.stack.upstream
            upstream_port = free_port(rs.host)
            up_dir = rs.run_dir / "upstream"
            up_dir.mkdir()
            up_tls = self._certificate(rs) if up.spec.tls else None
            await self._spawn_processes(
                rs, up, placeholders(up, upstream_port, up_dir, rs.host, tls=up_tls)
            )
            await self._wait_http(
                rs, upstream_port, up.spec.health, up.spec.ready_timeout, tls=up.spec.tls
            )
        values = placeholders(rs.stack, rs.port, rs.run_dir, rs.host, upstream_port, tls_files)
        await self._spawn_processes(rs, rs.stack, values)

    def _certificate(self, rs: RunningStack) -> tuple[Path, Path]:
        """The machine's TLS certificate and key (made on first use)."""
        try:
            made = certificate.ensure()
        except certificate.CertificateError as exc:
            raise LaunchError(f"{rs.name}: {exc}") from None
        rs.cert = made.cert
        return made.cert, made.key

    async def _spawn_processes(
        self, rs: RunningStack, stack: Stack, values: dict[str, object]
    ) -> None:
        """Render `stack`'s files, start its helper processes and its command, into `rs`."""
        spec = stack.spec
        run_dir = Path(str(values["run_dir"]))
        for tmpl in spec.files:
            src = Path(render(tmpl.template, values))
            try:
                text = src.read_text()
            except OSError as exc:
                raise LaunchError(f"{rs.name}: cannot read template {src}: {exc}") from None
            (run_dir / render(tmpl.path, values)).write_text(render(text, values))
        env = {**os.environ, **self.extra_env}
        env.update({k: render(v, values) for k, v in spec.env.items()})
        env["PYTHONUNBUFFERED"] = "1"
        env[sweep.TOKEN_VAR] = rs.token
        cwd = Path(render(spec.cwd, values))
        # the cgroup is the whole stack's (a proxy and its upstream together), made once
        if rs.stack.spec.memory_max and rs.cgroup_dir is None and rs.memory_cap is None:
            rs.cgroup_dir, rs.memory_cap = cgroup.create(rs.run_dir.name, rs.stack.spec.memory_max)
        if rs.cgroup_dir is None and not rs.procs:
            rs.cgroup_dir = sweep.tracking_cgroup(rs.run_dir.name)
            rs.tracking_only = rs.cgroup_dir is not None
        if not rs.procs:
            self._dog().watch_token(rs.token)
            if rs.cgroup_dir is not None:
                self._dog().watch_cgroup(rs.cgroup_dir)
        log = open(rs.log_path, "ab")  # noqa: SIM115 - handed to the children, closed below
        if not rs.started_at:
            rs.started_at = time.monotonic()
        try:
            for proc in spec.processes:
                penv = {**env, **{k: render(v, values) for k, v in proc.env.items()}}
                p = self._popen(
                    rs,
                    [render(a, values) for a in proc.command],
                    cwd,
                    penv,
                    log,
                    new_session=not proc.leaves_group,
                )
                if proc.ready_path:
                    await self._wait_path(rs, p, Path(render(proc.ready_path, values)))
            self._popen(
                rs, [render(a, values) for a in spec.command], cwd, env, log, new_session=True
            )
        finally:
            log.close()

    def _popen(
        self,
        rs: RunningStack,
        argv: list[str],
        cwd: Path,
        env: dict[str, str],
        log,
        new_session: bool,
    ) -> subprocess.Popen[bytes]:
        if rs.reaped:  # stopped (stop_all) while it was starting: start nothing more
            raise LaunchError(f"{rs.name}: stopped while it was starting")
        log.write(f"$ {' '.join(argv)}\n".encode())
        log.flush()
        cpus = rs.stack.spec.cpus
        try:
            p = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=new_session,
                # a memory cap must hold (the start fails without it); a cgroup that
                # only tracks is a help where the kernel lets the child in
                preexec_fn=child_setup(cpus, rs.cgroup_dir, must_enter=not rs.tracking_only),
            )
        except (FileNotFoundError, PermissionError, NotADirectoryError) as exc:
            raise LaunchError(f"{rs.name}: cannot run {argv[0]}: {exc.strerror or exc}") from None
        except subprocess.SubprocessError as exc:
            # the set-up between fork and exec failed (Python keeps only "Exception occurred
            # in preexec_fn"): say what that set-up was, never a bare SubprocessError
            steps = ["the parent-death signal"]
            if cpus:
                steps.append(f"pinning to CPUs {','.join(map(str, cpus))} (key 'cpus')")
            if rs.cgroup_dir is not None and not rs.tracking_only:
                steps.append(f"entering cgroup {rs.cgroup_dir} (key 'memory_max')")
            raise LaunchError(
                f"{rs.name}: cannot start {argv[0]}: the process set-up failed "
                f"({'; '.join(steps)}): {exc}"
            ) from None
        rs.procs.append(p)
        self._dog().watch(p.pid)
        return p

    async def _wait_path(self, rs: RunningStack, p: subprocess.Popen[bytes], path: Path) -> None:
        deadline = time.monotonic() + rs.stack.spec.ready_timeout
        while not path.exists():
            if p.poll() is not None:
                raise LaunchError(
                    f"{rs.name}: {_program(p)} exited with code {p.returncode} before it was ready"
                )
            if time.monotonic() > deadline:
                raise LaunchError(
                    f"{rs.name}: {path.name} did not appear within {rs.stack.spec.ready_timeout:g}s"
                )
            await asyncio.sleep(_POLL_S)

    async def _wait_ready(self, rs: RunningStack) -> None:
        spec = rs.stack.spec
        await self._wait_http(
            rs,
            rs.port,
            spec.health,
            spec.ready_timeout,
            statuses.parse(spec.health_status),
            tls=spec.tls,
            headers=spec.health_headers,
        )
        self.check_exposure(rs)
        self._set_state(rs, READY)

    def check_exposure(self, rs: RunningStack) -> list[str]:
        """The stack's own listening sockets bound beyond loopback that were not seen
        before (stacks.listen.exposed); all of them are kept in `rs.exposed`. The stack
        is bound to {host} by the launcher: anything else is the app's own doing, and
        other hosts can reach it while the race runs."""
        if rs.reaped:
            return []
        pids = sweep.stack_pids(
            rs.sessions, rs.root_pids, [rs.cgroup_dir] if rs.cgroup_dir is not None else []
        )
        new = [a for a in listen.exposed(pids, allowed=rs.host) if a not in rs.exposed]
        rs.exposed += new
        return new

    async def _wait_http(
        self,
        rs: RunningStack,
        port: int,
        health: str,
        timeout: float,
        ready: frozenset[int] = frozenset({200}),
        tls: bool = False,
        headers: dict[str, str] | None = None,
    ) -> None:
        """Until `health` on `port` answers a status of `ready` (200), over TLS trusting
        the stack's own certificate with `tls`, asked with `headers` (the user's: an app
        set for production serves its own Host only); LaunchError when a process of the
        stack dies first (with the last line it logged), the time is up, or the answer
        is definite: a status that is neither ready nor a 5xx (a 404 will not become a
        200 by waiting; a 502 of a proxy whose backend is still starting may), said in
        one line with the body's first line of text and the likely cause
        (stacks/refusal.py)."""
        sent = dict(headers or {})
        deadline = time.monotonic() + timeout
        context = probe.trusting(rs.cert) if tls and rs.cert is not None else None
        last = "no answer yet"
        what = "" if port == rs.port else f" (its upstream on port {port})"
        while True:
            if rs.stopping:  # (set first thing in stop(), before it reaps)
                raise LaunchError(f"{rs.name}: stopped while it was starting")
            dead = rs.dead_process()
            if dead is not None:
                rs.exit_code = dead.returncode
                said = rs.last_log_line()
                raise LaunchError(
                    f"{rs.name}: {Path(_program(dead)).name} exited with code "
                    f"{dead.returncode} before it was ready" + (f": {said}" if said else "")
                )
            try:
                resp = await probe.get(
                    rs.host, port, health, timeout=2.0, headers=tuple(sent.items()), tls=context
                )
                if resp.status in ready:
                    return
                last = f"HTTP {resp.status} on {health}"
                if resp.status < 500:
                    raise LaunchError(
                        f"{rs.name}: GET {health}{what} answered "
                        + refusal_line(resp, sent, _statuses_text(ready))
                    )
            except (OSError, TimeoutError, ValueError) as exc:
                last = str(exc) or type(exc).__name__
            if time.monotonic() > deadline:
                raise LaunchError(f"{rs.name}: not ready within {timeout:g}s{what} ({last})")
            await asyncio.sleep(_POLL_S)

    # --- watch ---------------------------------------------------------------------

    def poll(self) -> list[RunningStack]:
        """Mark stacks whose processes died; return the ones that changed to crashed."""
        changed = []
        for rs in self.running.values():
            if rs.state != READY or rs.stopping:
                continue
            dead = rs.dead_process()
            if dead is not None:
                rs.exit_code = dead.returncode
                rs.error = f"{Path(_program(dead)).name} exited with code {dead.returncode}"
                self._set_state(rs, CRASHED)
                changed.append(rs)
        return changed

    # --- stop ----------------------------------------------------------------------

    async def stop(self, rs: RunningStack, final_state: str = STOPPED) -> None:
        """SIGTERM every process of the stack, SIGKILL what is left after the grace time.

        A stack that crashed or failed keeps that state; stopping twice is harmless.
        """
        if rs.reaped:
            return  # its session ids may have been reused by unrelated processes
        rs.stopping = True
        sessions = rs.sessions
        if sessions:
            # the main process first: nginx must stop before php-fpm, not the other way
            for p in reversed(rs.procs):
                if p.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(p.pid, signal.SIGTERM)
            # and every process of the stack, those that left its sessions too
            found = self._processes(rs)
            sweep.signal_pids(found, signal.SIGTERM)
            grace = rs.stack.spec.stop_timeout
            if rs.stack.upstream is not None:
                grace = max(grace, rs.stack.upstream.spec.stop_timeout)
            deadline = time.monotonic() + grace
            # a second Ctrl-C (hurry) ends the grace time at once: SIGKILL now
            while (
                (sweep.alive(found) or pids_in_sessions(sessions))
                and time.monotonic() < deadline
                and not hurry.hurried()
            ):
                await asyncio.sleep(_POLL_S)
            found |= self._processes(rs)  # anything forked meanwhile
            if rs.cgroup_dir is not None:
                sweep.kill_cgroup(rs.cgroup_dir)
            sweep.signal_pids(found, signal.SIGKILL)
            signal_sessions(sessions, signal.SIGKILL)
            for p in rs.procs:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    p.wait(timeout=2)
                if rs.exit_code is None and p is rs.main:
                    rs.exit_code = p.returncode
            end = time.monotonic() + 2
            while (sweep.alive(found) or pids_in_sessions(sessions)) and time.monotonic() < end:
                await asyncio.sleep(_POLL_S)
            sweep.reap(found)  # orphans adopted as their subreaper: no zombie left
            if self._watchdog is not None:  # (closed already when stopped after close())
                for sid in sessions:
                    self._watchdog.forget(sid)
                self._watchdog.forget_token(rs.token)
                if rs.cgroup_dir is not None:
                    self._watchdog.forget_cgroup(rs.cgroup_dir)
        rs.reaped = True
        if rs.cgroup_dir is not None:
            sweep.remove_cgroup(rs.cgroup_dir)
        if rs.state in (STARTING, READY):
            self._set_state(rs, final_state)

    def _processes(self, rs: RunningStack) -> set[int]:
        """Every live process of the stack, found every way there is (supervise.sweep)."""
        return sweep.stack_pids(
            rs.sessions,
            rs.root_pids,
            [rs.cgroup_dir] if rs.cgroup_dir is not None else [],
            [rs.token],
        )

    async def stop_all(self) -> None:
        await asyncio.gather(
            *(self.stop(rs) for rs in list(self.running.values()) if not rs.reaped)
        )

    def close(self) -> None:
        """After stop_all: let the watchdog go; logs stay under run_root."""
        self._fold_short_dirs()
        if self._watchdog is not None:
            self._watchdog.close()
            self._watchdog = None
        if self._root_lock is not None:
            os.close(self._root_lock)
            self._root_lock = None
