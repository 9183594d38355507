"""`stackrace load`'s command line: its options, grouped by what a person wants to do,
each with its default, and its examples (commands/load.py checks and runs them).

The duration, warm-up and timeout parsers, and the request options (`--path`, `-m`,
`-H`, `--body`, `--body-file`, `--scenario`, `--expect-status`, `--slo`), are the race
settings' own (settings/race_settings.py), so a value means the same in `load`, bench
and the app; their help is said in `load`'s words where the settings' would speak of
what `load` has not (a workload, levels, a JUnit verdict). `-n/--requests` and `-z` are
ab's, hey's and oha's names; wrk's, hey's and oha's other flags that differ here are
named in the usage error (settings/parsers.py `OTHER_TOOLS`).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from stackrace.cluster.options import ClusterOptions
from stackrace.commands.cluster_args import add_cluster_arguments, cluster_options
from stackrace.commands.metrics_args import add_metrics_arguments, metrics_options
from stackrace.commands.namespace import typed_options
from stackrace.commands.output_args import add_allow_remote_argument, add_no_progress_argument
from stackrace.commands.parser import describe, examples
from stackrace.commands.settings_args import add_options, given
from stackrace.engine.model import MAX_RATE_PER_PROCESS
from stackrace.engine.slow_clients import ClientProfile, ProfileError, parse_profile, parse_share
from stackrace.settings import parsers
from stackrace.settings.race_settings import REQUEST_FIELDS, RaceSettings
from stackrace.settings.race_settings import options as options_of

if TYPE_CHECKING:
    from stackrace.metrics.exporter import MetricsOptions

# `warmup` means the same in load and bench: load this long before the figures count.
# Only its default differs, on purpose: `load` is one measurement of one target, read
# beside wrk's and ab's (which count from the first request), so it counts everything
# unless asked; bench compares stacks level by level, and a level's first seconds
# (connections opening, a JIT's first requests) would blur that, so its levels warm up
# (RaceSettings.warmup, 2 s).
LOAD_WARMUP = 0.0

EXAMPLES = examples(
    ("stackrace load http://127.0.0.1:8000/hello", "10 connections for 10 seconds"),
    ("stackrace load http://127.0.0.1:8000/hello -c 100 -d 30s", "100 connections for 30 seconds"),
    ("stackrace load http://127.0.0.1:8000/hello -n 1000", "exactly 1,000 requests, as ab -n"),
    ("stackrace load http://127.0.0.1:8000/hello --rate 500 -d 5s", "500 req/s, open loop"),
    (
        "stackrace load http://127.0.0.1:8000 --path /hello:3 --path /json",
        "a weighted mix of two paths",
    ),
    (
        "stackrace load http://127.0.0.1:8000/hello -d 2s --json",
        "the result as JSON (docs/load.md)",
    ),
)


def add_load_arguments(p: argparse.ArgumentParser) -> None:
    # every value is checked by its parser before anything starts (stackrace.settings.parsers)
    describe(
        p,
        "Load one server and print what came back, as wrk, hey and oha do: answers that "
        "counted a second and the share that failed first, then latency. One URL, several "
        "URLs of one server (a mix), or a base URL with your paths.",
        EXAMPLES,
        "docs/load.md",
    )
    p.add_argument(
        "urls",
        nargs="+",
        metavar="URL",
        help="http:// or https:// URL to load (loopback only unless --allow-remote). "
        "Several URLs of one server (same host and port) are one mix of their paths, one "
        "each; URLs of different servers are refused (race them with `stackrace bench "
        "--url NAME=URL …`). With --path or --scenario: the server's base URL",
    )
    how = p.add_argument_group("how much load")
    how.add_argument(
        "-c", "--concurrency", type=parsers.positive_int, default=10, metavar="N",
        help="connections (default 10)",
    )  # fmt: skip
    # requests, duration, warm-up and timeout are the race settings' (settings/
    # race_settings.py), declared there once: the same parser and meaning, ab's and wrk's
    # short flags, and the same defaults but for the warm-up's (LOAD_WARMUP)
    settings, race = options_of(), RaceSettings()
    duration = settings["duration"].parse
    assert duration  # it has a parser (settings/race_settings.py)
    add_options(how, only=("requests",), helps=LOAD_HELP, shorts={"requests": "-n"})
    add_options(how, only=("duration",), helps=LOAD_HELP, shorts={"duration": "-d"})
    # hey's and oha's name for it; said in -d's help rather than in the usage line
    how.add_argument("-z", dest="duration", type=duration, help=argparse.SUPPRESS)
    add_options(how, only=("rate",), helps=LOAD_HELP, parses=LOAD_PARSES)
    load_defaults = {"warmup": LOAD_WARMUP, "timeout": race.timeout}
    add_options(how, only=("warmup",), helps=LOAD_HELP, defaults=load_defaults)
    add_options(how, only=("timeout",), defaults=load_defaults)
    how.add_argument(
        "--connect-timeout", type=parsers.timeout_duration, default="5s", metavar="DURATION",
        help="a connect that takes longer fails (default 5s)",
    )  # fmt: skip
    add_options(how, only=("keepalive",), helps=LOAD_HELP, one_way={"keepalive": False})
    add_options(how, only=("clients", "slow_share"), helps=LOAD_HELP, parses=LOAD_PARSES)
    h2 = p.add_argument_group("HTTP/2")
    add_options(h2, only=("http2", "streams"), helps=LOAD_HELP, one_way={"http2": True})
    what = p.add_argument_group("what each request is (as in bench and the app)")
    add_options(what, only=REQUEST_FIELDS, helps=REQUEST_HELP)
    what.add_argument(
        "--expect-body", default=None, metavar="TEXT",
        help="an answer whose body is not exactly TEXT fails (invalid_body) (default: any body)",
    )  # fmt: skip
    add_tls_arguments(p)
    engine = p.add_argument_group("the engine")
    engine.add_argument(
        "--procs", type=parsers.procs, default="1", metavar="N",
        help="engine processes: a number or 'auto', one a core (capped at the usable "
        "cores) (default 1)",
    )  # fmt: skip
    engine.add_argument(
        "--engine-cpus", type=parsers.cpu_list, default=None, metavar="CPUS",
        help="pin the engine processes to these CPUs, e.g. '1' or '2,3' (default: any)",
    )  # fmt: skip
    out = p.add_argument_group("what it prints and writes")
    out.add_argument("--json", action="store_true", help="print the result as JSON "
                     "(its schema: report/load.schema.json, docs/load.md)")  # fmt: skip
    add_no_progress_argument(
        out, "no live progress line on stderr (it is shown only on a terminal anyway)"
    )
    out.add_argument(
        "--hdr-out", default=None, metavar="FILE",
        help="write the latency histogram to FILE, an HdrHistogram interval log (.hlog, "
        "base64 V2) that HdrHistogram's tools read",
    )  # fmt: skip
    add_options(out, only=("slo",), helps={"slo": SLO_HELP})
    add_metrics_arguments(out)
    where = p.add_argument_group("where it may load")
    add_allow_remote_argument(
        where, "allow a URL that is not on this machine (default: loopback only)"
    )
    add_cluster_arguments(p)


# the settings' help in load's words: one target, no levels
LOAD_HELP = {
    "http2": "speak HTTP/2: h2 negotiated by ALPN for https://, h2c with prior knowledge "
    "for http:// (default: HTTP/1.1)",
    "streams": "with --http2: streams in flight on each connection, as h2load's -m and oha's "
    "-p (-m is --method here); -c stays the number of connections",
    "requests": "send exactly N requests, each answered or failed, then stop (as ab -n and "
    "hey -n; closed loop); with -d as well, whichever ends first",
    "duration": f"how long to load, e.g. 500ms, 10s, 2m (default {RaceSettings().duration:g}s; "
    "-z DURATION too, as in hey and oha)",
    "warmup": f"load this long first, not counted (default {LOAD_WARMUP:g}s)",
    "keepalive": "every request on a new connection (Connection: close), as ab without -k "
    "(default: keep connections open)",
    "tls_verify": "do not check the server's certificate or name, as curl -k (default: check "
    "them against the system's CAs)",
    "tls_resume": "offer the last TLS session when connecting, so the server can resume it "
    "(default: a full handshake on every connection, as distinct clients make)",
    "rate": "a constant rate, req/s (open loop, latency corrected for coordinated "
    f"omission; -c connections carry it); at most {MAX_RATE_PER_PROCESS:,} per engine "
    "process (--procs) (default: closed loop, each connection sends its next request "
    "when the last one is answered)",
    "clients": "slow clients: 'slow', 'mobile', 'wan', or NAME:upload=20ms,read=64KB/s (each "
    "request sent in pieces over `upload`, responses read at `read`) (default: none)",
    "slow_share": "the share of connections that are slow clients, e.g. 20%% (default: all, "
    "with --clients)",
    "cacert": "trust the certificates in this PEM file instead of the system's (a "
    "self-signed server's own certificate)",
}


# the request options' help, in load's words (a URL's path is what --path would be)
REQUEST_HELP = {
    "paths": "a path of the server to load, with a weight: /items or /a:3 (repeatable: a "
    "weighted mix; the URL is then the server's base; a path with a query is sent whole: "
    "docs/requests.md)",
}
SLO_HELP = (
    "hold the load to an objective, targets to stay below, e.g. 'p99<50ms,failures<0.1%%' "
    "(a percentile p0-p100, mean, max, failures, waiting): the summary says met or "
    "MISSED, and a miss exits 1 (default: none)"
)


def client_profile(text: str) -> ClientProfile:
    try:
        return parse_profile(text)
    except ProfileError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def slow_share(text: str) -> float:
    try:
        return parse_share(text)
    except ProfileError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# load's own parser for four race settings, each declared once in settings/race_settings.py:
# --rate is one target's rate (no per-stack ceiling), --clients and --slow-share parse to
# the engine's profile and share, --cacert stays the text given (load checks the file
# after the parse, with its own message)
LOAD_PARSES: dict[str, Callable[[str], Any] | None] = {
    "rate": parsers.positive_rate,
    "clients": client_profile,
    "slow_share": slow_share,
    "cacert": None,
}


def add_tls_arguments(p: argparse.ArgumentParser) -> None:
    """--insecure, --cacert and --tls-resume (https:// URLs)."""
    tls = p.add_argument_group("https")
    add_options(
        tls, only=("tls_verify",), helps=LOAD_HELP, shorts={"tls_verify": "-k"},
        one_way={"tls_verify": False},
    )  # fmt: skip
    add_options(tls, only=("cacert",), helps=LOAD_HELP, parses=LOAD_PARSES)
    add_options(tls, only=("tls_resume",), helps=LOAD_HELP, one_way={"tls_resume": True})


@dataclass(frozen=True)
class LoadOptions:
    """`stackrace load`'s command line, typed (the request options by field, as the
    race settings name them: `requests_given`)."""

    urls: tuple[str, ...]
    concurrency: int
    requests: int | None
    duration: float | None
    rate: float | None
    warmup: float
    timeout: float
    connect_timeout: float
    keepalive: bool
    clients: ClientProfile | None
    slow_share: float | None
    requests_given: Mapping[str, Any]
    expect_body: str | None
    insecure: bool
    cacert: str | None
    tls_resume: bool
    http2: bool
    streams: int | None  # with http2: streams per connection (None: not given)
    procs: parsers.Procs
    engine_cpus: list[int] | None
    json: bool
    no_progress: bool
    hdr_out: str | None
    slo: str | None
    allow_remote: bool
    metrics: MetricsOptions | None
    cluster: ClusterOptions


def load_options(args: argparse.Namespace) -> LoadOptions:
    return typed_options(
        LoadOptions,
        args,
        requests_given={k: v for k, v in given(args).items() if k in REQUEST_FIELDS},
        insecure=not args.tls_verify,
        metrics=metrics_options(args),  # (args.metrics is the address; this, the group)
        cluster=cluster_options(args),
    )
