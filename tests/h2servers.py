"""The HTTP/2 test servers, started for a test: Go's net/http (tests/apps/h2go, h2c or h2
over TLS, counting what it answers) and the misbehaving one (tests/servers/h2_hostile.py).

Apart from tests/helpers.py because only the HTTP/2 tests and bench/h2_vs_h2load.py use
them; each prints "READY <port> …" once it listens on a port the kernel chose (no fixed
port, no race for a free one).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

ROOT = Path(__file__).parents[1]
H2GO = ROOT / "tests" / "apps" / "h2go"
HOSTILE = ROOT / "tests" / "servers" / "h2_hostile.py"


def find_go() -> str | None:
    """The Go toolchain, where the Go stacks' install puts it too."""
    return shutil.which("go") or next(
        (p for p in ("/usr/local/go/bin/go", str(Path.home() / "go/bin/go")) if Path(p).exists()),
        None,
    )


def build_h2go(out_dir: Path) -> Path:
    """tests/apps/h2go built into `out_dir` (RuntimeError without Go)."""
    go = find_go()
    if go is None:
        raise RuntimeError("no Go toolchain (the Go stacks' install brings one)")
    out = out_dir / "h2go"
    subprocess.run([go, "build", "-o", str(out), "."], cwd=H2GO, check=True,
                   capture_output=True, timeout=300)  # fmt: skip
    return out


class Started:
    """A server process that printed `READY <port> [<control port>]`."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, start_new_session=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().split()
        if not line or line[0] != "READY":
            self.kill()
            raise RuntimeError(f"{argv[0]} did not start")
        self.port = int(line[1])
        self.control = int(line[2]) if len(line) > 2 else 0

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


class GoH2(Started):
    """Go's net/http: h2c (http://) or h2 by ALPN (https://, self-signed: verify off)."""

    def __init__(
        self, binary: Path, tls: bool = False, max_streams: int = 0, h1only: bool = False
    ) -> None:
        argv = [str(binary), *(["-tls"] if tls else []), *(["-h1only"] if h1only else [])]
        if max_streams:
            argv.append(f"-max-streams={max_streams}")
        super().__init__(argv)
        self.tls = tls

    def url(self, path: str) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}{path}"

    def count(self) -> int:
        """The requests it answered (over HTTP/1.1: the count's own request is not one)."""
        import ssl

        ctx = ssl._create_unverified_context() if self.tls else None
        with urllib.request.urlopen(self.url("/count"), timeout=10, context=ctx) as r:
            return int(r.read())


class HostileH2(Started):
    """tests/servers/h2_hostile.py in one of its modes."""

    def __init__(self, mode: str) -> None:
        super().__init__([sys.executable, str(HOSTILE), mode])

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def counts(self) -> dict[str, int]:
        url = f"http://127.0.0.1:{self.control}/_count"
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())
