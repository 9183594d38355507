/* A prototype, not the engine: the connection cycle in C, the accounting in Python.

   Built by bench/c_cycle_hybrid.py as a Python extension module `c_cycle_hybrid` with
   one function:

     run(port, connections, seconds, on_answer, per_batch) -> answers

   The same six system calls per connection as bench/c_cycle_floor.c (the engine's),
   and for every answer one Python call `on_answer(status, now_ns, start_ns, nbytes)` —
   the design "C opens, reads and closes; Python counts" with the accounting kept in one
   place. With `per_batch` true it calls `on_answer(statuses, latencies_us, nbytes)` once
   per epoll batch with lists instead: the cost of Python counting per batch. The answer
   is found as the floor finds it (a read is taken as a whole answer; its status is read
   from the status line): the parse is not what is measured here. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <string.h>
#include <unistd.h>

#include "c_cycle.h"

static int status_of(const char *buf, ssize_t n) {
    /* "HTTP/1.1 200 ..." */
    if (n < 12) return 0;
    return (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
}

static PyObject *run(PyObject *self, PyObject *args) {
    int port, conns, seconds, per_batch;
    PyObject *on_answer;
    if (!PyArg_ParseTuple(args, "iiiOp", &port, &conns, &seconds, &on_answer, &per_batch))
        return NULL;
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    long long end = mono_ns() + seconds * 1000000000LL;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < conns; i++)
        if (open_one(ep, &addr, mono_ns()) < 0) return PyErr_SetFromErrno(PyExc_OSError);
    struct epoll_event events[256];
    static char buf[65536];
    unsigned long long answers = 0;
    while (mono_ns() < end) {
        int n = epoll_wait(ep, events, 256, 100);
        PyObject *statuses = NULL, *lats = NULL, *sizes = NULL;
        if (per_batch) {
            statuses = PyList_New(0);
            lats = PyList_New(0);
            sizes = PyList_New(0);
        }
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            ssize_t got = recv(fd, buf, sizeof buf, 0);
            if (got <= 0) continue;
            long long t = mono_ns();
            long long start = started[fd];
            answers++;
            close(fd);
            if (open_one(ep, &addr, t) < 0) return PyErr_SetFromErrno(PyExc_OSError);
            int status = status_of(buf, got);
            if (per_batch) {
                PyObject *s = PyLong_FromLong(status), *l = PyLong_FromLongLong((t - start) / 1000),
                         *b = PyLong_FromSsize_t(got);
                PyList_Append(statuses, s);
                PyList_Append(lats, l);
                PyList_Append(sizes, b);
                Py_DECREF(s);
                Py_DECREF(l);
                Py_DECREF(b);
            } else {
                PyObject *r = PyObject_CallFunction(on_answer, "iLLn", status, t, start, got);
                if (r == NULL) return NULL;
                Py_DECREF(r);
            }
        }
        if (per_batch) {
            PyObject *r = PyObject_CallFunctionObjArgs(on_answer, statuses, lats, sizes, NULL);
            Py_DECREF(statuses);
            Py_DECREF(lats);
            Py_DECREF(sizes);
            if (r == NULL) return NULL;
            Py_DECREF(r);
        }
    }
    return PyLong_FromUnsignedLongLong(answers);
}

static PyMethodDef methods[] = {
    {"run", run, METH_VARARGS, "run(port, connections, seconds, on_answer, per_batch)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "c_cycle_hybrid", NULL, -1, methods};

PyMODINIT_FUNC PyInit_c_cycle_hybrid(void) { return PyModule_Create(&module); }
