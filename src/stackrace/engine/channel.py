"""The control channel between a driver and an engine process.

The engine process (`python -m stackrace.engine.worker`) reads commands on its stdin and
writes messages on its stdout, one JSON object per line. Whoever drives it (the CLI, the
TUI, `bench`, through `stackrace.engine.client.Engine`) uses only this channel.

Commands (driver -> engine), tagged by "op":
  {"op": "configure", "settings": EngineSettings}      once, first
  {"op": "add", "target": TargetSpec}                  start loading a target
  {"op": "remove", "id": ID}                           stop loading it, close its connections
  {"op": "concurrency", "n": N, "id": ID | null}       connections for one target, or all
  {"op": "rate", "rate": R | null, "id": ID | null}    requests/s (null: closed loop)
  {"op": "budget", "n": N | null, "id": ID | null}    closed loop: send at most N more
                                                       requests, as ab -n (null: no limit)
  {"op": "pause"} / {"op": "resume"}                   stop sending / go on
  {"op": "report"}                                     ask for the counters since the last report
  {"op": "stop"}                                       close everything, send a last report, exit

Messages (engine -> driver), tagged by "type":
  {"type": "ready", "pid": P, "nofile": N}             the process can send load
  {"type": "report", "seq": S, "seconds": T, "cpu": C, "targets": [TargetReport…]}
  {"type": "error", "message": "…"}                    a command was refused; the engine goes on
  {"type": "spent", "id": ID}                          a target's budget is spent: every request
                                                       of it ended (once per budget)

A report carries counts for the interval since the previous one, not running totals, and
the interval's latency histogram as sparse [index, count, …] pairs in HdrHistogram's
layout (see histogram.py), so the driver can merge several engine processes exactly.
The driver asks for a report every 250 ms, which keeps all engine processes on one clock;
`spent` lets it ask at once when a budget ends (`load -n 1` need not wait for the tick).
The engine exits when its stdin closes or its parent dies.
"""

from __future__ import annotations

import msgspec

from stackrace.engine.model import EngineSettings, H2Counts, KindStats, TargetSpec


class Configure(msgspec.Struct, tag_field="op", tag="configure"):
    settings: EngineSettings


class Add(msgspec.Struct, tag_field="op", tag="add"):
    target: TargetSpec


class Remove(msgspec.Struct, tag_field="op", tag="remove"):
    id: str


class SetConcurrency(msgspec.Struct, tag_field="op", tag="concurrency"):
    n: int
    id: str | None = None


class SetRate(msgspec.Struct, tag_field="op", tag="rate"):
    rate: float | None
    id: str | None = None


class SetBudget(msgspec.Struct, tag_field="op", tag="budget"):
    n: int | None
    id: str | None = None


class Pause(msgspec.Struct, tag_field="op", tag="pause"):
    pass


class Resume(msgspec.Struct, tag_field="op", tag="resume"):
    pass


class Report(msgspec.Struct, tag_field="op", tag="report"):
    pass


class Stop(msgspec.Struct, tag_field="op", tag="stop"):
    pass


Command = (
    Configure | Add | Remove | SetConcurrency | SetRate | SetBudget | Pause | Resume | Report | Stop
)


class Ready(msgspec.Struct, tag_field="type", tag="ready"):
    pid: int
    nofile: int


class TargetReport(H2Counts, kw_only=True):
    id: str
    sent: int  # requests started in the interval (rate mode: became due)
    requests: int  # complete responses
    ok: int
    bytes: int
    late: int
    failures: dict[str, int]
    status: dict[int, int]
    errors: dict[str, int]
    hist: list[int]
    hist_unc: list[int] | None
    open: int
    want: int
    rate: float | None
    # A gauge at report time: requests sent and not answered (rate mode: and due but
    # not yet written, `unsent`), and their ages as sparse histogram pairs (µs).
    waiting: int = 0
    unsent: int = 0
    connecting: int = 0  # of `waiting`: the connect still under way, nothing written
    # of `connecting`: TCP is up and the TLS handshake under way (the server took it)
    handshaking: int = 0
    # of `waiting`: over a second old, and the request not acknowledged by the server's
    # kernel (a handshake its full listen backlog dropped: the client thinks it is in)
    unacked: int = 0
    waiting_ages: list[int] = msgspec.field(default_factory=list)
    lag: list[int] = msgspec.field(default_factory=list)  # engine lag samples, sparse (µs)
    # --requests: perf_counter_ns of the budget's first send and of the last answer or
    # failure (CLOCK_MONOTONIC, comparable across the driver's engine processes)
    budget_t0: int = 0
    last_done: int = 0
    # requests in flight, sampled every 50 ms: their sum and the number of samples (the
    # time-average is Little's L, to check req/s × mean latency against)
    inflight_sum: int = 0
    inflight_samples: int = 0
    kinds: list[KindStats] | None = None  # a target with a mix (engine/mix.py)
    unsolicited: int = 0  # responses no request asked for (see WindowStats)
    # new connections' connect and TLS handshake times, TLS targets' first-byte times
    # (sparse histogram pairs, µs), TLS handshakes and how many resumed a session
    connect_times: list[int] = msgspec.field(default_factory=list)
    tls_times: list[int] = msgspec.field(default_factory=list)
    first_byte_times: list[int] = msgspec.field(default_factory=list)
    handshakes: int = 0
    resumed: int = 0
    # rate mode: how late the scheduler sent each request it had a connection for
    # (sparse histogram pairs, µs)
    send_lateness: list[int] = msgspec.field(default_factory=list)
    # HTTP/2's figures of the interval (streams in flight now, a gauge): H2Counts


class ReportMsg(msgspec.Struct, tag_field="type", tag="report"):
    seq: int
    seconds: float
    cpu: float  # CPU seconds (user + sys) the process used in the interval
    targets: list[TargetReport]
    final: bool = False
    # seconds the process was runnable but waiting for a CPU (the scheduler's run-queue
    # time), and how many times it was put on a CPU: an engine starved by other
    # processes on its core, and by how long each wake-up waited
    wait: float = 0.0
    runs: int = 0


class ErrorMsg(msgspec.Struct, tag_field="type", tag="error"):
    message: str


class Spent(msgspec.Struct, tag_field="type", tag="spent"):
    id: str


Message = Ready | ReportMsg | ErrorMsg | Spent

command_encoder = msgspec.json.Encoder()
command_decoder = msgspec.json.Decoder(Command)
message_decoder = msgspec.json.Decoder(Message)
