/* SPDX-License-Identifier: Apache-2.0 */
/* The remote-write sink (forward/remote.c, remote_queue.c, wire.c) against
 * tests/receiver/receiver.py, the Pyroscope receiver the integration tests
 * push to, run as a test peer (tests/harness/test_peer.h) on 127.0.0.1. Its
 * control port tells what arrived (each request's method, path, query,
 * headers, body hash, the status it answered and, for push, the sample ids
 * in request order) and takes the failures each test injects.
 *
 * What is checked, from the receiver's side:
 * - a partial failure (the push API names some series in its error
 *   message, as Pyroscope does and the receiver imitates): only the named
 *   series are resent, the rest count as sent once; a series refused for
 *   good is dropped and counted with reason "rejected";
 * - on the wire: push requests carry Connect-Protocol-Version: 1 and
 *   Content-Type: application/proto, legacy /ingest requests the profile
 *   bytes as application/octet-stream;
 * - a close whose deadline passes while a request is still being encoded
 *   ends when that encoding does, without sending or encoding again.
 *
 * Loop thread only; every wait is a condition with a deadline. Each test
 * ends with the forwarder and the client closed and asserts
 * uv_loop_close() == 0. */
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <json-c/json.h>
#include <openssl/evp.h>

#include "common/workq.h"
#include "forward/forward.h"
#include "net/net.h"
#include "tcfg.h"
#include "test.h"
#include "test_loop.h"
#include "test_peer.h"

#define MAX_REQS 16
#define MAX_IDS 8
#define WAIT_MS 10000

/* ---------------------------------------------------------- the receiver */

/* One request as the receiver saw it. */
struct sreq {
    char method[8];
    char path[256];
    char query[2048];
    char content_type[64];
    char connect_version[16]; /* Connect-Protocol-Version, "" if absent */
    char connect_timeout[32]; /* Connect-Timeout-Ms */
    char sha256[65];          /* of the body, hex */
    size_t body_len;
    int status;            /* what the receiver answered, 0 if nothing */
    char ids[MAX_IDS][37]; /* push: the sample ids, in request order */
    size_t n_ids;
    bool decoded; /* push: the body is a PushRequest */
};

/* What the receiver saw since the test's reset. */
struct seen {
    struct sreq reqs[MAX_REQS];
    size_t n_reqs;
    size_t overflow; /* requests past MAX_REQS (a failure in itself) */
};

/* The receiver of this test program, started on first use. */
static struct test_peer rx;
static int rx_port, rx_control;

static void rx_stop(void)
{
    test_peer_stop(&rx);
}

/* A control request that must succeed; returns the body (caller frees). */
static char *rx_ctl(const char *method, const char *path, const char *body)
{
    int status;
    char *r = test_peer_http(rx_control, method, path, body, &status);

    if (status != 200)
        test__fail(__FILE__, __LINE__, "receiver %s %s: %d %s", method, path, status, r);
    return r;
}

/* The receiver, with nothing seen and no failure set. */
static void rx_reset(void)
{
    if (rx.pid <= 0) {
        const char *script = getenv("RECEIVER");
        const char *argv[] = { "/usr/bin/python3", script, NULL };
        json_object *o, *v;

        ASSERT_NOT_NULL(script);
        ASSERT_EQ(test_peer_start(&rx, argv), 0);
        atexit(rx_stop);
        o = json_tokener_parse(rx.line);
        ASSERT_NOT_NULL(o);
        ASSERT(json_object_object_get_ex(o, "port", &v));
        rx_port = json_object_get_int(v);
        ASSERT(json_object_object_get_ex(o, "control", &v));
        rx_control = json_object_get_int(v);
        json_object_put(o);
    }
    free(rx_ctl("POST", "/reset", "{}"));
}

static void copy_str(char *dst, size_t cap, json_object *o, const char *key)
{
    json_object *v;

    snprintf(dst, cap, "%s",
             json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : "");
}

/* A header of a request, "" if absent (names are case-insensitive). */
static void copy_header(char *dst, size_t cap, json_object *headers, const char *name)
{
    dst[0] = '\0';
    json_object_object_foreach(headers, k, v)
    {
        if (strcasecmp(k, name) == 0)
            snprintf(dst, cap, "%s", json_object_get_string(v));
    }
}

/* Every request the receiver saw since the test's reset, in arrival order. */
static void seen_get(struct seen *s)
{
    char *body = rx_ctl("GET", "/requests", NULL);
    json_object *all = json_tokener_parse(body);
    size_t n;

    free(body);
    ASSERT_NOT_NULL(all);
    memset(s, 0, sizeof(*s));
    n = json_object_array_length(all);
    for (size_t i = 0; i < n; i++) {
        json_object *o = json_object_array_get_idx(all, i), *h, *v;
        struct sreq *r = &s->reqs[s->n_reqs];

        if (s->n_reqs == MAX_REQS) {
            s->overflow++;
            continue;
        }
        s->n_reqs++;
        copy_str(r->method, sizeof(r->method), o, "method");
        copy_str(r->path, sizeof(r->path), o, "path");
        copy_str(r->query, sizeof(r->query), o, "query");
        copy_str(r->sha256, sizeof(r->sha256), o, "sha256");
        if (json_object_object_get_ex(o, "len", &v))
            r->body_len = (size_t)json_object_get_int64(v);
        if (json_object_object_get_ex(o, "status", &v))
            r->status = json_object_get_int(v);
        if (json_object_object_get_ex(o, "headers", &h)) {
            copy_header(r->content_type, sizeof(r->content_type), h, "Content-Type");
            copy_header(r->connect_version, sizeof(r->connect_version), h,
                        "Connect-Protocol-Version");
            copy_header(r->connect_timeout, sizeof(r->connect_timeout), h, "Connect-Timeout-Ms");
        }
        if (json_object_object_get_ex(o, "ids", &v)) {
            r->decoded = true;
            for (size_t k = 0; k < json_object_array_length(v) && r->n_ids < MAX_IDS; k++)
                snprintf(r->ids[r->n_ids++], sizeof(r->ids[0]), "%s",
                         json_object_get_string(json_object_array_get_idx(v, k)));
        }
    }
    json_object_put(all);
}

/* How many requests carried sample `id`. */
static unsigned times_sent(const struct seen *s, const char *id)
{
    unsigned n = 0;

    for (size_t i = 0; i < s->n_reqs; i++) {
        for (size_t k = 0; k < s->reqs[i].n_ids; k++)
            n += strcmp(s->reqs[i].ids[k], id) == 0;
    }
    return n;
}

/* The SHA-256 of `len` bytes, in hex as the receiver writes it. */
static void sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned n = 0;

    ASSERT_EQ(EVP_Digest(data, len, md, &n, EVP_sha256(), NULL), 1);
    ASSERT_EQ(n, 32);
    for (unsigned i = 0; i < n; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/* ---------------------------------------------------- forwarder harness */

struct rig {
    uv_loop_t loop;
    struct seen seen; /* what the receiver saw, as of the last seen_get() */
    struct net_client *http;
    struct workq *wq;
    struct fwd *fwd;
    char url[64];
    int closed;
};

static void rig_start(struct rig *g)
{
    char err[256] = "";

    memset(g, 0, sizeof(*g));
    ASSERT_EQ(uv_loop_init(&g->loop), 0);
    rx_reset();
    snprintf(g->url, sizeof(g->url), "http://127.0.0.1:%d", rx_port);
    ASSERT_EQ(
        net_client_new(&(struct net_client_opts){ .loop = &g->loop }, &g->http, err, sizeof(err)),
        0);
    ASSERT_EQ(
        workq_new(&(struct workq_opts){ .loop = &g->loop, .max_inflight = 4, .max_backlog = 64 },
                  &g->wq, err, sizeof(err)),
        0);
    ASSERT_EQ(fwd_new(&(struct fwd_opts){ .loop = &g->loop, .http = g->http, .work = g->wq },
                      &g->fwd, err, sizeof(err)),
              0);
}

/* A push or ingest endpoint on the receiver: batches of `batch`,
 * which wait (10 min) until full, and backoffs short enough for a test. */
static void ep_init(struct cfg_remote *r, const char *name, const char *url,
                    enum cfg_protocol proto, unsigned batch)
{
    fwd_cfg_remote_init(r);
    r->name = (char *)name;
    r->url = (char *)url;
    r->protocol = proto;
    r->batch_max_profiles = batch;
    r->batch_max_wait_ms = 600000;
    r->min_backoff_ms = 10;
    r->max_backoff_ms = 40;
    r->remote_timeout_ms = 5000;
    r->max_retries = 5;
    r->retry_on_http_429 = true;
}

/* The endpoints read their settings in place: `eps` must outlive the
 * forwarder, and so does the spool setting, hence static (no spool). */
static void apply(struct rig *g, struct cfg_remote *eps, unsigned n)
{
    static struct tcfg c;
    char err[256] = "";

    c = (struct tcfg){ .remote = eps, .n_remote = n };

    int r = tcfg_apply(g->fwd, &c, err, sizeof(err));

    if (r < 0)
        fprintf(stderr, "fwd_apply: %s\n", err);
    ASSERT_EQ(r, 0);
}

static void count_cb(void *ud)
{
    (*(int *)ud)++;
}

/* Closes the forwarder (it flushes what is queued, which the receiver
 * then sees) and the client; the loop must close clean. Then reads what
 * the receiver saw. */
static void rig_close(struct rig *g)
{
    fwd_close(g->fwd, 3000, count_cb, &g->closed);
    RUN_UNTIL(&g->loop, g->closed == 1, WAIT_MS);
    ASSERT_EQ(g->closed, 1);
    net_client_close(g->http, count_cb, &g->closed);
    RUN_UNTIL(&g->loop, g->closed == 2, WAIT_MS);
    ASSERT_EQ(g->closed, 2);
    RUN_UNTIL(&g->loop, !uv_loop_alive(&g->loop), WAIT_MS);
    workq_free(g->wq);
    ASSERT_EQ(uv_loop_close(&g->loop), 0);
    seen_get(&g->seen);
}

static struct fwd_profile *mk(const char *series, int seed)
{
    struct labels ls = LABELS_INIT;
    size_t len = 200;
    uint8_t *d = malloc(len);

    ASSERT_NOT_NULL(d);
    for (size_t i = 0; i < len; i++)
        d[i] = (uint8_t)(i * 7 + (size_t)seed);
    labels_set(&ls, "service_name", "svc");
    labels_set(&ls, "__name__", "process_cpu");
    labels_set(&ls, "series", series);
    return fwd_profile_new(&ls, d, len, 1700000000000000000LL, 1700000010000000000LL);
}

/* The endpoint's counters as the status page shows them. */
struct epview {
    const char *name;
    bool found;
    uint64_t sent, retried, failed_requests, dropped, queue, inflight;
};

static void view_cb(const struct fwd_endpoint_view *e, void *ud)
{
    struct epview *v = ud;

    if (strcmp(e->name, v->name) != 0)
        return;
    v->found = true;
    v->sent = e->sent_profiles;
    v->retried = e->retried_profiles;
    v->failed_requests = e->failed_requests;
    v->dropped = e->dropped_profiles;
    v->queue = e->queue_profiles;
    v->inflight = e->inflight_profiles;
}

static struct epview view(struct rig *g, const char *name)
{
    struct epview v = { .name = name };

    fwd_endpoints_visit(g->fwd, view_cb, &v);
    ASSERT(v.found);
    return v;
}

static bool settled(struct rig *g, const char *name, uint64_t sent, uint64_t dropped)
{
    struct epview v = view(g, name);

    return v.sent == sent && v.dropped == dropped && v.queue == 0 && v.inflight == 0;
}

/* The value of one exposition line, "name{labels}", or -1 if absent. */
static double metric(struct rig *g, const char *series)
{
    struct buf b;
    const char *at;
    double v = -1;
    size_t n = strlen(series);

    buf_init(&b, 1 << 20);
    fwd_metrics(g->fwd, &b);
    for (at = b.data; at && (at = strstr(at, series)); at += n) {
        if ((at == b.data || at[-1] == '\n') && at[n] == ' ') {
            v = strtod(at + n + 1, NULL);
            break;
        }
    }
    buf_done(&b);
    return v;
}

/* ---------------------------------------------------- partial failures */

TEST(partial_failure_resends_only_named_series)
{
    struct rig g;
    struct cfg_remote ep;
    struct fwd_profile *p[6];
    const char *names[6] = { "a", "b", "c", "d", "e", "f" };
    struct epview v;
    char faults[256];

    rig_start(&g);
    ep_init(&ep, "push", g.url, CFG_PROTO_PUSH, 3);
    apply(&g, &ep, 1);
    for (int i = 0; i < 6; i++)
        ASSERT_NOT_NULL(p[i] = mk(names[i], i));
    /* The receiver refuses the second series of the first batch once (503,
     * retryable) and that of the second batch for good (400), naming each
     * by sample id in a Connect error, as Pyroscope words them. */
    snprintf(faults, sizeof(faults),
             "{\"fail_ids\": {\"%s\": 503, \"%s\": 400}, "
             "\"fail_ids_times\": 1}",
             p[1]->id, p[4]->id);
    free(rx_ctl("POST", "/faults", faults));

    /* One full batch of three series; the receiver refuses the second. */
    for (int i = 0; i < 3; i++)
        fwd_submit(g.fwd, p[i]);
    RUN_UNTIL(&g.loop, settled(&g, "push", 3, 0), WAIT_MS);
    seen_get(&g.seen);
    ASSERT_GE(g.seen.n_reqs, 2);
    ASSERT_EQ(g.seen.reqs[0].status, 503);
    ASSERT_EQ(g.seen.reqs[0].n_ids, 3);
    ASSERT_STR_EQ(g.seen.reqs[0].ids[0], p[0]->id);
    ASSERT_STR_EQ(g.seen.reqs[0].ids[1], p[1]->id);
    ASSERT_STR_EQ(g.seen.reqs[0].ids[2], p[2]->id);
    /* The resend holds the refused series only. */
    ASSERT_EQ(g.seen.reqs[1].status, 200);
    ASSERT_EQ(g.seen.reqs[1].n_ids, 1);
    ASSERT_STR_EQ(g.seen.reqs[1].ids[0], p[1]->id);
    ASSERT_EQ(g.seen.n_reqs, 2);
    v = view(&g, "push");
    ASSERT_EQ(v.sent, 3);
    ASSERT_EQ(v.retried, 1);
    ASSERT_EQ(v.failed_requests, 1);
    ASSERT_EQ(v.dropped, 0);

    /* A second batch; the receiver refuses its second series for good. */
    for (int i = 3; i < 6; i++)
        fwd_submit(g.fwd, p[i]);
    RUN_UNTIL(&g.loop, settled(&g, "push", 5, 1), WAIT_MS);
    seen_get(&g.seen);
    ASSERT_EQ(g.seen.n_reqs, 3);
    ASSERT_EQ(g.seen.reqs[2].status, 400);
    ASSERT_EQ(g.seen.reqs[2].n_ids, 3);
    ASSERT_STR_EQ(g.seen.reqs[2].ids[1], p[4]->id);
    v = view(&g, "push");
    ASSERT_EQ(v.sent, 5);
    ASSERT_EQ(v.dropped, 1);
    ASSERT_EQ(v.retried, 1);
    ASSERT_EQ(v.failed_requests, 2);
    ASSERT_EQ(metric(&g, "proflet_remote_dropped_profiles_total{endpoint=\"push\",kind=\"remote\","
                         "reason=\"rejected\"}"),
              1);
    ASSERT_EQ(metric(&g, "proflet_remote_dropped_bytes_total{endpoint=\"push\",kind=\"remote\","
                         "reason=\"rejected\"}"),
              p[4]->len);
    ASSERT_EQ(metric(&g, "proflet_remote_sent_profiles_total{endpoint=\"push\",kind=\"remote\"}"),
              5);

    /* The close flushes whatever is still queued: the dropped profile is
     * not, so no request follows. Each accepted profile went out once, the
     * one refused for a while twice, the one refused for good once. */
    rig_close(&g);
    ASSERT_EQ(g.seen.n_reqs, 3);
    ASSERT_EQ(g.seen.overflow, 0);
    ASSERT_EQ(times_sent(&g.seen, p[0]->id), 1);
    ASSERT_EQ(times_sent(&g.seen, p[1]->id), 2);
    ASSERT_EQ(times_sent(&g.seen, p[2]->id), 1);
    ASSERT_EQ(times_sent(&g.seen, p[3]->id), 1);
    ASSERT_EQ(times_sent(&g.seen, p[4]->id), 1);
    ASSERT_EQ(times_sent(&g.seen, p[5]->id), 1);
    for (int i = 0; i < 6; i++)
        fwd_profile_unref(p[i]);
}

/* ------------------------------------------------------------ the wire */

static const struct sreq *find_req(const struct seen *s, const char *path)
{
    for (size_t i = 0; i < s->n_reqs; i++) {
        if (strcmp(s->reqs[i].path, path) == 0)
            return &s->reqs[i];
    }
    return NULL;
}

TEST(requests_carry_connect_headers_and_content_types)
{
    struct rig g;
    struct cfg_remote eps[2];
    struct fwd_profile *p;
    const struct sreq *push, *ingest;
    char sum[65];

    rig_start(&g);
    ep_init(&eps[0], "push", g.url, CFG_PROTO_PUSH, 1);
    ep_init(&eps[1], "ingest", g.url, CFG_PROTO_INGEST, 1);
    eps[0].remote_timeout_ms = 4321;
    apply(&g, eps, 2);
    ASSERT_NOT_NULL(p = mk("w", 9));
    fwd_submit(g.fwd, p);
    RUN_UNTIL(&g.loop, settled(&g, "push", 1, 0) && settled(&g, "ingest", 1, 0), WAIT_MS);
    ASSERT(settled(&g, "push", 1, 0));
    ASSERT(settled(&g, "ingest", 1, 0));
    seen_get(&g.seen);
    ASSERT_EQ(g.seen.n_reqs, 2);

    /* Push: a Connect unary call with a binary protobuf body. */
    push = find_req(&g.seen, "/push.v1.PusherService/Push");
    ASSERT_NOT_NULL(push);
    ASSERT_STR_EQ(push->method, "POST");
    ASSERT_STR_EQ(push->query, "");
    ASSERT_STR_EQ(push->connect_version, "1");
    ASSERT_STR_EQ(push->content_type, "application/proto");
    ASSERT_STR_EQ(push->connect_timeout, "4321");
    ASSERT_EQ(push->status, 200);
    ASSERT(push->decoded);
    ASSERT_EQ(push->n_ids, 1);
    ASSERT_STR_EQ(push->ids[0], p->id);

    /* Legacy /ingest: the profile's own bytes, as an octet stream. */
    ingest = find_req(&g.seen, "/ingest");
    ASSERT_NOT_NULL(ingest);
    ASSERT_STR_EQ(ingest->method, "POST");
    ASSERT(strstr(ingest->query, "name=svc%7Bseries%3Dw%7D") != NULL);
    ASSERT(strstr(ingest->query, "&format=pprof") != NULL);
    ASSERT_STR_EQ(ingest->content_type, "application/octet-stream");
    ASSERT_EQ(ingest->status, 200);
    ASSERT_EQ(ingest->body_len, p->len);
    sha256_hex(p->data, p->len, sum);
    ASSERT_STR_EQ(ingest->sha256, sum);

    rig_close(&g);
    ASSERT_EQ(g.seen.n_reqs, 2);
    fwd_profile_unref(p);
}

/* ------------------------------------------------------------ the close */

/* A job that holds the work queue's only slot until the test lets it go
 * (or 10 s pass, so that a failing test cannot hang). */
static atomic_bool blocker_release;

static void blocker_run(void *arg)
{
    (void)arg;
    for (int i = 0; i < 10000 && !atomic_load(&blocker_release); i++)
        nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
}

static void blocker_after(void *arg, int status)
{
    (void)status;
    (*(int *)arg)++;
}

TEST(close_past_its_deadline_waits_for_the_encoding_only)
{
    struct rig g;
    struct cfg_remote ep;
    struct fwd_profile *p;
    int blocker_done = 0;

    rig_start(&g);
    ep_init(&ep, "push", g.url, CFG_PROTO_PUSH, 1);
    apply(&g, &ep, 1);
    ASSERT_NOT_NULL(p = mk("a", 1));

    /* The push request's encoding waits behind the blocker. */
    workq_set_limits(g.wq, 1, 64);
    atomic_store(&blocker_release, false);
    ASSERT_EQ(workq_submit(g.wq, 0, blocker_run, blocker_after, &blocker_done), 0);
    fwd_submit(g.fwd, p);
    ASSERT_EQ(view(&g, "push").inflight, 1);

    /* The deadline passes with the encoding still to run: the close waits
     * for it, since its job calls back whatever happens. */
    fwd_close(g.fwd, 50, count_cb, &g.closed);
    run_for(&g.loop, 200);
    ASSERT_EQ(g.closed, 0);

    /* Once it has run, the close ends, without encoding the profile again
     * or sending it past the deadline. */
    atomic_store(&blocker_release, true);
    RUN_UNTIL(&g.loop, g.closed == 1, 3000);
    ASSERT_EQ(g.closed, 1);
    ASSERT_EQ(blocker_done, 1);
    seen_get(&g.seen);
    ASSERT_EQ(g.seen.n_reqs, 0);

    net_client_close(g.http, count_cb, &g.closed);
    RUN_UNTIL(&g.loop, g.closed == 2, WAIT_MS);
    ASSERT_EQ(g.closed, 2);
    RUN_UNTIL(&g.loop, !uv_loop_alive(&g.loop), WAIT_MS);
    workq_free(g.wq);
    ASSERT_EQ(uv_loop_close(&g.loop), 0);
    fwd_profile_unref(p);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
