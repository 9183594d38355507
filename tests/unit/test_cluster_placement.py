"""NodePlacement files, flags and node resolution: pure logic, no Ray needed."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackrace.base.netguard import RemoteTargetError, require_loopback_or_member
from stackrace.cluster.errors import PlacementError
from stackrace.cluster.nodes import NodeInfo, load_slots, one_node
from stackrace.cluster.placement import NodePlacement, NodeRef, load_placement, with_flags

NODES = [
    NodeInfo("aa11" + "0" * 52, "10.0.0.1", "head", {"stackrace-role": "head"}),
    NodeInfo("bb22" + "0" * 52, "10.0.0.2", "gen1", {"stackrace-role": "load"}),
    NodeInfo("cc33" + "0" * 52, "10.0.0.3", "gen2", {"stackrace-role": "load"}),
    NodeInfo("dd44" + "0" * 52, "10.0.0.4", "app", {"stackrace-role": "app", "disk": "ssd"}),
]


def test_node_references():
    assert NodeRef.parse("stackrace-role=load") == NodeRef("label", "stackrace-role", "load")
    assert NodeRef.parse("id:BB22") == NodeRef("id", value="bb22")
    assert NodeRef.parse("10.0.0.4") == NodeRef("address", value="10.0.0.4")
    for bad in ("", "id:xyz", "=x", "k="):
        with pytest.raises(PlacementError):
            NodeRef.parse(bad)


def test_placement_file(tmp_path: Path):
    f = tmp_path / "cluster.toml"
    f.write_text(
        'address = "10.0.0.1:6379"\ntimeout = "45s"\nlost_after = "3s"\n'
        '[app]\nnode = "disk=ssd"\n'
        '[[load]]\nnode = "stackrace-role=load"\nengines = 2\ncpus = [0, 1]\n'
    )
    p = load_placement(f)
    assert p.address == "10.0.0.1:6379" and p.timeout == 45.0 and p.lost_after == 3.0
    assert one_node("app", p.app, NODES).hostname == "app"
    slots = load_slots(p, NODES)
    # interleaved over the nodes, then doubled up: a target's 2 processes land on 2 nodes
    assert [(s.node.hostname, s.cpus) for s in slots] == [
        ("gen1", (0,)),
        ("gen2", (0,)),
        ("gen1", (1,)),
        ("gen2", (1,)),
    ]


def test_placement_file_errors_name_the_file(tmp_path: Path):
    f = tmp_path / "cluster.toml"
    f.write_text('[[load]]\nnode = "x=y"\nengine = 2\n')
    with pytest.raises(PlacementError, match=r"cluster\.toml.*engine"):
        load_placement(f)
    f.write_text('[[load]]\nnode = "x=y"\nengines = 0\n')
    with pytest.raises(PlacementError, match="engines must be at least 1"):
        load_placement(f)
    with pytest.raises(PlacementError, match=r"missing\.toml"):
        load_placement(tmp_path / "missing.toml")
    f.write_text('lost_after = "0s"\n')
    with pytest.raises(PlacementError, match=r"cluster\.toml: lost_after must be more than 0s"):
        load_placement(f)


def test_lost_after_defaults_and_flag():
    assert NodePlacement().lost_after == 10.0  # silence a host may keep before it is lost
    assert with_flags(NodePlacement(), lost_after=2.5).lost_after == 2.5
    with pytest.raises(PlacementError, match="--cluster-lost-after must be more than 0s"):
        with_flags(NodePlacement(), lost_after=0.0)


def test_flags_win_and_repeat_adds_engines():
    p = with_flags(NodePlacement(), load_nodes=["10.0.0.2", "10.0.0.2", "id:cc33"], app_node="app")
    assert [(e.node.value, e.engines) for e in p.load] == [("10.0.0.2", 2), ("cc33", 1)]
    assert [s.node.hostname for s in load_slots(p, NODES)] == ["gen1", "gen2", "gen1"]
    assert one_node("app", p.app, NODES).address == "10.0.0.4"


def test_unplaced_and_ambiguous_roles_are_explained():
    with pytest.raises(PlacementError, match="matches 2 nodes"):
        one_node("app", NodeRef.parse("stackrace-role=load"), NODES)
    with pytest.raises(PlacementError) as exc:
        load_slots(with_flags(NodePlacement(), load_nodes=["rack=9"]), NODES)
    assert "--load-node" in str(exc.value) and "10.0.0.4" in str(exc.value)


def test_guard_allows_exactly_loopback_and_members():
    require_loopback_or_member("127.0.0.1", [])
    require_loopback_or_member("10.0.0.4", ["10.0.0.2", "10.0.0.4"])
    with pytest.raises(RemoteTargetError, match="neither loopback nor a node"):
        require_loopback_or_member("10.0.0.5", ["10.0.0.2", "10.0.0.4"])
