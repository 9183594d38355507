/* The C transport's response framer (engine/_cycle.c): is this read exactly one whole,
   ordinary HTTP/1.1 response? Then the transport hands the connection its status and
   size in one call, without httptools' parser, its bytes object or its callbacks.

   Why: on a kept-alive connection the engine's cost per request above wrk's was two
   Python calls (data_received, then the parser's on_message_complete) and the parse
   itself; bench/engine_vs_wrk.py measured it at 1.06-1.13x wrk's CPU per request.

   It is deliberately narrow, and says no (0) to anything that is not plainly one answer:
   the transport then gives the bytes to the parser (httptools' llhttp), which stays the
   one judge of everything unusual. Accepted, and only:
   - a status line `HTTP/1.1 NNN reason CRLF` with NNN in 200-599, except 204, 205 and
     304 (no body whatever the headers say);
   - header lines `name: value CRLF`, the name made of token characters, the value of
     visible characters, spaces and tabs (no folding, no bare LF, no control bytes);
   - exactly one Content-Length, all digits (spaces or tabs around them);
   - no Transfer-Encoding and no Upgrade, and Connection only as `keep-alive` (so
     llhttp would keep the connection alive as well);
   - the body's length equal to what is left of the read: nothing missing (a response
     split across reads goes to the parser), nothing after it (a second response in the
     same read is unsolicited: the parser finds it).
   Every accepted shape is one llhttp parses as one complete message with the same
   status and keep-alive (tests/unit/test_frame.py holds the two together, on fixed
   cases and on mutated ones). frame_init() fills its tables once, before any use. */
#ifndef STACKRACE_FRAME_H
#define STACKRACE_FRAME_H

#include <stddef.h>
#include <string.h>

/* character classes, by table: the framer looks at every byte of the head */
#define FRAME_TCHAR 1 /* RFC 9110 tchar: a header name's characters */
#define FRAME_TEXT 2  /* a reason phrase's or header value's: HTAB, SP, VCHAR, obs-text */
static unsigned char frame_class[256];

static void frame_init(void) {
    for (int c = 0; c < 256; c++) {
        int tchar = ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || (c >= '0' && c <= '9') ||
                    (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
        int text = c == '\t' || (c >= 0x20 && c != 0x7f);
        frame_class[c] = (unsigned char)((tchar ? FRAME_TCHAR : 0) | (text ? FRAME_TEXT : 0));
    }
}

#define frame_tchar(c) (frame_class[(unsigned char)(c)] & FRAME_TCHAR)
#define frame_text(c) (frame_class[(unsigned char)(c)] & FRAME_TEXT)

/* does [p, p+n) equal `lower` (lower case, length n), ignoring ASCII case? */
static int frame_name_is(const unsigned char *p, size_t n, const char *lower, size_t len) {
    if (n != len) return 0;
    for (size_t i = 0; i < n; i++)
        if ((p[i] | 0x20) != (unsigned char)lower[i]) return 0;
    return 1;
}

/* The status of the one whole response in buf[0, n), or 0: not one the framer takes. */
static int frame_response(const char *buf, size_t n) {
    const unsigned char *p = (const unsigned char *)buf, *end = p + n;
    if (n < 17 || memcmp(p, "HTTP/1.1 ", 9) != 0) return 0;
    p += 9;
    if (p[0] < '2' || p[0] > '5' || p[1] < '0' || p[1] > '9' || p[2] < '0' || p[2] > '9' ||
        p[3] != ' ')
        return 0;
    int status = (p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0');
    if (status == 204 || status == 205 || status == 304) return 0;
    p += 4;
    while (p < end && frame_text(*p)) p++;
    if (end - p < 2 || p[0] != '\r' || p[1] != '\n') return 0;
    p += 2;
    long long length = -1;
    for (;;) {
        if (end - p < 2) return 0; /* the head is not all here */
        if (p[0] == '\r') {
            if (p[1] != '\n') return 0;
            p += 2;
            break; /* the empty line: the head ends */
        }
        const unsigned char *name = p;
        while (p < end && frame_tchar(*p)) p++;
        size_t name_len = (size_t)(p - name);
        if (name_len == 0 || p == end || *p != ':') return 0;
        p++;
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        const unsigned char *value = p;
        while (p < end && frame_text(*p)) p++;
        if (end - p < 2 || p[0] != '\r' || p[1] != '\n') return 0;
        const unsigned char *value_end = p;
        p += 2;
        while (value_end > value && (value_end[-1] == ' ' || value_end[-1] == '\t')) value_end--;
        size_t value_len = (size_t)(value_end - value);
        switch (name[0] | 0x20) {
            case 'c':
                if (frame_name_is(name, name_len, "content-length", 14)) {
                    if (length >= 0 || value_len == 0 || value_len > 15) return 0;
                    length = 0;
                    for (size_t i = 0; i < value_len; i++) {
                        if (value[i] < '0' || value[i] > '9') return 0;
                        length = length * 10 + (value[i] - '0');
                    }
                } else if (frame_name_is(name, name_len, "connection", 10)) {
                    if (!frame_name_is(value, value_len, "keep-alive", 10)) return 0;
                }
                break;
            case 't':
                if (frame_name_is(name, name_len, "transfer-encoding", 17)) return 0;
                break;
            case 'u':
                if (frame_name_is(name, name_len, "upgrade", 7)) return 0;
                break;
            default:
                break;
        }
    }
    if (length < 0 || (long long)(end - p) != length) return 0;
    return status;
}

#endif
