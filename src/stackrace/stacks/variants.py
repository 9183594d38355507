"""Choosing a stack: "NAME" or "NAME:workers=4,threads=8" → a Stack, checked.

Variants: "NAME:workers=4,threads=8" anywhere a stack name is accepted. A variant's value
may itself be a stack with one override: `nginx-proxy:backend=gunicorn-sync:workers=4`.
Each value is held to its param's kind (stackrace.stacks.tunables); what depends on the
machine is checked here, not when the file is read: every CPU in `cpus` must be one this
process may use, and workers and threads under the machine's ceilings.

Only the command line (or the picker: the person at the keyboard) names an executable
freely. A variant read from a file — a preset, a run file (`bench --from`), a
recording, another stack's `upstream` — is refused in one line when a path param names
an executable other than the param's default or one the stack lists in `executables`:
a data file that travels must never choose what runs (`resolve(..., named_in=
COMMAND_LINE)` is the command line's; the rule is stackrace.stacks.tunables', with every
other rule for a variant's values). A stack that a ./stacks.toml not trusted yet
adds is refused here with the line that says how to trust it (stacks.catalogue): this
is the one door every build, install, verify, serve and race passes.
"""

from __future__ import annotations

import os

from stackrace.stacks import protocols
from stackrace.stacks.catalogue import StackFile
from stackrace.stacks.definition import ConfigError, Stack, StackDef
from stackrace.stacks.placeholders import render
from stackrace.stacks.tunables import check_default_counts, check_override


def resolve(
    ref: str,
    stacks: dict[str, StackDef],
    source: str | None = None,
    *,
    named_in: str = "a file",
) -> Stack:
    """'gunicorn-sync' or 'gunicorn-sync:workers=4,threads=2' → Stack.

    Errors name `source`, by default the file the stacks were read from (a StackFile),
    and check what depends on this machine: the CPUs in `cpus`. `named_in`: where the
    reference was written, `COMMAND_LINE` or a file (a preset, a run file): a path
    param's value from a file must be its default or one the stack lists in
    `executables` (see the module docstring).
    """
    if source is None:
        source = getattr(stacks, "source", "stacks.toml")
    if not ref.isprintable():
        # a line break or an escape sequence would forge or garble the error line itself
        raise ConfigError(f"{source}: stack {ref!r}: control characters in a stack name")
    base, _, rest = ref.partition(":")
    base = base.strip()
    if base not in stacks:
        known = ", ".join(sorted(stacks))
        raise ConfigError(f"{source}: no stack '{base}' (known: {known})")
    if isinstance(stacks, StackFile) and base in stacks.untrusted:
        # added by a ./stacks.toml not trusted yet: its command is a stranger's
        raise ConfigError(stacks.untrusted[base])
    spec = stacks[base]
    overrides: dict[str, str] = {}
    https: list[str] = []  # the protocols asked (stacks.protocols checks them below)
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not value:
            raise ConfigError(f"{source}: stack '{ref}': variant '{item}' is not KEY=VALUE")
        if key == protocols.HTTP_KEY:  # the protocol (stacks.protocols), not a param
            https.append(value)
            if value != protocols.DEFAULT:  # the default is the stack as named
                overrides[key] = value
            continue
        if key not in ("workers", "threads") and key not in spec.params:
            allowed = ", ".join(["workers", "threads", protocols.HTTP_KEY, *spec.params])
            raise ConfigError(f"{source}: stack '{ref}': key '{key}': not tunable ({allowed})")
        # held to its param's kind, and what a file may name (stacks.tunables' rule)
        check_override(spec, ref, key, value, source=source, named_in=named_in)
        overrides[key] = value
    check_default_counts(spec, base, overrides, source)
    for value in https:
        problem = protocols.refusal(spec, base, value)
        if problem:
            raise ConfigError(f"{source}: stack '{ref}': key 'http': {problem}")
    if spec.cpus:
        usable = sorted(os.sched_getaffinity(0))
        missing = [c for c in spec.cpus if c not in usable]
        if missing:
            raise ConfigError(
                f"{source}: stack '{base}': key 'cpus': CPU {missing[0]} is not one this "
                f"machine lets stackrace use ({', '.join(map(str, usable))})"
            )
    name = (
        base if not overrides else f"{base}:" + ",".join(f"{k}={v}" for k, v in overrides.items())
    )
    # the mode's command, files and TLS, applied once: every reader of the spec agrees
    spec = protocols.apply(spec, overrides.get(protocols.HTTP_KEY, protocols.DEFAULT))
    stack = Stack(name=name, base=base, spec=spec, overrides=overrides)
    if spec.upstream is not None:
        stack = _with_upstream(stack, ref, stacks, source)
    return stack


def _with_upstream(stack: Stack, ref: str, stacks: dict[str, StackDef], source: str) -> Stack:
    """Resolve the stack's `upstream` (rendered with its params) into a Stack of its own."""
    assert stack.spec.upstream is not None
    try:
        up_ref = render(stack.spec.upstream, stack.params)
    except ConfigError as exc:
        raise ConfigError(f"{source}: stack '{ref}': key 'upstream': {exc}") from None
    up_base = up_ref.partition(":")[0].strip()
    if up_base in stacks and stacks[up_base].upstream is not None:
        # one hop only (this also stops a stack naming itself): a chain would need a port
        # per hop and says nothing the experiments ask
        raise ConfigError(
            f"{source}: stack '{ref}': key 'upstream': {up_ref!r} is itself in front of a stack"
        )
    try:
        # a stacks file's reference: a file's, never the command line's
        upstream = resolve(up_ref, stacks, source, named_in=f"key 'upstream' of '{ref}'")
    except ConfigError as exc:
        raise ConfigError(f"{source}: stack '{ref}': key 'upstream': {exc}") from None
    return Stack(
        name=stack.name,
        base=stack.base,
        spec=stack.spec,
        overrides=stack.overrides,
        upstream=upstream,
    )
