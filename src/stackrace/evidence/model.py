"""What a stack was doing when it broke: the evidence window's data, and the cause named.

Pure data, no I/O, so a recording, a run file and a replay carry the same evidence the
live race captured, and the rules that name a cause (stackrace.rules.cause) are unit-
tested on recorded windows. The capture (stackrace.evidence.capture) fills it from:

- the stack's Python workers' stacks, sampled without stopping them (py-spy,
  non-blocking): each sample of each thread is put in one `ThreadState` and, where the
  sample has a frame of the app's own code, counted for that function;
- the kernel, for every process of the stack whatever its language: CPU, its wait for a
  core (`/proc/PID/schedstat`), its wait channel and current syscall;
- the listening socket's accept queue and the machine's listen overflows and drops;
- the stack's own status page where it has one (PHP-FPM, nginx, uWSGI), and for the db
  workload the database's connections in use against the app's pool.

The causes are a small documented set (`CauseKind`, docs/verdicts.md says how each is
decided): a room reads one of them with the figure and the app's function that prove it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class ThreadState(StrEnum):
    """What one thread was doing in one sample."""

    ON_CPU = "on CPU"  # running Python (or native code called from it)
    GIL_WAIT = "waiting for the GIL"  # runnable, but another thread holds the GIL
    BLOCKED = "blocked in a call"  # a socket read, a file, a sleep, a backend call
    LOCK_WAIT = "waiting on a lock"  # a lock, a condition, a queue, a pool's slot
    IDLE = "idle"  # waiting for work: accept, select/epoll with nothing to do
    GC = "collecting garbage"  # inside the cyclic garbage collector
    UNKNOWN = "unknown"


class CauseKind(StrEnum):
    """The causes stackrace names; one per breaking point."""

    BLOCKING_WAIT = "blocking wait"  # workers asleep in I/O: more threads, or async
    CPU = "cpu"  # a process on CPU the whole time: more processes
    GIL = "gil"  # threads of one process waiting for the GIL: processes, not threads
    LOCK = "lock"  # threads queued on a lock the app holds: fix the lock
    DB_POOL = "db pool"  # threads waiting for a database connection: the pool
    ACCEPT_QUEUE = "accept queue"  # the kernel's queue full: backlog or more workers
    LOOP_BLOCKED = "event loop blocked"  # a sync call inside async code
    GC = "gc"  # long garbage-collection pauses
    WORKER_RESTARTS = "worker restarts"  # workers killed and restarted (WORKER TIMEOUT)
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class FrameShare:
    """One function of the app's own code and the share of samples it was on the stack
    of a thread in a given state (its innermost app frame)."""

    function: str
    file: str  # as short as still unique: "app.py", "myapp/views.py"
    line: int
    samples: int
    share: float  # of all thread samples of the window, 0..1
    state: ThreadState = ThreadState.UNKNOWN

    def where(self) -> str:
        """ "hold_the_lock (app.py:22)" """
        return f"{self.function} ({self.file}:{self.line})"


@dataclass(frozen=True)
class ProcessEvidence:
    """One process of the stack, from the kernel, over the window."""

    pid: int
    name: str
    threads: int
    cpu_share: float  # of one core, 0..n
    core_wait_share: float  # runnable but waiting for a core, of the window, 0..n
    wchan: str = ""  # the kernel function it sleeps in ("" running or unreadable)
    syscall: str = ""  # its current syscall by name ("" running or unreadable)


@dataclass(frozen=True)
class QueueEvidence:
    """The listening socket's accept queue over the window, from the kernel."""

    depth_max: int
    depth_mean: float
    limit: int | None
    overflows: int = 0  # the machine's ListenOverflows during the window
    drops: int = 0  # the machine's ListenDrops during the window


@dataclass(frozen=True)
class EvidenceWindow:
    """One evidence window of one stack at one level."""

    stack: str
    level: int
    started: float  # the race clock
    seconds: float
    sampled: bool  # the Python stacks were sampled
    # why not, with the fix, in one line ("" when sampled): "py-spy cannot attach:
    # ptrace is not permitted in this container (run with --cap-add SYS_PTRACE)"
    not_sampled: str = ""
    samples: int = 0  # thread samples taken (threads × sampling rounds)
    threads: int = 0  # Python threads seen (workers × threads)
    states: dict[str, int] = field(default_factory=dict)  # ThreadState value → samples
    frames: tuple[FrameShare, ...] = ()  # the app's functions, most samples first
    processes: tuple[ProcessEvidence, ...] = ()
    queue: QueueEvidence | None = None
    status: dict[str, float] = field(default_factory=dict)  # the status page's figures
    status_source: str = ""  # "php-fpm status", "nginx stub_status", "uwsgi stats"
    db_connections: int | None = None  # in use on the database during the window
    db_pool: int | None = None  # the app's pool size, where known
    restarts: int = 0  # worker processes that exited and were replaced in the window
    # collapsed stacks ("file:function;file:function" → samples) for a flame graph
    collapsed: dict[str, int] = field(default_factory=dict)
    # what follows was added with the capture (all with defaults: older windows load)
    workers: int = 0  # processes whose threads ran the app's code (sampled)
    event_loop: bool = False  # those threads run an event loop (asyncio, uvloop, …)
    # the innermost frame, of any code, of the samples waiting on a lock or blocked:
    # where the wait is ("Handler.acquire (logging/__init__.py:917)", a pool's `get`)
    waits: tuple[FrameShare, ...] = ()
    pool_waits: int = 0  # lock-wait samples inside a pool's code (a database pool)
    # every thread of every process, from its system call alone (ThreadState value →
    # reads): the evidence for a server that cannot be sampled (Go, Node, nginx, PHP)
    kernel_states: dict[str, int] = field(default_factory=dict)
    cores: int = 0  # the cores the stack may run on
    rounds: int = 0  # sampling rounds taken in the window

    def mean_threads(self, state: ThreadState) -> float:
        """How many of the sampled threads were in `state` at an instant, on average."""
        return self.share(state) * self.threads

    def kernel_share(self, state: ThreadState) -> float:
        """The share of the kernel's thread reads in `state`, 0..1."""
        total = sum(self.kernel_states.values())
        return self.kernel_states.get(state.value, 0) / total if total else 0.0

    def cpu(self) -> float:
        """The CPU the stack's processes used, in cores (0..n)."""
        return sum(p.cpu_share for p in self.processes)

    def share(self, state: ThreadState) -> float:
        """The share of thread samples in `state`, 0..1 (0 when nothing was sampled)."""
        return self.states.get(state.value, 0) / self.samples if self.samples else 0.0


@dataclass(frozen=True)
class Cause:
    """The one cause named at a breaking point, with what proves it and the knob."""

    kind: CauseKind
    sentence: str  # "1 worker: 97 % of samples asleep in wait_for_backend (app.py:31)"
    function: FrameShare | None = None  # the app's own function that proves it
    advice: str = ""  # one clause: "more threads, or an async server" ("" none)
    confidence: str = ""  # why it may be wrong, when the evidence is thin ("" it is not)


@dataclass(frozen=True)
class KneePrediction:
    """Where a stack must start queueing, from what it is (Little's law), stated before
    the load reaches it; the inputs are kept so a reader can check the arithmetic."""

    servers: int  # requests it can serve at once: workers × threads (or the db pool)
    service_ms: float  # the service time measured at the first levels
    rate: float  # capacity ≈ servers / service time, req/s
    concurrency: float  # the closed-loop concurrency where that rate is reached
    basis: str  # "1 worker × 1 thread; ~11 ms each (fastest at c=1)"

    def sentence(self) -> str:
        """ "one worker, ~11 ms each: queueing expected from ~90 req/s (c≈1)" """
        return (
            f"{self.basis}: queueing expected from ~{self.rate:,.0f} req/s "
            f"(c≈{self.concurrency:,.0f})"
        )
