"""Each preset that replays a classic experiment, run headless for real at a reduced size:
every stack starts and is measured at every level, the run stores the experiment's claims,
and bench and report print the then/now tables with a verdict for every claim.

The sizes are cut (a short level, a small request budget, no warm-up, not even the PyPy
preset's 20,000 JIT warm-up requests: 65 s of the suite's time, ceilings at two levels
instead of ten, each level measured once where two presets repeat it 3 times) so this is
a smoke run: the verdicts are printed, not asserted. (The repeats serve close calls in a
full run; their pooling is tested in tests/integration/test_bench.py, a verdict within
their spread in tests/unit/test_claims.py. Three repeats made seed-000 send 48,000 range
queries to MariaDB where one sends 16,000, its largest cost.)
Full-length runs are `stackrace bench --preset NAME` (docs/experiments.md).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from stackrace.race.core.presets import all_presets
from stackrace.report.claims import claim_verdicts
from stackrace.report.schema import loads
from tests.conftest_stacks import real_stack
from tests.helpers import CLI, ROOT

SEEDS = sorted(name for name in all_presets() if name.startswith("seed-"))

pytestmark = pytest.mark.slow


def cut(name: str) -> list[str]:
    """Options that shrink a preset to a smoke run."""
    preset = all_presets()[name]
    levels = preset.settings.concurrency_levels
    if len(levels) > 2:  # the ceilings: the lowest and the highest level only
        levels = [levels[0], levels[-1]]
    return [
        "--duration", "0.5s", "--warmup", "0s", "--warmup-requests", "0", "--requests", "200",
        "--timeout", "10s", "--repeat", "1",
        "--concurrency", ",".join(map(str, levels)),
    ]  # fmt: skip


@pytest.mark.parametrize("name", SEEDS)
def test_seed_preset_runs_and_judges_its_claims(name: str, tmp_path: Path) -> None:
    preset = all_presets()[name]
    for ref in preset.stacks:
        real_stack(ref)
    out, md = tmp_path / "run.json", tmp_path / "run.md"
    args = ["bench", "--preset", name, *cut(name), "--json", str(out), "--markdown", str(md)]
    r = subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    run = loads(out.read_bytes())
    assert [s.name for s in run.stacks] == preset.stacks
    for st in run.stacks:
        assert st.error is None and st.levels, (st.name, st.error)
    assert run.then is not None and run.then.experiment == preset.experiment
    assert [c.id for c in run.then.claims] == [c.id for c in preset.claims]
    verdicts = claim_verdicts(run)
    assert len(verdicts) == len(preset.claims)
    assert f"Claims of experiment {preset.experiment}" in r.stdout
    assert "### Then beside now" in md.read_text()
    for v in verdicts:
        assert v.claim.id in r.stdout  # every claim has its row, with a verdict
    # `stackrace report` renders the saved run's then/now again
    again = subprocess.run(
        [*CLI, "report", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert again.returncode == 0 and f"Claims of experiment {preset.experiment}" in again.stdout


def test_bench_refuses_a_stack_that_does_not_serve_the_workload() -> None:
    r = subprocess.run(
        [*CLI, "bench", "--stacks", "go-beego,fastapi",
         "--workload", "dbjson", "--concurrency", "1", "--duration", "0.2s"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )  # fmt: skip
    assert r.returncode == 2
    assert "fastapi does not serve the dbjson workload" in r.stderr
    assert "go-beego" not in r.stderr.split("does not serve")[0]
