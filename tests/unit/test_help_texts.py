"""Help a person can read: every command's `--help` (the app's, each subcommand's, each
`db` action's), rendered at 80 columns as a terminal shows it, has

- a description and an Examples section of 3 to 6 command lines of that command (the
  walkthrough tier runs them: tests/walkthrough/test_readme_commands.py);
- no option without help, and every default said (an option's own, or the race
  setting's from settings/race_settings.py);
- no sentence that does not apply: no `--option` the command lacks (a quoted command
  line of another command, `stackrace bench --url …`, excepted), and none of the terms
  of other commands in `load --help` (JUnit, capacity, levels, the workload, presets);
- no pointer at a README section (the README is a five-minute guide now: the docs
  pages say the rest), and every docs page named exists;
- the cluster's options said in one line, not repeated at full length in every help.

And a usage error names the command it is about and suggests: the nearest option, or
what a flag of wrk, hey, oha or ab is called here.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from stackrace.cli import COMMANDS, build_parser
from stackrace.settings.race_settings import RaceSettings

ROOT = Path(__file__).resolve().parents[2]
# terms of other commands that a `load --help` must not use (issue 39's list)
LOAD_FOREIGN = ("junit", "capacity", "level", "workload", "preset")


def _parsers() -> dict[str, argparse.ArgumentParser]:
    """Every help a person can ask for, by its program name."""
    top = build_parser()
    out = {"stackrace": top}

    def walk(parser: argparse.ArgumentParser) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    out[sub.prog] = sub
                    walk(sub)

    walk(top)
    return out


@pytest.fixture(scope="module")
def helps() -> dict[str, tuple[argparse.ArgumentParser, str]]:
    import os

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "80"
    try:
        return {name: (p, p.format_help()) for name, p in _parsers().items()}
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


NAMES = ["stackrace", *(f"stackrace {n}" for n, _h in COMMANDS)] + [
    f"stackrace db {a}" for a in ("up", "down", "status", "seed", "reset", "env")
]


def examples_of(text: str) -> list[str]:
    """The command lines of a help's Examples section."""
    _, found, rest = text.partition("\nExamples:\n")
    assert found, "no Examples section"
    lines = []
    for line in rest.splitlines():
        if not line.startswith("  "):
            break
        if not line.lstrip().startswith("#"):
            lines.append(line.strip())
    return lines


@pytest.mark.parametrize("name", NAMES)
def test_every_help_has_a_description_and_examples_of_its_own(name: str, helps) -> None:
    parser, text = helps[name]
    assert parser.description and len(parser.description) > 30, name
    lines = examples_of(text)
    assert 3 <= len(lines) <= 6, (name, lines)
    command = name.split()[:2]  # `stackrace db up`'s examples are db's
    own = 0
    for line in lines:
        words = re.sub(r'^eval "\$\(|\)"$', "", line).split()
        assert "stackrace" in words, (name, line)
        at = words.index("stackrace")
        own += len(command) == 1 or command[1] in words[at:]
    # a line may set the scene (a recording to replay), three at least are the command's
    assert own >= 3, (name, lines)
    # and no line of it is wider than a terminal
    wide = [x for x in text.splitlines() if len(x) > 80]
    assert not wide, wide


@pytest.mark.parametrize("name", NAMES)
def test_no_option_without_help_and_every_default_said(name: str, helps) -> None:
    parser, _text = helps[name]
    formatter = parser._get_formatter()
    settings = RaceSettings()
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._SubParsersAction):
            continue
        said = formatter._get_help_string(action) or ""
        assert said.strip(), f"{name}: {'/'.join(action.option_strings) or action.dest} has no help"
        if not action.option_strings:
            continue
        default = action.default
        if action.default is None and action.dest in RaceSettings.__struct_fields__:
            default = getattr(settings, action.dest)  # the setting's own default
        if default in (None, False, [], argparse.SUPPRESS) or isinstance(default, bool):
            continue
        flags = "/".join(action.option_strings)
        assert "default" in said, f"{name}: {flags} does not say its default ({default!r})"


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return set(parser._option_string_actions)


@pytest.mark.parametrize("name", NAMES)
def test_a_help_names_only_its_own_options(name: str, helps) -> None:
    parser, text = helps[name]
    own = _options(parser)
    if name.startswith("stackrace db"):  # db's options are its actions'
        for sub in ("up", "down", "status", "seed", "reset", "env"):
            own |= _options(helps[f"stackrace db {sub}"][0])
    # an example names what it runs; a quoted command line of another command or of
    # the user's ('node server.js --port {port}') names that command's options
    text = re.sub(r"(?m)^\s*(eval \S+ )?\S*stackrace\b.*$", "", text)
    text = re.sub(r"`stackrace [^`]*`|'[\w-]+=[^']*'", "", " ".join(text.split()))
    mentioned = set(re.findall(r"(?<![\w=-])--[a-z][a-z0-9-]*", text))
    foreign = sorted(mentioned - own)
    assert not foreign, f"{name} --help names options it does not have: {foreign}"


def test_load_help_says_nothing_of_other_commands(helps) -> None:
    _parser, text = helps["stackrace load"]
    words = " ".join(text.split()).lower()
    # `stackrace bench --url …` (where to race several servers) is a pointer, not a claim
    words = re.sub(r"`stackrace [^`]*`", "", words)
    found = [t for t in LOAD_FOREIGN if re.search(rf"\b{t}", words)]
    assert not found, f"load --help talks of {found}"
    for flag in ("-n N, --requests N", "--duration DURATION", "-z DURATION"):
        assert flag in " ".join(text.split()), flag


@pytest.mark.parametrize("name", NAMES)
def test_helps_point_at_docs_pages_that_exist(name: str, helps) -> None:
    _parser, text = helps[name]
    assert "README" not in text, f"{name} --help points at the README: say the docs page"
    for page in re.findall(r"docs/([\w-]+\.md)", text):
        assert (ROOT / "docs" / page).is_file(), f"{name} --help names docs/{page}"


def test_the_cluster_options_are_one_line_in_each_help(helps) -> None:
    for name in ("stackrace", "stackrace load", "stackrace bench", "stackrace tune"):
        parser, text = helps[name]
        assert "--cluster ADDRESS" in text and "--help-cluster" in text, name
        for hidden in ("--placement FILE", "--load-node NODE", "--cluster-lost-after"):
            assert hidden not in text, (name, hidden)
            assert hidden.split()[0] in _options(parser), (name, hidden)  # still an option


def _error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    first = next((a for a in argv if a in {n for n, _h in COMMANDS}), None)
    with pytest.raises(SystemExit) as exc:
        build_parser(only=first).parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_an_unknown_option_is_named_under_its_command_with_the_nearest(capsys) -> None:
    url = "http://127.0.0.1:9/"
    err = _error(["load", url, "--request", "5"], capsys)
    assert err == "stackrace load: unrecognized arguments: --request 5 (did you mean --requests?)"
    err = _error(["bench", "--duratoin", "1s"], capsys)
    assert err.startswith("stackrace bench: unrecognized arguments: --duratoin 1s")
    assert "did you mean --duration?" in err
    err = _error(["lod", url], capsys)
    assert err.startswith("stackrace: argument COMMAND: invalid choice: 'lod'")
    assert err.endswith("(did you mean load?)")


def test_flags_of_wrk_hey_oha_and_ab_are_translated(capsys) -> None:
    url = "http://127.0.0.1:9/"
    err = _error(["load", url, "-t", "4"], capsys)
    assert err.startswith("stackrace load: unrecognized arguments: -t 4 (")
    assert "--procs" in err and "--timeout" in err
    assert "--rate" in _error(["load", url, "-q", "100"], capsys)
    assert "--rate" in _error(["load", url, "-R", "100"], capsys)
    assert "--body-file" in _error(["load", url, "-D", "body.json"], capsys)
    assert "--no-keepalive" in _error(["load", url, "--disable-keepalive"], capsys)
    # bench has --requests but no -n: said so
    assert "--requests" in _error(["bench", "-n", "100"], capsys)
    # a command without the option is not told of it
    err = _error(["stacks", "-t", "4"], capsys)
    assert err == "stackrace stacks: unrecognized arguments: -t 4"


def test_load_takes_n_and_z_as_hey_and_oha_do() -> None:
    args = build_parser(only="load").parse_args(["load", "http://127.0.0.1:9/", "-n", "1000"])
    assert args.requests == 1000 and args.duration is None
    args = build_parser(only="load").parse_args(["load", "http://127.0.0.1:9/", "-z", "2s"])
    assert args.duration == 2.0


def test_every_example_parses() -> None:
    """Each example of each help is a command line its parser takes (the walkthrough
    tier runs them; here, in milliseconds, that no option is misspelt or missing)."""
    import shlex

    from tests.walkthrough.readme import help_lines

    lines = help_lines()
    assert len(lines) > 40
    for line in lines:
        words = shlex.split(line.text)[1:]
        first = next((w for w in words if w in {n for n, _h in COMMANDS}), None)
        try:
            build_parser(only=first).parse_args(words)
        except SystemExit as exc:  # --help, --version: none is an example
            raise AssertionError(f"{line.where}: {line.text}") from exc
