"""A stack's `status` key (stacks.toml): a loopback URL of its own status page, checked
when the file is read; {status_port} known only where it is set; the shipped stacks that
turn a page on; the page's figures in one line, the telling ones first."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackrace.report.provenance import recipe
from stackrace.report.why import status_line
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.definition import ConfigError
from stackrace.stacks.placeholders import placeholders, render
from stackrace.stacks.variants import resolve

BLOCK = """
[stacks.app]
command = ["{python}", "app.py", "{port}", "--stats", "127.0.0.1:{status_port}"]
status = "STATUS"
"""


def _file(tmp_path: Path, status: str) -> Path:
    p = tmp_path / "stacks.toml"
    p.write_text(BLOCK.replace("STATUS", status))
    return p


def test_a_status_url_gives_the_block_its_own_port(tmp_path: Path) -> None:
    stacks = load_stacks(_file(tmp_path, "http://127.0.0.1:{status_port}/s?json"))
    app = resolve("app", stacks)
    values = placeholders(app, 8080, tmp_path, status_port=9191)
    assert render(app.spec.status or "", values) == "http://127.0.0.1:9191/s?json"
    # the recipe a run file keeps leaves the port to each start, as {port}
    assert recipe(app).command[-1] == "127.0.0.1:{status_port}"


@pytest.mark.parametrize(
    ("status", "said"),
    [
        ("http://10.0.0.9:{status_port}/s", "a loopback URL"),
        ("https://127.0.0.1:{status_port}/s", "a loopback URL"),
        ("http://127.0.0.1:8080/s", "a loopback URL"),
        ("http://{host}:{port}/io", "is a workload's"),
        ("http://{host}:{port}/hello?x", "is a workload's"),
        ("http://127.0.0.1:{status_port}/a b", "a loopback URL"),
        ("http://127.0.0.1:{status_port}/\x1b[2J", "a loopback URL"),
    ],
)
def test_a_bad_status_url_is_one_line_naming_the_key(
    tmp_path: Path, status: str, said: str
) -> None:
    with pytest.raises(ConfigError, match=r"stack 'app': key 'status': ") as got:
        load_stacks(_file(tmp_path, status.replace("\x1b", "\\u001b")))
    assert said in str(got.value) and "\n" not in str(got.value) and "\x1b" not in str(got.value)


def test_status_port_is_unknown_where_there_is_no_status(tmp_path: Path) -> None:
    p = tmp_path / "stacks.toml"
    p.write_text('[stacks.app]\ncommand = ["x", "{status_port}"]\n')
    with pytest.raises(ConfigError, match=r"unknown placeholder \{status_port\}"):
        load_stacks(p)
    p.write_text('[stacks.app]\ncommand = ["x"]\nparams = { status_port = "1" }\n')
    with pytest.raises(ConfigError, match="is a built-in placeholder"):
        load_stacks(p)


def test_the_shipped_stacks_that_show_a_status_page() -> None:
    stacks = load_stacks()
    on = {name for name, spec in stacks.items() if spec.status is not None}
    assert on >= {
        "php-fpm-nginx", "php-fpm-nginx-prepared", "php-cgi-nginx", "nginx-proxy",
        "nginx-tls", "nginx-uwsgi", "uwsgi", "uwsgi-http11",
    }  # fmt: skip
    for name in on:  # never the load's port: a port of the page's own, on loopback
        assert stacks[name].status.startswith("http://127.0.0.1:{status_port}"), name  # type: ignore[union-attr]


def test_status_line_puts_who_is_busy_and_the_queue_first() -> None:
    fpm = {
        "accepted conn": 90.0,
        "listen queue": 14.0,
        "idle processes": 0.0,
        "active processes": 2.0,
    }
    assert status_line("php-fpm status", fpm) == (
        "php-fpm status: active processes 2, idle processes 0, listen queue 14, accepted conn 90"
    )
    assert status_line("", {"zz": 1.5}) == "status page: zz 1.5"


def test_the_deploy_line_leaves_the_status_page_out() -> None:
    """uWSGI's stats server is stackrace's reading, not the configuration measured."""
    from stackrace.stacks.production import production_command

    line = production_command(resolve("uwsgi:workers=2", load_stacks())).command
    assert line is not None and "--processes 2" in line
    assert "stats" not in line and "STATUS_PORT" not in line, line


def test_your_app_under_uwsgi_shows_its_stats_page_too() -> None:
    """`--app` under uWSGI: the block's status page comes with the app's stack, and
    a server whose app template has no page gets none."""
    from stackrace.stacks.app_probe import app_environment
    from stackrace.stacks.app_spec import AppSpec
    from stackrace.stacks.userapp import app_stacks
    from tests.helpers import ROOT

    app = AppSpec("flask_app:app", ROOT / "examples", "/usr/bin/python3", "wsgi")
    made = app_stacks(load_stacks(), app, app_environment(app))
    uwsgi = made["uwsgi[app]"]
    assert uwsgi.status == "http://127.0.0.1:{status_port}"
    assert "--stats=127.0.0.1:{status_port}" in uwsgi.command
    assert made["gunicorn-sync[app]"].status is None
    stack = resolve("uwsgi[app]", {**load_stacks(), **made})
    # a run file's recipe keeps the page's port to each start, as it keeps {port}
    assert "--stats=127.0.0.1:{status_port}" in recipe(stack).command
