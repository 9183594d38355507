"""An HTTP/2 (h2c, prior knowledge) test server that misbehaves as asked, for the
engine's HTTP/2 tests (tests/integration/test_h2_hostile.py).

Python with python-hyper's `h2` (sans-I/O): it answers what the mode says and sends
the exact frames a test needs, raw ones (a bad HPACK block, DATA after END_STREAM)
written beside h2's. Modes (argv[1]):
- `ok`: every request answered 200 "hello" (the counting server);
- `rst`: every third request reset (RST_STREAM INTERNAL_ERROR), the others answered;
- `refuse`: every third refused (RST_STREAM REFUSED_STREAM), the others answered;
- `goaway0`: the first request of each connection gets GOAWAY(last-stream-id 0) and the
  connection closes: nothing it carried was processed;
- `goaway_every`: a connection's 50th request is answered, then GOAWAY(last-stream-id:
  that one's) and the connection closes once written (nginx's keepalive_requests);
- `zerowindow`: SETTINGS_INITIAL_WINDOW_SIZE 0: a request body can never be sent;
- `badhpack`: each answer's HEADERS block is not HPACK;
- `data_after_end`: each answer complete, then one more DATA frame on its stream;
- `silent_first`: the first connection's requests are read and never answered (a
  server that stopped serving one connection), every other connection's answered.
A second port speaks plain HTTP/1.1: `GET /_count` answers JSON {"answered": n,
"streams": n}, the requests answered and the streams opened (whatever became of them).
Prints "READY <h2 port> <control port>".
"""

from __future__ import annotations

import asyncio
import json
import sys

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import ConnectionTerminated, DataReceived, RequestReceived
from h2.settings import SettingCodes
from hyperframe.frame import DataFrame, HeadersFrame

MODE = sys.argv[1] if len(sys.argv) > 1 else "ok"
counts = {"answered": 0, "streams": 0}
connections = [0]  # made so far (silent_first: the first is never answered)


class H2Server(asyncio.Protocol):
    def __init__(self) -> None:
        self.conn = H2Connection(H2Configuration(client_side=False, header_encoding=None))
        self.transport: asyncio.Transport | None = None
        self.requests = 0  # on this connection
        self.done = False
        connections[0] += 1
        self.silent = MODE == "silent_first" and connections[0] == 1

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.conn.initiate_connection()
        if MODE == "zerowindow":
            self.conn.update_settings({SettingCodes.INITIAL_WINDOW_SIZE: 0})
        self.flush()

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data and self.transport is not None:
            self.transport.write(data)

    def data_received(self, data: bytes) -> None:
        if self.done:
            return
        try:
            events = self.conn.receive_data(data)
        except Exception:  # the client broke the protocol: h2's GOAWAY goes out
            self.flush()
            self.close()
            return
        for ev in events:
            if isinstance(ev, RequestReceived):
                counts["streams"] += 1
                self.requests += 1
                if MODE == "zerowindow" or self.silent:
                    continue  # its body never comes: the window is shut (or: held)
                if MODE == "goaway0":
                    self.conn.close_connection(last_stream_id=0)
                    self.flush()
                    self.close()
                    return
                n = self.requests
                if MODE in ("rst", "refuse") and n % 3 == 0:
                    code = ErrorCodes.INTERNAL_ERROR if MODE == "rst" else ErrorCodes.REFUSED_STREAM
                    self.conn.reset_stream(ev.stream_id, code)
                    continue
                self.answer(ev.stream_id)
                if MODE == "goaway_every" and n == 50:
                    self.conn.close_connection(last_stream_id=ev.stream_id)
                    self.flush()
                    self.close()
                    return
            elif isinstance(ev, DataReceived):
                self.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, ConnectionTerminated):
                self.close()
                return
        self.flush()

    def answer(self, stream_id: int) -> None:
        counts["answered"] += 1
        if MODE == "badhpack":
            self.flush()
            frame = HeadersFrame(stream_id, data=b"\xff\xff\xff\xff\xff", flags=["END_HEADERS"])
            assert self.transport is not None
            self.transport.write(frame.serialize())
            return
        self.conn.send_headers(
            stream_id, [(b":status", b"200"), (b"content-length", b"5")], end_stream=False
        )
        self.conn.send_data(stream_id, b"hello", end_stream=True)
        if MODE == "data_after_end":
            self.flush()
            assert self.transport is not None
            self.transport.write(DataFrame(stream_id, data=b"late").serialize())

    def close(self) -> None:
        self.done = True
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.done = True


class Control(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if b"\r\n\r\n" not in data:
            return
        body = json.dumps(counts).encode()
        self.transport.write(  # type: ignore[attr-defined]
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\nConnection: close\r\n\r\n"
            + body
        )
        self.transport.close()


async def main() -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(H2Server, "127.0.0.1", 0)
    control = await loop.create_server(Control, "127.0.0.1", 0)
    h2_port = server.sockets[0].getsockname()[1]
    ctl_port = control.sockets[0].getsockname()[1]
    print(f"READY {h2_port} {ctl_port}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main())
