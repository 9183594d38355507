/* The floor of the engine's connection cycle: its system calls, in C, nothing else.

     cc -O2 -o c_cycle_floor c_cycle_floor.c
     c_cycle_floor PORT CONNECTIONS SECONDS

   connect_rate.py builds and runs it as a row beside the engine and wrk. Per connection
   it makes exactly the calls the engine makes (engine/transport.py, bench/c_cycle.h) — socket
   (non-blocking), connect (on loopback the handshake completes inside it), send of the
   request with the connect, one epoll_ctl ADD (edge-triggered), recv, close in the
   callback that read the answer — and counts each answer's latency in a histogram, as
   the engine's response callback does. No HTTP parsing: each read is taken as a whole
   answer (true for the bench target's small /hello answers). It is not a tool: what it
   costs per connection is what an engine that did everything else for free would cost,
   the bound of rewriting the engine's cycle in C. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "c_cycle.h"

static unsigned long long counts[64 * 1024];

/* a new connection, or the run ends: it measures nothing once one fails */
static void open_or_exit(int ep, const struct sockaddr_in *addr, long long start) {
    if (open_one(ep, addr, start) < 0) {
        perror("open");
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s PORT CONNECTIONS SECONDS\n", argv[0]);
        return 2;
    }
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    int conns = atoi(argv[2]);
    long long end = mono_ns() + atoll(argv[3]) * 1000000000LL;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    for (int i = 0; i < conns; i++) open_or_exit(ep, &addr, mono_ns());
    struct epoll_event events[256];
    char buf[65536];
    unsigned long long answers = 0;
    while (mono_ns() < end) {
        int n = epoll_wait(ep, events, 256, 100);
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            ssize_t got = recv(fd, buf, sizeof buf, 0);
            if (got <= 0) continue; /* the server's FIN alone: the answer was read */
            long long t = mono_ns();
            unsigned long long us = (unsigned long long)(t - started[fd]) / 1000;
            counts[us < sizeof counts / sizeof *counts ? us : sizeof counts / sizeof *counts - 1]++;
            answers++;
            close(fd); /* our FIN leaves now */
            open_or_exit(ep, &addr, t);
        }
    }
    printf("%llu answers\n", answers);
    return 0;
}
