/* The engine's socket transport in C: plain TCP, kept alive or a connection per request
   (engine/transport.py).

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
#include <unistd.h>

#include "_frame.h"

/* transport.py's states */
#define CONNECTING 0
#define OPEN 1
#define CLOSED 3

#define READ_SIZE 65536
#define EVENTS (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET)
#define READABLE (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)

static PyObject *str_dispatcher, *str_call_soon,
    *str_connected, *str_data_received, *str_connection_lost, *str_connect_failed,
    *str_on_event, *str_answer;

/* The reader the event loop calls when the engine's epoll is ready (Poller.dispatcher):
   every ready descriptor's handler gets its events. A C object, so a wake-up costs no
   Python frame (a batch holds one or two answers at c=50: per wake-up costs count). */
typedef struct {
    PyObject_HEAD
    int epfd;
    int dispatching; /* inside a batch: a descriptor closed now goes into `stale` */
    PyObject *handlers; /* Poller.handlers: descriptor -> handler */
    PyObject *stale;    /* Poller.stale: descriptors closed in this batch */
} Dispatcher;

static PyTypeObject DispatcherType;

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
    unsigned long connection; /* counts the connections made (recycle starts another) */
    PyObject *poller;
    Dispatcher *dispatcher; /* poller.dispatcher: its epoll, handlers and stale set */
    PyObject *protocol; /* None once told of the end, or cancelled */
    PyObject *opener;
    PyObject *out;      /* bytes the kernel has not taken yet, or NULL */
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

static void close_fd(Transport *self) {
    if (self->fd >= 0) {
        close(self->fd);
        self->fd = -1;
    }
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

static int call_soon_failure(Transport *self, int err) {
    PyObject *report = PyObject_GetAttrString((PyObject *)self, "_report_failure");
    if (report == NULL) return -1;
    PyObject *code = PyLong_FromLong(err);
    PyObject *r = code ? PyObject_CallMethodObjArgs(self->poller, str_call_soon, report, code, NULL)
                       : NULL;
    Py_XDECREF(code);
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
    return call_soon_failure(self, err);
}

/* socket, connect, and the first bytes with it. Returns the state reached: OPEN (what
   of `first` the kernel did not take waits in `out` for the next writability edge),
   CONNECTING (registered, waiting for writability), or CLOSED (a failure, reported on
   the next turn); -1 with an exception set. */
static int start(Transport *self, const char *first, Py_ssize_t first_len) {
    self->connection++;
    self->reading = 1;
    self->armed = 0;
    Py_CLEAR(self->out);
    self->state = CONNECTING;
    int fd = socket(self->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int err = errno ? errno : EIO;
        self->fd = -1;
        self->state = CLOSED;
        if (call_soon_failure(self, err) < 0) return -1;
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
                             "first", "nodelay", "rcvbuf", "frame", NULL};
    PyObject *poller, *protocol, *opener, *addr, *first = Py_None;
    int family, nodelay = 0, rcvbuf = 0, frame = 0;
    long long now;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OOOiOL|Opip", kwlist, &poller, &protocol,
                                     &opener, &family, &addr, &now, &first, &nodelay, &rcvbuf,
                                     &frame))
        return -1;
    self->fd = -1;
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
    const char *data = NULL;
    Py_ssize_t len = 0;
    if (first != Py_None && PyBytes_AsStringAndSize(first, (char **)&data, &len) < 0) return -1;
    int state = start(self, data, len);
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
    return 0;
}

static int Transport_clear(Transport *self) {
    Py_CLEAR(self->poller);
    Py_CLEAR(self->dispatcher);
    Py_CLEAR(self->protocol);
    Py_CLEAR(self->opener);
    Py_CLEAR(self->out);
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
    if (close_socket(self) < 0) return NULL;
    if (!err) return deliver_lost(self, Py_None);
    PyObject *exc = PyObject_CallFunction(PyExc_OSError, "is", err, strerror(err));
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

static PyObject *Transport_close(Transport *self, PyObject *unused) {
    if (self->state == CLOSED) Py_RETURN_NONE;
    if (shut(self) < 0) return NULL;
    return deliver_lost(self, Py_None);
}

static PyObject *Transport_release(Transport *self, PyObject *unused) {
    if (self->state == CLOSED) Py_RETURN_NONE;
    if (shut(self) < 0) return NULL;
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
   writability: `connected(self, False)` comes then) or CLOSED (failed: the opener hears
   on the next turn). */
static PyObject *Transport_recycle(Transport *self, PyObject *args) {
    long long now;
    PyObject *protocol, *first;
    if (!PyArg_ParseTuple(args, "OLS", &protocol, &now, &first)) return NULL;
    if (self->state != CLOSED && shut(self) < 0) return NULL;
    Py_INCREF(protocol);
    Py_SETREF(self->protocol, protocol);
    self->connect_ns = now;
    int state = start(self, PyBytes_AS_STRING(first), PyBytes_GET_SIZE(first));
    if (state < 0) return NULL;
    return PyLong_FromLong(state);
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

static PyObject *on_event(Transport *self, unsigned int ev) {
    static char buf[READ_SIZE];
    if (self->state == OPEN) {
        if ((ev & EPOLLOUT) && self->out != NULL && flush(self) < 0) return NULL;
        if (!(ev & READABLE) || !self->reading || self->state != OPEN) Py_RETURN_NONE;
        for (;;) {
            ssize_t n = recv(self->fd, buf, READ_SIZE, 0);
            if (n < 0) {
                if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) Py_RETURN_NONE;
                return lost(self, errno);
            }
            if (n == 0) return lost(self, 0); /* EOF: the server closed */
            unsigned long connection = self->connection;
            PyObject *protocol = Py_NewRef(self->protocol);
            PyObject *r;
            int status = 0;
            if (self->armed) {
                /* the first read after a request: if it is one whole ordinary response,
                   the protocol gets its status and size (`answer`), not the bytes */
                self->armed = 0;
                status = frame_response(buf, (size_t)n);
            }
            if (status) {
                PyObject *st = PyLong_FromLong(status), *size = PyLong_FromSsize_t(n);
                PyObject *argv[4] = {protocol, st, size, Py_True};
                r = st && size ? PyObject_VectorcallMethod(
                                     str_answer, argv, 4 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL)
                               : NULL;
                Py_XDECREF(st);
                Py_XDECREF(size);
            } else {
                PyObject *data = PyBytes_FromStringAndSize(buf, n);
                r = data ? PyObject_CallMethodOneArg(protocol, str_data_received, data) : NULL;
                Py_XDECREF(data);
            }
            Py_DECREF(protocol);
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
            PyObject *r = established(self, 0);
            if (r == NULL) return NULL;
            Py_DECREF(r);
            if (ev & READABLE) return on_event(self, ev & ~EPOLLOUT);
        }
    }
    Py_RETURN_NONE;
}

static PyObject *Transport_on_event(Transport *self, PyObject *arg) {
    unsigned long ev = PyLong_AsUnsignedLong(arg);
    if (ev == (unsigned long)-1 && PyErr_Occurred()) return NULL;
    return on_event(self, (unsigned int)ev);
}

/* --- what a protocol calls ---------------------------------------------------------------- */

static PyObject *Transport_write(Transport *self, PyObject *data) {
    if (!PyBytes_Check(data)) {
        PyErr_SetString(PyExc_TypeError, "write() takes bytes");
        return NULL;
    }
    self->armed = self->frame; /* a request: its answer is the next read's */
    if (self->out != NULL) {
        PyObject *joined = PyBytes_FromStringAndSize(NULL, PyBytes_GET_SIZE(self->out) +
                                                               PyBytes_GET_SIZE(data));
        if (joined == NULL) return NULL;
        memcpy(PyBytes_AS_STRING(joined), PyBytes_AS_STRING(self->out),
               PyBytes_GET_SIZE(self->out));
        memcpy(PyBytes_AS_STRING(joined) + PyBytes_GET_SIZE(self->out),
               PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data));
        Py_SETREF(self->out, joined);
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
    if (self->fd < 0 || self->out != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "detach: not open, or bytes left to write");
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
    {"abort", (PyCFunction)Transport_close, METH_NOARGS, NULL},
    {"release", (PyCFunction)Transport_release, METH_NOARGS, NULL},
    {"cancel", (PyCFunction)Transport_cancel, METH_NOARGS, NULL},
    {"recycle", (PyCFunction)Transport_recycle, METH_VARARGS, NULL},
    {"_report_failure", (PyCFunction)Transport_report_failure, METH_VARARGS, NULL},
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
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject TransportType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stackrace.engine._cycle.Transport",
    .tp_basicsize = sizeof(Transport),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The engine's plain-TCP transport in C (engine/transport.py SocketTransport).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Transport_init,
    .tp_dealloc = (destructor)Transport_dealloc,
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
    int n = run_batch(self);
    for (int k = 0; k < REPOLL && n > 0; k++) {
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
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "stackrace.engine._cycle.Dispatcher",
    .tp_basicsize = sizeof(Dispatcher),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The engine's epoll reader: Dispatcher(epfd, handlers, stale)(): one batch.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Dispatcher_init,
    .tp_dealloc = (destructor)Dispatcher_dealloc,
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

static PyMethodDef module_methods[] = {
    {"frame", frame, METH_O, "frame(response) -> status, or 0: not one whole ordinary answer"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_cycle", "The engine's plain-TCP transport in C.", -1, module_methods,
};

#define INTERN(var, text)                                    \
    do {                                                     \
        if ((var = PyUnicode_InternFromString(text)) == NULL) \
            return NULL;                                     \
    } while (0)

PyMODINIT_FUNC PyInit__cycle(void) {
    frame_init();
    INTERN(str_dispatcher, "dispatcher");
    INTERN(str_call_soon, "call_soon");
    INTERN(str_connected, "connected");
    INTERN(str_data_received, "data_received");
    INTERN(str_connection_lost, "connection_lost");
    INTERN(str_connect_failed, "connect_failed");
    INTERN(str_on_event, "on_event");
    INTERN(str_answer, "answer");
    if (PyType_Ready(&TransportType) < 0 || PyType_Ready(&DispatcherType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Transport", (PyObject *)&TransportType) < 0 ||
        PyModule_AddObjectRef(m, "Dispatcher", (PyObject *)&DispatcherType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "CONNECTING", CONNECTING) < 0 ||
        PyModule_AddIntConstant(m, "OPEN", OPEN) < 0 ||
        PyModule_AddIntConstant(m, "CLOSED", CLOSED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
