/* Loop helpers for tests that run a real libuv loop: run until a condition
 * holds, bounded by wall time, and a ticker that keeps UV_RUN_ONCE from
 * blocking for ever. */
#ifndef PROFLET_TEST_LOOP_H
#define PROFLET_TEST_LOOP_H

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

#endif
