"""stacks.toml validation: every error names the file, the stack and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.definition import ConfigError
from stackrace.stacks.placeholders import render
from stackrace.stacks.variants import resolve

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


FRONT = """
[stacks.app]
title = "App"
language = "python"
family = "sync"
command = ["{python}", "app.py", "{port}"]
workloads = ["dbjson"]
[stacks.app.params]
mode = "fast"
[stacks.app.choices]
mode = ["fast", "slow"]

[stacks.plain]
title = "Plain"
language = "python"
family = "sync"
command = ["{python}", "plain.py", "{port}"]
db = false

[stacks.front]
title = "Front"
language = "other"
family = "other"
command = ["nginx", "{upstream_port}"]
upstream = "{backend}"
[stacks.front.params]
backend = "app"
"""


def test_choices_limit_a_param_s_values(tmp_path):
    stacks = load_stacks(write(tmp_path, FRONT))
    assert resolve("app:mode=slow", stacks).params["mode"] == "slow"
    with pytest.raises(ConfigError, match="key 'mode': 'medium' is not one of fast, slow"):
        resolve("app:mode=medium", stacks)
    bad_default = FRONT.replace('mode = "fast"', 'mode = "medium"')
    with pytest.raises(ConfigError, match=r"stack 'app': key 'choices\.mode': the default"):
        load_stacks(write(tmp_path, bad_default))
    unknown = FRONT.replace('mode = ["fast", "slow"]', 'speed = ["fast"]')
    with pytest.raises(ConfigError, match=r"key 'choices\.speed': not a key of params"):
        load_stacks(write(tmp_path, unknown))


def test_workloads_served_per_stack(tmp_path):
    stacks = load_stacks(write(tmp_path, FRONT))
    app, plain = resolve("app", stacks), resolve("plain", stacks)
    assert app.served(["hello", "json", "io", "db", "dbjson"]) == [
        "hello", "json", "io", "db", "dbjson",
    ]  # fmt: skip
    assert plain.served(["hello", "db", "dbjson"]) == ["hello"]
    with pytest.raises(ConfigError, match="stack 'app': key 'workloads': 'dbxml' is not an"):
        load_stacks(
            write(tmp_path, FRONT.replace('workloads = ["dbjson"]', 'workloads = ["dbxml"]'))
        )
    no_db = FRONT.replace('workloads = ["dbjson"]', 'workloads = ["dbjson"]\ndb = false')
    with pytest.raises(ConfigError, match="reads the database, but the stack says db = false"):
        load_stacks(write(tmp_path, no_db))


def test_upstream_is_resolved_from_a_param_and_serves_what_its_backend_serves(tmp_path):
    stacks = load_stacks(write(tmp_path, FRONT))
    front = resolve("front", stacks)
    assert front.upstream is not None and front.upstream.name == "app"
    assert front.serves("dbjson") and front.title == "Front → App"
    other = resolve("front:backend=plain", stacks)
    assert other.upstream is not None and other.upstream.name == "plain"
    assert not other.serves("db")
    # a variant's value may itself be a variant, with one override
    nested = resolve("front:backend=app:mode=slow", stacks)
    assert nested.upstream is not None and nested.upstream.params["mode"] == "slow"
    assert nested.name == "front:backend=app:mode=slow"
    with pytest.raises(ConfigError, match=r"key 'upstream': .*no stack 'nope'"):
        resolve("front:backend=nope", stacks)
    with pytest.raises(ConfigError, match="'front' is itself in front of a stack"):
        resolve("front:backend=front", stacks)


def test_upstream_port_placeholder_only_where_there_is_an_upstream(tmp_path):
    from stackrace.stacks.placeholders import placeholders

    stacks = load_stacks(write(tmp_path, FRONT))
    front = resolve("front", stacks)
    values = placeholders(front, 8080, tmp_path, upstream_port=9090)
    assert render("{upstream_port}", values) == "9090"
    with pytest.raises(ConfigError, match="unknown placeholder"):
        render("{upstream_port}", placeholders(resolve("app", stacks), 8080, tmp_path))


def test_facts_path_must_be_a_path(tmp_path):
    bad = FRONT.replace('workloads = ["dbjson"]', 'workloads = ["dbjson"]\nfacts = "facts"')
    with pytest.raises(ConfigError, match="stack 'app': key 'facts': must be a path"):
        load_stacks(write(tmp_path, bad))


def test_the_real_stacks_file_is_valid_and_its_choices_resolve():
    stacks = load_stacks()
    for name, spec in stacks.items():
        for key, values in spec.choices.items():
            for value in values:
                resolve(f"{name}:{key}={value}", stacks)
    assert resolve("nginx-proxy", stacks).upstream is not None
