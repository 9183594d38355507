"""Safe names from user text (stackrace.base.slug) and what a stack lets a variant change
(stacks.tunables)."""

from __future__ import annotations

import re

from stackrace.base.slug import MAX_LEN, slug
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.tunables import tunables

VALID = re.compile(r"^[a-z][a-z0-9_-]*$")  # a Textual id, a CSS selector, a file name


def test_a_slug_is_a_valid_id_and_file_name_and_unique_per_text():
    names = [
        "gunicorn-sync",
        "gunicorn-sync:workers=2",
        "gunicorn-sync,workers-2",
        "nginx-proxy:backend=gunicorn-sync:workers=4",
        "x:app=../../etc/passwd",
        "..",
        "/",
        "",
        "9lives",
        "ÜNICODE stack",
        "a" * 200,
        "ghost-bench 2024-05-01-uvicorn",
    ]
    slugs = [slug(n) for n in names]
    for name, s in zip(names, slugs, strict=True):
        assert VALID.match(s), (name, s)
        assert len(s) <= MAX_LEN and "/" not in s and s not in (".", "..")
    assert len(set(slugs)) == len(names)  # a:b=1 and a,b-1 never share one
    # a name that is already safe is its own slug: ids stay readable and stable
    assert slug("gunicorn-sync") == "gunicorn-sync" and slug("url1") == "url1"
    assert slug("gunicorn-sync:workers=2").startswith("gunicorn-sync-workers-2-")


def test_tunables_are_the_settings_a_stack_uses():
    stacks = load_stacks()
    keys = {name: [t.key for t in tunables(spec)] for name, spec in stacks.items()}
    assert keys["gunicorn-sync"] == ["workers"]  # no {threads} anywhere in it
    assert keys["waitress"][0] == "threads" and "workers" not in keys["waitress"]
    assert keys["bjoern"] == []  # one process, one thread, no params
    # workers used only in a file it renders (php-fpm's pool) count too
    php = {t.key: t for t in tunables(stacks["php-fpm-nginx"])}
    assert php["workers"].numeric and php["opcache"].choices == ("on", "off")
    assert php["opcache"].default == "on"
