"""The engine's own sockets: a non-blocking connect, one epoll, and a minimal transport.

Why not `loop.create_connection`: a new connection per request (`--no-keepalive`, and
every server that answers `Connection: close`, gunicorn's sync worker first) is where a
load tester's cost is the connect itself, and uvloop's costs a Task, a coroutine and a
Future per connect, a libuv handle, and getsockname/getpeername/getsockopt/setsockopt on
every new socket (bench/connect_rate.py measured the engine at 1.49× wrk's CPU per
connection, and a bare uvloop client at 1.38×). Here a connect is what wrk does: one
`socket()`, one `connect()`, one `epoll_ctl(ADD)`, one `send()`, one `recv()`, one
`close()` — and on loopback, where the handshake completes inside `connect()`, not even
a wake-up for writability: the request is sent right after `connect()`, and that send
succeeding is what says the connection is established (EAGAIN: still connecting).

The sockets live on the loop's one epoll (engine/poller.py `Poller`), whose reader hands
each ready socket its events.

- `SocketTransport`: what `Connection` needs of an asyncio transport (`write`, `close`,
  `abort`, `get_extra_info`, `is_closing`) plus `pause_reading`/`resume_reading` for
  paced reads (slow clients). `close()` closes the descriptor at once, so the FIN leaves
  inside the response callback (as wrk does) without the shutdown(2) that uvloop's
  deferred close needed, and calls `connection_lost` at once too (an asyncio transport
  calls it on the loop's next turn: the engine's protocols end a connection only once
  they are done with it, so nothing is gained by waiting, and a Handle per connection
  is saved). The protocol is told of the connection by `connected(transport, sent)`:
  `sent` says the first request went out with the connect (see `connect`).
- `engine/_cycle.c`'s `Transport`: SocketTransport in C, which every plain-TCP
  connection starts on (and TlsTransport, with OpenSSL driven from C: every https
  connection but a slow client's), plus two things of its own. `recycle`: closed after its
  answer, the slot's next connection is opened in the call that closes the last one,
  with no Python object made (the Connection stays; engine/connection.py
  `data_received`). Its framer (engine/_frame.h): kept alive, a read that is one whole
  ordinary answer goes to the connection as `answer(status, size, True)`, without the
  parser; the first answer it does not take moves the connection to the loop's
  transport (`detach`), as every kept-alive one did before. Its `Dispatcher` is the
  loop's reader for the epoll, in C (`Poller.poll` while rate mode's timers are on it).
  This class stays the reference: the C one does what it does, call for call
  (tests/integration/test_c_transport.py counts every response shape on both).
- `TlsTransport`: the same over an `ssl.SSLObject` and two memory BIOs, so the TCP
  connect, the TLS handshake and the first byte are timed apart, and a session can be
  offered for resumption (`SSLContext.wrap_bio(session=…)`), which asyncio's
  `create_connection(ssl=…)` cannot do. The reference for the C transport's TLS
  (tests/integration/test_c_transport_tls.py), and what slow clients use (their pacing
  is Python's): its Python calls per record and handshake step cost a connection
  per request 1.1-1.5x wrk's CPU and a resumed one 3x (docs/engine.md).

Connect outcomes: `connected(transport, sent)` on the protocol when established (after
the handshake, with TLS), or `connect_failed(protocol, errno)` on the opener
(`ConnectCallbacks`, the target), which also hears TLS connections' timings
(`connect_done`) and their sessions (`keep_session`, for resumption).

Measured with bench/connect_rate.py and bench/engine_vs_wrk.py: docs/engine.md (the
figures), bench/README.md (the runs).

Long because the two transports are one job: the Python reference that the C transport
(engine/_cycle.c, one type for plain TCP and TLS) mirrors call for call, read side by
side with it and compared with it response shape by response shape
(tests/integration/test_c_transport.py, test_c_transport_tls.py). TlsTransport is
SocketTransport with the TLS steps put in (`_established`, `on_event`, `_read`,
`write`, `close`, `_close_socket`): it overrides the base's steps and works on its
slots and helpers (`sock`, `out`, `state`, `_flush`, `_lost`), so in two files the
base's internals would become an interface between modules. Nor is there a cheaper cut:
a TLS layer wrapped around a plain transport instead of a subclass would add a Python
call per read and per write of every https request, where Python's calls per TLS record
are what made this transport cost 1.13x wrk's CPU per kept-alive HTTPS request, and the
C one worth writing (engine/_cycle.c, docs/engine.md).
"""

from __future__ import annotations

import _socket
import contextlib
import errno
import socket
import ssl
import struct
from select import EPOLLERR, EPOLLET, EPOLLHUP, EPOLLIN, EPOLLOUT, EPOLLRDHUP
from time import perf_counter_ns
from typing import Any, Protocol

from stackrace.engine.poller import Poller

# below glibc's mmap threshold (128 KB): a larger recv() buffer is mmap()ed, mremap()ed
# and munmap()ed on every read, three system calls per response
_READ_SIZE = 65_536
_PULL_READS = 16  # reads on one event before the loop's other work gets a turn
_EVENTS = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET
_READABLE = EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR
_NONBLOCK = _socket.SOCK_STREAM | _socket.SOCK_NONBLOCK | _socket.SOCK_CLOEXEC

CONNECTING = 0
OPEN = 1
HANDSHAKE = 2
CLOSED = 3


class ConnectCallbacks(Protocol):
    """What a transport reports to whoever opened it (the target). `connect_failed`:
    `err` is the errno, or 0 with `tls` saying why the TLS handshake failed."""

    def connect_failed(self, conn: Any, err: int, tls: str | None = None) -> None: ...
    def connect_done(self, conn: Any, connect_ns: int, tls_ns: int, resumed: bool) -> None: ...
    def keep_session(self, session: ssl.SSLSession | None) -> None: ...


# struct tcp_info (linux/tcp.h): eight one-byte fields, then rto, ato, snd_mss, rcv_mss
# and unacked as u32: the segments sent and not yet acknowledged by the peer's kernel
_TCP_INFO_LEN = 28
_UNACKED = struct.Struct("=I")
_UNACKED_AT = 24


def unacked(sock: Any) -> int:
    """Segments this socket sent that the peer's kernel has not acknowledged (0 when it
    cannot be read). A request the server's kernel holds unread is acknowledged; one
    whose handshake the server's full listen backlog dropped is not."""
    try:
        info = sock.getsockopt(_socket.IPPROTO_TCP, _socket.TCP_INFO, _TCP_INFO_LEN)
    except (OSError, AttributeError):
        return 0
    if len(info) < _TCP_INFO_LEN:
        return 0
    return int(_UNACKED.unpack_from(info, _UNACKED_AT)[0])


def sockaddr(host: str, port: int) -> tuple[int, tuple[Any, ...]]:
    """(family, address) for a host given as an IP literal or a name (resolved once)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP)
    family, _type, _proto, _canon, addr = infos[0]
    return int(family), addr


class SocketTransport:
    """One TCP connection on the engine's epoll (see the module docstring).

    Made and connected in one call, `SocketTransport(poller, protocol, opener, family,
    addr, now, first, nodelay)`: a new connection per request makes one of these per
    request, and every Python call saved here is saved ~10,000 times a second.
    """

    __slots__ = (
        "connect_ns",
        "fd",
        "opener",
        "out",
        "poller",
        "protocol",
        "reading",
        "sock",
        "state",
    )

    def __init__(
        self,
        poller: Poller,
        protocol: Any,
        opener: ConnectCallbacks,
        family: int,
        addr: tuple[Any, ...],
        now: int,
        first: bytes | None = None,
        nodelay: bool = False,
        rcvbuf: int = 0,
    ) -> None:
        """Start the connect. When the kernel settles it inside connect() (as on
        loopback) the protocol hears at once (`connected`), or the opener hears of the
        failure on the loop's next turn; otherwise `state` stays CONNECTING until the
        socket is writable.

        `first`: bytes to write as soon as the connection is up. Written inside the
        connect when it completes there, and the protocol is told so
        (`connected(transport, sent=True)`): the write doubles as the test of whether
        the handshake is done, where a zero-length send() would cost a system call.
        `rcvbuf`: a receive buffer of this size (a slow reader, engine.slow_clients), set
        before the connect so the window the server sees is small from the start.
        """
        self.poller = poller
        self.protocol = protocol
        self.opener = opener
        self.out: bytes | None = None  # bytes not yet accepted by the kernel
        self.reading = True
        self.connect_ns = now
        self.state = CONNECTING
        self.sock: _socket.socket | None
        try:
            sock = self.sock = _socket.socket(family, _NONBLOCK)
        except OSError as exc:
            self.sock = None
            self.fd = -1
            self.state = CLOSED
            poller.call_soon(self._report_failure, exc.errno or errno.EIO)
            return
        fd = self.fd = sock.fileno()
        if nodelay:
            sock.setsockopt(_socket.IPPROTO_TCP, _socket.TCP_NODELAY, 1)
        if rcvbuf:
            sock.setsockopt(_socket.SOL_SOCKET, _socket.SO_RCVBUF, rcvbuf)
        err = sock.connect_ex(addr)
        if err == errno.EINPROGRESS:
            try:
                n = sock.send(first or b"")  # established already?
            except BlockingIOError:
                poller.handlers[fd] = self
                poller.ep.register(fd, _EVENTS)
                return  # the connect is under way: wait for writability
            except OSError as exc:
                self._fail_later(exc.errno or errno.EIO)
                return
        elif err:
            self._fail_later(err)
            return
        else:  # connected at once (a unix-like loopback fast path)
            n = sock.send(first) if first else 0
        poller.handlers[fd] = self
        poller.ep.register(fd, _EVENTS)
        if first is None:
            self._established()
            return
        if n < len(first):
            self.out = first[n:]
        self.state = OPEN
        protocol.connected(self, True)

    def _fail_later(self, err: int) -> None:
        # settled inside connect(): report it on the next turn, so the caller (in the
        # middle of replacing a connection) is never re-entered
        self._close_socket()
        self.poller.call_soon(self._report_failure, err)

    def _report_failure(self, err: int, tls: str | None = None) -> None:
        protocol = self.protocol
        if protocol is not None:  # None: cancelled meanwhile, nothing to report
            self.protocol = None
            self.opener.connect_failed(protocol, err, tls)

    def cancel(self) -> None:
        """Give up a connect under way (a connect timeout, or the slot was dropped):
        close the socket and report nothing; the caller decides what it counts."""
        self.protocol = None
        if self.state != CLOSED:
            self._close_socket()

    def _established(self, sent: bool = False) -> None:
        self.state = OPEN
        self.protocol.connected(self, sent)

    # --- events ----------------------------------------------------------------------

    def on_event(self, ev: int) -> None:
        if self.state == OPEN:
            if ev & EPOLLOUT and self.out is not None:
                self._flush()
            if not ev & _READABLE or not self.reading:
                return
            sock = self.sock
            for _ in range(_PULL_READS):
                try:
                    data = sock.recv(_READ_SIZE)  # type: ignore[union-attr]  # registered: open
                except (BlockingIOError, InterruptedError):
                    return
                except OSError as exc:
                    self._lost(exc)
                    return
                if not data:
                    self._lost(None)  # EOF: the server closed
                    return
                self.protocol.data_received(data)
                # edge-triggered: read again when the buffer was filled (more may
                # wait) or when the server's FIN came with this data (its EOF gives
                # no new edge)
                if len(data) < _READ_SIZE and not ev & EPOLLRDHUP:
                    return
                if self.state != OPEN or not self.reading:
                    return
            # more may wait: read on on the loop's next turn (as TlsTransport._pull)
            self.poller.call_soon(self.on_event, EPOLLIN)
        elif self.state == CONNECTING:
            if ev & (EPOLLERR | EPOLLHUP):
                assert self.sock is not None
                err = self.sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_ERROR)
                if err:
                    self._close_socket()
                    self._report_failure(err)
                    return
            if ev & EPOLLOUT:
                self._established()
                if ev & _READABLE:
                    self.on_event(ev & ~EPOLLOUT)

    def _read(self, ev: int) -> None:
        self.on_event(ev & ~EPOLLOUT)

    # --- what a protocol calls -----------------------------------------------------------

    def write(self, data: bytes) -> None:
        if self.out is not None:
            self.out += data
            return
        if self.state != OPEN:
            return
        try:
            n = self.sock.send(data)  # type: ignore[union-attr]  # OPEN: has a socket
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError as exc:
            self._lost(exc)
            return
        if n < len(data):
            self.out = data[n:]  # the next writability edge sends the rest

    def _flush(self) -> None:
        data = self.out
        assert data is not None and self.sock is not None
        try:
            n = self.sock.send(data)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._lost(exc)
            return
        self.out = data[n:] if n < len(data) else None

    def get_write_buffer_size(self) -> int:
        return len(self.out) if self.out is not None else 0

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        """Read again; what arrived meanwhile (the server's FIN too) gives no new edge,
        so read it now, to the end of what is there (RDHUP: keep reading)."""
        if self.reading or self.state != OPEN:
            return
        self.reading = True
        self._read(EPOLLIN | EPOLLRDHUP)

    def close(self) -> None:
        """Close now (the FIN leaves at once) and tell the protocol, at once too: the
        engine's protocols end a connection only after they are done with it."""
        if self.state == CLOSED:
            return
        protocol = self.protocol
        self.release()
        if protocol is not None:
            protocol.connection_lost(None)

    abort = close

    def release(self) -> None:
        """Close now, and tell nobody: the protocol calling this has finished with the
        connection and done what connection_lost would (the end of a connection per
        request, in its response callback: one call fewer per request)."""
        if self.state == CLOSED:
            return
        self.state = CLOSED
        self.out = None
        poller = self.poller
        del poller.handlers[self.fd]
        if poller.dispatcher.dispatching:
            poller.stale.add(self.fd)
        self.sock.close()  # type: ignore[union-attr]  # open; our FIN leaves now
        self.protocol = None

    def detach(self, family: int) -> socket.socket:
        """Leave the engine's epoll and hand the open socket over (to the event loop's
        own transport, engine.target.Target.hand_over); this transport is done."""
        fd = self.fd
        self.state = CLOSED
        self.protocol = None
        self.poller.forget(fd)
        self.poller.ep.unregister(fd)
        sock, self.sock = self.sock, None
        assert sock is not None and self.out is None
        # family and type given: socket.socket would otherwise ask the kernel for them
        return socket.socket(family, socket.SOCK_STREAM, 0, sock.detach())

    def is_closing(self) -> bool:
        return self.state == CLOSED

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "socket":
            return self.sock
        if name == "peername" and self.sock is not None:
            return self.sock.getpeername()
        return default

    # --- ending ------------------------------------------------------------------------

    def _close_socket(self) -> None:
        self.state = CLOSED
        self.out = None
        sock = self.sock
        if sock is not None:
            self.poller.forget(self.fd)
            sock.close()

    def _lost(self, exc: Exception | None) -> None:
        if self.state == CLOSED:
            return
        self._close_socket()
        self._deliver_lost(exc)

    def _deliver_lost(self, exc: Exception | None) -> None:
        protocol, self.protocol = self.protocol, None
        if protocol is not None:
            protocol.connection_lost(exc)


class TlsTransport(SocketTransport):
    """A SocketTransport carrying TLS: the SSLObject's records go through the socket.

    The connect, the handshake (from the ClientHello to the server's Finished) and, by
    the protocol, the first byte are timed apart; `connect_done` gets the first two."""

    __slots__ = ("_c", "_in", "_out", "context", "hostname", "resume", "session", "ssl", "tcp_ns")

    def __init__(
        self,
        poller: Poller,
        protocol: Any,
        opener: ConnectCallbacks,
        family: int,
        addr: tuple[Any, ...],
        now: int,
        context: ssl.SSLContext,
        hostname: str | None,
        session: ssl.SSLSession | None = None,
        resume: bool = False,
        rcvbuf: int = 0,
    ) -> None:
        self.context = context
        self.hostname = hostname
        self.session = session
        self.resume = resume  # hand this connection's session back when it ends
        self._in = ssl.MemoryBIO()
        self._out = ssl.MemoryBIO()
        self.ssl: ssl.SSLObject | None = None
        # the SSLObject's C object: its read and write without the Python wrapper's frame
        self._c: Any = None
        self.tcp_ns = 0
        # TLS writes records more than once per request: no Nagle
        super().__init__(poller, protocol, opener, family, addr, now, None, True, rcvbuf)

    def _established(self, sent: bool = False) -> None:
        # TCP is up: start the handshake (the ClientHello goes out now)
        self.tcp_ns = perf_counter_ns()
        self.state = HANDSHAKE
        try:
            self.ssl = self.context.wrap_bio(
                self._in, self._out, server_hostname=self.hostname, session=self.session
            )
        except (ssl.SSLError, ValueError) as exc:
            self._handshake_failed(exc)
            return
        self._c = self.ssl._sslobj  # type: ignore[attr-defined]  # private: see _c above
        self._handshake()

    def _handshake(self) -> None:
        assert self.ssl is not None
        try:
            self.ssl.do_handshake()
        except ssl.SSLWantReadError:
            self._send_records()
            return
        except (ssl.SSLError, ssl.CertificateError, OSError) as exc:
            self._send_records()
            self._handshake_failed(exc)
            return
        self._send_records()
        if self.state == CLOSED:
            return
        now = perf_counter_ns()
        self.state = OPEN
        self.opener.connect_done(
            self.protocol, self.tcp_ns - self.connect_ns, now - self.tcp_ns, self.ssl.session_reused
        )
        self.protocol.connected(self, False)
        if self.state == OPEN and self._in.pending:
            self._deliver()  # application data that came with the last handshake records

    def _handshake_failed(self, exc: Exception) -> None:
        self._close_socket()
        if isinstance(exc, ssl.SSLCertVerificationError):
            why = f"certificate: {exc.verify_message}"
        elif isinstance(exc, ssl.SSLError):
            why = exc.reason or type(exc).__name__
        else:
            why = str(exc) or type(exc).__name__
        # on the next turn: this may run inside the connect, and the caller must not be
        # re-entered
        self.poller.call_soon(self._report_failure, 0, why)

    def on_event(self, ev: int) -> None:
        state = self.state
        if state == CONNECTING:
            super().on_event(ev)
            return
        if state == CLOSED:
            return
        if ev & EPOLLOUT and self.out is not None:
            self._flush()
        if not ev & _READABLE or (state == OPEN and not self.reading):
            return
        if not self._pull(ev):
            return
        if state == HANDSHAKE:
            self._handshake()
        else:
            self._deliver()

    def _pull(self, ev: int) -> bool:
        """Socket → incoming BIO; False when the connection ended."""
        sock = self.sock
        assert sock is not None
        for _ in range(_PULL_READS):
            try:
                data = sock.recv(_READ_SIZE)
            except (BlockingIOError, InterruptedError):
                return True
            except OSError as exc:
                if self.state == HANDSHAKE:
                    self._handshake_failed(exc)
                else:
                    self._lost(exc)
                return False
            if not data:
                if self.state == HANDSHAKE:
                    if self._in.pending:
                        # what came before the EOF may say why (plain HTTP answering the
                        # ClientHello: "wrong version number"): the handshake reads it
                        # first, as the C transport does (read by read); when both came in
                        # one event this said "closed during the handshake"
                        self._in.write_eof()
                        self._handshake()
                        if self.state == OPEN:
                            self._deliver()  # done, then closed: the EOF is read as such
                        if self.state != HANDSHAKE:
                            return False
                    self._handshake_failed(ConnectionResetError("closed during the handshake"))
                    return False
                self._in.write_eof()
                return True
            self._in.write(data)
            if len(data) < _READ_SIZE and not ev & EPOLLRDHUP:
                return True
        # More may wait (edge-triggered: no new edge for it): read on on the loop's next
        # turn, after what came is delivered. A server writing without end kept this loop
        # reading, the engine's timers and reports starved, until the driver declared the
        # engine lost (tests/hardening/test_tls_hostile.py, flood).
        self.poller.call_soon(self.on_event, EPOLLIN)
        return True

    def _read(self, ev: int) -> None:
        if self._pull(ev):
            self._deliver()

    def _deliver(self) -> None:
        """Decrypt what the incoming BIO holds and hand it to the protocol. A read is
        tried again only while encrypted bytes are left: the usual last read, the one
        that finds nothing, would end in an SSLWantReadError, and an exception costs
        more than a record's decryption."""
        read = self._c.read
        incoming = self._in
        while self.state == OPEN and self.reading:
            try:
                data = read(_READ_SIZE)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:
                self._lost(None)  # close_notify: the server ended the session
                return
            except ssl.SSLError as exc:
                self._lost(exc)
                return
            if not data:
                self._lost(None)
                return
            self.protocol.data_received(data)
            if not incoming.pending:
                break
        if self.state == OPEN and self._out.pending:
            self._send_records()  # e.g. a key update answered
        if self.state == OPEN and self._in.eof:
            self._lost(None)

    def write(self, data: bytes) -> None:
        if self.state != OPEN or self._c is None:
            return
        try:
            self._c.write(data)
        except ssl.SSLError as exc:
            self._lost(exc)
            return
        self._send_records()

    def _send_records(self) -> None:
        records = self._out.read()
        if not records:
            return
        if self.out is not None:
            self.out += records
            return
        try:
            n = self.sock.send(records)  # type: ignore[union-attr]  # open
        except (BlockingIOError, InterruptedError):
            n = 0
        except OSError as exc:
            self._lost(exc)
            return
        if n < len(records):
            self.out = records[n:]

    def close(self) -> None:
        if self.state == OPEN and self.ssl is not None:
            # close_notify, so the server sees an orderly end, not a truncation
            with contextlib.suppress(ssl.SSLError, ValueError):
                self.ssl.unwrap()
            self._send_records()
        self._abort()

    def abort(self) -> None:
        self._abort()

    def _abort(self) -> None:
        if self.state == CLOSED:
            return
        self._close_socket()
        protocol, self.protocol = self.protocol, None
        if protocol is not None:
            protocol.connection_lost(None)

    def _close_socket(self) -> None:
        if self.resume and self.state == OPEN and self.ssl is not None:
            # TLS 1.3 sends its tickets after the handshake: by the end they are here
            self.opener.keep_session(self.ssl.session)
        super()._close_socket()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return self.ssl
        return super().get_extra_info(name, default)
