"""The pieces of "Your app" that need no server: statuses, requests, the mix's order,
and every user input checked before anything starts."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from stackrace.base.slug import is_safe, slug
from stackrace.engine.mix import sequence
from stackrace.settings import statuses
from stackrace.settings.scenario import ScenarioError, kinds_from, load_scenario, parse_path_item
from stackrace.stacks.app_probe import app_environment
from stackrace.stacks.app_spec import AppError, AppSpec, choose_python, parse_env, parse_target
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.userapp import app_stacks, cmd_stack
from stackrace.stacks.variants import resolve
from tests.helpers import ROOT


def test_statuses() -> None:
    assert statuses.parse("200") == {200}
    assert statuses.parse("2xx,404") == set(range(200, 300)) | {404}
    assert statuses.parse("200-204") == set(range(200, 205))
    assert statuses.engine_list(None) is None and statuses.engine_list("100-399") is None
    for bad in ("", "20", "6xx", "299-200", "2xx;rm", "200,,"):
        with pytest.raises(statuses.StatusError):
            statuses.parse(bad)


def test_the_mix_is_exact_and_spread() -> None:
    seq = sequence([3, 1])
    assert Counter(seq) == {0: 3, 1: 1} and seq != [0, 0, 0, 1]
    assert Counter(sequence([6, 2, 2])) == {0: 3, 1: 1, 2: 1}


def test_paths_and_scenarios_are_checked(tmp_path: Path) -> None:
    assert parse_path_item("/a:3") == ("/a", 3)
    assert parse_path_item("/time:x") == ("/time:x", 1)
    for bad in ("a", "/a b", "/a\r\nX: 1", "/a:0", "/a:5000"):
        with pytest.raises(ScenarioError):
            parse_path_item(bad)
    with pytest.raises(ScenarioError, match="HEAD"):
        kinds_from(["/"], method="HEAD")
    with pytest.raises(ScenarioError, match="header"):
        kinds_from(["/"], headers=["X-A: 1\r\nInjected: 2"])
    f = tmp_path / "s.toml"
    f.write_text(
        '[[requests]]\npath = "/a"\nweight = 2\nexpect = "404"\n[[requests]]\npath = "/b"\n'
    )
    kinds = load_scenario(str(f))
    assert [k.target for k in kinds] == ["/a", "/b"] and kinds[0].expect == "404"
    f.write_text('[[requests]]\npath = "/a"\nshell = "rm -rf /"\n')
    with pytest.raises(ScenarioError, match=r"s\.toml"):
        load_scenario(str(f))
    with pytest.raises(ScenarioError, match="no such file"):
        load_scenario(str(tmp_path / "none.toml"))


def test_app_inputs_are_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert parse_target("main:app") == ("main:app", tmp_path)
    assert parse_target(str(ROOT / "examples" / "flask_app:app")) == (
        "flask_app:app",
        ROOT / "examples",
    )
    for bad in ("main", "main:", ":app", "main:app;rm", "x/y:app", "main:a b", "m\n:app"):
        with pytest.raises(AppError):
            parse_target(bad)
    with pytest.raises(AppError, match="not a directory"):
        parse_target("main:app", str(tmp_path / "nope"))
    (tmp_path / "{port}").mkdir()
    with pytest.raises(AppError, match="braces"):
        parse_target("main:app", str(tmp_path / "{port}"))
    with pytest.raises(AppError, match="not an executable"):
        choose_python(str(tmp_path / "python"))
    assert parse_env(["A=1", "B_2=x y"]) == {"A": "1", "B_2": "x y"}
    for bad in ("1A=x", "A", "A-B=1", "A={port}"):
        with pytest.raises(AppError):
            parse_env([bad])
    env = tmp_path / ".env"
    env.write_text('# comment\nexport A="quoted"\nB=2\nbad line\n')
    with pytest.raises(AppError, match=r"\.env:4"):
        parse_env(None, str(env))


def test_cmd_is_split_into_words_and_its_placeholders_checked() -> None:
    name, spec = cmd_stack("web=node server.js --port {port} 'a b'", "/", "200")
    assert name == "web" and spec.command == ["node", "server.js", "--port", "{port}", "a b"]
    for bad in ("web", "=node", "Web=node", "w[app]=node", "web=", "web=node {prot}", "web='x"):
        with pytest.raises(AppError):
            cmd_stack(bad, "/", "200")


def test_app_stacks_are_named_slugged_and_take_variants() -> None:
    defs = load_stacks(ROOT / "stacks.toml")
    app = AppSpec("flask_app:app", ROOT / "examples", "/usr/bin/python3", "wsgi")
    made = app_stacks(defs, app, app_environment(app))
    assert "gunicorn-sync[app]" in made and "uvicorn[app]" not in made
    assert made["gunicorn-sync[app]"].db is False
    stacks = {**defs, **made}
    variant = resolve("gunicorn-gthread[app]:workers=2,threads=4", stacks)
    assert variant.workers == 2 and variant.threads == 4
    assert is_safe(slug(variant.name)) and "[" not in slug(variant.name)
    with pytest.raises(Exception, match="not tunable"):
        resolve("gunicorn-sync[app]:db_pool=3", stacks)
