"""What `bench` and `tune` share around a run: its run lock and the other runs that
share its cores, its journal, and the signals that end it.

    group = add_run_arguments(parser)                # --journal, --resume, --share-cores
    guard = run_guard_options(args)                  # RunGuardOptions, in the command's
    lock = claim_cores("stackrace bench", guard.share_cores, notes)  # None: refused
    journal = open_journal("stackrace bench", path, start)

- **Other runs** (race/core/runlocks.py): a run that would share its cores with a live
  stackrace run says so at start and in its output's notes, and refuses to measure
  (exit 75, EX_TEMPFAIL: try again when the other has ended) unless `--share-cores`;
  one that comes onto its cores later is added before the output is written
  (`late_sharers`).
- **The journal** (race/core/journal.py): beside the first output file (`--json out.json`
  → `out.json.journal`), or `--journal PATH`, or under the cache directory when the
  run writes no file; an existing one is never overwritten (it is an unfinished run's:
  resume it, or remove it). A run that ends whole and writes its files removes its
  journal; an interrupted one keeps it and says how to resume, truly (`kept_line`: a
  journal that stopped taking entries holds only what came before). The output files
  asked for go into the journal's start (`record_outputs`), and a resume writes each
  that lies in the journal's directory (`resume_outputs`).
- **Signals**: `interruptible` runs a coroutine with Ctrl-C, SIGTERM and SIGHUP
  cancelling it cleanly (stacks stopped, results kept) and returns which one came;
  a second signal while the stacks stop kills them at once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from stackrace.base import paths
from stackrace.base.errors import StackraceError
from stackrace.commands.namespace import typed_options
from stackrace.race.core import runlocks
from stackrace.race.core.journal import SUFFIX, Journal, JournalEnd, JournalStart, beside
from stackrace.supervise import hurry

EXIT_SHARED = 75  # sysexits.h EX_TEMPFAIL: another run holds these cores; try again later

if TYPE_CHECKING:
    from stackrace.commands.output_args import OutputFiles

T = TypeVar("T")


@dataclass(frozen=True)
class RunGuardOptions:
    """--journal, --resume and --share-cores, as given."""

    journal: str | None = None
    resume: str | None = None
    share_cores: bool = False


def run_guard_options(args: argparse.Namespace) -> RunGuardOptions:
    return typed_options(RunGuardOptions, args)


def add_run_arguments(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    p.add_argument(
        "--journal",
        metavar="PATH",
        help="append every finished level, probe and candidate here as it ends (default: "
        "beside the first output file, e.g. out.json.journal); kept when the run is "
        "interrupted or killed, removed when it ends whole",
    )
    p.add_argument(
        "--resume",
        metavar="JOURNAL",
        help="continue the run a journal holds (after Ctrl-C or a kill): what it measured "
        "is kept, the rest is measured with its settings",
    )
    p.add_argument(
        "--share-cores",
        action="store_true",
        help="measure even while another stackrace run uses these cores (refused "
        "otherwise: its load would read as the servers' slowness); noted in the output",
    )


def shared_notes(shared: list[str]) -> list[str]:
    """The output's notes for the other runs that shared the cores."""
    return [f"measured while another stackrace run shared the cores: {o}" for o in shared]


def late_sharers(lock: runlocks.RunLock, shared: list[str]) -> list[str]:
    """The runs that came onto this run's cores after it started (added to `shared`):
    the first of two runs sharing cores records the second too."""
    late = [o for o in lock.joined() if o not in shared]
    shared.extend(late)
    return late


def claim_cores(
    prog: str, share_cores: bool, shared: list[str], cluster: bool = False
) -> runlocks.RunLock | None:
    """This run's lock, after looking for other runs on its cores (each goes into
    `shared`): None (and one line printed) when one is found and --share-cores
    (`share_cores`) was not given. A run whose servers and engines run on other hosts
    (--cluster) loads no core here, and only registers."""
    cores = sorted(os.sched_getaffinity(0))
    command = prog.removeprefix("stackrace ")
    others = [] if cluster else runlocks.other_runs(cores)
    if others and not share_cores:
        print(
            f"{prog}: another stackrace run uses these cores ({'; '.join(others)}): its load "
            "would be measured as the servers' slowness. Run it when that one has ended, "
            "or give --share-cores to measure anyway (the output will say so)",
            file=sys.stderr,
        )
        return None
    shared.extend(others)
    for note in shared_notes(others):
        print(f"{prog}: note: {note}", file=sys.stderr)
    return runlocks.RunLock.take(command, cores)


# what the journals directory's marker says (stackrace.base.madeby; commands/clean.py)
JOURNALS_MADE_FOR = "journals of runs that did not end (what --resume continues)"


def journal_path(explicit: str | None, outputs: list[str | None], command: str) -> Path:
    """Where a new run's journal goes (see the module docstring)."""
    if explicit:
        return Path(explicit).expanduser()
    first = next((o for o in outputs if o), None)
    found = beside(first)
    if found is not None:
        return found

    d = paths.writable_dir(
        paths.cache_dir() / "journals", "its journals", made_for=JOURNALS_MADE_FOR
    )
    return d / f"{command}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.journal"


class JournalInUse(StackraceError):
    """A journal is where this run's would go: an unfinished run's, never overwritten."""

    exit_code = 2


# the files a bench or a tune writes, by option, and their fields in OutputFiles (a
# command without one of them does not offer it)
OUTPUTS = {
    "--json": "json_out",
    "--csv": "csv_out",
    "--markdown": "md_out",
    "--chart": "chart_out",
    "--junit": "junit_out",
    "--html": "html_out",
    "--series-csv": "series_csv_out",
}


def record_outputs(journal: Path, files: OutputFiles) -> dict[str, str]:
    """The files this run writes, as its journal keeps them (JournalStart.outputs): a
    file in the journal's directory (or below it) by its path from there, any other by
    its absolute path."""
    base = journal.expanduser().resolve().parent
    out: dict[str, str] = {}
    for option, dest in OUTPUTS.items():
        given = getattr(files, dest)
        if given and given != "-":  # "-" is standard output: nothing to write again
            full = Path(given).expanduser().resolve()
            out[option] = str(full.relative_to(base)) if full.is_relative_to(base) else str(full)
    return out


def resume_outputs(
    prog: str, journal: str, recorded: dict[str, str], files: OutputFiles
) -> OutputFiles:
    """`--resume`: the files this run writes. Every file the first run wrote is written
    again by this one, with the whole run (the first one's Markdown said "Interrupted"):
    each option not given now takes the journal's file (a journal from before they were
    kept, `out.json.journal`: `out.json`, the file it was beside). Only files in the
    journal's directory or below: a journal is a file someone can hand you, and its word
    alone writes nowhere else; a line says which option to give for any other."""
    taken: dict[str, str] = {}
    offered = files.offered
    if "json_out" in offered and files.json_out is None and journal.endswith(".json" + SUFFIX):
        taken["json_out"] = journal.removesuffix(SUFFIX)  # the run it was beside
    base = Path(journal).expanduser().resolve().parent
    for option, name in sorted(recorded.items()):
        dest = OUTPUTS.get(option)
        if dest is None or dest not in offered or getattr(files, dest) or dest in taken:
            continue  # not this command's, or given again (the command line wins)
        rel = Path(name)
        if rel.is_absolute() or ".." in rel.parts or not rel.parts:
            print(
                f"{prog}: the first run also wrote {name!r} ({option}): not in the journal's "
                f"directory, so not written again on the journal's word; give {option} "
                "to write it",
                file=sys.stderr,
            )
            continue
        taken[dest] = str(base / rel)
    return replace(files, **taken)  # type: ignore[arg-type]  # each a file's field, a str


def open_journal(prog: str, path: Path, start: JournalStart) -> Journal | None:
    """A new journal; None after one line when the disk refuses it (the run goes on
    without one: its figures are still printed and written). JournalInUse when one is
    there already."""
    try:
        return Journal.create(path, start)
    except FileExistsError:
        raise JournalInUse(
            f"{path} exists: the journal of a run that did not end. Continue it "
            f"with `{prog} --resume {path}`, or remove it (or give --journal elsewhere)"
        ) from None
    except OSError as exc:
        print(
            f"{prog}: journal {path}: cannot write: {exc.strerror or exc}; the run goes on "
            "without one (an interrupted run keeps only what it prints)",
            file=sys.stderr,
        )
    return None


# the output options a journal remembers, and their argparse names: a resume writes
# every file the first run was asked for (`--csv` was dropped)
def kept_line(prog: str, journal: Journal | None, kept: str, what: str, head: str = "") -> str:
    """What an interrupted run says of its journal, true after a write failure too: a
    journal that stopped taking entries (a full disk) holds only what came before.
    `head`: what the line says first ("interrupted (SIGINT); ")."""
    if journal is not None and journal.error:
        return (
            f"{prog}: {head}{kept} holds only the {what} measured before the journal stopped "
            f"({journal.error}); the later ones are not in it: `{prog} --resume {kept}` "
            "measures them again"
        )
    return (
        f"{prog}: {head}every finished {what} is in {kept}: `{prog} --resume {kept}` "
        "measures the rest"
    )


def finish_journal(journal: Journal | None, interrupted: str | None, keep: bool) -> str:
    """Close the journal: removed when the run ended whole and its files were written
    (`keep` false), else kept; its path ("" when removed)."""
    if journal is None:
        return ""

    if journal.error:
        print(
            f"journal {journal.path}: stopped taking entries: {journal.error}; it holds "
            "what was measured before",
            file=sys.stderr,
        )

    journal.close(JournalEnd(interrupted=interrupted))
    if interrupted is None and not keep:
        with contextlib.suppress(OSError):
            journal.path.unlink()
        return ""
    return str(journal.path)


async def interruptible(
    work: Coroutine[Any, Any, T],
    prog: str,
    extra: list[Callable[[Callable[[str], None]], None]] | None = None,
) -> tuple[T | None, str | None]:
    """Run `work`; Ctrl-C, SIGTERM or SIGHUP cancel it cleanly: (its result, None) or
    (None, which signal). `extra`: hooks given the stop function (a lost app host)."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    why: list[str] = []

    def stop(name: str) -> None:
        if why:  # a second signal while the stacks stop: kill them at once
            hurry.hurry()
            with contextlib.suppress(OSError):  # after a SIGHUP the terminal is gone (EIO)
                print(f"{prog}: stopping now (SIGKILL)", file=sys.stderr, flush=True)
            return
        why.append(name)
        task.cancel()

    # SIGHUP: the terminal was closed; what was measured is as worth keeping as on
    # Ctrl-C, and its default action (exit at once) would lose it
    signals = ((signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM"), (signal.SIGHUP, "SIGHUP"))
    for sig, name in signals:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop, name)
    for hook in extra or []:
        hook(stop)
    try:
        return await work, None
    except asyncio.CancelledError:
        if not why:
            raise
        task.uncancel()
        return None, why[0]
    finally:
        for sig, _ in signals:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
