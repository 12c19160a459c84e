/* SPDX-License-Identifier: Apache-2.0 */
/** The one bounded queue of CPU work every module submits to (gunzip,
 * decode, delta, encode, gzip, zstd, file reads and writes).
 *
 * At most `max_inflight` jobs occupy libuv pool threads at once, so the
 * file-system work and DNS that share libuv's pool are never starved. Jobs
 * beyond that wait in a FIFO on the loop thread. A job submitted with
 * WORKQ_SKIPPABLE (a scrape's delta) is refused once `max_backlog` jobs
 * wait, so the caller skips it and counts it; other jobs (spool writes,
 * encodes of accepted profiles) always queue: their owners bound how many
 * they submit.
 *
 * A job may also declare a cost, the peak memory it will use (bytes): jobs
 * start only while the costs of the running ones fit `max_cost`, so every
 * in-flight profile shares one memory budget and a job that does not fit
 * waits for room instead of overcommitting. A job costlier than the whole
 * budget is refused (-E2BIG). Zero-cost jobs are bounded by their owners.
 * A job may also say what it holds while it waits (a scrape's compressed
 * body): the waiting jobs together hold at most the budget too, and a
 * WORKQ_SKIPPABLE job that would wait past that is refused like one past a
 * full backlog, so a backlog of large bodies cannot grow the process
 * beyond what the budget promises. What a job leaves behind and someone
 * keeps for a while (a web page's flame graph while it is sent) can be
 * charged to the budget too, up to half of it, so work always keeps the
 * other half: jobs start only while the running ones and the charges fit.
 *
 * The loop thread owns the queue. A job's `fn` runs on a pool thread and
 * touches only its own argument; `after` runs on the loop thread with 0, or
 * UV_ECANCELED for a job cancelled before it started. */
#ifndef PROFLET_COMMON_WORKQ_H
#define PROFLET_COMMON_WORKQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef void (*workq_fn)(void *arg);
typedef void (*workq_after_fn)(void *arg, int status);

enum {
    WORKQ_SKIPPABLE = 1 << 0, /**< refuse (-EAGAIN) when the backlog is full */
};

/** Counters, for metrics. */
struct workq_stats {
    unsigned inflight;
    unsigned backlog;
    uint64_t completed;
    uint64_t rejected;      /**< refused: a full backlog */
    uint64_t over_budget;   /**< refused: costlier than the whole budget */
    uint64_t cost_inflight; /**< bytes the running jobs declared */
    uint64_t backlog_held;  /**< bytes the waiting jobs hold */
    uint64_t max_cost;      /**< the budget (0: none) */
    uint64_t charged;       /**< bytes held outside jobs (workq_charge) */
};

struct workq;

/** What a queue is made with. */
struct workq_opts {
    uv_loop_t *loop;       /**< the queue's loop; jobs complete on it */
    unsigned max_inflight; /**< jobs on pool threads at once (0: 1) */
    unsigned max_backlog;  /**< waiting WORKQ_SKIPPABLE jobs before they are refused */
};

/** Creates a queue. Returns 0 and the queue in `*out` (the caller's, for
 * workq_free()), or -ENOMEM with "out of memory" in `err` and NULL in
 * `*out`. */
int workq_new(const struct workq_opts *o, struct workq **out, char *err, size_t errlen);
/** Changes the bounds (a reload); jobs already queued stay. */
void workq_set_limits(struct workq *q, unsigned max_inflight, unsigned max_backlog);
/** Sets the memory budget of running jobs, bytes (0: no budget). */
void workq_set_budget(struct workq *q, uint64_t max_cost);
/** Queues `fn(arg)`, then `after(arg, status)` on the loop. Returns 0, or
 * -EAGAIN (a WORKQ_SKIPPABLE job and a full backlog) or -ENOMEM, in which
 * case nothing was queued and `after` never runs. */
int workq_submit(struct workq *q, unsigned flags, workq_fn fn, workq_after_fn after, void *arg);
/** workq_submit() for a job that will use up to `cost` bytes at its peak;
 * also -E2BIG when `cost` exceeds the whole budget. */
int workq_submit_cost(struct workq *q, unsigned flags, uint64_t cost, workq_fn fn,
                      workq_after_fn after, void *arg);
/** workq_submit_cost() for a job that holds `held` bytes while it waits;
 * also -EAGAIN when a WORKQ_SKIPPABLE job would wait and the waiting jobs'
 * bytes would pass the budget. */
int workq_submit_held(struct workq *q, unsigned flags, uint64_t cost, uint64_t held, workq_fn fn,
                      workq_after_fn after, void *arg);
/** Charges `bytes` that the caller keeps outside any job to the budget,
 * until workq_uncharge(): jobs then start only while their costs, the
 * running ones' and the charges fit. Returns 0, or -EAGAIN when the charges
 * together would pass half the budget (nothing is charged then). */
int workq_charge(struct workq *q, uint64_t bytes);
/** Gives back `bytes` of workq_charge(): waiting jobs may start. */
void workq_uncharge(struct workq *q, uint64_t bytes);
/** Cancels every job not started yet: their `after` runs with
 * UV_ECANCELED, from this call. */
void workq_cancel_backlog(struct workq *q);
/** Jobs running or waiting. */
unsigned workq_pending(const struct workq *q);
/** Fills `out`. */
void workq_get_stats(const struct workq *q, struct workq_stats *out);
/** Frees the queue; nothing may be pending (NULL is fine). */
void workq_free(struct workq *q);

#endif
