/* SPDX-License-Identifier: Apache-2.0 */
/* The loop-lag gauge (docs/design.md "Tests"): a timer repeating every
 * LAG_TICK_MS measures, at each tick, how much later than planned it ran.
 * libuv re-arms a repeating timer from the loop's time before running its
 * callback, so a tick is late by the time the loop spent elsewhere (a long
 * callback, a long poll phase): the lateness of the ticks bounds every stall
 * of the loop from below, within a tick. The thread's CPU time over the same
 * span tells how much of a lateness was the loop's own work (a long callback)
 * rather than the process waiting for a core on a loaded machine; a stall of
 * that kind is a bug wherever it runs.
 *
 * Loop thread only; the struct is embedded in the agent and owns its timer
 * handle, closed with the agent's other handles at shutdown. */
#include "agent/looplag.h"

#include "common/clock.h"
#include "common/macros.h"

#define LAG_TICK_MS 10

/* Finer than the request latencies at the low end: a healthy loop is late
 * by well under a millisecond, a stall worth noticing by tens. */
static const double lag_bounds[] = {
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10,
};

static void tick(uv_timer_t *t)
{
    struct looplag *l = t->data;
    uint64_t now = uv_hrtime(), due = l->last_ns + (uint64_t)LAG_TICK_MS * 1000000u;
    uint64_t late = now > due ? now - due : 0, cpu = clock_thread_cpu_ns();
    uint64_t spent = cpu > l->last_cpu_ns ? cpu - l->last_cpu_ns : 0;
    uint64_t busy = spent < late ? spent : late;

    l->last_ns = now;
    l->last_cpu_ns = cpu;
    if (late > l->max_ns)
        l->max_ns = late;
    if (busy > l->max_busy_ns)
        l->max_busy_ns = busy;
    prom_hist_observe(&l->hist, (double)late / 1e9);
}

int looplag_start(struct looplag *l, uv_loop_t *loop)
{
    int r;

    prom_hist_init(&l->hist, lag_bounds, ARRAY_SIZE(lag_bounds));
    l->max_ns = l->max_busy_ns = 0;
    r = uv_timer_init(loop, &l->timer);
    if (r < 0)
        return r;
    l->timer.data = l;
    l->last_ns = uv_hrtime();
    l->last_cpu_ns = clock_thread_cpu_ns();
    /* Not a reason to keep the loop running: shutdown closes it anyway. */
    uv_unref((uv_handle_t *)&l->timer);
    return uv_timer_start(&l->timer, tick, LAG_TICK_MS, LAG_TICK_MS);
}

void looplag_close(struct looplag *l)
{
    if (l->timer.loop && !uv_is_closing((uv_handle_t *)&l->timer))
        uv_close((uv_handle_t *)&l->timer, NULL);
}

uint64_t looplag_max_ns(const struct looplag *l)
{
    return l->max_ns;
}

uint64_t looplag_max_busy_ns(const struct looplag *l)
{
    return l->max_busy_ns;
}

/* What /metrics shows, taken when it is written: the timer's figures in seconds. */
struct figures {
    struct prom_hist hist;
    double max, max_busy;
};

static const struct prom_family families[] = {
    PROM_FAMILY_HIST("proflet_loop_lag_seconds",
                     "How late the event loop ran a timer due every 10ms: the loop's stalls.",
                     struct figures, hist),
    PROM_FAMILY_F64("proflet_loop_lag_max_seconds", "gauge",
                    "The longest lateness of that timer since start.", struct figures, max),
    PROM_FAMILY_F64("proflet_loop_busy_max_seconds", "gauge",
                    "The longest lateness of that timer that the loop thread spent computing.",
                    struct figures, max_busy),
};

void looplag_metrics(const struct looplag *l, struct buf *b)
{
    const struct figures f = {
        .hist = l->hist,
        .max = (double)l->max_ns / 1e9,
        .max_busy = (double)l->max_busy_ns / 1e9,
    };

    prom_families(b, families, ARRAY_SIZE(families), &f, NULL);
}
