"""The walkthrough tier: the real app and the README's command lines, walked as a
person walks them (real stacks, a real terminal or Textual's Pilot)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "walkthrough" in str(item.path):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _own_config_dir(tmp_path, monkeypatch):
    """Remembered picker choices and crash logs go to the test's own directories."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
