"""The commands `stackrace stacks`, `serve` and `verify` as a user runs them, on a stacks
file of the user's own (--stacks-file) with small real servers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import urllib.request
from pathlib import Path

from tests.helpers import STACKRACE, run_cli

SERVERS = Path(__file__).parents[1] / "servers"

# answers 200 everywhere, but breaks the contract: wrong body, wrong type, no wait
BAD_SERVER = textwrap.dedent(
    """
    import asyncio, sys
    async def handle(reader, writer):
        await reader.readuntil(b"\\r\\n\\r\\n")
        writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Type: text/html\\r\\n"
                     b"Content-Length: 11\\r\\nConnection: close\\r\\n\\r\\nHello World")
        await writer.drain()
        writer.close()
    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", int(sys.argv[1]))
        await server.serve_forever()
    asyncio.run(main())
    """
)


def user_file(tmp_path: Path) -> Path:
    (tmp_path / "bad_server.py").write_text(BAD_SERVER)
    path = tmp_path / "my-stacks.toml"
    path.write_text(
        textwrap.dedent(
            f"""
            [stacks.good]
            title = "the test server"
            language = "python"
            family = "async"
            description = "keeps the contract; /io awaits asyncio.sleep"
            command = ["{{python}}", "{SERVERS}/testserver.py", "{{port}}"]

            [stacks.liar]
            title = "answers 200 with the wrong bytes"
            language = "python"
            family = "async"
            command = ["{{python}}", "{tmp_path}/bad_server.py", "{{port}}"]

            [stacks.absent]
            title = "a server that is not installed"
            language = "none"
            family = "other"
            command = ["stackrace-test-no-such-server", "{{port}}"]
            """
        )
    )
    return path


def test_stacks_lists_every_stack_with_reason_and_fix(tmp_path: Path) -> None:
    path = user_file(tmp_path)
    proc = run_cli("--stacks-file", str(path), "stacks", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert set(rows) == {"good", "liar", "absent"}  # the unavailable one is not dropped
    assert rows["good"]["available"] and rows["good"]["family"] == "async"
    absent = rows["absent"]
    assert not absent["available"]
    assert "stackrace-test-no-such-server not found" in absent["reason"]
    assert absent["fix"] == "stackrace install absent"

    table = run_cli("--stacks-file", str(path), "stacks")
    assert table.returncode == 0
    assert "stackrace install absent" in table.stdout.replace("\n", " ") or (
        "stackrace install" in table.stdout
    )


def test_the_listing_fits_a_pipe_and_an_80_column_terminal(tmp_path: Path) -> None:
    """`stackrace stacks | grep gunicorn-sync` finds it (rich cut it to "gunicorn-s…" in
    a pipe), a pipe gets tab-separated rows with the notes on stderr, and a terminal of
    80 columns shows every name whole."""
    shell = f"'{STACKRACE}' stacks | grep -E '^gunicorn-sync\\s'"
    found = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=60)
    assert found.returncode == 0 and found.stdout.startswith("gunicorn-sync\t"), found
    piped = run_cli("stacks")
    names = [r["name"] for r in json.loads(run_cli("stacks", "--json").stdout)]
    lines = piped.stdout.splitlines()
    assert lines[0].startswith("stack\t") and [x.split("\t")[0] for x in lines[1:]] == names
    assert "stacks file:" in piped.stderr and "variants on this machine" in piped.stderr
    env = {**os.environ, "COLUMNS": "80", "FORCE_COLOR": "1", "NO_COLOR": "1"}
    shown = subprocess.run(
        [str(STACKRACE), "stacks"], capture_output=True, text=True, timeout=60, env=env
    )
    assert shown.returncode == 0 and "stacks file:" in shown.stdout  # the terminal's table
    rows = [x for x in shown.stdout.splitlines() if x[:1].strip() and x.split()[0] in names]
    assert len(rows) == len(names) and all(len(x) <= 80 for x in rows), shown.stdout
    words = set(shown.stdout.split())
    assert [n for n in names if n not in words] == [], shown.stdout
    assert not [x for x in rows if "…" in x], shown.stdout


def test_a_reader_that_stops_early_is_no_error() -> None:
    """`stackrace stacks | head -1`: the reader closed the pipe; no crash log, the
    status a shell shows for a command SIGPIPE ended."""
    proc = subprocess.run(
        ["bash", "-c", f"'{STACKRACE}' stacks | true; echo \"${{PIPESTATUS[0]}}\""],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.stdout.strip() == "141", proc
    assert "internal error" not in proc.stderr and "crash" not in proc.stderr, proc.stderr


def test_bad_stacks_file_is_one_line_naming_file_stack_and_key(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text(
        '[stacks.mine]\ntitle = "x"\nlanguage = "python"\nfamily = "sync"\n'
        'command = ["{python}"]\nworkers = "four"\n'
    )
    for command in (["stacks"], ["verify", "mine"], ["serve", "mine"]):
        proc = run_cli("--stacks-file", str(path), *command)
        assert proc.returncode == 2
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1, proc.stderr
        assert "broken.toml" in lines[0] and "stack 'mine'" in lines[0]
        assert "key 'workers'" in lines[0]


def test_verify_fails_on_a_broken_contract_and_an_unavailable_stack(tmp_path: Path) -> None:
    path = user_file(tmp_path)
    proc = run_cli("--stacks-file", str(path), "verify", "--no-db", "good", "liar", "absent")
    assert proc.returncode == 1
    out = proc.stdout + proc.stderr
    assert "1 of 3 stacks verified" in proc.stderr
    flat = " ".join(out.split())
    assert "liar" in flat and "unavailable" in flat
    # every problem is named, not only the first of each endpoint
    for problem in ("Content-Type 'text/html'", "expected 'Hello, World!'", "did not wait"):
        assert problem in flat, flat
    good = run_cli("--stacks-file", str(path), "verify", "--no-db", "good")
    assert good.returncode == 0, good.stdout + good.stderr


def test_serve_prints_urls_and_stops_everything_on_ctrl_c(tmp_path: Path) -> None:
    path = user_file(tmp_path)
    proc = subprocess.Popen(
        [str(STACKRACE), "--stacks-file", str(path), "serve", "good", "good:workers=2"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    urls = []
    try:
        for line in proc.stdout:
            if "http://127.0.0.1:" in line:
                urls.append(line.split()[2])
            if line.startswith("serving"):
                break
        assert len(urls) == 2, urls
        for url in urls:
            with urllib.request.urlopen(url, timeout=5) as r:
                assert r.read() == b"Hello, World!"
        os.kill(proc.pid, signal.SIGINT)  # what Ctrl-C sends
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for url in urls:
        try:
            urllib.request.urlopen(url, timeout=2)
        except OSError:
            continue
        raise AssertionError(f"{url} still answers after serve stopped")
