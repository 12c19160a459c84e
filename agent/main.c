/* SPDX-License-Identifier: Apache-2.0 */
/* proflet's entry point: command line, start-up, signals and shutdown
 * (docs/design.md "Threads").
 *
 * Everything runs on one libuv loop owned by this file's `struct agent`.
 * Start-up sizes libuv's pool (UV_THREADPOOL_SIZE) before anything can use
 * it, then builds the work queue, the HTTP client, the scrape manager, the
 * forwarder, the discovery manager and the status server, and wires them:
 * discovery feeds the scrape manager, whose profiles go to the forwarder.
 * Only this file and the agent's others log. SIGHUP reloads the
 * configuration (reload.c); SIGTERM/SIGINT stop the timers, let in-flight
 * scrapes and CPU jobs finish up to a deadline, flush the forwarder, close
 * every handle and require uv_loop_close() to succeed. `proflet targets` runs
 * discovery and a dry-run scrape manager only. */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/recent.h"
#include "cluster/cluster.h"
#include "common/clock.h"
#include "common/log.h"
#include "discovery/discovery.h"
#include "forward/forward.h"
#include "httpd/httpd.h"
#include "net/net.h"
#include "proflet_version.h"
#include "scrape/scrape.h"

/* SIGTERM to exit, everything included. The last second is kept for
 * closing (the spool's last write and sync, the handles); in-flight scrapes
 * and delta jobs get what is left before it once the forwarder's flush is
 * set aside; the flush gets the rest (what it cannot deliver is spooled). */
#define SHUTDOWN_GRACE_MS 10000
#define SHUTDOWN_CLOSE_MS 1000
#define SHUTDOWN_FLUSH_MS 3000

static void usage(FILE *f)
{
    fprintf(
        f,
        "proflet %s - a continuous-profiling agent: scrapes pprof endpoints and\n"
        "forwards the profiles to Pyroscope (push or /ingest) or a directory.\n"
        "\n"
        "Usage:\n"
        "  proflet [--config FILE] [--config.expand-env] [--log-level LEVEL]\n"
        "      Run. Without --config, the embedded default configuration is used:\n"
        "      scrape 127.0.0.1:6060 (cpu, memory, goroutine, mutex, block every 15s)\n"
        "      and write profiles under ./proflet-data.\n"
        "  proflet --check-config FILE [--config.expand-env]\n"
        "      Validate FILE and exit: 0 if valid, 2 if not (the message names\n"
        "      file, line and column).\n"
        "  proflet targets [--config FILE] [--config.expand-env] [--job NAME] [--show-dropped]\n"
        "      Run discovery once, apply the relabel rules and print the targets as\n"
        "      `promtool check service-discovery` does (JSON), without scraping.\n"
        "  proflet --print-default-config\n"
        "      Print the embedded default configuration.\n"
        "  proflet --version | --help\n"
        "\n"
        "Options:\n"
        "  -c, --config FILE        configuration file (YAML; see docs/config.md)\n"
        "      --config.expand-env[=true|false]\n"
        "                           expand ${VAR} and ${VAR:-default} in the file from\n"
        "                           the environment (also -config.expand-env=true). Off\n"
        "                           by default: the file is read literally, so relabel\n"
        "                           templates ($1, ${1}, ${name}, $$) mean what they mean\n"
        "                           in Prometheus\n"
        "  -l, --log-level LEVEL    debug | info | warn | error (overrides the file)\n"
        "      --check-config FILE  validate a configuration file and exit\n"
        "      --job NAME           with `targets`: only this scrape job\n"
        "      --show-dropped       with `targets`: also print targets the rules dropped\n"
        "      --web.config.file FILE\n"
        "                           TLS and basic auth for the status server, in the\n"
        "                           format of Prometheus' exporter-toolkit\n"
        "                           (tls_server_config, basic_auth_users with bcrypt\n"
        "                           hashes); read at start-up\n"
        "      --web.enable-lifecycle\n"
        "                           allow POST/PUT /-/reload on the status server (as\n"
        "                           Prometheus; without it the answer is 403 and only\n"
        "                           SIGHUP reloads)\n"
        "  -v, --version            print the version and exit\n"
        "  -h, --help               this text\n"
        "\n"
        "Signals: SIGHUP reloads the configuration (as does POST /-/reload with\n"
        "--web.enable-lifecycle); an invalid\n"
        "file is refused and the running configuration kept. SIGTERM/SIGINT stop\n"
        "scraping, finish what is in flight, flush and exit 0, all within %d s.\n"
        "\n"
        "Status server (server.listen-address, default 127.0.0.1:4100): /metrics,\n"
        "/-/healthy, /-/ready, POST /-/reload, /api/v1/targets, /targets. Its limits\n"
        "(connections, header timeout, output per connection) are in docs/limits.md;\n"
        "cross-origin browser requests that would change state are refused.\n"
        "Exit status: 0 ok, 1 runtime error, 2 invalid configuration or usage.\n",
        PROFLET_VERSION, SHUTDOWN_GRACE_MS / 1000);
}

/* glibc serves allocations from 128 KiB up with their own mappings, but
 * raises that threshold (up to 32 MiB) each time such a mapping is freed.
 * Once it has, profile bodies, a delta's buffers and outputs, and push
 * batches are carved from the pool threads' arenas, which keep what is
 * freed: a few large profiles then held the process hundreds of MiB above
 * what the memory budget lets in flight, and under target churn the holes
 * left between longer-lived blocks stayed resident (docs/limits.md,
 * docs/benchmarks.md). Fixing the threshold at its initial value keeps
 * them mapped and unmapped whole.
 *
 * Fixing it also fixes the trim threshold at 128 KiB: every free at the top
 * of a heap then gives pages back, and the next allocation faults them in
 * again. On a VM both cost page-table work by the megabyte, on the loop
 * thread: a burst of connections closing at once stalled the loop tens of
 * ms in one brk. A heap keeps up to TRIM_KEEP free at its top instead.
 * Thresholds set in the environment win. */
#define TRIM_KEEP (2 * 1024 * 1024)

static void fix_malloc_thresholds(void)
{
    if (getenv("MALLOC_MMAP_THRESHOLD_") || getenv("MALLOC_TRIM_THRESHOLD_") ||
        getenv("GLIBC_TUNABLES"))
        return;
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    mallopt(M_TRIM_THRESHOLD, TRIM_KEEP);
}

/* libuv reads UV_THREADPOOL_SIZE once, at the pool's first use: set it from
 * the config before anything can touch the pool. */
static void size_threadpool(unsigned workers)
{
    char n[16];

    if (getenv("UV_THREADPOOL_SIZE"))
        return;
    /* workers for CPU jobs, plus room for libuv's own file-system work and
     * the DNS lookups that share its pool. */
    snprintf(n, sizeof(n), "%u", workers + 3);
    setenv("UV_THREADPOOL_SIZE", n, 1);
}

/* Library errors reach the log here, rate limited so a dead endpoint or a
 * flapping API server cannot flood it. */
static struct log_ratelimit disc_rl, fwd_rl;

static void on_disc_error(const char *job, const char *provider, const char *msg, void *ud)
{
    unsigned suppressed = 0;
    char sup[24];

    (void)ud;
    if (!log_ratelimit_allow(&disc_rl, clock_mono_ms(), 10, 60000, &suppressed))
        return;
    snprintf(sup, sizeof(sup), "%u", suppressed);
    log_warn("discovery error", "job", job, "provider", provider, "err", msg, "suppressed", sup);
}

static void on_fwd_error(const char *endpoint, const char *msg, void *ud)
{
    unsigned suppressed = 0;
    char sup[24];

    (void)ud;
    if (!log_ratelimit_allow(&fwd_rl, clock_mono_ms(), 10, 60000, &suppressed))
        return;
    snprintf(sup, sizeof(sup), "%u", suppressed);
    log_warn("remote-write error", "endpoint", endpoint, "err", msg, "suppressed", sup);
}

/* The scrape manager limits these to one a minute per (target, type). */
static void on_scrape_error(const struct scrape_error *e, void *ud)
{
    char sup[24];

    (void)ud;
    snprintf(sup, sizeof(sup), "%u", e->suppressed);
    log_warn("scrape failed", "job", e->job, "instance", e->instance, "type", e->type, "url",
             e->url, "reason", e->reason, "err", e->message, "suppressed", sup);
}

static struct log_ratelimit cluster_rl;
static uint64_t targets_last_update_ms; /* `proflet targets`: the last change seen */

static void on_cluster_error(const char *msg, void *ud)
{
    unsigned suppressed = 0;
    char sup[24];

    (void)ud;
    if (!log_ratelimit_allow(&cluster_rl, clock_mono_ms(), 10, 60000, &suppressed))
        return;
    snprintf(sup, sizeof(sup), "%u", suppressed);
    log_warn("cluster membership error; keeping the last view of the peers", "err", msg,
             "suppressed", sup);
}

/* The live peers changed: every target is asked its owner again. Targets
 * that stay keep their pairs. */
static void on_cluster_changed(void *ud)
{
    struct agent *a = ud;
    size_t n, owned, elsewhere;
    char np[24], no[24], ne[24];

    if (!a->scrape || !a->cluster)
        return;
    targets_last_update_ms = clock_mono_ms();
    cluster_peers(a->cluster, &n);
    scrape_manager_refilter(a->scrape);
    scrape_manager_target_counts(a->scrape, &owned, &elsewhere);
    snprintf(np, sizeof(np), "%zu", n);
    snprintf(no, sizeof(no), "%zu", owned);
    snprintf(ne, sizeof(ne), "%zu", elsewhere);
    log_info("cluster view changed", "self", cluster_self(a->cluster), "peers", np, "owned", no,
             "elsewhere", ne);
}

/* A scraped profile goes to every endpoint with the target's labels; each
 * endpoint adds the external labels (global, then its own), which win over
 * target labels as in Alloy's pyroscope.write, once, as it sends. */
static void on_profile(const struct labels *labels, uint8_t *data, size_t len, int64_t start_ns,
                       int64_t end_ns, int compression, void *ud)
{
    struct agent *a = ud;
    struct labels ls = LABELS_INIT;
    struct fwd_profile *prof;

    if (a->recent)
        recent_put(a->recent, labels_hash(labels), labels, data, len, start_ns, end_ns);
    if (!a->fwd || labels_copy(&ls, labels) < 0) {
        free(data);
        labels_done(&ls);
        return;
    }
    prof = fwd_profile_new(&ls, data, len, start_ns, end_ns);
    labels_done(&ls);
    if (!prof)
        return;
    prof->compression = compression;
    fwd_submit(a->fwd, prof);
    fwd_profile_unref(prof);
}

/* A (target, profile type) that stopped: its kept profile goes too. */
static void on_pair_gone(const struct labels *labels, void *ud)
{
    struct agent *a = ud;

    if (a->recent)
        recent_forget(a->recent, labels_hash(labels));
}

/* ------------------------------------------------------------- shutdown */

static void closed(void *ud)
{
    (void)ud;
}

static void finish_close(struct agent *a)
{
    if (a->work)
        workq_cancel_backlog(a->work);
    if (a->scrape)
        scrape_manager_close(a->scrape, closed, NULL);
    cluster_close(a->cluster, closed, NULL); /* after the scrape manager, which asks it */
    a->cluster = NULL;
    if (a->status)
        httpd_close(a->status, closed, NULL);
    a->status = NULL;
    if (a->http)
        net_client_close(a->http, closed, NULL);
    uv_close((uv_handle_t *)&a->sig_term, NULL);
    uv_close((uv_handle_t *)&a->sig_int, NULL);
    uv_close((uv_handle_t *)&a->sig_hup, NULL);
    uv_close((uv_handle_t *)&a->shutdown_timer, NULL);
    looplag_close(&a->lag);
}

static void fwd_closed(void *ud)
{
    struct agent *a = ud;

    a->fwd = NULL;
    finish_close(a);
}

static void drain_check(uv_timer_t *t)
{
    struct agent *a = t->data;
    bool idle = (!a->scrape || scrape_manager_busy(a->scrape) == 0) &&
                (!a->work || workq_pending(a->work) == 0);
    uint64_t now = clock_mono_ms(), left;

    if (!idle && now + SHUTDOWN_FLUSH_MS < a->shutdown_deadline_ms)
        return;
    uv_timer_stop(t);
    if (!idle)
        log_warn("shutdown deadline reached with work in flight; abandoning it");
    left = a->shutdown_deadline_ms > now ? a->shutdown_deadline_ms - now : 0;
    if (a->fwd)
        fwd_close(a->fwd, left, fwd_closed, a);
    else
        finish_close(a);
}

static void begin_shutdown(struct agent *a, const char *why)
{
    if (a->stopping)
        return;
    a->stopping = true;
    log_info("shutting down", "signal", why);
    if (a->scrape)
        scrape_manager_stop(a->scrape);
    if (a->cluster)
        cluster_leave(a->cluster); /* peers take over once this pod is not ready */
    if (a->work)
        workq_cancel_backlog(a->work);
    if (a->disc)
        disc_manager_close(a->disc, closed, NULL);
    a->disc = NULL;
    a->shutdown_deadline_ms = clock_mono_ms() + SHUTDOWN_GRACE_MS - SHUTDOWN_CLOSE_MS;
    a->shutdown_timer.data = a;
    uv_timer_start(&a->shutdown_timer, drain_check, 0, 20);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct agent *a = h->data;

    if (signum == SIGHUP) {
        if (!a->stopping)
            agent__reload_request(a, "SIGHUP");
        return;
    }
    begin_shutdown(a, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* ------------------------------------------------------ proflet targets */

struct targets_opts {
    const char *job;
    bool show_dropped;
};

static struct targets_opts targets_opts;
static bool targets_printed;

/* Discovery is synced once ready; groups are delivered on the loop right
 * after, so print once ready and no update came for a short quiet period. */
static void targets_check(uv_timer_t *t)
{
    struct agent *a = t->data;
    uint64_t now = clock_mono_ms();
    struct buf out;

    if (a->stopping)
        return;
    if (now > a->shutdown_deadline_ms) {
        fprintf(stderr, "proflet: discovery did not complete its first sync in time\n");
        a->exit_code = 1;
        uv_close((uv_handle_t *)t, NULL);
        begin_shutdown(a, "timeout");
        return;
    }
    if (!disc_manager_ready(a->disc) || !cluster_ready(a->cluster) ||
        now - targets_last_update_ms < 200)
        return;
    buf_init(&out, (size_t)1 << 30);
    scrape_manager_print(a->scrape, targets_opts.job, targets_opts.show_dropped, &out);
    fwrite(out.data, 1, out.len, stdout);
    fflush(stdout);
    buf_done(&out);
    targets_printed = true;
    uv_close((uv_handle_t *)t, NULL);
    begin_shutdown(a, "done");
}

static void targets_update(const char *job, const struct disc_group *groups, size_t n, void *ud)
{
    struct agent *a = ud;

    targets_last_update_ms = clock_mono_ms();
    scrape_manager_sync(job, groups, n, a->scrape);
}

/* ------------------------------------------------------------------ run */

static int load_config(const char *path, unsigned flags, struct conf_doc **out)
{
    char err[1024];
    int r = agent_config_load(path, flags, out, err, sizeof(err));

    if (r < 0)
        fprintf(stderr, "proflet: invalid configuration: %s\n", err);
    return r;
}

/* Prometheus' offset seed: the host name and the external labels. */
static uint64_t offset_seed(const struct agent_config *c)
{
    struct labels ext = LABELS_INIT;
    char host[256] = "";
    uint64_t seed;

    gethostname(host, sizeof(host) - 1);
    for (unsigned i = 0; i < c->n_external_labels; i++)
        labels_set(&ext, c->external_labels[i].key, c->external_labels[i].value);
    seed = scrape_offset_seed(host, &ext);
    labels_done(&ext);
    return seed;
}

static int start(struct agent *a, const struct agent_config *c, bool targets_mode, char *err,
                 size_t errlen)
{
    struct scrape_manager_opts so = {
        .loop = a->loop,
        .dry_run = targets_mode,
        .offset_seed = offset_seed(c),
        .on_profile = on_profile,
        .on_pair_gone = on_pair_gone,
        .on_error = on_scrape_error,
        .ud = a,
    };
    struct cluster_opts co = {
        .loop = a->loop,
        .changed = on_cluster_changed,
        .on_error = on_cluster_error,
        .ud = a,
    };
    const struct workq_opts wo = {
        .loop = a->loop,
        .max_inflight = c->limits.workers,
        .max_backlog = c->limits.max_jobs_backlog,
    };
    const struct net_client_opts no = { .loop = a->loop, .max_connects = 1024 };
    const struct recent_opts ro = { .max_bytes = c->recent_profiles_bytes };
    struct fwd_opts fo = {
        .loop = a->loop,
        .on_error = on_fwd_error,
        .ud = a,
    };
    struct disc_manager_opts dopts = {
        .loop = a->loop,
        .coalesce_ms = targets_mode ? 0 : c->discovery.coalesce_ms,
        .on_update = targets_mode ? targets_update : scrape_manager_sync,
        .on_error = on_disc_error,
        .error_ud = a,
    };
    int r;

    a->workers = c->limits.workers;
    if ((r = workq_new(&wo, &a->work, err, errlen)) < 0)
        return r;
    so.work = a->work;
    if ((r = net_client_new(&no, &a->http, err, errlen)) < 0)
        return r;
    co.http = a->http;
    co.work = a->work;
    if ((r = cluster_new(&co, &a->cluster, err, errlen)) < 0)
        return r;
    so.owner = cluster_owns;
    so.owner_ud = a->cluster;
    if ((r = scrape_manager_new(&so, &a->scrape, err, errlen)) < 0)
        return r;
    fo.http = a->http;
    fo.work = a->work;
    if (!targets_mode && (r = fwd_new(&fo, &a->fwd, err, errlen)) < 0)
        return r;
    dopts.http = a->http;
    dopts.work = a->work;
    dopts.update_ud = targets_mode ? (void *)a : (void *)a->scrape;
    if ((r = disc_manager_new(&dopts, &a->disc, err, errlen)) < 0)
        return r;
    if (!targets_mode && (r = recent_new(&ro, &a->recent, err, errlen)) < 0)
        return r;
    return 0;
}

struct run_opts {
    bool enable_lifecycle;
    const char *web_config; /* --web.config.file */
};

static int run(const char *config_path, unsigned flags, const char *log_level, bool targets_mode,
               const struct run_opts *ro)
{
    struct agent a;
    uv_loop_t loop;
    struct conf_doc *doc = NULL;
    const struct agent_config *c;
    uv_timer_t targets_timer;
    struct httpd_web *web = NULL;
    char err[1024];
    int r;

    memset(&a, 0, sizeof(a));
    fix_malloc_thresholds();
    /* A peer that went away must cost its connection, not the process:
     * writes to a closed socket or pipe then fail with EPIPE, which every
     * writer (status server, forwarder, libcurl) handles as an error. */
    signal(SIGPIPE, SIG_IGN);
    if (ro->web_config && httpd_web_load(ro->web_config, &web, err, sizeof(err)) < 0) {
        fprintf(stderr, "proflet: invalid web configuration: %s\n", err);
        return 2;
    }
    a.config_flags = flags;
    a.enable_lifecycle = ro->enable_lifecycle;
    if (load_config(config_path, a.config_flags, &doc) < 0) {
        httpd_web_unref(web);
        return 2;
    }
    c = agent_config(doc);
    size_threadpool(c->limits.workers);
    if (log_level)
        log_set_level((enum log_level)log_parse_level(log_level));
    else if (c->log_level && log_parse_level(c->log_level) >= 0)
        log_set_level((enum log_level)log_parse_level(c->log_level));
    if (targets_mode && !log_level)
        log_set_level(LOG_WARN);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        conf_doc_unref(doc);
        httpd_web_unref(web);
        fprintf(stderr, "proflet: curl_global_init failed\n");
        return 1;
    }
    uv_loop_init(&loop);
    a.loop = &loop;
    a.config_path = config_path;
    a.log_level_fixed = log_level || targets_mode;
    a.start_time_ns = clock_wall_ns();
    uv_timer_init(&loop, &a.shutdown_timer);
    uv_signal_init(&loop, &a.sig_term);
    uv_signal_init(&loop, &a.sig_int);
    uv_signal_init(&loop, &a.sig_hup);
    a.sig_term.data = a.sig_int.data = a.sig_hup.data = &a;
    r = start(&a, c, targets_mode, err, sizeof(err));
    conf_doc_unref(doc);
    if (r < 0) {
        fprintf(stderr, "proflet: %s\n", err);
        a.exit_code = 1;
        a.started = true;
        begin_shutdown(&a, "start-up failed");
        goto run_loop;
    }

    /* The first load goes through the same path as a reload. */
    if (agent__reload(&a, "start") < 0) {
        a.exit_code = 2;
        a.started = true;
        begin_shutdown(&a, "bad configuration");
        goto run_loop;
    }
    a.reloads_ok = 0;
    if (!targets_mode) {
        const char *addr = agent_config(a.doc)->listen_address;

        if (addr && *addr) {
            struct httpd_opts so = {
                .addr = addr,
                .loop = &loop,
                .handler = agent__status_handler,
                .ud = &a,
                .header_timeout_ms = agent_config(a.doc)->header_timeout_ms,
                .web = web,
            };

            r = httpd_new(&so, &a.status, err, sizeof(err));
            if (r < 0) {
                log_error("cannot start the status server", "err", err);
                a.exit_code = 1;
                a.started = true;
                begin_shutdown(&a, "status server");
                goto run_loop;
            }
        }
        uv_signal_start(&a.sig_term, on_signal, SIGTERM);
        uv_signal_start(&a.sig_int, on_signal, SIGINT);
        uv_signal_start(&a.sig_hup, on_signal, SIGHUP);
        log_info("proflet started", "version", PROFLET_VERSION, "config",
                 config_path ? config_path : "<default>", "listen", addr ? addr : "");
    } else {
        uv_timer_init(&loop, &targets_timer);
        targets_timer.data = &a;
        a.shutdown_deadline_ms = clock_mono_ms() + 60000;
        targets_last_update_ms = clock_mono_ms();
        uv_timer_start(&targets_timer, targets_check, 10, 10);
    }
    a.started = true;
    /* From here on the loop runs: the start-up load above is not a stall. */
    looplag_start(&a.lag, &loop);

run_loop:
    uv_run(&loop, UV_RUN_DEFAULT);
    conf_doc_unref(a.doc);
    httpd_web_unref(web);
    recent_free(a.recent);
    workq_free(a.work);
    r = uv_loop_close(&loop);
    if (r != 0) {
        fprintf(stderr, "proflet: uv_loop_close: %s\n", uv_strerror(r));
        if (!a.exit_code)
            a.exit_code = 1;
    }
    curl_global_cleanup();
    if (targets_mode && !targets_printed && !a.exit_code)
        a.exit_code = 1;
    {
        char lag[32], busy[32];

        snprintf(lag, sizeof(lag), "%.6f", (double)looplag_max_ns(&a.lag) / 1e9);
        snprintf(busy, sizeof(busy), "%.6f", (double)looplag_max_busy_ns(&a.lag) / 1e9);
        log_info("proflet stopped", "exit_code", a.exit_code ? "1" : "0", "loop_lag_max_seconds",
                 lag, "loop_busy_max_seconds", busy);
    }
    return a.exit_code;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "config", required_argument, NULL, 'c' },
        { "config.expand-env", optional_argument, NULL, 'E' },
        { "check-config", required_argument, NULL, 'C' },
        { "log-level", required_argument, NULL, 'l' },
        { "job", required_argument, NULL, 'j' },
        { "show-dropped", no_argument, NULL, 'd' },
        { "print-default-config", no_argument, NULL, 'p' },
        { "web.enable-lifecycle", no_argument, NULL, 'L' },
        { "web.config.file", required_argument, NULL, 'W' },
        { "version", no_argument, NULL, 'v' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *config = NULL, *check = NULL, *level = NULL;
    unsigned flags = 0;
    struct run_opts ro = { 0 };
    bool targets = false;
    int c;

    /* Grafana's servers spell it -config.expand-env=true (one dash). */
    for (int i = 1; i < argc; i++) {
        static char grafana[64];

        if (strncmp(argv[i], "-config.expand-env", 18) == 0 &&
            strlen(argv[i]) + 2 <= sizeof(grafana)) {
            snprintf(grafana, sizeof(grafana), "-%s", argv[i]);
            argv[i] = grafana;
        }
    }
    if (argc > 1 && strcmp(argv[1], "targets") == 0) {
        targets = true;
        argv[1] = argv[0];
        argv++;
        argc--;
    }
    while ((c = getopt_long(argc, argv, "c:l:vh", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            config = optarg;
            break;
        case 'E':
            if (!optarg || strcmp(optarg, "true") == 0) {
                flags |= CONF_EXPAND_ENV;
            } else if (strcmp(optarg, "false") == 0) {
                flags &= ~(unsigned)CONF_EXPAND_ENV;
            } else {
                fprintf(stderr, "proflet: --config.expand-env takes true or false, not \"%s\"\n",
                        optarg);
                return 2;
            }
            break;
        case 'C':
            check = optarg;
            break;
        case 'l':
            level = optarg;
            if (log_parse_level(level) < 0) {
                fprintf(stderr, "proflet: unknown log level \"%s\"\n", level);
                return 2;
            }
            break;
        case 'j':
            targets_opts.job = optarg;
            break;
        case 'd':
            targets_opts.show_dropped = true;
            break;
        case 'L':
            ro.enable_lifecycle = true;
            break;
        case 'W':
            ro.web_config = optarg;
            break;
        case 'p':
            fputs(agent_default_config, stdout);
            return 0;
        case 'v':
            printf("proflet %s (libuv %s, %s)\n", PROFLET_VERSION, uv_version_string(),
                   curl_version());
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "proflet: unexpected argument \"%s\"\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (check) {
        struct conf_doc *doc = NULL;
        const struct agent_config *cfg;

        if (load_config(check, flags, &doc) < 0)
            return 2;
        cfg = agent_config(doc);
        for (size_t i = 0; conf_doc_warning(doc, i); i++)
            fprintf(stderr, "proflet: warning: %s\n", conf_doc_warning(doc, i));
        printf("%s: configuration is valid (%u scrape job%s, %u remote-write endpoint%s)\n", check,
               cfg->n_scrape, cfg->n_scrape == 1 ? "" : "s", cfg->n_remote,
               cfg->n_remote == 1 ? "" : "s");
        conf_doc_unref(doc);
        return 0;
    }
    return run(config, flags, level, targets, &ro);
}
