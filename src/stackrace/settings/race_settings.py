"""The settings of a race, declared once.

`RaceSettings` is the one place a setting and its default live. Everything else is
derived from it:
- `stackrace bench`'s options (`add_options`): flag, help and parser come from each
  field's metadata, so a new setting is one field here;
- presets (`presets/*.toml`): a preset is these fields plus a description (stackrace.
  presets), checked by the same struct (unknown keys are refused);
- the saved run (report/schema.py `Settings`): these fields plus what was decided at run
  time (the isolation chosen and why, the path loaded).
- the app's race: every field but bench's own (`BENCH_ONLY`: an `Opt(bench_only=True)`,
  the levels, durations, repeats and isolation a bench steps through; the app moves
  the load live instead), merged over a preset the same way as bench's (`with_given`);
- the picker's remembered choices (race/live/choices.py): a few of these fields, read back
  through `from_mapping`, so a hand-edited file is held to the same parsers;
- `stackrace load`'s requests: the request fields alone (`REQUEST_FIELDS`), read into
  the same struct and turned into requests by the same code (stackrace.settings.scenario).

Durations are seconds (floats); the CLI and TOML accept "500ms", "10s", "2m". Every
value goes through the same parser (stackrace.settings.parsers for numbers and durations,
stackrace.settings.race_parsers for the rest) from the command line and from a preset, so
a value is valid or not the same way everywhere.

Long because every setting of a race is one field here with its flag, help and parser:
the point of the file is that they are declared in one place; cut in two, a new setting
would have two homes to choose from.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import msgspec

from stackrace.engine.model import MAX_RATE_PER_PROCESS
from stackrace.engine.slow_clients import ClientProfile, parse_profile
from stackrace.settings import race_parsers as parse
from stackrace.settings import scenario
from stackrace.settings.parsers import (
    COMMAND_LINE,
    non_negative_duration,
    non_negative_int,
    positive_duration,
    positive_int,
    positive_int_list,
    timeout_duration,
)
from stackrace.settings.workloads import WORKLOADS

if TYPE_CHECKING:
    from stackrace.settings.scenario import RequestKind

# the settings that say what each request is (your endpoints, stackrace.settings.scenario): all
# that `stackrace load` takes of a race's settings
REQUEST_FIELDS = ("paths", "method", "header", "body", "body_file", "scenario", "expect_status")


class Opt(msgspec.Struct, frozen=True):
    """How a setting appears on the command line."""

    flag: str
    help: str
    parse: Callable[[str], Any] | None = None
    metavar: str | None = None
    negate: str | None = None  # for booleans: the flag that says the opposite
    negate_help: str = ""  # ... and what it does
    repeat: bool = False  # a list given one item per flag (--path /a --path /b)
    short: str | None = None  # e.g. "-m"
    # bench's alone (levels, durations, repeats, isolation): not an option of the app,
    # which moves the load live instead
    bench_only: bool = False


def opt(flag: str, help: str, parse: Callable[[str], Any] | None = None, **kw: Any) -> Any:
    return msgspec.Meta(extra={"opt": Opt(flag, help, parse, **kw)})


class RaceSettings(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """What is raced and how. Defaults here are the defaults everywhere."""

    stacks: Annotated[
        list[str],
        opt(
            "--stacks",
            "comma-separated stacks or variants (`stackrace stacks` lists them)",
            metavar="A,B,…",
        ),
    ] = []
    workload: Annotated[
        str,
        opt(
            "--workload",
            f"the endpoint every stack serves and is loaded on: {', '.join(WORKLOADS)}",
            parse.workload_name,
            metavar="NAME",
        ),
    ] = "hello"
    io_ms: Annotated[
        int, opt("--io-ms", "how long /io waits, ms", non_negative_int, metavar="MS")
    ] = 10
    queries: Annotated[
        int, opt("--queries", "range queries per /db request", positive_int, metavar="N")
    ] = 10
    # the levels a bench steps through; "concurrency" in a preset, a run file and on
    # the command line (--concurrency), as ever: everywhere else in stackrace a
    # concurrency is one number (a level, a target's connections), so the field says
    # it is a list of them
    concurrency_levels: Annotated[
        list[int],
        opt(
            "--concurrency",
            "connections per stack, levels e.g. 10,100,500",
            positive_int_list,
            metavar="N,N,…",
            bench_only=True,
        ),
    ] = msgspec.field(default_factory=lambda: [10, 100], name="concurrency")
    duration: Annotated[
        float,
        opt(
            "--duration",
            "measured time per level",
            positive_duration,
            metavar="DURATION",
            bench_only=True,
        ),
    ] = 10.0
    warmup: Annotated[
        float,
        opt(
            "--warmup",
            "load before each level's figures count",
            non_negative_duration,
            metavar="DURATION",
            bench_only=True,
        ),
    ] = 2.0
    warmup_requests: Annotated[
        int,
        opt(
            "--warmup-requests",
            "also warm up until this many requests were answered (a JIT's warm-up is "
            "counted in requests, not seconds)",
            non_negative_int,
            metavar="N",
            bench_only=True,
        ),
    ] = 0
    rate: Annotated[
        float | None,
        opt(
            "--rate",
            "constant rate per stack, req/s, instead of levels (at most "
            f"{MAX_RATE_PER_PROCESS:,}: a stack's engine process schedules no more)",
            parse.stack_rate,
        ),
    ] = None
    rate_connections: Annotated[
        int,
        opt(
            "--rate-connections",
            "connections per stack that carry a --rate",
            positive_int,
            metavar="N",
        ),
    ] = 200
    requests: Annotated[
        int | None,
        opt(
            "--requests",
            "end each level after exactly this many requests were answered or failed, "
            "as ab -n (waits for all of them, up to the request timeout)",
            positive_int,
            metavar="N",
            bench_only=True,
        ),
    ] = None
    streams: Annotated[
        int,
        opt(
            "--streams",
            "HTTP/2 streams per connection for a stack's h2 variant (hypercorn:http=2), as "
            "h2load's -m: the level is the requests in flight, on level / N connections",
            positive_int,
            metavar="N",
        ),
    ] = 1
    keepalive: Annotated[
        bool,
        opt(
            "--keepalive",
            "keep connections open between requests",
            parse.on_off,
            negate="--no-keepalive",
            negate_help="every request on a new connection (Connection: close), as ab without -k",
        ),
    ] = True
    isolation: Annotated[
        str,
        opt(
            "--isolation",
            "auto, rotate (one stack at a time) or parallel",
            parse.isolation,
            metavar="MODE",
            bench_only=True,
        ),
    ] = "auto"
    repeat: Annotated[
        int,
        opt(
            "--repeat",
            "N independent rounds, interleaved in a shuffled order, their spread the 90 %% "
            "interval: each level again (or, with --capacity, each capacity, its stack "
            "started afresh)",
            positive_int,
            metavar="N",
            bench_only=True,
        ),
    ] = 1
    timeout: Annotated[
        float,
        opt(
            "--timeout",
            "a request with no answer after this long fails",
            timeout_duration,
            metavar="DURATION",
        ),
    ] = 10.0
    tls_verify: Annotated[
        bool,
        opt(
            "--tls-verify",
            "https --url targets: check the server's certificate and name",
            parse.on_off,
            negate="--insecure",
            negate_help="https --url targets: do not check the server's certificate or "
            "name, as curl -k",
        ),
    ] = True
    cacert: Annotated[
        str | None,
        opt(
            "--cacert",
            "https --url targets: trust the certificates in this PEM file",
            parse.cacert_file,
            metavar="FILE",
        ),
    ] = None
    tls_resume: Annotated[
        bool,
        opt(
            "--tls-resume",
            "https: offer the last TLS session on each new connection",
            parse.on_off,
            negate="--no-tls-resume",
            negate_help="https: a full handshake on every new connection, as distinct clients make",
        ),
    ] = False
    http2: Annotated[bool, opt("--http2", "speak HTTP/2", parse.on_off, negate="--http1")] = False
    clients: Annotated[
        str | None,
        opt(
            "--clients",
            "slow clients: slow, mobile, wan or NAME:upload=20ms,read=64KB/s (each request "
            "sent in pieces over `upload`, responses read at `read`)",
            parse.client_profile,
            metavar="PROFILE",
        ),
    ] = None
    slow_share: Annotated[
        float,
        opt(
            "--slow-share",
            "the share of each stack's connections that are slow clients, e.g. 20%% "
            "(default: all of them, with --clients)",
            parse.slow_share,
            metavar="SHARE",
        ),
    ] = 1.0
    cpus: Annotated[
        int | None,
        opt("--cpus", "cores to give each stack (the VPS presets: 1)", positive_int, metavar="N"),
    ] = None
    memory_max: Annotated[
        str | None,
        opt("--memory-max", "memory cap per stack, e.g. 128M", parse.memory_size, metavar="SIZE"),
    ] = None
    # your endpoints instead of the workload's (stackrace.settings.scenario)
    paths: Annotated[
        list[str],
        opt(
            "--path",
            "load this path of your app, with a weight: /items or /a:3 (repeatable: a "
            "weighted mix; a path with a query is sent whole: docs/requests.md)",
            parse.path_item,
            metavar="PATH[:WEIGHT]",
            repeat=True,
        ),
    ] = []
    method: Annotated[
        str,
        opt("--method", "the HTTP method of your requests", parse.http_method, short="-m"),
    ] = "GET"
    header: Annotated[
        list[str],
        opt(
            "--header",
            "a header of your requests, 'Name: value' (repeatable)",
            parse.header_line,
            metavar="'K: V'",
            repeat=True,
            short="-H",
        ),
    ] = []
    body: Annotated[
        str | None,
        opt("--body", "the body of your requests", metavar="TEXT"),
    ] = None
    body_file: Annotated[
        str | None,
        opt(
            "--body-file",
            "the body of your requests, read from FILE",
            parse.file_name,
            metavar="FILE",
        ),
    ] = None
    scenario: Annotated[
        str | None,
        opt(
            "--scenario",
            "a TOML file of requests (path, method, headers, body, weight, expect) "
            "instead of --path",
            parse.file_name,
            metavar="FILE",
        ),
    ] = None
    expect_status: Annotated[
        str | None,
        opt(
            "--expect-status",
            "statuses the answers to your requests should have, e.g. 200, 2xx, 200-299,404 "
            "(default: anything below 400; others are failures)",
            parse.status_codes,
            metavar="CODES",
        ),
    ] = None

    slo: Annotated[
        str | None,
        opt(
            "--slo",
            "the objective every level is held to, targets to stay below, e.g. "
            "'p99<50ms,failures<0.1%%' (a percentile p0-p100 with at most two decimals, "
            "mean, max, failures, waiting, rss, cpu)",
            parse.slo_terms,
            metavar="TERMS",
        ),
    ] = None

    @property
    def path(self) -> str:
        """What every request loads: the workload's path, or your requests."""
        if self.paths or self.scenario:
            return "your requests: " + (
                f"scenario {self.scenario}" if self.scenario else " ".join(self.paths)
            )
        return WORKLOADS[self.workload].path(self.io_ms, self.queries)

    @property
    def own_requests(self) -> bool:
        """Your endpoints (--path, --scenario) rather than the workload's."""
        return bool(self.paths or self.scenario)

    def request_kinds(self) -> list[RequestKind] | None:
        """Your requests, read and checked (ScenarioError); None: the workload's path."""
        return scenario.kinds_from(
            self.paths,
            self.method,
            self.header,
            self.body,
            self.body_file,
            self.scenario,
            self.expect_status,
        )

    @property
    def client_profile(self) -> ClientProfile | None:
        """The slow clients' profile, or None: every client is fast."""
        return parse_profile(self.clients) if self.clients else None

    @property
    def levels(self) -> list[int]:
        """The levels a bench steps through: concurrencies, or the one rate."""
        return [int(self.rate)] if self.rate is not None else list(self.concurrency_levels)

    def label(self) -> str:
        if self.own_requests:
            return f"scenario {self.scenario}" if self.scenario else " ".join(self.paths)
        if self.workload == "io":
            return f"io {self.io_ms}ms"
        if self.workload == "db":
            return f"db ×{self.queries}"
        return self.workload


def field_of_key() -> dict[str, str]:
    """Each setting's key in a preset, a run file or a recording, and its field's name:
    the same but for `concurrency` (the field `concurrency_levels`). Options, `given`
    and `merge` speak field names; files speak keys."""
    return {f.encode_name: f.name for f in msgspec.structs.fields(RaceSettings)}


@functools.cache
def options() -> Mapping[str, Opt]:
    """Each setting's command-line form, by field name. Read once a process (the type
    hints of RaceSettings resolved: ~2 ms, asked four times by a `load`'s start)."""
    out: dict[str, Opt] = {}
    hints = typing.get_type_hints(RaceSettings, include_extras=True)
    for name in RaceSettings.__struct_fields__:
        for meta in getattr(hints[name], "__metadata__", ()):
            extra = getattr(meta, "extra", None) or {}
            if "opt" in extra:
                out[name] = extra["opt"]
    return out


# the fields the app does not take (its -c is a starting level, not bench's levels)
BENCH_ONLY = tuple(name for name, o in options().items() if o.bench_only)


def from_mapping(raw: dict[str, Any], where: str) -> RaceSettings:
    """Settings from TOML-like values (durations as "10s"), each value checked by the
    same parser as its option; errors name `where` and the key."""
    values: dict[str, Any] = {}
    opts = options()
    fields = field_of_key()
    for key, value in raw.items():
        o = opts.get(fields.get(key, ""))
        if o is None or o.parse is None or key == "stacks":
            values[key] = value
            continue
        if o.repeat and isinstance(value, list):
            try:
                values[key] = [o.parse(str(v)) for v in value]
            except ValueError as exc:
                raise ValueError(f"{where}: key {key!r}: {exc}") from None
            continue
        if isinstance(value, list):
            text = ",".join(str(v) for v in value)
        elif isinstance(value, bool):
            values[key] = value
            continue
        else:
            text = str(value)
        try:
            values[key] = o.parse(text)
        except ValueError as exc:
            raise ValueError(f"{where}: key {key!r}: {exc}") from None
    try:
        return msgspec.convert(values, RaceSettings)
    except msgspec.ValidationError as exc:
        raise ValueError(f"{where}: {exc}") from None


def check_values(settings: RaceSettings, where: str) -> None:
    """Hold settings decoded from a file (a saved run, a recording) to the same parsers
    as the command line: a run file is data that travels, and `concurrency = [-5, 0]`
    in one must be an error naming the file and key, not a crash deep in the engine.
    Raises ValueError."""
    keys = field_of_key()  # a subclass's own fields (a run's `path`) are not settings
    values = {
        k: v
        for k, v in msgspec.to_builtins(settings).items()
        if k in keys and v is not None and k != "stacks"
    }
    from_mapping(values, where)


def merge(base: RaceSettings, changes: dict[str, Any]) -> RaceSettings:
    """`base` (defaults, a preset, a rerun's) with `changes` over it; stacks given as
    `--stacks a,b:workers=2,threads=4` are split into one name each
    (`race_parsers.split_stacks`)."""
    if "stacks" in changes:
        refs = changes["stacks"]
        changes = {**changes, "stacks": [s for ref in refs for s in parse.split_stacks(ref)]}
    return msgspec.structs.replace(base, **changes)


def with_options(base: RaceSettings, given: dict[str, Any], app_given: bool) -> RaceSettings:
    """`base` (defaults, a preset's, a rerun's) with the settings given on a command line
    (by field name) over it: how bench, tune and the app merge a preset with options.
    Your app (`--app`) without your own paths loads the app's root."""
    settings = merge(base, given)
    if app_given and not settings.own_requests:
        settings = msgspec.structs.replace(settings, paths=["/"])  # your app's own root
    return settings


def stacks_named_in(stacks_given: bool, preset_file: Path | None, run_file: str | None) -> str:
    """Where the race's stacks were written, for stacks.variants.resolve: the command
    line when --stacks was given there, else the preset's file or the run file they came
    from (a file may not name an executable)."""

    if stacks_given:
        return COMMAND_LINE
    if preset_file is not None:
        return f"the preset {preset_file}"
    if run_file:
        return f"the run file {run_file}"
    return COMMAND_LINE
