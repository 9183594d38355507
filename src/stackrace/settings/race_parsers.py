"""The parsers of a race's own settings: a workload's name, an HTTP method, a header,
statuses, an SLO's terms, a slow-client profile, a CA file, a rate per stack, an
isolation, a memory cap, on or off, a --stacks list.

Each takes the value as typed — on a command line, in a preset, a run file or the
picker's remembered choices (stackrace.settings.race_settings declares which setting
uses which) — checks it, by the rule of the module that owns it where there is one
(stackrace.settings.workloads, scenario, statuses, terms; the engine's request, clients,
tls and model), and returns it or raises `OptionValueError` with the reason, so a value
is valid or not the same way everywhere. The parsers of numbers and durations are
stackrace.settings.parsers'.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from stackrace.engine.model import rate_problem
from stackrace.engine.request import RequestError, check_method
from stackrace.engine.slow_clients import ProfileError, parse_profile, parse_share
from stackrace.settings import scenario, statuses, terms
from stackrace.settings.parsers import OptionValueError, positive_rate
from stackrace.settings.workloads import WORKLOADS

ISOLATIONS = ("auto", "rotate", "parallel")


@contextmanager
def _reason(error: type[Exception]) -> Iterator[None]:
    """The owning module's `error` becomes the option's: its reason, said once."""
    try:
        yield
    except error as exc:
        raise OptionValueError(str(exc)) from None


def memory_size(text: str) -> str:
    if not re.fullmatch(r"\d+[KMG]?", text):
        raise OptionValueError(f"must be a size like 128M or 2G, got {text!r}")
    return text


def on_off(text: str) -> bool:
    return text.lower() in ("1", "true", "yes", "on")


def stack_rate(text: str) -> float:
    """A rate per stack: every stack of a race has one engine process of its own, so
    one process's ceiling is the stack's (engine.model.MAX_RATE_PER_PROCESS)."""
    rate = positive_rate(text)
    problem = rate_problem(rate, 1)
    if problem:
        raise OptionValueError(f"{problem.split(';')[0]}, got {text!r}")
    return rate


def cacert_file(text: str) -> str:
    """A PEM file of CA certificates, checked now, kept as an absolute path."""
    # engine/tls.py (and Python's ssl, ~5 ms) only when --cacert is given: every parser
    # that offers the option is built from here
    from stackrace.engine.tls import (  # lazy: keeps --help's start-up fast
        TlsConfigError,
        check_cacert,
    )

    try:
        check_cacert(text)
    except TlsConfigError as exc:
        raise OptionValueError(str(exc).removeprefix(f"--cacert {text}: ")) from None
    return str(Path(text).resolve())


def client_profile(text: str) -> str:
    """A slow-client profile (engine.slow_clients), kept as its canonical text."""
    with _reason(ProfileError):
        return parse_profile(text).describe()


def slow_share(text: str) -> float:
    with _reason(ProfileError):
        return parse_share(text)


def _one_of(text: str, choices: list[str] | tuple[str, ...]) -> str:
    if text not in choices:
        raise OptionValueError(f"must be one of {', '.join(choices)}, got {text!r}")
    return text


def workload_name(text: str) -> str:
    return _one_of(text, sorted(WORKLOADS))


def path_item(text: str) -> str:
    with _reason(scenario.ScenarioError):
        scenario.parse_path_item(text)
    return text


def http_method(text: str) -> str:
    with _reason(RequestError):
        return check_method(text)


def header_line(text: str) -> str:
    with _reason(scenario.ScenarioError):
        scenario.parse_header(text)
    return text


def status_codes(text: str) -> str:
    with _reason(statuses.StatusError):
        return statuses.check(text)


def file_name(text: str) -> str:
    if not text or not text.isprintable() or len(text) > 4096:
        raise OptionValueError(f"not a file name: {text[:60]!r}")
    return text


def slo_terms(text: str) -> str:
    with _reason(terms.TermError):
        terms.check_objective(text)
    return text.strip()


def isolation(text: str) -> str:
    return _one_of(text, ISOLATIONS)


def split_stacks(ref: str) -> list[str]:
    """'a,b:workers=2,threads=4,c' → ['a', 'b:workers=2,threads=4', 'c'].

    A comma starts a new stack unless what follows is KEY=VALUE of a variant ('a:x=1,b:y=2'
    is two variants: a variant's KEY has no ':').
    """
    parts: list[str] = []
    for piece in ref.split(","):
        key = piece.partition("=")[0]
        if parts and "=" in piece and ":" in parts[-1] and ":" not in key:
            parts[-1] += "," + piece
        elif piece.strip():
            parts.append(piece.strip())
    return parts
