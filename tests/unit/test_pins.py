"""scripts/constraints.txt pins every package pyproject.toml asks for, at a version
pyproject.toml allows: set-up installs with it (scripts/setup.sh), so a requirement
added without a pin, or a floor raised past the pin, would make a fresh clone install
something the suite never passed with (or fail to resolve). Read as text."""

from __future__ import annotations

import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def _pins() -> dict[str, str]:
    pins: dict[str, str] = {}
    for line in (ROOT / "scripts" / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep, f"scripts/constraints.txt: {line!r} is not NAME==VERSION"
        pins[canonicalize_name(name)] = version
    return pins


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = list(project["dependencies"])
    for extra in ("test", "cluster"):  # what scripts/setup.sh installs
        wanted += project["optional-dependencies"][extra]
    return [Requirement(r) for r in wanted]


def test_every_requirement_is_pinned_at_a_version_it_allows() -> None:
    pins = _pins()
    problems = []
    for req in _requirements():
        version = pins.get(canonicalize_name(req.name))
        if version is None:
            problems.append(f"{req.name}: no pin")
        elif not req.specifier.contains(version, prereleases=True):
            problems.append(f"{req.name}=={version} is not {req.specifier}")
    assert not problems, problems
