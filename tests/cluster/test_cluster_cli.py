"""The commands with --cluster, as a user runs them: real processes, a real local cluster.

Includes the orphan test: SIGKILL the driver of a `bench --cluster` race and find no
stack, no engine process and no actor of it left on any node.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.cluster.conftest import LocalCluster, needs_ray
from tests.conftest_stacks import live
from tests.helpers import CLI, ROOT, STACKS_FIXTURE, TestServer

STACKRACE = [*CLI]
ACTORS = ("ray::AppHost", "ray::EngineHost")
# a busy 2-core machine starts Ray slowly: a generous ceiling (waits end when done)
pytestmark = pytest.mark.timeout(900)


def _actor_processes(since: float) -> list[psutil.Process]:
    out = []
    for p in psutil.process_iter(["name", "create_time"]):
        # an actor's title names the method it runs: "ray::EngineHost.pull"
        name = p.info["name"] or ""
        if name.startswith(ACTORS) and p.info["create_time"] >= since - 1:
            out.append(p)
    return out


def _tree(procs: list[psutil.Process]) -> dict[int, str]:
    """pid -> name of the actors and everything below them, and every process in the
    sessions those started (servers' workers included)."""
    found: dict[int, str] = {}
    for p in procs:
        try:
            for q in [p, *p.children(recursive=True)]:
                found[q.pid] = q.name()
        except psutil.Error:
            continue
    # the sessions the actors' children lead (not the actors' own: Ray's node processes
    # share that one)
    ours = {os.getsid(p.pid) for p in procs if _exists(p.pid)} | {os.getsid(0)}
    sessions = {os.getsid(pid) for pid in list(found) if _exists(pid)} - ours
    for q in psutil.process_iter(["name"]):
        try:
            if os.getsid(q.pid) in sessions:
                found[q.pid] = q.info["name"]
        except OSError:
            continue
    return found


def _exists(pid: int) -> bool:
    try:
        os.getsid(pid)
        return True
    except OSError:
        return False


@needs_ray
@pytest.mark.cluster
@pytest.mark.slow
def test_killed_driver_leaves_nothing_behind(ray_cluster: LocalCluster):
    started = time.time()
    driver = subprocess.Popen(
        [
            *STACKRACE,
            "--stacks-file",
            str(STACKS_FIXTURE),
            "bench",
            "--cluster",
            ray_cluster.address,
            "--stacks",
            "plain,forking",
            "--isolation",
            "parallel",
            "--concurrency",
            "5",
            "--duration",
            "120s",
            "--warmup",
            "0s",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=ray_cluster.env,
        start_new_session=True,
    )
    try:
        # wait until both stacks run and each has its engine process, under load
        deadline = time.monotonic() + 90
        tree: dict[int, str] = {}
        while time.monotonic() < deadline:
            assert driver.poll() is None, driver.stderr.read().decode() if driver.stderr else ""
            tree = _tree(_actor_processes(started))
            names = [n.split(".")[0] for n in tree.values()]
            engines = [pid for pid in tree if _is_engine(pid)]
            if names.count("ray::EngineHost") == 2 and len(engines) == 2 and len(tree) >= 8:
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"the race did not come up: {tree}")
        time.sleep(1.5)  # load flowing
        tree = _tree(_actor_processes(started))
        assert [n.split(".")[0] for n in tree.values()].count("ray::AppHost") == 1
    finally:
        if driver.poll() is not None:  # it should still be running: say why it is not
            pytest.fail(driver.stderr.read().decode() if driver.stderr else "driver exited")
        os.kill(driver.pid, signal.SIGKILL)
        driver.wait()
    # Ray kills a dead driver's actors; their children follow (PR_SET_PDEATHSIG, the
    # engine's closed stdin, the launcher's watchdog for the servers' sessions)
    end = time.monotonic() + 60
    while live(tree) and time.monotonic() < end:
        time.sleep(0.5)
    left = {pid: _describe(pid) for pid in live(tree)}
    assert not left, f"left behind: {left}"


def _describe(pid: int) -> str:
    try:
        p = psutil.Process(pid)
        return f"{' '.join(p.cmdline())} (parent {p.ppid()}, session {os.getsid(pid)})"
    except (psutil.Error, OSError):
        return "gone"


def _is_engine(pid: int) -> bool:
    try:
        return "stackrace.engine.worker" in " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return False


# STACKRACE_CLUSTER_REPEAT=N runs the load test N times in one session (one Ray cluster
# started), beside a burner for issue 47's tally; CI runs it once
REPEAT = int(os.environ.get("STACKRACE_CLUSTER_REPEAT", "1"))


@needs_ray
@pytest.mark.cluster
@pytest.mark.slow
@pytest.mark.parametrize("run", range(REPEAT))
def test_load_command_on_the_cluster(ray_cluster: LocalCluster, server: TestServer, run: int):
    out = subprocess.run(
        [
            *STACKRACE,
            "load",
            server.url("/hello"),
            "-c",
            "4",
            "-d",
            "1.5s",
            "--json",
            "--cluster",
            ray_cluster.address,
            "--load-node",
            "stackrace-role=load",
            "--load-node",
            "stackrace-role=load",
        ],
        capture_output=True,
        text=True,
        env=ray_cluster.env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["procs"] == 2  # two engine processes on the load node, merged
    total = result["total"]
    served = server.stats()["by_path"]["/hello"]
    assert total["requests"] > 20
    assert total["failures"] == {}
    # every request sent is answered, failed or still waiting
    said = {k: result.get(k) for k in ("errors", "lost", "interrupted")}
    assert total["requests"] + total["waiting"] + sum(total["failures"].values()) == total["sent"]
    # the server saw every request counted sent, and no other: kept alive, every request
    # still waiting at the stop had been written. A stop inside the driver's tick once
    # dropped replies already taken (~20 % of the sent count:
    # tests/integration/test_engine_stop.py).
    print(f"cluster load {run}: sent {total['sent']:,}, served {served:,}")
    assert total["sent"] == served, (total["sent"], served, said)


def test_cluster_option_without_ray_says_how_to_install(tmp_path: Path):
    # a `ray` that cannot be imported, first on the path: as on a machine without the extra
    fake = tmp_path / "ray"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'ray'\")\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT / 'src'}"}
    for argv in (
        ["load", "http://127.0.0.1:9/", "--cluster", "127.0.0.1:6379"],
        ["bench", "--stacks", "plain", "--cluster", "127.0.0.1:6379"],
        ["--cluster", "127.0.0.1:6379"],
    ):
        out = subprocess.run(
            [*STACKRACE, "--stacks-file", str(STACKS_FIXTURE), *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert out.returncode == 2, (argv, out.stderr)
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1, out.stderr
        assert "pip install 'stackrace[cluster]'" in lines[0]


def test_single_machine_path_never_imports_ray():
    code = (
        "import sys\n"
        "from stackrace.cli import build_parser\n"
        "build_parser(); build_parser(only='load'); build_parser(only='bench')\n"
        "import stackrace.commands.load, stackrace.commands.bench, stackrace.commands.app\n"
        "import stackrace.commands.app_args, stackrace.race.bench.driver\n"
        "import stackrace.race.live.session\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@needs_ray
@pytest.mark.cluster
@pytest.mark.slow
def test_bench_command_on_the_cluster(ray_cluster: LocalCluster, tmp_path: Path):
    out_json = tmp_path / "run.json"
    out = subprocess.run(
        [
            *STACKRACE,
            "--stacks-file",
            str(STACKS_FIXTURE),
            "bench",
            "--cluster",
            ray_cluster.address,
            "--stacks",
            "plain,forking",
            "--concurrency",
            "4",
            "--duration",
            "1s",
            "--warmup",
            "0s",
            "--json",
            str(out_json),
        ],
        capture_output=True,
        text=True,
        env=ray_cluster.env,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stderr
    assert "cluster: 1 engine process(es) per stack on 127.0.0.1" in out.stderr
    run = json.loads(out_json.read_text())
    for st in run["stacks"]:
        assert not st.get("error"), st
        (level,) = st["levels"]
        w = level["window"]
        assert w["requests"] > 10 and w["failures"] == {}
        assert w["sent"] == w["requests"] + w["waiting"]  # every request accounted for
        assert level["memory_before"]["rss"] > 0  # sampled on the app node
