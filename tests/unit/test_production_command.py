"""The production command line of a stack's configuration (stacks/production.py), from
the shipped stacks.toml: the server's own program and options, the configuration,
the app module, a placeholder address, and no path of stackrace's."""

from __future__ import annotations

from stackrace.stacks.catalogue import load_stacks, resolve
from stackrace.stacks.production import production_command
from tests.helpers import ROOT


def command(name: str) -> str | None:
    return production_command(resolve(name, load_stacks(None))).command


def test_gunicorn_gthread_with_its_workers_and_threads():
    assert command("gunicorn-gthread:workers=3,threads=8") == (
        "gunicorn --bind HOST:PORT --workers 3 --worker-class gthread --threads 8 "
        "--keep-alive 65 --worker-connections 10000 --no-control-socket wsgi_app:app"
    )


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
