"""A server whose start leaves two processes outside its session, as hostile or careless
apps do, then serves as testserver.py does.

    python escaping_server.py PORT PIDFILE

- a `setsid sleep` child (a worker that starts a helper in a session of its own), whose
  parent, this server, lives on;
- a double-forked daemon (an import that daemonizes): its parent exits at once, so it
  is an orphan in a session of its own.

Their pids, then the server's own, are written to PIDFILE (one line, space-separated)
before the server serves.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

port, pidfile = sys.argv[1], sys.argv[2]
helper = subprocess.Popen(["sleep", "1000"], start_new_session=True)  # `setsid sleep`
read_end, write_end = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.close(read_end)
        os.write(write_end, str(os.getpid()).encode())
        os.close(write_end)
        os.closerange(3, 256)
        time.sleep(1000)
        os._exit(0)
    os._exit(0)
os.close(write_end)
daemon = int(os.read(read_end, 64))
os.wait()  # the intermediate child: gone at once
Path(pidfile).write_text(f"{helper.pid} {daemon} {os.getpid()}\n")
server = Path(__file__).parent / "testserver.py"
os.execv(sys.executable, [sys.executable, str(server), port])
