"""Every preset, opened with `--preset NAME --go` as the README says: every stack starts,
is loaded and answers in the app, a seed preset shows its experiment beside the panes,
and quitting leaves nothing running."""

from __future__ import annotations

import pytest

from stackrace.presets import PRESETS_DIR, load_preset
from tests.walkthrough.realapp import all_loaded, real_app, wait_for, why_not

PRESETS = sorted(p.stem for p in PRESETS_DIR.glob("*.toml"))


@pytest.mark.parametrize("name", PRESETS)
async def test_every_preset_opens_and_races(name: str, tmp_path):
    preset = load_preset(name)
    async with real_app(["--preset", name, "--go"], screenshots=tmp_path) as (app, pilot):
        view = await wait_for(app, pilot, all_loaded, timeout=60)
        assert view is not None, (
            f"{name}: not every stack raced: {why_not(app.race and app.race.last_view)}"
        )
        assert len(view.panes) == len(preset.stacks)
        # the variant's own pane: ids are slugs, names are the stacks' own
        assert {p.id for p in view.panes} == set(preset.stacks)
        strip = app.race.query_one("#thennow")  # type: ignore[union-attr]
        if preset.experiment is not None:
            assert strip.display, "a seed preset shows its experiment beside the panes"
            assert f"experiment {preset.experiment}" in str(strip.content)
        else:
            assert not strip.display
