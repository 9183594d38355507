/* A TLS server that misbehaves, one way per run: what the engine's C transport
   (src/stackrace/engine/_cycle.c) must survive without a crash, a leak or a request
   lost to its accounting.

     cc -O2 -o tls_hostile_server tls_hostile_server.c -lssl -lcrypto
     tls_hostile_server PORT CERT KEY MODE

   bench/tls_hostile.py builds it and runs the engine against every mode (and
   tests/hardening/test_tls_hostile.py does, for the accounting). Each connection is
   served by a child process of its own (fork), which does, by MODE:

     plain        answers the ClientHello with plain HTTP (a server that is not TLS)
     silent       takes the connection and never says anything
     reset        takes it and resets it at once (SO_LINGER 0)
     junk         answers the ClientHello with records of the right shape and random
                  content, 1 MB of them
     oversize     handshakes, reads the request, then sends a record longer than TLS allows
     renegotiate  TLS 1.2: handshakes, then asks for a renegotiation (HelloRequest)
                  before every answer
     keyupdate    TLS 1.3: before every answer, 50 KeyUpdates asking for one back
     truncate     answers half a response and closes without close_notify
     notify       sends close_notify instead of an answer
     flood        answers with a response of endless length, as fast as it can write
     ok           answers `Hello, World!` on a kept-alive connection (the control)

   It is a test fixture, not a server: one child per connection, no limits. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>

static const char OK[] = "HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, World!";

/* one request's head (the engine's requests have no body); 0 at the client's end */
static int read_request(SSL *ssl) {
    char buf[8192];
    size_t have = 0;
    while (have < sizeof buf) {
        int n = SSL_read(ssl, buf + have, (int)(sizeof buf - have));
        if (n <= 0) return 0;
        have += (size_t)n;
        if (memmem(buf, have, "\r\n\r\n", 4) != NULL) return 1;
    }
    return 0;
}

static void write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k <= 0) return;
        c += k;
        n -= (size_t)k;
    }
}

static void serve(int fd, SSL_CTX *ctx, const char *mode) {
    if (!strcmp(mode, "plain")) {
        char buf[4096];
        if (read(fd, buf, sizeof buf) > 0) {
            static const char no[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
            write_all(fd, no, sizeof no - 1);
        }
        return;
    }
    if (!strcmp(mode, "silent")) {
        char buf[4096];
        while (read(fd, buf, sizeof buf) > 0) {
        }
        return;
    }
    if (!strcmp(mode, "reset")) {
        struct linger l = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof l);
        return;
    }
    if (!strcmp(mode, "junk")) {
        char buf[4096];
        if (read(fd, buf, sizeof buf) <= 0) return;
        unsigned char rec[5 + 16384];
        for (int i = 0; i < 64; i++) {
            rec[0] = 22; /* handshake */
            rec[1] = 3;
            rec[2] = 3;
            rec[3] = 0x40; /* 16384 bytes */
            rec[4] = 0;
            RAND_bytes(rec + 5, 16384);
            write_all(fd, rec, sizeof rec);
        }
        return;
    }
    SSL *ssl = SSL_new(ctx);
    SSL_set_fd(ssl, fd);
    if (SSL_accept(ssl) != 1) goto done;
    for (;;) {
        if (!read_request(ssl)) goto done;
        if (!strcmp(mode, "ok")) {
            SSL_write(ssl, OK, sizeof OK - 1);
        } else if (!strcmp(mode, "oversize")) {
            static unsigned char rec[5 + 65535];
            rec[0] = 23; /* application data */
            rec[1] = 3;
            rec[2] = 3;
            rec[3] = 0xff;
            rec[4] = 0xff;
            write_all(fd, rec, sizeof rec);
            goto done;
        } else if (!strcmp(mode, "renegotiate")) {
            if (SSL_version(ssl) == TLS1_2_VERSION) {
                SSL_renegotiate(ssl);
                SSL_do_handshake(ssl); /* the HelloRequest goes out */
            }
            SSL_write(ssl, OK, sizeof OK - 1);
        } else if (!strcmp(mode, "keyupdate")) {
            for (int i = 0; i < 50; i++) {
                if (SSL_key_update(ssl, SSL_KEY_UPDATE_REQUESTED) != 1) break;
                if (SSL_do_handshake(ssl) != 1) break; /* sends it */
            }
            SSL_write(ssl, OK, sizeof OK - 1);
        } else if (!strcmp(mode, "truncate")) {
            static const char half[] = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789";
            SSL_write(ssl, half, sizeof half - 1);
            goto done; /* no close_notify: the connection just ends */
        } else if (!strcmp(mode, "notify")) {
            SSL_shutdown(ssl);
            goto done;
        } else if (!strcmp(mode, "flood")) {
            static const char head[] = "HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\n";
            static char body[16384];
            memset(body, 'x', sizeof body);
            if (SSL_write(ssl, head, sizeof head - 1) <= 0) goto done;
            while (SSL_write(ssl, body, sizeof body) > 0) {
            }
            goto done;
        } else {
            fprintf(stderr, "unknown mode %s\n", mode);
            exit(2);
        }
    }
done:
    SSL_free(ssl);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: %s PORT CERT KEY MODE\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    signal(SIGCHLD, SIG_IGN); /* children are reaped by the kernel */
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!strcmp(argv[4], "renegotiate")) SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
    if (!strcmp(argv[4], "keyupdate")) SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    if (SSL_CTX_use_certificate_chain_file(ctx, argv[2]) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, argv[3], SSL_FILETYPE_PEM) != 1) {
        ERR_print_errors_fp(stderr);
        return 1;
    }
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[1]))};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    if (bind(ls, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(ls, 512) < 0) {
        perror("listen");
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        int fd = accept(ls, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR) continue;
            perror("accept");
            return 1;
        }
        pid_t pid = fork();
        if (pid == 0) {
            close(ls);
            serve(fd, ctx, argv[4]);
            close(fd);
            _exit(0);
        }
        close(fd);
    }
}
