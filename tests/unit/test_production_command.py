"""The production command line of a stack's configuration (stacks/production.py), from
the shipped stacks.toml: the server's own program and options, the configuration,
the app module, a placeholder address, and no path of stackrace's."""

from __future__ import annotations

from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.production import production_command
from stackrace.stacks.variants import resolve
from tests.helpers import ROOT


def command(name: str) -> str | None:
    return production_command(resolve(name, load_stacks(None))).command


def test_gunicorn_gthread_with_its_workers_and_threads():
    # --no-control-socket is stackrace's (several gunicorns on one machine; gunicorn
    # before 27 refuses it): not in a deploy line
    assert command("gunicorn-gthread:workers=3,threads=8") == (
        "gunicorn --bind HOST:PORT --workers 3 --worker-class gthread --threads 8 "
        "--keep-alive 65 --worker-connections 10000 wsgi_app:app"
    )


def test_only_the_flags_that_differ_from_the_servers_defaults():
    """Issue 36: gunicorn's defaults (1 worker, 1 thread) are left out of the line."""
    assert command("gunicorn-gthread:workers=1,threads=32") == (
        "gunicorn --bind HOST:PORT --worker-class gthread --threads 32 --keep-alive 65 "
        "--worker-connections 10000 wsgi_app:app"
    )
    assert command("gunicorn-sync") == "gunicorn --bind HOST:PORT wsgi_app:app"


def test_the_note_names_the_app_and_the_servers_version_it_needs():
    stacks = load_stacks(None)
    prod = production_command(
        resolve("gunicorn-gthread:workers=2", stacks), measured="gunicorn (version 27.0.1)"
    )
    assert prod.app.startswith("stackrace's own test app (wsgi_app:app)")
    assert prod.requires == "needs gunicorn>=27 (measured with gunicorn (version 27.0.1))"
    yours = production_command(resolve("gunicorn-gthread", stacks), app_target="shop.wsgi:app")
    assert yours.app == "your app (shop.wsgi:app)"


def test_the_apps_directory_is_where_it_runs():
    # uwsgi's --pythonpath is the stack's directory (stackrace's apps/python): `.` here
    line = command("uwsgi:workers=2,threads=4")
    assert line is not None
    assert "--processes 2 --threads 4 --pythonpath . --module wsgi_app:app" in line
    assert str(ROOT) not in line and "{" not in line


def test_params_and_placeholder_address():
    line = command("uvicorn:workers=5")
    assert line is not None and line.startswith("uvicorn --host HOST --port PORT --workers 5")
    assert command("waitress:threads=16") == (
        "waitress-serve --listen=HOST:PORT --threads=16 --connection-limit=10000 wsgi_app:app"
    )


def test_a_stack_run_through_stackrace_files_has_none():
    for name in ("bjoern", "nginx-proxy", "php-fpm-nginx"):
        prod = production_command(resolve(name, load_stacks(None)))
        assert prod.command is None and "stackrace's own" in prod.note, name
