/* SPDX-License-Identifier: Apache-2.0 */
/* The memory queue of a remote endpoint and the choice of what goes into
 * the next request (docs/design.md "Modules").
 *
 * Batching rules (docs/forwarding.md): a request carries at most one
 * profile per series, never a profile of a series already in flight, and
 * stays within the profile and byte limits (fewer profiles after a split);
 * a partial batch waits until its oldest profile has waited batch-max-wait.
 * With the rule that a refused profile goes back in submission order, each
 * series is delivered in order.
 *
 * Threading: loop thread only. Ownership: the queue links entries it does
 * not own; the remote sink allocates and frees them. */
#include "forward/internal.h"

static void account(struct fwd__queue *q, const struct fwd__qent *e, int d)
{
    q->st->queue_len += (uint64_t)(int64_t)d;
    q->st->queue_bytes += (uint64_t)((int64_t)d * (int64_t)e->p->len);
}

void fwd__queue_unlink(struct fwd__queue *q, struct fwd__qent *e)
{
    if (e->prev)
        e->prev->next = e->next;
    else
        q->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        q->tail = e->prev;
    e->prev = e->next = NULL;
    account(q, e, -1);
}

/* Links `e` before `at` (at the tail if `at` is NULL). */
static void link_before(struct fwd__queue *q, struct fwd__qent *e, struct fwd__qent *at)
{
    e->next = at;
    e->prev = at ? at->prev : q->tail;
    if (e->prev)
        e->prev->next = e;
    else
        q->head = e;
    if (at)
        at->prev = e;
    else
        q->tail = e;
    account(q, e, 1);
}

void fwd__queue_append(struct fwd__queue *q, struct fwd__qent *e)
{
    link_before(q, e, NULL);
}

void fwd__queue_insert_sorted(struct fwd__queue *q, struct fwd__qent *e)
{
    struct fwd__qent *at = q->head;

    while (at && at->seq < e->seq)
        at = at->next;
    link_before(q, e, at);
}

bool fwd__queue_full(const struct fwd__queue *q, const struct cfg_remote *c, size_t add)
{
    return q->st->queue_len >= c->queue_max_profiles ||
           q->st->queue_bytes + add > c->queue_max_bytes;
}

static bool in_batch(const struct fwd__batch *b, uint64_t series)
{
    for (size_t i = 0; i < b->n; i++) {
        if (b->e[i]->series == series)
            return true;
    }
    return false;
}

void fwd__queue_pick(const struct fwd__queue *q, struct fwd__batch *b, size_t max_n,
                     uint64_t max_bytes, bool (*busy)(const void *ud, uint64_t series),
                     const void *ud)
{
    size_t limit = max_n;

    b->n = 0;
    b->bytes = 0;
    b->full = false;
    for (struct fwd__qent *e = q->head; e && b->n < limit; e = e->next) {
        /* One profile per series per request: if the server refuses it, no
         * later profile of its series can have been accepted. */
        if (busy(ud, e->series) || in_batch(b, e->series))
            continue;
        if (b->n > 0 && b->bytes + e->p->len > max_bytes) {
            b->full = true;
            return;
        }
        if (e->max_batch && e->max_batch < limit) {
            limit = e->max_batch;
            if (b->n >= limit) {
                b->full = true;
                return;
            }
        }
        b->e[b->n++] = e;
        b->bytes += e->p->len;
    }
    if (b->n >= limit)
        b->full = true;
}

uint64_t fwd__batch_due(const struct fwd__batch *b, uint64_t wait_ms, bool may_wait)
{
    if (b->full || !may_wait || wait_ms == 0 || b->n == 0)
        return 0;
    for (size_t i = 0; i < b->n; i++) {
        if (b->e[i]->max_batch)
            return 0; /* split: no waiting */
    }
    return b->e[0]->queued_at + wait_ms;
}
