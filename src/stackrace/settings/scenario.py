"""Your endpoints as the workload: the requests a race sends when they are not the
shipped apps' `/hello` or `/io`.

    --path /api/items              one path, every request
    --path /a:3 --path /b:1        a weighted mix: three of /a for one of /b
    --path '/search?from=10:30'    a path with a query is sent whole (weight 1): a final
                                   `:N` is a weight only on a path without `?`
    -m POST -H 'Content-Type: application/json' --body '{"x": 1}'   the shape of each
    --expect-status 404            what the answers should be (default: anything < 400)
    --scenario requests.toml       the same, per request, in a file:

        [[requests]]
        path = "/api/items"        # required; query allowed: /search?q=x
        method = "POST"            # default GET
        headers = { "Content-Type" = "application/json" }
        body = '{"name": "x"}'
        weight = 3                 # default 1
        expect = "201"             # statuses that count as answers: "200", "2xx", "200-299,404"
        name = "create"            # a label in the tables (default: METHOD PATH)

Every value is user text that ends up on a request line or in a header, so each is
checked here, with one line naming the option or the file and the request: a path
starts with `/` and has no spaces or control characters, a method is letters (not
HEAD, which the engine refuses), a header is `Name: value` without line breaks, a
weight a whole number 1..1000, at most 64 kinds of request, and framing headers that say
what is sent (a `Content-Length` that is the body's, a `Transfer-Encoding: chunked` that
the engine honours by chunking the body, never both). The engine gets them as
`MixEntry`s (engine/mix.py): one kind with no expectation is a plain target.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from urllib.parse import urlsplit

import msgspec

from stackrace.base import inputfile
from stackrace.base.errors import StackraceError
from stackrace.engine.model import MixEntry, TargetSpec
from stackrace.engine.request import RequestError, check_framing, check_method
from stackrace.settings import statuses

MAX_KINDS = 64
MAX_WEIGHT = 1000
BODY_LIMIT = 16 * inputfile.MiB
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$")


class ScenarioError(StackraceError, ValueError):
    """Requests that cannot be sent; the message names the option or file."""

    exit_code = 2  # input that cannot be used: refused before anything starts


@dataclass(frozen=True)
class RequestKind:
    """One kind of request of a race."""

    target: str  # path and query, as on the request line
    method: str = "GET"
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    weight: int = 1
    expect: str | None = None  # None: anything below 400
    name: str = ""

    @property
    def label(self) -> str:
        return self.name or (
            self.target if self.method == "GET" else f"{self.method} {self.target}"
        )

    def entry(self) -> MixEntry:
        return MixEntry(
            target=self.target,
            method=self.method,
            headers=list(self.headers),
            body=self.body,
            weight=self.weight,
            expect=statuses.engine_list(self.expect),
        )


def check_path(text: str) -> str | None:
    """What is wrong with a request path (None: nothing)."""
    if not text.startswith("/"):
        return f"a path starts with '/', got {text[:60]!r}"
    if len(text) > 2048 or not text.isprintable() or any(c.isspace() for c in text):
        return f"{text[:60]!r} is not a path (no spaces or control characters, at most 2048)"
    return None


# `--path PATH[:WEIGHT]`: the one rule (README "Your app", docs/requests.md)
_WEIGHTED = re.compile(r"^(.+):([+-]?\d+)$")


def parse_path_item(text: str) -> tuple[str, int]:
    """`--path` → (path, weight), by one rule: a path with a query (`?`) is sent whole,
    weight 1 (`/search?from=10:30`, `/h?ip=::1`); otherwise a final `:N` is its weight,
    1..MAX_WEIGHT (`/a:3`; `/a:0` and `/a:-1` are errors, never paths). A path that ends
    in `:N` itself is given with its weight: `/t/12:30:1`."""
    m = None if "?" in text else _WEIGHTED.match(text)
    if m:
        path, n = m.group(1), int(m.group(2))
        if not 1 <= n <= MAX_WEIGHT:
            raise ScenarioError(
                f"{text[:60]!r}: the weight after the last ':' must be 1..{MAX_WEIGHT}, got "
                f"{m.group(2)} (a path ending in ':N' is written with its weight: "
                f"{text[:60]}:1)"
            )
    else:
        path, n = text, 1
    problem = check_path(path)
    if problem:
        raise ScenarioError(problem)
    return path, n


def parse_header(text: str) -> tuple[str, str]:
    name, colon, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not colon or not _HEADER_NAME.match(name):
        raise ScenarioError(f"a header is 'Name: value', got {text[:60]!r}")
    if not value.isprintable() or len(value) > 8192:
        raise ScenarioError(f"header {name}: the value has control characters or is too long")
    return name, value


def _expect(text: str | None) -> str | None:
    if text is None:
        return None
    return statuses.check(text)


class _Request(msgspec.Struct, forbid_unknown_fields=True):
    path: str
    method: str = "GET"
    headers: dict[str, str] = {}
    body: str = ""
    weight: int = 1
    expect: str | None = None
    name: str = ""


class _File(msgspec.Struct, forbid_unknown_fields=True):
    requests: list[_Request]


def load_scenario(path: str) -> list[RequestKind]:
    """The requests of a scenario file, each checked; ScenarioError naming the file."""
    # TOML's parser (~2 ms) only when a file is read: every command's parser imports this
    # module (the request options), so this keeps start-up fast

    try:
        raw = inputfile.parse_toml(path, inputfile.read_text(path, limit=BODY_LIMIT))
        data = msgspec.convert(raw, _File)
    except inputfile.InputFileError as exc:
        raise ScenarioError(f"--scenario {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"{path}: not valid TOML: {exc}") from None
    except msgspec.ValidationError as exc:
        raise ScenarioError(
            f"{path}: {exc} (a list of [[requests]] with path, method, "
            "headers, body, weight, expect, name)"
        ) from None
    if not data.requests:
        raise ScenarioError(f"{path}: no [[requests]]")
    kinds = []
    for i, r in enumerate(data.requests, 1):
        where = f"{path}: request {i}"
        try:
            problem = check_path(r.path)
            if problem:
                raise ScenarioError(problem)
            if not 1 <= r.weight <= MAX_WEIGHT:
                raise ScenarioError(f"weight must be 1..{MAX_WEIGHT}, got {r.weight}")
            if r.name and (not r.name.isprintable() or len(r.name) > 60):
                raise ScenarioError("a name is printable text of at most 60 characters")
            kinds.append(
                RequestKind(
                    target=r.path,
                    method=check_method(r.method),
                    headers=tuple(parse_header(f"{k}: {v}") for k, v in r.headers.items()),
                    body=r.body.encode(),
                    weight=r.weight,
                    expect=_expect(r.expect),
                    name=r.name,
                )
            )
        except (ScenarioError, RequestError, statuses.StatusError) as exc:
            raise ScenarioError(f"{where}: {exc}") from None
    return _checked(kinds, path)


def kinds_from(
    paths: list[str],
    method: str = "GET",
    headers: list[str] | None = None,
    body: str | None = None,
    body_file: str | None = None,
    scenario: str | None = None,
    expect: str | None = None,
) -> list[RequestKind] | None:
    """The requests of these options (None: none given, the workload's own path)."""
    if scenario:
        if paths:
            raise ScenarioError("give --path or --scenario, not both")
        return load_scenario(scenario)
    if not paths:
        return None
    try:
        items = [parse_path_item(item) for item in paths]
    except ScenarioError as exc:
        raise ScenarioError(f"--path: {exc}") from None
    return _shaped(items, method, headers, body, body_file, expect, "--path")


def url_kinds(
    targets: list[str],
    method: str = "GET",
    headers: list[str] | None = None,
    body: str | None = None,
    body_file: str | None = None,
    expect: str | None = None,
) -> list[RequestKind]:
    """`stackrace load URL…`: each URL's path and query one request of weight 1 (a
    colon in a URL's path is part of it, never a weight), shaped by the same options
    and checks as `--path`."""
    items = []
    for target in targets:
        problem = check_path(target)
        if problem:
            raise ScenarioError(f"URL: {problem}")
        items.append((target, 1))
    return _shaped(items, method, headers, body, body_file, expect, "URL")


def _shaped(
    items: list[tuple[str, int]],
    method: str,
    headers: list[str] | None,
    body: str | None,
    body_file: str | None,
    expect: str | None,
    where: str,
) -> list[RequestKind]:
    """(path, weight) pairs as requests of one shape: method, headers, body, expect."""
    data = b""
    if body is not None and body_file is not None:
        raise ScenarioError("give --body or --body-file, not both")
    if body is not None:
        data = body.encode()
    elif body_file is not None:
        try:
            data = inputfile.read_bytes(body_file, limit=BODY_LIMIT)
        except inputfile.InputFileError as exc:
            raise ScenarioError(f"--body-file {exc}") from None
    try:
        method = check_method(method)
        parsed = tuple(parse_header(h) for h in headers or [])
        expected = _expect(expect)
    except (ScenarioError, RequestError, statuses.StatusError) as exc:
        raise ScenarioError(f"{where}: {exc}") from None
    kinds = [
        RequestKind(
            target=path, weight=weight, method=method, headers=parsed, body=data, expect=expected
        )
        for path, weight in items
    ]
    return _checked(kinds, where)


def _checked(kinds: list[RequestKind], where: str) -> list[RequestKind]:
    """At most MAX_KINDS, and each request's framing headers true to its body (the
    engine's rule, engine.request.check_framing), checked before anything starts."""
    if len(kinds) > MAX_KINDS:
        raise ScenarioError(f"{where}: at most {MAX_KINDS} kinds of request, got {len(kinds)}")
    for i, k in enumerate(kinds, 1):
        try:
            check_framing(k.method, list(k.headers), k.body)
        except RequestError as exc:
            which = f"request {i} ({k.label})" if len(kinds) > 1 else k.label
            raise ScenarioError(f"{where}: {which}: {exc}") from None
    return kinds


def entries(kinds: list[RequestKind]) -> list[MixEntry]:
    """What the engine is given: a mix, or nothing when one plain request will do."""
    if len(kinds) == 1 and statuses.engine_list(kinds[0].expect) is None:
        return []
    return [k.entry() for k in kinds]


def target_spec(
    id: str,
    base_url: str,
    kinds: list[RequestKind],
    *,
    concurrency: int,
    rate: float | None = None,
    keepalive: bool = True,
) -> TargetSpec:
    """These requests on the server at `base_url` (`http://host:port`; any path of it is
    not used): the first request as the target's own, and the mix when there is one.
    The race core and `stackrace load` both load a user's requests through this."""

    base = urlsplit(base_url)
    first = kinds[0]
    return TargetSpec(
        id=id,
        url=f"{base.scheme}://{base.netloc}{first.target}",
        method=first.method,
        headers=list(first.headers),
        body=first.body,
        concurrency=concurrency,
        rate=rate,
        keepalive=keepalive,
        mix=entries(kinds),
    )


def describe(kinds: list[RequestKind]) -> str:
    """`/ ×3, /slow ×1` (weights shown only when they differ)."""
    if len(kinds) == 1:
        return kinds[0].label
    same = len({k.weight for k in kinds}) == 1
    return ", ".join(k.label if same else f"{k.label} ×{k.weight}" for k in kinds)


def health(kinds: list[RequestKind] | None) -> tuple[str, str, dict[str, str]]:
    """Where a stack of the user's own is ready, and on what: the first request's path,
    answered with its expected status (or anything from 200 to 399), asked with its
    headers (an app set for production answers only its own Host), less those that
    frame a body (the probe sends none)."""
    if not kinds:
        return "/", "200-399", {}
    first = kinds[0]
    headers = {
        k: v for k, v in first.headers if k.lower() not in ("content-length", "transfer-encoding")
    }
    return first.target, first.expect or "200-399", headers
