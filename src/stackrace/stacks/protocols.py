"""Which HTTP a stack serves: the variant key `http` ("1.1", "2", "h2c").

`hypercorn:http=2` is hypercorn serving h2 over TLS (negotiated by ALPN, the machine's
certificate); `hypercorn:http=h2c` is cleartext h2 with prior knowledge; "1.1", the
default, is the block as written. A block says which modes it serves in a table of its
own (`[stacks.NAME.http."2"]`, `[stacks.NAME.http.h2c]`, stackrace.stacks.definition's
`HttpMode`): a command that replaces the block's, files that replace the block's of the
same path, env added to it. The mode is applied once, when a variant is chosen
(stackrace.stacks.variants), into the Stack's own `spec`: everything downstream — the
launcher's placeholders and certificate, the stack's URL scheme, readiness, verify —
reads one spec and needs no second rule about protocols. "2" implies `tls = true` and
"h2c" `tls = false`: a mode's TLS is its meaning, so no block can declare a contradiction.

A stack without the mode refuses the variant in one line naming the stack and the key
(`refusal`): nothing starts. What the load engine must speak is `engine_http`: "2" for
both h2 modes (the URL's scheme says whether TLS carries it), the agreed TargetSpec.http.
"""

from __future__ import annotations

import msgspec

from stackrace.engine.model import TargetSpec
from stackrace.stacks.definition import FileTemplate, Stack, StackDef
from stackrace.stacks.tunables import Tunable

HTTP_KEY = "http"  # the variant key
DEFAULT = "1.1"
MODES = ("2", "h2c")  # what a block's `http` table may declare
VALUES = (DEFAULT, *MODES)  # what a variant may say
LABELS = {DEFAULT: "HTTP/1.1", "2": "h2 (TLS)", "h2c": "h2c (cleartext)"}
# why an h2 variant is not loaded or verified by an engine without HTTP/2
NEEDS_ENGINE = "needs the engine's HTTP/2 (issue 51, h2engine)"


def engine_speaks_h2() -> bool:
    """Whether this engine takes HTTP/2 targets: the agreed TargetSpec.http and
    .streams of issue 51 (h2engine's work; until it is merged, it does not)."""
    fields = TargetSpec.__struct_fields__
    return "http" in fields and "streams" in fields


def refusal(spec: StackDef, base: str, value: str) -> str | None:
    """Why `base:http=value` cannot be (None: it can): an unknown value, or a mode the
    stack's block does not declare."""
    if value not in VALUES:
        return f"{value!r} is not one of {', '.join(VALUES)}"
    if value == DEFAULT or value in spec.http:
        return None
    served = ", ".join([DEFAULT, *sorted(spec.http)])
    return f"{base} does not serve {LABELS[value]} (it serves {served})"


def apply(spec: StackDef, value: str) -> StackDef:
    """The block as it runs in mode `value` (the block itself for "1.1")."""
    if value == DEFAULT:
        return spec
    mode = spec.http[value]
    files = list(spec.files)
    for f in mode.files:  # same path: the mode's file instead of the block's
        files = [g for g in files if g.path != f.path]
        files.append(FileTemplate(path=f.path, template=f.template))
    return msgspec.structs.replace(
        spec,
        command=list(mode.command) if mode.command is not None else list(spec.command),
        files=files,
        env={**spec.env, **mode.env},
        tls=value == "2",
    )


def engine_http(stack: Stack) -> str:
    """What the engine speaks to this stack: TargetSpec.http ("1.1" or "2")."""
    return DEFAULT if stack.http == DEFAULT else "2"


def served(spec: StackDef) -> list[str]:
    """The http values a block serves, "1.1" first (the listing and the picker)."""
    return [DEFAULT, *(m for m in MODES if m in spec.http)]


def named_http(name: str) -> str:
    """The `http` a stack's name says (`hypercorn:http=2` → "2"; "1.1" when it says
    none): what a recording's member was raced over, read back from its name."""
    _base, _, rest = name.partition(":")
    for item in rest.split(","):
        key, _, value = item.partition("=")
        if key.strip() == HTTP_KEY and value.strip() in VALUES:
            return value.strip()
    return DEFAULT


def choice(spec: StackDef) -> list[Tunable]:
    """The picker's setting for the protocol (its `p` dialog): a choice of the values
    the block serves, "1.1" the default; none for a stack that serves HTTP/1.1 only.
    Not one of stacks.tunables' (what `tune` sweeps): a sweep across protocols would
    change the client, not the server's configuration."""
    if not spec.http:
        return []
    return [Tunable(HTTP_KEY, DEFAULT, tuple(served(spec)), kind="choice")]
