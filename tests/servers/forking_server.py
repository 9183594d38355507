"""A server whose real work happens in a child it forks, like gunicorn's workers.

python forking_server.py PORT [--crash-after SECONDS] [--setsid] [--host ADDR]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

args = sys.argv[1:]
if "--setsid" in args:
    os.setsid()  # as php-fpm does: a session of its own
host = args[args.index("--host") + 1] if "--host" in args else "127.0.0.1"
child = subprocess.Popen(
    [sys.executable, str(Path(__file__).parent / "testserver.py"), args[0], "--host", host]
)
if "--crash-after" in args:
    time.sleep(float(args[args.index("--crash-after") + 1]))
    child.kill()
    sys.exit(3)
sys.exit(child.wait())
