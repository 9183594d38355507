"""A server that also listens beyond loopback on a socket of its own, as an app that
binds 0.0.0.0 itself does; otherwise testserver.py.

    python wide_server.py PORT [WIDE_PORT]
"""

from __future__ import annotations

import runpy
import socket
import sys
from pathlib import Path

wide = socket.socket()
wide.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
wide.bind(("0.0.0.0", int(sys.argv[2]) if len(sys.argv) > 2 else 0))
wide.listen()
server = str(Path(__file__).parent / "testserver.py")
sys.argv = [server, sys.argv[1]]
runpy.run_path(server, run_name="__main__")
