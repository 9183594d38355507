"""A run's stacks are read once (stacks/resolved.py): the catalogue's files are read one
time in the app's start-up and in a bench run, however many parts below need them."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackrace.cli import APP, build_parser
from stackrace.stacks import catalogue
from stackrace.stacks.definition import ConfigError
from stackrace.stacks.resolved import resolve_run


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every read of the catalogue (each load_stacks lists the files it reads, once)."""
    seen: list[str] = []
    listed = catalogue.stacks_files

    def counted(given: str | Path | None = None) -> list[tuple[Path, str]]:
        seen.append(str(given))
        return listed(given)

    monkeypatch.setattr(catalogue, "stacks_files", counted)
    yield seen


def test_one_app_start_up_reads_the_catalogue_once(
    reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from stackrace.commands import app
    from stackrace.tui.app import StackraceApp

    made: list[StackraceApp] = []

    def opened(self: StackraceApp, *args: object, **kwargs: object) -> int:
        made.append(self)  # the app as `stackrace` would run it, made and not run
        return 0

    monkeypatch.setattr(StackraceApp, "run", opened)
    args = build_parser(only=APP).parse_args(["--stacks", "uvicorn,gunicorn-sync"])
    from stackrace.commands.app_args import app_command_options

    assert app.run(app_command_options(args)) == 0
    assert len(made) == 1
    assert len(reads) == 1, reads


def test_one_bench_plan_reads_the_catalogue_once(reads: list[str]) -> None:
    from stackrace.commands.bench_args import race_options
    from stackrace.commands.bench_plan import build_plan

    args = build_parser(only="bench").parse_args(
        ["bench", "--stacks", "uvicorn,gunicorn-sync", "--concurrency", "1,5"]
    )
    built = build_plan(race_options(args), None)
    assert built is not None
    assert len(reads) == 1, reads


def test_an_unreadable_catalogue_is_kept_as_its_error(tmp_path: Path) -> None:
    bad = tmp_path / "stacks.toml"
    bad.write_text("[stacks.x\n")
    run = resolve_run(str(bad))
    assert run.catalogue is None and run.error is not None
    with pytest.raises(ConfigError, match=r"stacks\.toml"):
        run.stacks()


def test_only_the_resolution_reads_the_catalogue() -> None:
    # the parts below the command take the run's stacks; they never read them again.
    # `completion` lists names for a Tab in a process of its own (every file, untrusted
    # ones too): not a run
    src = Path(__file__).resolve().parents[2] / "src" / "stackrace"
    allowed = {"stacks/catalogue.py", "stacks/resolved.py", "commands/completion.py"}
    readers = sorted(
        rel
        for p in src.rglob("*.py")
        if (rel := str(p.relative_to(src))) not in allowed
        and any(
            isinstance(node, ast.Call) and getattr(node.func, "id", "") == "load_stacks"
            for node in ast.walk(ast.parse(p.read_text()))
        )
    )
    assert readers == []
