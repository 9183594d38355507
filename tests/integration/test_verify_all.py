"""Every stack in stacks.toml is available on a machine set up by the README, and passes
`stackrace verify` (hello, json, io, db and dbjson against the private MariaDB, and the
facts a stack's `expect` names); so does every variant that a param's `choices` offers or
a replayed experiment's preset runs (opcache off, a new connection per request, Beego's
dev mode, Django under flup, gevent and uWSGI, nginx in front of a variant…)."""

from __future__ import annotations

import subprocess

from stackrace.race.core.presets import all_presets
from stackrace.stacks.availability import availability
from stackrace.stacks.catalogue import load_stacks
from stackrace.stacks.variants import resolve
from tests.helpers import CLI, ROOT


def test_every_stack_is_available():
    stacks = load_stacks()
    found = {n: availability(resolve(n, stacks)) for n in stacks}
    missing = {n: a.reason for n, a in found.items() if not a.available}
    assert not missing, f"unavailable after set-up: {missing}"


def experiment_variants() -> list[str]:
    """Every non-default value of a param with `choices`, and every variant a seed preset
    runs (plain stack names are verified beside them)."""
    out: list[str] = []
    for name, spec in load_stacks().items():
        for key, values in spec.choices.items():
            out += [f"{name}:{key}={v}" for v in values if v != spec.params[key]]
    for preset_name, preset in all_presets().items():
        if preset_name.startswith("seed-"):
            out += [ref for ref in preset.stacks if ":" in ref and ref not in SPARES_ONLY]
    return list(dict.fromkeys(out))


# Not verified here: seed-004's flup prefork with 50 spare processes differs from its
# runfcgi-defaults variant (min_spare=2, verified here: the same app, server and code for
# every endpoint) only in how many idle children flup keeps, and those 50 Django children
# cost ~6.5 of this test's ~31 CPU-s. That it starts and answers is proven where seed-004
# runs: tests/integration/test_seed_presets.py (bench measures it at each level) and
# tests/walkthrough/test_presets.py (it races in the app).
SPARES_ONLY = ("django-fcgi-prefork:workers=50,min_spare=50,max_spare=50",)


def test_verify_passes_for_every_stack_and_the_variants_the_experiments_use():
    """One `verify --db` of every stack by name and every variant: one private MariaDB
    started and seeded (1M rows) and one command, where a run for the stacks and one for
    the variants made both twice (~4 CPU-s a time); a stack named that is unavailable
    fails it too (test_every_stack_is_available says why first)."""
    stacks = list(load_stacks())
    variants = experiment_variants()
    assert "php-fpm-nginx:opcache=off" in variants and "go-beego:runmode=dev" in variants
    assert "django-fcgi-prefork:workers=50,min_spare=2,max_spare=5" in variants
    r = subprocess.run(
        [*CLI, "verify", "--db", *stacks, *variants],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-3000:]
    n = len(stacks) + len(variants)
    assert f"{n} of {n} stacks verified" in r.stderr
