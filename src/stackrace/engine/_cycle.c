/* The engine's socket transport in C: plain TCP or TLS, kept alive or a connection per
   request (engine/transport.py).

   `Transport` is `transport.SocketTransport` for plain TCP, the same interface and the
   same behaviour call for call (the Python class is the reference: its docstrings say
   why each step is what it is), plus `recycle`: the end of a connection-per-request
   answer and the start of the next one in one call — our FIN now, then socket, connect,
   send and epoll_ctl for the same slot, without a Python object made or dropped.

   Why C: bench/connect_rate.py measured the engine's own system calls in C at 0.86× wrk's
   CPU per connection, and the same loop with every answer counted by a Python function
   (bench/c_cycle_hybrid.py) at 0.86× too, while the Python transport, its socket
   object and the Connection made per request cost 1.18×. The accounting stays in
   Python (engine/connection.py), in one place; this file only moves bytes.

   On a kept-alive connection (`frame`), the first read after a request that is one whole
   ordinary response (_frame.h) goes to `protocol.answer(status, size, True)` instead of
   data_received: one Python call per answer, no bytes object, no parse in Python's
   parser (engine/connection.py `answer`).

   TLS (`tls`, a TlsContext: engine/_tls.h) is TlsTransport's, call for call, with OpenSSL
   driven from here: the same connect, then the handshake over two memory BIOs (the
   transport moves the records, so one recv() per edge as for plain TCP), its time apart
   from the connect's (`opener.connect_done`), a failure reported as `connect_failed(…,
   0, why)` with OpenSSL's reason; then the same reads, each read's records decrypted
   into one piece for the framer or data_received. Two things of its own: the request
   given as `first` goes out with the client's last handshake flight (in TLS 1.3 one
   send() with its Finished) and the protocol hears `connected(transport, True)`; and
   `recycle` works for TLS too (close_notify, then the next connection's handshake).
   Why: Python's ssl layer costs a few Python calls per record and per handshake step;
   measured against wrk in the same rounds (docs/engine.md, HTTPS), the Python transport
   took 1.13x wrk's CPU per kept-alive request, 1.17-1.27x per full handshake and
   2.9-3.6x per resumed one; this one 1.06x, 1.02-1.08x and 1.10x.

   Events and results go where SocketTransport sends them: `protocol.connected(transport,
   sent)`, `protocol.data_received(data)`, `protocol.connection_lost(exc)`, and
   `opener.connect_failed(protocol, errno)` on the loop's next turn (`poller.call_soon`).
   The poller's `handlers` dict maps each descriptor to its transport; a descriptor closed
   while the dispatcher runs a batch goes into `poller.stale`. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* The head every type of this extension shares, written once: its name under
   stackrace.engine._cycle, its size, flags and doc; made by PyType_GenericNew then
   T_init, freed by T_dealloc. Defined before the headers below, whose types use it. */
#define CYCLE_TYPE(T, flags, doc)                                                         \
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stackrace.engine._cycle." #T,             \
    .tp_basicsize = sizeof(T), .tp_flags = (flags), .tp_doc = (doc),                     \
    .tp_new = PyType_GenericNew, .tp_init = (initproc)T##_init,                          \
    .tp_dealloc = (destructor)T##_dealloc

#include "_frame.h"
#include "_h2.h"
#include "_tls.h"

/* transport.py's states */
#define CONNECTING 0
#define OPEN 1
#define HANDSHAKE 2
#define CLOSED 3

#define READ_SIZE 65536
/* Reads on one event before the loop's other work gets a turn (transport.py's
   _PULL_READS, the same 1 MiB): a socket that a faster writer keeps full never drains,
   and reading it until it did held the event loop, the engine's reports and timers with
   it (tests/integration/test_engine_flood.py: reports 3.6-4.6 s apart at 0.25 s asked,
   against a server writing without pause). What is left is read on the loop's next turn
   (`more`, through poller.call_soon): edge-triggered, no new edge would come for it. */
#define READ_BUDGET 16
#define EVENTS (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET)
#define READABLE (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)

static PyObject *str_dispatcher, *str_call_soon, *str_more, *str_stream_failed, *str_on_body, *str_move,
    *str_goaway, *str_settings, *str_connected, *str_data_received, *str_connection_lost, *str_connect_failed,
    *str_on_event, *str_answer, *str_connect_done, *str_report_failure;

/* The reader the event loop calls when the engine's epoll is ready (Poller.dispatcher):
   every ready descriptor's handler gets its events. A C object, so a wake-up costs no
   Python frame (a batch holds one or two answers at c=50: per wake-up costs count). */
typedef struct {
    PyObject_HEAD
    int epfd;
    int dispatching; /* inside a batch: a descriptor closed now goes into `stale` */
    int yielded; /* a transport left reads for the next turn (READ_BUDGET): no repoll */
    PyObject *handlers; /* Poller.handlers: descriptor -> handler */
    PyObject *stale;    /* Poller.stale: descriptors closed in this batch */
} Dispatcher;

static PyTypeObject DispatcherType;

/* A target's closed loop on kept-alive connections, counted here (engine/target.py
   `kept`): while a connection is `fast` (closed loop, no budget, not paused, not
   retiring) and its answer is framed, 2xx and timed from its send (no rate-mode intent),
   the transport counts the answer and writes the next request itself, with no Python
   frame: its latency's slot in the target's counts (the list itself, as `tally`), the
   request's start on the connection (`start_ns`, which the sweep and the waiting gauge
   read), and the interval's answers, sends, bytes and last answer's time here, which
   the target takes before every read of them (`Target.take_kept`). Anything else (a 3xx
   to 5xx, a read the framer refuses, a connection not `fast`) goes to Python's
   `answer` as before. Why: per answer, `answer` and `count_answer` were the engine's
   last Python frames on the hot path (~0.3-0.4 µs a request of ~6.6;
   bench/results/2026-11-29-startup.md). */
typedef struct {
    PyObject_HEAD
    PyObject *counts;  /* Target.counts: the latency histogram's slots */
    PyObject *request; /* Target.request: the bytes every send writes */
    long long requests, sent, bytes, last_done;
} KeptLoop;

static PyTypeObject KeptLoopType;

typedef struct {
    PyObject_HEAD
    int fd;
    int state;
    int reading;
    long long connect_ns;
    int family;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    int nodelay;
    int rcvbuf;
    int frame; /* frame the answers of this connection's requests (_frame.h) */
    int armed; /* a request went out since the last read: the next read may be its answer */
    KeptLoop *kept; /* the target's closed loop counted here, or NULL (KeptLoop) */
    unsigned long connection; /* counts the connections made (recycle starts another) */
    unsigned long more; /* the connection whose read past READ_BUDGET is due (`_more`), or 0 */
    PyObject *poller;
    Dispatcher *dispatcher; /* poller.dispatcher: its epoll, handlers and stale set */
    PyObject *protocol; /* None once told of the end, or cancelled */
    PyObject *opener;
    PyObject *out;      /* bytes the kernel has not taken yet, or NULL */
    /* TLS: the target's context (NULL: plain TCP), this connection's SSL once TCP is up,
       when it was (the handshake's start), and the request to write once it is done */
    TlsContext *tls;
    SSL *ssl;
    long long tcp_ns;
    PyObject *request;
    /* HTTP/2 (_h2.h): the session (NULL: HTTP/1.1), its open streams, inside a read
       (what to send waits for the read's end), the last stream id of a GOAWAY received
       (-1: none), the SETTINGS_MAX_CONCURRENT_STREAMS told to the protocol, and why
       nghttp2 ended the session when the server broke the protocol ("" : it did not) */
    nghttp2_session *h2;
    H2Open *streams;
    int h2_reading;
    int32_t goaway_last;
    uint32_t max_streams;
    int h2_python_error;
    char fault[160];
} Transport;

static PyTypeObject TransportType;

/* --- helpers --------------------------------------------------------------------------- */

static int parse_addr(Transport *self, int family, PyObject *addr) {
    /* (host, port) for AF_INET, (host, port, flowinfo, scope_id) for AF_INET6 */
    const char *host;
    int port;
    unsigned int flow = 0, scope = 0;
    if (!PyArg_ParseTuple(addr, "si|II", &host, &port, &flow, &scope)) return -1;
    memset(&self->addr, 0, sizeof self->addr);
    if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)&self->addr;
        a->sin_family = AF_INET;
        a->sin_port = htons((unsigned short)port);
        if (inet_pton(AF_INET, host, &a->sin_addr) != 1) goto bad;
        self->addrlen = sizeof *a;
    } else if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&self->addr;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((unsigned short)port);
        a->sin6_flowinfo = htonl(flow);
        a->sin6_scope_id = scope;
        if (inet_pton(AF_INET6, host, &a->sin6_addr) != 1) goto bad;
        self->addrlen = sizeof *a;
    } else {
        PyErr_Format(PyExc_ValueError, "address family %d is not TCP/IP", family);
        return -1;
    }
    return 0;
bad:
    PyErr_Format(PyExc_ValueError, "not an IP address: %s", host);
    return -1;
}

static PyObject *fd_key(int fd) { return PyLong_FromLong(fd); }

/* time.perf_counter_ns(): the clock of every time the engine keeps */
static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* the descriptor leaves the poller's map (Poller.forget; `must_exist`: as `del`), and
   this batch's events for its number are dropped */
static int forget(Transport *self, int must_exist) {
    PyObject *key = fd_key(self->fd);
    if (key == NULL) return -1;
    int r = 0;
    if (must_exist) {
        r = PyDict_DelItem(self->dispatcher->handlers, key);
    } else {
        int has = PyDict_Contains(self->dispatcher->handlers, key);
        if (has < 0) r = -1;
        else if (has) r = PyDict_DelItem(self->dispatcher->handlers, key);
    }
    if (r == 0 && self->dispatcher->dispatching) r = PySet_Add(self->dispatcher->stale, key);
    Py_DECREF(key);
    return r;
}

static int watch(Transport *self) {
    PyObject *key = fd_key(self->fd);
    if (key == NULL) return -1;
    int r = PyDict_SetItem(self->dispatcher->handlers, key, (PyObject *)self);
    Py_DECREF(key);
    if (r < 0) return -1;
    struct epoll_event ev = {.events = EVENTS, .data.fd = self->fd};
    if (epoll_ctl(self->dispatcher->epfd, EPOLL_CTL_ADD, self->fd, &ev) < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    return 0;
}

/* SSL objects alive (made by tls_begin, not yet freed): `tls_alive()`, what
   bench/tls_hostile.py checks is back to 0 once every connection has ended */
static Py_ssize_t ssl_alive;

static void free_ssl(Transport *self) {
    if (self->ssl != NULL) {
        tls_keep(self->tls, self->ssl); /* --tls-resume: its session for the next one */
        SSL_free(self->ssl);
        self->ssl = NULL;
        ssl_alive--;
    }
}

/* the descriptor closes, and with it the connection's TLS state (a next connection of
   the same transport, `recycle`, starts its own) */
static void h2_free(Transport *self);

static void close_fd(Transport *self) {
    if (self->fd >= 0) {
        close(self->fd);
        self->fd = -1;
    }
    /* inside nghttp2's read the session is still in use: freed once the read returns */
    if (!self->h2_reading) h2_free(self);
    free_ssl(self);
    Py_CLEAR(self->request);
}

/* _close_socket: CLOSED, nothing more to write, the descriptor forgotten and closed */
static int close_socket(Transport *self) {
    self->state = CLOSED;
    Py_CLEAR(self->out);
    if (self->fd >= 0) {
        if (forget(self, 0) < 0) return -1;
        close_fd(self);
    }
    return 0;
}

/* the opener hears `connect_failed(protocol, err, why)` on the loop's next turn (`why`:
   a TLS handshake's failure, err 0) */
static int call_soon_failure(Transport *self, int err, const char *why) {
    PyObject *report = PyObject_GetAttr((PyObject *)self, str_report_failure);
    if (report == NULL) return -1;
    PyObject *code = PyLong_FromLong(err);
    PyObject *text = why ? PyUnicode_DecodeUTF8(why, (Py_ssize_t)strlen(why), "replace") : NULL;
    PyObject *r = NULL;
    if (code != NULL && (why == NULL || text != NULL))
        r = PyObject_CallMethodObjArgs(self->poller, str_call_soon, report, code, text, NULL);
    Py_XDECREF(code);
    Py_XDECREF(text);
    Py_DECREF(report);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* _fail_later: settled inside connect(); reported on the next turn, so that the caller
   (perhaps in the middle of replacing a connection) is never re-entered */
static int fail_later(Transport *self, int err) {
    /* not registered yet: nothing for the poller to forget */
    self->state = CLOSED;
    Py_CLEAR(self->out);
    close_fd(self);
    return call_soon_failure(self, err, NULL);
}

static int tls_begin(Transport *self);
static int h2_new(Transport *self);
static PyObject *h2_deliver(Transport *self, const char *buf, Py_ssize_t n);

/* socket, connect, and the first bytes with it. Returns the state reached: OPEN (what
   of `first` the kernel did not take waits in `out` for the next writability edge),
   CONNECTING (registered, waiting for writability), HANDSHAKE (TLS: TCP is up and the
   ClientHello out; `first` waits for the handshake's end) or CLOSED (a failure,
   reported on the next turn); -1 with an exception set. `first`: bytes, or NULL. */
static int start(Transport *self, PyObject *first_obj) {
    self->connection++;
    self->reading = 1;
    self->armed = 0;
    Py_CLEAR(self->out);
    Py_CLEAR(self->request);
    self->state = CONNECTING;
    const char *first = NULL;
    Py_ssize_t first_len = 0;
    if (self->tls != NULL) {
        /* TLS: nothing goes with the connect; the empty send tests it (EAGAIN: under way) */
        Py_XINCREF(first_obj);
        self->request = first_obj;
    } else if (first_obj != NULL) {
        first = PyBytes_AS_STRING(first_obj);
        first_len = PyBytes_GET_SIZE(first_obj);
    }
    int fd = socket(self->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int err = errno ? errno : EIO;
        self->fd = -1;
        self->state = CLOSED;
        Py_CLEAR(self->request);
        if (call_soon_failure(self, err, NULL) < 0) return -1;
        return CLOSED;
    }
    self->fd = fd;
    int one = 1;
    if (self->nodelay) setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (self->rcvbuf) setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &self->rcvbuf, sizeof self->rcvbuf);
    ssize_t n = 0;
    if (connect(fd, (struct sockaddr *)&self->addr, self->addrlen) < 0) {
        if (errno != EINPROGRESS) {
            if (fail_later(self, errno) < 0) return -1;
            return CLOSED;
        }
        /* established already? the send says (EAGAIN: the connect is under way) */
        n = send(fd, first ? first : "", first ? (size_t)first_len : 0, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (watch(self) < 0) return -1;
                return CONNECTING;
            }
            if (fail_later(self, errno ? errno : EIO) < 0) return -1;
            return CLOSED;
        }
    } else if (first != NULL && first_len) {
        n = send(fd, first, (size_t)first_len, MSG_NOSIGNAL);
        if (n < 0) n = 0; /* the rest goes out on the next writability edge */
    }
    if (watch(self) < 0) return -1;
    if (self->tls != NULL) return tls_begin(self);
    if (first != NULL && n < first_len) {
        self->out = PyBytes_FromStringAndSize(first + n, first_len - n);
        if (self->out == NULL) return -1;
    }
    self->state = OPEN;
    self->armed = self->frame && first != NULL; /* the request is out (or queued) */
    return OPEN;
}

/* --- the object -------------------------------------------------------------------------- */

static int Transport_init(Transport *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"poller", "protocol", "opener", "family", "addr", "now",
                             "first", "nodelay", "rcvbuf", "frame", "tls", "h2", "kept", NULL};
    PyObject *poller, *protocol, *opener, *addr, *first = Py_None, *tls = Py_None,
             *kept = Py_None;
    int family, nodelay = 0, rcvbuf = 0, frame = 0, h2 = 0;
    long long now;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOiOL|OpipOpO", kwlist, &poller, &protocol,
                                     &opener, &family, &addr, &now, &first, &nodelay, &rcvbuf,
                                     &frame, &tls, &h2, &kept))
        return -1;
    if (self->dispatcher != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "a Transport is made once");
        return -1;
    }
    if (first != Py_None && !PyBytes_Check(first)) {
        PyErr_SetString(PyExc_TypeError, "first: bytes or None");
        return -1;
    }
    if (tls != Py_None) {
        if (!PyObject_TypeCheck(tls, &TlsContextType) || ((TlsContext *)tls)->ctx == NULL) {
            PyErr_SetString(PyExc_TypeError, "tls: a TlsContext or None");
            return -1;
        }
        self->tls = (TlsContext *)Py_NewRef(tls);
    }
    self->fd = -1;
    self->goaway_last = -1;
    if (h2) {
        if (first != Py_None || frame) {
            PyErr_SetString(PyExc_ValueError, "h2: no first request, no framing");
            return -1;
        }
        if (h2_new(self) < 0) return -1;
    }
    if (kept != Py_None) {
        if (!PyObject_TypeCheck(kept, &KeptLoopType) || !frame || tls != Py_None || h2) {
            PyErr_SetString(PyExc_TypeError, "kept: a KeptLoop, on a framed plain connection");
            return -1;
        }
        Py_XSETREF(self->kept, (KeptLoop *)Py_NewRef(kept));
    }
    self->frame = frame;
    self->family = family;
    self->nodelay = nodelay;
    self->rcvbuf = rcvbuf;
    self->connect_ns = now;
    if (parse_addr(self, family, addr) < 0) return -1;
    Py_INCREF(poller);
    Py_XSETREF(self->poller, poller);
    Py_INCREF(protocol);
    Py_XSETREF(self->protocol, protocol);
    Py_INCREF(opener);
    Py_XSETREF(self->opener, opener);
    PyObject *d = PyObject_GetAttr(poller, str_dispatcher);
    if (d == NULL) return -1;
    if (!PyObject_TypeCheck(d, &DispatcherType)) {
        Py_DECREF(d);
        PyErr_SetString(PyExc_TypeError, "poller.dispatcher is not a Dispatcher");
        return -1;
    }
    Py_XSETREF(self->dispatcher, (Dispatcher *)d);
    int state = start(self, first == Py_None ? NULL : first);
    if (state < 0) return -1;
    if (state != OPEN) return 0;
    PyObject *r = PyObject_CallMethodObjArgs(protocol, str_connected, self,
                                             first == Py_None ? Py_False : Py_True, NULL);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

static int Transport_traverse(Transport *self, visitproc visit, void *arg) {
    Py_VISIT(self->poller);
    Py_VISIT(self->dispatcher);
    Py_VISIT(self->protocol);
    Py_VISIT(self->opener);
    Py_VISIT(self->tls);
    return 0;
}

static int Transport_clear(Transport *self) {
    Py_CLEAR(self->poller);
    Py_CLEAR(self->dispatcher);
    Py_CLEAR(self->protocol);
    Py_CLEAR(self->opener);
    Py_CLEAR(self->out);
    Py_CLEAR(self->request);
    free_ssl(self); /* before its context */
    Py_CLEAR(self->tls);
    Py_CLEAR(self->kept);
    if (!self->h2_reading) h2_free(self);
    return 0;
}

static void Transport_dealloc(Transport *self) {
    PyObject_GC_UnTrack(self);
    /* a transport dropped while open (never in the engine: every path closes it) must not
       leak its descriptor */
    close_fd(self);
    Transport_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* --- TLS: the handshake and the records ------------------------------------------------- */

/* the handshake failed: closed, and the opener hears why (OpenSSL's reason, else `dflt`)
   on the loop's next turn, as TlsTransport._handshake_failed (this may run inside the
   connect, whose caller must not be re-entered). Returns CLOSED, or -1. */
static int tls_failed(Transport *self, const char *dflt) {
    char why[256];
    tls_why(self->ssl, dflt, why, sizeof why); /* before close_socket frees the SSL */
    if (close_socket(self) < 0) return -1;
    if (call_soon_failure(self, 0, why) < 0) return -1;
    return CLOSED;
}

/* `len` more bytes for `out`, what the kernel has not taken yet */
static int append_out(Transport *self, const char *data, Py_ssize_t len) {
    if (self->out == NULL) {
        self->out = PyBytes_FromStringAndSize(data, len);
        return self->out == NULL ? -1 : 0;
    }
    Py_ssize_t have = PyBytes_GET_SIZE(self->out);
    PyObject *joined = PyBytes_FromStringAndSize(NULL, have + len);
    if (joined == NULL) return -1;
    memcpy(PyBytes_AS_STRING(joined), PyBytes_AS_STRING(self->out), (size_t)have);
    memcpy(PyBytes_AS_STRING(joined) + have, data, (size_t)len);
    Py_SETREF(self->out, joined);
    return 0;
}

/* The records OpenSSL wrote (handshake messages, requests, alerts, close_notify) go to
   the socket; what the kernel does not take waits in `out` for the next writability
   edge. 0, or the errno of a send that failed (the caller ends the connection), or -1
   with an exception set. */
static int send_records(Transport *self) {
    static char chunk[READ_SIZE];
    BIO *records = SSL_get_wbio(self->ssl);
    for (;;) {
        int len = BIO_read(records, chunk, (int)sizeof chunk);
        if (len <= 0) return 0;
        if (self->out != NULL) {
            if (append_out(self, chunk, len) < 0) return -1;
            continue;
        }
        ssize_t n = send(self->fd, chunk, (size_t)len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return errno ? errno : EIO;
            n = 0;
        }
        if (n < len && append_out(self, chunk + n, len - n) < 0) return -1;
    }
}

/* One step of the handshake with what has come in (the first: the ClientHello). At its
   end the request, when given, goes out with the client's last flight (one send() with
   TLS 1.3's Finished), the opener hears the connect's and the handshake's times
   (`connect_done`) and the protocol `connected(self, sent)`. Returns the state reached,
   or -1 with an exception set. */
static int tls_step(Transport *self) {
    SSL *ssl = self->ssl;
    ERR_clear_error();
    int r = SSL_do_handshake(ssl);
    int e = r == 1 ? SSL_ERROR_NONE : SSL_get_error(ssl, r);
    int sent = 0;
    if (e == SSL_ERROR_NONE && self->request != NULL) {
        PyObject *request = self->request;
        Py_ssize_t len = PyBytes_GET_SIZE(request);
        if (len > 0 && SSL_write(ssl, PyBytes_AS_STRING(request), (int)len) <= 0)
            e = SSL_ERROR_SSL;
        Py_CLEAR(self->request);
        sent = 1;
    }
    if (e != SSL_ERROR_NONE && e != SSL_ERROR_WANT_READ) {
        char why[256];
        tls_why(ssl, "handshake failed", why, sizeof why);
        if (send_records(self) < 0) return -1; /* the alert first: the server learns why */
        return tls_failed(self, why);
    }
    int err = send_records(self);
    if (err < 0) return -1;
    if (err > 0) return tls_failed(self, strerror(err));
    if (e == SSL_ERROR_WANT_READ) return HANDSHAKE;
    if (self->h2 != NULL) {
        const unsigned char *alpn = NULL;
        unsigned int alpn_len = 0;
        SSL_get0_alpn_selected(ssl, &alpn, &alpn_len);
        if (alpn_len != 2 || memcmp(alpn, "h2", 2) != 0)
            return tls_failed(self, "the server did not choose h2 by ALPN (HTTP/1.1 only?)");
    }
    long long done = now_ns();
    int resumed = SSL_session_reused(ssl);
    unsigned long connection = self->connection;
    self->state = OPEN;
    self->armed = self->frame && sent; /* its answer is the next read's */
    PyObject *protocol = Py_NewRef(self->protocol);
    PyObject *tcp = PyLong_FromLongLong(self->tcp_ns - self->connect_ns);
    PyObject *tls = PyLong_FromLongLong(done - self->tcp_ns);
    PyObject *res = tcp && tls ? PyObject_CallMethodObjArgs(self->opener, str_connect_done, protocol,
                                                            tcp, tls, resumed ? Py_True : Py_False,
                                                            NULL)
                               : NULL;
    Py_XDECREF(tcp);
    Py_XDECREF(tls);
    if (res != NULL && self->state == OPEN && self->connection == connection &&
        protocol != Py_None) {
        Py_DECREF(res);
        res = PyObject_CallMethodObjArgs(protocol, str_connected, self, sent ? Py_True : Py_False,
                                         NULL);
    }
    Py_DECREF(protocol);
    if (res == NULL) return -1;
    Py_DECREF(res);
    return self->state;
}

/* TCP is up: the handshake starts, its ClientHello out now. Returns the state reached
   (HANDSHAKE, or CLOSED: failed, the opener hears on the next turn), or -1. */
static int tls_begin(Transport *self) {
    self->tcp_ns = now_ns();
    self->state = HANDSHAKE;
    ERR_clear_error();
    self->ssl = tls_new(self->tls);
    if (self->ssl == NULL) return tls_failed(self, "OpenSSL could not start a handshake");
    ssl_alive++;
    return tls_step(self);
}

/* close_notify goes out (best effort, as TlsTransport.close), so the server sees an
   orderly end rather than a truncation; -1 with an exception set */
static int close_notify(Transport *self) {
    if (self->ssl == NULL || self->state != OPEN) return 0;
    ERR_clear_error();
    int r = SSL_shutdown(self->ssl) < 0 ? 0 : send_records(self);
    ERR_clear_error();
    return r < 0 ? -1 : 0;
}

/* --- ending ------------------------------------------------------------------------------ */

static PyObject *deliver_lost(Transport *self, PyObject *exc) {
    PyObject *protocol = self->protocol;
    self->protocol = Py_NewRef(Py_None);
    if (protocol != Py_None) {
        PyObject *r = PyObject_CallMethodObjArgs(protocol, str_connection_lost, exc, NULL);
        Py_DECREF(protocol);
        if (r == NULL) return NULL;
        Py_DECREF(r);
    } else {
        Py_DECREF(protocol);
    }
    Py_RETURN_NONE;
}

static PyObject *lost(Transport *self, int err) {
    if (self->state == CLOSED) Py_RETURN_NONE;
    if (self->state == HANDSHAKE) {
        /* nothing connected yet: a handshake that failed, not a connection lost */
        ERR_clear_error();
        if (tls_failed(self, err ? strerror(err) : "closed during the handshake") < 0)
            return NULL;
        Py_RETURN_NONE;
    }
    if (close_socket(self) < 0) return NULL;
    if (!err) return deliver_lost(self, Py_None);
    PyObject *exc = PyObject_CallFunction(PyExc_OSError, "is", err, strerror(err));
    if (exc == NULL) return NULL;
    PyObject *r = deliver_lost(self, exc);
    Py_DECREF(exc);
    return r;
}

/* a TLS connection fails after its handshake (a bad record, an alert): lost, with why */
static PyObject *lost_why(Transport *self, const char *why) {
    if (self->state == CLOSED) Py_RETURN_NONE;
    if (close_socket(self) < 0) return NULL;
    PyObject *exc = PyObject_CallFunction(PyExc_ConnectionError, "s", why);
    if (exc == NULL) return NULL;
    PyObject *r = deliver_lost(self, exc);
    Py_DECREF(exc);
    return r;
}

/* an open connection ends: CLOSED, nothing more to write, the descriptor out of the
   poller's map (it must be there, as `del poller.handlers[fd]`) and closed: our FIN
   leaves now */
static int shut(Transport *self) {
    self->state = CLOSED;
    Py_CLEAR(self->out);
    if (forget(self, 1) < 0) return -1;
    close_fd(self);
    return 0;
}

static PyObject *Transport_abort(Transport *self, PyObject *unused) {
    if (self->state == CLOSED) Py_RETURN_NONE;
    if (shut(self) < 0) return NULL;
    return deliver_lost(self, Py_None);
}

/* abort, after close_notify on TLS */
static PyObject *Transport_close(Transport *self, PyObject *unused) {
    if (close_notify(self) < 0) return NULL;
    return Transport_abort(self, unused);
}

static PyObject *Transport_release(Transport *self, PyObject *unused) {
    if (self->state == CLOSED) Py_RETURN_NONE;
    if (close_notify(self) < 0 || shut(self) < 0) return NULL;
    Py_SETREF(self->protocol, Py_NewRef(Py_None));
    Py_RETURN_NONE;
}

static PyObject *Transport_cancel(Transport *self, PyObject *unused) {
    Py_SETREF(self->protocol, Py_NewRef(Py_None));
    if (self->state != CLOSED && close_socket(self) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Transport_report_failure(Transport *self, PyObject *args) {
    int err;
    PyObject *tls = Py_None;
    if (!PyArg_ParseTuple(args, "i|O", &err, &tls)) return NULL;
    PyObject *protocol = self->protocol;
    if (protocol == Py_None) Py_RETURN_NONE; /* cancelled meanwhile: nothing to report */
    self->protocol = Py_NewRef(Py_None);
    PyObject *code = PyLong_FromLong(err);
    PyObject *r = code ? PyObject_CallMethodObjArgs(self->opener, str_connect_failed, protocol,
                                                    code, tls, NULL)
                       : NULL;
    Py_XDECREF(code);
    Py_DECREF(protocol);
    if (r == NULL) return NULL;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

/* the end of a connection-per-request answer and the next connection of the same slot:
   release() (our FIN now, nobody told), then the connect of __init__ with `first` sent
   with it. Returns what the connect reached, as transport.py's states: OPEN (the request
   went out, the protocol is not called: the caller set it up), CONNECTING (waiting for
   writability: `connected(self, False)` comes then), HANDSHAKE (TLS: `connected(self,
   True)` comes at its end, the request sent with it) or CLOSED (failed: the opener
   hears on the next turn). */
static PyObject *Transport_recycle(Transport *self, PyObject *args) {
    long long now;
    PyObject *protocol, *first;
    if (!PyArg_ParseTuple(args, "OLS", &protocol, &now, &first)) return NULL;
    if (self->state != CLOSED && (close_notify(self) < 0 || shut(self) < 0)) return NULL;
    Py_INCREF(protocol);
    Py_SETREF(self->protocol, protocol);
    self->connect_ns = now;
    int state = start(self, first);
    if (state < 0) return NULL;
    return PyLong_FromLong(state);
}

/* --- HTTP/2 (_h2.h: why, and what each callback tells) ------------------------------------ */

static nghttp2_session_callbacks *h2_callbacks;

/* the bytes go out: through TLS's records, or straight to the socket; what the kernel
   does not take waits in `out`. 0, or -1 with an exception set; a failed send loses the
   connection (state CLOSED) */
static int send_raw(Transport *self, const char *data, Py_ssize_t len) {
    PyObject *r = NULL;
    if (self->tls != NULL) {
        ERR_clear_error();
        if (SSL_write(self->ssl, data, (int)len) <= 0) {
            char why[256];
            r = lost_why(self, tls_why(self->ssl, "the request could not be encrypted", why,
                                       sizeof why));
        } else {
            int err = send_records(self);
            if (err < 0) return -1;
            if (err == 0) return 0;
            r = lost(self, err);
        }
    } else if (self->out != NULL) {
        return append_out(self, data, len);
    } else {
        ssize_t n = send(self->fd, data, (size_t)len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                r = lost(self, errno);
                goto done;
            }
            n = 0;
        }
        if (n < len) return append_out(self, data + n, len - n);
        return 0;
    }
done:
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* what nghttp2 has to send, gathered into one send() (or one TLS write) per 64 KiB */
static int h2_send(Transport *self) {
    static char chunk[READ_SIZE];
    size_t have = 0;
    while (self->state == OPEN && self->h2 != NULL) {
        const uint8_t *data;
        ssize_t n = nghttp2_session_mem_send(self->h2, &data);
        if (n < 0) {
            snprintf(self->fault, sizeof self->fault, "HTTP/2: %s", nghttp2_strerror((int)n));
            break;
        }
        if (n == 0) break;
        if (have + (size_t)n > sizeof chunk) {
            if (have && send_raw(self, chunk, (Py_ssize_t)have) < 0) return -1;
            have = 0;
            if ((size_t)n > sizeof chunk) {
                if (send_raw(self, (const char *)data, n) < 0) return -1;
                continue;
            }
        }
        memcpy(chunk + have, data, (size_t)n);
        have += (size_t)n;
    }
    if (have && self->state == OPEN && send_raw(self, chunk, (Py_ssize_t)have) < 0) return -1;
    return 0;
}

static void h2_free(Transport *self) {
    H2Open *o = self->streams;
    self->streams = NULL;
    while (o != NULL) {
        H2Open *next = o->next;
        Py_XDECREF(o->slot);
        Py_XDECREF((PyObject *)o->request);
        PyMem_Free(o);
        o = next;
    }
    if (self->h2 != NULL) {
        nghttp2_session_del(self->h2);
        self->h2 = NULL;
    }
}

static void h2_unlink(Transport *self, H2Open *o) {
    if (o->prev) o->prev->next = o->next;
    else self->streams = o->next;
    if (o->next) o->next->prev = o->prev;
    o->prev = o->next = NULL;
}

/* a Python call from a callback failed, or closed the connection: nghttp2 stops reading */
static int h2_after_call(Transport *self, PyObject *r) {
    if (r == NULL) {
        self->h2_python_error = 1;
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    Py_DECREF(r);
    return self->state == OPEN ? 0 : NGHTTP2_ERR_CALLBACK_FAILURE;
}

static int h2_on_header(nghttp2_session *s, const nghttp2_frame *frame, const uint8_t *name,
                        size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags,
                        void *user) {
    if (frame->hd.type != NGHTTP2_HEADERS || namelen != 7 || memcmp(name, ":status", 7))
        return 0;
    H2Open *o = nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
    /* nghttp2's HTTP checks hold it to three digits */
    if (o == NULL || valuelen != 3) return 0;
    int status = (value[0] - '0') * 100 + (value[1] - '0') * 10 + (value[2] - '0');
    if (status >= 200 && o->status == 0) o->status = status; /* 1xx: the answer is to come */
    return 0;
}

static int h2_on_data(nghttp2_session *s, uint8_t flags, int32_t id, const uint8_t *data,
                      size_t len, void *user) {
    H2Open *o = nghttp2_session_get_stream_user_data(s, id);
    if (o == NULL) return 0;
    o->size += (long long)len;
    if (!o->body || o->slot == NULL) return 0;
    PyObject *chunk = PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)len);
    PyObject *r = chunk ? PyObject_CallMethodOneArg(o->slot, str_on_body, chunk) : NULL;
    Py_XDECREF(chunk);
    return h2_after_call((Transport *)user, r);
}

static int h2_on_frame(nghttp2_session *s, const nghttp2_frame *frame, void *user) {
    Transport *self = user;
    PyObject *r;
    switch (frame->hd.type) {
    case NGHTTP2_RST_STREAM: {
        H2Open *o = nghttp2_session_get_stream_user_data(s, frame->hd.stream_id);
        if (o != NULL) o->rst = 1;
        return 0;
    }
    case NGHTTP2_GOAWAY: {
        self->goaway_last = frame->goaway.last_stream_id;
        PyObject *last = PyLong_FromLong(frame->goaway.last_stream_id);
        PyObject *code = PyLong_FromUnsignedLong(frame->goaway.error_code);
        r = last && code ? PyObject_CallMethodObjArgs(self->protocol, str_goaway, last, code, NULL)
                         : NULL;
        Py_XDECREF(last);
        Py_XDECREF(code);
        return h2_after_call(self, r);
    }
    case NGHTTP2_SETTINGS: {
        if (frame->hd.flags & NGHTTP2_FLAG_ACK) return 0;
        uint32_t m = nghttp2_session_get_remote_settings(s, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
        if (m == self->max_streams) return 0;
        self->max_streams = m;
        PyObject *v = PyLong_FromUnsignedLong(m);
        r = v ? PyObject_CallMethodOneArg(self->protocol, str_settings, v) : NULL;
        Py_XDECREF(v);
        return h2_after_call(self, r);
    }
    }
    return 0;
}

/* a stream for `slot` with `req` (both referenced): its id, or a negative nghttp2 error */
static int32_t h2_open(Transport *self, PyObject *slot, H2Request *req, int keep) {
    /* a GOAWAY sent or received, or the ids spent: no new stream here (a stream queued
       on a session that is ending would be closed at once, inside this call) */
    if (self->h2 == NULL || self->state != OPEN) return NGHTTP2_ERR_INVALID_STATE;
    if (!nghttp2_session_check_request_allowed(self->h2)) return NGHTTP2_ERR_START_STREAM_NOT_ALLOWED;
    H2Open *o = PyMem_Calloc(1, sizeof *o);
    if (o == NULL) return NGHTTP2_ERR_NOMEM;
    o->body = keep;
    nghttp2_data_provider prd = {.source.ptr = o, .read_callback = h2_read_body};
    int32_t id = nghttp2_submit_request(self->h2, NULL, req->nva, req->nvlen,
                                        req->body ? &prd : NULL, o);
    if (id < 0) {
        PyMem_Free(o);
        return id;
    }
    o->id = id;
    o->slot = Py_NewRef(slot);
    o->request = (H2Request *)Py_NewRef((PyObject *)req);
    o->next = self->streams;
    if (o->next) o->next->prev = o;
    self->streams = o;
    return id;
}

static int h2_on_close(nghttp2_session *s, int32_t id, uint32_t code, void *user) {
    Transport *self = user;
    H2Open *o = nghttp2_session_get_stream_user_data(s, id);
    if (o == NULL) return 0;
    h2_unlink(self, o);
    nghttp2_session_set_stream_user_data(s, id, NULL); /* nothing points at it now */
    PyObject *slot = o->slot, *r = NULL;
    int status = o->status, keep = o->body;
    long long size = o->size;
    int how = o->rst ? H2_RESET
                     : (self->goaway_last >= 0 && id > self->goaway_last ? H2_UNPROCESSED
                        : self->fault[0]                                  ? H2_FAULT
                                                                          : H2_LOCAL);
    Py_XDECREF((PyObject *)o->request);
    PyMem_Free(o);
    if (slot == NULL) return 0; /* cancelled: the slot let it go */
    if (code == NGHTTP2_NO_ERROR && status) {
        PyObject *st = PyLong_FromLong(status), *sz = PyLong_FromLongLong(size);
        PyObject *argv[4] = {slot, st, sz, Py_True};
        r = st && sz ? PyObject_VectorcallMethod(str_answer, argv,
                                                 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL)
                     : NULL;
        Py_XDECREF(st);
        Py_XDECREF(sz);
        if (r != NULL && Py_IS_TYPE(r, &H2RequestType)) {
            /* the closed loop's next request of this slot (H2Stream.answer returns it):
               its stream opened here, without a Python call for it; where none can be
               opened the slot moves to another connection (`move`) */
            if (h2_open(self, slot, (H2Request *)r, keep) < 0) {
                Py_DECREF(r);
                r = PyObject_CallMethodNoArgs(slot, str_move);
            }
        }
    } else {
        /* ended with no error but no answer: a malformed end, nghttp2's to judge */
        PyObject *c = PyLong_FromUnsignedLong(code ? code : NGHTTP2_PROTOCOL_ERROR);
        PyObject *h = PyLong_FromLong(how);
        r = c && h ? PyObject_CallMethodObjArgs(slot, str_stream_failed, c, h, NULL) : NULL;
        Py_XDECREF(c);
        Py_XDECREF(h);
    }
    Py_DECREF(slot);
    return h2_after_call(self, r);
}

/* the reason nghttp2 gives for a connection error it found; kept for the GOAWAY we send */
static char h2_last_error[120];

static int h2_on_error(nghttp2_session *s, int code, const char *msg, size_t len, void *user) {
    snprintf(h2_last_error, sizeof h2_last_error, "%.*s", (int)len, msg);
    return 0;
}

static int h2_on_sent(nghttp2_session *s, const nghttp2_frame *frame, void *user) {
    Transport *self = user;
    if (frame->hd.type == NGHTTP2_GOAWAY && frame->goaway.error_code != NGHTTP2_NO_ERROR)
        snprintf(self->fault, sizeof self->fault, "HTTP/2 protocol error: %s (%s)",
                 nghttp2_http2_strerror(frame->goaway.error_code),
                 h2_last_error[0] ? h2_last_error : "the server broke the protocol");
    return 0;
}

static int h2_init_callbacks(void) {
    if (nghttp2_session_callbacks_new(&h2_callbacks) != 0) return -1;
    nghttp2_session_callbacks_set_on_header_callback(h2_callbacks, h2_on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(h2_callbacks, h2_on_data);
    nghttp2_session_callbacks_set_on_frame_recv_callback(h2_callbacks, h2_on_frame);
    nghttp2_session_callbacks_set_on_stream_close_callback(h2_callbacks, h2_on_close);
    nghttp2_session_callbacks_set_error_callback2(h2_callbacks, h2_on_error);
    nghttp2_session_callbacks_set_on_frame_send_callback(h2_callbacks, h2_on_sent);
    return 0;
}

/* the client's session, its SETTINGS queued (sent with the preface once connected): no
   server push, and windows of 2^30-1 for each stream and the connection, as h2load's
   defaults (-w 30 -W 30), so the engine's reads never wait for its own flow control */
static int h2_new(Transport *self) {
    /* closed streams are not kept (nghttp2 keeps some for priorities a client never
       sends): a stream ended is gone, with its user data */
    nghttp2_option *opt;
    if (nghttp2_option_new(&opt) != 0) {
        PyErr_NoMemory();
        return -1;
    }
    nghttp2_option_set_no_closed_streams(opt, 1);
    /* one stream until the server's SETTINGS say how many it takes (nghttp2 assumes 100):
       a server allowing fewer than --streams would otherwise refuse the ones above its
       limit that left with the preface (Go's net/http does: REFUSED_STREAM), and the
       load would count failures that are the client's haste. One round trip per
       connection, at its start. */
    nghttp2_option_set_peer_max_concurrent_streams(opt, 1);
    int r = nghttp2_session_client_new2(&self->h2, h2_callbacks, self, opt);
    nghttp2_option_del(opt);
    if (r != 0) {
        PyErr_NoMemory();
        return -1;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, (1U << 30) - 1},
    };
    if (nghttp2_submit_settings(self->h2, NGHTTP2_FLAG_NONE, iv, 2) != 0 ||
        nghttp2_session_set_local_window_size(self->h2, NGHTTP2_FLAG_NONE, 0, (1 << 30) - 1) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "nghttp2 refused the client's settings");
        return -1;
    }
    return 0;
}

/* one read's bytes to nghttp2; then what it has to send goes out; a session that wants
   neither to read nor to write is over (_h2.h) */
static PyObject *h2_deliver(Transport *self, const char *buf, Py_ssize_t n) {
    self->h2_reading = 1;
    ssize_t r = nghttp2_session_mem_recv(self->h2, (const uint8_t *)buf, (size_t)n);
    self->h2_reading = 0;
    if (self->state != OPEN) {
        h2_free(self); /* closed during the read: its session could not be freed then */
        if (self->h2_python_error) return NULL;
        Py_RETURN_NONE;
    }
    if (self->h2_python_error) return NULL;
    if (r < 0 && self->fault[0] == 0)
        snprintf(self->fault, sizeof self->fault, "HTTP/2 protocol error: %s",
                 nghttp2_strerror((int)r));
    if (h2_send(self) < 0) return NULL;
    if (self->state != OPEN) Py_RETURN_NONE;
    if (r < 0 || (!nghttp2_session_want_read(self->h2) && !nghttp2_session_want_write(self->h2))) {
        if (self->fault[0]) return lost_why(self, self->fault);
        return lost(self, 0);
    }
    Py_RETURN_NONE;
}

/* submit(slot, request, keep=False) -> the stream's id, or a negative nghttp2 error (no
   stream: the session is ending, or out of ids); `keep`: the slot hears each DATA frame
   (on_body) */
static PyObject *Transport_submit(Transport *self, PyObject *args) {
    PyObject *slot;
    H2Request *req;
    int keep = 0;
    if (!PyArg_ParseTuple(args, "OO!|p", &slot, &H2RequestType, &req, &keep)) return NULL;
    int32_t id = h2_open(self, slot, req, keep);
    if (id == NGHTTP2_ERR_NOMEM) return PyErr_NoMemory();
    if (id > 0 && !self->h2_reading && h2_send(self) < 0) return NULL;
    return PyLong_FromLong(id);
}

/* the open stream of `slot` (NULL: none) */
static H2Open *h2_stream_of(Transport *self, PyObject *slot) {
    for (H2Open *o = self->streams; o != NULL; o = o->next)
        if (o->slot == slot) return o;
    return NULL;
}

/* cancel_stream(slot): the slot gives its stream up (a timeout, a retired slot):
   RST_STREAM(CANCEL), and the stream's end will call no one */
static PyObject *Transport_cancel_stream(Transport *self, PyObject *slot) {
    if (self->h2 == NULL || self->state != OPEN) Py_RETURN_NONE;
    H2Open *o = h2_stream_of(self, slot);
    if (o == NULL) Py_RETURN_NONE;
    Py_CLEAR(o->slot);
    nghttp2_submit_rst_stream(self->h2, NGHTTP2_FLAG_NONE, o->id, NGHTTP2_CANCEL);
    if (!self->h2_reading && h2_send(self) < 0) return NULL;
    Py_RETURN_NONE;
}

/* stalled(slot): the slot's stream still has request body to send and the server's
   flow-control window (the stream's or the connection's) is closed */
static PyObject *Transport_stalled(Transport *self, PyObject *slot) {
    if (self->h2 == NULL) Py_RETURN_FALSE;
    H2Open *o = h2_stream_of(self, slot);
    if (o == NULL || o->request->body == NULL || o->sent >= PyBytes_GET_SIZE(o->request->body))
        Py_RETURN_FALSE;
    int32_t w = nghttp2_session_get_stream_remote_window_size(self->h2, o->id);
    return PyBool_FromLong(w <= 0 || nghttp2_session_get_remote_window_size(self->h2) <= 0);
}

/* --- events ------------------------------------------------------------------------------ */

static int flush(Transport *self) {
    char *data;
    Py_ssize_t len;
    if (PyBytes_AsStringAndSize(self->out, &data, &len) < 0) return -1;
    ssize_t n = send(self->fd, data, (size_t)len, MSG_NOSIGNAL);
    if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
        PyObject *r = lost(self, errno);
        if (r == NULL) return -1;
        Py_DECREF(r);
        return 0;
    }
    if (n < len) {
        PyObject *rest = PyBytes_FromStringAndSize(data + n, len - n);
        if (rest == NULL) return -1;
        Py_SETREF(self->out, rest);
    } else {
        Py_CLEAR(self->out);
    }
    return 0;
}

static PyObject *established(Transport *self, int sent) {
    self->state = OPEN;
    return PyObject_CallMethodObjArgs(self->protocol, str_connected, self,
                                      sent ? Py_True : Py_False, NULL);
}

/* READ_BUDGET reads done and more may wait: the rest is read on the loop's next turn,
   `_more(connection, ev)` through poller.call_soon (once: a turn already due reads on),
   and the dispatcher returns to the loop after this batch. Returns None, or NULL. */
static PyObject *read_later(Transport *self, unsigned int ev) {
    self->dispatcher->yielded = 1;
    if (self->more == self->connection) Py_RETURN_NONE;
    PyObject *more = PyObject_GetAttr((PyObject *)self, str_more);
    if (more == NULL) return NULL;
    PyObject *conn = PyLong_FromUnsignedLong(self->connection);
    PyObject *evs = PyLong_FromUnsignedLong(ev & READABLE);
    PyObject *r = conn && evs ? PyObject_CallMethodObjArgs(self->poller, str_call_soon, more,
                                                           conn, evs, NULL)
                              : NULL;
    Py_XDECREF(conn);
    Py_XDECREF(evs);
    Py_DECREF(more);
    if (r == NULL) return NULL;
    Py_DECREF(r);
    self->more = self->connection;
    Py_RETURN_NONE;
}

static Py_ssize_t slot_of_ns(long long ns);
static PyObject *Transport_write(Transport *self, PyObject *data);
static PyObject *str_fast, *str_start_ns, *str_intended_ns;
static PyObject *one; /* the int 1 (tally's, kept_answer's) */

/* A framed 2xx answer on a kept loop (KeptLoop): 1 when counted here and the next
   request written, 0 when Python's `answer` is to take it (the connection is not `fast`
   now, or its request was due in rate mode), -1 with an exception set. What it does is
   Connection.answer's and count_answer's for that case, step for step. */
static int kept_answer(Transport *self, PyObject *protocol, Py_ssize_t n) {
    KeptLoop *k = self->kept;
    PyObject *v = PyObject_GetAttr(protocol, str_fast);
    if (v == NULL) return -1;
    int fast = v == Py_True;
    Py_DECREF(v);
    if (!fast) return 0;
    if ((v = PyObject_GetAttr(protocol, str_intended_ns)) == NULL) return -1;
    int intended = PyObject_IsTrue(v);
    Py_DECREF(v);
    if (intended) return intended < 0 ? -1 : 0;
    if ((v = PyObject_GetAttr(protocol, str_start_ns)) == NULL) return -1;
    long long start = PyLong_AsLongLong(v);
    Py_DECREF(v);
    if (start == -1 && PyErr_Occurred()) return -1;
    long long now = now_ns();
    Py_ssize_t i = slot_of_ns(now - start);
    if (i >= PyList_GET_SIZE(k->counts)) {
        PyErr_SetString(PyExc_IndexError, "kept: the counts are shorter than the histogram");
        return -1;
    }
    PyObject *c = PyNumber_Add(PyList_GET_ITEM(k->counts, i), one);
    if (c == NULL) return -1;
    PyList_SetItem(k->counts, i, c); /* steals c */
    k->requests++;
    k->bytes += n;
    k->last_done = now;
    /* the next request, at once (answer's `fast` branch) */
    if ((v = PyLong_FromLongLong(now)) == NULL) return -1;
    int err = PyObject_SetAttr(protocol, str_start_ns, v);
    Py_DECREF(v);
    if (err < 0) return -1;
    k->sent++;
    PyObject *r = Transport_write(self, k->request);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 1;
}

/* One read's bytes (decrypted, on TLS) to the protocol: if they are the first after a
   request and one whole ordinary response (_frame.h), its status and size (`answer`),
   else the bytes (`data_received`). NULL with an exception set. */
static PyObject *deliver(Transport *self, const char *buf, Py_ssize_t n) {
    if (self->h2 != NULL) return h2_deliver(self, buf, n);
    PyObject *protocol = Py_NewRef(self->protocol);
    PyObject *r;
    int status = 0;
    if (self->armed) {
        self->armed = 0;
        status = frame_response(buf, (size_t)n);
    }
    if (status && self->kept != NULL && status < 300) {
        int done = kept_answer(self, protocol, n);
        if (done) {
            Py_DECREF(protocol);
            if (done < 0) return NULL;
            Py_RETURN_NONE;
        }
    }
    if (status) {
        PyObject *st = PyLong_FromLong(status), *size = PyLong_FromSsize_t(n);
        PyObject *argv[4] = {protocol, st, size, Py_True};
        r = st && size ? PyObject_VectorcallMethod(str_answer, argv,
                                                   4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL)
                       : NULL;
        Py_XDECREF(st);
        Py_XDECREF(size);
    } else {
        PyObject *data = PyBytes_FromStringAndSize(buf, n);
        r = data ? PyObject_CallMethodOneArg(protocol, str_data_received, data) : NULL;
        Py_XDECREF(data);
    }
    Py_DECREF(protocol);
    return r;
}

/* Decrypt what has come in and hand it over: every whole record there is, as one piece
   per READ_SIZE (a read's worth, as for plain TCP: the framer sees an answer whole when
   its records came together); then whatever OpenSSL has to answer (an alert, a key
   update) goes out. The end of the session: close_notify is an orderly close
   (connection_lost(None)), anything else a ConnectionError with OpenSSL's reason. */
static PyObject *tls_deliver(Transport *self) {
    static char plain[READ_SIZE];
    unsigned long connection = self->connection;
    for (;;) {
        SSL *ssl = self->ssl;
        BIO *in = SSL_get_rbio(ssl);
        int got = 0, end = SSL_ERROR_NONE;
        char why[256];
        ERR_clear_error(); /* once: a read that succeeds adds nothing to the error queue */
        while (got < READ_SIZE) {
            int r = SSL_read(ssl, plain + got, READ_SIZE - got);
            if (r > 0) {
                got += r;
                /* all of it read: the read that would only say so (SSL_ERROR_WANT_READ)
                   is not made, as TlsTransport._deliver (most reads are one record) */
                if (!BIO_ctrl_pending(in) && !SSL_has_pending(ssl)) {
                    end = SSL_ERROR_WANT_READ;
                    break;
                }
                continue;
            }
            end = SSL_get_error(ssl, r);
            if (end != SSL_ERROR_WANT_READ && end != SSL_ERROR_ZERO_RETURN)
                tls_why(ssl, "the server closed without close_notify", why, sizeof why);
            break;
        }
        if (got) {
            PyObject *r = deliver(self, plain, got);
            if (r == NULL) return NULL;
            Py_DECREF(r);
            /* closed, or recycled (its answer ended this connection): nothing more here */
            if (self->state != OPEN || self->connection != connection) Py_RETURN_NONE;
        }
        int err = send_records(self);
        if (err < 0) return NULL;
        if (err > 0) return lost(self, err);
        if (end == SSL_ERROR_ZERO_RETURN) return lost(self, 0);
        if (end != SSL_ERROR_NONE && end != SSL_ERROR_WANT_READ) return lost_why(self, why);
        if (end == SSL_ERROR_WANT_READ || !self->reading) Py_RETURN_NONE;
    }
}

/* TLS, once TCP is up (HANDSHAKE or OPEN): the records that came go into the SSL's
   incoming BIO, one recv() each, edge-triggered as for plain TCP; each read moves the
   handshake on or is decrypted and handed over. */
static PyObject *tls_on_event(Transport *self, unsigned int ev) {
    static char buf[READ_SIZE];
    if ((ev & EPOLLOUT) && self->out != NULL && flush(self) < 0) return NULL;
    if (!(ev & READABLE) || self->state == CLOSED) Py_RETURN_NONE;
    if (self->state == OPEN && !self->reading) Py_RETURN_NONE;
    unsigned long connection = self->connection;
    for (int reads = 0;; reads++) {
        if (reads == READ_BUDGET) return read_later(self, ev);
        ssize_t n = recv(self->fd, buf, READ_SIZE, 0);
        int drained = 0, eof = n == 0;
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return lost(self, errno);
            drained = 1;
            n = 0;
        } else if (n > 0 && BIO_write(SSL_get_rbio(self->ssl), buf, (int)n) != (int)n) {
            return PyErr_NoMemory();
        }
        if (self->state == HANDSHAKE) {
            if (eof) return lost(self, 0); /* a failed handshake: "closed during the handshake" */
            if (drained) Py_RETURN_NONE;
            if (tls_step(self) < 0) return NULL;
            /* done: what came with its last flight (tickets, perhaps the answer) is read
               below */
            if (self->state != OPEN || self->connection != connection) Py_RETURN_NONE;
        }
        if (!self->reading) Py_RETURN_NONE;
        BIO *in = SSL_get_rbio(self->ssl);
        if (eof) BIO_set_mem_eof_return(in, 0); /* what is left of the stream reads as its end */
        if (!drained || BIO_ctrl_pending(in) || SSL_pending(self->ssl)) {
            PyObject *r = tls_deliver(self);
            if (r == NULL) return NULL;
            Py_DECREF(r);
            if (self->state != OPEN || self->connection != connection || !self->reading)
                Py_RETURN_NONE;
        }
        if (eof) return lost(self, 0); /* EOF with nothing more to read: the server closed */
        if (drained || (n < READ_SIZE && !(ev & EPOLLRDHUP))) Py_RETURN_NONE;
    }
}

static PyObject *on_event(Transport *self, unsigned int ev) {
    static char buf[READ_SIZE];
    if (self->tls != NULL && (self->state == OPEN || self->state == HANDSHAKE))
        return tls_on_event(self, ev);
    if (self->state == OPEN) {
        if ((ev & EPOLLOUT) && self->out != NULL && flush(self) < 0) return NULL;
        if (!(ev & READABLE) || !self->reading || self->state != OPEN) Py_RETURN_NONE;
        for (int reads = 0;; reads++) {
            if (reads == READ_BUDGET) return read_later(self, ev);
            ssize_t n = recv(self->fd, buf, READ_SIZE, 0);
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) Py_RETURN_NONE;
                return lost(self, errno);
            }
            if (n == 0) return lost(self, 0); /* EOF: the server closed */
            unsigned long connection = self->connection;
            PyObject *r = deliver(self, buf, n);
            if (r == NULL) return NULL;
            Py_DECREF(r);
            /* edge-triggered: read again when the buffer was filled, or when the server's
               FIN came with this data (its EOF gives no new edge) */
            if (n < READ_SIZE && !(ev & EPOLLRDHUP)) Py_RETURN_NONE;
            /* the answer recycled the transport: this event was the old connection's */
            if (self->state != OPEN || !self->reading || self->connection != connection)
                Py_RETURN_NONE;
        }
    }
    if (self->state == CONNECTING) {
        if (ev & (EPOLLERR | EPOLLHUP)) {
            int err = 0;
            socklen_t len = sizeof err;
            getsockopt(self->fd, SOL_SOCKET, SO_ERROR, &err, &len);
            if (err) {
                if (close_socket(self) < 0) return NULL;
                PyObject *args = Py_BuildValue("(i)", err);
                if (args == NULL) return NULL;
                PyObject *r = Transport_report_failure(self, args);
                Py_DECREF(args);
                return r;
            }
        }
        if (ev & EPOLLOUT) {
            if (self->tls != NULL) {
                /* TCP is up: the handshake starts */
                if (tls_begin(self) < 0) return NULL;
            } else {
                PyObject *r = established(self, 0);
                if (r == NULL) return NULL;
                Py_DECREF(r);
            }
            if ((ev & READABLE) && self->state != CLOSED) return on_event(self, ev & ~EPOLLOUT);
        }
    }
    Py_RETURN_NONE;
}

static PyObject *Transport_on_event(Transport *self, PyObject *arg) {
    unsigned long ev = PyLong_AsUnsignedLong(arg);
    if (ev == (unsigned long)-1 && PyErr_Occurred()) return NULL;
    return on_event(self, (unsigned int)ev);
}

/* the read left for this turn by read_later: for the same connection only (a recycled
   transport's next one has edges of its own), and while it is open (or, TLS, in its
   handshake) */
static PyObject *Transport_more(Transport *self, PyObject *args) {
    unsigned long connection;
    unsigned int ev;
    if (!PyArg_ParseTuple(args, "kI", &connection, &ev)) return NULL;
    if (self->more == connection) self->more = 0;
    if (connection != self->connection || self->fd < 0 ||
        (self->state != OPEN && self->state != HANDSHAKE))
        Py_RETURN_NONE;
    return on_event(self, ev);
}

/* --- what a protocol calls ---------------------------------------------------------------- */

static PyObject *Transport_write(Transport *self, PyObject *data) {
    if (!PyBytes_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "write() takes bytes");
        return NULL;
    }
    self->armed = self->frame; /* a request: its answer is the next read's */
    if (self->tls != NULL) {
        /* TLS: encrypted into records (the memory BIO takes all of it), then sent */
        Py_ssize_t len = PyBytes_GET_SIZE(data);
        if (self->state != OPEN || len == 0) Py_RETURN_NONE;
        ERR_clear_error();
        if (SSL_write(self->ssl, PyBytes_AS_STRING(data), (int)len) <= 0) {
            char why[256];
            return lost_why(self, tls_why(self->ssl, "the request could not be encrypted", why,
                                          sizeof why));
        }
        int err = send_records(self);
        if (err < 0) return NULL;
        if (err > 0) return lost(self, err);
        Py_RETURN_NONE;
    }
    if (self->out != NULL) {
        if (append_out(self, PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data)) < 0) return NULL;
        Py_RETURN_NONE;
    }
    if (self->state != OPEN) Py_RETURN_NONE;
    Py_ssize_t len = PyBytes_GET_SIZE(data);
    ssize_t n = send(self->fd, PyBytes_AS_STRING(data), (size_t)len, MSG_NOSIGNAL);
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return lost(self, errno);
        n = 0;
    }
    if (n < len) {
        /* the next writability edge sends the rest */
        self->out = PyBytes_FromStringAndSize(PyBytes_AS_STRING(data) + n, len - n);
        if (self->out == NULL) return NULL;
    }
    Py_RETURN_NONE;
}

/* leave the engine's epoll and hand the open socket over (Target.hand_over: to the event
   loop's own transport); this transport is done. A socket.socket for the descriptor. */
static PyObject *Transport_detach(Transport *self, PyObject *arg) {
    int family = (int)PyLong_AsLong(arg);
    if (family == -1 && PyErr_Occurred()) return NULL;
    if (self->fd < 0 || self->out != NULL || self->tls != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "detach: not open, TLS, or bytes left to write");
        return NULL;
    }
    int fd = self->fd;
    self->state = CLOSED;
    Py_SETREF(self->protocol, Py_NewRef(Py_None));
    if (forget(self, 0) < 0) return NULL;
    epoll_ctl(self->dispatcher->epfd, EPOLL_CTL_DEL, fd, NULL);
    self->fd = -1; /* the socket object owns it now */
    PyObject *socket_mod = PyImport_ImportModule("socket");
    if (socket_mod == NULL) return NULL;
    PyObject *sock = PyObject_CallMethod(socket_mod, "socket", "iiii", family, SOCK_STREAM, 0, fd);
    Py_DECREF(socket_mod);
    if (sock == NULL) close(fd);
    return sock;
}

static PyObject *Transport_get_write_buffer_size(Transport *self, PyObject *unused) {
    return PyLong_FromSsize_t(self->out ? PyBytes_GET_SIZE(self->out) : 0);
}

static PyObject *Transport_pause_reading(Transport *self, PyObject *unused) {
    self->reading = 0;
    Py_RETURN_NONE;
}

static PyObject *Transport_resume_reading(Transport *self, PyObject *unused) {
    if (self->reading || self->state != OPEN) Py_RETURN_NONE;
    self->reading = 1;
    return on_event(self, EPOLLIN | EPOLLRDHUP);
}

static PyObject *Transport_is_closing(Transport *self, PyObject *unused) {
    return PyBool_FromLong(self->state == CLOSED);
}

/* segments sent and not acknowledged by the peer's kernel (transport.unacked) */
static PyObject *Transport_unacked(Transport *self, PyObject *unused) {
    struct tcp_info info;
    socklen_t len = sizeof info;
    if (self->fd < 0 || getsockopt(self->fd, IPPROTO_TCP, TCP_INFO, &info, &len) < 0 ||
        len < 28)
        return PyLong_FromLong(0);
    return PyLong_FromUnsignedLong(info.tcpi_unacked);
}

static PyObject *Transport_get_extra_info(Transport *self, PyObject *args) {
    PyObject *name, *dflt = Py_None;
    if (!PyArg_ParseTuple(args, "O|O", &name, &dflt)) return NULL;
    /* no socket object: the engine asks `unacked()` of this transport instead */
    return Py_NewRef(dflt);
}

static PyMethodDef Transport_methods[] = {
    {"on_event", (PyCFunction)Transport_on_event, METH_O, NULL},
    {"write", (PyCFunction)Transport_write, METH_O, NULL},
    {"close", (PyCFunction)Transport_close, METH_NOARGS, NULL},
    {"abort", (PyCFunction)Transport_abort, METH_NOARGS, NULL},
    {"release", (PyCFunction)Transport_release, METH_NOARGS, NULL},
    {"cancel", (PyCFunction)Transport_cancel, METH_NOARGS, NULL},
    {"recycle", (PyCFunction)Transport_recycle, METH_VARARGS, NULL},
    {"submit", (PyCFunction)Transport_submit, METH_VARARGS, NULL},
    {"cancel_stream", (PyCFunction)Transport_cancel_stream, METH_O, NULL},
    {"stalled", (PyCFunction)Transport_stalled, METH_O, NULL},
    {"_report_failure", (PyCFunction)Transport_report_failure, METH_VARARGS, NULL},
    {"_more", (PyCFunction)Transport_more, METH_VARARGS, NULL},
    {"detach", (PyCFunction)Transport_detach, METH_O, NULL},
    {"get_write_buffer_size", (PyCFunction)Transport_get_write_buffer_size, METH_NOARGS, NULL},
    {"pause_reading", (PyCFunction)Transport_pause_reading, METH_NOARGS, NULL},
    {"resume_reading", (PyCFunction)Transport_resume_reading, METH_NOARGS, NULL},
    {"is_closing", (PyCFunction)Transport_is_closing, METH_NOARGS, NULL},
    {"unacked", (PyCFunction)Transport_unacked, METH_NOARGS, NULL},
    {"get_extra_info", (PyCFunction)Transport_get_extra_info, METH_VARARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef Transport_members[] = {
    {"fd", T_INT, offsetof(Transport, fd), READONLY, NULL},
    {"state", T_INT, offsetof(Transport, state), READONLY, NULL},
    {"reading", T_INT, offsetof(Transport, reading), READONLY, NULL},
    {"connect_ns", T_LONGLONG, offsetof(Transport, connect_ns), READONLY, NULL},
    {"frame", T_INT, offsetof(Transport, frame), READONLY, NULL},
    {"protocol", T_OBJECT, offsetof(Transport, protocol), READONLY, NULL},
    {"tls", T_OBJECT, offsetof(Transport, tls), READONLY, NULL},
    {"max_streams", T_UINT, offsetof(Transport, max_streams), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject TransportType = {
    CYCLE_TYPE(Transport, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
               "The engine's transport in C (engine/transport.py SocketTransport, TlsTransport)."),
    .tp_traverse = (traverseproc)Transport_traverse,
    .tp_clear = (inquiry)Transport_clear,
    .tp_methods = Transport_methods,
    .tp_members = Transport_members,
};

/* --- the dispatcher ---------------------------------------------------------------------- */

static int Dispatcher_init(Dispatcher *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"epfd", "handlers", "stale", NULL};
    PyObject *handlers, *stale;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iO!O!", kwlist, &self->epfd, &PyDict_Type,
                                     &handlers, &PySet_Type, &stale))
        return -1;
    Py_XSETREF(self->handlers, Py_NewRef(handlers));
    Py_XSETREF(self->stale, Py_NewRef(stale));
    return 0;
}

static int Dispatcher_traverse(Dispatcher *self, visitproc visit, void *arg) {
    Py_VISIT(self->handlers);
    Py_VISIT(self->stale);
    return 0;
}

static int Dispatcher_clear(Dispatcher *self) {
    Py_CLEAR(self->handlers);
    Py_CLEAR(self->stale);
    return 0;
}

static void Dispatcher_dealloc(Dispatcher *self) {
    PyObject_GC_UnTrack(self);
    Dispatcher_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* one batch: each ready descriptor's handler gets its events, those closed in this
   batch (`stale`) excepted; a C transport is called directly. Returns the number of
   events, or -1 with an exception set. */
static int run_batch(Dispatcher *self) {
    struct epoll_event events[1024];  /* as select.epoll.poll's default; more wait for the next turn */
    int n = epoll_wait(self->epfd, events, 1024, 0);
    if (n < 0) {
        if (errno == EINTR) return 0;
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        PyObject *key = PyLong_FromLong(events[i].data.fd);
        if (key == NULL) return -1;
        if (PySet_GET_SIZE(self->stale)) {
            int gone = PySet_Contains(self->stale, key);
            if (gone) {
                Py_DECREF(key);
                if (gone < 0) return -1;
                continue;
            }
        }
        PyObject *h = PyDict_GetItemWithError(self->handlers, key); /* borrowed */
        Py_DECREF(key);
        if (h == NULL) {
            if (PyErr_Occurred()) return -1;
            continue;
        }
        Py_INCREF(h);
        PyObject *r;
        if (Py_TYPE(h) == &TransportType) {
            r = on_event((Transport *)h, events[i].events);
        } else {
            PyObject *ev = PyLong_FromUnsignedLong(events[i].events);
            r = ev ? PyObject_CallMethodOneArg(h, str_on_event, ev) : NULL;
            Py_XDECREF(ev);
        }
        Py_DECREF(h);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    return n;
}

/* the event loop's reader callback: batches (REPOLL), `dispatching` set while they run */
/* After a batch with events the dispatcher polls again at once, while it finds more, up
   to this many batches: each return to the event loop costs the loop's own epoll_pwait
   and bookkeeping, and at c=50 a batch holds one or two answers (0.3 µs a request saved,
   bench/engine_vs_wrk.py). The loop's other work (timers, the sweep, the loop's own
   transports) waits at most these few batches. */
#define REPOLL 8

static PyObject *Dispatcher_call(Dispatcher *self, PyObject *args, PyObject *kw) {
    self->dispatching = 1;
    self->yielded = 0;
    int n = run_batch(self);
    /* (not after a batch in which a transport left reads for later, READ_BUDGET: a
       writer that keeps a socket full gives it a new edge at once, and repolling would
       read it again before the loop's other work had its turn) */
    for (int k = 0; k < REPOLL && n > 0 && !self->yielded; k++) {
        if (PySet_GET_SIZE(self->stale) && PySet_Clear(self->stale) < 0) return NULL;
        n = run_batch(self);
    }
    self->dispatching = 0;
    if (PySet_GET_SIZE(self->stale) && PySet_Clear(self->stale) < 0) return NULL;
    if (n < 0) return NULL;
    return PyLong_FromLong(n);
}

static PyMemberDef Dispatcher_members[] = {
    {"epfd", T_INT, offsetof(Dispatcher, epfd), READONLY, NULL},
    {"dispatching", T_INT, offsetof(Dispatcher, dispatching), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject DispatcherType = {
    CYCLE_TYPE(Dispatcher, Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
               "The engine's epoll reader: Dispatcher(epfd, handlers, stale)(): one batch."),
    .tp_traverse = (traverseproc)Dispatcher_traverse,
    .tp_clear = (inquiry)Dispatcher_clear,
    .tp_call = (ternaryfunc)Dispatcher_call,
    .tp_members = Dispatcher_members,
};

/* frame_response for tests (tests/unit/test_frame.py): the status, or 0 */
static PyObject *frame(PyObject *module, PyObject *arg) {
    char *data;
    Py_ssize_t len;
    if (PyBytes_AsStringAndSize(arg, &data, &len) < 0) return NULL;
    return PyLong_FromLong(frame_response(data, (size_t)len));
}

static PyObject *tls_alive(PyObject *module, PyObject *unused) {
    return PyLong_FromSsize_t(ssl_alive);
}

/* --- the histogram's slot of a time (engine/histogram.py `index_of`) -------------------

   Every answer records its latency (and on a rate-mode or TLS target one more time):
   the slot of `ns // 1000` µs in HdrHistogram's layout (three significant digits, one
   hour at most), then a count added. Written out in Python it was four lines, inlined
   five times in connection.py and h2.py `answer` to save the calls; here it is one C
   call, cheaper than the four lines (tests/unit/test_histogram.py holds it equal to
   index_of). */
#define HIST_HIGHEST 3600000000LL /* histogram.HIGHEST, µs */
#define HIST_MAG 11               /* SUB_BUCKET_COUNT_MAGNITUDE */
#define HIST_HALF_MAG 10          /* SUB_BUCKET_HALF_COUNT_MAGNITUDE */
#define HIST_MASK 2047LL          /* SUB_BUCKET_MASK */

static Py_ssize_t slot_of_ns(long long ns) {
    long long us = ns > 0 ? ns / 1000 : 0;
    if (us > HIST_HIGHEST) us = HIST_HIGHEST;
    int b = (64 - __builtin_clzll((unsigned long long)(us | HIST_MASK))) - HIST_MAG;
    return ((Py_ssize_t)b << HIST_HALF_MAG) + (Py_ssize_t)(us >> b);
}

static PyObject *slot(PyObject *module, PyObject *arg) {
    long long ns = PyLong_AsLongLong(arg);
    if (ns == -1 && PyErr_Occurred()) return NULL;
    return PyLong_FromSsize_t(slot_of_ns(ns));
}


static PyObject *tally(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "tally(counts: list, ns: int)");
        return NULL;
    }
    long long ns = PyLong_AsLongLong(args[1]);
    if (ns == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t i = slot_of_ns(ns);
    if (i >= PyList_GET_SIZE(args[0])) {
        PyErr_SetString(PyExc_IndexError, "tally: the counts are shorter than the histogram");
        return NULL;
    }
    PyObject *n = PyNumber_Add(PyList_GET_ITEM(args[0], i), one);
    if (n == NULL) return NULL;
    PyList_SetItem(args[0], i, n); /* steals n, drops the old count */
    Py_RETURN_NONE;
}

/* --- KeptLoop ---------------------------------------------------------------------------- */

static int KeptLoop_init(KeptLoop *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"counts", "request", NULL};
    PyObject *counts, *request;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O!", kwlist, &PyList_Type, &counts,
                                     &PyBytes_Type, &request))
        return -1;
    Py_XSETREF(self->counts, Py_NewRef(counts));
    Py_XSETREF(self->request, Py_NewRef(request));
    return 0;
}

static void KeptLoop_dealloc(KeptLoop *self) {
    Py_CLEAR(self->counts);
    Py_CLEAR(self->request);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* (answers, sends, bytes, the last answer's time or 0) since the last take, and zero */
static PyObject *KeptLoop_take(KeptLoop *self, PyObject *unused) {
    PyObject *r = Py_BuildValue("(LLLL)", self->requests, self->sent, self->bytes,
                                self->last_done);
    if (r != NULL) self->requests = self->sent = self->bytes = self->last_done = 0;
    return r;
}

static PyMethodDef KeptLoop_methods[] = {
    {"take", (PyCFunction)KeptLoop_take, METH_NOARGS,
     "take() -> (answers, sends, bytes, last answer's perf_counter_ns or 0), then zero"},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef KeptLoop_members[] = {
    {"requests", T_LONGLONG, offsetof(KeptLoop, requests), READONLY, NULL},
    {"sent", T_LONGLONG, offsetof(KeptLoop, sent), READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject KeptLoopType = {
    CYCLE_TYPE(KeptLoop, Py_TPFLAGS_DEFAULT,
               "A target's kept-alive closed loop, its answers counted in C (Target.kept)."),
    .tp_methods = KeptLoop_methods,
    .tp_members = KeptLoop_members,
};

static PyMethodDef module_methods[] = {
    {"slot", slot, METH_O, "slot(ns) -> histogram.index_of(ns // 1000), clamped as it is"},
    {"tally", (PyCFunction)(void (*)(void))tally, METH_FASTCALL,
     "tally(counts, ns): counts[slot(ns)] += 1"},
    {"frame", frame, METH_O, "frame(response) -> status, or 0: not one whole ordinary answer"},
    {"tls_alive", tls_alive, METH_NOARGS, "tls_alive() -> the connections' SSL objects not yet freed"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cycle", "The engine's transport in C (plain TCP and TLS).", -1,
    module_methods,
};

#define INTERN(var, text)                                    \
    do {                                                     \
        if ((var = PyUnicode_InternFromString(text)) == NULL) \
            return NULL;                                     \
    } while (0)

PyMODINIT_FUNC PyInit__cycle(void) {
    frame_init();
    if ((one = PyLong_FromLong(1)) == NULL) return NULL;
    if (h2_init_callbacks() < 0) return PyErr_NoMemory();
    INTERN(str_dispatcher, "dispatcher");
    INTERN(str_call_soon, "call_soon");
    INTERN(str_more, "_more");
    INTERN(str_connected, "connected");
    INTERN(str_data_received, "data_received");
    INTERN(str_connection_lost, "connection_lost");
    INTERN(str_connect_failed, "connect_failed");
    INTERN(str_on_event, "on_event");
    INTERN(str_answer, "answer");
    INTERN(str_connect_done, "connect_done");
    INTERN(str_report_failure, "_report_failure");
    INTERN(str_stream_failed, "stream_failed");
    INTERN(str_on_body, "on_body");
    INTERN(str_move, "move");
    INTERN(str_goaway, "goaway");
    INTERN(str_settings, "settings");
    INTERN(str_fast, "fast");
    INTERN(str_start_ns, "start_ns");
    INTERN(str_intended_ns, "intended_ns");
    if (PyType_Ready(&TransportType) < 0 || PyType_Ready(&DispatcherType) < 0 ||
        PyType_Ready(&TlsContextType) < 0 || PyType_Ready(&H2RequestType) < 0 ||
        PyType_Ready(&KeptLoopType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Transport", (PyObject *)&TransportType) < 0 ||
        PyModule_AddObjectRef(m, "Dispatcher", (PyObject *)&DispatcherType) < 0 ||
        PyModule_AddObjectRef(m, "TlsContext", (PyObject *)&TlsContextType) < 0 ||
        PyModule_AddObjectRef(m, "H2Request", (PyObject *)&H2RequestType) < 0 ||
        PyModule_AddObjectRef(m, "KeptLoop", (PyObject *)&KeptLoopType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "CONNECTING", CONNECTING) < 0 ||
        PyModule_AddIntConstant(m, "OPEN", OPEN) < 0 ||
        PyModule_AddIntConstant(m, "HANDSHAKE", HANDSHAKE) < 0 ||
        PyModule_AddIntConstant(m, "CLOSED", CLOSED) < 0 ||
        PyModule_AddIntConstant(m, "H2_RESET", H2_RESET) < 0 ||
        PyModule_AddIntConstant(m, "H2_UNPROCESSED", H2_UNPROCESSED) < 0 ||
        PyModule_AddIntConstant(m, "H2_LOCAL", H2_LOCAL) < 0 ||
        PyModule_AddIntConstant(m, "H2_FAULT", H2_FAULT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
