"""A pane's widget id is made for Textual from the member's id, whatever it holds."""

from stackrace.tui.pane import pane_widget_id


def test_plain_names_keep_their_ids_and_variants_get_valid_distinct_ones():
    assert pane_widget_id("uvicorn") == "pane-uvicorn"
    assert pane_widget_id("url1") == "pane-url1"
    a = pane_widget_id("nginx-proxy:backend=gunicorn-sync")
    b = pane_widget_id("nginx-proxy:backend=gunicorn-sync:workers=2")
    c = pane_widget_id("nginx-proxy:backend=gunicorn=sync")
    for wid in (a, b, c):
        assert wid.startswith("pane-nginx-proxy-backend-gunicorn")
        assert all(ch.isalnum() or ch in "-_" for ch in wid)
    assert len({a, b, c}) == 3
