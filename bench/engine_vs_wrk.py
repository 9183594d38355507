#!/usr/bin/env python3
"""Measure stackrace's engine against wrk (and ab, hey, oha where installed).

    .venv/bin/python bench/engine_vs_wrk.py [--rounds 3] [--duration 8] [-c 50]
                     [--tls [--tls-version 1.3|1.2] [--cert ecdsa|rsa] [--resume]]
                     [--py-transport] [--baseline-src DIR]

A small Go net/http server (bench/target) runs pinned to core 0 with GOMAXPROCS=1; each
load tool runs pinned to core 1, in turn, for the same time at the same concurrency,
for several alternating rounds. For each run it prints the tool's req/s and its CPU
microseconds per request: the tool's whole process tree's user+sys time (from wait4)
divided by the number of requests the *server* says it answered. Medians are reported,
and the ratio to wrk in the same round.

Then the latency check: the same tools against /delay?ms=20 at c=50, comparing
stackrace's p50 and p99 with wrk's. Last, the engine's start-up time (spawn to ready).
Beside them runs bench/bare_uvloop_client.py, the least a Python client on uvloop can
do, to show what the engine's features cost above that floor.

`--tls`: the target serves HTTPS (stackrace runs with -k: wrk verifies nothing either),
with TLS 1.3 or 1.2 (`--tls-version`, the server's highest) and an ECDSA P-256
certificate (the machine's, stackrace.stacks.certificate) or an RSA-2048 one (`--cert
rsa`, made once in .stackrace/bench). The server issues no session tickets, so every
handshake is a full one whatever a tool does (wrk offers its last session on every
reconnect and resumes whenever the server lets it); `--resume` lets it, and stackrace
runs with --tls-resume. The server counts the handshakes that resumed, and the share is
printed per tool (`resumed`). `--py-transport` adds a row, stackrace on its Python
transports (STACKRACE_PY_TRANSPORT=1), in the same rounds.
Needs: go, wrk, taskset. Optional: ab, hey, oha.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER_CPU = "0"
TOOL_CPU = "1"


def _free_port() -> int:
    # asked of the OS: other people's servers may run on this machine too
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


PORT = _free_port()
# --tls: the target serves HTTPS with the machine's certificate (stackrace.stacks.
# certificate) or an RSA one; wrk does not verify certificates, so stackrace runs with -k
# too. SERVER_OPTIONS: the target's (bench/target: tls12, tickets); RESUME: --tls-resume
SCHEME = "http"
TLS_FILES: tuple[str, str] | None = None
SERVER_OPTIONS: list[str] = []
RESUME = False
# --py-transport: one more row, stackrace on its Python transports
PY_TRANSPORT_ROW = False
# --baseline-src DIR: one more row, "stackrace (baseline)", the engine whose sources are in
# DIR (e.g. `git archive main src | tar -x -C /tmp/main`), run in the same rounds
BASELINE_SRC: str | None = None


def build_target() -> Path:
    out = ROOT / ".stackrace" / "bench" / "target"
    out.parent.mkdir(parents=True, exist_ok=True)
    src = ROOT / "bench" / "target"
    newest = max(p.stat().st_mtime for p in src.iterdir())
    if not out.exists() or out.stat().st_mtime < newest:
        subprocess.run(["go", "build", "-o", str(out), "."], cwd=src, check=True)
    return out


def rsa_certificate() -> tuple[str, str]:
    """An RSA-2048 certificate for 127.0.0.1, made once in .stackrace/bench."""
    d = ROOT / ".stackrace" / "bench"
    cert, key = d / "rsa-cert.pem", d / "rsa-key.pem"
    if not (cert.exists() and key.exists()):
        d.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-sha256", "-nodes",
             "-days", "3650", "-subj", "/CN=localhost", "-addext",
             "subjectAltName=DNS:localhost,IP:127.0.0.1",
             "-keyout", str(key), "-out", str(cert)],
            check=True, capture_output=True,
        )  # fmt: skip
    return str(cert), str(key)


def use_tls(version: str = "1.3", cert_kind: str = "ecdsa", resume: bool = False) -> None:
    """Serve and load HTTPS: the machine's ECDSA certificate (made once) or an RSA one,
    TLS `version` at most, session tickets only with `resume` (see the docstring)."""
    global SCHEME, TLS_FILES, RESUME
    sys.path.insert(0, str(ROOT / "src"))
    from stackrace.stacks.certificate import ensure  # here: after src is on sys.path

    if cert_kind == "rsa":
        TLS_FILES = rsa_certificate()
    else:
        cert = ensure()
        TLS_FILES = (str(cert.cert), str(cert.key))
    SCHEME, RESUME = "https", resume
    SERVER_OPTIONS[:] = [*(["tls12"] if version == "1.2" else []), *(["tickets"] if resume else [])]


def server_arguments() -> list[str]:
    """The target's arguments after its port: the certificate, key and options (--tls)."""
    return [*TLS_FILES, *SERVER_OPTIONS] if TLS_FILES else []


def tls_setting() -> str:
    """What the run loaded, in words (for the results' heading)."""
    if TLS_FILES is None:
        return "plain HTTP"
    version = "TLS 1.2" if "tls12" in SERVER_OPTIONS else "TLS 1.3"
    cert = "RSA-2048" if TLS_FILES[0].endswith("rsa-cert.pem") else "ECDSA P-256"
    return f"{version}, {cert}, " + (
        "session tickets offered (stackrace --tls-resume)" if RESUME else "full handshakes"
    )


def _open(path: str, timeout: float) -> bytes:
    import ssl

    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # our own target
    url = f"{SCHEME}://127.0.0.1:{PORT}{path}"
    with urllib.request.urlopen(url, timeout=timeout, context=ctx) as r:
        return r.read()


def start_server(binary: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "GOMAXPROCS": "1"}
    proc = subprocess.Popen(
        ["taskset", "-c", SERVER_CPU, str(binary), str(PORT), *server_arguments()],
        env=env,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    for _ in range(100):
        try:
            _open("/_count", 1)
            return proc
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit("bench target did not start")


def served() -> int:
    return int(_open("/_count", 5))


def resumed() -> int:
    """Of the requests served since the last call, those on a resumed TLS session."""
    return int(_open("/_resumed", 5))


def require(*tools: str) -> None:
    for tool in tools:
        if not shutil.which(tool):
            raise SystemExit(f"needs {tool} on PATH")


def skip_note(tool: str) -> None:
    print(f"  ({tool} is not on PATH: its row is skipped)", file=sys.stderr)


def tool_commands(path: str, conc: int, secs: int, close: bool = False) -> dict[str, list[str]]:
    """Each tool's command line; `close`: a new connection per request (connect_rate.py)."""
    url = f"{SCHEME}://127.0.0.1:{PORT}{path}"
    c, d = str(conc), f"{secs}s"
    keep = [] if close else ["-k"]
    stackrace = [
        sys.executable,
        "-m",
        "stackrace.cli",
        "load",
        url,
        "-c",
        c,
        "-d",
        d,
        "--json",
        *(["--no-keepalive"] if close else []),
        *(["--insecure"] if TLS_FILES else []),
        *(["--tls-resume"] if TLS_FILES and RESUME else []),
    ]
    cmds = {"stackrace": stackrace}
    if PY_TRANSPORT_ROW:
        cmds["stackrace (Python transport)"] = ["env", "STACKRACE_PY_TRANSPORT=1", *stackrace]
    if not TLS_FILES:  # the floor is a plain-HTTP client
        cmds["bare uvloop"] = [sys.executable, str(ROOT / "bench" / "bare_uvloop_client.py"),
                               url, c, str(secs), *(["close"] if close else [])]  # fmt: skip
    cmds["wrk"] = ["wrk", "-t1", f"-c{c}", f"-d{d}", "--latency",
                   *(["-H", "Connection: close"] if close else []), url]  # fmt: skip
    if BASELINE_SRC:
        cmds["stackrace (baseline)"] = ["env", f"PYTHONPATH={BASELINE_SRC}", *stackrace]
    if shutil.which("ab"):
        name = "ab" if close else "ab -k"
        cmds[name] = ["ab", *keep, "-q", "-c", c, "-t", str(secs), "-n", "100000000", url]
    if shutil.which("hey"):
        cmds["hey"] = ["hey", *(["-disable-keepalive"] if close else []), "-c", c, "-z", d, url]
    if shutil.which("oha"):
        cmds["oha"] = ["oha", "--no-tui", *(["--disable-keepalive"] if close else []),
                       "-c", c, "-z", d, url]  # fmt: skip
    return cmds


def run_tool(cmd: list[str]) -> tuple[float, float, str]:
    """Run pinned to the tool core; return (wall seconds, CPU seconds of the tree, stdout)."""
    start = time.monotonic()
    proc = subprocess.Popen(
        ["taskset", "-c", TOOL_CPU, *cmd],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )
    out = proc.stdout.read().decode() if proc.stdout else ""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"{cmd[0]} exited with {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime, out


def wrk_percentiles(out: str) -> dict[str, float]:
    """wrk --latency prints '50% 20.13ms' lines; return them in µs."""
    found = {}
    for pct, val, unit in re.findall(r"^\s+(\d+)%\s+([\d.]+)(us|ms|s)\s*$", out, re.M):
        found[pct] = float(val) * {"us": 1, "ms": 1000, "s": 1_000_000}[unit]
    return found


def throughput(rounds: int, secs: int, conc: int) -> dict[str, dict[str, list[float]]]:
    """Each tool runs twice per round, short then long: the whole long run gives the
    per-request cost including start-up; the difference between the two runs gives the
    marginal cost of one more request (start-up cancels out), for every tool alike."""
    short = max(1, secs // 4)
    results: dict[str, dict[str, list[float]]] = {}
    for rnd in range(rounds):
        for name in tool_commands("/hello", conc, secs):
            runs = []
            for d in (short, secs):
                served()  # reset the server's counts
                resumed()
                _wall, cpu, _ = run_tool(tool_commands("/hello", conc, d)[name])
                runs.append((d, cpu, served()))
            (_, cpu_s, n_s), (_, cpu_l, n_l) = runs
            r = results.setdefault(
                name, {"rps": [], "us_per_req": [], "marginal": [], "resumed": []}
            )
            r["resumed"].append(resumed() / n_l if n_l else 0.0)
            r["rps"].append(n_l / secs)
            r["us_per_req"].append(cpu_l / n_l * 1e6 if n_l else float("inf"))
            marginal = (cpu_l - cpu_s) / (n_l - n_s) * 1e6 if n_l > n_s else float("inf")
            r["marginal"].append(marginal)
            print(
                f"  round {rnd + 1} {name:<10} {n_l / secs:>9.0f} req/s  "
                f"{cpu_l / n_l * 1e6:6.2f} µs CPU/request (whole run)  "
                f"{marginal:6.2f} µs marginal",
                file=sys.stderr,
            )
    return results


def fidelity(rounds: int, secs: int, conc: int) -> list[dict[str, float]]:
    rows = []
    for _ in range(rounds):
        cmds = tool_commands("/delay?ms=20", conc, secs)
        _, _, wrk_out = run_tool(cmds["wrk"])
        _, _, sr_out = run_tool(cmds["stackrace"])
        w = wrk_percentiles(wrk_out)
        s = json.loads(sr_out)["total"]["latency"]
        rows.append(
            {"wrk_p50": w["50"], "wrk_p99": w["99"], "sr_p50": s["p50"], "sr_p99": s["p99"]}
        )
        print(
            f"  round {len(rows)}: p50 wrk {w['50'] / 1000:.2f} stackrace {s['p50'] / 1000:.2f}"
            f" ms, p99 wrk {w['99'] / 1000:.2f} stackrace {s['p99'] / 1000:.2f} ms",
            file=sys.stderr,
        )
    return rows


def startup(samples: int = 7) -> list[float]:
    sys.path.insert(0, str(ROOT / "src"))
    from stackrace.engine.client import Engine  # here: after src is on sys.path

    async def once() -> float:
        t0 = time.perf_counter()
        engine = Engine()
        await engine.start()
        took = time.perf_counter() - t0
        await engine.stop()
        return took

    return [asyncio.run(once()) for _ in range(samples)]


def add_tls_argument(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--tls",
        action="store_true",
        help="HTTPS: the target serves TLS with the machine's certificate (stackrace -k, "
        "as wrk does not verify either); the bare uvloop row is left out",
    )
    ap.add_argument("--tls-version", choices=("1.3", "1.2"), default="1.3",
                    help="--tls: the server's highest TLS version")  # fmt: skip
    ap.add_argument("--cert", choices=("ecdsa", "rsa"), default="ecdsa",
                    help="--tls: an ECDSA P-256 certificate or an RSA-2048 one")  # fmt: skip
    ap.add_argument(
        "--resume",
        action="store_true",
        help="--tls: the server issues session tickets, so clients can resume (wrk does "
        "by itself; stackrace runs with --tls-resume); default: every handshake full",
    )
    ap.add_argument(
        "--py-transport",
        action="store_true",
        help="one more row: stackrace on its Python transports (STACKRACE_PY_TRANSPORT=1)",
    )


def use_tls_arguments(args: argparse.Namespace) -> None:
    """Apply --tls (with its version, certificate and resumption) and --py-transport."""
    global PY_TRANSPORT_ROW
    PY_TRANSPORT_ROW = args.py_transport
    if args.tls:
        use_tls(args.tls_version, args.cert, args.resume)
    elif args.tls_version != "1.3" or args.cert != "ecdsa" or args.resume:
        raise SystemExit("--tls-version, --cert and --resume go with --tls")


def add_baseline_argument(ap: argparse.ArgumentParser) -> None:
    ap.add_argument(
        "--baseline-src",
        default=None,
        metavar="DIR",
        help="also run the engine from these sources (a directory holding stackrace/), "
        "e.g. main's: git archive main src | tar -x -C /tmp/main; then /tmp/main/src",
    )


def use_baseline(args: argparse.Namespace) -> None:
    global BASELINE_SRC
    if args.baseline_src:
        src = Path(args.baseline_src).resolve()
        if not (src / "stackrace" / "engine" / "worker.py").is_file():
            raise SystemExit(f"--baseline-src {args.baseline_src}: no stackrace/ sources there")
        BASELINE_SRC = str(src)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=int, default=8)
    ap.add_argument("-c", "--concurrency", type=int, default=50)
    add_baseline_argument(ap)
    add_tls_argument(ap)
    args = ap.parse_args()
    use_baseline(args)
    use_tls_arguments(args)
    require("go", "wrk", "taskset")
    for tool in ("ab", "hey", "oha"):
        if not shutil.which(tool):
            skip_note(tool)
    server = start_server(build_target())
    try:
        print(
            f"== throughput: /hello, c={args.concurrency}, {args.duration}s, "
            f"{args.rounds} alternating rounds (server on cpu {SERVER_CPU}, tool on cpu "
            f"{TOOL_CPU}); {tls_setting()}; load average {os.getloadavg()[0]:.2f} at the start",
            file=sys.stderr,
        )
        res = throughput(args.rounds, args.duration, args.concurrency)
        # Ratios are taken round by round (each tool against wrk in the same round), then
        # the median: a drift of the machine's speed between rounds cancels out.
        wrk = res["wrk"]
        print(f"\n{tls_setting()}; load average {os.getloadavg()[0]:.2f} at the end")
        print(
            f"{'tool':<12}{'req/s':>9}{'vs wrk':>8}   {'µs CPU/req':>10}{'vs wrk':>8}"
            f"   {'marginal µs':>11}{'vs wrk':>8}" + ("  resumed" if TLS_FILES else "")
        )
        for name, r in res.items():

            def ratio(key: str, r: dict[str, list[float]] = r) -> float:
                return statistics.median(a / b for a, b in zip(r[key], wrk[key], strict=True))

            print(
                f"{name:<12}{statistics.median(r['rps']):>9.0f}{ratio('rps'):>7.2f}x   "
                f"{statistics.median(r['us_per_req']):>10.2f}{ratio('us_per_req'):>7.2f}x   "
                f"{statistics.median(r['marginal']):>11.2f}{ratio('marginal'):>7.2f}x"
                + (f"  {100 * statistics.median(r['resumed']):6.0f}%" if TLS_FILES else "")
            )
        print(f"\n== latency fidelity: /delay?ms=20, c={args.concurrency}", file=sys.stderr)
        rows = fidelity(args.rounds, max(4, args.duration // 2), args.concurrency)
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        p50 = (med["wrk_p50"] / 1000, med["sr_p50"] / 1000)
        p99 = (med["wrk_p99"] / 1000, med["sr_p99"] / 1000)
        # the difference is taken round by round (the two tools one after the other), then
        # the median, as the ratios above: wrk's own p50 moves by ~0.4 ms between rounds
        d50, d99 = (
            statistics.median((r[f"sr_{p}"] - r[f"wrk_{p}"]) / 1000 for r in rows)
            for p in ("p50", "p99")
        )
        print(
            f"\nlatency at 20 ms delay: wrk p50 {p50[0]:.2f} ms, stackrace p50 {p50[1]:.2f} ms "
            f"(diff {d50:+.2f} ms); wrk p99 {p99[0]:.2f} ms, stackrace p99 "
            f"{p99[1]:.2f} ms (diff {d99:+.2f} ms); medians of {len(rows)} rounds, the "
            "diffs round by round"
        )
    finally:
        server.terminate()
        server.wait()
    took = startup()
    print(
        f"engine start-up (spawn to ready): median {statistics.median(took) * 1000:.0f} ms, "
        f"max {max(took) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
