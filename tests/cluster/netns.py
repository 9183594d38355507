"""Real hosts on one machine: network namespaces on a bridge, a Ray node in each.

    topo = Topology()                 # names: sr-<pid>-<n>-<role>, one run's own
    topo.up()                         # namespaces, bridge, veths, 198.18.0.0/24
    topo.start_ray()                  # Ray's head in `head`, a node in each other role
    topo.popen("head", [...])         # a process on a host (ip netns exec)
    topo.call("app", fn)              # fn() in a thread that lives in app's namespace
    topo.cut("load1") / topo.mend()   # the host's link down / up again
    topo.slow("load1", 25, 1.0)       # a WAN: 25 ms each way, 1 % loss each way
    topo.down()                       # everything gone; safe to call twice

    python tests/cluster/netns.py sweep       # what dead runs left behind, removed

Each role is a namespace with its own loopback, its own port space and one veth whose
other end sits on a bridge in a hub namespace (`…-net`). The hub keeps the machine's own
namespace untouched: no route, address or interface of a run is ever visible there, so
two runs at once (other engineers' suites) can both use 198.18.0.0/24 — the RFC 2544
benchmarking block, never routed — without meeting. Names carry the owner's pid and a
per-process counter; interface names (15 characters at most) need only be unique inside
their run's namespaces, but carry the pid too so that a stray one says whose it is.

Ray's nodes share the filesystem, so each gets a temp dir of its own (`--temp-dir`,
short: its unix sockets' paths must stay under 108 bytes); ports never collide, since
every namespace has its own. Ray's GCS is the head's address.

Nothing is left behind, however the run ends:
- `down()` kills every process in every namespace of the run (`ip netns pids`, which
  finds Ray's daemonized processes, the actors' children and the stacks alike), deletes
  the namespaces (their veths and the bridge go with them) and the temp dir;
- a reaper process (its own session, so a SIGKILL of the test's process group spares
  it) waits on the owner's pidfd and does the same when the owner dies without `down()`;
- `sweep()` removes what a dead owner left (its pid gone, or reused by a process that
  started after the namespace was made); the test fixture runs it first.

Needs root, `ip` (iproute2) and, for `slow()`, `tc` with netem or `iptables` (the delay
line, tests/cluster/delayline.py). `unavailable()` says why a machine cannot.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent.parent
NETNS_DIR = Path("/run/netns")
TMP = Path("/tmp")
SUBNET = "198.18.0"  # /24 of 198.18.0.0/15 (RFC 2544), inside the run's own namespaces
NAME = re.compile(r"^sr-(\d+)-(\d+)-([a-z0-9]+)$")
ROLE_LABEL = "stackrace-role"
# role -> (short code for interface names, host number in the subnet)
ROLES: dict[str, tuple[str, int]] = {
    "head": ("h", 1),
    "load1": ("l1", 11),
    "load2": ("l2", 12),
    "app": ("a", 21),
    "outside": ("o", 99),  # a host on the wire that is not a Ray node
}
RAY_ROLES = {"head": "head", "load1": "load", "load2": "load", "app": "app"}
_CLONE_NEWNET = 0x40000000

_counter = itertools.count()
T = TypeVar("T")


class TopologyError(RuntimeError):
    """A step of building the topology failed; the message names the step."""


def unavailable() -> str | None:
    """Why namespaces cannot be made here (None: they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed (apt-get install iproute2)"
    probe = f"sr-{os.getpid()}-probe-x"
    out = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if out.returncode != 0:
        return f"cannot make a network namespace: {out.stderr.strip()}"
    subprocess.run(["ip", "netns", "delete", probe], capture_output=True)
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and out.returncode != 0:
        raise TopologyError(f"ip {' '.join(args)}: {out.stderr.strip()}")
    return out


def _ns_pids(netns: str) -> list[int]:
    out = _ip("netns", "pids", netns, check=False)
    return [int(p) for p in out.stdout.split()] if out.returncode == 0 else []


def _kill_all_in(namespaces: Iterable[str], timeout: float = 20.0) -> list[int]:
    """SIGKILL every process in these namespaces until none is left; those left."""
    names = list(namespaces)
    end = time.monotonic() + timeout
    left: list[int] = []
    while True:
        left = [pid for ns in names for pid in _ns_pids(ns) if pid != os.getpid()]
        if not left or time.monotonic() > end:
            return left
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def run_namespaces(prefix: str) -> list[str]:
    """The namespaces of one run (prefix sr-<pid>-<n>) that exist now."""
    if not NETNS_DIR.is_dir():
        return []
    return sorted(p.name for p in NETNS_DIR.iterdir() if p.name.startswith(prefix + "-"))


def remove_run(prefix: str) -> list[int]:
    """Kill, delete, remove: everything of run `prefix`. Returns pids that would not die."""
    namespaces = run_namespaces(prefix)
    left = _kill_all_in(namespaces)
    for ns in namespaces:
        _ip("netns", "delete", ns, check=False)
    shutil.rmtree(TMP / prefix, ignore_errors=True)
    return left


def _owner_alive(pid: int, made: float) -> bool:
    """The run's owner still runs: its pid exists and was not reused by a process that
    started after the run's namespaces were made."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        start_ticks = int(stat.rsplit(")", 1)[1].split()[19])
        boot = next(
            float(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime")
        )
        started = boot + start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return False
    return started <= made + 1.0


def dead_runs() -> list[str]:
    """Prefixes of runs whose owner is gone, from their namespaces and temp dirs."""
    found: dict[str, float] = {}
    if NETNS_DIR.is_dir():
        for p in NETNS_DIR.iterdir():
            m = NAME.match(p.name)
            if m:
                with contextlib.suppress(OSError):
                    found.setdefault(f"sr-{m[1]}-{m[2]}", p.stat().st_mtime)
    for p in TMP.glob("sr-*-*"):
        m = re.match(r"^sr-(\d+)-(\d+)$", p.name)
        if m and p.is_dir():
            with contextlib.suppress(OSError):
                found.setdefault(p.name, p.stat().st_mtime)
    return [
        prefix
        for prefix, made in sorted(found.items())
        if not _owner_alive(int(prefix.split("-")[1]), made)
    ]


def sweep() -> list[str]:
    """Remove what dead runs left behind; the prefixes removed."""
    gone = dead_runs()
    for prefix in gone:
        remove_run(prefix)
    return gone


@dataclass
class Host:
    role: str
    netns: str
    ifname: str  # its end of the veth, inside its namespace
    address: str
    ray_temp: Path


@dataclass
class LinkCounters:
    rx_bytes: int
    tx_bytes: int
    rx_packets: int
    tx_packets: int


@dataclass
class Topology:
    roles: Sequence[str] = ("head", "load1", "load2", "app", "outside")
    prefix: str = field(default_factory=lambda: f"sr-{os.getpid()}-{next(_counter)}")
    hosts: dict[str, Host] = field(default_factory=dict)
    procs: list[subprocess.Popen[Any]] = field(default_factory=list)
    _reaper: subprocess.Popen[bytes] | None = None
    _slow: dict[str, subprocess.Popen[bytes] | None] = field(default_factory=dict)

    @property
    def hub(self) -> str:
        return f"{self.prefix}-net"

    @property
    def temp(self) -> Path:
        return TMP / self.prefix

    @property
    def tag(self) -> str:
        """What interface names start with: the owner's pid (15 characters at most)."""
        return f"sr{self.prefix.split('-')[1]}"

    def __getitem__(self, role: str) -> Host:
        return self.hosts[role]

    # --- making it ------------------------------------------------------------------

    def up(self) -> Topology:
        """Namespaces on a bridge, each role one address; a reaper watching this process."""
        self.temp.mkdir(mode=0o755)
        self._reaper = subprocess.Popen(
            [sys.executable, __file__, "reap", str(os.getpid()), self.prefix],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            bridge = f"{self.tag}-br"
            _ip("netns", "add", self.hub)
            _ip("-n", self.hub, "link", "add", bridge, "type", "bridge")
            _ip("-n", self.hub, "link", "set", bridge, "up")
            for role in self.roles:
                code, number = ROLES[role]
                host = Host(
                    role=role,
                    netns=f"{self.prefix}-{role}",
                    ifname=f"{self.tag}-{code}",
                    address=f"{SUBNET}.{number}",
                    ray_temp=self.temp / role,
                )
                hub_end = f"{self.tag}-{code}b"
                _ip("netns", "add", host.netns)
                _ip("-n", host.netns, "link", "set", "lo", "up")
                _ip(
                    "link",
                    "add",
                    host.ifname,
                    "netns",
                    host.netns,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    hub_end,
                    "netns",
                    self.hub,
                )
                _ip("-n", self.hub, "link", "set", hub_end, "master", bridge, "up")
                _ip("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", host.ifname)
                _ip("-n", host.netns, "link", "set", host.ifname, "up")
                self.hosts[role] = host
        except BaseException:
            self.down()
            raise
        return self

    def ray_address(self) -> str:
        return f"{self['head'].address}:6379"

    def start_ray(self, env: dict[str, str] | None = None, timeout: float = 120.0) -> None:
        """Ray's head on `head` (no CPUs: the driver's host), then a node on every other
        Ray role, labelled stackrace-role=load|app as docs/cluster.md says, in parallel.

        `ray start` gives a new node 30 s to register (hard-coded in Ray): on a 2-core
        machine running other suites, three raylets starting at once can miss that. A
        node that did is started again, alone, up to twice."""
        self._ray_finish("head", self._ray_start("head", env), timeout)
        others = [r for r in self.roles if r in RAY_ROLES and r != "head"]
        started = [(r, self._ray_start(r, env)) for r in others]
        failed: list[tuple[str, TopologyError]] = []
        for role, proc in started:
            try:
                self._ray_finish(role, proc, timeout)
            except TopologyError as exc:
                failed.append((role, exc))
        for role, first in failed:
            last = first
            for _attempt in range(2):
                try:
                    self.restart_ray(role, env, timeout)
                    break
                except TopologyError as again:
                    last = again
            else:
                raise last

    def restart_ray(
        self, role: str, env: dict[str, str] | None = None, timeout: float = 120.0
    ) -> None:
        """A node that did not come up, or that Ray gave up: everything in the host
        killed, and once Ray lists no live node at its address any more (a node of the
        same address twice would take a role twice), a new node started there."""
        _kill_all_in([self[role].netns])
        shutil.rmtree(self[role].ray_temp, ignore_errors=True)
        end = time.monotonic() + timeout
        while self[role].address in self.alive_ips(env):
            if time.monotonic() > end:
                raise TopologyError(f"Ray still lists the killed node on {role}")
            time.sleep(1.0)
        self._ray_finish(role, self._ray_start(role, env), timeout)

    def alive_ips(self, env: dict[str, str] | None = None) -> set[str]:
        """The addresses of the nodes Ray's GCS lists alive (asked from the head)."""
        return {n["ip"] for n in self.ray_nodes(env)}

    def hosts_actors(self, role: str, env: dict[str, str] | None = None, wait: float = 30) -> bool:
        """Whether `role`'s Ray node places an actor and answers a call within `wait`
        seconds (a node Ray lists alive may not, for a while after a cut: stale
        connections back off before they retry)."""
        code = (
            "import sys, ray\n"
            "from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as A\n"
            f"ray.init(address={self.ray_address()!r}, logging_level='ERROR', "
            "log_to_driver=False)\n"
            f"node = [n['NodeID'] for n in ray.nodes() if n['Alive'] and "
            f"n['NodeManagerAddress'] == {self[role].address!r}]\n"
            "@ray.remote(num_cpus=0)\n"
            "class Probe:\n"
            "    def ping(self):\n"
            "        return 'pong'\n"
            "p = Probe.options(scheduling_strategy=A(node[0], soft=False)).remote()\n"
            f"sys.exit(0 if ray.get(p.ping.remote(), timeout={wait}) == 'pong' else 1)\n"
        )
        python = str(ROOT / ".venv" / "bin" / "python")
        try:
            out = self.run(
                "head",
                [python if Path(python).exists() else sys.executable, "-c", code],
                capture_output=True,
                timeout=wait + 60,
                env=env,
            )
        except subprocess.TimeoutExpired:
            return False
        return out.returncode == 0

    def ray_nodes(self, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Ray's live nodes (address, labels), as a driver on the head host sees them."""
        code = (
            "import json, ray\n"
            f"ray.init(address={self.ray_address()!r}, logging_level='ERROR', "
            "log_to_driver=False)\n"
            "print(json.dumps([{'ip': n['NodeManagerAddress'], 'labels': n.get('Labels', {}),"
            " 'alive': n['Alive']} for n in ray.nodes()]))\n"
        )
        python = str(ROOT / ".venv" / "bin" / "python")
        out = self.run(
            "head",
            [python if Path(python).exists() else sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        if out.returncode != 0:
            raise TopologyError(f"cannot list Ray's nodes: {out.stderr.strip()[-500:]}")
        return [n for n in json.loads(out.stdout.strip().splitlines()[-1]) if n["alive"]]

    def _ray_start(self, role: str, env: dict[str, str] | None) -> subprocess.Popen[str]:
        ray = str(ROOT / ".venv" / "bin" / "ray")
        if not Path(ray).exists():
            ray = shutil.which("ray") or ray
        host = self[role]
        host.ray_temp.mkdir(exist_ok=True)
        # Ray starts its workers at niceness 15: on a busy machine an actor then takes
        # tens of seconds to start (measured: 16 s to create one under a CPU burner), and
        # its engine or stacks would run niced too (docs/cluster.md says to start nodes so)
        env = {**(env if env is not None else os.environ)}
        env.setdefault("RAY_worker_niceness", "0")
        if role == "head":
            where = ["--head", "--port", "6379", "--num-cpus", "0", "--include-dashboard", "false"]
        else:
            where = ["--address", self.ray_address(), "--num-cpus", "1"]
        return self.popen(
            role,
            [
                ray,
                "start",
                *where,
                "--node-ip-address",
                host.address,
                "--temp-dir",
                str(host.ray_temp),
                "--labels",
                f"{ROLE_LABEL}={RAY_ROLES[role]}",
                "--disable-usage-stats",
                "--object-store-memory",
                str(100 * 1024 * 1024),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    @staticmethod
    def _ray_finish(role: str, proc: subprocess.Popen[str], timeout: float) -> None:
        try:
            out, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise TopologyError(f"ray start on {role} took over {timeout:g}s") from None
        if proc.returncode != 0:
            tail = "\n".join(out.strip().splitlines()[-8:])
            raise TopologyError(f"ray start on {role} failed ({proc.returncode}):\n{tail}")

    # --- using it -------------------------------------------------------------------

    def argv(self, role: str, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self[role].netns, *argv]

    def popen(self, role: str, argv: Sequence[str], **kw: Any) -> subprocess.Popen[Any]:
        """A process on the host `role` (killed by `down()` at the latest)."""
        kw.setdefault("stdin", subprocess.DEVNULL)
        proc = subprocess.Popen(self.argv(role, argv), **kw)
        self.procs.append(proc)
        return proc

    def run(self, role: str, argv: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[Any]:
        kw.setdefault("stdin", subprocess.DEVNULL)
        return subprocess.run(self.argv(role, argv), **kw)

    def call(self, role: str, fn: Callable[[], T]) -> T:
        """fn() run by a thread that has entered `role`'s network namespace: its sockets
        are that host's (a socket keeps its namespace whichever thread uses it later)."""
        result: list[T] = []
        error: list[BaseException] = []

        def body() -> None:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = os.open(NETNS_DIR / self[role].netns, os.O_RDONLY)
            try:
                if libc.setns(fd, _CLONE_NEWNET) != 0:
                    raise OSError(ctypes.get_errno(), f"setns into {self[role].netns}")
            finally:
                os.close(fd)
            try:
                result.append(fn())
            except BaseException as exc:
                error.append(exc)

        t = threading.Thread(target=body, name=f"netns-{role}", daemon=True)
        t.start()
        t.join()
        if error:
            raise error[0]
        return result[0]

    def counters(self, role: str) -> LinkCounters:
        """The interface counters of the host's veth (what crossed its link)."""
        out = _ip("-n", self[role].netns, "-s", "-j", "link", "show", "dev", self[role].ifname)
        stats = json.loads(out.stdout)[0]["stats64"]
        return LinkCounters(
            stats["rx"]["bytes"],
            stats["tx"]["bytes"],
            stats["rx"]["packets"],
            stats["tx"]["packets"],
        )

    def listeners(self, role: str) -> list[tuple[str, int, int]]:
        """Listening TCP sockets on the host: (address, port, pid)."""
        out = self.run(role, ["ss", "-Hltnp"], capture_output=True, text=True, check=True)
        found = []
        for line in out.stdout.splitlines():
            parts = line.split()
            local = parts[3]
            addr, _, port = local.rpartition(":")
            for pid in re.findall(r"pid=(\d+)", line):
                found.append((addr.strip("[]"), int(port), int(pid)))
        return found

    def cut(self, role: str) -> None:
        """The host loses its link (its veth down): a partition, not a crash."""
        _ip("-n", self[role].netns, "link", "set", self[role].ifname, "down")

    def mend(self, role: str) -> None:
        _ip("-n", self[role].netns, "link", "set", self[role].ifname, "up")

    def slow(self, role: str, delay_ms: float, loss_pct: float = 0.0) -> str:
        """The host's link becomes a WAN: `delay_ms` each way, `loss_pct` lost each way.
        tc netem where the kernel has it; else the delay line (NFQUEUE, iptables).
        Returns which one is used."""
        from tests.cluster import delayline

        how = delayline.netem(self._ends(role), delay_ms, loss_pct)
        if how is None:
            proc = delayline.start(self.argv(role, []), delay_ms, loss_pct)
            self.procs.append(proc)
            self._slow[role] = proc
            return "delay line (NFQUEUE)"
        self._slow[role] = None
        return how

    def fast(self, role: str) -> None:
        """Undo slow()."""
        from tests.cluster import delayline

        proc = self._slow.pop(role, None)
        if proc is not None:
            delayline.stop(self.argv(role, []), proc)
        else:
            delayline.no_netem(self._ends(role))

    def _ends(self, role: str) -> list[tuple[str, str]]:
        """Both ends of the host's veth: (namespace, interface)."""
        host = self[role]
        return [(host.netns, host.ifname), (self.hub, f"{host.ifname}b")]

    # --- removing it ----------------------------------------------------------------

    def leftovers(self) -> dict[str, object]:
        """What of this run exists now (empty after down())."""
        left: dict[str, object] = {}
        namespaces = run_namespaces(self.prefix)
        if namespaces:
            left["namespaces"] = namespaces
            left["pids"] = [pid for ns in namespaces for pid in _ns_pids(ns)]
        links = _ip("-o", "link", "show", check=False).stdout
        ours = [line for line in links.splitlines() if f" {self.tag}-" in line]
        if ours:
            left["interfaces in the root namespace"] = ours
        if self.temp.exists():
            left["temp"] = str(self.temp)
        running = [p.pid for p in self.procs if p.poll() is None]
        if running:
            left["processes started"] = running
        return left

    def down(self) -> None:
        """Every process, namespace, interface and file of this run: gone. Idempotent."""
        for proc in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
        left = remove_run(self.prefix)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)
        self.procs.clear()
        reaper, self._reaper = self._reaper, None
        if reaper is not None:
            reaper.kill()
            reaper.wait()
        if left:
            raise TopologyError(f"processes of {self.prefix} would not die: {left}")


def _reap(owner: int, prefix: str) -> None:
    """Wait for the owner to exit, then remove its run (if it did not itself)."""
    try:
        fd = os.pidfd_open(owner)
    except ProcessLookupError:
        remove_run(prefix)
        return
    import select

    select.select([fd], [], [])
    remove_run(prefix)


def main(argv: list[str]) -> int:
    if argv[:1] == ["reap"] and len(argv) == 3:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C of the test is not ours
        _reap(int(argv[1]), argv[2])
        return 0
    if argv[:1] == ["sweep"]:
        for prefix in sweep():
            print(f"removed {prefix}")
        return 0
    print("usage: netns.py sweep | reap OWNER_PID PREFIX", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
