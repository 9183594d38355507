"""Which node takes which role: load (engine processes), app (the stacks), db (MariaDB).

A placement comes from a small TOML file (`--placement cluster.toml`) or from flags
(`--load-node`, `--app-node`, `--db-node`); flags win over the file. Each role names its
node(s) with a node reference:

    KEY=VALUE      a node label, as given to `ray start --labels KEY=VALUE`
    id:HEX         a Ray node id (`ray list nodes`), or a unique prefix of one
    ADDRESS        a node's IP address or host name

    # cluster.toml
    address = "10.0.0.1:6379"       # optional: the Ray cluster (--cluster wins)
    timeout = "30s"                 # optional: how long a role may take to come up
    lost_after = "10s"              # optional: a host silent this long is lost
    [app]
    node = "stackrace-role=app"
    [db]                            # optional: default the app node
    node = "stackrace-role=app"
    [[load]]                        # one or more
    node = "stackrace-role=load"    # a label may match several nodes: each gets engines
    engines = 2                     # engine processes on each matching node (default 1)
    cpus = [0, 1]                   # optional: pin them there, one core each in turn

Unplaced roles default to the labels `stackrace-role=load` and `stackrace-role=app`, so a
cluster started with those labels needs no placement at all. Nothing here imports Ray:
the file is checked before a connection is made.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import msgspec

from stackrace.base import inputfile
from stackrace.cluster.errors import PlacementError
from stackrace.settings.units import parse_duration

ROLE_LABEL = "stackrace-role"
DEFAULT_TIMEOUT = 30.0  # seconds a role's actor may take to be placed and ready
# Seconds a host may stay silent before it is lost: an engine reports every 250 ms and
# an idle long-poll returns every second, so 10 s of silence is no hiccup; Ray's own
# failure detection takes longer (health checks), and the race should not wait for it.
DEFAULT_LOST_AFTER = 10.0


class NodeRef(msgspec.Struct, frozen=True):
    """How a role names a node: by label, by id (or id prefix), or by address."""

    kind: str  # "label" | "id" | "address"
    key: str = ""  # label key
    value: str = ""  # label value, node id, or address

    @classmethod
    def parse(cls, text: str) -> NodeRef:
        text = text.strip()
        if not text:
            raise PlacementError("an empty node reference (use KEY=VALUE, id:HEX or an address)")
        if text.startswith("id:"):
            node_id = text[3:].strip().lower()
            if not node_id or any(c not in "0123456789abcdef" for c in node_id):
                raise PlacementError(f"node reference {text!r}: a node id is hexadecimal")
            return cls("id", value=node_id)
        if "=" in text:
            key, _, value = text.partition("=")
            if not key.strip() or not value.strip():
                raise PlacementError(f"node reference {text!r}: a label is KEY=VALUE")
            return cls("label", key=key.strip(), value=value.strip())
        return cls("address", value=text)

    def __str__(self) -> str:
        if self.kind == "label":
            return f"{self.key}={self.value}"
        if self.kind == "id":
            return f"id:{self.value}"
        return self.value


class LoadEntry(msgspec.Struct, frozen=True):
    node: NodeRef
    engines: int = 1
    cpus: tuple[int, ...] = ()


class NodePlacement(msgspec.Struct, frozen=True):
    load: tuple[LoadEntry, ...] = (LoadEntry(NodeRef("label", ROLE_LABEL, "load")),)
    app: NodeRef = NodeRef("label", ROLE_LABEL, "app")
    db: NodeRef | None = None  # None: on the app node
    address: str | None = None
    timeout: float = DEFAULT_TIMEOUT
    lost_after: float = DEFAULT_LOST_AFTER


# --- the file ---------------------------------------------------------------------------


class _LoadToml(msgspec.Struct, forbid_unknown_fields=True):
    node: str
    engines: int = 1
    cpus: list[int] = msgspec.field(default_factory=list)


class _RoleToml(msgspec.Struct, forbid_unknown_fields=True):
    node: str


class _PlacementToml(msgspec.Struct, forbid_unknown_fields=True):
    address: str | None = None
    timeout: str | None = None
    lost_after: str | None = None
    load: list[_LoadToml] = msgspec.field(default_factory=list)
    app: _RoleToml | None = None
    db: _RoleToml | None = None


def load_placement(path: str | Path) -> NodePlacement:
    """Read a cluster.toml; errors name the file and what is wrong in it."""
    p = Path(path)
    try:
        raw = inputfile.parse_toml(str(p), inputfile.read_text(p, limit=inputfile.MiB))
        doc = msgspec.convert(raw, _PlacementToml)
    except inputfile.InputFileError as exc:
        raise PlacementError(str(exc)) from None
    except OSError as exc:
        raise PlacementError(f"{p}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise PlacementError(f"{p}: not valid TOML: {exc}") from None
    except msgspec.ValidationError as exc:
        raise PlacementError(f"{p}: {exc}") from None
    try:
        base = NodePlacement()
        load = tuple(_load_entry(NodeRef.parse(e.node), e.engines, tuple(e.cpus)) for e in doc.load)
        return NodePlacement(
            load=load or base.load,
            app=NodeRef.parse(doc.app.node) if doc.app else base.app,
            db=NodeRef.parse(doc.db.node) if doc.db else None,
            address=doc.address,
            timeout=parse_duration(doc.timeout) if doc.timeout else DEFAULT_TIMEOUT,
            lost_after=_positive(parse_duration(doc.lost_after), "lost_after")
            if doc.lost_after
            else DEFAULT_LOST_AFTER,
        )
    except (PlacementError, ValueError) as exc:
        raise PlacementError(f"{p}: {exc}") from None


def _positive(seconds: float, what: str) -> float:
    if not seconds > 0:
        raise PlacementError(f"{what} must be more than 0s")
    return seconds


def _load_entry(node: NodeRef, engines: int, cpus: tuple[int, ...]) -> LoadEntry:
    if engines < 1:
        raise PlacementError(f"load node {node}: engines must be at least 1")
    if any(c < 0 for c in cpus):
        raise PlacementError(f"load node {node}: cpus are core numbers (0, 1, …)")
    return LoadEntry(node, engines, cpus)


def with_flags(
    placement: NodePlacement,
    *,
    load_nodes: list[str] | None = None,
    app_node: str | None = None,
    db_node: str | None = None,
    timeout: float | None = None,
    lost_after: float | None = None,
) -> NodePlacement:
    """The placement with what flags say instead; a repeated --load-node adds an engine."""
    changes: dict[str, object] = {}
    if load_nodes:
        counts: dict[NodeRef, int] = {}
        for text in load_nodes:
            ref = NodeRef.parse(text)
            counts[ref] = counts.get(ref, 0) + 1
        changes["load"] = tuple(LoadEntry(ref, n) for ref, n in counts.items())
    if app_node:
        changes["app"] = NodeRef.parse(app_node)
    if db_node:
        changes["db"] = NodeRef.parse(db_node)
    if timeout is not None:
        changes["timeout"] = timeout
    if lost_after is not None:
        changes["lost_after"] = _positive(lost_after, "--cluster-lost-after")
    return msgspec.structs.replace(placement, **changes) if changes else placement
