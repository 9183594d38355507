"""Django in one file, under gunicorn's sync worker (and under flup's FastCGI servers,
gevent.pywsgi and uWSGI for experiment 004). /io blocks the worker with time.sleep.

Settings are configured in code before the WSGI handler is built; DEBUG is off, so
ALLOWED_HOSTS must name the loopback host or every request is a 400.
"""

from __future__ import annotations

import time

from django.conf import settings

settings.configure(
    DEBUG=False,
    ROOT_URLCONF=__name__,
    ALLOWED_HOSTS=["127.0.0.1", "localhost"],
    MIDDLEWARE=[],  # a bare app: no sessions, CSRF or security middleware on this path
    INSTALLED_APPS=[],
    SECRET_KEY="stackrace-benchmark-only",  # no sessions or signing in this app
    USE_TZ=True,
)

from contract import HELLO, JSON, OK, TEXT, db_queries, io_ms, json_body  # noqa: E402
from db_sync import db_response, row_response  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from django.http import HttpRequest, HttpResponse  # noqa: E402
from django.urls import path  # noqa: E402


def hello(request: HttpRequest) -> HttpResponse:
    return HttpResponse(HELLO, content_type=TEXT)


def json_(request: HttpRequest) -> HttpResponse:
    return HttpResponse(json_body(), content_type=JSON)


def io(request: HttpRequest) -> HttpResponse:
    time.sleep(io_ms(request.META.get("QUERY_STRING")) / 1000)
    return HttpResponse(OK, content_type=TEXT)


def db(request: HttpRequest) -> HttpResponse:
    # PyMySQL directly, not Django's ORM: no DATABASES are configured, so the framework's
    # cost is routing and responses, as on the other endpoints
    status, body = db_response(db_queries(request.META.get("QUERY_STRING")))
    return HttpResponse(body, status=status, content_type=TEXT)


def dbjson(request: HttpRequest) -> HttpResponse:
    status, body = row_response()
    return HttpResponse(body, status=status, content_type=JSON if status == 200 else TEXT)


urlpatterns = [
    path("hello", hello),
    path("json", json_),
    path("io", io),
    path("db", db),
    path("dbjson", dbjson),
]

app = get_wsgi_application()
