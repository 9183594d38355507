"""Hostile values that never reach a process: variant values checked by their kind, tunable
ceilings, slugs, and which run directories may be pruned (the rest of the hostile-input
promises, through the real CLI, are tests/hardening/test_hostile_input.py)."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from stackrace.base import slug
from stackrace.stacks import ceilings
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.definition import ConfigError
from stackrace.stacks.run_roots import new_run_root
from stackrace.stacks.variants import resolve

# every hostile variant value the issue names, and a few more of the same family
HOSTILE_VALUES = [
    "x/y",
    "x/../../../victim",
    "../../victim",
    "/tmp/victim",
    "a b",
    "a;b",
    "a\nb",
    "{port}",
    "$(touch x)",
    "'q'",
]


def test_old_runs_are_pruned_only_when_stackrace_made_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$STACKRACE_RUNS_DIR may point at a directory holding other things: pruning the
    oldest run directories must never take them (it took any directory before)."""
    monkeypatch.setenv("STACKRACE_RUNS_DIR", str(tmp_path))
    foreign = [tmp_path / f"project-{i}" for i in range(5)]
    for d in foreign:
        d.mkdir()
        (d / "file").write_text("mine")
    lookalike = tmp_path / "20200101-000000-abcdefgh"  # our name, but no lock file
    lookalike.mkdir()
    outside = tmp_path.parent / f"outside-{uuid.uuid4().hex[:8]}"
    outside.mkdir()
    (outside / ".lock").write_text("")
    (tmp_path / "20200101-000001-linklink").symlink_to(outside, target_is_directory=True)
    made = []
    for _ in range(4):
        root, fd = new_run_root(keep=2)
        os.close(fd)
        made.append(root)
        time.sleep(0.01)
    assert all((d / "file").exists() for d in foreign)
    assert lookalike.is_dir() and (outside / ".lock").exists()
    assert [d.exists() for d in made] == [False, False, True, True]


def test_variant_values_are_checked_by_their_kind() -> None:
    stacks = load_stacks()
    ok = [
        "gunicorn-sync:workers=4,threads=2",
        "php-fpm-nginx:opcache=off",
        "nginx-proxy:backend=gunicorn-sync:workers=4",
        "django-fcgi-prefork:workers=50,min_spare=2,max_spare=5",
        "php-fpm-nginx:php_fpm=/usr/sbin/php-fpm8.2",
    ]
    for ref in ok:
        if "php_fpm" in ref and not Path("/usr/sbin/php-fpm8.2").exists():
            continue
        resolve(ref, stacks)
    bad = {
        "gunicorn-sync:workers=0": "whole number >= 1",
        "gunicorn-sync:workers=٣": "whole number >= 1",  # a digit, but not ASCII
        "gunicorn-sync:workers=99999999999999999999": "ceiling",
        "uvicorn:db_pool=1e9": "whole number",
        "gunicorn-gevent:worker_connections=100001": "at most 100000",
        "php-fpm-nginx:opcache=maybe": "not one of on, off",
        "php-fpm-nginx:php_fpm=/nonexistent/php-fpm": "not an executable file",
        "php-fpm-nginx:php_fpm=/usr/sbin/../sbin/php-fpm8.2": "normalised",
        "php-fpm-nginx:php_fpm=php-fpm8.2": "absolute",
        "nginx-proxy:backend=tornado;evil": "not a plain value",
        "django-fcgi-prefork:max_spare=a/b": "not a plain value",
    }
    for ref, why in bad.items():
        with pytest.raises(ConfigError, match=why):
            resolve(ref, stacks)


def test_the_ceilings_can_be_lifted_by_an_explicit_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    stacks = load_stacks()
    ceiling = ceilings.tunable_ceilings().workers
    with pytest.raises(ConfigError, match="--no-tunable-limits"):
        resolve(f"gunicorn-sync:workers={ceiling + 1}", stacks)
    monkeypatch.setattr(ceilings, "_limits_lifted", True)
    assert resolve(f"gunicorn-sync:workers={ceiling + 1}", stacks).workers == ceiling + 1
    # the general bound of a count still holds
    with pytest.raises(ConfigError, match="at most"):
        resolve("gunicorn-sync:workers=100001", stacks)


def test_slug_keeps_only_safe_characters_and_tells_names_apart() -> None:
    seen = set()
    for text in [*HOSTILE_VALUES, "a:b=1", "a_b=1", "a_b_1", "", "ünïcode", "x" * 300]:
        s = slug.slug(text)
        assert slug.is_safe(s) and len(s) <= 49, s
        seen.add(s)
    assert len(seen) == len(HOSTILE_VALUES) + 6
