"""`load --engine-cpus`: the engine runs on the cores given, and the driver keeps off them.

Real processes read back from the kernel: the engine's and the driver's affinity while a
real load runs against the test server (supervise/procs.keep_off says why the driver
moves: a report it is woken for on the engine's core delays the engine's due sends).
"""

from __future__ import annotations

import json
import os
import subprocess

import psutil
import pytest

from tests.helpers import CLI, ROOT, wait_for

pytestmark = pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2, reason="needs two usable cores (one for the engine)"
)


def test_the_engine_gets_its_core_and_the_driver_keeps_off_it(server) -> None:
    cores = sorted(os.sched_getaffinity(0))
    engine_core = cores[-1]
    argv = ["load", server.url("/hello"), "-c", "4", "-d", "4s", "--json"]
    proc = subprocess.Popen(
        [*CLI, *argv, "--engine-cpus", str(engine_core)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        driver = psutil.Process(proc.pid)
        assert wait_for(lambda: bool(driver.children()), timeout=20), "no engine process"
        (engine,) = driver.children()
        assert wait_for(lambda: engine.cpu_affinity() == [engine_core], timeout=10)
        assert wait_for(lambda: engine_core not in driver.cpu_affinity(), timeout=10)
        assert sorted(driver.cpu_affinity()) == [c for c in cores if c != engine_core]
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    total = json.loads(out)["accounting"]
    assert total["answered"] > 0
    assert total["sent"] == total["answered"] + total["failed_no_answer"] + total["waiting"]
