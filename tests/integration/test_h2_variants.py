"""Every shipped h2 variant started for real and asked over HTTP/2 by another client
(curl with nghttp2: `--http2` negotiates h2 by ALPN over TLS, `--http2-prior-knowledge`
speaks h2c), a stack that cannot serve it refused in one line before anything starts,
and `verify` reading an h2 variant's contract with the engine over h2 (skipped, with
its reason, until the engine speaks h2: issue 51's h2engine). Resolution and refusal
without a process: tests/unit/test_h2_variant_keys.py."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from stackrace.stacks.launcher import Launcher
from stackrace.stacks.protocols import NEEDS_ENGINE, engine_speaks_h2
from tests.conftest_stacks import real_stack
from tests.helpers import run_cli
from tests.unit.test_h2_variant_keys import H2_STACKS

VARIANTS = [f"{name}:http={mode}" for name, modes in sorted(H2_STACKS.items()) for mode in modes]


def _curl_h2() -> str:
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("no curl here to ask over h2")
    features = subprocess.run([curl, "-V"], capture_output=True, text=True).stdout
    if "HTTP2" not in features:
        pytest.skip("this curl has no HTTP/2 (nghttp2)")
    return curl


def _ask(curl: str, url: str, cert: Path | None) -> tuple[str, str, str]:
    """(HTTP version, status, body) of GET url over h2, as curl saw them."""
    how = (
        ["--http2", "--cacert", str(cert)]
        if url.startswith("https:")
        else ["--http2-prior-knowledge"]
    )
    out = subprocess.run(
        [curl, "-s", "--max-time", "10", *how, "-w", "\n%{http_version} %{http_code}", url],
        capture_output=True, text=True, timeout=20,
    )  # fmt: skip
    body, _, tail = out.stdout.rpartition("\n")
    version, _, status = tail.partition(" ")
    return version, status, body


@pytest.mark.slow
async def test_every_h2_variant_answers_over_h2(tmp_path: Path) -> None:
    curl = _curl_h2()
    stacks = [real_stack(ref) for ref in VARIANTS]
    async with Launcher(tmp_path) as launcher:
        for stack in stacks:
            rs = await launcher.start(stack)
            try:
                assert rs.url.startswith("https://" if stack.http == "2" else "http://")
                for path, body in (
                    ("/hello", "Hello, World!"),
                    ("/json", '{"message": "Hello, World!"}'),
                ):
                    seen = _ask(curl, f"{rs.url}{path}", rs.cert)
                    assert seen == ("2", "200", body), (stack.name, path, seen)
            finally:
                await launcher.stop(rs)


def test_a_stack_without_h2_is_refused_in_one_line_before_anything_starts() -> None:
    out = run_cli("serve", "gunicorn-sync:http=2", timeout=60)
    assert out.returncode == 2, out
    lines = [ln for ln in out.stderr.splitlines() if "http" in ln]
    assert len(lines) == 1, out.stderr
    assert "stack 'gunicorn-sync:http=2': key 'http': gunicorn-sync does not serve h2" in lines[0]
    assert "✓" not in out.stdout


@pytest.mark.slow
def test_verify_reads_an_h2_variants_contract_over_h2_with_the_engine() -> None:
    if not engine_speaks_h2():
        pytest.skip(NEEDS_ENGINE)
    for ref in ("go-nethttp:http=2", "granian-asgi:http=h2c"):
        real_stack(ref)
        out = run_cli("verify", ref, timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "1 of 1 stacks verified" in out.stderr


@pytest.mark.parametrize(
    ("args", "option", "stack"),
    [
        (("bench", "--stacks", "hypercorn,hypercorn:http=2", "--no-keepalive"), "--no-keepalive",
         "hypercorn:http=2"),
        (("bench", "--stacks", "hypercorn:http=2", "--clients", "slow"), "--clients",
         "hypercorn:http=2"),
        (("bench", "--preset", "h1-vs-h2", "--no-keepalive"), "--no-keepalive", ":http="),
        (("--stacks", "hypercorn,hypercorn:http=2", "--no-keepalive", "--go"), "--no-keepalive",
         "hypercorn:http=2"),
        (("--preset", "h1-vs-h2", "--clients", "wan", "--go"), "--clients", ":http="),
        (("bench", "--url", "http://127.0.0.1:9/", "--http2", "--clients", "slow"), "--clients",
         "--http2"),
    ],
)  # fmt: skip
def test_options_h2_cannot_honour_are_refused_before_anything_starts(
    args: tuple[str, ...], option: str, stack: str, tmp_path: Path
) -> None:
    """bench and the app refuse --no-keepalive and --clients with an h2 variant or
    --http2 (as `load` does, one rule: race/core/streams.py's h2_conflict), in one line
    naming the option and the stack, exit 2, and start no stack (no run directory)."""
    runs = tmp_path / "runs"
    r = run_cli(*args, timeout=60, env={"STACKRACE_RUNS_DIR": str(runs)})
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, r.stderr
    assert len(lines) == 1 and lines[0].split(": ", 1)[1].startswith(option), r.stderr
    assert stack in lines[0], r.stderr
    # (the app checks the directory is writable first: its marker is not a run)
    started = (
        [p.name for p in runs.iterdir() if not p.name.startswith(".")] if runs.exists() else []
    )
    assert started == [], started
