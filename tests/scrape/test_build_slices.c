/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of how the scrape manager builds discovery updates and keeps
 * builds across reloads (scrape/manager.c), on a real libuv loop with a
 * transport that never answers (the interval is an hour: nothing is
 * scraped). A group larger than one turn's slice is built over several
 * loop turns and stays out of the job's sources until whole; a later update
 * of the same source supersedes a pending build; a reload restarts a pending
 * build under the new job; an unchanged reload keeps the build itself and
 * re-points its pairs at the new document, while a changed job is rebuilt;
 * a new owner filter restarts a pending build. Loops are bounded by
 * deadlines and turn counts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "agent/config.h"
#include "scrape/internal.h"
#include "test.h"
#include "test_loop.h"

#define BIG 2000 /* several slices */

static int fake_start(void *ctx, const struct net_request_opts *o, net_done_cb cb, void *ud,
                      struct net_request **out)
{
    (void)ctx, (void)o, (void)cb, (void)ud, (void)out;
    return -ECONNREFUSED; /* never reached: the first tick is an hour away at most */
}

static void fake_cancel(void *ctx, struct net_request *r)
{
    (void)ctx, (void)r;
}

static size_t fake_inflight(void *ctx)
{
    (void)ctx;
    return 0;
}

static const struct scrape_transport fake_transport = {
    fake_start,
    fake_cancel,
    fake_inflight,
    NULL,
};

static const char ONE_TYPE[] = "scrape-configs:\n"
                               "  - job-name: big\n"
                               "    scrape-interval: 1h\n"
                               "    enabled-profiles: [goroutine]\n";
static const char TWO_TYPES[] = "scrape-configs:\n"
                                "  - job-name: big\n"
                                "    scrape-interval: 1h\n"
                                "    enabled-profiles: [goroutine, memory]\n";

struct env {
    uv_loop_t loop;
    struct workq *work;
    struct scrape_manager *m;
    struct conf_doc *doc;
};

static void on_profile(const struct labels *l, uint8_t *data, size_t len, int64_t s, int64_t e,
                       int compression, void *ud)
{
    (void)l, (void)len, (void)s, (void)e, (void)compression, (void)ud;
    free(data);
}

static struct conf_doc *load(const char *text)
{
    struct conf_doc *doc = NULL;
    char err[512];

    if (agent_config_load_string(text, strlen(text), "test.yaml", 0, &doc, err, sizeof(err)) < 0) {
        fprintf(stderr, "config: %s\n", err);
        return NULL;
    }
    return doc;
}

/* Applies `text` as a new document, which replaces the env's. */
static void apply(struct env *e, const char *text)
{
    struct conf_doc *doc = load(text);
    const struct agent_config *c;
    struct scrape_settings ss;
    char err[256];

    ASSERT_NOT_NULL(doc);
    c = agent_config(doc);
    ss = (struct scrape_settings){ &c->limits.pprof, c->limits.max_body_bytes };
    ASSERT_EQ(scrape_manager_apply(e->m, doc, c->scrape, c->n_scrape, &ss, err, sizeof(err)), 0);
    conf_doc_unref(e->doc);
    e->doc = doc;
}

/* The owner filter: every target is this process's while `mine` holds. */
static bool mine = true;

static bool owner_cb(uint64_t id, const char **owner, void *ud)
{
    (void)id, (void)ud;
    *owner = mine ? NULL : "peer";
    return mine;
}

static void env_init(struct env *e, const char *text)
{
    struct workq_opts wo = { .max_inflight = 1, .max_backlog = 16 };
    struct scrape_manager_opts o = { 0 };
    char err[256];

    memset(e, 0, sizeof(*e));
    ASSERT_EQ(uv_loop_init(&e->loop), 0);
    wo.loop = &e->loop;
    ASSERT_EQ(workq_new(&wo, &e->work, err, sizeof(err)), 0);
    o.loop = &e->loop;
    o.work = e->work;
    o.offset_seed = 1;
    o.on_profile = on_profile;
    o.transport = &fake_transport;
    o.owner = owner_cb;
    mine = true;
    ASSERT_EQ(scrape_manager_new(&o, &e->m, err, sizeof(err)), 0);
    apply(e, text);
}

static void closed(void *ud)
{
    *(bool *)ud = true;
}

static void env_done(struct env *e)
{
    bool done = false;

    scrape_manager_stop(e->m);
    scrape_manager_close(e->m, closed, &done);
    RUN_UNTIL(&e->loop, done, 5000);
    ASSERT_TRUE(done);
    ASSERT_EQ(uv_run(&e->loop, UV_RUN_DEFAULT), 0);
    workq_free(e->work);
    conf_doc_unref(e->doc);
    ASSERT_EQ(uv_loop_close(&e->loop), 0);
}

/* `n` targets 127.0.x.y:`port`. */
static struct disc_targets *targets(size_t n, int port)
{
    struct disc_targets *d = calloc(1, sizeof(*d) + n * sizeof(struct labels));

    ASSERT_NOT_NULL(d);
    d->_refs = 1;
    d->n = n;
    for (size_t i = 0; i < n; i++) {
        char addr[48];

        labels_init(&d->t[i]);
        snprintf(addr, sizeof(addr), "127.0.%zu.%zu:%d", i >> 8, i & 255, port);
        ASSERT_EQ(labels_set(&d->t[i], "__address__", addr), 0);
    }
    return d;
}

static void sync_one(struct env *e, struct disc_targets *d)
{
    struct disc_group g = { .source = "static/0", .targets = d };

    scrape_manager_sync("big", &g, 1, e->m);
    disc_targets_unref(d);
}

/* True once no build is pending; counts the turns that found one. */
static bool builds_done(struct env *e, unsigned *turns)
{
    if (!e->m->pend_head)
        return true;
    ++*turns;
    return false;
}

/* Runs loop turns until no build is pending; returns how many it took. */
static unsigned run_builds(struct env *e)
{
    unsigned turns = 0;

    RUN_UNTIL_TURNS(&e->loop, builds_done(e, &turns), 10000, 1000);
    return turns;
}

static const struct source_entry *entry_of(const struct scrape_manager *m)
{
    uint64_t k;
    void *v;
    size_t pos = 0;

    ASSERT_NOT_NULL(m->jobs);
    return hashmap_next(&m->jobs->sources, &pos, &k, &v) ? v : NULL;
}

TEST(a_large_group_is_built_over_several_turns)
{
    struct env e;
    unsigned turns;

    env_init(&e, ONE_TYPE);
    sync_one(&e, targets(BIG, 1));
    /* No turn builds it whole, and the job lists none of it meanwhile. */
    ASSERT_LT(e.m->pairs.n, BIG);
    ASSERT_NULL(entry_of(e.m));
    turns = run_builds(&e);
    ASSERT_GE(turns, 3);
    ASSERT_NOT_NULL(entry_of(e.m));
    ASSERT_EQ(entry_of(e.m)->n, BIG);
    ASSERT_EQ(e.m->pairs.n, BIG);
    ASSERT_EQ(e.m->jobs->kept, BIG);
    env_done(&e);
}

TEST(a_later_update_supersedes_a_pending_build)
{
    struct env e;

    env_init(&e, ONE_TYPE);
    sync_one(&e, targets(BIG, 1));
    uv_run(&e.loop, UV_RUN_NOWAIT); /* one slice more */
    ASSERT_NOT_NULL(e.m->pend_head);
    sync_one(&e, targets(10, 2));
    run_builds(&e);
    ASSERT_NOT_NULL(entry_of(e.m));
    ASSERT_EQ(entry_of(e.m)->n, 10);
    ASSERT_EQ(e.m->pairs.n, 10);
    ASSERT_EQ(e.m->jobs->kept, 10);
    /* And a group that goes away takes its pending build with it. */
    sync_one(&e, targets(BIG, 3));
    ASSERT_NOT_NULL(e.m->pend_head);
    {
        struct disc_group g = { .source = "static/0", .targets = NULL };

        scrape_manager_sync("big", &g, 1, e.m);
    }
    ASSERT_NULL(e.m->pend_head);
    ASSERT_NULL(entry_of(e.m));
    ASSERT_EQ(e.m->pairs.n, 0);
    ASSERT_EQ(e.m->jobs->kept, 0);
    env_done(&e);
}

TEST(a_reload_restarts_a_pending_build_under_the_new_job)
{
    struct env e;
    size_t pos = 0;
    uint64_t k;
    void *v;

    env_init(&e, ONE_TYPE);
    sync_one(&e, targets(BIG, 1));
    uv_run(&e.loop, UV_RUN_NOWAIT);
    ASSERT_NOT_NULL(e.m->pend_head);
    apply(&e, TWO_TYPES);
    run_builds(&e);
    ASSERT_EQ(entry_of(e.m)->n, BIG);
    ASSERT_EQ(e.m->pairs.n, 2 * BIG); /* built under the new settings */
    ASSERT_EQ(e.m->jobs->kept, BIG);
    while (hashmap_next(&e.m->pairs, &pos, &k, &v))
        ASSERT_TRUE(((struct scrape_pair *)v)->job == e.m->jobs);
    env_done(&e);
}

TEST(an_unchanged_reload_keeps_the_build_and_a_changed_one_rebuilds)
{
    struct env e;
    const struct source_entry *before;
    const struct agent_config *c;
    size_t pos = 0;
    uint64_t k;
    void *v;

    env_init(&e, ONE_TYPE);
    sync_one(&e, targets(BIG, 1));
    run_builds(&e);
    before = entry_of(e.m);
    ASSERT_NOT_NULL(before);
    apply(&e, ONE_TYPE);
    ASSERT_TRUE(entry_of(e.m) == before); /* taken over, not built again */
    ASSERT_EQ(e.m->pairs.n, BIG);
    ASSERT_EQ(e.m->jobs->kept, BIG);
    /* Every pair now reads the new document (the old one is freed). */
    c = agent_config(e.doc);
    while (hashmap_next(&e.m->pairs, &pos, &k, &v)) {
        const struct scrape_pair *p = v;

        ASSERT_TRUE(p->job == e.m->jobs);
        ASSERT_TRUE(p->tp.profile >= c->scrape[0].profiles &&
                    p->tp.profile < c->scrape[0].profiles + c->scrape[0].n_profiles);
        ASSERT_STR_EQ(p->tp.profile->name, "goroutine");
    }
    apply(&e, TWO_TYPES);
    ASSERT_TRUE(entry_of(e.m) != NULL);
    ASSERT_EQ(e.m->pairs.n, 2 * BIG);
    env_done(&e);
}

TEST(a_new_owner_filter_restarts_a_pending_build)
{
    struct env e;

    env_init(&e, ONE_TYPE);
    sync_one(&e, targets(BIG, 1));
    uv_run(&e.loop, UV_RUN_NOWAIT);
    ASSERT_NOT_NULL(e.m->pend_head);
    ASSERT_GT(e.m->pairs.n, 0); /* the part built so far scrapes */
    mine = false;
    scrape_manager_refilter(e.m);
    run_builds(&e);
    ASSERT_EQ(entry_of(e.m)->n, BIG);
    ASSERT_EQ(e.m->pairs.n, 0); /* no target kept the first answer */
    ASSERT_EQ(e.m->jobs->elsewhere, BIG);
    ASSERT_EQ(e.m->jobs->kept, 0);
    env_done(&e);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
