"""The database layer without a server: DSNs, the app environment, sums, counters, paths."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from stackrace.db import (
    ENV_DSN,
    ENV_HOST,
    ENV_NAME,
    ENV_PASSWORD,
    ENV_PORT,
    ENV_ROWS,
    ENV_SOCKET,
    ENV_USER,
    DbError,
    DbSettings,
    QueryCounters,
    check_query_count,
    db_env,
    parse_dsn,
    plausible_sum_range,
    settings_from_env,
    sum_is_plausible,
    work_between,
)
from stackrace.db.paths import InstancePaths, find_binary


def test_parse_dsn_full() -> None:
    s = parse_dsn("mysql://bench:p%40ss%3Aw@127.0.0.1:3307/world")
    assert s == DbSettings(
        host="127.0.0.1", port=3307, user="bench", password="p@ss:w", database="world"
    )


def test_parse_dsn_defaults_and_mariadb_scheme() -> None:
    s = parse_dsn("mariadb://root@localhost/app")
    assert (s.host, s.port, s.user, s.password, s.database) == (
        "localhost",
        3306,
        "root",
        "",
        "app",
    )


@pytest.mark.parametrize(
    ("dsn", "says"),
    [
        ("postgres://u:p@127.0.0.1/db", "scheme must be mysql://"),
        ("127.0.0.1:3306/db", "scheme must be mysql://"),
        ("mysql://u:p@127.0.0.1:99999/db", "bad database DSN"),
        ("mysql://u:p@127.0.0.1:port/db", "bad database DSN"),
        ("mysql://u:p@127.0.0.1:3306", "one database name"),
        ("mysql://u:p@127.0.0.1/a/b", "one database name"),
        ("mysql://127.0.0.1/db", "no user"),
        ("mysql://u:p@/db", "no host"),
        ("mysql://u:p@127.0.0.1/db?ssl=1", "not supported"),
    ],
)
def test_bad_dsn_is_a_clear_error(dsn: str, says: str) -> None:
    with pytest.raises(DbError, match=says) as err:
        parse_dsn(dsn)
    assert "\n" not in str(err.value)
    assert ":p@" not in str(err.value)  # the password is never echoed


def test_remote_host_needs_allow_remote() -> None:
    with pytest.raises(DbError, match="--allow-remote"):
        parse_dsn("mysql://u:p@10.9.8.7/db")
    assert parse_dsn("mysql://u:p@10.9.8.7/db", allow_remote=True).host == "10.9.8.7"


def test_db_env_round_trip() -> None:
    s = DbSettings(
        host="127.0.0.1", port=13306, socket="/tmp/x.sock", user="stackrace",
        password="a b'c", database="stackrace",
    )  # fmt: skip
    env = db_env(s, rows=1_000_000)
    assert set(env) == {
        ENV_HOST, ENV_PORT, ENV_SOCKET, ENV_USER, ENV_PASSWORD, ENV_NAME, ENV_DSN, ENV_ROWS
    }  # fmt: skip
    assert all(isinstance(v, str) for v in env.values())
    assert env[ENV_PORT] == "13306" and env[ENV_ROWS] == "1000000"
    assert settings_from_env(env) == s
    # the DSN variable parses back to the same TCP settings (it carries no socket)
    back = parse_dsn(env[ENV_DSN])
    assert (back.host, back.port, back.user, back.password) == (
        "127.0.0.1",
        13306,
        "stackrace",
        "a b'c",
    )


def test_settings_from_env_names_what_is_missing() -> None:
    with pytest.raises(DbError, match="STACKRACE_DB_HOST"):
        settings_from_env({})


def test_plausible_sum_range() -> None:
    assert plausible_sum_range(1) == (0.0, 10.0)  # 6σ covers everything for 10 values
    lo, hi = plausible_sum_range(20)
    assert lo < 100 < hi and lo > 50 and hi < 150
    rnd = random.Random(1)
    for n in (1, 5, 20, 100):
        for _ in range(500):
            total = sum(rnd.random() for _ in range(10 * n))
            assert sum_is_plausible(total, n)
    assert not sum_is_plausible(0.0, 100)
    assert not sum_is_plausible(float("nan"), 1)


def test_query_count_check() -> None:
    before = QueryCounters(com_select=100, questions=200)
    after = QueryCounters(com_select=150, questions=261)
    delta = work_between(before, after)
    assert delta == QueryCounters(com_select=50, questions=60)
    assert check_query_count(delta, requests=10, queries_per_request=5) is None
    assert "expected at least 60" in (check_query_count(delta, 12, 5) or "")
    assert "expected 40" in (check_query_count(delta, 8, 5, slack=2) or "")
    assert check_query_count(delta, 8, 5, slack=10) is None


def test_missing_binary_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DbError, match=r"mariadbd not found in .*apt-get install mariadb-server"):
        find_binary("mariadbd", str(tmp_path))


def test_long_instance_dir_gets_a_short_socket(tmp_path: Path) -> None:
    long_root = tmp_path / ("d" * 120)
    sock = InstancePaths(long_root).socket
    assert len(str(sock)) < 100
    assert InstancePaths(long_root).socket == sock  # stable
    # the server's files are in root/server unless the instance records another dir
    assert InstancePaths(tmp_path).socket == tmp_path / "server" / "mariadbd.sock"
    assert InstancePaths(tmp_path, server=tmp_path).socket == tmp_path / "mariadbd.sock"
    assert not InstancePaths(long_root).socket_fits(long_root / "server")
