"""A real three-node Ray cluster on this machine (loopback only), shared by the cluster
tests: starting one takes 15–25 s. Skipped, with the reason, only when Ray is missing."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).parent
HAVE_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(
    not HAVE_RAY, reason="Ray is not installed: pip install -e '.[cluster]'"
)


@dataclass
class LocalCluster:
    address: str
    nodes: dict[str, str]  # role -> node id
    env: dict[str, str]  # for drivers started as processes


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    if not HAVE_RAY:
        pytest.skip("Ray is not installed: pip install -e '.[cluster]'")
    from stackrace.cluster.run import local_cluster_env

    runs = tmp_path_factory.mktemp("runs")
    # the nodes' workers inherit this: the app host's stacks keep their logs here
    env = {**local_cluster_env(), "STACKRACE_RUNS_DIR": str(runs)}
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "ray_cluster.py")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stdin is not None
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        pytest.fail("the local Ray cluster did not start")
    info = json.loads(line)
    try:
        yield LocalCluster(info["address"], info["nodes"], env)
    finally:
        proc.stdin.close()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
