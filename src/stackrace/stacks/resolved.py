"""A run's stacks, resolved once: the catalogue read, your app's stacks added, handed down.

    run = resolve_run(stacks_file)                  # commands/: the one read
    stacks = run.stacks()                           # the StackFile, or its ConfigError
    own = run.with_your_app(your_app, settings)     # + --app's servers and each --cmd
    race = run.for_race(your_app, settings)         # the app: those, and which to race
    StacksFileSource(stacks_file, defs=own, ...)    # below: handed, never read again

Before, the app's start-up read the stacks files three times (the command's check, the
race's source, the announcement after the screen) and each reader applied the trust of
./stacks.toml again; a file edited between two reads could make them disagree. Now the
command resolves the run once and every part below takes the result: the race's stack
source (race/core/stack_source.py), your app's stacks (stacks/userapp.py), the line
naming the files read (commands/_common.py `announce`). tests/unit/test_resolved_run.py
counts the reads of one app start-up and of one bench plan. The app's race takes the
rest of its stacks from here too, decided once (`for_race` → `RaceStacks`): those made
for the run, which the picker offers, which race when none are named, and what `--go`
says of them (the others left out, a server your app's interpreter lacks); before, the
set-up asked userapp for each of them again, in three places.

What the catalogue is (shipped, the user's, ./stacks.toml with its trust, --stacks-file
alone) is stackrace.stacks.catalogue's; a name or variant is chosen from the result by
stackrace.stacks.variants.resolve. An unreadable catalogue is kept as its error, not
raised: a race of --url targets alone needs no stacks file, and the command decides.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from stackrace.stacks import userapp
from stackrace.stacks.catalogue import StackFile, load_stacks
from stackrace.stacks.definition import ConfigError

if TYPE_CHECKING:
    from stackrace.settings.race_settings import RaceSettings
    from stackrace.stacks.app_spec import YourApp


@dataclass(frozen=True)
class RaceStacks:
    """The stacks one race may start, resolved once: the catalogue with those made for
    this run (--app, --cmd), which of them the picker offers, and which it races when no
    stack is named."""

    defs: StackFile
    # the stacks made for this run, offered alone (None: nothing was made: every stack)
    offer: list[str] | None = None
    # with --app and no --stacks: the common four servers of the app's kind that can run
    # here, then each --cmd; `others`: the other servers that run the app
    chosen: list[str] = field(default_factory=list)
    others: list[str] = field(default_factory=list)
    # what a race that starts at once (--go) says of them: the others it leaves out, and
    # your app's servers named that cannot run in its interpreter (the picker shows both)
    left_out: str = ""
    missing: str = ""


@dataclass(frozen=True)
class ResolvedRun:
    """The catalogue of one run, read once (`error`: why it could not be)."""

    catalogue: StackFile | None
    error: ConfigError | None = None

    def stacks(self) -> StackFile:
        """The catalogue; its ConfigError (one line naming file, stack and key) if none."""
        if self.catalogue is None:
            raise self.error or ConfigError("no stacks file was read")
        return self.catalogue

    def with_your_app(self, your_app: YourApp, settings: RaceSettings | None) -> StackFile:
        """The catalogue with the stacks made for this run (`SERVER[app]` for --app, one
        per --cmd): stackrace.stacks.userapp's, on the catalogue already read. Raises
        ConfigError, AppError or ScenarioError."""
        return userapp.with_run_stacks(self.stacks(), your_app, settings)

    def for_race(self, your_app: YourApp, settings: RaceSettings | None) -> RaceStacks | None:
        """The run's stacks with your app's and the choice among them, made once for the
        whole race (the app's: race/live/setup.py); None when the catalogue could not be
        read and nothing is made for the run (a race of --url targets alone). Raises
        ConfigError, AppError or ScenarioError."""
        if not your_app.given:
            return None if self.catalogue is None else RaceStacks(self.catalogue)
        defs = self.with_your_app(your_app, settings)
        made = userapp.generated_names(defs)
        servers, others = userapp.default_app_stacks(defs)
        chosen = servers + [n for n in made if defs.generated[n] == "--cmd"]
        left_out = userapp.left_out_note(chosen, others) if others else ""
        named = list(settings.stacks) if settings is not None and settings.stacks else chosen
        try:
            missing = userapp.missing_servers(named, defs)
        except ConfigError as exc:  # a name that does not resolve: the line said at --go
            missing = str(exc)
        return RaceStacks(defs, made, chosen, others, left_out, missing)


def resolve_run(stacks_file: str | None, *, check_trust: bool = True) -> ResolvedRun:
    """Read the catalogue once for a run (`stacks_file`: --stacks-file, alone; None: the
    shipped file, the user's and ./stacks.toml with its trust). `check_trust=False`: an
    untrusted ./stacks.toml is read too, to be listed (never run)."""
    try:
        return ResolvedRun(load_stacks(stacks_file, check_trust=check_trust))
    except ConfigError as exc:
        return ResolvedRun(None, exc)
