/* The C transport's HTTP/2 (engine/_cycle.c): libnghttp2 driven from the transport, so a
   stream costs no Python call per frame.

   Why libnghttp2: it is h2load's own framing (the reference the engine is measured
   against, bench/h2_vs_h2load.py), the field's most used implementation, in Debian
   (libnghttp2-dev), and it does what a correct client must: HPACK both ways, flow
   control, SETTINGS (a server's SETTINGS_MAX_CONCURRENT_STREAMS is obeyed by holding
   the streams above it in nghttp2's queue), GOAWAY, and the protocol checks whose
   failure must end a connection (a bad HPACK block, DATA on a closed stream). A pure
   Python client (the `h2` package) costs ~210 µs of CPU per request before any I/O.

   One transport is one TCP connection (plain: h2c with prior knowledge; TLS: h2 by
   ALPN). Each stream is one request: `submit(slot, request)` opens it with an
   `H2Request` (the headers and body built once per kind of request) and returns its
   stream id (a slot has one stream at a time: `cancel_stream(slot)` and `stalled(slot)`
   find it); the stream's end calls the slot's Python object once:
   - `slot.answer(status, size, True)`: a whole response (its status, its body's size),
     what an HTTP/1.1 connection's framer calls (engine/connection.py); in the closed
     loop it returns the slot's next request (an H2Request), whose stream the transport
     opens at once (`move` on the slot when this connection takes no new stream), so a
     request costs one Python call in all;
   - `slot.stream_failed(code, how)`: the stream ended without one; `code` the HTTP/2
     error code, `how` H2_RESET (the server's RST_STREAM), H2_UNPROCESSED (above a
     GOAWAY's last-stream-id: the server never saw it), H2_LOCAL (nghttp2 ended it: a
     malformed response) or H2_FAULT (it ended with the connection, for the server's
     protocol error: its reason is the connection's, said once).
   The connection's own events go to the transport's protocol (engine/h2.py H2Link):
   `goaway(last_stream_id, code)` and `settings(max_concurrent_streams)`.

   Reads are fed to nghttp2 whole; what it has to send (requests, WINDOW_UPDATEs,
   SETTINGS ACKs, PINGs' answers) goes out once per read, after every callback of the
   read ran (so the requests a read's answers start leave in one send()), or at once
   for a submit from outside a read (rate mode's timer, a connect). A session that
   wants neither to read nor to write is over: after a server's GOAWAY it closes as an
   orderly end (connection_lost(None)); after an error of the server's making that
   nghttp2 found (`fault`), as a ConnectionError saying "HTTP/2 protocol error: …",
   which the link counts as `protocol` for every stream still open.

   Every stream's Python slot is held (a reference) in an H2Open kept in a list on the
   transport, so closing the connection releases every one of them, whatever nghttp2
   had told. */
#ifndef STACKRACE_H2_H
#define STACKRACE_H2_H

#include <nghttp2/nghttp2.h>
#include <stdint.h>

#define H2_RESET 1
#define H2_UNPROCESSED 2
#define H2_LOCAL 3
#define H2_FAULT 4

/* the request of one kind, built once: its header fields for nghttp2 and its body */
typedef struct {
    PyObject_HEAD
    nghttp2_nv *nva;
    size_t nvlen;
    PyObject *strings; /* the bytes the fields point into */
    PyObject *body;    /* bytes, or NULL */
} H2Request;

static PyTypeObject H2RequestType;

/* one open stream: its slot, and what its response has said so far */
typedef struct H2Open {
    PyObject *slot; /* NULL once the slot let it go (cancelled) */
    H2Request *request;
    int32_t id;
    int status;
    int rst;       /* the server's RST_STREAM ended it */
    int body;      /* the slot keeps the body (on_body per DATA frame) */
    long long size; /* the body's bytes */
    Py_ssize_t sent; /* of the request's body */
    struct H2Open *prev, *next;
} H2Open;

static PyObject *h2_bytes(PyObject *o) {
    if (PyUnicode_Check(o)) return PyUnicode_AsEncodedString(o, "latin-1", "strict");
    if (PyBytes_Check(o)) return Py_NewRef(o);
    PyErr_SetString(PyExc_TypeError, "a header field: str or bytes");
    return NULL;
}

/* H2Request(method, scheme, authority, path, headers, body): pseudo-headers first, then
   the headers (names lowercased, as HTTP/2 requires; connection-specific ones left out:
   RFC 9113 §8.2.2 makes them malformed) */
static int H2Request_init(H2Request *self, PyObject *args, PyObject *kw) {
    PyObject *method, *scheme, *authority, *path, *headers, *body = Py_None;
    if (!PyArg_ParseTuple(args, "OOOOO|O", &method, &scheme, &authority, &path, &headers, &body))
        return -1;
    if (self->nva != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "an H2Request is made once");
        return -1;
    }
    PyObject *seq = PySequence_Fast(headers, "headers: a sequence of (name, value)");
    if (seq == NULL) return -1;
    Py_ssize_t nh = PySequence_Fast_GET_SIZE(seq);
    self->strings = PyList_New(0);
    self->nva = PyMem_Calloc((size_t)(4 + nh + 1), sizeof(nghttp2_nv));
    if (self->strings == NULL || self->nva == NULL) {
        Py_DECREF(seq);
        if (self->nva == NULL) PyErr_NoMemory();
        return -1;
    }
    static const char *pseudo[] = {":method", ":scheme", ":authority", ":path"};
    PyObject *values[] = {method, scheme, authority, path};
    size_t n = 0;
    for (int i = 0; i < 4 + nh; i++) {
        PyObject *name, *value;
        if (i < 4) {
            name = PyBytes_FromString(pseudo[i]);
            value = h2_bytes(values[i]);
        } else {
            PyObject *pair = PySequence_Fast_GET_ITEM(seq, i - 4);
            if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
                PyErr_SetString(PyExc_TypeError, "a header: (name, value)");
                Py_DECREF(seq);
                return -1;
            }
            PyObject *raw = h2_bytes(PyTuple_GET_ITEM(pair, 0));
            name = raw ? PyObject_CallMethod(raw, "lower", NULL) : NULL;
            Py_XDECREF(raw);
            value = h2_bytes(PyTuple_GET_ITEM(pair, 1));
        }
        if (name == NULL || value == NULL) {
            Py_XDECREF(name);
            Py_XDECREF(value);
            Py_DECREF(seq);
            return -1;
        }
        const char *nm = PyBytes_AS_STRING(name);
        if (i >= 4 && (!strcmp(nm, "connection") || !strcmp(nm, "keep-alive") ||
                       !strcmp(nm, "proxy-connection") || !strcmp(nm, "transfer-encoding") ||
                       !strcmp(nm, "upgrade") || !strcmp(nm, "host"))) {
            Py_DECREF(name); /* host: the :authority says it */
            Py_DECREF(value);
            continue;
        }
        if (PyList_Append(self->strings, name) < 0 || PyList_Append(self->strings, value) < 0) {
            Py_DECREF(name);
            Py_DECREF(value);
            Py_DECREF(seq);
            return -1;
        }
        self->nva[n].name = (uint8_t *)PyBytes_AS_STRING(name);
        self->nva[n].namelen = (size_t)PyBytes_GET_SIZE(name);
        self->nva[n].value = (uint8_t *)PyBytes_AS_STRING(value);
        self->nva[n].valuelen = (size_t)PyBytes_GET_SIZE(value);
        self->nva[n].flags = NGHTTP2_NV_FLAG_NO_COPY_NAME | NGHTTP2_NV_FLAG_NO_COPY_VALUE;
        n++;
        Py_DECREF(name); /* the list holds them */
        Py_DECREF(value);
    }
    Py_DECREF(seq);
    self->nvlen = n;
    if (body != Py_None) {
        if (!PyBytes_Check(body)) {
            PyErr_SetString(PyExc_TypeError, "body: bytes or None");
            return -1;
        }
        if (PyBytes_GET_SIZE(body)) self->body = Py_NewRef(body);
    }
    return 0;
}

static void H2Request_dealloc(H2Request *self) {
    PyMem_Free(self->nva);
    Py_XDECREF(self->strings);
    Py_XDECREF(self->body);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject H2RequestType = {
    CYCLE_TYPE(H2Request, Py_TPFLAGS_DEFAULT,
               "One kind of HTTP/2 request, built once (engine/_h2.h)."),
};

/* the request body, from the H2Request's bytes, as flow control lets it go */
static ssize_t h2_read_body(nghttp2_session *s, int32_t id, uint8_t *buf, size_t length,
                            uint32_t *flags, nghttp2_data_source *source, void *user) {
    H2Open *o = source->ptr;
    PyObject *body = o->request->body;
    Py_ssize_t left = PyBytes_GET_SIZE(body) - o->sent;
    size_t n = (size_t)left < length ? (size_t)left : length;
    memcpy(buf, PyBytes_AS_STRING(body) + o->sent, n);
    o->sent += (Py_ssize_t)n;
    if (o->sent == PyBytes_GET_SIZE(body)) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

#endif
