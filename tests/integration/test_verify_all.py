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
    """`verify --db` of every stack by name and every variant, in two commands at once
    (the names dealt alternately), each with its own private MariaDB started and seeded
    (1M rows): a verify mostly waits for a stack to start and stop (~31 CPU-s in ~60 s
    for one command), so two halves side by side take ~35 s; its checks read their own
    database's counters, which the other half's stacks never touch, and a variant
    running beside its base is what a race does anyway. A stack named that is
    unavailable fails it too (test_every_stack_is_available says why first)."""
    stacks = list(load_stacks())
    variants = experiment_variants()
    assert "php-fpm-nginx:opcache=off" in variants and "go-beego:runmode=dev" in variants
    assert "django-fcgi-prefork:workers=50,min_spare=2,max_spare=5" in variants
    names = [*stacks, *variants]
    halves = [names[0::2], names[1::2]]
    runs = [
        subprocess.Popen(
            [*CLI, "verify", "--db", *half],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for half in halves
    ]
    try:
        for half, run in zip(halves, runs, strict=True):
            out, err = run.communicate(timeout=900)
            assert run.returncode == 0, out[-6000:] + err[-3000:]
            n = len(half)
            assert f"{n} of {n} stacks verified" in err
    finally:  # one half failed: the other does not outlive the test
        for run in runs:
            if run.poll() is None:
                run.kill()
                run.wait()
