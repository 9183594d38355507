/* What bench/c_cycle_floor.c and bench/c_cycle_hybrid.c share: the request, the clock,
   and one new connection made with the engine's system calls (engine/transport.py):
   socket (non-blocking), connect (on loopback the handshake completes inside it), send
   of the request with the connect, one edge-triggered epoll_ctl ADD. */
#ifndef C_CYCLE_H
#define C_CYCLE_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>

static const char REQUEST[] =
    "GET /hello HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

/* not named now_ns: the engine's _cycle.c has its own, and one name defined in two
   folders reads as a call from the engine into bench/ */
static long long mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long started[1 << 16]; /* per descriptor: when its request was started */

/* the descriptor, or -1 with errno set */
static int open_one(int ep, const struct sockaddr_in *addr, long long start) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    if (fd >= (1 << 16)) {
        errno = EMFILE;
        return -1;
    }
    if (connect(fd, (const struct sockaddr *)addr, sizeof *addr) < 0 && errno != EINPROGRESS)
        return -1;
    /* established already on loopback: the request goes out with the connect (the
       engine falls back to waiting for writability when it is not; never here) */
    if (send(fd, REQUEST, sizeof REQUEST - 1, MSG_NOSIGNAL) < 0) return -1;
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = fd};
    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    started[fd] = start;
    return fd;
}

#endif
