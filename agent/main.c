/* proflet's entry point: command line, start-up, signals and shutdown.
 *
 * Everything runs on one libuv loop owned by this file's `struct agent`.
 * Start-up sizes libuv's pool (UV_THREADPOOL_SIZE) before anything can use
 * it, then builds the HTTP client, forwarder, discovery manager and status
 * server. SIGHUP reloads the configuration; SIGTERM/SIGINT stop the timers,
 * let in-flight scrapes and delta jobs finish up to a deadline, flush the
 * forwarder, close every handle and require uv_loop_close() to succeed. */
#include <curl/curl.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "discovery/discovery.h"
#include "forward/forward.h"
#include "net/net.h"
#include "proflet_version.h"

#define SHUTDOWN_GRACE_MS 10000

uint64_t agent__now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t agent__now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000ULL + (uint64_t)ts.tv_nsec / 1000000ULL;
}

static void usage(FILE *f)
{
    fprintf(f,
            "proflet %s - a continuous-profiling agent: scrapes pprof endpoints and\n"
            "forwards the profiles to Pyroscope (push or /ingest) or a directory.\n"
            "\n"
            "Usage:\n"
            "  proflet [--config FILE] [--log-level LEVEL]\n"
            "      Run. Without --config, the embedded default configuration is used:\n"
            "      scrape 127.0.0.1:6060 (cpu, memory, goroutine, mutex, block every 15s)\n"
            "      and write profiles under ./proflet-data.\n"
            "  proflet --check-config FILE\n"
            "      Validate FILE and exit: 0 if valid, 2 if not (the message names\n"
            "      file, line and column).\n"
            "  proflet targets [--config FILE] [--job NAME] [--show-dropped]\n"
            "      Run discovery once, apply the relabel rules and print the targets as\n"
            "      `promtool check service-discovery` does (JSON), without scraping.\n"
            "  proflet --print-default-config\n"
            "      Print the embedded default configuration.\n"
            "  proflet --version | --help\n"
            "\n"
            "Options:\n"
            "  -c, --config FILE        configuration file (YAML; see docs/config.md)\n"
            "  -l, --log-level LEVEL    debug | info | warn | error (overrides the file)\n"
            "      --check-config FILE  validate a configuration file and exit\n"
            "      --job NAME           with `targets`: only this scrape job\n"
            "      --show-dropped       with `targets`: also print targets the rules dropped\n"
            "  -v, --version            print the version and exit\n"
            "  -h, --help               this text\n"
            "\n"
            "Signals: SIGHUP reloads the configuration (as does POST /-/reload); an invalid\n"
            "file is refused and the running configuration kept. SIGTERM/SIGINT stop\n"
            "scraping, finish what is in flight (up to %d s), flush and exit 0.\n"
            "\n"
            "Status server (server.listen-address, default 127.0.0.1:4100): /metrics,\n"
            "/-/healthy, /-/ready, POST /-/reload, /api/v1/targets, /targets.\n"
            "Exit status: 0 ok, 1 runtime error, 2 invalid configuration or usage.\n",
            PROFLET_VERSION, SHUTDOWN_GRACE_MS / 1000);
}

static int load_config(const char *path, struct cfg **out)
{
    char err[1024];
    int r;

    if (path)
        r = cfg_load_file(path, out, err, sizeof(err));
    else
        r = cfg_load_string(cfg_default_yaml, strlen(cfg_default_yaml), "<default>", out, err,
                            sizeof(err));
    if (r < 0)
        fprintf(stderr, "proflet: invalid configuration: %s\n", err);
    return r;
}

/* libuv reads UV_THREADPOOL_SIZE once, at the pool's first use: set it from
 * the config before anything can touch the pool. */
static void size_threadpool(const struct cfg *cfg)
{
    char n[16];
    unsigned workers = cfg->limits.workers ? cfg->limits.workers : 2;

    if (getenv("UV_THREADPOOL_SIZE"))
        return;
    /* workers for deltas, plus room for the forwarder's encode, spool and
     * directory jobs and libuv's own file-system work. */
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
    if (!log_ratelimit_allow(&disc_rl, agent__now_ms(), 10, 60000, &suppressed))
        return;
    snprintf(sup, sizeof(sup), "%u", suppressed);
    log_warn("discovery error", "job", job, "provider", provider, "err", msg, "suppressed", sup);
}

static void on_fwd_error(const char *endpoint, const char *msg, void *ud)
{
    unsigned suppressed = 0;
    char sup[24];

    (void)ud;
    if (!log_ratelimit_allow(&fwd_rl, agent__now_ms(), 10, 60000, &suppressed))
        return;
    snprintf(sup, sizeof(sup), "%u", suppressed);
    log_warn("remote-write error", "endpoint", endpoint, "err", msg, "suppressed", sup);
}

size_t agent__inflight(const struct agent *a)
{
    size_t n = net_client_inflight(a->http);

    for (int i = 0; i < AGENT_SCRAPE_CLIENTS; i++)
        n += net_client_inflight(a->scrapers[i]);
    return n;
}

/* ------------------------------------------------------------- shutdown */

static void all_closed(void *ud)
{
    (void)ud;
}

static void finish_close(struct agent *a)
{
    size_t pos = 0;
    uint64_t k;
    void *v;

    while (hashmap_next(&a->pairs, &pos, &k, &v))
        agent__pair_remove(a, v);
    agent__pool_cancel_backlog(a);
    if (a->status)
        net_server_close(a->status, all_closed, NULL);
    a->status = NULL;
    for (int i = 0; i < AGENT_SCRAPE_CLIENTS; i++)
        net_client_close(a->scrapers[i], all_closed, NULL);
    net_client_close(a->http, all_closed, NULL);
    uv_close((uv_handle_t *)&a->sig_term, NULL);
    uv_close((uv_handle_t *)&a->sig_int, NULL);
    uv_close((uv_handle_t *)&a->sig_hup, NULL);
    uv_close((uv_handle_t *)&a->shutdown_timer, NULL);
}

static void fwd_closed(void *ud)
{
    struct agent *a = ud;

    a->fwd = NULL;
    finish_close(a);
}

static void disc_closed(void *ud)
{
    (void)ud;
}

static void drain_check(uv_timer_t *t)
{
    struct agent *a = t->data;
    bool idle = agent__inflight(a) == 0 && a->pool.inflight == 0 &&
                a->pool.backlog_len == 0;

    if (!idle && agent__now_ms() < a->shutdown_deadline_ms)
        return;
    uv_timer_stop(t);
    if (!idle)
        log_warn("shutdown deadline reached with work in flight; abandoning it");
    fwd_close(a->fwd, SHUTDOWN_GRACE_MS / 2, fwd_closed, a);
}

static void begin_shutdown(struct agent *a, const char *why)
{
    size_t pos = 0;
    uint64_t k;
    void *v;

    if (a->stopping)
        return;
    a->stopping = true;
    log_info("shutting down", "signal", why);
    while (hashmap_next(&a->pairs, &pos, &k, &v))
        uv_timer_stop(&((struct scrape_pair *)v)->timer);
    agent__pool_cancel_backlog(a);
    disc_manager_close(a->disc, disc_closed, a);
    a->disc = NULL;
    a->shutdown_deadline_ms = agent__now_ms() + SHUTDOWN_GRACE_MS;
    a->shutdown_timer.data = a;
    uv_timer_start(&a->shutdown_timer, drain_check, 0, 20);
}

static void on_signal(uv_signal_t *h, int signum)
{
    struct agent *a = h->data;

    if (signum == SIGHUP) {
        if (!a->stopping)
            agent__reload(a, "SIGHUP");
        return;
    }
    begin_shutdown(a, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* ------------------------------------------------------ proflet targets */

static void targets_print(struct agent *a, const char *job, bool show_dropped)
{
    struct buf out;
    bool first = true;

    buf_init(&out, (size_t)1 << 30);
    buf_puts(&out, "[");
    for (struct scrape_job *j = a->jobs; j; j = j->next) {
        size_t pos = 0;
        uint64_t k;
        void *v;

        if (job && strcmp(job, j->name) != 0)
            continue;
        while (hashmap_next(&j->sources, &pos, &k, &v)) {
            struct source_entry *e = v;

            for (size_t i = 0; e->results && i < e->n; i++) {
                if (e->results[i].dropped && !show_dropped)
                    continue;
                buf_puts(&out, first ? "\n  " : ",\n  ");
                first = false;
                target_result_json(&e->results[i], show_dropped, &out);
            }
        }
    }
    buf_puts(&out, first ? "]\n" : "\n]\n");
    fwrite(out.data, 1, out.len, stdout);
    fflush(stdout);
    buf_done(&out);
}

struct targets_opts {
    const char *job;
    bool show_dropped;
};

static struct targets_opts targets_opts;

/* Discovery is synced once ready; groups are delivered on the loop right
 * after, so print once ready and no update came for a short quiet period. */
static void targets_check(uv_timer_t *t)
{
    struct agent *a = t->data;
    uint64_t now = agent__now_ms();

    if (a->stopping)
        return;
    if (now > a->shutdown_deadline_ms) {
        fprintf(stderr, "proflet: discovery did not complete its first sync in time\n");
        a->exit_code = 1;
        uv_close((uv_handle_t *)t, NULL);
        begin_shutdown(a, "timeout");
        return;
    }
    if (!disc_manager_ready(a->disc) || now - a->last_update_ms < 200)
        return;
    targets_print(a, targets_opts.job, targets_opts.show_dropped);
    a->targets_printed = true;
    uv_close((uv_handle_t *)t, NULL);
    begin_shutdown(a, "done");
}

static void targets_update(const char *job, const struct disc_group *groups, size_t n, void *ud)
{
    struct agent *a = ud;

    a->last_update_ms = agent__now_ms();
    agent__on_discovery(job, groups, n, ud);
}

/* ------------------------------------------------------------------ run */

static int run(const char *config_path, const char *log_level, bool targets_mode)
{
    struct agent a;
    uv_loop_t loop;
    struct cfg *cfg = NULL;
    uv_timer_t targets_timer;
    char err[1024];
    int r;

    memset(&a, 0, sizeof(a));
    if (load_config(config_path, &cfg) < 0)
        return 2;
    size_threadpool(cfg);
    if (log_level)
        log_set_level((enum log_level)log_parse_level(log_level));
    else if (cfg->log_level && log_parse_level(cfg->log_level) >= 0)
        log_set_level((enum log_level)log_parse_level(cfg->log_level));
    if (targets_mode && !log_level)
        log_set_level(LOG_WARN);
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        cfg_free(cfg);
        fprintf(stderr, "proflet: curl_global_init failed\n");
        return 1;
    }
    uv_loop_init(&loop);
    loop.data = &a;
    a.loop = &loop;
    a.config_path = (char *)config_path;
    a.targets_mode = targets_mode;
    a.log_level_fixed = log_level || targets_mode;
    a.start_time_ns = agent__now_ns();
    hashmap_init(&a.pairs);
    labels_init(&a.external);
    pprof_limits_default(&a.pprof_limits);
    a.pprof_limits.max_decompressed = cfg->limits.max_decompressed;
    if (cfg->limits.max_samples)
        a.pprof_limits.max_samples = cfg->limits.max_samples;
    if (cfg->limits.max_locations)
        a.pprof_limits.max_locations = cfg->limits.max_locations;
    if (cfg->limits.max_functions)
        a.pprof_limits.max_functions = cfg->limits.max_functions;
    if (cfg->limits.max_strings)
        a.pprof_limits.max_strings = cfg->limits.max_strings;
    if (cfg->limits.max_stack_depth)
        a.pprof_limits.max_stack_depth = cfg->limits.max_stack_depth;
    a.pprof_limits.gzip_level = cfg->limits.gzip_level;
    agent__pool_init(&a.pool, cfg->limits.workers ? cfg->limits.workers : 2,
                     cfg->limits.max_jobs_backlog);
    {
        char host[256] = "";

        gethostname(host, sizeof(host) - 1);
        for (unsigned i = 0; i < cfg->n_external_labels; i++)
            labels_set(&a.external, cfg->external_labels[i].key, cfg->external_labels[i].value);
        a.offset_seed = target_offset_seed(host, &a.external);
    }
    labels_done(&a.external);

    a.http = net_client_new(&loop, 1024, err, sizeof(err));
    for (int i = 0; a.http && i < AGENT_SCRAPE_CLIENTS; i++) {
        a.scrapers[i] = net_client_new(&loop, 1024, err, sizeof(err));
        if (!a.scrapers[i]) {
            while (i--)
                net_client_close(a.scrapers[i], all_closed, NULL);
            net_client_close(a.http, all_closed, NULL);
            a.http = NULL;
        }
    }
    if (!a.http) {
        fprintf(stderr, "proflet: %s\n", err);
        cfg_free(cfg);
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
        return 1;
    }
    a.fwd = fwd_new(&loop, a.http);
    a.disc = disc_manager_new(&loop, a.http, targets_mode ? 0 : cfg->discovery_coalesce_ms,
                              targets_mode ? targets_update : agent__on_discovery, &a);
    if (!a.fwd || !a.disc) {
        fprintf(stderr, "proflet: out of memory\n");
        return 1;
    }
    fwd_set_error_cb(a.fwd, on_fwd_error, &a);
    disc_manager_set_error_cb(a.disc, on_disc_error, &a);
    uv_timer_init(&loop, &a.shutdown_timer);
    uv_signal_init(&loop, &a.sig_term);
    uv_signal_init(&loop, &a.sig_int);
    uv_signal_init(&loop, &a.sig_hup);
    a.sig_term.data = a.sig_int.data = a.sig_hup.data = &a;
    cfg_free(cfg);
    cfg = NULL;

    /* The first load goes through the same path as a reload. */
    if (agent__reload(&a, "start") < 0) {
        a.exit_code = 2;
        a.started = true;
        begin_shutdown(&a, "bad configuration");
        goto run_loop;
    }
    a.reloads_ok = 0;
    if (!targets_mode) {
        const char *addr = a.acfg->cfg->listen_address;

        if (addr && *addr) {
            r = net_server_start(&loop, addr, agent__status_handler, &a, &a.status, err,
                                 sizeof(err));
            if (r < 0) {
                log_error("cannot start the status server", "address", addr, "err", err);
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
        a.shutdown_deadline_ms = agent__now_ms() + 60000;
        a.last_update_ms = agent__now_ms();
        uv_timer_start(&targets_timer, targets_check, 10, 10);
    }
    a.started = true;

run_loop:
    uv_run(&loop, UV_RUN_DEFAULT);
    agent__free_jobs(&a);
    agent__cfg_unref(a.acfg);
    labels_done(&a.external);
    hashmap_done(&a.pairs);
    while (a.stats) {
        struct agent_stats *next = a.stats->next;

        free(a.stats->job);
        free(a.stats->type);
        free(a.stats);
        a.stats = next;
    }
    r = uv_loop_close(&loop);
    if (r != 0) {
        fprintf(stderr, "proflet: uv_loop_close: %s\n", uv_strerror(r));
        if (!a.exit_code)
            a.exit_code = 1;
    }
    curl_global_cleanup();
    if (targets_mode && !a.targets_printed && !a.exit_code)
        a.exit_code = 1;
    log_info("proflet stopped", "exit_code", a.exit_code ? "1" : "0");
    return a.exit_code;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"check-config", required_argument, NULL, 'C'},
        {"log-level", required_argument, NULL, 'l'},
        {"job", required_argument, NULL, 'j'},
        {"show-dropped", no_argument, NULL, 'd'},
        {"print-default-config", no_argument, NULL, 'p'},
        {"version", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *config = NULL, *check = NULL, *level = NULL;
    bool targets = false;
    int c;

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
        case 'p':
            fputs(cfg_default_yaml, stdout);
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
        struct cfg *cfg = NULL;

        if (load_config(check, &cfg) < 0)
            return 2;
        printf("%s: configuration is valid (%u scrape job%s, %u remote-write endpoint%s)\n",
               check, cfg->n_scrape, cfg->n_scrape == 1 ? "" : "s", cfg->n_remote,
               cfg->n_remote == 1 ? "" : "s");
        cfg_free(cfg);
        return 0;
    }
    return run(config, level, targets);
}
