"""No input crashes a parser (issue 48, item 3): JSON nested 100,000 deep (a 200 KB file)
given as a run file, a baseline, `bench --from`, `tune --from`, a recording (`replay`,
`--ghost`), a journal (`bench` and `tune --resume`); TOML as deep (arrays, inline tables,
dotted keys) given as a preset, a scenario and a talk track, and a `./stacks.toml` 20,000
deep in the working directory. Python's parsers raised RecursionError on each, a crash (exit 70);
each is now one line naming the file and exit 2 (stackrace.base.inputfile.MAX_DEPTH).
The real CLI on real files."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from stackrace.base.inputfile import MAX_DEPTH
from stackrace.race.core.journal import JournalStart
from stackrace.report.schema import dumps
from tests.hardening.cli_forks import run_forked
from tests.hardening.conftest import assert_one_line_error
from tests.unit.test_report import make_run

DEEP = 100_000
DEEP_JSON = "[" * DEEP + "]" * DEEP
DEEP_OBJECT = '{"a":' * DEEP + "1" + "}" * DEEP
WHY = f"nested deeper than {MAX_DEPTH} levels"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {
        "deep.json": DEEP_JSON,
        "deep-object.json": DEEP_OBJECT,
        "deep.toml": 'description = "x"\nx = ' + DEEP_JSON + "\n",
        "deep-table.toml": 'description = "x"\nx = ' + "{a=" * DEEP + "1" + "}" * DEEP + "\n",
        # dotted keys nest without a bracket: measured after parsing
        "deep-dotted.toml": 'description = "x"\n' + "a" + ".a" * DEEP + " = 1\n",
    }
    paths = {}
    for name, text in out.items():
        paths[name] = tmp_path / name
        paths[name].write_text(text)
    paths["good.json"] = tmp_path / "good.json"
    paths["good.json"].write_bytes(dumps(make_run()))
    # a journal whose start is sound and whose second line is not
    start = msgspec.json.encode(JournalStart(command="bench", run=make_run()))
    paths["deep.journal"] = tmp_path / "deep.journal"
    paths["deep.journal"].write_bytes(start + b"\n" + DEEP_JSON.encode() + b"\n")
    return paths


@pytest.mark.parametrize(
    "args, named",
    [
        (["report", "{deep.json}"], "deep.json"),
        (["report", "{deep-object.json}"], "deep-object.json"),
        (["report", "{good.json}", "--baseline", "{deep.json}"], "deep.json"),
        (["bench", "--from", "{deep.json}"], "deep.json"),
        (["tune", "--from", "{deep-object.json}"], "deep-object.json"),
        (["replay", "{deep.json}"], "deep.json"),
        (["bench", "--resume", "{deep.journal}"], "deep.journal"),
        (["bench", "--preset", "{deep.toml}"], "deep.toml"),
        (["bench", "--preset", "{deep-table.toml}"], "deep-table.toml"),
        (["bench", "--preset", "{deep-dotted.toml}"], "deep-dotted.toml"),
        (["bench", "--stacks", "uvicorn", "--scenario", "{deep.toml}"], "deep.toml"),
        (["--demo", "--talk", "{deep-table.toml}"], "deep-table.toml"),
        (["--demo", "--ghost", "{deep-object.json}"], "deep-object.json"),
        (["tune", "--resume", "{deep.journal}"], "deep.journal"),
    ],
)
def test_a_deeply_nested_file_is_one_line(
    files: dict[str, Path], args: list[str], named: str
) -> None:
    argv = [str(files[a[1:-1]]) if a.startswith("{") else a for a in args]
    r = run_forked(*argv, cwd=files[named].parent)
    line = assert_one_line_error(r, named, WHY)
    assert r.returncode != 70, line


def test_a_deep_stacks_toml_in_the_working_directory_is_one_line(tmp_path: Path) -> None:
    deep = 20_000
    (tmp_path / "stacks.toml").write_text(
        '[stacks.a]\ncommand = ["x"]\nx = ' + "[" * deep + "]" * deep + "\n"
    )
    for args in (["stacks"], ["verify"], ["install", "--all", "-n"]):
        r = run_forked(*args, cwd=tmp_path)
        assert_one_line_error(r, "stacks.toml", WHY)
