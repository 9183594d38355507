"""A flame graph (SVG) of an evidence window's collapsed stacks, drawn by our own code.

The collapsed stacks ("frame;frame;…;[state]" → samples, root first) are merged into a
tree; each node is a box as wide as its samples' share, stacked upwards from the root,
the leaf being the thread's state, so a wide "[waiting on a lock]" box shows at once
where the threads waited. Colours are by kind (the app's own frames warm, the library's
cool, states grey), not random, so two graphs of one stack compare.

Every name comes from a server's process (a function or file name, which an app may
choose): hostile. Each is stripped of control characters and XML-escaped (text and
attribute) before it is written, so the file is valid XML whatever the names hold,
and a viewer runs nothing it did not write (`<script>` stays text). Pure: returns text.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stackrace.base.printable import xml  # the one XML escaping (base/printable.py)

WIDTH = 1200
ROW = 17
FONT = 11
CHAR_PX = 6.5  # a character's width at FONT px, about: labels cut to fit their box
MIN_PX = 0.5  # boxes narrower than this are not drawn


def clean(text: str) -> str:
    """Control characters (ESC, NUL, newlines, C1) removed: safe to escape for XML."""
    return "".join(c for c in text if c.isprintable() or c == " ")


@dataclass
class _Node:
    name: str
    samples: int = 0
    children: dict[str, _Node] = field(default_factory=dict)


def _tree(collapsed: dict[str, int]) -> _Node:
    root = _Node("all")
    for stack, n in collapsed.items():
        if n <= 0:
            continue
        root.samples += n
        node = root
        for name in stack.split(";"):
            node = node.children.setdefault(name, _Node(name))
            node.samples += n
    return root


def _depth(node: _Node) -> int:
    return 1 + max((_depth(c) for c in node.children.values()), default=0)


def _colour(name: str) -> str:
    if name.startswith("["):
        return "#b8b8b8"  # a state
    library = any(p in name for p in ("site-packages", "threading.py", "/__init__.py", "<"))
    if library:
        return "#7fb2d9"
    h = sum(map(ord, name)) % 40
    return f"rgb(240,{120 + h},{60 + h // 2})"


def flame_svg(collapsed: dict[str, int], title: str = "") -> str:
    """The flame graph of `collapsed` as an SVG document (valid XML, names escaped)."""
    root = _tree(collapsed)
    depth = _depth(root)
    height = (depth + 2) * ROW
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="monospace" font-size="{FONT}">',
        f'<rect width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        f'<text x="4" y="{ROW - 4}">{xml(clean(title))} ({root.samples:,} samples)</text>',
    ]
    if root.samples:
        _draw(out, root, 0.0, WIDTH / root.samples, height - ROW, root.samples)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _draw(out: list[str], node: _Node, x: float, per: float, y: float, total: int) -> None:
    w = node.samples * per
    if w < MIN_PX:
        return
    name = clean(node.name)
    tip = f"{name} — {node.samples:,} samples, {100 * node.samples / total:.1f} %"
    out.append(
        f'<g><title>{xml(tip)}</title><rect x="{x:.1f}" y="{y - ROW:.0f}" '
        f'width="{max(0.0, w - 0.5):.1f}" height="{ROW - 1}" fill="{xml(_colour(name))}"/>'
    )
    chars = int((w - 4) / CHAR_PX)
    if chars >= 3:
        label = name if len(name) <= chars else name[: chars - 1] + "…"
        out.append(f'<text x="{x + 2:.1f}" y="{y - 5:.0f}">{xml(label)}</text>')
    out.append("</g>")
    child_x = x
    for child in sorted(node.children.values(), key=lambda c: c.name):
        _draw(out, child, child_x, per, y - ROW, total)
        child_x += child.samples * per
