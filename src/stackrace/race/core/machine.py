"""The machine a race runs on, described for its run file and its comparisons.

Its own module because both drivers need it (bench writes it into the run file; the
live app's then-and-now compares a classic experiment's machine with this one) and
neither may import the other (pyproject.toml's race contract).
"""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

import psutil

from stackrace import __version__
from stackrace.report.schema import Machine


def machine_info() -> Machine:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    u = os.uname()  # (platform.platform() runs `uname -p` in a subprocess)
    os_name = f"{u.sysname} {u.release}"
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                os_name = line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return Machine(
        hostname=socket.gethostname(),
        cpu_model=model,
        cores=len(os.sched_getaffinity(0)),
        memory_bytes=psutil.virtual_memory().total,
        kernel=platform.release(),
        os=os_name,
        python=platform.python_version(),
        stackrace=__version__,
    )
