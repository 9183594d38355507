"""A database pool smaller than the threads: two PyMySQL connections shared by the
eight threads of a gthread worker through a small pool, each query holding its
connection 10 ms (SELECT SLEEP), so six threads wait for a connection. Known answer:
db pool, in query_orders. The database is stackrace's private MariaDB (its settings
in the environment, as every app gets them)."""

import os
import queue

import pymysql

POOL_SIZE = int(os.environ.get("CAUSE_POOL_SIZE", "2"))


class ConnectionPool:
    def __init__(self, size: int) -> None:
        self.size = size
        self.idle: queue.Queue = queue.Queue()
        for _ in range(size):
            self.idle.put(None)  # connected on first use

    def get(self):
        conn = self.idle.get()
        if conn is None:
            env = os.environ
            conn = pymysql.connect(
                host=env["STACKRACE_DB_HOST"],
                port=int(env["STACKRACE_DB_PORT"]),
                user=env["STACKRACE_DB_USER"],
                password=env["STACKRACE_DB_PASSWORD"],
                database=env["STACKRACE_DB_NAME"],
                autocommit=True,
            )
        return conn

    def put(self, conn) -> None:
        self.idle.put(conn)


POOL = ConnectionPool(POOL_SIZE)


def query_orders() -> bytes:
    conn = POOL.get()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT SLEEP(0.01)")
            cur.fetchall()
    finally:
        POOL.put(conn)
    return b"orders\n"


def app(environ, start_response):
    body = query_orders()
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]
