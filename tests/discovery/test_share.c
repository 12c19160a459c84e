/* SPDX-License-Identifier: Apache-2.0 */
/* Shared discovery: jobs whose kubernetes_sd (or file_sd) settings are the
 * same are served by one provider, as Prometheus' discovery manager does.
 * Checks against the fake API server (tests/k8s/) that two such jobs cost
 * one list and one watch, that both receive every group, that the watch
 * survives an apply removing one of the jobs and stops with the last one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "net/net.h"
#include "tests/discovery/fake.h"
#include "tests/discovery/recorder.h"

struct env {
    uv_loop_t loop;
    struct net_client *http;
    struct disc_manager *m;
    struct rec r;
    struct fake f;
    struct tcfg cfg;
    struct tjob sc[3];
    struct disc_k8s_cfg sd[3];
    char url[3][64]; /* one copy per job: sharing must not depend on pointers */
};

static void env_init(struct env *e)
{
    char err[256];

    memset(e, 0, sizeof(*e));
    fake_start(&e->f, "basic.json", NULL, NULL);
    ASSERT_EQ(uv_loop_init(&e->loop), 0);
    ASSERT_EQ(
        net_client_new(&(struct net_client_opts){ .loop = &e->loop }, &e->http, err, sizeof(err)),
        0);
    e->r.loop = &e->loop;
    e->m = rec_manager_new((struct disc_manager_opts){
        .loop = &e->loop, .http = e->http, .on_update = rec_cb, .update_ud = &e->r });
    for (int i = 0; i < 3; i++) {
        snprintf(e->url[i], sizeof(e->url[i]), "%s", e->f.url);
        e->sd[i].role = "pod";
        e->sd[i].api_server = e->url[i];
        e->sc[i].sd.k8s_sd = &e->sd[i];
        e->sc[i].sd.n_k8s_sd = 1;
    }
    /* The Helm chart's layout: one job per profile type, same SD config. */
    e->sc[0].job_name = "pyroscope/cpu";
    e->sc[1].job_name = "pyroscope/memory";
    e->sc[2].job_name = "pyroscope/goroutine";
}

/* Applies jobs sc[first .. first + n). */
static void env_apply(struct env *e, unsigned first, unsigned n)
{
    char err[512];

    e->cfg.scrape = n ? &e->sc[first] : NULL;
    e->cfg.n_scrape = n;
    ASSERT_EQ(tcfg_apply(e->m, &e->cfg, err, sizeof(err)), 0);
}

static void env_done(struct env *e)
{
    int closed = 0, nclosed = 0;

    disc_manager_close(e->m, closed_flag, &closed);
    net_client_close(e->http, closed_flag, &nclosed);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    ASSERT_EQ(closed, 1);
    ASSERT_EQ(nclosed, 1);
    rec_work_done();
    ASSERT_EQ(uv_loop_close(&e->loop), 0);
    fake_stop(&e->f);
    rec_free(&e->r);
}

/* From the fake server's /state: open watches, or list / watch requests
 * made so far ("watches", "list", "watch"). */
static int server_count(struct env *e, const char *what)
{
    int st, v = -1;
    char *body = fake_http(&e->f, "GET", "/state", NULL, &st);
    json_object *o = json_tokener_parse(body), *x = NULL, *req = NULL;

    ASSERT_EQ(st, 200);
    ASSERT_NOT_NULL(o);
    if (strcmp(what, "watches") == 0) {
        if (json_object_object_get_ex(o, "watches", &x))
            v = json_object_get_int(x);
    } else if (json_object_object_get_ex(o, "requests", &req) &&
               json_object_object_get_ex(req, what, &x)) {
        v = json_object_get_int(x);
    }
    json_object_put(o);
    free(body);
    ASSERT_GE(v, 0);
    return v;
}

/* Runs the loop until the server reports `want` open watches (10 s). */
static void wait_open_watches(struct env *e, int want)
{
    RUN_UNTIL(&e->loop, server_count(e, "watches") == want, 10000);
}

static struct rec_src *pod_src(struct env *e, const char *job, const char *ns, const char *name)
{
    char s[256];

    snprintf(s, sizeof(s), "pod/%s/%s", ns, name);
    return rec_find(&e->r, job, s);
}

static size_t job_sources(struct env *e, const char *job)
{
    size_t n = 0;

    for (size_t i = 0; i < e->r.n; i++)
        n += strcmp(e->r.s[i].job, job) == 0;
    return n;
}

static void add_pod(struct env *e, const char *name, const char *ip)
{
    char b[1024];

    snprintf(b, sizeof(b),
             "{\"kind\":\"pods\",\"object\":{\"metadata\":{\"name\":\"%s\",\"namespace\":\"shop\","
             "\"labels\":{\"app\":\"web\"}},\"spec\":{\"nodeName\":\"n1\",\"containers\":"
             "[{\"name\":\"c\",\"image\":\"i\",\"ports\":[{\"name\":\"http\",\"containerPort\":"
             "6060,\"protocol\":\"TCP\"}]}]},\"status\":{\"phase\":\"Running\",\"podIP\":\"%s\"}}}",
             name, ip);
    fake_ctl(&e->f, "/apply", b);
}

static double metric(struct env *e, const char *series)
{
    struct buf b;
    const char *p;
    double v = -1;

    buf_init(&b, 1 << 20);
    disc_manager_metrics(e->m, &b);
    p = b.data ? strstr(b.data, series) : NULL;
    if (p)
        v = strtod(p + strlen(series) + 1, NULL);
    buf_done(&b);
    return v;
}

#define LISTS(job) "proflet_discovery_lists_total{job=\"" job "\",provider=\"kubernetes\"}"
#define TARGETS(job) "proflet_discovery_targets{job=\"" job "\",provider=\"kubernetes\"}"

TEST(identical_k8s_configs_share_one_list_and_watch)
{
    struct env e;
    struct rec_src *a, *b;
    unsigned rounds;

    env_init(&e);
    env_apply(&e, 0, 2);
    ASSERT_EQ(disc_manager_providers(e.m), 1);
    RUN_UNTIL(&e.loop, disc_manager_ready(e.m), 10000);
    ASSERT_TRUE(disc_manager_ready(e.m));
    wait_open_watches(&e, 1);
    ASSERT_EQ(server_count(&e, "list"), 1);
    ASSERT_EQ(server_count(&e, "watch"), 1);
    /* Both jobs have every pod, with the same labels. */
    ASSERT_EQ(job_sources(&e, "pyroscope/cpu"), 3);
    ASSERT_EQ(job_sources(&e, "pyroscope/memory"), 3);
    a = pod_src(&e, "pyroscope/cpu", "shop", "web-1");
    b = pod_src(&e, "pyroscope/memory", "shop", "web-1");
    ASSERT_NOT_NULL(a);
    ASSERT_NOT_NULL(b);
    ASSERT_EQ(a->n, 1);
    ASSERT_EQ(b->n, 1);
    ASSERT_TRUE(labels_equal(&a->t[0], &b->t[0]));
    /* Each job counts the shared provider's work; there is one provider. */
    ASSERT_EQ(metric(&e, LISTS("pyroscope/cpu")), 1);
    ASSERT_EQ(metric(&e, LISTS("pyroscope/memory")), 1);
    ASSERT_EQ(metric(&e, TARGETS("pyroscope/memory")), 3);
    ASSERT_EQ(metric(&e, "\nproflet_discovery_providers"), 1);

    /* A watch event reaches both jobs. */
    add_pod(&e, "web-3", "10.0.0.9");
    RUN_UNTIL(&e.loop,
              pod_src(&e, "pyroscope/cpu", "shop", "web-3") &&
                  pod_src(&e, "pyroscope/memory", "shop", "web-3"),
              10000);
    ASSERT_NOT_NULL(pod_src(&e, "pyroscope/cpu", "shop", "web-3"));
    ASSERT_NOT_NULL(pod_src(&e, "pyroscope/memory", "shop", "web-3"));

    /* A third job with the same settings joins the running provider: it
     * gets the current groups at once, with no new list or watch. */
    env_apply(&e, 0, 3);
    RUN_UNTIL(&e.loop, job_sources(&e, "pyroscope/goroutine") == 4, 10000);
    ASSERT_EQ(job_sources(&e, "pyroscope/goroutine"), 4);
    ASSERT_EQ(disc_manager_providers(e.m), 1);
    ASSERT_EQ(server_count(&e, "list"), 1);
    ASSERT_EQ(server_count(&e, "watch"), 1);

    /* Remove two of the jobs: they get empty groups, the remaining one
     * nothing, and the watch keeps running. */
    rounds = e.r.rounds;
    env_apply(&e, 1, 1);
    RUN_UNTIL(&e.loop, e.r.n == 4, 10000);
    ASSERT_EQ(e.r.n, 4);
    ASSERT_EQ(job_sources(&e, "pyroscope/memory"), 4);
    ASSERT_EQ(e.r.rounds, rounds + 2); /* one per removed job */
    ASSERT_EQ(disc_manager_providers(e.m), 1);
    run_turns(&e.loop, 20);
    ASSERT_EQ(server_count(&e, "watches"), 1);
    ASSERT_EQ(server_count(&e, "list"), 1);
    ASSERT_EQ(server_count(&e, "watch"), 1);
    ASSERT_STR_EQ(disc_manager_last_error(e.m), "");
    add_pod(&e, "web-4", "10.0.0.10");
    RUN_UNTIL(&e.loop, pod_src(&e, "pyroscope/memory", "shop", "web-4"), 10000);
    ASSERT_NOT_NULL(pod_src(&e, "pyroscope/memory", "shop", "web-4"));
    ASSERT_NULL(pod_src(&e, "pyroscope/cpu", "shop", "web-4"));

    /* Remove the last job: its groups go away and the watch stops. */
    env_apply(&e, 0, 0);
    RUN_UNTIL(&e.loop, e.r.n == 0, 10000);
    ASSERT_EQ(e.r.n, 0);
    ASSERT_EQ(disc_manager_providers(e.m), 0);
    wait_open_watches(&e, 0);
    ASSERT_EQ(server_count(&e, "watch"), 1);
    env_done(&e);
}

TEST(different_settings_get_their_own_provider)
{
    struct env e;
    struct disc_k8s_selector_cfg sel[] = { { "pod", "app=db", NULL } };

    env_init(&e);
    e.sd[1].selectors = sel;
    e.sd[1].n_selectors = 1;
    env_apply(&e, 0, 2);
    ASSERT_EQ(disc_manager_providers(e.m), 2);
    RUN_UNTIL(&e.loop, disc_manager_ready(e.m), 10000);
    wait_open_watches(&e, 2);
    ASSERT_EQ(server_count(&e, "list"), 2);
    ASSERT_EQ(job_sources(&e, "pyroscope/cpu"), 3);
    ASSERT_EQ(job_sources(&e, "pyroscope/memory"), 1);
    ASSERT_NOT_NULL(pod_src(&e, "pyroscope/memory", "default", "db-0"));
    /* The second job's settings become equal to the first's: it moves to
     * the first provider and the other one stops. */
    e.sd[1].selectors = NULL;
    e.sd[1].n_selectors = 0;
    env_apply(&e, 0, 2);
    ASSERT_EQ(disc_manager_providers(e.m), 1);
    RUN_UNTIL(&e.loop, job_sources(&e, "pyroscope/memory") == 3, 10000);
    ASSERT_EQ(job_sources(&e, "pyroscope/memory"), 3);
    wait_open_watches(&e, 1);
    ASSERT_EQ(server_count(&e, "list"), 2);
    env_done(&e);
}

TEST(identical_pieces_of_one_job_share_too)
{
    struct env e;
    struct disc_k8s_cfg two[2];

    env_init(&e);
    two[0] = e.sd[0];
    two[1] = e.sd[1];
    e.sc[0].sd.k8s_sd = two;
    e.sc[0].sd.n_k8s_sd = 2;
    env_apply(&e, 0, 1);
    ASSERT_EQ(disc_manager_providers(e.m), 1);
    RUN_UNTIL(&e.loop, disc_manager_ready(e.m), 10000);
    wait_open_watches(&e, 1);
    ASSERT_EQ(server_count(&e, "list"), 1);
    /* One provider, so each pod once (not concatenated twice). */
    ASSERT_EQ(pod_src(&e, "pyroscope/cpu", "shop", "web-1")->n, 1);
    env_done(&e);
}

TEST(file_sd_shared_between_jobs)
{
    uv_loop_t loop;
    struct rec r = { 0 };
    struct tcfg c;
    struct tjob sc[2];
    struct disc_file_cfg fsd[2];
    char dir[] = "/tmp/disc-share-XXXXXX", path[128], src[160], *files[2][1];
    struct disc_manager *m;
    char err[256];
    FILE *fp;

    ASSERT_NOT_NULL(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/t.json", dir);
    fp = fopen(path, "w");
    ASSERT_NOT_NULL(fp);
    fputs("[{\"targets\": [\"10.1.0.1:6060\", \"10.1.0.2:6060\"], \"labels\": {\"a\": \"b\"}}]",
          fp);
    fclose(fp);
    snprintf(src, sizeof(src), "%s:0", path); /* file_sd sources are <path>:<group> */
    memset(&c, 0, sizeof(c));
    memset(sc, 0, sizeof(sc));
    memset(fsd, 0, sizeof(fsd));
    for (int i = 0; i < 2; i++) {
        files[i][0] = strdup(path); /* separate copies of the same settings */
        fsd[i].files = files[i];
        fsd[i].n_files = 1;
        sc[i].sd.file_sd = &fsd[i];
        sc[i].sd.n_file_sd = 1;
    }
    sc[0].job_name = "x";
    sc[1].job_name = "y";
    c.scrape = sc;
    c.n_scrape = 2;
    ASSERT_EQ(uv_loop_init(&loop), 0);
    r.loop = &loop;
    m = rec_manager_new(
        (struct disc_manager_opts){ .loop = &loop, .on_update = rec_cb, .update_ud = &r });
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    ASSERT_EQ(disc_manager_providers(m), 1);
    RUN_UNTIL(&loop, r.n == 2, 5000);
    ASSERT_EQ(r.n, 2);
    ASSERT_NOT_NULL(rec_find(&r, "x", src));
    ASSERT_NOT_NULL(rec_find(&r, "y", src));
    ASSERT_EQ(rec_find(&r, "x", src)->n, 2);
    ASSERT_EQ(rec_find(&r, "y", src)->n, 2);
    /* Job x goes: only its group is emptied. */
    c.scrape = &sc[1];
    c.n_scrape = 1;
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    ASSERT_EQ(disc_manager_providers(m), 1);
    RUN_UNTIL(&loop, r.n == 1, 5000);
    ASSERT_NULL(rec_find(&r, "x", src));
    ASSERT_NOT_NULL(rec_find(&r, "y", src));
    close_and_check(&loop, m);
    rec_free(&r);
    unlink(path);
    rmdir(dir);
    free(files[0][0]);
    free(files[1][0]);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
