/* SPDX-License-Identifier: Apache-2.0 */
/* The one way C tests run a real libuv loop: until a condition holds,
 * bounded by wall time and by loop turns, failing the test with the
 * condition's text and the caller's FILE:LINE when a bound is reached; for
 * a while, or for a number of turns; until nothing is left, then closed.
 * Also the two halves of a TCP server on 127.0.0.1 that a test writes its
 * own protocol on.
 *
 * A turn waits on the loop's backend fd (at most TEST_LOOP_TICK_MS, never
 * past the deadline) and then runs uv_run(UV_RUN_NOWAIT): no handle of its
 * own is added, so the loop's handles and turns are the test's alone, and
 * conditions that change off the loop (the clock, another thread, a
 * process) are seen within a tick. Loop thread only. */
#ifndef PROFLET_TEST_LOOP_H
#define PROFLET_TEST_LOOP_H

#include <arpa/inet.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "test.h"

/* The longest one turn waits for the loop's next event. */
#define TEST_LOOP_TICK_MS 10
/* The turns RUN_UNTIL allows before failing: a loop that spins without
 * waiting (an idle handle or a 0 ms timer re-armed for ever) ends here. */
#define TEST_LOOP_MAX_TURNS 10000000u

/* One bounded run: RUN_UNTIL's state. */
struct test_run {
    uv_loop_t *loop;
    uint64_t deadline; /* uv_hrtime() */
    uint64_t ms;
    unsigned turns, max_turns;
};

static inline void test_run_start(struct test_run *r, uv_loop_t *loop, uint64_t ms,
                                  unsigned max_turns)
{
    r->loop = loop;
    r->ms = ms;
    r->deadline = uv_hrtime() + ms * 1000000ull;
    r->turns = 0;
    r->max_turns = max_turns;
}

/* Runs one turn unless a bound is reached; false then (nothing ran). */
static inline bool test_run_turn(struct test_run *r)
{
    uint64_t now = uv_hrtime();
    int wait;

    if (now >= r->deadline || r->turns >= r->max_turns)
        return false;
    /* A loop with nothing alive has no event to wait for: its backend
     * timeout is 0, so wait a tick for what changes off the loop. */
    wait = uv_loop_alive(r->loop) ? uv_backend_timeout(r->loop) : TEST_LOOP_TICK_MS;
    if (wait < 0 || wait > TEST_LOOP_TICK_MS)
        wait = TEST_LOOP_TICK_MS;
    if ((uint64_t)wait * 1000000ull > r->deadline - now)
        wait = (int)((r->deadline - now + 999999) / 1000000);
    if (wait > 0) {
        struct pollfd p = { .fd = uv_backend_fd(r->loop), .events = POLLIN };

        (void)poll(&p, 1, wait);
    }
    uv_run(r->loop, UV_RUN_NOWAIT);
    r->turns++;
    return true;
}

__attribute__((noreturn)) static inline void
test_run_fail(const struct test_run *r, const char *file, int line, const char *cond)
{
    if (r->turns >= r->max_turns)
        test__fail(file, line, "still not true after %u loop turns: %s", r->turns, cond);
    test__fail(file, line, "still not true after %llu ms (%u loop turns): %s",
               (unsigned long long)r->ms, r->turns, cond);
}

/* RUN_UNTIL with the text and the place a failure names given. */
#define TEST_RUN_UNTIL_AT(file, line, loop, cond, what, ms, turns) \
    do {                                                           \
        struct test_run run_;                                      \
        test_run_start(&run_, (loop), (ms), (turns));              \
        while (!(cond)) {                                          \
            if (!test_run_turn(&run_))                             \
                test_run_fail(&run_, (file), (line), (what));      \
        }                                                          \
    } while (0)

/* Runs `loop` until `cond` holds; fails the test when `ms` of wall time or
 * `turns` turns pass first. `cond` is evaluated before every turn. */
#define RUN_UNTIL_TURNS(loop, cond, ms, turns) \
    TEST_RUN_UNTIL_AT(__FILE__, __LINE__, loop, cond, #cond, ms, turns)

/* The same, bounded by TEST_LOOP_MAX_TURNS turns. */
#define RUN_UNTIL(loop, cond, ms) \
    TEST_RUN_UNTIL_AT(__FILE__, __LINE__, loop, cond, #cond, ms, TEST_LOOP_MAX_TURNS)

/* Runs `loop` for `ms` of wall time, whatever happens. */
static inline void run_for(uv_loop_t *loop, uint64_t ms)
{
    struct test_run r;

    test_run_start(&r, loop, ms, TEST_LOOP_MAX_TURNS);
    while (test_run_turn(&r))
        ;
}

/* Runs `n` turns of `loop` (each waits at most TEST_LOOP_TICK_MS). */
static inline void run_turns(uv_loop_t *loop, unsigned n)
{
    struct test_run r;

    test_run_start(&r, loop, (uint64_t)n * TEST_LOOP_TICK_MS + 1000, n);
    while (test_run_turn(&r))
        ;
}

/* Runs `loop` until nothing is alive (every close callback done), failing
 * the test past `ms`; then returns uv_loop_close(). */
#define finish_loop(loop, ms) test_finish_loop_at(__FILE__, __LINE__, (loop), (ms))

static inline int test_finish_loop_at(const char *file, int line, uv_loop_t *loop, uint64_t ms)
{
    TEST_RUN_UNTIL_AT(file, line, loop, !uv_loop_alive(loop), "!uv_loop_alive(loop)", ms,
                      TEST_LOOP_MAX_TURNS);
    return uv_loop_close(loop);
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
