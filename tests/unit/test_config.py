"""stacks.toml validation: every error names the file, the stack and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackrace.config import ConfigError, load_stacks, render, resolve

GOOD = """
[stacks.app]
title = "App"
language = "python"
family = "sync"
command = ["{python}", "app.py", "{port}"]
workers = 2
[stacks.app.params]
worker_class = "sync"
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "stacks.toml"
    p.write_text(text)
    return p


def test_good_file_and_variants(tmp_path):
    stacks = load_stacks(write(tmp_path, GOOD))
    s = resolve("app", stacks)
    assert (s.name, s.workers, s.threads) == ("app", 2, 1)
    v = resolve("app:workers=4,threads=8,worker_class=gthread", stacks)
    assert (v.workers, v.threads, v.params["worker_class"]) == (4, 8, "gthread")
    assert v.name == "app:workers=4,threads=8,worker_class=gthread"
    assert "workers=4" in v.title


@pytest.mark.parametrize(
    "text,expected",
    [
        (
            GOOD.replace('title = "App"', 'title = "App"\ncolour = "red"'),
            "stack 'app': key 'colour'",
        ),
        (
            GOOD.replace('command = ["{python}", "app.py", "{port}"]\n', ""),
            "stack 'app': key 'command'",
        ),
        (GOOD.replace("workers = 2", 'workers = "two"'), "stack 'app': key 'workers'"),
        (GOOD.replace('family = "sync"', 'family = "quantum"'), "stack 'app': key 'family'"),
        (
            GOOD.replace('command = ["{python}", "app.py", "{port}"]', "command = []"),
            "stack 'app': key 'command': must not be empty",
        ),
        (GOOD + "[stacks.app.needs]\npipp = ['x']\n", "stack 'app': key 'needs.pipp'"),
    ],
)
def test_errors_name_file_stack_and_key(tmp_path, text, expected):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as exc:
        load_stacks(path)
    message = str(exc.value)
    assert "stacks.toml" in message and expected in message, message
    assert "\n" not in message


def test_bad_toml_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_stacks(write(tmp_path, "[stacks.app\n"))
    with pytest.raises(ConfigError, match="no such file"):
        load_stacks(tmp_path / "nope.toml")


def test_bad_variants(tmp_path):
    stacks = load_stacks(write(tmp_path, GOOD))
    with pytest.raises(ConfigError, match="no stack 'ap'"):
        resolve("ap", stacks)
    with pytest.raises(ConfigError, match="key 'workers': must be a whole number"):
        resolve("app:workers=0", stacks)
    with pytest.raises(ConfigError, match="key 'colour': not tunable"):
        resolve("app:colour=red", stacks)
    with pytest.raises(ConfigError, match="is not KEY=VALUE"):
        resolve("app:workers", stacks)


def test_render_keeps_nginx_braces():
    conf = "server { listen {host}:{port}; location / { return 200; } }"
    assert render(conf, {"host": "127.0.0.1", "port": 8080}) == (
        "server { listen 127.0.0.1:8080; location / { return 200; } }"
    )
    with pytest.raises(ConfigError, match="unknown placeholder"):
        render("{nope}", {})
