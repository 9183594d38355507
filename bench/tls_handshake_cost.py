#!/usr/bin/env python3
"""CPU per TLS connection, full handshake against resumed, client and server.

    .venv/bin/stackrace serve nginx-tls          # or uvicorn-tls; note its port
    .venv/bin/python bench/tls_handshake_cost.py PORT [--server-pid PID] [-n 300]

A bare Python loop (Python's ssl, the system's OpenSSL, as the engine uses them): for
TLS 1.3 and TLS 1.2, `n` connections each with one `GET /hello` and `Connection:
close`, a full handshake every time or the last session offered (`load --tls-resume`),
in alternating rounds. Prints the client's CPU per connection (this process) and, with
`--server-pid`, the server's (its process's user + system time; for nginx give the
worker's pid). The context is the engine's own for `-k` (engine/tls.client_context):
nothing verified, and no CA store loaded.

What it showed on 2026-11-27 (OpenSSL 3.0.19, `results/tls_handshake_cost-nginx-…`):
against nginx-tls, resumption saved the server 0–13 % of its CPU per connection
(TLS 1.3: 0.70–0.90 ms resumed against 0.73–1.03 full) and cost this client *more*
with TLS 1.2 (1.47–1.54 ms resumed against 1.01–1.31 full; TLS 1.3 the same either
way). Against uvicorn-tls (Python's ssl on the server too) the same picture. So with
OpenSSL 3.0 `--tls-resume` changes little on either side; the handshake's cost here is
OpenSSL's per-connection work more than its cryptography.
"""

from __future__ import annotations

import argparse
import socket
import ssl
import statistics
import time

import psutil

from stackrace.engine.tls import client_context


def context(version: ssl.TLSVersion) -> ssl.SSLContext:
    """The engine's own `-k` context (engine/tls.py), capped at `version`."""
    ctx = client_context(verify=False)
    ctx.maximum_version = version
    return ctx


def connections(port: int, version: ssl.TLSVersion, resume: bool, n: int) -> int:
    """Make `n` connections; how many resumed a session."""
    ctx = context(version)
    session = None
    resumed = 0
    for _ in range(n):
        with socket.create_connection(("127.0.0.1", port)) as raw:
            tls = ctx.wrap_socket(raw, server_hostname="127.0.0.1", session=session)
            tls.sendall(b"GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            while tls.recv(65536):
                pass
            resumed += bool(tls.session_reused)
            if resume:
                session = tls.session  # TLS 1.3: its tickets came with the answer
            tls.close()
    return resumed


def cpu(proc: psutil.Process | None) -> float:
    if proc is None:
        return 0.0
    t = proc.cpu_times()
    return t.user + t.system


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("port", type=int)
    ap.add_argument("--server-pid", type=int, default=None)
    ap.add_argument("-n", type=int, default=300, help="connections per run")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    server = psutil.Process(args.server_pid) if args.server_pid else None
    rows: dict[tuple[str, bool], list[tuple[float, float]]] = {}
    for _ in range(args.rounds):
        for version in (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2):
            for resume in (False, True):
                c0, s0 = time.process_time(), cpu(server)
                resumed = connections(args.port, version, resume, args.n)
                client = (time.process_time() - c0) / args.n * 1e6
                srv = (cpu(server) - s0) / args.n * 1e6
                rows.setdefault((version.name, resume), []).append((client, srv))
                print(
                    f"  {version.name} {'resumed' if resume else 'full   '}: client {client:5.0f} "
                    f"µs, server {srv:5.0f} µs CPU per connection ({resumed} resumed)"
                )
    print(f"\nmedians of {args.rounds} rounds, µs of CPU per connection")
    print(f"{'':8} {'':8} {'client':>7} {'server':>7}")
    for (name, resume), runs in rows.items():
        client = statistics.median(r[0] for r in runs)
        srv = statistics.median(r[1] for r in runs)
        shown = f"{srv:7.0f}" if server is not None else "      -"
        print(f"{name:8} {'resumed' if resume else 'full':8} {client:7.0f} {shown}")


if __name__ == "__main__":
    main()
