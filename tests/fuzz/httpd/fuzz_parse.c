/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: raw bytes through the status server's request path
 * (httpd__req_feed -> httpd__req_get -> response head), exactly as server.c
 * drives it, minus the socket. The first byte picks the feed chunk size so
 * that requests split across reads are covered too. Checks invariants the
 * server relies on: the parser never consumes more than it was given, never
 * exceeds its caps, and a completed request always has a path. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "httpd/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct httpd__req q;
    struct buf path, out;
    size_t chunk, off = 1;
    int requests = 0;

    if (size < 1)
        return 0;
    chunk = data[0] ? data[0] : size;
    httpd__req_init(&q);
    buf_init(&path, HTTPD__MAX_HEAD);
    buf_init(&out, 64 * 1024);
    while (off < size && requests < 64) {
        size_t n = size - off < chunk ? size - off : chunk;
        size_t used = httpd__req_feed(&q, (const char *)data + off, n);

        if (used > n || q.url.len > HTTPD__MAX_HEAD || q.body.len > HTTPD__MAX_BODY)
            abort();
        off += used;
        if (q.error) {
            if (q.error != 400 && q.error != 413 && q.error != 431)
                abort();
            buf_reset(&out);
            httpd__resp_head(&out, q.error, NULL, 0, true, false);
            break;
        }
        if (q.complete) {
            struct httpd_request hr;
            int st = httpd__req_get(&q, &hr, &path);

            if (st == 0 && (!hr.path || !hr.query || !hr.method || hr.path[0] == '\0'))
                abort();
            if (st == 0 && strlen(hr.path) != path.len) /* no NUL inside */
                abort();
            /* The kept headers are terminated and within their arrays. */
            if (strlen(q.origin) >= sizeof(q.origin) || strlen(q.host) >= sizeof(q.host) ||
                strlen(q.fetch_site) >= sizeof(q.fetch_site) ||
                strlen(q.authorization) >= sizeof(q.authorization))
                abort();
            (void)httpd__req_cross_origin(&q);
            buf_reset(&out);
            httpd__resp_head(&out, st ? st : 200, NULL, st ? 0 : path.len, !q.keep_alive, false);
            requests++;
            if (st || !q.keep_alive)
                break;
            httpd__req_next(&q);
        } else if (used < n) {
            abort(); /* neither complete nor failed, yet stopped early */
        }
    }
    buf_done(&out);
    buf_done(&path);
    httpd__req_done(&q);
    return 0;
}
