"""Whether a stack can run here, read from files and paths only (stacks/availability.py):
missing binaries, programs and packages are unavailable with the reason and the fix."""

from __future__ import annotations

from pathlib import Path

from stackrace.stacks.availability import availability, missing_pip
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.definition import Stack
from stackrace.stacks.install import _npm_argv
from stackrace.stacks.variants import resolve

STACKS = load_stacks()


def _stack(tmp_path: Path, block: str, name: str = "probe") -> Stack:
    path = tmp_path / "stacks.toml"
    path.write_text(block)
    return resolve(name, load_stacks(path))


def test_missing_bin_is_unavailable_with_reason_and_fix(tmp_path: Path) -> None:
    stack = _stack(
        tmp_path,
        """
[stacks.probe]
title = "needs a program that is not here"
language = "none"
family = "other"
command = ["{python}", "-c", "pass"]
[stacks.probe.needs]
bins = ["stackrace-no-such-program"]
""",
    )
    ok, reason, fix = availability(stack)
    assert not ok
    assert "stackrace-no-such-program not found" in reason
    assert fix == "stackrace install probe"


def test_missing_command_program_is_unavailable(tmp_path: Path) -> None:
    stack = _stack(
        tmp_path,
        """
[stacks.probe]
title = "its command does not exist"
language = "none"
family = "other"
command = ["/nonexistent/server", "{port}"]
""",
    )
    ok, reason, _ = availability(stack)
    assert not ok and "/nonexistent/server not found" in reason


def test_missing_or_wrong_pip_package_is_unavailable(tmp_path: Path) -> None:
    stack = _stack(
        tmp_path,
        """
[stacks.probe]
title = "needs pip packages"
language = "python"
family = "other"
command = ["{python}", "-c", "pass"]
[stacks.probe.needs]
pip = ["msgspec", "stackrace-no-such-package", "psutil<1"]
""",
    )
    ok, reason, fix = availability(stack)
    assert not ok
    assert "stackrace-no-such-package" in reason and "psutil<1" in reason
    assert "msgspec" not in reason
    assert fix == "stackrace install probe"


def test_pip_check_reads_versions_and_extras() -> None:
    # gunicorn[gevent] is installed by setup (gunicorn-gevent needs it)
    assert missing_pip(["gunicorn[gevent]>=27", "web.py", "Django>=5.2,<6"]) == []
    assert missing_pip(["gunicorn<1", "gunicorn[no-such-extra]"]) == ["gunicorn<1"]


def test_npm_packages_missing_then_installed_from_the_app_files(tmp_path: Path) -> None:
    app = tmp_path / "app"
    app.mkdir()
    stack = _stack(
        tmp_path,
        f"""
[stacks.probe]
title = "needs an npm package"
language = "javascript"
family = "event-loop"
command = ["{{python}}", "-c", "pass"]
[stacks.probe.needs]
npm = ["mysql2@^3"]
npm_cwd = "{app}"
""",
    )
    ok, reason, _ = availability(stack)
    assert not ok and "npm package mysql2@^3 not installed" in reason
    # the app's own package files win over the names, so they are never rewritten
    assert _npm_argv(app, ["mysql2@^3"])[-1] == "mysql2@^3"
    (app / "package.json").write_text("{}")
    assert _npm_argv(app, ["mysql2@^3"]) == ["npm", "install", "--no-audit", "--no-fund"]
    (app / "package-lock.json").write_text("{}")
    assert _npm_argv(app, ["mysql2@^3"])[:2] == ["npm", "ci"]
    # once node_modules has it, nothing is missing
    (app / "node_modules" / "mysql2").mkdir(parents=True)
    (app / "node_modules" / "mysql2" / "package.json").write_text("{}")
    assert availability(stack)[0]
