"""Provisioning the private instance before it ever listens: accounts and passwords.

`mariadb-install-db` leaves passwordless root accounts (root@localhost, @127.0.0.1, @::1,
@hostname) and anonymous ones. The first build started the server on TCP and only then
set passwords, and a local user who polled the port in between got in as root. Now the
accounts are set by `mariadbd --bootstrap` on the fresh data directory: no TCP port, no
socket, the SQL on its stdin (so no file holds the password hashes), and any failing
statement makes bootstrap exit non-zero, so a half-provisioned instance never starts.
The server's first real start already has only these accounts:

- root@localhost (the unix socket only) with its own random password;
- the app user @localhost and @127.0.0.1, random password, ALL on its database only
  (no FILE privilege, no grant option);
- mariadb.sys@localhost, which MariaDB needs (it owns the mysql.user view; no login).

Every other account — and every privilege row that names one — is deleted, whatever
made it. `foreign_accounts` finds any that appeared later (say, made with the root
password), and the manager drops them at each `up`.
"""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from stackrace.db import admin
from stackrace.db.errors import DbError

if TYPE_CHECKING:  # a hint: the driver is imported where it is used (admin.connect)
    import pymysql
from stackrace.db.server_user import ServerUser

# Accounts MariaDB itself needs, kept as they are: the socket root (whose password is
# set here), mariadb.sys (definer of the mysql.user view), PUBLIC (a role from 11.x on).
SYSTEM_ACCOUNTS = (("root", "localhost"), ("mariadb.sys", "localhost"), ("PUBLIC", ""))
APP_HOSTS = ("localhost", "127.0.0.1")  # localhost = the unix socket


def native_password_hash(password: str) -> str:
    """mysql_native_password's stored form, '*' + SHA1(SHA1(password)) in upper-case hex,
    for `IDENTIFIED BY PASSWORD`: the SQL never carries the password itself."""
    return "*" + hashlib.sha1(hashlib.sha1(password.encode()).digest()).hexdigest().upper()


def _sql_str(text: str) -> str:
    """A quoted SQL string of our own names and hashes (anything else is refused, so no
    escaping is needed in SQL that is run without a client library)."""
    if not all(c.isalnum() or c in "._-*" for c in text):
        raise ValueError(f"unexpected character in {text!r}")
    return f"'{text}'"


def _ident(name: str) -> str:
    if not name or not all(c.isalnum() or c == "_" for c in name):
        raise ValueError(f"unexpected database name {name!r}")
    return f"`{name}`"


def _pairs(accounts: tuple[tuple[str, str], ...]) -> str:
    return ", ".join(f"({_sql_str(u)}, {_sql_str(h)})" for u, h in accounts)


def expected_accounts(app_user: str) -> set[tuple[str, str]]:
    return {*SYSTEM_ACCOUNTS, *((app_user, h) for h in APP_HOSTS)}


def bootstrap_sql(database: str, app_user: str, app_password: str, admin_password: str) -> str:
    """The statements bootstrap runs on a freshly installed data directory."""
    db, user = _ident(database), _sql_str(app_user)
    app_hash, root_hash = native_password_hash(app_password), native_password_hash(admin_password)
    kept = _pairs(SYSTEM_ACCOUNTS)
    lines = [
        f"CREATE DATABASE IF NOT EXISTS {db};",
        # every account but MariaDB's own, and every privilege row naming another account
        f"DELETE FROM mysql.global_priv WHERE (User, Host) NOT IN ({kept});",
        "DELETE FROM mysql.db WHERE (User, Host) NOT IN (('mariadb.sys', 'localhost'));",
        "DELETE FROM mysql.tables_priv WHERE (User, Host) NOT IN (('mariadb.sys', 'localhost'));",
        "DELETE FROM mysql.columns_priv;",
        "DELETE FROM mysql.procs_priv;",
        "DELETE FROM mysql.proxies_priv WHERE (User, Host) NOT IN (('root', 'localhost'));",
        "DELETE FROM mysql.roles_mapping;",
        # bootstrap runs without grant tables; this loads them so CREATE USER works
        "FLUSH PRIVILEGES;",
    ]
    for host in APP_HOSTS:
        lines += [
            f"CREATE USER {user}@{_sql_str(host)} IDENTIFIED BY PASSWORD {_sql_str(app_hash)};",
            f"GRANT ALL PRIVILEGES ON {db}.* TO {user}@{_sql_str(host)};",
        ]
    lines.append(f"ALTER USER 'root'@'localhost' IDENTIFIED BY PASSWORD {_sql_str(root_hash)};")
    return "\n".join(lines) + "\n"


def bootstrap(
    mariadbd: Path,
    datadir: Path,
    user: ServerUser,
    sql: str,
    log: Path,
    timeout: float = 120.0,
    tmp_dir: Path | None = None,
) -> None:
    """Run `sql` in `mariadbd --bootstrap` (no network, no socket); DbError if it fails."""
    cmd = [
        str(mariadbd),
        "--no-defaults",  # must come first: ignore /etc/mysql and ~/.my.cnf
        "--bootstrap",
        f"--datadir={datadir}",
        *([f"--tmpdir={tmp_dir}"] if tmp_dir is not None else []),
        *user.user_arg,
        "--skip-networking",
        "--log-warnings=0",
    ]
    with open(log, "ab") as out:
        out.write(b"\n$ " + " ".join(cmd).encode() + b" < (provisioning SQL)\n")
        out.flush()
        try:
            rc = subprocess.run(
                cmd,
                input=sql.encode(),
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                check=False,
            ).returncode
        except subprocess.TimeoutExpired:
            rc = -1
    if rc != 0:
        raise DbError(
            f"provisioning the private MariaDB failed (mariadbd --bootstrap exit {rc}); "
            "it was never started",
            log_tail=_tail(log),
        )


def foreign_accounts(conn: pymysql.connections.Connection, app_user: str) -> list[tuple[str, str]]:
    """Accounts on a running server that provisioning did not make."""
    rows = admin.query(conn, "SELECT User, Host FROM mysql.global_priv")
    expected = expected_accounts(app_user)
    return sorted((str(u), str(h)) for u, h in rows if (str(u), str(h)) not in expected)


def drop_accounts(conn: pymysql.connections.Connection, accounts: list[tuple[str, str]]) -> None:
    for user, host in accounts:
        admin.query(conn, "DROP USER IF EXISTS %s@%s", (user, host))


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_bytes().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-lines:])
