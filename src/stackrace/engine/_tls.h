/* The C transport's TLS (engine/_cycle.c): OpenSSL's side of it.

   `TlsContext` is a target's client SSL_CTX, built once from the settings engine/tls.py
   gives the Python transport's ssl.SSLContext (the one place they are decided): the
   lowest version, ALPN, what is trusted and whether the server's certificate and name
   are checked. Both transports link the same libssl, so a handshake is the same
   handshake on either; the C one only drops Python's layer between the socket and
   OpenSSL (an SSLObject, two MemoryBIOs and a few Python calls per record).

   As Python's ssl does: SSL_MODE_RELEASE_BUFFERS, so an idle connection holds no record
   buffers (~34 KB each: 10,000 kept-alive connections would hold 340 MB).

   Set here and not on the Python side, each for a reason:
   - SSL_OP_NO_RENEGOTIATION: a server's HelloRequest (TLS 1.2) is refused with a
     warning alert instead of starting a handshake in the middle of a measurement, which
     a hostile server could repeat to spend the engine's CPU.
   - the session: with `resume`, the newest resumable session the server gave is kept
     here and offered to the next connection, what TlsTransport does with
     `keep_session`: TLS 1.3's with each NewSessionTicket (OpenSSL's new-session
     callback: a kept-alive connection's tickets serve the others at once), and every
     connection's own at its end (`tls_keep`). The latter is needed for TLS 1.2: a
     server that sends a fresh ticket with each resumed handshake (Go's does) makes
     OpenSSL replace the connection's session with a copy holding it, mark the one it
     resumed unusable, and call no callback (a resumed 1.2 handshake is no new session
     to it); keeping only the callback's sessions resumed every other connection.
     Without `resume` no session is cached and every connection is a full handshake,
     whatever the server offers (wrk, unlike this, offers its last session on every
     reconnect).

   Per connection: `tls_new` makes the SSL over two memory BIOs (the transport moves the
   bytes itself, so the edge-triggered reads and the connect's timing stay as they are
   for plain TCP), and `tls_why` says why a handshake failed, in one line: "certificate:
   …" for a certificate that was not trusted, else OpenSSL's reason. */
#ifndef STACKRACE_TLS_H
#define STACKRACE_TLS_H

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

typedef struct {
    PyObject_HEAD
    SSL_CTX *ctx;
    char *sni;             /* the server name sent (a name, not an IP literal), or NULL */
    SSL_SESSION *session;  /* resume: the newest resumable session, or NULL */
    int resume;
} TlsContext;

static PyTypeObject TlsContextType;

/* keep `session` to offer the next connection (resume), if it can be resumed: 1 when it
   was taken (the caller's reference is ours now), 0 when not */
static int tls_keep_ref(TlsContext *c, SSL_SESSION *session) {
    if (c == NULL || !c->resume || session == NULL || session == c->session ||
        !SSL_SESSION_is_resumable(session))
        return 0;
    if (c->session != NULL) SSL_SESSION_free(c->session);
    c->session = session;
    return 1;
}

/* a new session from the server (resume only: TLS 1.3's tickets, a full handshake's) */
static int tls_new_session(SSL *ssl, SSL_SESSION *session) {
    return tls_keep_ref(SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl)), session);
}

/* a connection ends: its session, if it is the newest, for the next one (resume) */
static void tls_keep(TlsContext *c, SSL *ssl) {
    if (c == NULL || !c->resume || !SSL_is_init_finished(ssl)) return;
    SSL_SESSION *session = SSL_get1_session(ssl);
    if (session != NULL && !tls_keep_ref(c, session)) SSL_SESSION_free(session);
}

/* a ValueError with OpenSSL's reason for what `what` failed of */
static int tls_config_error(const char *what) {
    unsigned long e = ERR_peek_last_error();
    const char *why = e ? ERR_reason_error_string(e) : NULL;
    PyErr_Format(PyExc_ValueError, "%s: %s", what, why ? why : "failed");
    ERR_clear_error();
    return -1;
}

static int TlsContext_init(TlsContext *self, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"verify", "cafile", "host", "resume", "min_version", "alpn",
                             "max_version", NULL};
    int verify, resume, min_version, max_version = 0;
    const char *cafile = NULL, *host = NULL;
    const char *alpn;
    Py_ssize_t alpn_len;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "pzzpiy#|i", kwlist, &verify, &cafile, &host,
                                     &resume, &min_version, &alpn, &alpn_len, &max_version))
        return -1;
    if (self->ctx != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "TlsContext is made once");
        return -1;
    }
    ERR_clear_error();
    SSL_CTX *ctx = self->ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) return tls_config_error("SSL_CTX_new");
    SSL_CTX_set_app_data(ctx, self);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    if (!SSL_CTX_set_min_proto_version(ctx, min_version) ||
        (max_version && !SSL_CTX_set_max_proto_version(ctx, max_version)))
        return tls_config_error("TLS version");
    if (SSL_CTX_set_alpn_protos(ctx, (const unsigned char *)alpn, (unsigned int)alpn_len) != 0)
        return tls_config_error("ALPN");
    /* as tls.client_context: the CA file when given, else the system's only when
       something is checked (loading them costs every handshake, verified or not) */
    if (cafile != NULL) {
        if (SSL_CTX_load_verify_locations(ctx, cafile, NULL) != 1)
            return tls_config_error(cafile);
    } else if (verify && SSL_CTX_set_default_verify_paths(ctx) != 1) {
        return tls_config_error("the system's CAs");
    }
    unsigned char ip[16];
    int is_ip = host != NULL && (inet_pton(AF_INET, host, ip) == 1 ||
                                 inet_pton(AF_INET6, host, ip) == 1);
    SSL_CTX_set_verify(ctx, verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
    if (verify && host != NULL) {
        /* the name checked as Python's check_hostname does: a DNS name, or an IP
           address against the certificate's IP entries; no partial wildcards */
        X509_VERIFY_PARAM *param = SSL_CTX_get0_param(ctx);
        X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        if (!(is_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host)
                    : X509_VERIFY_PARAM_set1_host(param, host, 0)))
            return tls_config_error("the name to check");
    }
    if (host != NULL && !is_ip) {
        self->sni = PyMem_Malloc(strlen(host) + 1);
        if (self->sni == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        strcpy(self->sni, host);
    }
    self->resume = resume;
    if (resume) {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
        SSL_CTX_sess_set_new_cb(ctx, tls_new_session);
    } else {
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    }
    return 0;
}

static void TlsContext_dealloc(TlsContext *self) {
    if (self->session != NULL) SSL_SESSION_free(self->session);
    if (self->ctx != NULL) SSL_CTX_free(self->ctx);
    PyMem_Free(self->sni);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *TlsContext_has_session(TlsContext *self, void *unused) {
    return PyBool_FromLong(self->session != NULL);
}

static PyGetSetDef TlsContext_getset[] = {
    {"has_session", (getter)TlsContext_has_session, NULL,
     "a session is kept to offer the next connection (resume)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject TlsContextType = {
    CYCLE_TYPE(TlsContext, Py_TPFLAGS_DEFAULT,
               "A target's TLS client context for the C transport (engine/tls.py c_context)."),
    .tp_getset = TlsContext_getset,
};

/* A connection's SSL over two memory BIOs, in client mode, with the server's name and,
   when one is kept, the session to resume; NULL when OpenSSL could not make one. */
static SSL *tls_new(TlsContext *c) {
    SSL *ssl = SSL_new(c->ctx);
    if (ssl == NULL) return NULL;
    BIO *in = BIO_new(BIO_s_mem()), *out = BIO_new(BIO_s_mem());
    if (in == NULL || out == NULL) {
        BIO_free(in);
        BIO_free(out);
        SSL_free(ssl);
        return NULL;
    }
    SSL_set_bio(ssl, in, out); /* an empty `in` reads as "retry": SSL_ERROR_WANT_READ */
    SSL_set_connect_state(ssl);
    if ((c->sni != NULL && !SSL_set_tlsext_host_name(ssl, c->sni)) ||
        (c->session != NULL && !SSL_set_session(ssl, c->session))) {
        SSL_free(ssl);
        return NULL;
    }
    return ssl;
}

/* Why a handshake (or a record) failed, in `buf`: "certificate: …" when the server's
   certificate was not trusted, else OpenSSL's reason for its last error, else `dflt`.
   OpenSSL's error queue is left empty. */
static const char *tls_why(SSL *ssl, const char *dflt, char *buf, size_t size) {
    unsigned long e = ERR_peek_last_error();
    long verified = ssl != NULL ? SSL_get_verify_result(ssl) : X509_V_OK;
    if (e && ERR_GET_LIB(e) == ERR_LIB_SSL &&
        ERR_GET_REASON(e) == SSL_R_CERTIFICATE_VERIFY_FAILED && verified != X509_V_OK) {
        snprintf(buf, size, "certificate: %s", X509_verify_cert_error_string(verified));
    } else if (e) {
        const char *reason = ERR_reason_error_string(e);
        if (reason != NULL)
            snprintf(buf, size, "%s", reason);
        else
            snprintf(buf, size, "OpenSSL error %lu", e);
    } else {
        snprintf(buf, size, "%s", dflt);
    }
    ERR_clear_error();
    return buf;
}

#endif
