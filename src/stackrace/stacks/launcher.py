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
crashed; `await stop(rs)`; `await stop_all()`; `close()`. A `RunningStack` and its
states are stackrace.stacks.running's, the run directories stackrace.stacks.run_roots',
and what `ready` means stackrace.stacks.readiness'. Resource figures come from
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
import itertools
import os
import signal
import subprocess
import time
from pathlib import Path

from stackrace.base.ports import free_port, port_in_use
from stackrace.base.slug import short as short_name
from stackrace.base.slug import slug
from stackrace.settings import statuses
from stackrace.stacks import certificate, cgroup, listen, readiness
from stackrace.stacks.definition import ConfigError, Stack
from stackrace.stacks.placeholders import HOST, PICK, placeholders, render
from stackrace.stacks.run_roots import new_run_root
from stackrace.stacks.running import (
    CRASHED,
    FAILED,
    POLL_S,
    READY,
    STARTING,
    STOPPED,
    LaunchError,
    RunningStack,
    StateCallback,
    program_of,
)
from stackrace.supervise import hurry, rundirs, sweep
from stackrace.supervise.procs import child_setup, pids_in_sessions, signal_sessions
from stackrace.supervise.watchdog import Watchdog

# the longest run dir that leaves room for a socket name (sun_path holds 107 bytes)
_MAX_RUN_DIR = 80
_STORAGE_ERRNOS = (errno.ENOSPC, errno.EROFS, errno.EDQUOT)


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
        """Start a stack and wait until it answers 200 on its health path. On a port of
        its own choosing, once more on another when something took the port between the
        choice and the stack's bind (a busy machine's listeners come and go)."""
        if port is not None:
            return await self._start(stack, port)
        try:
            return await self._start(stack, None)
        except LaunchError as exc:
            said = f"{exc} {getattr(exc, 'log_tail', '')}".lower()
            if "address already in use" not in said and "eaddrinuse" not in said:
                raise
            return await self._start(stack, None)

    async def _start(self, stack: Stack, port: int | None) -> RunningStack:
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
            if not rs.stopping:  # (stop_all began, maybe not done: STOPPED, not FAILED)
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
        tls = self._certificate(rs) if rs.stack.spec.tls else None
        if rs.stack.upstream is not None:
            # the stack behind this one first, on a port of its own, in a directory of its
            # own (two nginx.conf must not meet), ready before the front starts: a proxy
            # that starts first would answer 502 and look ready to no one
            up = rs.stack.upstream
            upstream_port = free_port(rs.host)
            up_dir = rs.run_dir / "upstream"
            up_dir.mkdir()
            up_tls = self._certificate(rs) if up.spec.tls else None
            up_values = placeholders(up, upstream_port, up_dir, rs.host, 0, up_tls, PICK)
            await self._spawn_processes(rs, up, up_values)
            await readiness.wait_http(
                rs, upstream_port, up.spec.health, up.spec.ready_timeout, tls=up.spec.tls
            )
        values = placeholders(rs.stack, rs.port, rs.run_dir, rs.host, upstream_port, tls, PICK)
        rs.status_url = render(spec.status, values) if spec.status is not None else None
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
                    await readiness.wait_path(rs, p, Path(render(proc.ready_path, values)))
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

    async def _wait_ready(self, rs: RunningStack) -> None:
        spec = rs.stack.spec
        await readiness.wait_http(
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
                rs.error = f"{Path(program_of(dead)).name} exited with code {dead.returncode}"
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
                await asyncio.sleep(POLL_S)
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
                await asyncio.sleep(POLL_S)
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
