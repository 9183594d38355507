/* The floor of the engine's connection cycle: its system calls, in C, nothing else.

     cc -O2 -o c_cycle_floor c_cycle_floor.c
     c_cycle_floor PORT CONNECTIONS SECONDS

   connect_rate.py builds and runs it as a row beside the engine and wrk. Per connection
   it makes exactly the calls the engine makes (engine/transport.py) — socket
   (non-blocking), connect (on loopback the handshake completes inside it), send of the
   request with the connect, one epoll_ctl ADD (edge-triggered), recv, close in the
   callback that read the answer — and counts each answer's latency in a histogram, as
   the engine's response callback does. No HTTP parsing: each read is taken as a whole
   answer (true for the bench target's small /hello answers). It is not a tool: what it
   costs per connection is what an engine that did everything else for free would cost,
   the bound of rewriting the engine's cycle in C. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char REQUEST[] =
    "GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static unsigned long long counts[64 * 1024];
static long long started[1 << 16]; /* per descriptor: when its request was started */

static int open_one(int ep, const struct sockaddr_in *addr, long long start) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0 || fd >= (1 << 16)) {
        perror("socket");
        exit(1);
    }
    if (connect(fd, (const struct sockaddr *)addr, sizeof *addr) < 0 && errno != EINPROGRESS) {
        perror("connect");
        exit(1);
    }
    /* established already on loopback: the request goes out with the connect (the
       engine falls back to waiting for writability when it is not; never here) */
    if (send(fd, REQUEST, sizeof REQUEST - 1, MSG_NOSIGNAL) < 0) {
        perror("send");
        exit(1);
    }
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = fd};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    started[fd] = start;
    return fd;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s PORT CONNECTIONS SECONDS\n", argv[0]);
        return 2;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    int conns = atoi(argv[2]);
    long long end = now_ns() + atoll(argv[3]) * 1000000000LL;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < conns; i++) open_one(ep, &addr, now_ns());
    struct epoll_event events[256];
    char buf[65536];
    unsigned long long answers = 0;
    while (now_ns() < end) {
        int n = epoll_wait(ep, events, 256, 100);
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            ssize_t got = recv(fd, buf, sizeof buf, 0);
            if (got <= 0) continue; /* the server's FIN alone: the answer was read */
            long long t = now_ns();
            unsigned long long us = (unsigned long long)(t - started[fd]) / 1000;
            counts[us < sizeof counts / sizeof *counts ? us : sizeof counts / sizeof *counts - 1]++;
            answers++;
            close(fd); /* our FIN leaves now */
            open_one(ep, &addr, t);
        }
    }
    printf("%llu answers\n", answers);
    return 0;
}
