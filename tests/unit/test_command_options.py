"""Each command reads its command line once, into a frozen options struct built in
commands/ (`read_options`), and runs on that alone: what a flag means is said in one
builder, and nothing a command does changes what was given (a resume, tune's probe
settings: new structs, never the parsed Namespace changed in place)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

import pytest

from stackrace import cli


def options_of(*argv: str) -> object:
    args = cli.build_parser(only=argv[0]).parse_args(list(argv))
    return args.read_options(args)


def test_bench_reads_each_group_into_its_struct():
    from stackrace.commands.bench_args import BenchOptions

    o = options_of(
        "bench", "--stacks", "uvicorn", "--duration", "2s", "--url", "a=http://127.0.0.1:1/",
        "--pid", "7", "--json", "run.json", "--fail-on", "qps<-10%", "--capacity",
        "--slo", "p99<50ms", "--resume", "j.journal", "--share-cores", "--metrics", "0",
        "--cluster", "auto",
    )  # fmt: skip
    assert isinstance(o, BenchOptions)
    assert dict(o.race.given) == {"stacks": ["uvicorn"], "duration": 2.0, "slo": "p99<50ms"}
    assert o.race.target.urls == ("a=http://127.0.0.1:1/",) and o.race.target.pids == (7,)
    assert o.files.json_out == "run.json" and o.files.csv_out is None
    assert (o.fail_on, o.capacity) == ("qps<-10%", True)
    assert (o.guard.resume, o.guard.share_cores) == ("j.journal", True)
    assert o.metrics is not None and o.metrics.port == 0
    assert o.race.cluster.wanted
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.capacity = False  # type: ignore[misc]


def test_tune_offers_only_its_own_files_and_measures_probes_its_way():
    from stackrace.commands import tune
    from stackrace.commands.tune_args import TuneOptions, probe_settings

    assert cli.build_parser(only="tune").parse_args(["tune"]).func is tune.run
    o = options_of("tune", "uvicorn", "--slo", "p99<50ms", "--workers", "1,2", "--warmup", "1s")
    assert isinstance(o, TuneOptions)
    assert o.named == ("uvicorn",) and o.workers == "1,2" and o.race.preset is None
    assert "csv_out" not in o.files.offered and "json_out" in o.files.offered
    probe = probe_settings(o.race.given, ["uvicorn"])
    # given settings kept (the warm-up), tune's own filled in, the servers its stacks
    assert probe == {
        "slo": "p99<50ms", "warmup": 1.0, "isolation": "rotate", "duration": 2.0,
        "stacks": ["uvicorn"],
    }  # fmt: skip
    assert "stacks" not in probe_settings(o.race.given, [])  # a server by URL: no stack
    assert "isolation" not in o.race.given  # what was given is left as given


@pytest.mark.parametrize("name", [n for n, _ in cli.COMMANDS])
def test_every_command_reads_its_line_into_options(name: str):
    """cli.py hands each command the struct its `read_options` builds, never the parse."""
    parser = cli.build_parser(only=name)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    defaults = sub.choices[name]._defaults
    assert callable(defaults.get("read_options")) and callable(defaults.get("func")), name
    assert defaults["read_options"].__name__.endswith("_options")


@dataclasses.dataclass(frozen=True)
class _Sample:
    names: tuple[str, ...]
    on: bool
    given_apart: str
    rate: float | None = None
    kept: int = 7  # not an option of this parser: keeps its default


def test_a_struct_is_read_by_field_name_with_its_conversions():
    """commands/namespace.py: each field from the argument of its name, a list as a
    tuple, an append option not given as (), a switch as a bool; `given` wins."""
    from stackrace.commands.namespace import typed_options

    args = argparse.Namespace(names=["a", "b"], on=1, rate=None, given_apart="parsed", extra=3)
    o = typed_options(_Sample, args, given_apart="built")
    assert o == _Sample(names=("a", "b"), on=True, given_apart="built", rate=None, kept=7)
    unset = typed_options(_Sample, argparse.Namespace(names=None, on=False, given_apart="x"))
    assert unset.names == () and unset.on is False and unset.rate is None


def test_a_field_the_parser_lacks_and_the_struct_cannot_default_is_a_bug_said():
    from stackrace.commands.namespace import typed_options

    with pytest.raises(TypeError, match="given_apart"):
        typed_options(_Sample, argparse.Namespace(names=[], on=True))


def test_real_lines_read_as_the_builders_once_spelled_them_out():
    """The builders read the same struct as one that lists every field by hand did:
    a few real lines, field by field (db's actions, load's negations, web's URLs)."""
    db = options_of("db", "up", "--port", "3307", "--mariadbd-arg=--x=1")
    assert (db.action, db.port, db.mariadbd_args, db.json, db.wipe) == (  # type: ignore[attr-defined]
        "up", 3307, ("--x=1",), False, False,
    )  # fmt: skip
    load = options_of("load", "http://127.0.0.1:1/x", "-k", "--no-keepalive", "--http2")
    assert (load.insecure, load.keepalive, load.http2, load.urls) == (  # type: ignore[attr-defined]
        True, False, True, ("http://127.0.0.1:1/x",),
    )  # fmt: skip
    web = options_of("web", "--url", "http://127.0.0.1:1/", "--demo")
    assert (web.urls, web.demo, web.argv) == (("http://127.0.0.1:1/",), True, ())  # type: ignore[attr-defined]
    serve = options_of("serve", "uvicorn", "--app", "x:app", "--env", "A=1")
    assert serve.names == ("uvicorn",) and serve.your_app.env == ("A=1",)  # type: ignore[attr-defined]


def test_a_struct_annotated_with_types_not_text_converts_alike():
    """Without `from __future__ import annotations` a field's annotation is the type."""
    from stackrace.commands.namespace import typed_options

    typed = dataclasses.make_dataclass("Typed", [("names", tuple[str, ...]), ("on", bool)])
    o: Any = typed_options(typed, argparse.Namespace(names=None, on=1))
    assert (o.names, o.on) == ((), True)
