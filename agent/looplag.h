/* SPDX-License-Identifier: Apache-2.0 */
/** The loop's own lag: a repeating timer whose lateness tells how long the
 * loop was kept from running its callbacks, exposed in /metrics. A stall
 * of the loop delays every scrape timer, socket and request at once, so
 * its longest one is watched (the integration tests fail past a bound).
 *
 * Internal to agent/. Loop thread only. */
#ifndef PROFLET_AGENT_LOOPLAG_H
#define PROFLET_AGENT_LOOPLAG_H

#include <stdint.h>
#include <uv.h>

#include "common/promtext.h"

struct buf;

/** Embedded in the agent. */
struct looplag {
    uv_timer_t timer;
    uint64_t last_ns;      /**< uv_hrtime() of the previous tick */
    uint64_t last_cpu_ns;  /**< the loop thread's CPU time then */
    uint64_t max_ns;       /**< the largest lateness since start */
    uint64_t max_busy_ns;  /**< the largest lateness the thread spent computing */
    struct prom_hist hist; /**< lateness of every tick, seconds */
};

/** Starts the timer on `loop`. Returns 0 or a libuv error. */
int looplag_start(struct looplag *l, uv_loop_t *loop);
/** Closes the timer (no callback needed: the struct outlives the loop). */
void looplag_close(struct looplag *l);
/** The largest lateness since start, nanoseconds. */
uint64_t looplag_max_ns(const struct looplag *l);
/** The largest part of a lateness that the loop thread spent on the CPU,
 * nanoseconds: a stall of proflet's own making, not of a busy machine
 * that left the process waiting for a core. */
uint64_t looplag_max_busy_ns(const struct looplag *l);
/** Appends proflet_loop_lag_seconds, proflet_loop_lag_max_seconds and
 * proflet_loop_busy_max_seconds. */
void looplag_metrics(const struct looplag *l, struct buf *b);

#endif
