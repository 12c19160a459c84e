/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes pod discovery against the fake API server (tests/k8s/): every
 * scenario runs a disc_manager on a uv loop and checks the groups it
 * delivers, the requests it made and its metrics, within bounded deadlines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "net/net.h"
#include "tests/discovery/fake.h"
#include "tests/discovery/recorder.h"

#define JOB "k8s"

struct env {
    uv_loop_t loop;
    struct net_client *http;
    struct disc_manager *m;
    struct rec r;
    struct fake f;
    struct tcfg cfg;
    struct tjob sc;
    struct disc_k8s_cfg sd;
    char errors[8192];
};

static void on_err(const char *job, const char *prov, const char *msg, void *ud)
{
    struct env *e = ud;
    size_t n = strlen(e->errors);

    snprintf(e->errors + n, sizeof(e->errors) - n, "%s\n", msg);
    if (getenv("DISC_DEBUG"))
        fprintf(stderr, "discovery error: %s\n", msg);
}

static void env_init(struct env *e, const char *scenario, const char *x1, const char *x2)
{
    char err[256];

    memset(e, 0, sizeof(*e));
    fake_start(&e->f, scenario, x1, x2);
    ASSERT_EQ(uv_loop_init(&e->loop), 0);
    ASSERT_EQ(
        net_client_new(&(struct net_client_opts){ .loop = &e->loop }, &e->http, err, sizeof(err)),
        0);
    e->r.loop = &e->loop;
    e->m = rec_manager_new((struct disc_manager_opts){ .loop = &e->loop,
                                                       .http = e->http,
                                                       .on_update = rec_cb,
                                                       .update_ud = &e->r,
                                                       .on_error = on_err,
                                                       .error_ud = e });
    e->sd.role = "pod";
    e->sd.api_server = e->f.url;
    e->sc.job_name = JOB;
    e->sc.sd.k8s_sd = &e->sd;
    e->sc.sd.n_k8s_sd = 1;
    e->cfg.scrape = &e->sc;
    e->cfg.n_scrape = 1;
}

static void env_apply(struct env *e)
{
    char err[512];

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

static struct rec_src *pod_src(struct env *e, const char *ns, const char *name)
{
    char s[256];

    snprintf(s, sizeof(s), "pod/%s/%s", ns, name);
    return rec_find(&e->r, JOB, s);
}

static char *pod_json(const char *name, const char *ns, const char *ip, const char *node,
                      const char *app)
{
    static char buf[2048];

    snprintf(buf, sizeof(buf),
             "{\"kind\":\"pods\",\"object\":{\"metadata\":{\"name\":\"%s\",\"namespace\":\"%s\","
             "\"labels\":{\"app\":\"%s\"}},\"spec\":{\"nodeName\":\"%s\",\"containers\":"
             "[{\"name\":\"c\",\"image\":\"i\",\"ports\":[{\"name\":\"http\",\"containerPort\":"
             "6060,\"protocol\":\"TCP\"}]}]},\"status\":{\"phase\":\"Running\",\"podIP\":\"%s\"}}}",
             name, ns, app, node, ip);
    return buf;
}

static void del_pod(struct env *e, const char *ns, const char *name)
{
    char b[256];

    snprintf(b, sizeof(b), "{\"kind\":\"pods\",\"namespace\":\"%s\",\"name\":\"%s\"}", ns, name);
    fake_ctl(&e->f, "/delete", b);
}

/* The API requests the server logged (a json array, caller puts). */
static json_object *requests(struct env *e)
{
    int st;
    char *body = fake_http(&e->f, "GET", "/requests", NULL, &st);
    json_object *o = json_tokener_parse(body);

    free(body);
    ASSERT_EQ(st, 200);
    ASSERT_NOT_NULL(o);
    return o;
}

static const char *q(json_object *req, const char *k)
{
    json_object *qs = NULL, *v = NULL;

    json_object_object_get_ex(req, "query", &qs);
    return json_object_object_get_ex(qs, k, &v) ? json_object_get_string(v) : NULL;
}

static bool is_watch(json_object *req)
{
    json_object *w = NULL;

    json_object_object_get_ex(req, "watch", &w);
    return json_object_get_boolean(w);
}

static int count_requests(struct env *e, bool watch)
{
    json_object *r = requests(e);
    int n = 0;

    for (size_t i = 0; i < json_object_array_length(r); i++)
        if (is_watch(json_object_array_get_idx(r, i)) == watch)
            n++;
    json_object_put(r);
    return n;
}

/* The value of one metric series in the manager's output, -1 if absent. */
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

#define ERRS(kind) \
    "proflet_discovery_errors_total{job=\"" JOB "\",provider=\"kubernetes\",kind=\"" kind "\"}"
#define SERIES(name) name "{job=\"" JOB "\",provider=\"kubernetes\"}"

static void wait_watching(struct env *e, int n_watches)
{
    RUN_UNTIL(&e->loop, count_requests(e, true) >= n_watches, 10000);
    /* Let the watch connection settle (bounded, event-driven). */
    run_turns(&e->loop, 5);
}

TEST(initial_sync_paginated_then_watch)
{
    struct env e;
    json_object *reqs, *first = NULL, *cont = NULL, *watch = NULL;
    struct rec_src *s;
    char rv[32] = "";

    env_init(&e, "basic.json", NULL, NULL);
    fake_ctl(&e.f, "/settings", "{\"page_size_cap\": 2}");
    env_apply(&e);
    ASSERT_FALSE(disc_manager_ready(e.m));
    RUN_UNTIL(&e.loop, disc_manager_ready(e.m), 10000);
    ASSERT_TRUE(disc_manager_ready(e.m));
    /* Ready means the first sync has been delivered too. */
    ASSERT_EQ(e.r.n, 3);
    s = pod_src(&e, "shop", "web-1");
    ASSERT_NOT_NULL(s);
    ASSERT_EQ(s->n, 1);
    ASSERT_STR_EQ(labels_get(&s->t[0], "__address__"), "10.0.0.1:6060");
    ASSERT_STR_EQ(labels_get(&s->t[0], "__meta_kubernetes_pod_label_app"), "web");
    ASSERT_STR_EQ(labels_get(&s->t[0], "__meta_kubernetes_pod_ready"), "true");
    s = pod_src(&e, "default", "db-0");
    ASSERT_STR_EQ(labels_get(&s->t[0], "__address__"), "10.0.0.3");
    wait_watching(&e, 1);
    reqs = requests(&e);
    for (size_t i = 0; i < json_object_array_length(reqs); i++) {
        json_object *r = json_object_array_get_idx(reqs, i);

        if (!first && !is_watch(r))
            first = r;
        else if (!cont && !is_watch(r) && q(r, "continue"))
            cont = r;
        else if (!watch && is_watch(r))
            watch = r;
    }
    ASSERT_NOT_NULL(first);
    ASSERT_STR_EQ(q(first, "limit"), "500");
    ASSERT_STR_EQ(q(first, "resourceVersion"), "0");
    ASSERT_NOT_NULL(cont); /* 3 pods, pages of 2 */
    ASSERT_STR_EQ(q(cont, "limit"), "500");
    ASSERT_NULL(q(cont, "resourceVersion"));
    ASSERT_NOT_NULL(watch);
    ASSERT_STR_EQ(q(watch, "allowWatchBookmarks"), "true");
    ASSERT_GE(atoi(q(watch, "timeoutSeconds")), 300);
    ASSERT_LE(atoi(q(watch, "timeoutSeconds")), 599);
    {
        int st;
        char *state = fake_http(&e.f, "GET", "/state", NULL, &st);
        json_object *o = json_tokener_parse(state), *v = NULL;

        json_object_object_get_ex(o, "rv", &v);
        snprintf(rv, sizeof(rv), "%d", json_object_get_int(v));
        json_object_put(o);
        free(state);
    }
    ASSERT_STR_EQ(q(watch, "resourceVersion"), rv); /* the list's RV */
    json_object_put(reqs);
    ASSERT_EQ(metric(&e, SERIES("proflet_discovery_lists_total")), 1);
    ASSERT_EQ(metric(&e, SERIES("proflet_discovery_targets")), 3);
    env_done(&e);
}

TEST(add_modify_delete_within_a_second)
{
    struct env e;
    uint64_t t0;
    struct rec_src *s;

    env_init(&e, "basic.json", NULL, NULL);
    env_apply(&e);
    RUN_UNTIL(&e.loop, disc_manager_ready(e.m), 10000);
    ASSERT_TRUE(disc_manager_ready(e.m));
    wait_watching(&e, 1);
    t0 = uv_hrtime();
    fake_ctl(&e.f, "/apply", pod_json("new-1", "shop", "10.0.0.50", "node-a", "web"));
    RUN_UNTIL(&e.loop, pod_src(&e, "shop", "new-1") != NULL, 5000);
    ASSERT_NOT_NULL(pod_src(&e, "shop", "new-1"));
    ASSERT_LT(uv_hrtime() - t0, 1000000000ull);
    /* Modify: a label changes. */
    t0 = uv_hrtime();
    fake_ctl(&e.f, "/apply", pod_json("new-1", "shop", "10.0.0.50", "node-a", "api"));
    RUN_UNTIL(&e.loop,
              (s = pod_src(&e, "shop", "new-1")) &&
                  strcmp(labels_get(&s->t[0], "__meta_kubernetes_pod_label_app"), "api") == 0,
              5000);
    ASSERT_NOT_NULL(s = pod_src(&e, "shop", "new-1"));
    ASSERT_STR_EQ(labels_get(&s->t[0], "__meta_kubernetes_pod_label_app"), "api");
    ASSERT_LT(uv_hrtime() - t0, 1000000000ull);
    /* Losing its IP empties the group. */
    fake_ctl(&e.f, "/apply", pod_json("new-1", "shop", "", "node-a", "api"));
    RUN_UNTIL(&e.loop, pod_src(&e, "shop", "new-1") == NULL, 5000);
    ASSERT_NULL(pod_src(&e, "shop", "new-1"));
    fake_ctl(&e.f, "/apply", pod_json("new-1", "shop", "10.0.0.51", "node-a", "api"));
    RUN_UNTIL(&e.loop, pod_src(&e, "shop", "new-1") != NULL, 5000);
    ASSERT_NOT_NULL(s = pod_src(&e, "shop", "new-1"));
    ASSERT_STR_EQ(labels_get(&s->t[0], "__address__"), "10.0.0.51:6060");
    t0 = uv_hrtime();
    del_pod(&e, "shop", "new-1");
    RUN_UNTIL(&e.loop, pod_src(&e, "shop", "new-1") == NULL, 5000);
    ASSERT_NULL(pod_src(&e, "shop", "new-1"));
    ASSERT_LT(uv_hrtime() - t0, 1000000000ull);
    ASSERT_EQ(e.r.n, 3);
    ASSERT_EQ(count_requests(&e, false), 1); /* no re-list needed */
    env_done(&e);
}

TEST(bookmark_rv_used_after_clean_end)
{
    struct env e;
    json_object *reqs, *last = NULL;
    char rv[32];
    int st;
    char *resp;

    env_init(&e, "basic.json", NULL, NULL);
    env_apply(&e);
    RUN_UNTIL(&e.loop, disc_manager_ready(e.m), 10000);
    wait_watching(&e, 1);
    /* Changes the watch does not see (nodes), then a bookmark at the new RV. */
    fake_ctl(&e.f, "/apply", "{\"kind\":\"nodes\",\"object\":{\"metadata\":{\"name\":\"n9\"}}}");
    resp = fake_http(&e.f, "POST", "/watch_fault", "{\"fault\":\"bookmark\"}", &st);
    free(resp);
    resp = fake_http(&e.f, "GET", "/state", NULL, &st);
    {
        json_object *o = json_tokener_parse(resp), *v = NULL;

        json_object_object_get_ex(o, "rv", &v);
        snprintf(rv, sizeof(rv), "%d", json_object_get_int(v));
        json_object_put(o);
    }
    free(resp);
    run_turns(&e.loop, 10);
    fake_ctl(&e.f, "/watch_fault", "{\"fault\":\"close\"}");
    wait_watching(&e, 2);
    reqs = requests(&e);
    for (size_t i = 0; i < json_object_array_length(reqs); i++)
        if (is_watch(json_object_array_get_idx(reqs, i)))
            last = json_object_array_get_idx(reqs, i);
    ASSERT_STR_EQ(q(last, "resourceVersion"), rv);
    json_object_put(reqs);
    ASSERT_EQ(count_requests(&e, false), 1); /* clean end: re-watch, no re-list */
    ASSERT_EQ(metric(&e, SERIES("proflet_discovery_watch_restarts_total")), 1);
    env_done(&e);
}

TEST(expired_410_relists_and_drops_stale)
{
    struct env e;

    env_init(&e, "basic.json", NULL, NULL);
    env_apply(&e);
    RUN_UNTIL(&e.loop, disc_manager_ready(e.m), 10000);
    wait_watching(&e, 1);
    /* Drop the connection mid-event, then change the cluster while the
     * client backs off and forget the history: only a re-list can tell. */
    fake_ctl(&e.f, "/watch_fault", "{\"fault\":\"midline\"}");
    del_pod(&e, "shop", "web-2");
    fake_ctl(&e.f, "/apply", pod_json("late", "default", "10.0.0.77", "node-b", "x"));
    fake_ctl(&e.f, "/compact", "{}");
    RUN_UNTIL(&e.loop, pod_src(&e, "shop", "web-2") == NULL && pod_src(&e, "default", "late"),
              10000);
    ASSERT_NULL(pod_src(&e, "shop", "web-2"));
    ASSERT_NOT_NULL(pod_src(&e, "default", "late"));
    ASSERT_EQ(metric(&e, ERRS("disconnect")), 1);
    /* Now an ERROR 410 on the open watch: re-list at the last RV. */
    wait_watching(&e, 2);
    fake_ctl(&e.f, "/compact", "{\"close_watches\": true}");
    del_pod(&e, "default", "late");
    RUN_UNTIL(&e.loop, pod_src(&e, "default", "late") == NULL, 10000);
    ASSERT_NULL(pod_src(&e, "default", "late"));
    ASSERT_GE(metric(&e, SERIES("proflet_discovery_relists_expired_total")), 1);
    ASSERT_GE(count_requests(&e, false), 3);
    ASSERT_EQ(e.r.n, 2);
    env_done(&e);
}

TEST(bad_streams_are_counted_and_recovered)
{
    struct env e;
    int lists;

    env_init(&e, "basic.json", NULL, NULL);
    env_apply(&e);
    RUN_UNTIL(&e.loop, disc_manager_ready(e.m), 10000);
    wait_watching(&e, 1);
    fake_ctl(&e.f, "/watch_fault", "{\"fault\":\"garbage\"}");
    RUN_UNTIL(&e.loop, metric(&e, ERRS("json")) == 1, 5000);
    ASSERT_EQ(metric(&e, ERRS("json")), 1);
    wait_watching(&e, 2);
    fake_ctl(&e.f, "/watch_fault", "{\"fault\":\"unknown\"}");
    RUN_UNTIL(&e.loop, metric(&e, ERRS("event")) == 1, 5000);
    ASSERT_EQ(metric(&e, ERRS("event")), 1);
    wait_watching(&e, 3);
    fake_ctl(&e.f, "/watch_fault", "{\"fault\":\"error\", \"code\": 500}");
    RUN_UNTIL(&e.loop, metric(&e, ERRS("event")) == 2, 5000);
    ASSERT_EQ(metric(&e, ERRS("event")), 2);
    wait_watching(&e, 4);
    lists = count_requests(&e, false);
    ASSERT_EQ(lists, 4); /* each bad stream led to a re-list */
    /* Still live: a new pod shows up. */
    fake_ctl(&e.f, "/apply", pod_json("after", "shop", "10.0.0.60", "node-a", "web"));
    RUN_UNTIL(&e.loop, pod_src(&e, "shop", "after") != NULL, 5000);
    ASSERT_NOT_NULL(pod_src(&e, "shop", "after"));
    ASSERT_EQ(e.r.n, 4);
    env_done(&e);
}

TEST(too_many_requests_rewatches_without_relist)
{
    struct env e;

    env_init(&e, "basic.json", NULL, NULL);
    env_apply(&e);
    RUN_UNTIL(&e.loop, disc_manager_ready(e.m), 10000);
    wait_watching(&e, 1);
    /* An event first (the server writes faults in order), so the end below is a
     * normal one, not "no event within 1 s". */
    fake_ctl(&e.f, "/watch_fault", "{\"fault\":\"bookmark\"}");
    fake_ctl(&e.f, "/fail", "{\"status\": 429, \"count\": 1, \"watch\": true}");
    fake_ctl(&e.f, "/watch_fault", "{\"fault\":\"close\"}");
    wait_watching(&e, 3); /* the 429'd watch, then the retried one */
    ASSERT_EQ(count_requests(&e, false), 1);
    ASSERT_GE(metric(&e, ERRS("http")), 1);
    env_done(&e);
}

TEST(empty_short_watch_relists)
{
    struct env e;

    env_init(&e, "basic.json", NULL, NULL);
    fake_ctl(&e.f, "/settings", "{\"close_empty_watch\": true}");
    env_apply(&e);
    RUN_UNTIL(&e.loop, disc_manager_ready(e.m), 10000);
    RUN_UNTIL(&e.loop, metric(&e, ERRS("disconnect")) >= 1, 10000);
    ASSERT_GE(metric(&e, ERRS("disconnect")), 1);
    RUN_UNTIL(&e.loop, count_requests(&e, false) >= 2, 10000);
    ASSERT_GE(count_requests(&e, false), 2);
    env_done(&e);
}

TEST(api_server_restart)
{
    struct env e;

    env_init(&e, "basic.json", NULL, NULL);
    env_apply(&e);
    RUN_UNTIL(&e.loop, disc_manager_ready(e.m), 10000);
    wait_watching(&e, 1);
    fake_ctl(&e.f, "/restart", "{\"down_ms\": 1500}");
    fake_ctl(&e.f, "/apply", pod_json("during", "shop", "10.0.0.70", "node-a", "web"));
    RUN_UNTIL(&e.loop, pod_src(&e, "shop", "during") != NULL, 20000);
    ASSERT_NOT_NULL(pod_src(&e, "shop", "during"));
    fake_ctl(&e.f, "/apply", pod_json("after", "shop", "10.0.0.71", "node-a", "web"));
    RUN_UNTIL(&e.loop, pod_src(&e, "shop", "after") != NULL, 10000);
    ASSERT_NOT_NULL(pod_src(&e, "shop", "after"));
    ASSERT_GE(metric(&e, ERRS("http")) + metric(&e, ERRS("disconnect")), 1);
    env_done(&e);
}

TEST(token_401_until_file_changes)
{
    struct env e;
    char path[128];
    FILE *f;

    env_init(&e, "basic.json", "--token", "new-token");
    snprintf(path, sizeof(path), "%s/token", e.f.dir);
    f = fopen(path, "w");
    fputs("old-token\n", f);
    fclose(f);
    e.sd.http.bearer_token_file = path;
    e.sd.http_set = true;
    env_apply(&e);
    RUN_UNTIL(&e.loop, metric(&e, ERRS("auth")) >= 1, 10000);
    ASSERT_GE(metric(&e, ERRS("auth")), 1);
    ASSERT_FALSE(disc_manager_ready(e.m));
    f = fopen(path, "w");
    fputs("  new-token\n", f);
    fclose(f);
    RUN_UNTIL(&e.loop, disc_manager_ready(e.m), 15000);
    ASSERT_TRUE(disc_manager_ready(e.m));
    ASSERT_EQ(e.r.n, 3);
    {
        json_object *reqs = requests(&e), *last;
        json_object *a = NULL;

        last = json_object_array_get_idx(reqs, json_object_array_length(reqs) - 1);
        json_object_object_get_ex(last, "auth", &a);
        ASSERT_STR_EQ(json_object_get_string(a), "Bearer new-token");
        json_object_put(reqs);
    }
    env_done(&e);
}

TEST(namespaces_and_selectors)
{
    struct env e;
    char *names[] = { "shop", "default" };
    struct disc_k8s_selector_cfg sel[] = { { "pod", "app=web", "spec.nodeName=node-a" } };
    json_object *reqs;
    int with_sel = 0, watch_sel = 0;

    env_init(&e, "basic.json", NULL, NULL);
    e.sd.namespaces = names;
    e.sd.n_namespaces = 2;
    e.sd.selectors = sel;
    e.sd.n_selectors = 1;
    env_apply(&e);
    RUN_UNTIL(&e.loop, disc_manager_ready(e.m), 10000);
    ASSERT_TRUE(disc_manager_ready(e.m));
    ASSERT_EQ(e.r.n, 1);
    ASSERT_NOT_NULL(pod_src(&e, "shop", "web-1"));
    wait_watching(&e, 2);
    /* A pod moving onto the node enters the selector; leaving it deletes. */
    fake_ctl(&e.f, "/apply", pod_json("web-2", "shop", "10.0.0.2", "node-a", "web"));
    RUN_UNTIL(&e.loop, pod_src(&e, "shop", "web-2") != NULL, 5000);
    ASSERT_NOT_NULL(pod_src(&e, "shop", "web-2"));
    fake_ctl(&e.f, "/apply", pod_json("web-1", "shop", "10.0.0.1", "node-b", "web"));
    RUN_UNTIL(&e.loop, pod_src(&e, "shop", "web-1") == NULL, 5000);
    ASSERT_NULL(pod_src(&e, "shop", "web-1"));
    reqs = requests(&e);
    for (size_t i = 0; i < json_object_array_length(reqs); i++) {
        json_object *r = json_object_array_get_idx(reqs, i), *p = NULL;
        const char *path;

        json_object_object_get_ex(r, "path", &p);
        path = json_object_get_string(p);
        ASSERT(strcmp(path, "/api/v1/namespaces/shop/pods") == 0 ||
               strcmp(path, "/api/v1/namespaces/default/pods") == 0);
        if (q(r, "labelSelector") && strcmp(q(r, "labelSelector"), "app=web") == 0 &&
            q(r, "fieldSelector") && strcmp(q(r, "fieldSelector"), "spec.nodeName=node-a") == 0)
            is_watch(r) ? watch_sel++ : with_sel++;
    }
    json_object_put(reqs);
    ASSERT_EQ(with_sel, 2);
    ASSERT_GE(watch_sel, 2);
    env_done(&e);
}

TEST(attach_node_and_namespace_metadata)
{
    struct env e;
    struct rec_src *s;

    env_init(&e, "basic.json", NULL, NULL);
    e.sd.attach_node = true;
    e.sd.attach_namespace = true;
    env_apply(&e);
    RUN_UNTIL(&e.loop, disc_manager_ready(e.m), 10000);
    ASSERT_TRUE(disc_manager_ready(e.m));
    s = pod_src(&e, "shop", "web-1");
    ASSERT_NOT_NULL(s);
    ASSERT_STR_EQ(labels_get(&s->t[0], "__meta_kubernetes_node_name"), "node-a");
    ASSERT_STR_EQ(labels_get(&s->t[0], "__meta_kubernetes_node_label_zone"), "z1");
    ASSERT_STR_EQ(labels_get(&s->t[0], "__meta_kubernetes_namespace_label_team"), "web");
    ASSERT_STR_EQ(labels_get(&s->t[0], "__meta_kubernetes_namespace_annotation_owner"), "alice");
    wait_watching(&e, 3);
    /* A node label change re-queues that node's pods. */
    fake_ctl(&e.f, "/apply",
             "{\"kind\":\"nodes\",\"object\":{\"metadata\":{\"name\":\"node-a\","
             "\"labels\":{\"zone\":\"z9\"}}}}");
    RUN_UNTIL(&e.loop,
              (s = pod_src(&e, "shop", "web-1")) &&
                  strcmp(labels_get(&s->t[0], "__meta_kubernetes_node_label_zone"), "z9") == 0,
              5000);
    ASSERT_STR_EQ(labels_get(&s->t[0], "__meta_kubernetes_node_label_zone"), "z9");
    /* The node goes away: its pods give empty groups. */
    fake_ctl(&e.f, "/delete", "{\"kind\":\"nodes\",\"name\":\"node-b\"}");
    RUN_UNTIL(&e.loop, pod_src(&e, "shop", "web-2") == NULL, 5000);
    ASSERT_NULL(pod_src(&e, "shop", "web-2"));
    ASSERT_NOT_NULL(pod_src(&e, "shop", "web-1"));
    env_done(&e);
}

TEST(reapply_same_keeps_provider_and_change_restarts)
{
    struct env e;
    unsigned rounds;
    char other[64];

    env_init(&e, "basic.json", NULL, NULL);
    env_apply(&e);
    RUN_UNTIL(&e.loop, disc_manager_ready(e.m), 10000);
    wait_watching(&e, 1);
    rounds = e.r.rounds;
    /* Same settings in a different copy: nothing restarts. */
    snprintf(other, sizeof(other), "%s", e.f.url);
    e.sd.api_server = other;
    env_apply(&e);
    run_turns(&e.loop, 20);
    ASSERT_EQ(e.r.rounds, rounds);
    ASSERT_EQ(count_requests(&e, false), 1);
    /* A selector changes: the provider restarts and re-lists. */
    {
        struct disc_k8s_selector_cfg sel[] = { { "pod", "app=db", NULL } };

        e.sd.selectors = sel;
        e.sd.n_selectors = 1;
        env_apply(&e);
        RUN_UNTIL(&e.loop, e.r.n == 1 && pod_src(&e, "default", "db-0"), 10000);
        ASSERT_EQ(e.r.n, 1);
        e.sd.selectors = NULL;
        e.sd.n_selectors = 0;
    }
    env_done(&e);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
