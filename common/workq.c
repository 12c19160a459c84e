/* SPDX-License-Identifier: Apache-2.0 */
/* The bounded CPU work queue (see workq.h; docs/design.md "Threads"): a
 * window of uv_queue_work jobs under a memory budget, plus a FIFO backlog on
 * the loop thread. The head of the FIFO waits for room rather than letting
 * cheaper jobs pass it, so a large profile is never starved by a stream of
 * small ones. The loop thread owns every field; a pool thread only runs a
 * job's `fn` on its own argument. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/workq.h"

struct workq_item {
    uv_work_t req;
    struct workq *q;
    workq_fn fn;
    workq_after_fn after;
    void *arg;
    uint64_t cost, held;
    struct workq_item *next;
};

struct workq {
    uv_loop_t *loop;
    unsigned max_inflight, max_backlog;
    unsigned inflight, backlog;
    struct workq_item *head, *tail;
    uint64_t completed, rejected, over_budget;
    uint64_t max_cost, cost_inflight, backlog_held;
    uint64_t charged; /* held outside any job: workq_charge() */
};

static void pump(struct workq *q);

int workq_new(const struct workq_opts *o, struct workq **out, char *err, size_t errlen)
{
    struct workq *q = calloc(1, sizeof(*q));

    *out = NULL;
    if (!q) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    q->loop = o->loop;
    workq_set_limits(q, o->max_inflight, o->max_backlog);
    *out = q;
    return 0;
}

void workq_set_limits(struct workq *q, unsigned max_inflight, unsigned max_backlog)
{
    q->max_inflight = max_inflight ? max_inflight : 1;
    q->max_backlog = max_backlog;
}

void workq_set_budget(struct workq *q, uint64_t max_cost)
{
    q->max_cost = max_cost;
    pump(q);
}

static void work_cb(uv_work_t *req)
{
    struct workq_item *w = req->data;

    w->fn(w->arg);
}

static void after_cb(uv_work_t *req, int status)
{
    struct workq_item *w = req->data;
    struct workq *q = w->q;

    q->inflight--;
    q->cost_inflight -= w->cost;
    q->completed++;
    w->after(w->arg, status);
    free(w);
    pump(q);
}

/* A job that alone could pass the budget (it shrank since it was queued)
 * still runs alone; but not beside charges, which are only given back as
 * their holders finish. */
static bool room(const struct workq *q, uint64_t cost)
{
    return !q->max_cost || (q->inflight == 0 && q->charged == 0) ||
           q->cost_inflight + q->charged + cost <= q->max_cost;
}

static bool fits(const struct workq *q, const struct workq_item *w)
{
    return room(q, w->cost);
}

static void pump(struct workq *q)
{
    while (q->inflight < q->max_inflight && q->head && fits(q, q->head)) {
        struct workq_item *w = q->head;

        q->head = w->next;
        if (!q->head)
            q->tail = NULL;
        q->backlog--;
        q->backlog_held -= w->held;
        w->req.data = w;
        if (uv_queue_work(q->loop, &w->req, work_cb, after_cb) < 0) {
            w->after(w->arg, UV_ECANCELED);
            free(w);
            continue;
        }
        q->inflight++;
        q->cost_inflight += w->cost;
    }
}

int workq_submit(struct workq *q, unsigned flags, workq_fn fn, workq_after_fn after, void *arg)
{
    return workq_submit_cost(q, flags, 0, fn, after, arg);
}

int workq_submit_cost(struct workq *q, unsigned flags, uint64_t cost, workq_fn fn,
                      workq_after_fn after, void *arg)
{
    return workq_submit_held(q, flags, cost, 0, fn, after, arg);
}

int workq_submit_held(struct workq *q, unsigned flags, uint64_t cost, uint64_t held, workq_fn fn,
                      workq_after_fn after, void *arg)
{
    struct workq_item *w;
    bool waits = q->head || q->inflight >= q->max_inflight || !room(q, cost);

    if (q->max_cost && cost > q->max_cost) {
        q->over_budget++;
        return -E2BIG;
    }
    if ((flags & WORKQ_SKIPPABLE) && waits &&
        (q->backlog >= q->max_backlog || (q->max_cost && q->backlog_held + held > q->max_cost))) {
        q->rejected++;
        return -EAGAIN;
    }
    if (!(w = calloc(1, sizeof(*w))))
        return -ENOMEM;
    w->q = q;
    w->fn = fn;
    w->after = after;
    w->arg = arg;
    w->cost = cost;
    w->held = held;
    if (q->tail)
        q->tail->next = w;
    else
        q->head = w;
    q->tail = w;
    q->backlog++;
    q->backlog_held += held;
    pump(q);
    return 0;
}

int workq_charge(struct workq *q, uint64_t bytes)
{
    if (q->max_cost && q->charged + bytes > q->max_cost / 2)
        return -EAGAIN;
    q->charged += bytes;
    return 0;
}

void workq_uncharge(struct workq *q, uint64_t bytes)
{
    q->charged -= bytes < q->charged ? bytes : q->charged;
    pump(q);
}

void workq_cancel_backlog(struct workq *q)
{
    while (q->head) {
        struct workq_item *w = q->head;

        q->head = w->next;
        q->backlog--;
        q->backlog_held -= w->held;
        w->after(w->arg, UV_ECANCELED);
        free(w);
    }
    q->tail = NULL;
}

unsigned workq_pending(const struct workq *q)
{
    return q->inflight + q->backlog;
}

void workq_get_stats(const struct workq *q, struct workq_stats *out)
{
    out->inflight = q->inflight;
    out->backlog = q->backlog;
    out->completed = q->completed;
    out->rejected = q->rejected;
    out->over_budget = q->over_budget;
    out->cost_inflight = q->cost_inflight;
    out->backlog_held = q->backlog_held;
    out->max_cost = q->max_cost;
    out->charged = q->charged;
}

void workq_free(struct workq *q)
{
    free(q);
}
