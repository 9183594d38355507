"""A server whose first start finds its port taken (as when another process binds it
between stackrace's choice and the server's bind): with no MARKER file it makes one,
says what uvicorn says, and exits 1; after that it is the test server.

    python taken_once.py PORT MARKER
"""

import os
import sys
from pathlib import Path

port, marker = sys.argv[1], Path(sys.argv[2])
if not marker.exists():
    marker.write_text(port)
    print(
        f"ERROR: [Errno 98] error while attempting to bind on address ('127.0.0.1', {port}): "
        "address already in use",
        flush=True,
    )
    sys.exit(1)
here = Path(__file__).resolve().parent
os.execv(sys.executable, [sys.executable, str(here / "testserver.py"), port])
