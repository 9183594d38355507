"""Every `stackrace …` command line the README and the docs show, and every example of
every command's `--help`, run as a reader would (read from README.md, docs/*.md and the
helps when the tests run: a command added there is tried here the next run).

Durations are shortened (a bench's levels: 0.3 s each, no warm-up, the first level of
its preset's or the default ones, the first two of a list the line names; a tune's
`--budget`, a --capacity bench's; a `load` loads half a second, not its default 10 s):
the test checks that each line works (its exit status, no traceback), not its
figures; a URL on this machine points at a test server; the app runs in a
terminal of its own and gets `q` once it has drawn; `serve` gets Ctrl-C once its stacks
are up. The files the pages name are made from the pages
themselves: `./stacks.toml` is the stack block docs/stacks.md adds, `talk.toml` the talk
track docs/tui.md shows. A command fails the test on a traceback, a crash line, or an
exit status the pages do not document for it (`DOCUMENTED`). Commands that need what a
test cannot have (a cluster, the network, the reader's own files) are skipped, each with
its reason (`skipped`), so the test's output lists them.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackrace.race.core.presets import load_preset
from stackrace.settings.race_settings import RaceSettings
from tests.helpers import ROOT, TestServer, free_port
from tests.walkthrough.readme import ROOT as PAGES_ROOT
from tests.walkthrough.readme import Line, command_lines, help_lines
from tests.walkthrough.terminal import run_in_terminal, wait_none_left

LINES = command_lines()
_SHOWN = {x.text for x in LINES}
LINES += [x for x in help_lines() if x.text not in _SHOWN]
CLI = [sys.executable, "-m", "stackrace"]
# exit statuses the pages document for a command besides 0, with where they say so
DOCUMENTED = {
    "--baseline": ({0, 1}, "the regression gate exits 1 on a regression or when nothing "
                   "was compared (docs/bench.md: The regression gate)"),
    "--from": ({0, 2}, "a saved run whose stacks were defined differently is refused "
               "(docs/bench.md: Provenance and --from); the run here is an older "
               "committed result"),
    "--slo": ({0, 1}, "a level that misses the objective exits 1 (docs/bench.md: An SLO, "
              "`--slo 'p99<1us'    # exit 1`)"),
}  # fmt: skip
SERVERS = ("serve",)  # they run until Ctrl-C, which ends them with 0 or 130
APPS = ("replay",)  # commands that open the app: run in a terminal, like the app
# a tune keeps its budget by the clock: 4 s is its first configuration started and a
# probe or three of it, then the report and files of a budget that ended (a budget spent
# before the first configuration is up reports none measured: 1 s does); the search
# itself is tests/integration/test_tune.py's
TUNE_BUDGET = "4s"
# a --capacity bench makes its first probe whatever its budget (a 0.5 s budget still
# reports that probe's bracket, its capacity table and verdict, exit 0): 1 s is that
# probe and perhaps a second one, not four seconds of full load per stack; the search
# itself is tests/integration/test_capacity.py's
CAPACITY_BUDGET = "1s"
# a bench level: its figures are not what is checked here, only that the level runs and
# is reported (at c=10 on /hello 0.3 s is thousands of answers, at c=100 on /io against
# gunicorn-sync still some thirty, and a stall of 100 ms leaves most of them)
LEVEL = "0.3s"
# a load: half a second of it is its progress, its report and (with --json) its file
LOAD = "0.5s"
# the outcome of each command line already run, by what it asks as run (`as_run`), with
# the files it wrote: a line shown on two pages (README and docs/tune.md show the same
# tune, README and docs/bench.md the same bench with its options in another order) runs
# once, and so does one that only writes fewer files or names them differently (`covers`)
RAN: dict[tuple[str, ...], list[tuple[dict[str, str], int, str]]] = {}
# the options naming a file a run writes: its report is the same whichever of them are
# given, each adds its file (`--json` of `load` and `stacks` is not one: it changes what
# they print)
FILE_OPTIONS = ("json_out", "md_out", "chart_out", "csv_out", "junit_out")


def skipped(line: Line) -> str:
    """Why this command line is not run here ("" to run it)."""
    words = line.words
    if "--cluster" in words:
        return "needs a Ray cluster: tests/cluster runs one on this machine"
    if line.placeholder:
        return f"a template ({line.placeholder} is the reader's to fill in)"
    if words[:2] == ["stackrace", "verify"] and words[2:] in ([], ["--db"]):
        return (
            "starts and checks every shipped stack: tests/integration/test_verify_all.py "
            "runs `stackrace verify --db` (`verify --db django` here takes the --db path)"
        )
    if words[1:2] == ["load"] and not any(w.startswith("http") for w in words):
        return "names load's options in the text; the URL is the reader's"
    if any("$" in w for w in words):
        return "needs a shell (a $(…) substitution, or the $! of a server started before)"
    if words[1:2] == ["load"] and any(w.startswith("/slow") for w in words):
        return (
            "loads the Flask example the line before starts by hand: "
            "tests/integration/test_load_cli.py loads weighted paths"
        )
    if "fixed" in words and "--stacks" in words:
        return (
            "the test server of known capacity (50 workers x 50 ms) is defined by "
            "tests/integration/test_capacity.py, which runs this search"
        )
    if "--app" in words and not words[words.index("--app") + 1].startswith("examples/"):
        return (
            "names the reader's own app: tests/hardening/test_production_app.py races a "
            "project set for production"
        )
    if words[1:3] == ["db", "reset"]:
        return "acts on the private MariaDB `db up` starts: tests/hardening/test_db_watch.py"
    if words[1:2] == ["clean"] and "--dry-run" not in words:
        return (
            "removes what stackrace made on this machine, for every test after it: "
            "tests/hardening/test_package_tidy.py cleans a home of its own"
        )
    if words[1:2] == ["web"]:
        return (
            "serves the app in a browser until Ctrl-C: tests/e2e/test_web.py opens it in Chromium"
        )
    return ""


def shortened(words: list[str], server_port: int) -> list[str]:
    """The command with short durations, local URLs at the test server, free ports."""
    out: list[str] = []
    skip = False
    for i, w in enumerate(words):
        if skip:
            skip = False
            continue
        prev = words[i - 1] if i else ""
        if prev in ("-d", "--duration"):
            out.append(LOAD if words[1] == "load" else LEVEL)
        elif prev == "--warmup":
            out.append("0s")
        elif prev == "--budget":
            out.append(TUNE_BUDGET if words[1] == "tune" else CAPACITY_BUDGET)
        elif prev == "--metrics":
            out.append(str(free_port()))
        else:
            out.append(re.sub(r"http://127\.0\.0\.1:\d+", f"http://127.0.0.1:{server_port}", w))
    if words[1:2] == ["bench"]:
        if "--duration" not in words:
            out += ["--duration", LEVEL]
        if "--warmup" not in words:
            out += ["--warmup", "0s"]
        out += ["--repeat", "1"]
        if "--capacity" in words and "--budget" not in words:
            out += ["--budget", CAPACITY_BUDGET]
        out = _fewer_levels(words, out)
    if words[1:2] == ["tune"] and "--budget" not in words:
        out += ["--budget", TUNE_BUDGET]
    if words[1:2] == ["load"] and not {"-d", "--duration", "-z", "-n", "--requests"} & set(words):
        out += ["-d", LOAD]  # (its default is 10 s of load)
    return out


def _fewer_levels(words: list[str], out: list[str]) -> list[str]:
    """A bench's levels cut: the first of a preset's or of the default ones (the table,
    files and verdicts of a bench have one row per stack and level: one level shows
    their shape), the first two of a list the line names (two levels still show the
    level-by-level table it asks for; a third, c=500 where the page has it, only makes
    gunicorn-sync's queue longer to drain). A --capacity bench searches its own levels,
    a --rate one has none, a --from one takes the run's (and is refused here: DOCUMENTED)."""
    if {"--capacity", "--rate", "--from"} & set(words):
        return out
    if "--concurrency" in words:
        i = out.index("--concurrency") + 1
        out[i] = ",".join(out[i].split(",")[:2])
        return out
    if "--preset" in words:
        levels = load_preset(words[words.index("--preset") + 1]).settings.concurrency_levels
    else:
        levels = RaceSettings().concurrency_levels
    return [*out, "--concurrency", str(levels[0])]


def as_run(words: list[str]) -> tuple[tuple[str, ...], dict[str, str]]:
    """What a command line asks, as stackrace's own parser reads it, and the files it
    writes (by option): two lines that differ only in the order of their options (or in
    a value shortened to the same) ask the same."""
    from stackrace.cli import build_parser

    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            args = vars(build_parser().parse_args(words[1:]))
    except SystemExit:  # --help, --version, a usage error: by its words
        return tuple(words), {}
    files = {k: str(args[k]) for k in FILE_OPTIONS if args.get(k)}
    return tuple(sorted(f"{k}={v!r}" for k, v in args.items() if k not in FILE_OPTIONS)), files


def ran_before(words: list[str], d: Path) -> tuple[int, str] | None:
    """The outcome of a run already made that asked the same and wrote at least the
    files this line asks for (under their names here: copied from its own)."""
    key, files = as_run(words)
    for made, status, output in RAN.get(key, []):
        if set(files) <= set(made):
            for option, name in files.items():
                if made[option] != name and (d / made[option]).exists():
                    shutil.copyfile(d / made[option], d / name)
            return status, output
    return None


def kind(words: list[str]) -> str:
    """How a command line runs here: "app" (in a terminal), "server" (until Ctrl-C) or
    "command"."""
    sub = words[1] if len(words) > 1 else ""
    app = sub == "" or (sub.startswith("-") and sub != "--version" and "stacks" not in words)
    if app or sub in APPS:
        return "app"
    return "server" if sub in SERVERS else "command"


def covering_first(lines: list[Line]) -> list[Line]:
    """The lines with, of those asking the same, the one writing the most files moved up
    to where the first of them is: it runs, and covers the others (docs/tune.md's tune
    without files, then the same tune with --json and --markdown, runs once). A run only
    reads files that exist before the pages' first line naming it, so moving one up takes
    nothing it needs away from it."""
    groups: dict[tuple[str, ...], list[Line]] = {}
    for x in lines:
        if not skipped(x) and kind(x.words) == "command":
            groups.setdefault(as_run(shortened(x.words, 0))[0], []).append(x)
    out = list(lines)
    for group in groups.values():
        most = max(group, key=lambda x: len(as_run(shortened(x.words, 0))[1]))
        if most is not group[0]:
            out.remove(most)
            out.insert(out.index(group[0]), most)
    return out


def toml_block(page: str, first_line: str) -> str:
    """The ```toml block of a page that starts with `first_line`: what the page asks the
    reader to write into a file."""
    text = (PAGES_ROOT / page).read_text(encoding="utf-8")
    for block in re.findall(r"```toml\n(.*?)```", text, flags=re.S):
        if block.startswith(first_line):
            return block
    raise AssertionError(f"{page} has no TOML block starting {first_line!r}")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, TestServer]]:
    """A directory to run the pages' commands in, with the files they name: a copy of
    the stacks file (`my.toml`), the stack block docs/stacks.md adds (`./stacks.toml`,
    which adds to the shipped stacks), the talk track of docs/tui.md (`talk.toml`),
    saved runs to report on (`run.json`, `old.json`, `new.json`: a committed result,
    small), and a server for the URLs."""
    d = tmp_path_factory.mktemp("readme")
    shutil.copy(ROOT / "stacks.toml", d / "my.toml")
    (d / "stacks.toml").write_text(toml_block("docs/stacks.md", "[stacks."))
    (d / "talk.toml").write_text(toml_block("docs/tui.md", "[[step]]"))
    for name in ("run.json", "old.json", "new.json"):
        shutil.copy(ROOT / "results" / "php-vs-python-hello.json", d / name)
    (d / "config").mkdir()
    # the page's next line: its stacks run only once the file is trusted (docs/stacks.md)
    env = {**os.environ, "XDG_CONFIG_HOME": str(d / "config")}
    trusted = subprocess.run(
        [*CLI, "stacks", "--trust", "./stacks.toml"], cwd=d, env=env, capture_output=True
    )
    assert trusted.returncode == 0, trusted.stderr
    # the pages' "Your app" lines name the examples relative to the repository
    shutil.copytree(ROOT / "examples", d / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    server = TestServer()
    yield d, server
    server.kill()


def _tail(text: str, lines: int = 12) -> str:
    kept = [x for x in text.replace("\r", "\n").splitlines() if x.strip()]
    return "\n    ".join(kept[-lines:])


LINES = covering_first(LINES)


@pytest.mark.parametrize("line", LINES, ids=[f"{x.where}:{x.text[:60]}" for x in LINES])
def test_a_readme_command_line_runs(line: Line, workdir: tuple[Path, TestServer]) -> None:
    why = skipped(line)
    if why:
        pytest.skip(why)
    d, server = workdir
    words = shortened(line.words, server.port)
    argv = [*CLI, *words[1:]]
    env = {**os.environ, "XDG_CONFIG_HOME": str(d / "config"), "NO_COLOR": "1"}
    allowed, note = {0}, ""
    for flag, (codes, why_codes) in DOCUMENTED.items():
        if flag in words:
            allowed, note = codes, why_codes
    if words[1:2] == ["tune"]:
        # a short budget: the leaders may be undecided, and a saved tune says so again
        allowed = allowed | {1}
        note = "a tune whose budget ended before its answer exits 1 (docs/tune.md)"
    sub = words[1] if len(words) > 1 else ""
    if kind(words) == "app":
        # the app: in a terminal, `q` once it has drawn, as a reader quits: a race (or its
        # replay) once a pane shows its first figures (its failures line, which comes
        # with them) and half a second more (the race is running: every second more is
        # two cores of load whose figures nobody reads here; a pane still starting then
        # is quit as a reader may quit it, and must leave nothing running), the picker
        # once it is there (its hint names ctrl+s); at the latest when it used to be
        # quit, drawn or not
        if "--go" in words or sub in APPS:
            drawn, after, latest = b"failed ", 0.5, 5.5
        else:
            drawn, after, latest = b"ctrl+s", 0.5, 2.5
        ran = run_in_terminal(
            argv, keys=[(after, "q")], until=drawn, latest=latest, timeout=60, cwd=d, env=env
        )
        status, output = ran.status, ran.text
        left = wait_none_left(ran.mark, 20.0)
        assert not left, f"{line.where}: left running: {left}"
    elif kind(words) == "server":
        proc = subprocess.Popen(
            argv, cwd=d, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
        seen = []
        assert proc.stdout is not None
        for text in proc.stdout:  # its URLs, once every stack answers
            seen.append(text)
            if "Ctrl-C" in text or len([x for x in seen if "http://127.0.0.1:" in x]) >= 2:
                break
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
        status, output = proc.returncode, "".join(seen) + rest
        allowed, note = {0, 130}, "Ctrl-C stops it (README: The stacks)"
    elif (before := ran_before(words, d)) is not None:
        status, output = before
    else:
        done = subprocess.run(
            argv, cwd=d, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
            timeout=240,
        )  # fmt: skip
        status, output = done.returncode, done.stdout + done.stderr
        key, files = as_run(words)
        RAN.setdefault(key, []).append((files, status, output))
    where = (
        f"{line.where}: `{line.text}`\n  run as: {shlex.join(words)}"
        f"\n  exit {status}, the pages allow {sorted(allowed)}"
        + (f" ({note})" if note else "")
        + f"\n  output:\n    {_tail(output)}"
    )
    assert "Traceback (most recent call last)" not in output, where
    assert "internal error" not in output, where
    assert status in allowed, where
