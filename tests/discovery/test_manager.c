/* SPDX-License-Identifier: Apache-2.0 */
/* Manager + static provider: groups, keep/stop on apply, coalescing,
 * readiness, metrics (checked with promtool), two-phase close. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/discovery/recorder.h"

static struct conf_kv kv_env[] = { { "env", "dev" }, { "__address__", "label-loses" } };
static char *tg0[] = { "10.0.0.1:6060", "10.0.0.2:6060" };
static char *tg1[] = { "localhost:7070" };

static void make_cfg(struct tcfg *c, struct tjob *sc, struct disc_static_cfg *st, unsigned n_st,
                     const char *job)
{
    memset(c, 0, sizeof(*c));
    memset(sc, 0, sizeof(*sc));
    sc->job_name = (char *)job;
    sc->sd.static_configs = st;
    sc->sd.n_static = n_st;
    c->scrape = sc;
    c->n_scrape = 1;
}

static void base_statics(struct disc_static_cfg st[2])
{
    memset(st, 0, 2 * sizeof(*st));
    st[0].application = "ride-sharing-app";
    st[0].spy_name = "gospy";
    st[0].targets = tg0;
    st[0].n_targets = 2;
    st[0].labels = kv_env;
    st[0].n_labels = 2;
    st[1].targets = tg1;
    st[1].n_targets = 1;
}

TEST(static_groups_and_labels)
{
    uv_loop_t loop;
    struct rec r = { 0 };
    struct tcfg c;
    struct tjob sc;
    struct disc_static_cfg st[2];
    struct disc_manager *m;
    char err[256];
    struct rec_src *s;

    uv_loop_init(&loop);
    r.loop = &loop;
    base_statics(st);
    make_cfg(&c, &sc, st, 2, "go-apps");
    m = rec_manager_new(
        (struct disc_manager_opts){ .loop = &loop, .on_update = rec_cb, .update_ud = &r });
    ASSERT_FALSE(disc_manager_ready(m));
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    ASSERT_EQ(r.rounds, 0); /* never from inside apply */
    uv_run(&loop, UV_RUN_NOWAIT);
    ASSERT_EQ(r.rounds, 1);
    ASSERT_TRUE(disc_manager_ready(m));
    ASSERT_EQ(r.n, 2);
    s = rec_find(&r, "go-apps", "static/go-apps/0");
    ASSERT_NOT_NULL(s);
    ASSERT_EQ(s->n, 2);
    ASSERT_STR_EQ(labels_get(&s->t[0], "__address__"), "10.0.0.1:6060");
    ASSERT_STR_EQ(labels_get(&s->t[1], "__address__"), "10.0.0.2:6060");
    ASSERT_STR_EQ(labels_get(&s->t[0], "env"), "dev");
    ASSERT_STR_EQ(labels_get(&s->t[0], "service_name"), "ride-sharing-app");
    ASSERT_STR_EQ(labels_get(&s->t[0], "__spy_name__"), "gospy");
    ASSERT_EQ(s->t[0].n, 4);
    s = rec_find(&r, "go-apps", "static/go-apps/1");
    ASSERT_NOT_NULL(s);
    ASSERT_EQ(s->n, 1);
    ASSERT_EQ(s->t[0].n, 1);
    ASSERT_STR_EQ(labels_get(&s->t[0], "__address__"), "localhost:7070");

    /* Same settings (a fresh copy of the strings): nothing is re-emitted. */
    {
        struct disc_static_cfg st2[2];
        char a[] = "ride-sharing-app";

        base_statics(st2);
        st2[0].application = a;
        make_cfg(&c, &sc, st2, 2, "go-apps");
        ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
        uv_run(&loop, UV_RUN_DEFAULT); /* returns: nothing armed */
        ASSERT_EQ(r.rounds, 1);
    }

    /* Drop the second static config: its group goes away. */
    make_cfg(&c, &sc, st, 1, "go-apps");
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ASSERT_EQ(r.rounds, 2);
    ASSERT_EQ(r.n, 1);
    ASSERT_NULL(rec_find(&r, "go-apps", "static/go-apps/1"));

    /* Change a label: re-delivered with the new value. */
    st[0].labels[0].value = "prod";
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ASSERT_EQ(r.rounds, 3);
    s = rec_find(&r, "go-apps", "static/go-apps/0");
    ASSERT_STR_EQ(labels_get(&s->t[1], "env"), "prod");
    st[0].labels[0].value = "dev";

    /* The job disappears: an empty group for each of its sources. */
    ASSERT_EQ(tcfg_apply(m, NULL, err, sizeof(err)), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ASSERT_EQ(r.rounds, 4);
    ASSERT_EQ(r.n, 0);
    ASSERT_EQ(disc_manager_providers(m), 0);
    close_and_check(&loop, m);
    rec_free(&r);
}

TEST(two_jobs_separate_callbacks)
{
    uv_loop_t loop;
    struct rec r = { 0 };
    struct tcfg c;
    struct tjob sc[2];
    struct disc_static_cfg st[2];
    struct disc_manager *m;
    char err[256];

    uv_loop_init(&loop);
    r.loop = &loop;
    base_statics(st);
    memset(&c, 0, sizeof(c));
    memset(sc, 0, sizeof(sc));
    sc[0].job_name = "a";
    sc[0].sd.static_configs = &st[0];
    sc[0].sd.n_static = 1;
    sc[1].job_name = "b";
    sc[1].sd.static_configs = &st[1];
    sc[1].sd.n_static = 1;
    c.scrape = sc;
    c.n_scrape = 2;
    m = rec_manager_new(
        (struct disc_manager_opts){ .loop = &loop, .on_update = rec_cb, .update_ud = &r });
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ASSERT_EQ(r.rounds, 2);
    ASSERT_NOT_NULL(rec_find(&r, "a", "static/a/0"));
    ASSERT_NOT_NULL(rec_find(&r, "b", "static/b/0"));
    /* Remove job a only: b is untouched (no third round for b). */
    c.scrape = &sc[1];
    c.n_scrape = 1;
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ASSERT_EQ(r.rounds, 3);
    ASSERT_NULL(rec_find(&r, "a", "static/a/0"));
    ASSERT_NOT_NULL(rec_find(&r, "b", "static/b/0"));
    close_and_check(&loop, m);
    rec_free(&r);
}

TEST(coalescing_delay)
{
    uv_loop_t loop;
    struct rec r = { 0 };
    struct tcfg c;
    struct tjob sc;
    struct disc_static_cfg st[2];
    struct disc_manager *m;
    char err[256];
    uint64_t t0, t1;

    uv_loop_init(&loop);
    r.loop = &loop;
    base_statics(st);
    make_cfg(&c, &sc, st, 1, "j");
    m = rec_manager_new((struct disc_manager_opts){
        .loop = &loop, .coalesce_ms = 300, .on_update = rec_cb, .update_ud = &r });
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ASSERT_EQ(r.rounds, 1); /* quiet before: delivered at once */
    t0 = r.last_ms;
    /* Three changes in quick succession: one round, at least 300 ms after
     * the previous one, with the final state. */
    st[0].labels[0].value = "v1";
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    st[0].labels[0].value = "v2";
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    st[0].labels[0].value = "v3";
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    uv_run(&loop, UV_RUN_NOWAIT);
    ASSERT_EQ(r.rounds, 1);
    uv_run(&loop, UV_RUN_DEFAULT);
    ASSERT_EQ(r.rounds, 2);
    t1 = r.last_ms;
    ASSERT_GE(t1 - t0, 300);
    ASSERT_LT(t1 - t0, 1500);
    ASSERT_STR_EQ(labels_get(&rec_find(&r, "j", "static/j/0")->t[0], "env"), "v3");
    st[0].labels[0].value = "dev";
    close_and_check(&loop, m);
    rec_free(&r);
}

TEST(apply_from_callback_is_refused)
{
    uv_loop_t loop;
    struct rec r = { 0 };
    struct tcfg c;
    struct tjob sc;
    struct disc_static_cfg st[2];
    struct disc_manager *m;
    char err[256];

    uv_loop_init(&loop);
    r.loop = &loop;
    base_statics(st);
    make_cfg(&c, &sc, st, 2, "j");
    m = rec_manager_new(
        (struct disc_manager_opts){ .loop = &loop, .on_update = rec_cb, .update_ud = &r });
    r.m = m;
    r.try_apply = true;
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ASSERT_EQ(r.rounds, 1);
    ASSERT_LT(r.apply_rc, 0);
    ASSERT_EQ(disc_manager_providers(m), 1); /* the refused apply changed nothing */
    close_and_check(&loop, m);
    rec_free(&r);
}

TEST(ready_with_no_providers_and_close_with_pending)
{
    uv_loop_t loop;
    struct rec r = { 0 };
    struct tcfg c;
    struct tjob sc;
    struct disc_static_cfg st[2];
    struct disc_manager *m;
    char err[256];

    uv_loop_init(&loop);
    m = rec_manager_new(
        (struct disc_manager_opts){ .loop = &loop, .on_update = rec_cb, .update_ud = &r });
    ASSERT_FALSE(disc_manager_ready(m));
    memset(&c, 0, sizeof(c));
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    ASSERT_TRUE(disc_manager_ready(m));
    /* Close with an undelivered update: nothing is delivered, no leak. */
    base_statics(st);
    make_cfg(&c, &sc, st, 2, "j");
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    close_and_check(&loop, m);
    ASSERT_EQ(r.rounds, 0);
    rec_free(&r);
}

TEST(metrics_pass_promtool)
{
    uv_loop_t loop;
    struct rec r = { 0 };
    struct tcfg c;
    struct tjob sc;
    struct disc_static_cfg st[2];
    struct disc_manager *m;
    char err[256];
    struct buf b;

    uv_loop_init(&loop);
    r.loop = &loop;
    base_statics(st);
    make_cfg(&c, &sc, st, 2, "job \"quoted\"\\x");
    m = rec_manager_new(
        (struct disc_manager_opts){ .loop = &loop, .on_update = rec_cb, .update_ud = &r });
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    buf_init(&b, 1 << 20);
    disc_manager_metrics(m, &b);
    ASSERT_NOT_NULL(strstr(b.data, "proflet_discovery_ready 1\n"));
    ASSERT_NOT_NULL(strstr(b.data, "proflet_discovery_targets{job=\"job \\\"quoted\\\"\\\\x\","
                                   "provider=\"static\"} 3\n"));
    ASSERT_NOT_NULL(strstr(b.data, "# TYPE proflet_discovery_errors_total counter\n"));
    ASSERT_PROMTOOL_METRICS(b.data, b.len);
    buf_done(&b);
    close_and_check(&loop, m);
    rec_free(&r);
}

/* An apply that cannot start a provider changes nothing: the jobs keep
 * the providers (and targets) they had, so the agent can fail the reload and
 * go on with the running configuration. */
TEST(failed_apply_changes_nothing)
{
    uv_loop_t loop;
    struct rec r = { 0 };
    struct tcfg c;
    struct tjob jobs[2];
    struct disc_static_cfg st[2], st2[1];
    struct disc_k8s_cfg k8s = { 0 };
    static char *other[] = { "127.0.0.9:1" };
    struct disc_manager *m;
    char err[256];

    uv_loop_init(&loop);
    r.loop = &loop;
    base_statics(st);
    make_cfg(&c, &jobs[0], st, 2, "keep");
    m = rec_manager_new(
        (struct disc_manager_opts){ .loop = &loop, .on_update = rec_cb, .update_ud = &r });
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    uv_run(&loop, UV_RUN_NOWAIT);
    ASSERT_EQ(r.n, 2);
    ASSERT_EQ(disc_manager_providers(m), 1);

    /* The next config changes job "keep" and adds a job whose in-cluster
     * Kubernetes discovery cannot start (no KUBERNETES_SERVICE_HOST). */
    memset(st2, 0, sizeof(st2));
    st2[0].targets = other;
    st2[0].n_targets = 1;
    jobs[0].sd.static_configs = st2;
    jobs[0].sd.n_static = 1;
    unsetenv("KUBERNETES_SERVICE_HOST");
    k8s.role = "pod";
    memset(&jobs[1], 0, sizeof(jobs[1]));
    jobs[1].job_name = "k8s";
    jobs[1].sd.k8s_sd = &k8s;
    jobs[1].sd.n_k8s_sd = 1;
    c.n_scrape = 2;
    ASSERT_LT(tcfg_apply(m, &c, err, sizeof(err)), 0);
    ASSERT_NOT_NULL(strstr(err, "KUBERNETES_SERVICE_HOST"));
    uv_run(&loop, UV_RUN_NOWAIT);
    /* job "keep" still has its two static groups and nothing else. */
    ASSERT_EQ(r.n, 2);
    ASSERT_NOT_NULL(rec_find(&r, "keep", "static/keep/0"));
    ASSERT_NOT_NULL(rec_find(&r, "keep", "static/keep/1"));
    ASSERT_EQ(disc_manager_providers(m), 1);
    ASSERT_TRUE(disc_manager_ready(m));

    /* The same change without the bad job applies. */
    c.n_scrape = 1;
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    uv_run(&loop, UV_RUN_NOWAIT);
    ASSERT_EQ(r.n, 1);
    ASSERT_NOT_NULL(rec_find(&r, "keep", "static/keep/0"));
    ASSERT_EQ(rec_find(&r, "keep", "static/keep/0")->n, 1);
    close_and_check(&loop, m);
    rec_free(&r);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
