/* SPDX-License-Identifier: Apache-2.0 */
/* Loop helpers for tests that run a real libuv loop: run until a condition
 * holds, bounded by wall time, a ticker that keeps UV_RUN_ONCE from
 * blocking for ever, and the two halves of a TCP server on 127.0.0.1 that
 * a test writes its own protocol on. */
#ifndef PROFLET_TEST_LOOP_H
#define PROFLET_TEST_LOOP_H

#include <arpa/inet.h>
#include <stdint.h>
#include <uv.h>

/* Runs the loop until cond() holds or `ms` of wall time pass. */
#define RUN_UNTIL(loop, cond, ms)                                                  \
    do {                                                                           \
        uint64_t deadline_ = uv_hrtime() + (uint64_t)(ms) * 1000000ull;            \
        while (!(cond) && uv_hrtime() < deadline_)                                 \
            uv_run((loop), UV_RUN_ONCE);                                           \
    } while (0)

/* A timer that keeps uv_run(ONCE) from blocking for ever. */
struct ticker {
    uv_timer_t t;
};
static inline void ticker_cb(uv_timer_t *t)
{
    (void)t;
}
static inline void ticker_start(uv_loop_t *loop, struct ticker *tk, uint64_t ms)
{
    uv_timer_init(loop, &tk->t);
    uv_timer_start(&tk->t, ticker_cb, ms, ms);
}
static inline void ticker_stop(struct ticker *tk)
{
    uv_close((uv_handle_t *)&tk->t, NULL);
}

/* Listens on 127.0.0.1 at a port the kernel picks and returns it, or -1
 * (`l` is initialised either way: the caller closes it). */
static inline int test_listen_loopback(uv_loop_t *loop, uv_tcp_t *l, uv_connection_cb cb)
{
    struct sockaddr_in a;
    struct sockaddr_storage got;
    int len = sizeof(got);

    if (uv_tcp_init(loop, l) < 0)
        return -1;
    if (uv_ip4_addr("127.0.0.1", 0, &a) < 0 || uv_tcp_bind(l, (const struct sockaddr *)&a, 0) < 0 ||
        uv_listen((uv_stream_t *)l, 64, cb) < 0 ||
        uv_tcp_getsockname(l, (struct sockaddr *)&got, &len) < 0)
        return -1;
    return ntohs(((struct sockaddr_in *)&got)->sin_port);
}

/* Initialises `c`, accepts the pending connection of `l` into it and starts
 * reading. 0, or -1: `c` is initialised and the caller closes it. */
static inline int test_accept(uv_stream_t *l, uv_tcp_t *c, uv_alloc_cb alloc, uv_read_cb read)
{
    uv_tcp_init(l->loop, c);
    if (uv_accept(l, (uv_stream_t *)c) < 0 || uv_read_start((uv_stream_t *)c, alloc, read) < 0)
        return -1;
    return 0;
}

#endif
