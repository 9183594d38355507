"""A pane's title keeps what tells two panes apart (a variant's settings) in any width."""

from __future__ import annotations

from stackrace.tui.pane_text import title_for


def test_a_variants_title_keeps_its_settings() -> None:
    name = "gunicorn (sync worker) (workers=4)"
    assert title_for(name, "gunicorn-sync:workers=4", 60) == name
    assert title_for(name, "gunicorn-sync:workers=4", 30) == "gunicorn-sync:workers=4"
    cut = title_for(name, "php-fpm-nginx:workers=3,nginx_workers=2", 21)
    assert len(cut) == 21 and "…" in cut
    assert cut.startswith("php-fpm") and cut.endswith("_workers=2")
    assert title_for(name, "x", 0) == name  # not laid out yet: the whole name
