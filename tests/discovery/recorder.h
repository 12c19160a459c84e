/* SPDX-License-Identifier: Apache-2.0 */
/* Test helper: records what a disc_manager delivers (deep copies), and
 * builds config pieces by hand. Header-only, included by each test. */
#ifndef PROFLET_TESTS_DISCOVERY_RECORDER_H
#define PROFLET_TESTS_DISCOVERY_RECORDER_H

#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common/workq.h"
#include "discovery/discovery.h"
#include "test_loop.h"
#include "tests/harness/test.h"

/* The discovery settings of a few jobs, built by hand in the shape the
 * configuration file gives them. */
struct tjob {
    const char *job_name;
    struct disc_sd_cfg sd;
};
struct tcfg {
    struct tjob *scrape;
    unsigned n_scrape;
    struct disc_cfg g;
};

/* disc_manager_apply() of every job of `c` (NULL: none). */
static inline int tcfg_apply(struct disc_manager *m, const struct tcfg *c, char *err, size_t errlen)
{
    struct disc_job jobs[16];
    unsigned n = c ? c->n_scrape : 0;

    if (n > 16)
        abort();
    for (unsigned i = 0; i < n; i++)
        jobs[i] = (struct disc_job){ c->scrape[i].job_name, &c->scrape[i].sd };
    return disc_manager_apply(m, jobs, n, c ? &c->g : NULL, err, errlen);
}

/* The work queue of the test's loop: made on first use, freed by
 * close_and_check(). */
static struct workq *rec_wq;

static inline struct workq *rec_work(uv_loop_t *loop)
{
    const struct workq_opts o = { .loop = loop, .max_inflight = 2, .max_backlog = 64 };
    char err[128] = "";
    int rc;

    if (!rec_wq && (rc = workq_new(&o, &rec_wq, err, sizeof(err))) < 0)
        test__fail(__FILE__, __LINE__, "workq_new: %d %s", rc, err);
    return rec_wq;
}

/* disc_manager_new() of `o` with the work queue of its loop, or the test
 * fails with the constructor's message. */
static inline struct disc_manager *rec_manager_new(struct disc_manager_opts o)
{
    struct disc_manager *m;
    char err[256] = "";
    int rc;

    o.work = rec_work(o.loop);
    if ((rc = disc_manager_new(&o, &m, err, sizeof(err))) < 0)
        test__fail(__FILE__, __LINE__, "disc_manager_new: %d %s", rc, err);
    return m;
}

/* Frees the work queue once its loop has run dry. */
static inline void rec_work_done(void)
{
    workq_free(rec_wq);
    rec_wq = NULL;
}

#define REC_MAX_SRC 20000

struct rec_src {
    char *job;
    char *source;
    struct labels *t;
    size_t n;
};

/* The current state per (job, source), as the agent would keep it. */
struct rec {
    struct rec_src *s;
    size_t n;
    unsigned rounds;  /* update callbacks */
    unsigned groups;  /* groups delivered in total */
    uint64_t last_ms; /* uv_now of the last callback */
    uv_loop_t *loop;
    struct disc_manager *m; /* for re-entrancy checks */
    int apply_rc;           /* result of an apply attempted from the callback */
    bool try_apply;
};

static inline struct rec_src *rec_find(struct rec *r, const char *job, const char *src)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->s[i].job, job) == 0 && strcmp(r->s[i].source, src) == 0)
            return &r->s[i];
    return NULL;
}

static inline void rec_cb(const char *job, const struct disc_group *g, size_t n, void *ud)
{
    struct rec *r = ud;

    r->rounds++;
    r->groups += (unsigned)n;
    r->last_ms = r->loop ? uv_now(r->loop) : 0;
    if (r->try_apply) {
        char err[128];

        r->apply_rc = tcfg_apply(r->m, NULL, err, sizeof(err));
    }
    if (!r->s)
        r->s = calloc(REC_MAX_SRC, sizeof(*r->s));
    for (size_t i = 0; i < n; i++) {
        struct rec_src *s = rec_find(r, job, g[i].source);

        if (!s) {
            if (!g[i].targets)
                continue;
            if (r->n >= REC_MAX_SRC)
                abort();
            s = &r->s[r->n++];
            s->job = strdup(job);
            s->source = strdup(g[i].source);
        } else {
            for (size_t k = 0; k < s->n; k++)
                labels_done(&s->t[k]);
            free(s->t);
            s->t = NULL;
            s->n = 0;
        }
        if (!g[i].targets) {
            free(s->job);
            free(s->source);
            *s = r->s[--r->n];
            continue;
        }
        s->t = calloc(g[i].targets->n, sizeof(*s->t));
        for (size_t k = 0; k < g[i].targets->n; k++)
            labels_copy(&s->t[k], &g[i].targets->t[k]);
        s->n = g[i].targets->n;
    }
}

static inline void rec_free(struct rec *r)
{
    for (size_t i = 0; i < r->n; i++) {
        for (size_t k = 0; k < r->s[i].n; k++)
            labels_done(&r->s[i].t[k]);
        free(r->s[i].t);
        free(r->s[i].job);
        free(r->s[i].source);
    }
    free(r->s);
    memset(r, 0, sizeof(*r));
}

static inline void closed_flag(void *ud)
{
    *(int *)ud = 1;
}

/* Closes the manager, runs the loop dry and checks uv_loop_close(). */
static inline void close_and_check(uv_loop_t *loop, struct disc_manager *m)
{
    int closed = 0;

    disc_manager_close(m, closed_flag, &closed);
    uv_run(loop, UV_RUN_DEFAULT);
    ASSERT_EQ(closed, 1);
    rec_work_done();
    ASSERT_EQ(uv_loop_close(loop), 0);
}

#endif
