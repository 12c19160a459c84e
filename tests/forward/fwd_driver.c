/* SPDX-License-Identifier: Apache-2.0 */
/* fwd_driver: runs a uv loop with a net client and a forwarder, submits
 * synthetic profiles at a steady rate, and lingers until everything is
 * delivered (queue and spool empty) or a deadline passes. Used by the
 * integration tests with tests/receiver/receiver.py; can be SIGKILLed and
 * restarted against the same spool directory.
 *
 *   fwd_driver --ep name=a,url=http://127.0.0.1:P,protocol=push [--ep ...]
 *              [--spool DIR] [--spool-max-bytes N] [--rate N] [--count N]
 *              [--series K] [--size B] [--linger-s S] [--ids FILE]
 *              [--metrics FILE] [--max-retries N] [--batch N] [--gzip]
 *              [--min-backoff-ms N] [--max-backoff-ms N] [--timeout-ms N]
 *              [--wait-ms N] [--inflight N] [--queue N] [--seq-start N]
 *              [--follow-redirects] [--no-retry-429]
 *
 * Each profile's bytes start with "seq=<n> series=<k> " so the receiver can
 * check per-series order; --ids gets one "id series seq" line per submitted
 * profile (flushed at once, so it survives SIGKILL). Exit status 0 if
 * everything was delivered before the linger deadline, 3 if not. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/workq.h"
#include "forward/forward.h"
#include "net/net.h"
#include "tcfg.h"

#define MAX_EP 4

static struct tcfg cfg;
static struct cfg_remote eps[MAX_EP];
static struct conf_kv ext_label = { (char *)"env", (char *)"test" };
static struct conf_kv headers[2] = { { (char *)"X-Test-Header", (char *)"yes" } };
static unsigned n_eps;
static uv_loop_t loop;
static struct net_client *http;
static struct fwd *fwd;
static struct workq *work;
static uv_timer_t submit_timer, check_timer;
static uv_signal_t sigterm;
static double rate = 50;
static long count = 100, submitted, seq_start;
static unsigned series = 4;
static size_t size = 1024;
static double linger_s = 30;
static FILE *ids_f;
static const char *metrics_path;
static uint64_t start_ms, done_submitting_ms, max_lateness_ms;
static int exit_code = 3;
static bool closing;

static void write_metrics(void)
{
    struct buf b;
    FILE *f;
    char tmp[1024];

    if (!metrics_path || !fwd)
        return;
    buf_init(&b, 16 << 20);
    fwd_metrics(fwd, &b);
    buf_printf(&b, "# driver submitted=%ld max_lateness_ms=%" PRIu64 "\n", submitted,
               max_lateness_ms);
    snprintf(tmp, sizeof(tmp), "%s.tmp", metrics_path);
    f = fopen(tmp, "w");
    if (f) {
        fwrite(b.data, 1, b.len, f);
        fclose(f);
        rename(tmp, metrics_path);
    }
    buf_done(&b);
}

/* Sums every sample of a metric family in the forwarder's output. */
static double metric_sum(const char *text, const char *name)
{
    double sum = 0;
    size_t n = strlen(name);

    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, name, n) == 0 && (p[n] == '{' || p[n] == ' ')) {
            const char *sp = strchr(p, '}');

            sp = sp ? sp + 1 : p + n;
            sum += strtod(sp, NULL);
        }
    }
    return sum;
}

static void net_closed(void *ud)
{
}

static void fwd_closed(void *ud)
{
    fwd = NULL;
    net_client_close(http, net_closed, NULL);
    uv_close((uv_handle_t *)&submit_timer, NULL);
    uv_close((uv_handle_t *)&check_timer, NULL);
    uv_close((uv_handle_t *)&sigterm, NULL);
}

static void shutdown_all(void)
{
    if (closing)
        return;
    closing = true;
    write_metrics();
    uv_timer_stop(&submit_timer);
    uv_timer_stop(&check_timer);
    fwd_close(fwd, 2000, fwd_closed, NULL);
}

static void submit_one(void)
{
    struct labels ls = LABELS_INIT;
    long seq = seq_start + submitted;
    unsigned k = (unsigned)(seq % series);
    char sname[32], head[64];
    uint8_t *d = malloc(size);
    struct fwd_profile *p;
    int hn;

    snprintf(sname, sizeof(sname), "s%u", k);
    hn = snprintf(head, sizeof(head), "seq=%ld series=%u ", seq, k);
    /* Incompressible, like the gzip bytes of a real profile. */
    {
        uint64_t x = 0x9e3779b97f4a7c15ull ^ (uint64_t)seq;

        for (size_t i = 0; i < size; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            d[i] = (uint8_t)x;
        }
    }
    memcpy(d, head, (size_t)hn < size ? (size_t)hn : size);
    labels_set(&ls, "service_name", "driver");
    labels_set(&ls, "__name__", "process_cpu");
    labels_set(&ls, "series", sname);
    labels_set(&ls, "pyroscope_spy", "gospy");
    p = fwd_profile_new(&ls, d, size, (int64_t)time(NULL) * 1000000000LL - 10000000000LL,
                        (int64_t)time(NULL) * 1000000000LL);
    if (!p)
        return;
    if (ids_f) {
        fprintf(ids_f, "%s %u %ld\n", p->id, k, seq);
        fflush(ids_f);
    }
    fwd_submit(fwd, p);
    fwd_profile_unref(p);
    submitted++;
}

static void on_submit(uv_timer_t *t)
{
    uint64_t now = uv_now(&loop);
    uint64_t due = start_ms + (uint64_t)((double)submitted * 1000.0 / rate);

    if (now > due + 1 && now - due > max_lateness_ms)
        max_lateness_ms = now - due;
    while (submitted < count && start_ms + (uint64_t)((double)submitted * 1000.0 / rate) <= now)
        submit_one();
    if (submitted >= count) {
        uv_timer_stop(t);
        done_submitting_ms = now;
    }
}

static void on_check(uv_timer_t *t)
{
    struct buf b;
    double pending;

    write_metrics();
    if (submitted < count)
        return;
    buf_init(&b, 16 << 20);
    fwd_metrics(fwd, &b);
    pending = metric_sum(b.data ? b.data : "", "proflet_remote_queue_profiles") +
              metric_sum(b.data ? b.data : "", "proflet_remote_inflight_profiles") +
              metric_sum(b.data ? b.data : "", "proflet_remote_spool_profiles");
    buf_done(&b);
    if (pending == 0) {
        exit_code = 0;
        shutdown_all();
    } else if (uv_now(&loop) - done_submitting_ms > (uint64_t)(linger_s * 1000)) {
        fprintf(stderr, "fwd_driver: %.0f profiles still pending\n", pending);
        shutdown_all();
    }
}

static void on_signal(uv_signal_t *s, int sig)
{
    shutdown_all();
}

static void on_error(const char *ep, const char *msg, void *ud)
{
    if (getenv("FWD_DRIVER_VERBOSE"))
        fprintf(stderr, "fwd_driver: %s: %s\n", ep, msg);
}

static int parse_ep(char *spec, struct cfg_remote *r)
{
    fwd_cfg_remote_init(r);
    r->protocol = CFG_PROTO_PUSH;
    for (char *tok = strtok(spec, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');

        if (!eq)
            return -1;
        *eq = 0;
        if (!strcmp(tok, "name"))
            r->name = eq + 1;
        else if (!strcmp(tok, "url"))
            r->url = eq + 1;
        else if (!strcmp(tok, "protocol"))
            r->protocol = !strcmp(eq + 1, "ingest") ? CFG_PROTO_INGEST
                          : !strcmp(eq + 1, "dir")  ? CFG_PROTO_DIR
                                                    : CFG_PROTO_PUSH;
        else if (!strcmp(tok, "tenant"))
            r->tenant_id = eq + 1;
        else
            return -1;
    }
    r->headers = headers;
    r->n_headers = 1;
    r->external_labels = &ext_label;
    r->n_external_labels = 1;
    r->http.enable_http2 = true;
    if (!r->name) /* a file names it after its url's host; the url will do here */
        r->name = r->url;
    return r->url ? 0 : -1;
}

int main(int argc, char **argv)
{
    char err[512];
    struct net_basic_auth_cfg auth = { (char *)"user", (char *)"secret", NULL };
    unsigned max_retries = 0, batch = 0, inflight = 0, queue = 0;
    uint64_t min_b = 100, max_b = 2000, tmo = 3000, wait_ms = 200;
    bool gzip = false, use_auth = false, follow = false, retry_429 = true;

    fwd_cfg_spool_init(&cfg.spool);
    cfg.spool.max_bytes = 1ull << 30;
    cfg.spool.fsync = (char *)"batch";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (!strcmp(a, "--ep") && v && n_eps < MAX_EP) {
            if (parse_ep(argv[++i], &eps[n_eps++]) < 0) {
                fprintf(stderr, "bad --ep\n");
                return 2;
            }
        } else if (!strcmp(a, "--spool") && v) {
            cfg.spool.dir = argv[++i];
        } else if (!strcmp(a, "--spool-max-bytes") && v) {
            cfg.spool.max_bytes = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(a, "--segment-bytes") && v) {
            cfg.spool.segment_bytes = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(a, "--rate") && v) {
            rate = atof(argv[++i]);
        } else if (!strcmp(a, "--count") && v) {
            count = atol(argv[++i]);
        } else if (!strcmp(a, "--seq-start") && v) {
            seq_start = atol(argv[++i]);
        } else if (!strcmp(a, "--series") && v) {
            series = (unsigned)atoi(argv[++i]);
        } else if (!strcmp(a, "--size") && v) {
            size = (size_t)atol(argv[++i]);
        } else if (!strcmp(a, "--linger-s") && v) {
            linger_s = atof(argv[++i]);
        } else if (!strcmp(a, "--ids") && v) {
            ids_f = fopen(argv[++i], "a");
        } else if (!strcmp(a, "--metrics") && v) {
            metrics_path = argv[++i];
        } else if (!strcmp(a, "--max-retries") && v) {
            max_retries = (unsigned)atoi(argv[++i]);
        } else if (!strcmp(a, "--batch") && v) {
            batch = (unsigned)atoi(argv[++i]);
        } else if (!strcmp(a, "--inflight") && v) {
            inflight = (unsigned)atoi(argv[++i]);
        } else if (!strcmp(a, "--queue") && v) {
            queue = (unsigned)atoi(argv[++i]);
        } else if (!strcmp(a, "--min-backoff-ms") && v) {
            min_b = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(a, "--max-backoff-ms") && v) {
            max_b = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(a, "--timeout-ms") && v) {
            tmo = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(a, "--wait-ms") && v) {
            wait_ms = strtoull(argv[++i], NULL, 10);
        } else if (!strcmp(a, "--gzip")) {
            gzip = true;
        } else if (!strcmp(a, "--follow-redirects")) {
            follow = true;
        } else if (!strcmp(a, "--no-retry-429")) {
            retry_429 = false;
        } else if (!strcmp(a, "--auth")) {
            use_auth = true;
        } else {
            fprintf(stderr, "unknown argument %s\n", a);
            return 2;
        }
    }
    for (unsigned i = 0; i < n_eps; i++) {
        eps[i].max_retries = max_retries;
        if (batch) /* 0: the default */
            eps[i].batch_max_profiles = batch;
        if (inflight)
            eps[i].max_inflight = inflight;
        if (queue)
            eps[i].queue_max_profiles = queue;
        eps[i].min_backoff_ms = min_b;
        eps[i].max_backoff_ms = max_b;
        eps[i].remote_timeout_ms = tmo;
        eps[i].batch_max_wait_ms = wait_ms;
        eps[i].gzip_request = gzip;
        eps[i].http.follow_redirects = follow;
        eps[i].retry_on_http_429 = retry_429;
        if (use_auth)
            eps[i].http.basic_auth = &auth;
    }
    cfg.remote = eps;
    cfg.n_remote = n_eps;
    signal(SIGPIPE, SIG_IGN);
    uv_loop_init(&loop);
    if (net_client_new(&(struct net_client_opts){ .loop = &loop }, &http, err, sizeof(err)) < 0) {
        fprintf(stderr, "net_client_new: %s\n", err);
        return 2;
    }
    if (workq_new(&(struct workq_opts){ .loop = &loop, .max_inflight = 4, .max_backlog = 1024 },
                  &work, err, sizeof(err)) < 0) {
        fprintf(stderr, "workq_new: %s\n", err);
        return 2;
    }
    if (fwd_new(
            &(struct fwd_opts){ .loop = &loop, .http = http, .work = work, .on_error = on_error },
            &fwd, err, sizeof(err)) < 0) {
        fprintf(stderr, "fwd_new: %s\n", err);
        return 2;
    }
    if (tcfg_apply(fwd, &cfg, err, sizeof(err)) < 0) {
        fprintf(stderr, "fwd_apply: %s\n", err);
        return 2;
    }
    uv_timer_init(&loop, &submit_timer);
    uv_timer_init(&loop, &check_timer);
    uv_signal_init(&loop, &sigterm);
    uv_signal_start(&sigterm, on_signal, SIGTERM);
    start_ms = uv_now(&loop);
    if (count > 0)
        uv_timer_start(&submit_timer, on_submit, 0,
                       (uint64_t)(1000.0 / rate) ? (uint64_t)(1000.0 / rate) : 1);
    else
        done_submitting_ms = start_ms;
    uv_timer_start(&check_timer, on_check, 250, 250);
    uv_run(&loop, UV_RUN_DEFAULT);
    workq_free(work);
    if (uv_loop_close(&loop) != 0) {
        fprintf(stderr, "fwd_driver: loop not closed cleanly\n");
        return 4;
    }
    if (ids_f)
        fclose(ids_f);
    return exit_code;
}
