/* The CPU-work pool: a bounded window of uv_queue_work jobs plus a bounded
 * FIFO backlog on the loop thread.
 *
 * The loop thread owns the pool's state. A job's `fn` runs on a libuv pool
 * thread and touches only its own argument; `after` runs on the loop thread.
 * At most `max_inflight` jobs occupy pool threads at once, so file-system
 * work and DNS that share libuv's pool are never starved; past
 * `max_backlog` queued items, submission fails and the caller skips the
 * scrape and counts it. */
#include <errno.h>
#include <stdlib.h>

#include "agent/agent.h"

struct work_item {
    uv_work_t req;
    struct agent *agent;
    agent_work_fn fn;
    agent_after_fn after;
    void *arg;
    struct work_item *next;
};

void agent__pool_init(struct work_pool *p, unsigned max_inflight, unsigned max_backlog)
{
    p->max_inflight = max_inflight ? max_inflight : 1;
    p->inflight = 0;
    p->max_backlog = max_backlog;
    p->backlog_len = 0;
    p->head = p->tail = NULL;
    p->completed = 0;
    p->rejected = 0;
}

static void work_cb(uv_work_t *req)
{
    struct work_item *w = req->data;

    w->fn(w->arg);
}

static void pump(struct agent *a);

static void after_cb(uv_work_t *req, int status)
{
    struct work_item *w = req->data;
    struct agent *a = w->agent;

    a->pool.inflight--;
    a->pool.completed++;
    w->after(w->arg, status);
    free(w);
    pump(a);
}

static void pump(struct agent *a)
{
    struct work_pool *p = &a->pool;

    while (p->inflight < p->max_inflight && p->head) {
        struct work_item *w = p->head;

        p->head = w->next;
        if (!p->head)
            p->tail = NULL;
        p->backlog_len--;
        w->req.data = w;
        if (uv_queue_work(a->loop, &w->req, work_cb, after_cb) < 0) {
            w->after(w->arg, UV_ECANCELED);
            free(w);
            continue;
        }
        p->inflight++;
    }
}

int agent__pool_submit(struct agent *a, agent_work_fn fn, agent_after_fn after, void *arg)
{
    struct work_pool *p = &a->pool;
    struct work_item *w;

    if (p->inflight >= p->max_inflight && p->backlog_len >= p->max_backlog) {
        p->rejected++;
        return -EAGAIN;
    }
    w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->agent = a;
    w->fn = fn;
    w->after = after;
    w->arg = arg;
    if (p->tail)
        p->tail->next = w;
    else
        p->head = w;
    p->tail = w;
    p->backlog_len++;
    pump(a);
    return 0;
}

void agent__pool_cancel_backlog(struct agent *a)
{
    struct work_pool *p = &a->pool;

    while (p->head) {
        struct work_item *w = p->head;

        p->head = w->next;
        p->backlog_len--;
        w->after(w->arg, UV_ECANCELED);
        free(w);
    }
    p->tail = NULL;
}
