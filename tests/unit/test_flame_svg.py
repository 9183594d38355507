"""The flame graph's SVG: valid XML whatever the frame names hold (escaped, control
characters removed), each name drawn, widths adding up."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from stackrace.evidence.flame import flame_svg

NS = "{http://www.w3.org/2000/svg}"


def test_hostile_names_make_valid_xml_and_stay_text() -> None:
    svg = flame_svg(
        {
            "app.py:<script>alert(1)</script>;[on CPU]": 5,
            "app.py:a&b;x\x1b[31mred\x00;[idle]": 3,
            "app.py:\"quoted\" 'n';[blocked in a call]": 2,
        },
        title="stack <b>&\x1b",
    )
    root = ET.fromstring(svg)  # raises on invalid XML
    assert "<script" not in svg and "\x1b" not in svg and "\x00" not in svg
    texts = [t.text or "" for t in root.iter(f"{NS}title")]
    assert any("<script>alert(1)</script>" in t for t in texts)  # as text, unescaped
    assert any("a&b" in t for t in texts)
    assert any("x[31mred" in t for t in texts)
    assert not list(root.iter(f"{NS}script"))


def test_boxes_are_as_wide_as_their_samples() -> None:
    svg = flame_svg({"a;b": 3, "a;c": 1})
    root = ET.fromstring(svg)
    widths = {}
    for g in root.iter(f"{NS}g"):
        title, rect = g.find(f"{NS}title"), g.find(f"{NS}rect")
        assert title is not None and rect is not None
        widths[(title.text or "").split(" — ")[0]] = float(rect.get("width", 0))
    assert widths["b"] > 2.5 * widths["c"]
    assert abs(widths["all"] - widths["a"]) < 1


def test_an_empty_window_is_an_empty_graph() -> None:
    root = ET.fromstring(flame_svg({}))
    assert not list(root.iter(f"{NS}g"))
