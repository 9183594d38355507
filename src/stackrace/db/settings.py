"""How to reach the database: one settings object, a DSN parser, and the app environment.

Every app gets the same environment variables (see `db_env`), whatever language it is
written in; docs/db.md lists them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import quote, unquote, urlsplit

import msgspec

from stackrace.base.netguard import RemoteTargetError, require_loopback
from stackrace.db.errors import DbError

ENV_HOST = "STACKRACE_DB_HOST"
ENV_PORT = "STACKRACE_DB_PORT"
ENV_SOCKET = "STACKRACE_DB_SOCKET"
ENV_USER = "STACKRACE_DB_USER"
ENV_PASSWORD = "STACKRACE_DB_PASSWORD"
ENV_NAME = "STACKRACE_DB_NAME"
ENV_DSN = "STACKRACE_DB_DSN"
ENV_ROWS = "STACKRACE_DB_ROWS"

DSN_SCHEMES = ("mysql", "mariadb")


class DbSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Connection settings for the database the apps query.

    `socket` is empty when the server is reached over TCP only (an existing server).
    `host` is an IP address on purpose: several client libraries (PHP, libmysqlclient)
    take the name "localhost" to mean "the default unix socket", not our port.
    """

    host: str
    port: int
    user: str
    password: str
    database: str
    socket: str = ""

    def dsn(self) -> str:
        """mysql://user:password@host:port/database, with the parts URL-quoted."""
        return (
            f"mysql://{quote(self.user, safe='')}:{quote(self.password, safe='')}"
            f"@{_host_for_url(self.host)}:{self.port}/{quote(self.database, safe='')}"
        )

    def redacted(self) -> str:
        """The DSN with the password hidden, for printing."""
        return f"mysql://{self.user}:***@{_host_for_url(self.host)}:{self.port}/{self.database}"


def _host_for_url(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def db_env(settings: DbSettings, rows: int | None = None) -> dict[str, str]:
    """The environment variables every app reads its database settings from.

    The launcher merges this into each stack's environment. `rows` (how many rows
    table `test` holds) lets an app pick a valid random start id.
    """
    env = {
        ENV_HOST: settings.host,
        ENV_PORT: str(settings.port),
        ENV_SOCKET: settings.socket,
        ENV_USER: settings.user,
        ENV_PASSWORD: settings.password,
        ENV_NAME: settings.database,
        ENV_DSN: settings.dsn(),
    }
    if rows is not None:
        env[ENV_ROWS] = str(rows)
    return env


def settings_from_env(environ: Mapping[str, str] | None = None) -> DbSettings:
    """The inverse of `db_env`: read the settings back from an environment."""
    environ = os.environ if environ is None else environ
    missing = [k for k in (ENV_HOST, ENV_PORT, ENV_USER, ENV_NAME) if not environ.get(k)]
    if missing:
        raise DbError(f"database settings missing from the environment: {', '.join(missing)}")
    try:
        port = int(environ[ENV_PORT])
    except ValueError:
        raise DbError(f"{ENV_PORT}={environ[ENV_PORT]!r} is not a port number") from None
    return DbSettings(
        host=environ[ENV_HOST],
        port=port,
        socket=environ.get(ENV_SOCKET, ""),
        user=environ[ENV_USER],
        password=environ.get(ENV_PASSWORD, ""),
        database=environ[ENV_NAME],
    )


def parse_dsn(dsn: str, allow_remote: bool = False) -> DbSettings:
    """Parse mysql://user:pass@host:port/db into settings; refuse a remote host unless allowed.

    The port defaults to 3306. Raises DbError naming what is wrong, never echoing the password.
    """
    shown = _redact(dsn)
    try:
        parts = urlsplit(dsn)
        port = parts.port
    except ValueError as exc:
        raise DbError(f"bad database DSN {shown!r}: {exc}") from None
    if parts.scheme not in DSN_SCHEMES:
        raise DbError(
            f"bad database DSN {shown!r}: scheme must be mysql:// or mariadb:// "
            "(mysql://user:password@host:port/database)"
        )
    if not parts.hostname:
        raise DbError(f"bad database DSN {shown!r}: no host")
    if not parts.username:
        raise DbError(f"bad database DSN {shown!r}: no user (mysql://user:password@host/db)")
    database = unquote(parts.path.lstrip("/"))
    if not database or "/" in database:
        raise DbError(f"bad database DSN {shown!r}: give one database name after the host")
    if parts.query or parts.fragment:
        raise DbError(f"bad database DSN {shown!r}: options after '?' or '#' are not supported")
    host = parts.hostname
    try:
        require_loopback(host, allow_remote, what="database host")
    except RemoteTargetError as exc:
        raise DbError(str(exc)) from None
    return DbSettings(
        host=host,
        port=port or 3306,
        user=unquote(parts.username),
        password=unquote(parts.password or ""),
        database=database,
    )


def _redact(dsn: str) -> str:
    """The DSN with any password replaced, so error messages never print it."""
    scheme, sep, rest = dsn.partition("://")
    if not sep or "@" not in rest:
        return dsn
    creds, at, tail = rest.rpartition("@")
    user, colon, _ = creds.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}{at}{tail}"
