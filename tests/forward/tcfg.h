/* SPDX-License-Identifier: Apache-2.0 */
/* Test helpers: the forwarder's settings as the configuration file gives
 * them (endpoints, spool, global external labels), built by hand from
 * fwd_cfg_remote_init() and fwd_cfg_spool_init(), and fwd_apply() of
 * them; a job that holds a work queue's slot. Header-only. */
#ifndef PROFLET_TESTS_FORWARD_TCFG_H
#define PROFLET_TESTS_FORWARD_TCFG_H

#include <stdatomic.h>
#include <unistd.h>

#include "common/workq.h"
#include "forward/forward.h"

struct tcfg {
    struct cfg_remote *remote;
    unsigned n_remote;
    struct cfg_spool spool;
    struct conf_kv *external_labels;
    unsigned n_external_labels;
};

/* Settings built by hand have no document: `c` and everything it points
 * to must live until fwd_close() has finished, and must not change while
 * an endpoint uses them (a loaded document never does). */
static inline int tcfg_apply(struct fwd *f, const struct tcfg *c, char *err, size_t errlen)
{
    return fwd_apply(f, NULL, c->remote, c->n_remote, &c->spool, c->external_labels,
                     c->n_external_labels, err, errlen);
}

/* A job that holds a slot of the work queue until tblocker_release() (at
 * most 10 s): with a queue of one slot, the jobs submitted next wait in its
 * backlog, where workq_cancel_backlog() cancels them as the agent's
 * shutdown does. `*done` becomes 1 once it has run. */
static atomic_int tblocker_go;

static inline void tblocker_fn(void *arg)
{
    (void)arg;
    for (int i = 0; i < 10000 && !atomic_load(&tblocker_go); i++)
        usleep(1000);
}

static inline void tblocker_after(void *arg, int status)
{
    *(int *)arg = status == 0 ? 1 : -1;
}

static inline int tblocker_start(struct workq *q, int *done)
{
    atomic_store(&tblocker_go, 0);
    *done = 0;
    return workq_submit(q, 0, tblocker_fn, tblocker_after, done);
}

static inline void tblocker_release(void)
{
    atomic_store(&tblocker_go, 1);
}

#endif
