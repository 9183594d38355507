"""The parsed command line read into a command's frozen options struct, by field name.

Every command's builder (`serve_options`, `load_options`, …) used to list each field of
its struct twice, once in the struct and once as `field=args.field`, with the same
three conversions written by hand each time (a list to a tuple, an append option not
given to an empty tuple, a switch to a bool). `typed_options` reads every field the
struct declares from the argument of the same name, once: a builder says only what is
not a plain copy (another dest, a group read by its own builder, a negation), and a
field added to the struct reaches the command with no second edit.

A field the parser does not have (a `db` action's option another action lacks, the
`argv` only cli.py sets) keeps the struct's default; a field with neither is a bug of
ours, and the struct's own TypeError says which. The conversions follow the field's
annotation as written (the text `tuple[str, ...]` or `bool` that `from __future__ import
annotations` leaves, or the type itself): nothing is evaluated or imported to read it.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, TypeVar

T = TypeVar("T")


def typed_options(cls: type[T], args: argparse.Namespace, **given: Any) -> T:
    """`cls` (a frozen dataclass) with each field from the argument of its name, unless
    `given` names it: a list becomes a tuple, None a `()` where the field is a tuple, a
    value a bool where the field is a bool."""
    values = dict(given)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # a dataclass, by contract
        if f.name in values or not hasattr(args, f.name):
            continue
        values[f.name] = _as_annotated(f.type, getattr(args, f.name))
    return cls(**values)


def _as_annotated(annotation: object, value: Any) -> Any:
    # the text `from __future__ import annotations` leaves, or the type itself without it
    text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", "")
    if text.startswith("tuple"):
        return tuple(value or ())
    if text == "bool":
        return bool(value)
    return value
