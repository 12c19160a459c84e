/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the scrape manager's schedule (scrape/manager.c,
 * scrape/pair.c) on a real libuv loop with a fake transport: each pair's
 * scrapes land on its Prometheus offset inside the interval, as computed
 * independently from the target's labels (docs/design.md "Targets, labels and scheduling");
 * a pair never has two requests in flight (the ticks in between are
 * skipped and counted); re-applying an unchanged configuration keeps the
 * schedule (no extra scrape, same grid); stop() ends every timer. Loops are
 * bounded by deadlines. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "agent/config.h"
#include "common/clock.h"
#include "scrape/internal.h"
#include "test.h"
#include "test_loop.h"

#define N_TARGETS 12
#define INTERVAL_NS 1000000000ULL
/* How late a tick may fire on a busy 2-core machine and still be "on its
 * offset"; the grid is checked against the offset, not the other way. */
#define SLACK_NS 150000000ULL
#define MAX_STARTS 256

struct start {
    char url[128];
    uint64_t t_ns;
    net_done_cb cb;
    void *ud;
    bool done;
};

static struct fake {
    struct start s[MAX_STARTS];
    size_t n;
    bool hold;         /* never answer (a request outliving its interval) */
    uv_timer_t answer; /* answers pending requests with a connect error */
    uv_loop_t *loop;
} fake;

static void answer_cb(uv_timer_t *t)
{
    (void)t;
    for (size_t i = 0; i < fake.n; i++) {
        struct start *s = &fake.s[i];
        struct net_response resp = { .result = NET_ECONNECT, .error = "fake" };

        if (s->done)
            continue;
        s->done = true;
        s->cb((struct net_request *)s, &resp, s->ud);
    }
}

static int fake_start(void *ctx, const struct net_request_opts *o, net_done_cb cb, void *ud,
                      struct net_request **out)
{
    struct start *s;

    (void)ctx;
    if (fake.n == MAX_STARTS)
        return -ENOMEM;
    s = &fake.s[fake.n++];
    snprintf(s->url, sizeof(s->url), "%s", o->url);
    s->t_ns = clock_wall_ns();
    s->cb = cb;
    s->ud = ud;
    s->done = false;
    *out = (struct net_request *)s;
    if (!fake.hold)
        uv_timer_start(&fake.answer, answer_cb, 0, 0);
    return 0;
}

static void fake_cancel(void *ctx, struct net_request *r)
{
    (void)ctx;
    ((struct start *)r)->done = true;
}

static size_t fake_inflight(void *ctx)
{
    size_t n = 0;

    (void)ctx;
    for (size_t i = 0; i < fake.n; i++)
        n += !fake.s[i].done;
    return n;
}

static const struct scrape_transport fake_transport = {
    fake_start,
    fake_cancel,
    fake_inflight,
    NULL,
};

static const char CONFIG[] = "scrape-configs:\n"
                             "  - job-name: sched\n"
                             "    scrape-interval: 1s\n"
                             "    scrape-timeout: 1s\n"
                             "    enabled-profiles: [goroutine]\n";

struct env {
    uv_loop_t loop;
    struct workq *work;
    struct scrape_manager *m;
    struct conf_doc *doc;
    struct disc_targets *targets;
    uint64_t seed;
    uint64_t want_offset[N_TARGETS]; /* by target index */
    char want_url[N_TARGETS][128];
};

static void on_profile(const struct labels *l, uint8_t *data, size_t len, int64_t s, int64_t e,
                       int compression, void *ud)
{
    (void)l, (void)len, (void)s, (void)e, (void)compression, (void)ud;
    free(data);
}

static struct conf_doc *load(void)
{
    struct conf_doc *doc = NULL;
    char err[512];

    if (agent_config_load_string(CONFIG, sizeof(CONFIG) - 1, "test.yaml", 0, &doc, err,
                                 sizeof(err)) < 0) {
        fprintf(stderr, "config: %s\n", err);
        return NULL;
    }
    return doc;
}

static void apply(struct env *e, struct conf_doc *doc)
{
    const struct agent_config *c = agent_config(doc);
    struct scrape_settings ss = { &c->limits.pprof, c->limits.max_body_bytes };
    char err[256];

    ASSERT_EQ(scrape_manager_apply(e->m, doc, c->scrape, c->n_scrape, &ss, err, sizeof(err)), 0);
}

static void env_init(struct env *e, bool hold)
{
    struct workq_opts wo = { .max_inflight = 1, .max_backlog = 16 };
    struct scrape_manager_opts o = { 0 };
    struct disc_group g;
    char err[256];

    memset(e, 0, sizeof(*e));
    memset(&fake, 0, sizeof(fake));
    fake.hold = hold;
    ASSERT_EQ(uv_loop_init(&e->loop), 0);
    fake.loop = &e->loop;
    uv_timer_init(&e->loop, &fake.answer);
    wo.loop = &e->loop;
    ASSERT_EQ(workq_new(&wo, &e->work, err, sizeof(err)), 0);
    e->seed = scrape_offset_seed("test-host", NULL);
    o.loop = &e->loop;
    o.work = e->work;
    o.offset_seed = e->seed;
    o.on_profile = on_profile;
    o.transport = &fake_transport;
    ASSERT_EQ(scrape_manager_new(&o, &e->m, err, sizeof(err)), 0);
    ASSERT_NOT_NULL(e->doc = load());
    apply(e, e->doc);

    /* The targets, and each one's offset computed from its labels alone. */
    e->targets = calloc(1, sizeof(*e->targets) + N_TARGETS * sizeof(struct labels));
    ASSERT_NOT_NULL(e->targets);
    e->targets->_refs = 1;
    e->targets->n = N_TARGETS;
    for (int i = 0; i < N_TARGETS; i++) {
        const struct agent_config *c = agent_config(e->doc);
        struct target_result r;
        char addr[32];

        labels_init(&e->targets->t[i]);
        snprintf(addr, sizeof(addr), "127.0.0.1:%d", 20000 + i);
        ASSERT_EQ(labels_set(&e->targets->t[i], "__address__", addr), 0);
        ASSERT_EQ(target_build(&c->scrape[0], &e->targets->t[i], &r), 0);
        ASSERT_EQ(r.n_pairs, 1);
        e->want_offset[i] = target_offset_ns(r.pairs[0].offset_hash, e->seed, INTERVAL_NS);
        snprintf(e->want_url[i], sizeof(e->want_url[i]), "%s", r.pairs[0].url);
        target_result_done(&r);
    }
    g.source = "static/0";
    g.targets = e->targets;
    scrape_manager_sync("sched", &g, 1, e->m);
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
    uv_close((uv_handle_t *)&fake.answer, NULL);
    RUN_UNTIL(&e->loop, done, 5000);
    ASSERT_TRUE(done);
    ASSERT_EQ(uv_run(&e->loop, UV_RUN_DEFAULT), 0);
    workq_free(e->work);
    disc_targets_unref(e->targets);
    conf_doc_unref(e->doc);
    ASSERT_EQ(uv_loop_close(&e->loop), 0);
}

static size_t starts_of(const char *url, uint64_t *times, size_t max)
{
    size_t n = 0;

    for (size_t i = 0; i < fake.n; i++)
        if (strcmp(fake.s[i].url, url) == 0 && n < max)
            times[n++] = fake.s[i].t_ns;
    return n;
}

/* Circular distance between `t mod interval` and `offset`. A tick may also
 * fire a little early on the wall clock: libuv's timers run on the loop's
 * cached millisecond clock. */
static uint64_t off_by(uint64_t t, uint64_t offset)
{
    uint64_t d = (t % INTERVAL_NS + INTERVAL_NS - offset) % INTERVAL_NS;

    return d < INTERVAL_NS - d ? d : INTERVAL_NS - d;
}

static bool all_scraped(const struct env *e, size_t times)
{
    for (int i = 0; i < N_TARGETS; i++) {
        uint64_t t[8] = { 0 };

        if (starts_of(e->want_url[i], t, 8) < times)
            return false;
    }
    return true;
}

TEST(each_pair_scrapes_on_its_offset)
{
    struct env e;
    uint64_t t0;

    env_init(&e, false);
    t0 = clock_wall_ns();
    RUN_UNTIL(&e.loop, all_scraped(&e, 3), 6000);
    ASSERT_TRUE(all_scraped(&e, 3));
    for (int i = 0; i < N_TARGETS; i++) {
        uint64_t t[8] = { 0 };
        size_t n = starts_of(e.want_url[i], t, 8);

        /* The first scrape comes within one interval, on the offset. */
        ASSERT_LT(t[0] - t0, INTERVAL_NS + SLACK_NS);
        for (size_t k = 0; k < n; k++)
            ASSERT_LT(off_by(t[k], e.want_offset[i]), SLACK_NS);
        /* One per interval: consecutive scrapes are an interval apart. */
        for (size_t k = 1; k < n; k++) {
            ASSERT_LT(t[k] - t[k - 1], INTERVAL_NS + SLACK_NS);
            ASSERT_LT(INTERVAL_NS - SLACK_NS, t[k] - t[k - 1]);
        }
    }
    env_done(&e);
}

TEST(a_pair_never_has_two_requests_in_flight)
{
    struct env e;
    struct scrape_pair *p = NULL;
    size_t pos = 0;
    uint64_t k, t_end;
    void *v;

    env_init(&e, true);
    RUN_UNTIL(&e.loop, all_scraped(&e, 1), 3000);
    ASSERT_TRUE(all_scraped(&e, 1));
    /* Two more intervals with every request held open. */
    t_end = clock_wall_ns() + 2 * INTERVAL_NS + SLACK_NS;
    RUN_UNTIL(&e.loop, clock_wall_ns() > t_end, 4000);
    for (int i = 0; i < N_TARGETS; i++) {
        uint64_t t[8] = { 0 };

        ASSERT_EQ(starts_of(e.want_url[i], t, 8), 1);
    }
    ASSERT_EQ(fake_inflight(NULL), N_TARGETS);
    ASSERT_TRUE(hashmap_next(&e.m->pairs, &pos, &k, &v));
    p = v;
    ASSERT_GE(p->stats->skipped_ticks, 2 * N_TARGETS);
    env_done(&e);
}

TEST(reapplying_the_same_config_keeps_the_schedule)
{
    struct env e;
    struct conf_doc *again;
    size_t before, after;

    env_init(&e, false);
    RUN_UNTIL(&e.loop, all_scraped(&e, 1), 3000);
    ASSERT_TRUE(all_scraped(&e, 1));
    ASSERT_NOT_NULL(again = load());
    apply(&e, again);
    conf_doc_unref(e.doc);
    e.doc = again;
    /* A rebuilt timer would scrape at once or twice in one interval. */
    before = fake.n;
    RUN_UNTIL(&e.loop, all_scraped(&e, 3), 4000);
    ASSERT_TRUE(all_scraped(&e, 3));
    after = fake.n;
    ASSERT_LE(after - before, 2 * N_TARGETS + N_TARGETS / 2);
    for (int i = 0; i < N_TARGETS; i++) {
        uint64_t t[8] = { 0 };
        size_t n = starts_of(e.want_url[i], t, 8);

        for (size_t k = 0; k < n; k++)
            ASSERT_LT(off_by(t[k], e.want_offset[i]), SLACK_NS);
    }
    env_done(&e);
}

TEST(stop_ends_every_timer)
{
    struct env e;
    size_t n;
    uint64_t t_end;

    env_init(&e, false);
    RUN_UNTIL(&e.loop, all_scraped(&e, 1), 3000);
    scrape_manager_stop(e.m);
    n = fake.n;
    t_end = clock_wall_ns() + INTERVAL_NS + SLACK_NS;
    RUN_UNTIL(&e.loop, clock_wall_ns() > t_end, 3000);
    ASSERT_EQ(fake.n, n);
    env_done(&e);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
