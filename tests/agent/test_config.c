/* SPDX-License-Identifier: Apache-2.0 */
/* The program's configuration as agent/config.c assembles it from the
 * modules' settings: defaults, every key of each section in both
 * spellings, profile-type resolution, the modules' own checks with their
 * FILE:LINE:COL messages, the seed examples and docs/config.md's examples.
 * The loader's generic rules (syntax, keys, scalars, env expansion, files)
 * are tested in tests/conf. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_check.h"

/* A CA certificate (self-signed EC P-256, made for these tests): the TLS
 * settings' files and inline PEM are read when a file is loaded. */
static const char test_ca_pem[] =
    "-----BEGIN CERTIFICATE-----\n"
    "MIIBijCCATGgAwIBAgIUVasPstHJm0To8V5YQYds/bsqEoYwCgYIKoZIzj0EAwIw\n"
    "GjEYMBYGA1UEAwwPcHJvZmxldC10ZXN0LWNhMCAXDTI2MTEyNzAzMDAwNFoYDzIx\n"
    "MjYxMTAzMDMwMDA0WjAaMRgwFgYDVQQDDA9wcm9mbGV0LXRlc3QtY2EwWTATBgcq\n"
    "hkjOPQIBBggqhkjOPQMBBwNCAAQDoj86Z8gpW667ZIScrzH+lzBMfyk2mPgZYmTj\n"
    "MnVefhJmRScTgiy3E+a8n8q6w/9OzPr6rQXdQA18D2XC1Y3Eo1MwUTAdBgNVHQ4E\n"
    "FgQUq+QPH99sLlB0hE51hY90zlaPAwgwHwYDVR0jBBgwFoAUq+QPH99sLlB0hE51\n"
    "hY90zlaPAwgwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNHADBEAiAKOYkH\n"
    "3G2/5t6In3eN2EDaXZs0DRxxtoxMg89UqfZNAgIgGOWIEI6RnVmbbvZbshX7Bd+m\n"
    "vuKidi+7kVpQL0GDBj8=\n"
    "-----END CERTIFICATE-----\n";

static char fixture_dir[] = "/tmp/proflet-cfg-tls-XXXXXX";
static const char *const fixture_names[] = {
    "ca.pem",
    "cert.pem",
    "key.pem",
    "notpem.pem",
    "kubeconfig",
    "kubeconfig-broken",
    "kubeconfig-nocontext",
    "kubeconfig-noca",
    "kubeconfig-badb64",
};

static void fixtures_remove(void)
{
    char path[256];

    for (size_t i = 0; i < sizeof(fixture_names) / sizeof(fixture_names[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", fixture_dir, fixture_names[i]);
        unlink(path);
    }
    rmdir(fixture_dir);
}

static void fixture_put(const char *name, const char *text)
{
    char path[256];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", fixture_dir, name);
    f = fopen(path, "w");
    ASSERT_NOT_NULL(f);
    fputs(text, f);
    fclose(f);
}

/* The files the TLS and kubeconfig settings of the tests name, made once
 * in a temporary directory that $T names (the tests load with env
 * expansion); $TEST_CA_PEM holds the certificate as inline PEM. */
static const char *fixtures(void)
{
/* A kubeconfig whose cluster's CA is `ca`. */
#define KUBECONFIG(ca)                                                             \
    "apiVersion: v1\nkind: Config\ncurrent-context: c\n"                           \
    "contexts: [{name: c, context: {cluster: k, user: u}}]\n"                      \
    "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443', " ca "}}]\n" \
    "users: [{name: u, user: {tokenFile: /nonexistent/token}}]\n"
    if (getenv("T"))
        return fixture_dir;
    ASSERT_NOT_NULL(mkdtemp(fixture_dir));
    atexit(fixtures_remove);
    fixture_put("ca.pem", test_ca_pem);
    fixture_put("cert.pem", test_ca_pem);
    fixture_put("key.pem", "a key file is only opened at load\n");
    fixture_put("notpem.pem", "not a certificate\n");
    fixture_put("kubeconfig", KUBECONFIG("certificate-authority: ca.pem"));
    fixture_put("kubeconfig-noca", KUBECONFIG("certificate-authority: no.pem"));
    fixture_put("kubeconfig-badb64", KUBECONFIG("certificate-authority-data: '*!'"));
    fixture_put("kubeconfig-broken", "clusters: [\n");
    fixture_put("kubeconfig-nocontext", "apiVersion: v1\nkind: Config\n");
    setenv("T", fixture_dir, 1);
    setenv("TEST_CA_PEM", test_ca_pem, 1);
    return fixture_dir;
#undef KUBECONFIG
}

/* "$T/name" */
static const char *fixture(const char *name)
{
    static char path[8][256];
    static unsigned next;
    char *p = path[next++ % 8];

    snprintf(p, sizeof(path[0]), "%s/%s", fixtures(), name);
    return p;
}

static const struct scrape_profile_cfg *prof(const struct scrape_job_cfg *s, const char *name)
{
    for (unsigned i = 0; i < s->n_profiles; i++) {
        if (strcmp(s->profiles[i].name, name) == 0)
            return &s->profiles[i];
    }
    return NULL;
}

static unsigned n_enabled(const struct scrape_job_cfg *s)
{
    unsigned n = 0;

    for (unsigned i = 0; i < s->n_profiles; i++)
        n += s->profiles[i].enabled;
    return n;
}

#define MINIMAL "scrape-configs:\n  - job-name: a\n    static-configs: [{targets: [h:6060]}]\n"

TEST(defaults)
{
    struct cfg *c = LOAD_OK(MINIMAL);
    const struct scrape_job_cfg *s = &c->scrape[0];

    ASSERT_STR_EQ(source_of(c), "t.yaml");
    ASSERT_STR_EQ(c->log_level, "info");
    ASSERT_STR_EQ(c->listen_address, "127.0.0.1:4100");
    ASSERT_EQ(c->n_remote, 0);
    ASSERT_EQ(c->name_validation, RELABEL_SCHEME_UTF8);
    ASSERT_U64_EQ(c->discovery.coalesce_ms, 1000);
    ASSERT_NULL(c->spool.dir);
    ASSERT_U64_EQ(c->spool.max_bytes, 1ull << 30);
    ASSERT_U64_EQ(c->spool.max_age_ms, 24ull * 3600 * 1000);
    ASSERT_U64_EQ(c->spool.segment_bytes, 16ull << 20);
    ASSERT_STR_EQ(c->spool.fsync, "batch");
    ASSERT_U64_EQ(c->limits.max_body_bytes, 64ull << 20);
    ASSERT_U64_EQ(c->limits.pprof.max_decompressed, 256ull << 20);
    ASSERT_U64_EQ(c->limits.pprof.max_samples, 1000000);
    ASSERT_U64_EQ(c->limits.pprof.max_stack_depth, 4096);
    ASSERT_U64_EQ(c->discovery.max_watch_line, 16ull << 20);
    ASSERT_EQ(c->limits.workers, 2);
    ASSERT_EQ(c->limits.max_jobs_backlog, 1024);

    ASSERT_EQ(c->n_scrape, 1);
    ASSERT_STR_EQ(s->job_name, "a");
    ASSERT_U64_EQ(s->interval_ms, 15000);
    ASSERT_U64_EQ(s->timeout_ms, 10000);
    ASSERT_STR_EQ(s->scheme, "http");
    ASSERT_STR_EQ(s->path_prefix, "");
    ASSERT_FALSE(s->use_delta_profiles);
    /* inherited from the top level; the body cap is limits.max-body-bytes */
    ASSERT_EQ(s->name_validation, RELABEL_SCHEME_UTF8);
    ASSERT_U64_EQ(s->body_size_limit, 0);
    ASSERT_TRUE(s->http.enable_http2);
    ASSERT_TRUE(s->http.follow_redirects);
    ASSERT_NULL(s->http.basic_auth);
    ASSERT_EQ(s->sd.n_static, 1);
    ASSERT_EQ(s->sd.static_configs[0].n_targets, 1);
    ASSERT_STR_EQ(s->sd.static_configs[0].targets[0], "h:6060");
    ASSERT_NULL(s->sd.static_configs[0].application);
    ASSERT_EQ(s->n_relabel, 0);
    /* Every built-in type is listed; the five Go defaults are on. */
    ASSERT_EQ(s->n_profiles, 9);
    ASSERT_EQ(n_enabled(s), 5);
    ASSERT_TRUE(prof(s, "process_cpu")->enabled);
    ASSERT_TRUE(prof(s, "memory")->enabled);
    ASSERT_TRUE(prof(s, "goroutine")->enabled);
    ASSERT_TRUE(prof(s, "mutex")->enabled);
    ASSERT_TRUE(prof(s, "block")->enabled);
    ASSERT_FALSE(prof(s, "fgprof")->enabled);
    ASSERT_FALSE(prof(s, "godeltaprof_memory")->enabled);
    cfg_free(c);
}

TEST(embedded_default)
{
    struct cfg *c = LOAD_OK(agent_default_config);

    ASSERT_STR_EQ(c->listen_address, "127.0.0.1:4100");
    ASSERT_EQ(c->n_scrape, 1);
    ASSERT_STR_EQ(c->scrape[0].job_name, "default");
    ASSERT_U64_EQ(c->scrape[0].interval_ms, 15000);
    ASSERT_STR_EQ(c->scrape[0].sd.static_configs[0].targets[0], "127.0.0.1:6060");
    ASSERT_STR_EQ(c->scrape[0].sd.static_configs[0].application, "demoapp");
    ASSERT_EQ(n_enabled(&c->scrape[0]), 5);
    ASSERT_EQ(c->n_remote, 1);
    ASSERT_STR_EQ(c->remote[0].url, "file://./proflet-data");
    ASSERT_EQ(c->remote[0].protocol, CFG_PROTO_DIR);
    ASSERT_STR_EQ(c->remote[0].name, "dir");
    cfg_free(c);
}

TEST(all_scrape_keys_both_spellings)
{
    static const char *const kebab =
        "scrape-configs:\n"
        "  - job-name: j\n"
        "    scrape-interval: 1m30s\n"
        "    scrape-timeout: 20s\n"
        "    scheme: https\n"
        "    path-prefix: /app\n"
        "    params: {debug: ['1'], x: y}\n"
        "    use-delta-profiles: yes\n"
        "    static-configs:\n"
        "      - application: shop\n"
        "        spy-name: gospy\n"
        "        targets: [a:1, b:2]\n"
        "        labels: {env: dev, team: ~}\n"
        "    file-sd-configs: [{files: [/etc/t/*.json], refresh-interval: 30s}]\n"
        "    relabel-configs:\n"
        "      - source-labels: [a, b]\n"
        "        separator: ''\n"
        "        target-label: t\n"
        "        replacement: r\n"
        "        action: Replace\n"
        "      - {action: hashmod, source-labels: [__address__], modulus: 3, "
        "target-label: __tmp}\n"
        "    name-validation-scheme: legacy\n"
        "    basic-auth: {username: u, password-file: /p}\n"
        "    tls-config: {ca-file: \"${T}/ca.pem\", cert-file: \"${T}/cert.pem\",\n"
        "                 key-file: \"${T}/key.pem\", "
        "                 server-name: s, "
        "insecure-skip-verify: true}\n"
        "    proxy-url: http://proxy:3128\n"
        "    enable-http2: false\n"
        "    follow-redirects: off\n"
        "    body-size-limit: 1MiB\n";
    char snake[4096];
    struct cfg *c[2];

    fixtures();
    /* The same document with every key in snake_case. */
    snprintf(snake, sizeof(snake), "%s", kebab);
    for (char *p = snake; *p; p++) {
        if (*p == '-' && p[1] != ' ' && p[-1] != ' ' && p[-1] != '/')
            *p = '_';
    }
    ASSERT_NOT_NULL(strstr(snake, "scrape_timeout: 20s"));
    ASSERT_NOT_NULL(strstr(snake, "insecure_skip_verify"));
    c[0] = LOAD_OK(kebab);
    c[1] = LOAD_OK(snake);
    for (int i = 0; i < 2; i++) {
        const struct scrape_job_cfg *s = &c[i]->scrape[0];

        ASSERT_U64_EQ(s->interval_ms, 90000);
        ASSERT_U64_EQ(s->timeout_ms, 20000);
        ASSERT_STR_EQ(s->scheme, "https");
        ASSERT_STR_EQ(s->path_prefix, "/app");
        ASSERT_EQ(s->n_params, 2);
        ASSERT_STR_EQ(s->params[0].key, "debug");
        ASSERT_EQ(s->params[0].n_values, 1);
        ASSERT_STR_EQ(s->params[0].values[0], "1");
        ASSERT_STR_EQ(s->params[1].key, "x");
        ASSERT_STR_EQ(s->params[1].values[0], "y");
        ASSERT_TRUE(s->use_delta_profiles);
        ASSERT_STR_EQ(s->sd.static_configs[0].application, "shop");
        ASSERT_STR_EQ(s->sd.static_configs[0].spy_name, "gospy");
        ASSERT_EQ(s->sd.static_configs[0].n_targets, 2);
        ASSERT_EQ(s->sd.static_configs[0].n_labels, 2);
        ASSERT_STR_EQ(s->sd.static_configs[0].labels[0].key, "env");
        ASSERT_STR_EQ(s->sd.static_configs[0].labels[0].value, "dev");
        ASSERT_STR_EQ(s->sd.static_configs[0].labels[1].value, "");
        ASSERT_EQ(s->sd.n_file_sd, 1);
        ASSERT_STR_EQ(s->sd.file_sd[0].files[0], "/etc/t/*.json");
        ASSERT_U64_EQ(s->sd.file_sd[0].refresh_interval_ms, 30000);
        ASSERT_EQ(s->n_relabel, 2);
        ASSERT_EQ(s->relabel[0].n_source_labels, 2);
        ASSERT_STR_EQ(s->relabel[0].separator, "");
        ASSERT_NULL(s->relabel[0].regex);
        ASSERT_FALSE(s->relabel[0].regex_null);
        ASSERT_STR_EQ(s->relabel[0].target_label, "t");
        ASSERT_STR_EQ(s->relabel[0].replacement, "r");
        ASSERT_STR_EQ(s->relabel[0].action, "Replace");
        ASSERT_U64_EQ(s->relabel[1].modulus, 3);
        ASSERT_EQ(s->name_validation, RELABEL_SCHEME_LEGACY);
        ASSERT_NOT_NULL(s->http.basic_auth);
        ASSERT_STR_EQ(s->http.basic_auth->username, "u");
        ASSERT_NULL(s->http.basic_auth->password);
        ASSERT_STR_EQ(s->http.basic_auth->password_file, "/p");
        ASSERT_STR_EQ(s->http.tls.ca_file, fixture("ca.pem"));
        ASSERT_STR_EQ(s->http.tls.cert_file, fixture("cert.pem"));
        ASSERT_STR_EQ(s->http.tls.key_file, fixture("key.pem"));
        ASSERT_STR_EQ(s->http.tls.server_name, "s");
        ASSERT_TRUE(s->http.tls.insecure_skip_verify);
        ASSERT_STR_EQ(s->http.proxy_url, "http://proxy:3128");
        ASSERT_FALSE(s->http.enable_http2);
        ASSERT_FALSE(s->http.follow_redirects);
        ASSERT_U64_EQ(s->body_size_limit, 1u << 20);
    }
    cfg_free(c[0]);
    cfg_free(c[1]);
}

TEST(listen_address_checked_at_load)
{
    struct cfg *c;

    ERR_STARTS("server: {listen-address: ''}\n", "t.yaml:1:26: bad listen address \"\"");
    ERR_STARTS("server: {listen-address: '999.1.1.1:99'}\n", "t.yaml:1:26: bad listen address");
    ERR_STARTS("server: {listen-address: '127.0.0.1:99999'}\n", "t.yaml:1:26: bad listen address");
    ERR_STARTS("server: {listen-address: 'example.com:4100'}\n", "t.yaml:1:26: bad listen address");
    ERR_STARTS("server: {header-timeout: 0s}\n", "t.yaml:1:");
    c = LOAD_OK("server: {listen-address: '[::1]:0', header-timeout: 3s}\n");
    ASSERT_STR_EQ(c->listen_address, "[::1]:0");
    ASSERT_EQ(c->header_timeout_ms, 3000);
    cfg_free(c);
    c = LOAD_OK("server: {listen-address: 'localhost:4100'}\n");
    ASSERT_EQ(c->header_timeout_ms, 10000);
    cfg_free(c);
}

TEST(top_level_keys)
{
    struct cfg *c = LOAD_OK("log_level: debug\n"
                            "server: {listen_address: '0.0.0.0:4100'}\n"
                            "external_labels: {cluster: prod, region: eu}\n"
                            "name-validation-scheme: legacy\n"
                            "discovery: {coalesce-delay: 250ms}\n"
                            "workers: 4\n"
                            "spool: {dir: /var/spool, max-bytes: 2GB, max-age: 1h, "
                            "segment_bytes: 1024, fsync: always}\n"
                            "limits: {max-body-bytes: 1KiB, max-samples: 10, max-locations: 11, "
                            "max-functions: 12, max-strings: 13, max-stack-depth: 14, "
                            "max-watch-line: 15, max-jobs-backlog: 16, "
                            "max-decompressed: 2MiB}\n");

    ASSERT_STR_EQ(c->log_level, "debug");
    ASSERT_STR_EQ(c->listen_address, "0.0.0.0:4100");
    ASSERT_EQ(c->n_external_labels, 2);
    ASSERT_STR_EQ(c->external_labels[1].key, "region");
    ASSERT_STR_EQ(c->external_labels[1].value, "eu");
    ASSERT_EQ(c->name_validation, RELABEL_SCHEME_LEGACY);
    ASSERT_U64_EQ(c->discovery.coalesce_ms, 250);
    ASSERT_EQ(c->limits.workers, 4);
    ASSERT_STR_EQ(c->spool.dir, "/var/spool");
    ASSERT_U64_EQ(c->spool.max_bytes, 2ull << 30);
    ASSERT_U64_EQ(c->spool.max_age_ms, 3600000);
    ASSERT_U64_EQ(c->spool.segment_bytes, 1024);
    ASSERT_STR_EQ(c->spool.fsync, "always");
    ASSERT_U64_EQ(c->limits.max_body_bytes, 1024);
    ASSERT_U64_EQ(c->limits.pprof.max_decompressed, 2u << 20);
    ASSERT_U64_EQ(c->limits.pprof.max_samples, 10);
    ASSERT_U64_EQ(c->limits.pprof.max_locations, 11);
    ASSERT_U64_EQ(c->limits.pprof.max_functions, 12);
    ASSERT_U64_EQ(c->limits.pprof.max_strings, 13);
    ASSERT_U64_EQ(c->limits.pprof.max_stack_depth, 14);
    ASSERT_U64_EQ(c->discovery.max_watch_line, 15);
    ASSERT_EQ(c->limits.max_jobs_backlog, 16);
    cfg_free(c);

    c = LOAD_OK("limits: {workers: 3}\n");
    ASSERT_EQ(c->limits.workers, 3);
    ASSERT_U64_EQ(c->limits.max_body_bytes, 64ull << 20);
    cfg_free(c);
}

TEST(remote_write)
{
    struct cfg *c = LOAD_OK("remote-write:\n"
                            "  - url: https://user@pyro.example:4040/base\n"
                            "    protocol: ingest\n"
                            "    headers: {X-Scope-OrgID: team-a}\n"
                            "    tenant_id: t1\n"
                            "    bearer-token-file: /tok\n"
                            "    tls-config: {insecure-skip-verify: true}\n"
                            "    remote-timeout: 30s\n"
                            "    min-backoff: 1s\n"
                            "    max-backoff: 1m\n"
                            "    max-retries: 0\n"
                            "    gzip: true\n"
                            "    compression: smallest\n"
                            "    external-labels: {k: v}\n"
                            "    batch: {max-profiles: 8, max-bytes: 1MiB, max-wait: 2s}\n"
                            "    queue: {max-profiles: 100, max_bytes: 8MiB}\n"
                            "    max-inflight: 2\n"
                            "  - url: http://localhost:4040\n"
                            "  - url: file:///var/lib/proflet/profiles\n"
                            "    max-dir-bytes: 10MiB\n"
                            "    compression: none\n"
                            "    name: disk\n");
    const struct cfg_remote *r = &c->remote[0];

    ASSERT_EQ(c->n_remote, 3);
    ASSERT_STR_EQ(r->name, "pyro.example:4040");
    ASSERT_EQ(r->protocol, CFG_PROTO_INGEST);
    ASSERT_EQ(r->n_headers, 1);
    ASSERT_STR_EQ(r->headers[0].key, "X-Scope-OrgID");
    ASSERT_STR_EQ(r->headers[0].value, "team-a");
    ASSERT_STR_EQ(r->tenant_id, "t1");
    ASSERT_STR_EQ(r->http.bearer_token_file, "/tok");
    ASSERT_TRUE(r->http.tls.insecure_skip_verify);
    ASSERT_U64_EQ(r->remote_timeout_ms, 30000);
    ASSERT_U64_EQ(r->min_backoff_ms, 1000);
    ASSERT_U64_EQ(r->max_backoff_ms, 60000);
    ASSERT_EQ(r->max_retries, 0);
    ASSERT_TRUE(r->gzip_request);
    ASSERT_EQ(r->compression, PPROF_COMPRESS_SMALLEST);
    ASSERT_STR_EQ(r->external_labels[0].key, "k");
    ASSERT_EQ(r->batch_max_profiles, 8);
    ASSERT_U64_EQ(r->batch_max_bytes, 1u << 20);
    ASSERT_U64_EQ(r->batch_max_wait_ms, 2000);
    ASSERT_EQ(r->queue_max_profiles, 100);
    ASSERT_U64_EQ(r->queue_max_bytes, 8u << 20);
    ASSERT_EQ(r->max_inflight, 2);

    r = &c->remote[1];
    ASSERT_STR_EQ(r->name, "localhost:4040");
    ASSERT_EQ(r->protocol, CFG_PROTO_PUSH);
    ASSERT_U64_EQ(r->remote_timeout_ms, 10000);
    ASSERT_U64_EQ(r->min_backoff_ms, 500);
    ASSERT_U64_EQ(r->max_backoff_ms, 300000);
    ASSERT_EQ(r->max_retries, 10);
    ASSERT_FALSE(r->gzip_request);
    ASSERT_EQ(r->compression, PPROF_COMPRESS_BALANCED);
    ASSERT_EQ(r->batch_max_profiles, 64);
    ASSERT_U64_EQ(r->batch_max_bytes, 4u << 20);
    ASSERT_U64_EQ(r->batch_max_wait_ms, 1000);
    ASSERT_EQ(r->queue_max_profiles, 10000);
    ASSERT_U64_EQ(r->queue_max_bytes, 256u << 20);
    ASSERT_EQ(r->max_inflight, 4);
    ASSERT_U64_EQ(r->dir_max_bytes, 1ull << 30);

    r = &c->remote[2];
    ASSERT_EQ(r->protocol, CFG_PROTO_DIR);
    ASSERT_STR_EQ(r->name, "disk");
    ASSERT_U64_EQ(r->dir_max_bytes, 10u << 20);
    ASSERT_EQ(r->compression, PPROF_COMPRESS_NONE);
    cfg_free(c);
}

/* Alloy's pyroscope.write names are accepted for the same settings. */
TEST(remote_write_alloy_names)
{
    struct cfg *c = LOAD_OK("remote-write:\n"
                            "  - url: http://127.0.0.1:4040\n"
                            "    min_backoff_period: 2s\n"
                            "    max_backoff_period: 3m\n"
                            "    max_backoff_retries: 7\n"
                            "    remote_timeout: 5s\n");

    ASSERT_U64_EQ(c->remote[0].min_backoff_ms, 2000);
    ASSERT_U64_EQ(c->remote[0].max_backoff_ms, 180000);
    ASSERT_EQ(c->remote[0].max_retries, 7);
    ASSERT_U64_EQ(c->remote[0].remote_timeout_ms, 5000);
    cfg_free(c);
    c = LOAD_OK("scrape-configs:\n  - job-name: a\n    path_prefix: /p\n");
    ASSERT_STR_EQ(c->scrape[0].path_prefix, "/p");
    cfg_free(c);
    ERR_IS("remote-write:\n  - url: http://h\n    min-backoff: 1s\n    min_backoff_period: 2s\n",
           "t.yaml:4:5: both \"min-backoff\" and \"min_backoff_period\" given in remote-write "
           "(they are the same key)");
}

TEST(remote_write_errors)
{
    ERR_IS("remote-write:\n  - url: ftp://x\n",
           "t.yaml:2:10: expected a URL starting with http://, https:// or file://, got "
           "\"ftp://x\"");
    ERR_IS("remote-write:\n  - url: http://\n",
           "t.yaml:2:10: invalid URL \"http://\": No host part in the URL");
    /* libcurl's URL parser decides, as it will when the request is made. */
    ERR_IS("remote-write:\n  - url: \"http://u:p@[::1\"\n",
           "t.yaml:2:10: invalid URL \"http://u:p@[::1\": Bad IPv6 address");
    ERR_IS("remote-write:\n  - url: http://h:99999/x\n",
           "t.yaml:2:10: invalid URL \"http://h:99999/x\": Port number was not a decimal number "
           "between 0 and 65535");
    ERR_IS("remote-write:\n  - url: file://host/dir\n",
           "t.yaml:2:10: expected file:///absolute/dir or file://./relative/dir, got "
           "\"file://host/dir\"");
    ERR_IS("remote-write:\n  - url: file:///d\n    protocol: ingest\n",
           "t.yaml:3:15: protocol ingest does not apply to a file:// url");
    ERR_IS("remote-write:\n  - name: x\n",
           "t.yaml:2:5: missing required key \"url\" in remote-write");
    ERR_IS("remote-write:\n  - url: http://a\n    protocol: grpc\n",
           "t.yaml:3:15: expected one of push, ingest, got \"grpc\"");
    ERR_IS("remote-write:\n  - url: http://a\n    name: x\n  - url: http://b\n    name: x\n",
           "t.yaml:5:11: duplicate remote-write name \"x\"; set name: to tell them apart");
    ERR_IS("remote-write:\n  - url: file:///d\n  - url: file:///d\n",
           "t.yaml:3:5: remote-write endpoint 2 has the same settings as endpoint 1");
    ERR_IS("remote-write:\n  - url: http://a\n    min-backoff: 10m\n",
           "t.yaml:3:18: min-backoff cannot be greater than max-backoff");
    /* `.dir` is internal: a user cannot select it by name. */
    ERR_IS("remote-write:\n  - url: http://a\n    protocol: .dir\n",
           "t.yaml:3:15: expected one of push, ingest, got \".dir\"");
}

/* Names nobody wrote: the host (or "dir"), with the settings' hash when
 * endpoints share it, the same on every load. */
TEST(remote_write_default_names)
{
    static const char two[] = "remote-write:\n  - url: file:///a\n  - url: file:///b\n"
                              "  - url: http://h/x\n  - url: http://h/y\n  - url: http://k\n"
                              "  - url: file:///c\n    name: dir\n";
    struct cfg *c = LOAD_OK(two), *again = LOAD_OK(two);

    ASSERT_EQ(c->n_remote, 6);
    ASSERT_EQ(strncmp(c->remote[0].name, "dir-", 4), 0);
    ASSERT_EQ(strlen(c->remote[0].name), 10);
    ASSERT_EQ(strncmp(c->remote[1].name, "dir-", 4), 0);
    ASSERT(strcmp(c->remote[0].name, c->remote[1].name) != 0);
    ASSERT_EQ(strncmp(c->remote[2].name, "h-", 2), 0);
    ASSERT(strcmp(c->remote[2].name, c->remote[3].name) != 0);
    ASSERT_STR_EQ(c->remote[4].name, "k");
    ASSERT_STR_EQ(c->remote[5].name, "dir");
    for (unsigned i = 0; i < 6; i++)
        ASSERT_STR_EQ(c->remote[i].name, again->remote[i].name);
    cfg_free(c);
    cfg_free(again);
}

/* Prometheus refuses these paths when it loads the file (promtool says
 * "path name ... is not valid for file discovery"); so does proflet, at
 * their position, instead of a job silently missing at run time. */
TEST(file_sd_paths_checked_at_load)
{
    ERR_STARTS("scrape-configs:\n  - job-name: a\n    file-sd-configs:\n"
               "      - files: [/ok/*.json, \"/x/*.jsn/y/[.json\"]\n",
               "t.yaml:4:29: path name \"/x/*.jsn/y/[.json\" is not valid for file discovery");
    ERR_STARTS("scrape-configs:\n  - job-name: a\n    file-sd-configs:\n"
               "      - files: [/x/foo.txt]\n",
               "t.yaml:4:17: path name \"/x/foo.txt\" is not valid for file discovery");
    ERR_STARTS("scrape-configs:\n  - job-name: a\n    file-sd-configs:\n"
               "      - files: [/x/*/t.json]\n",
               "t.yaml:4:17: path name \"/x/*/t.json\" is not valid");
    cfg_free(LOAD_OK("scrape-configs:\n  - job-name: a\n    file-sd-configs:\n"
                     "      - files: [/x/t.json, /x/*.yml, /x/a*b*.YAML, t.json]\n"));
}

TEST(profile_relabel_configs)
{
    const char *y = "scrape-configs:\n  - job-name: a\n"
                    "    relabel-configs:\n"
                    "      - {source-labels: [__name__], regex: cpu, action: drop}\n"
                    "    profile_relabel_configs:\n"
                    "      - {source_labels: [__name__], regex: block, action: drop}\n";
    struct conf_doc *doc = NULL;
    char err[512];

    ASSERT_EQ(agent_config_load_string(y, strlen(y), "t.yaml", 0, &doc, err, sizeof(err)), 0);
    ASSERT_EQ(agent_config(doc)->scrape[0].n_profile_relabel, 1);
    ASSERT_NOT_NULL(agent_config(doc)->scrape[0].profile_rules);
    /* A target rule reading a label only profiles have: said where it is. */
    ASSERT_STR_EQ(conf_doc_warning(doc, 0),
                  "t.yaml:4:9: relabel config 1 of job \"a\" reads __name__, which targets do "
                  "not have: rules over the labels profiles are sent with go in "
                  "profile-relabel-configs");
    conf_doc_unref(doc);
    /* Read after a rule of the same list set it: no warning. */
    y = "scrape-configs:\n  - job-name: a\n    relabel-configs:\n"
        "      - {target-label: __name__, replacement: app}\n"
        "      - {source-labels: [__name__], regex: app, action: keep}\n";
    ASSERT_EQ(agent_config_load_string(y, strlen(y), "t.yaml", 0, &doc, err, sizeof(err)), 0);
    ASSERT_NULL(conf_doc_warning(doc, 0));
    conf_doc_unref(doc);
    ERR_IS("scrape-configs:\n  - job-name: a\n    profile-relabel-configs:\n"
           "      - {action: hashmod, target-label: x}\n",
           "t.yaml:4:9: profile relabel config 1 of job \"a\": relabel configuration for "
           "hashmod requires non-zero modulus");
}

TEST(target_sampling_and_limit)
{
    struct cfg *c = LOAD_OK("scrape-configs:\n  - job-name: a\n    target-limit: 500\n"
                            "    target_sampling:\n"
                            "      group_by: [namespace, __meta_kubernetes_pod_controller_name]\n"
                            "      max-per-group: 3\n");

    ASSERT_EQ(c->scrape[0].target_limit, 500);
    ASSERT_EQ(c->scrape[0].sampling.max_per_group, 3);
    ASSERT_EQ(c->scrape[0].sampling.n_group_by, 2);
    ASSERT_STR_EQ(c->scrape[0].sampling.group_by[1], "__meta_kubernetes_pod_controller_name");
    cfg_free(c);
    c = LOAD_OK("scrape-configs:\n  - job-name: a\n");
    ASSERT_EQ(c->scrape[0].target_limit, 0);
    ASSERT_EQ(c->scrape[0].sampling.max_per_group, 0);
    cfg_free(c);
    ERR_IS("scrape-configs:\n  - job-name: a\n    target-sampling: {group-by: [a], "
           "max-per-group: 0}\n",
           "t.yaml:3:53: max-per-group must be at least 1");
    ERR_IS("scrape-configs:\n  - job-name: a\n    target-sampling: {max-per-group: 2}\n",
           "t.yaml:3:22: target-sampling needs a non-empty group-by");
}

static const struct scrape_profile_cfg *profile_named(const struct cfg *c, const char *name)
{
    for (unsigned i = 0; i < c->scrape[0].n_profiles; i++)
        if (strcmp(c->scrape[0].profiles[i].name, name) == 0)
            return &c->scrape[0].profiles[i];
    return NULL;
}

TEST(profile_filters)
{
    struct cfg *c =
        LOAD_OK("scrape-configs:\n  - job-name: a\n    profiles:\n"
                "      memory:\n        sample-types: {drop: [alloc_objects, alloc_space]}\n"
                "      process_cpu:\n        sample-labels: {drop: 'span_id|trace_id'}\n"
                "      mutex:\n        sample-types: {keep: [delay]}\n"
                "        sample-labels: {keep: 'handler'}\n");
    const struct scrape_profile_cfg *mem = profile_named(c, "memory");
    const struct scrape_profile_cfg *cpu = profile_named(c, "process_cpu");
    const struct scrape_profile_cfg *mtx = profile_named(c, "mutex");
    const struct scrape_profile_cfg *blk = profile_named(c, "block");

    ASSERT(mem && cpu && mtx && blk);
    ASSERT_NOT_NULL(mem->filter);
    ASSERT_EQ(mem->filter->n_types, 2);
    ASSERT(!mem->filter->types_keep);
    ASSERT_STR_EQ(mem->filter->types[1], "alloc_space");
    ASSERT_NULL(mem->filter->label_keep);
    ASSERT_NOT_NULL(cpu->filter);
    ASSERT_EQ(cpu->filter->n_types, 0);
    ASSERT(!cpu->filter->label_keep("span_id", 7, cpu->filter->label_ud));
    ASSERT(!cpu->filter->label_keep("trace_id", 8, cpu->filter->label_ud));
    ASSERT(cpu->filter->label_keep("span_ids", 8, cpu->filter->label_ud)); /* anchored */
    ASSERT(cpu->filter->label_keep("handler", 7, cpu->filter->label_ud));
    ASSERT(mtx->filter->types_keep);
    ASSERT(mtx->filter->label_keep("handler", 7, mtx->filter->label_ud));
    ASSERT(!mtx->filter->label_keep("span_id", 7, mtx->filter->label_ud));
    ASSERT_NULL(blk->filter); /* nothing configured: nothing decoded */
    {
        /* A reload builds the same filters again: same fingerprints, so
         * the delta state stays; another regex or mode is another filter. */
        struct cfg *c2 =
            LOAD_OK("scrape-configs:\n  - job-name: a\n    profiles:\n"
                    "      memory:\n        sample-types: {drop: [alloc_objects, alloc_space]}\n"
                    "      process_cpu:\n        sample-labels: {drop: 'span_id'}\n"
                    "      mutex:\n        sample-types: {drop: [delay]}\n"
                    "        sample-labels: {keep: 'handler'}\n");

        ASSERT_U64_EQ(profile_named(c2, "memory")->filter->fingerprint, mem->filter->fingerprint);
        ASSERT(profile_named(c2, "process_cpu")->filter->fingerprint != cpu->filter->fingerprint);
        ASSERT(profile_named(c2, "mutex")->filter->fingerprint != mtx->filter->fingerprint);
        cfg_free(c2);
    }
    cfg_free(c);
    ERR_IS("scrape-configs:\n  - job-name: a\n    profiles:\n      memory:\n"
           "        sample-types: {keep: [inuse_space], drop: [alloc_space]}\n",
           "t.yaml:5:23: sample-types of profile \"memory\" takes keep or drop (one of them)");
    ERR_IS("scrape-configs:\n  - job-name: a\n    profiles:\n      memory:\n"
           "        sample-types: {keep: []}\n",
           "t.yaml:5:23: sample-types of profile \"memory\" lists no type");
    ERR_IS("scrape-configs:\n  - job-name: a\n    profiles:\n      memory:\n"
           "        sample-labels: {}\n",
           "t.yaml:5:24: sample-labels of profile \"memory\" takes keep or drop (one of them)");
    ERR_IS("scrape-configs:\n  - job-name: a\n    profiles:\n      memory:\n"
           "        sample-labels: {drop: 'span_(id'}\n",
           "t.yaml:5:31: sample-labels of profile \"memory\": error parsing regexp: "
           "missing closing ): `^(?s:span_(id)$`");
}

TEST(write_relabel_configs)
{
    struct cfg *c = LOAD_OK("remote-write:\n  - url: http://127.0.0.1:4040\n"
                            "    write-relabel-configs:\n"
                            "      - {source-labels: [__name__], regex: memory, action: drop}\n"
                            "      - {action: labeldrop, regex: cluster}\n");

    ASSERT_EQ(c->n_remote, 1);
    ASSERT_EQ(c->remote[0].n_write_relabel, 2);
    ASSERT_STR_EQ(c->remote[0].write_relabel[0].regex, "memory");
    cfg_free(c);
    ERR_IS("remote-write:\n  - url: http://127.0.0.1:4040\n    write-relabel-configs:\n"
           "      - {source-labels: [a], action: hashmod, target-label: b}\n",
           "t.yaml:4:9: write relabel config 1 of remote-write \"127.0.0.1:4040\": relabel "
           "configuration for hashmod requires non-zero modulus");
}

TEST(scrape_timeout_rules)
{
    const char *over = "scrape-configs:\n  - job-name: a\n    scrape-interval: 15s\n"
                       "    scrape-timeout: 18s\n";
    struct conf_doc *doc = NULL;
    struct cfg *c;
    char err[512];

    /* Alloy's documentation prints 15s / 18s and Alloy accepts it: a
     * warning, not an error. */
    ASSERT_EQ(agent_config_load_string(over, strlen(over), "t.yaml", 0, &doc, err, sizeof(err)), 0);
    ASSERT_U64_EQ(agent_config(doc)->scrape[0].timeout_ms, 18000);
    ASSERT_STR_EQ(conf_doc_warning(doc, 0),
                  "t.yaml:4:21: scrape-timeout (18s) is greater than scrape-interval (15s): a "
                  "scrape still running at the next tick makes that tick skip");
    conf_doc_unref(doc);
    /* Without a timeout, Prometheus' default 10s is capped at the interval. */
    c = LOAD_OK("scrape-configs:\n  - job-name: a\n    scrape-interval: 5s\n");
    ASSERT_U64_EQ(c->scrape[0].timeout_ms, 5000);
    cfg_free(c);
    c = LOAD_OK("scrape-configs:\n  - job-name: a\n    scrape-interval: 1m\n"
                "    scrape-timeout: 1m\n");
    ASSERT_U64_EQ(c->scrape[0].timeout_ms, 60000);
    cfg_free(c);
}

/* A duration profile lasts `seconds`: at least 1s and at least 1s below
 * the interval (Alloy's rule for delta_profiling_duration). */
TEST(duration_profile_seconds)
{
    struct cfg *c;

    ERR_IS("scrape-configs:\n  - job-name: a\n    scrape-interval: 1s\n",
           "t.yaml:3:22: process_cpu lasts 1s, which must be at least 1s and at least 1s below "
           "scrape-interval (1s)");
    ERR_IS("scrape-configs:\n  - job-name: a\n    profiles: {cpu: {params: {seconds: '15'}}}\n",
           "t.yaml:3:40: process_cpu lasts 15s, which must be at least 1s and at least 1s below "
           "scrape-interval (15s)");
    ERR_IS("scrape-configs:\n  - job-name: a\n    params: {seconds: ['0']}\n",
           "t.yaml:3:24: process_cpu lasts 0s, which must be at least 1s and at least 1s below "
           "scrape-interval (15s)");
    ERR_IS("scrape-configs:\n  - job-name: a\n    params: {seconds: [x9]}\n",
           "t.yaml:3:24: seconds must be a whole number, got \"x9\"");
    ERR_IS("scrape-configs:\n  - job-name: a\n    enabled-profiles: [fgprof]\n"
           "    delta_profiling_duration: 15s\n",
           "t.yaml:4:31: fgprof lasts 15s, which must be at least 1s and at least 1s below "
           "scrape-interval (15s)");
    ERR_IS("scrape-configs:\n  - job-name: a\n    delta-profiling-duration: 1500ms\n",
           "t.yaml:3:31: delta-profiling-duration must be a whole number of seconds, at least 1s");
    /* Without cpu, a 1s interval is fine. */
    cfg_free(LOAD_OK("scrape-configs:\n  - job-name: a\n    scrape-interval: 1s\n"
                     "    enabled-profiles: [goroutine]\n"));
    /* Alloy's delta_profiling_duration sets seconds where nothing else does. */
    c = LOAD_OK("scrape-configs:\n  - job-name: a\n    delta_profiling_duration: 10s\n"
                "    profiles: {fgprof: {enabled: true, params: {seconds: ['3']}}}\n");
    ASSERT_EQ(c->scrape[0].n_params, 1);
    ASSERT_STR_EQ(c->scrape[0].params[0].key, "seconds");
    ASSERT_STR_EQ(c->scrape[0].params[0].values[0], "10");
    ASSERT_STR_EQ(prof(&c->scrape[0], "fgprof")->params[0].values[0], "3");
    cfg_free(c);
    ERR_IS("scrape-configs:\n  - job-name: \"\"\n", "t.yaml:2:15: job-name cannot be empty");
}

TEST(duplicate_job_name)
{
    ERR_IS("scrape-configs:\n  - job-name: a\n  - job-name: b\n  - job_name: a\n",
           "t.yaml:4:15: duplicate job-name \"a\" (also at line 2)");
}

TEST(profile_canonical_names)
{
    ASSERT_STR_EQ(scrape_profile_canonical("cpu"), "process_cpu");
    ASSERT_STR_EQ(scrape_profile_canonical("process_cpu"), "process_cpu");
    ASSERT_STR_EQ(scrape_profile_canonical("mem"), "memory");
    ASSERT_STR_EQ(scrape_profile_canonical("heap"), "memory");
    ASSERT_STR_EQ(scrape_profile_canonical("goroutines"), "goroutine");
    ASSERT_STR_EQ(scrape_profile_canonical("mutex"), "mutex");
    ASSERT_STR_EQ(scrape_profile_canonical("block"), "block");
    ASSERT_STR_EQ(scrape_profile_canonical("fgprof"), "fgprof");
    ASSERT_STR_EQ(scrape_profile_canonical("godeltaprof_memory"), "godeltaprof_memory");
    ASSERT_NULL(scrape_profile_canonical("wall"));
    ASSERT_NULL(scrape_profile_canonical(NULL));
}

TEST(profile_resolution)
{
    struct cfg *c = LOAD_OK("scrape-configs:\n"
                            "  - job-name: a\n"
                            "    scrape-interval: 1m\n"
                            "    enabled-profiles: [cpu, mem, my_custom, fgprof]\n"
                            "    profiles:\n"
                            "      cpu: {params: {seconds: ['30']}}\n"
                            "      my_custom: {path: /debug/custom, delta: true}\n"
                            "      other: {path: /debug/other, enabled: false}\n"
                            "      heap: {path: /debug/pprof/heap}\n"
                            "      goroutines: {enabled: true}\n");
    const struct scrape_job_cfg *s = &c->scrape[0];
    const struct scrape_profile_cfg *p;

    ASSERT_EQ(s->n_profiles, 11);
    p = prof(s, "process_cpu");
    ASSERT_TRUE(p->enabled);
    ASSERT_TRUE(p->delta);
    ASSERT_EQ(p->kind, SCRAPE_KIND_DURATION);
    ASSERT_STR_EQ(p->path, "/debug/pprof/profile");
    ASSERT_STR_EQ(p->send_name, "process_cpu");
    ASSERT_EQ(p->n_params, 1);
    ASSERT_STR_EQ(p->params[0].key, "seconds");
    ASSERT_STR_EQ(p->params[0].values[0], "30");
    p = prof(s, "memory");
    ASSERT_TRUE(p->enabled);
    ASSERT_FALSE(p->delta);
    ASSERT_EQ(p->kind, SCRAPE_KIND_CUMULATIVE_MEMORY);
    ASSERT_STR_EQ(p->path, "/debug/pprof/heap");
    ASSERT_TRUE(prof(s, "goroutine")->enabled); /* profiles.<name>.enabled wins */
    ASSERT_EQ(prof(s, "goroutine")->kind, SCRAPE_KIND_GAUGE);
    ASSERT_FALSE(prof(s, "mutex")->enabled);
    ASSERT_EQ(prof(s, "mutex")->kind, SCRAPE_KIND_CUMULATIVE_CONTENTION);
    ASSERT_STR_EQ(prof(s, "mutex")->path, "/debug/pprof/mutex");
    ASSERT_FALSE(prof(s, "block")->enabled);
    ASSERT_STR_EQ(prof(s, "block")->path, "/debug/pprof/block");
    p = prof(s, "fgprof");
    ASSERT_TRUE(p->enabled);
    ASSERT_TRUE(p->delta);
    ASSERT_EQ(p->kind, SCRAPE_KIND_DURATION);
    ASSERT_STR_EQ(p->path, "/debug/fgprof");
    p = prof(s, "my_custom");
    ASSERT_TRUE(p->enabled);
    ASSERT_TRUE(p->delta);
    ASSERT_EQ(p->kind, SCRAPE_KIND_CUSTOM);
    ASSERT_STR_EQ(p->path, "/debug/custom");
    ASSERT_STR_EQ(p->send_name, "my_custom");
    p = prof(s, "other");
    ASSERT_FALSE(p->enabled);
    ASSERT_STR_EQ(p->path, "/debug/other");
    ASSERT_EQ(n_enabled(s), 5);
    cfg_free(c);
}

TEST(use_delta_profiles)
{
    static const char *const docs[] = {
        "scrape-configs:\n  - job-name: a\n    use-delta-profiles: true\n",
        "scrape-configs:\n  - job-name: a\n    use_delta_endpoints: true\n",
    };

    for (int i = 0; i < 2; i++) {
        struct cfg *c = LOAD_OK(docs[i]);
        const struct scrape_job_cfg *s = &c->scrape[0];
        const struct scrape_profile_cfg *p = prof(s, "memory");

        ASSERT_TRUE(s->use_delta_profiles);
        ASSERT_TRUE(p->enabled);
        ASSERT_EQ(p->kind, SCRAPE_KIND_DELTA);
        ASSERT_STR_EQ(p->path, "/debug/pprof/delta_heap");
        ASSERT_STR_EQ(p->send_name, "memory");
        ASSERT_STR_EQ(prof(s, "mutex")->path, "/debug/pprof/delta_mutex");
        ASSERT_EQ(prof(s, "mutex")->kind, SCRAPE_KIND_DELTA);
        ASSERT_STR_EQ(prof(s, "block")->path, "/debug/pprof/delta_block");
        ASSERT_STR_EQ(prof(s, "block")->send_name, "block");
        ASSERT_STR_EQ(prof(s, "process_cpu")->path, "/debug/pprof/profile");
        ASSERT_EQ(prof(s, "goroutine")->kind, SCRAPE_KIND_GAUGE);
        cfg_free(c);
    }
}

TEST(godeltaprof_types)
{
    struct cfg *c = LOAD_OK("scrape-configs:\n  - job-name: a\n    profiles:\n"
                            "      godeltaprof_memory: {enabled: true}\n"
                            "      memory: {enabled: false}\n");
    const struct scrape_profile_cfg *p = prof(&c->scrape[0], "godeltaprof_memory");

    ASSERT_TRUE(p->enabled);
    ASSERT_EQ(p->kind, SCRAPE_KIND_DELTA);
    ASSERT_STR_EQ(p->path, "/debug/pprof/delta_heap");
    ASSERT_STR_EQ(p->send_name, "memory");
    ASSERT_FALSE(prof(&c->scrape[0], "memory")->enabled);
    ASSERT_STR_EQ(prof(&c->scrape[0], "godeltaprof_mutex")->send_name, "mutex");
    ASSERT_STR_EQ(prof(&c->scrape[0], "godeltaprof_block")->path, "/debug/pprof/delta_block");
    cfg_free(c);
}

TEST(profile_errors)
{
    ERR_IS("scrape-configs:\n  - job-name: a\n    enabled-profiles: [cpu, wall]\n",
           "t.yaml:3:29: unknown profile type \"wall\" in enabled-profiles (not a built-in type "
           "and not declared under profiles)");
    ERR_IS("scrape-configs:\n  - job-name: a\n    profiles:\n      wall: {enabled: true}\n",
           "t.yaml:4:7: profile \"wall\" is not a built-in type and needs a path");
    ERR_IS("scrape-configs:\n  - job-name: a\n    profiles:\n      wall:\n",
           "t.yaml:4:7: profile \"wall\" is not a built-in type and needs a path");
    ERR_IS("scrape-configs:\n  - job-name: a\n    profiles:\n      cpu: {}\n"
           "      process_cpu: {}\n",
           "t.yaml:5:7: profile \"process_cpu\" declared twice (as \"cpu\" and \"process_cpu\")");
    ERR_IS("scrape-configs:\n  - job-name: a\n    profiles:\n      my-prof: {path: /x}\n",
           "t.yaml:4:7: custom profile name \"my-prof\" must match [a-zA-Z_][a-zA-Z0-9_]*");
    ERR_IS("scrape-configs:\n  - job-name: a\n    profiles: [cpu]\n",
           "t.yaml:3:15: expected a mapping, got a list");
    ERR_IS("scrape-configs:\n  - job-name: a\n    profiles: {cpu: 1}\n",
           "t.yaml:3:21: expected a mapping, got \"1\"");
}

TEST(relabel_rules)
{
    struct cfg *c = LOAD_OK("scrape-configs:\n  - job-name: a\n    relabel-configs:\n"
                            "      - action: keep\n        source-labels: [x]\n        regex:\n"
                            "      - {action: keep, source-labels: [x], regex: ''}\n"
                            "      - {action: keep, source-labels: [x], regex: a.*}\n"
                            "      - {action: labelmap, regex: __meta_(.+), replacement: "
                            "'${1}_x'}\n");
    const struct scrape_job_cfg *s = &c->scrape[0];

    ASSERT_EQ(s->n_relabel, 4);
    ASSERT_TRUE(s->relabel[0].regex_null);
    ASSERT_NULL(s->relabel[0].separator);
    ASSERT_FALSE(s->relabel[1].regex_null);
    ASSERT_STR_EQ(s->relabel[1].regex, "");
    ASSERT_STR_EQ(s->relabel[2].regex, "a.*");
    ASSERT_FALSE(s->relabel[2].regex_null);
    ASSERT_NULL(s->relabel[3].source_labels);
    ASSERT_NULL(s->relabel[3].target_label);
    /* ${1} is a regex group, not an environment variable. */
    ASSERT_STR_EQ(s->relabel[3].replacement, "${1}_x");
    cfg_free(c);

    ERR_IS("scrape-configs:\n  - job-name: a\n    relabel-configs:\n"
           "      - {action: keep, regex: x}\n"
           "      - action: hashmod\n        source-labels: [__address__]\n"
           "        target-label: __tmp_hash\n",
           "t.yaml:5:9: relabel config 2 of job \"a\": relabel configuration for hashmod requires "
           "non-zero modulus");
    ERR_IS("scrape-configs:\n  - job-name: a\n    relabel-configs:\n      - action: explode\n",
           "t.yaml:4:9: relabel config 1 of job \"a\": unknown relabel action \"explode\"");
    ERR_IS("scrape-configs:\n  - job-name: a\n    relabel-configs:\n      - sourcelabels: [a]\n",
           "t.yaml:4:9: unknown key \"sourcelabels\" in relabel config");
    ERR_IS("scrape-configs:\n  - job-name: a\n    relabel-configs:\n      - {modulus: x}\n",
           "t.yaml:4:19: expected a non-negative integer, got \"x\"");
}

TEST(conflicting_auth)
{
    ERR_IS("scrape-configs:\n  - job-name: a\n    basic-auth: {username: u}\n"
           "    bearer-token: t\n",
           "t.yaml:4:5: at most one of basic-auth, bearer-token, bearer-token-file, "
           "authorization and oauth2 may be given in scrape config (\"bearer-token\" conflicts "
           "with \"basic-auth\")");
    ERR_IS("remote-write:\n  - url: http://a\n    bearer_token: t\n    bearer-token-file: /f\n",
           "t.yaml:4:5: at most one of basic-auth, bearer-token, bearer-token-file, "
           "authorization and oauth2 may be given in remote-write (\"bearer-token-file\" "
           "conflicts with \"bearer-token\")");
    ERR_IS("remote-write:\n  - url: http://a\n    basic-auth: {username: u, password: p,\n"
           "                 password-file: /f}\n",
           "t.yaml:4:18: basic-auth takes password or password-file, not both");
}

#define JOB0 "scrape-configs:\n  - job-name: a\n"

/* Prometheus' common HTTP client settings, in every place a client is
 * configured, with Prometheus' snake_case spellings. */
TEST(http_client_settings)
{
    struct cfg *c =
        (fixtures(),
         LOAD_OK("scrape-configs:\n"
                 "  - job-name: a\n"
                 "    static-configs: [{targets: [h:6060]}]\n"
                 "    authorization: {credentials-file: /cred}\n"
                 "    http_headers:\n"
                 "      X-One: {values: [a, b], secrets: [s], files: [/f]}\n"
                 "      X-Two: {values: [c]}\n"
                 "    proxy_url: http://127.0.0.1:3128\n"
                 "    no_proxy: 127.0.0.2,localhost\n"
                 "    proxy_connect_header: {Proxy-Authorization: [Basic eDp5]}\n"
                 "    tls_config: {ca: \"${TEST_CA_PEM}\", cert: \"${TEST_CA_PEM}\", key: PEMKEY,\n"
                 "                 min_version: TLS12,\n"
                 "                 max_version: TLS13}\n"
                 "remote-write:\n"
                 "  - url: https://127.0.0.1:4040\n"
                 "    oauth2:\n"
                 "      client_id: id\n"
                 "      client_secret_file: /secret\n"
                 "      token_url: http://127.0.0.1:9/token\n"
                 "      scopes: [a, b]\n"
                 "      endpoint_params: {audience: x}\n"
                 "      tls_config: {insecure_skip_verify: true}\n"
                 "      proxy_from_environment: true\n"
                 "    proxy-from-environment: true\n"));
    const struct net_http_cfg *h = &c->scrape[0].http, *r = &c->remote[0].http;
    struct net_http_cfg copy;

    ASSERT_STR_EQ(h->authorization->type, "Bearer");
    ASSERT_STR_EQ(h->authorization->credentials_file, "/cred");
    ASSERT_EQ(h->n_http_headers, 2);
    ASSERT_STR_EQ(h->http_headers[0].name, "X-One");
    ASSERT_EQ(h->http_headers[0].n_values, 2);
    ASSERT_STR_EQ(h->http_headers[0].values[1], "b");
    ASSERT_STR_EQ(h->http_headers[0].secrets[0], "s");
    ASSERT_STR_EQ(h->http_headers[0].files[0], "/f");
    ASSERT_STR_EQ(h->http_headers[1].values[0], "c");
    ASSERT_STR_EQ(h->no_proxy, "127.0.0.2,localhost");
    ASSERT_EQ(h->n_proxy_connect_header, 1);
    ASSERT_STR_EQ(h->proxy_connect_header[0].key, "Proxy-Authorization");
    ASSERT_STR_EQ(h->proxy_connect_header[0].values[0], "Basic eDp5");
    ASSERT_STR_EQ(h->tls.ca, test_ca_pem);
    ASSERT_STR_EQ(h->tls.key, "PEMKEY");
    ASSERT_EQ(net_tls_version(h->tls.min_version), NET_TLS12);
    ASSERT_EQ(net_tls_version(h->tls.max_version), NET_TLS13);
    ASSERT_TRUE(r->proxy_from_environment);
    ASSERT_STR_EQ(r->oauth2->client_id, "id");
    ASSERT_STR_EQ(r->oauth2->client_secret_file, "/secret");
    ASSERT_STR_EQ(r->oauth2->token_url, "http://127.0.0.1:9/token");
    ASSERT_EQ(r->oauth2->n_scopes, 2);
    ASSERT_STR_EQ(r->oauth2->endpoint_params[0].key, "audience");
    ASSERT_TRUE(r->oauth2->tls.insecure_skip_verify);
    ASSERT_TRUE(r->oauth2->proxy_from_environment);

    /* The deep copy owners keep past the document. */
    ASSERT_EQ(net_http_cfg_copy(&copy, h), 0);
    ASSERT_TRUE(copy.http_headers[0].values[1] != h->http_headers[0].values[1]);
    ASSERT_STR_EQ(copy.http_headers[0].values[1], "b");
    ASSERT_STR_EQ(copy.proxy_connect_header[0].values[0], "Basic eDp5");
    ASSERT_STR_EQ(copy.tls.key, "PEMKEY");
    ASSERT_STR_EQ(copy.authorization->credentials_file, "/cred");
    net_http_cfg_done(&copy);
    ASSERT_EQ(net_http_cfg_copy(&copy, r), 0);
    ASSERT_STR_EQ(copy.oauth2->endpoint_params[0].value, "x");
    ASSERT_STR_EQ(copy.oauth2->scopes[1], "b");
    net_http_cfg_done(&copy);

    c = LOAD_OK("scrape-configs:\n  - job-name: k\n    kubernetes-sd-configs:\n"
                "      - api-server: https://127.0.0.1:6443\n"
                "        authorization: {type: Token, credentials: abc}\n"
                "        tls-config: {min-version: TLS13}\n");
    ASSERT_STR_EQ(c->scrape[0].sd.k8s_sd[0].http.authorization->type, "Token");

    /* Alloy's form: name -> list of secrets (or one). */
    c = LOAD_OK("remote-write:\n  - url: http://127.0.0.1:4040\n"
                "    http_headers: {X-A: [a, b], X-B: c, X-C: {values: [d]}}\n");
    h = &c->remote[0].http;
    ASSERT_EQ(h->n_http_headers, 3);
    for (unsigned i = 0; i < 3; i++) {
        const struct net_header_cfg *e = &h->http_headers[i];

        if (strcmp(e->name, "X-A") == 0) {
            ASSERT_EQ(e->n_secrets, 2);
            ASSERT_STR_EQ(e->secrets[1], "b");
        } else if (strcmp(e->name, "X-B") == 0) {
            ASSERT_EQ(e->n_secrets, 1);
            ASSERT_STR_EQ(e->secrets[0], "c");
        } else {
            ASSERT_STR_EQ(e->name, "X-C");
            ASSERT_STR_EQ(e->values[0], "d");
        }
    }
    ERR_IS(JOB0 "    http-headers: {Host: [x]}\n",
           "t.yaml:3:20: setting header \"Host\" is not allowed");
}

TEST(http_client_settings_refused)
{
#define JOB "scrape-configs:\n  - job-name: a\n"
    /* One way to authenticate, as Prometheus. */
    ERR_IS(JOB "    authorization: {credentials: x}\n    bearer-token: y\n",
           "t.yaml:3:5: at most one of basic-auth, bearer-token, bearer-token-file, "
           "authorization and oauth2 may be given in scrape config (\"authorization\" "
           "conflicts with \"bearer-token\")");
    ERR_IS(JOB "    basic-auth: {username: u}\n    oauth2: {client-id: i, token-url: "
               "http://127.0.0.1/t}\n",
           "t.yaml:4:5: at most one of basic-auth, bearer-token, bearer-token-file, "
           "authorization and oauth2 may be given in scrape config (\"oauth2\" conflicts with "
           "\"basic-auth\")");
    ERR_IS(JOB "    authorization: {type: basic, credentials: x}\n",
           "t.yaml:3:27: authorization type cannot be \"Basic\": use basic-auth instead");
    ERR_IS(JOB "    authorization: {credentials: x, credentials_file: /f}\n",
           "t.yaml:3:37: at most one of credentials and credentials-file may be given in "
           "authorization");
    /* CR or LF would end the header line: refused, and the value not quoted. */
    ERR_IS(JOB "    authorization: {credentials: \"sec\\r\\nX: y\"}\n",
           "t.yaml:3:34: credentials in authorization must not contain CR or LF");
    ERR_IS(JOB "    bearer-token: \"sec\\nret\"\n",
           "t.yaml:3:19: bearer-token in scrape config must not contain CR or LF");
    ERR_IS(JOB "    http-headers: {X-A: {secrets: [\"sec\\nret\"]}}\n",
           "t.yaml:3:36: secrets of header \"X-A\" must not contain CR or LF");
    ERR_IS("remote-write:\n  - url: http://a\n    http_headers: {X-A: {values: [\"a\\rb\"]}}\n",
           "t.yaml:3:35: values of header \"X-A\" must not contain CR or LF");
    /* Reserved headers, whatever their case. */
    ERR_IS(JOB "    http-headers: {authorization: {values: [x]}}\n",
           "t.yaml:3:20: setting header \"authorization\" is not allowed");
    ERR_IS(JOB "    http-headers: {User-Agent: {values: [x]}}\n",
           "t.yaml:3:20: setting header \"User-Agent\" is not allowed");
    ERR_IS(JOB "    http-headers: {\"X A\": {values: [x]}}\n",
           "t.yaml:3:20: \"X A\" is not a valid header name");
    /* Proxy combinations, as Prometheus. */
    ERR_IS(JOB "    proxy-url: http://127.0.0.1:3128\n    proxy-from-environment: true\n",
           "t.yaml:4:5: proxy-from-environment and proxy-url cannot both be given in scrape "
           "config");
    ERR_IS(JOB "    no-proxy: localhost\n",
           "t.yaml:3:5: no-proxy needs proxy-url in scrape config");
    ERR_IS(JOB "    proxy-from-environment: true\n    no-proxy: localhost\n",
           "t.yaml:4:5: no-proxy cannot be given with proxy-from-environment in scrape config "
           "(the environment's NO_PROXY applies)");
    ERR_IS(JOB "    proxy-connect-header: {X-A: b}\n",
           "t.yaml:3:5: proxy-connect-header needs proxy-url or proxy-from-environment in "
           "scrape config");
    ERR_IS(JOB "    proxy-url: \"http://[::1\"\n",
           "t.yaml:3:16: invalid proxy-url in scrape config: Bad IPv6 address");
    /* TLS pairs and versions. */
    ERR_IS(JOB "    tls-config: {ca: x, ca-file: /f}\n",
           "t.yaml:3:25: at most one of ca and ca-file may be given in tls-config");
    ERR_IS(JOB "    tls-config: {cert: x}\n",
           "t.yaml:3:18: a client certificate needs key or key-file in tls-config");
    ERR_IS(JOB "    tls-config: {key-file: /k}\n",
           "t.yaml:3:18: a client key needs cert or cert-file in tls-config");
    ERR_IS(JOB "    tls-config: {min-version: TLS13, max-version: TLS12}\n",
           "t.yaml:3:51: max-version (TLS12) must not be lower than min-version (TLS13) in "
           "tls-config");
    ERR_STARTS(JOB "    tls-config: {min-version: TLS14}\n", "t.yaml:3:31: ");
    /* oauth2. */
    ERR_IS(JOB "    oauth2: {client-id: i}\n", "t.yaml:3:13: oauth2 needs token-url");
    ERR_IS(JOB "    oauth2: {token-url: http://127.0.0.1/t}\n",
           "t.yaml:3:13: oauth2 needs client-id");
    ERR_IS(JOB "    oauth2: {client-id: i, token-url: \"ftp://x\"}\n",
           "t.yaml:3:39: invalid token-url in oauth2: the scheme must be http or https");
    ERR_IS(JOB "    oauth2: {client-id: i, token-url: http://h/t, client-secret: s,\n"
               "             client-secret-file: /f}\n",
           "t.yaml:4:14: at most one of client-secret and client-secret-file may be given in "
           "oauth2");
    ERR_IS(JOB "    oauth2: {client-id: i, token-url: http://h/t, no-proxy: x}\n",
           "t.yaml:3:51: no-proxy needs proxy-url in oauth2");
    /* The Kubernetes API connection takes them with api-server only. */
    ERR_IS("scrape-configs:\n  - job-name: k\n    kubernetes-sd-configs:\n"
           "      - kubeconfig-file: /k\n        http-headers: {X-A: {values: [b]}}\n",
           "t.yaml:5:9: \"http-headers\" cannot be combined with kubeconfig-file (the "
           "kubeconfig holds the client settings)");
#undef JOB
}

TEST(kubernetes_sd)
{
    struct cfg *c =
        (fixtures(), LOAD_OK("scrape-configs:\n  - job-name: k\n    kubernetes-sd-configs:\n"
                             "      - role: pod\n"
                             "        namespaces: {own-namespace: true, names: [a, b]}\n"
                             "        selectors: [{role: pod, field: spec.nodeName=n1}, "
                             "{role: node, label: x=y}]\n"
                             "        attach-metadata: {node: true, namespace: true}\n"
                             "      - api-server: https://k8s:6443\n"
                             "        bearer-token-file: /t\n"
                             "        tls-config: {ca-file: \"${T}/ca.pem\"}\n"
                             "      - kubeconfig_file: ${T}/kubeconfig\n"
                             "        service-account-dir: /sa\n"));
    const struct scrape_job_cfg *s = &c->scrape[0];
    const struct disc_k8s_cfg *k = &s->sd.k8s_sd[0];

    ASSERT_EQ(s->sd.n_k8s_sd, 3);
    ASSERT_STR_EQ(k->role, "pod");
    ASSERT_TRUE(k->own_namespace);
    ASSERT_EQ(k->n_namespaces, 2);
    ASSERT_STR_EQ(k->namespaces[1], "b");
    ASSERT_EQ(k->n_selectors, 2);
    ASSERT_STR_EQ(k->selectors[0].field, "spec.nodeName=n1");
    ASSERT_STR_EQ(k->selectors[1].role, "node");
    ASSERT_STR_EQ(k->selectors[1].label, "x=y");
    ASSERT_TRUE(k->attach_node);
    ASSERT_TRUE(k->attach_namespace);
    ASSERT_FALSE(k->http_set);
    ASSERT_TRUE(k->http.enable_http2);
    ASSERT_STR_EQ(k->service_account_dir, "/var/run/secrets/kubernetes.io/serviceaccount");
    k = &s->sd.k8s_sd[1];
    ASSERT_STR_EQ(k->role, "pod");
    ASSERT_STR_EQ(k->api_server, "https://k8s:6443");
    ASSERT_TRUE(k->http_set);
    ASSERT_STR_EQ(k->http.bearer_token_file, "/t");
    ASSERT_STR_EQ(k->http.tls.ca_file, fixture("ca.pem"));
    ASSERT_FALSE(k->own_namespace);
    k = &s->sd.k8s_sd[2];
    ASSERT_STR_EQ(k->kubeconfig_file, fixture("kubeconfig"));
    ASSERT_STR_EQ(k->service_account_dir, "/sa");
    ASSERT_FALSE(k->http_set);
    cfg_free(c);
}

TEST(kubernetes_sd_errors)
{
#define K8S "scrape-configs:\n  - job-name: k\n    kubernetes-sd-configs:\n"
    ERR_IS(K8S "      - api-server: https://k:6443\n        kubeconfig-file: /k\n",
           "t.yaml:5:9: api-server and kubeconfig-file cannot both be given in kubernetes-sd "
           "config");
    ERR_IS(K8S "      - api-server: https://k:6443\n        namespaces: {own-namespace: true}\n",
           "t.yaml:5:22: namespaces.own-namespace needs in-cluster access and cannot be used "
           "with api-server");
    ERR_IS(K8S "      - kubeconfig-file: /k\n        namespaces:\n          own_namespace: true\n",
           "t.yaml:6:11: namespaces.own-namespace needs in-cluster access and cannot be used "
           "with kubeconfig-file");
    ERR_IS(K8S "      - role: pod\n        tls-config: {ca-file: /ca}\n",
           "t.yaml:5:9: \"tls-config\" needs api-server in kubernetes-sd config (in-cluster "
           "access uses the service account)");
    ERR_IS(K8S "      - role: pod\n        follow-redirects: false\n",
           "t.yaml:5:9: \"follow-redirects\" needs api-server in kubernetes-sd config "
           "(in-cluster access uses the service account)");
    ERR_IS(K8S "      - kubeconfig-file: /k\n        bearer-token: x\n",
           "t.yaml:5:9: \"bearer-token\" cannot be combined with kubeconfig-file (the kubeconfig "
           "holds the client settings)");
    ERR_IS(K8S "      - api-server: k8s:6443\n",
           "t.yaml:4:21: expected a URL like https://host:6443, got \"k8s:6443\" (Unsupported "
           "URL scheme)");
    ERR_IS(K8S "      - api-server: \"https://[::1:6443\"\n",
           "t.yaml:4:21: expected a URL like https://host:6443, got \"https://[::1:6443\" (Bad "
           "IPv6 address)");
    ERR_IS(K8S "      - selectors: [{role: pod, label: a=b}, {role: pod, field: x=y}]\n",
           "t.yaml:4:46: duplicated selector role: pod");
    ERR_IS(K8S "      - selectors: [{label: a=b}]\n",
           "t.yaml:4:21: missing required key \"role\" in selector");
    /* Selectors are parsed as the API server parses them, at load. */
    cfg_free(LOAD_OK(K8S
                     "      - selectors:\n"
                     "          - {role: pod, label: 'app in (a, b),tier!=x,!canary,"
                     "app.kubernetes.io/name=web,n>5', field: 'spec.nodeName=n,status.phase!=X'}\n"
                     "          - {role: node, label: 'topology.kubernetes.io/zone', "
                     "field: 'metadata.name==a\\,b'}\n"));
    ERR_IS(K8S "      - selectors: [{role: pod, label: 'app=-bad'}]\n",
           "t.yaml:4:40: invalid label selector \"app=-bad\": invalid label value \"-bad\"");
    ERR_IS(K8S "      - selectors: [{role: pod, label: 'app in ()'}]\n",
           "t.yaml:4:40: invalid label selector \"app in ()\": the set of values of in/notin "
           "cannot be empty");
    ERR_IS(K8S "      - selectors: [{role: pod, label: 'x=y,'}]\n",
           "t.yaml:4:40: invalid label selector \"x=y,\": invalid label key \"\"");
    ERR_IS(K8S "      - selectors: [{role: pod, field: spec.nodeName}]\n",
           "t.yaml:4:40: invalid field selector \"spec.nodeName\": can't understand "
           "\"spec.nodeName\"");
    ERR_IS(K8S "      - selectors: [{role: pod, field: 'a\\x=b'}]\n",
           "t.yaml:4:40: invalid field selector \"a\\x=b\": invalid escape in \"a\\x=b\"");
    ERR_IS(K8S "      - selectors: [{role: service}]\n",
           "t.yaml:4:28: expected one of pod, node, got \"service\"");
#undef K8S
}

/* The TLS files libcurl reads for every connection are read at load: a
 * missing, unreadable or (for a CA) certificate-less one is refused at its
 * key, in every place a tls-config is written. */
TEST(tls_files_checked_at_load)
{
#define JOB "scrape-configs:\n  - job-name: a\n"
    char yaml[1024], want[1024];
    struct cfg *c;

    fixtures();
    ERR_IS(JOB "    tls-config: {ca-file: /nonexistent/ca.pem}\n",
           "t.yaml:3:18: ca-file \"/nonexistent/ca.pem\" in tls-config cannot be read: No such "
           "file or directory");
    ERR_IS("remote-write:\n  - url: https://127.0.0.1:4040\n"
           "    tls_config:\n      ca_file: /nonexistent/ca.pem\n",
           "t.yaml:4:7: ca-file \"/nonexistent/ca.pem\" in tls-config cannot be read: No such "
           "file or directory");
    ERR_IS(JOB "    tls-config: {ca-file: \"${T}/ca.pem\", cert-file: /nonexistent/c.pem,\n"
               "                 key-file: \"${T}/key.pem\"}\n",
           "t.yaml:3:42: cert-file \"/nonexistent/c.pem\" in tls-config cannot be read: No such "
           "file or directory");
    snprintf(want, sizeof(want),
             "t.yaml:4:18: key-file \"%s\" in tls-config cannot be read: "
             "Is a directory",
             fixtures());
    ERR_IS(JOB
           "    tls-config: {cert-file: \"${T}/cert.pem\",\n                 key-file: \"${T}\"}\n",
           want);
    snprintf(want, sizeof(want),
             "t.yaml:3:18: ca-file \"%s\" in tls-config holds no PEM "
             "certificate",
             fixture("notpem.pem"));
    ERR_IS(JOB "    tls-config: {ca-file: \"${T}/notpem.pem\"}\n", want);
    /* oauth2's own client and the Kubernetes API connection. */
    ERR_IS(JOB "    oauth2:\n      client-id: i\n      token-url: https://127.0.0.1/t\n"
               "      tls-config: {ca-file: /nonexistent/ca.pem}\n",
           "t.yaml:6:20: ca-file \"/nonexistent/ca.pem\" in tls-config cannot be read: No such "
           "file or directory");
    ERR_IS(JOB "    kubernetes-sd-configs:\n      - api-server: https://127.0.0.1:6443\n"
               "        tls-config: {key-file: /nonexistent/k.pem, cert: \"${TEST_CA_PEM}\"}\n",
           "t.yaml:5:22: key-file \"/nonexistent/k.pem\" in tls-config cannot be read: No such "
           "file or directory");
    /* Inline PEM: the value is never quoted (a key beside it may be a secret). */
    ERR_IS(JOB "    tls-config: {ca: not a certificate}\n",
           "t.yaml:3:18: ca in tls-config is not PEM: expected one or more -----BEGIN "
           "CERTIFICATE----- blocks");
    ERR_IS(JOB "    tls-config: {cert: \"-----BEGIN CERTIFICATE-----\\nAAAA\\n-----END "
               "CERTIFICATE-----\\n\", key: k}\n",
           "t.yaml:3:18: cert in tls-config is not PEM: expected one or more -----BEGIN "
           "CERTIFICATE----- blocks");
    /* What exists loads, relative paths included (the process's directory,
     * as libcurl opens them). */
    snprintf(yaml, sizeof(yaml),
             JOB
             "    tls-config: {ca-file: \"${T}/ca.pem\", cert-file: "
             "\"${T}/cert.pem\", key-file: \"${T}/key.pem\"}\n    oauth2:\n      client-id: i\n"
             "      token-url: https://127.0.0.1/t\n      tls-config: {ca: \"${TEST_CA_PEM}\"}\n");
    c = LOAD_OK(yaml);
    ASSERT_STR_EQ(c->scrape[0].http.oauth2->tls.ca, test_ca_pem);
    cfg_free(c);
    ASSERT_EQ(chdir(fixtures()), 0);
    cfg_free(LOAD_OK(JOB "    tls-config: {ca-file: ca.pem}\n"));
    ASSERT_EQ(chdir("/"), 0);
    ERR_STARTS(JOB "    tls-config: {ca-file: ca.pem}\n", "t.yaml:3:18: ca-file \"ca.pem\"");
    /* Secret files are re-read at run time and may appear after start
     * (net/secret.c): they are not required at load. */
    cfg_free(LOAD_OK(JOB
                     "    basic-auth: {username: u, password-file: /nonexistent/p}\n"
                     "    http-headers: {X-A: {files: [/nonexistent/h]}}\n"
                     "  - job-name: b\n    bearer-token-file: /nonexistent/t\n"
                     "  - job-name: c\n    authorization: {credentials-file: /nonexistent/c}\n"
                     "  - job-name: d\n    oauth2: {client-id: i, token-url: https://127.0.0.1/t,"
                     " client-secret-file: /nonexistent/s}\n"));
#undef JOB
}

/* A kubeconfig-file is read and parsed at load, as discovery will; the
 * in-cluster environment is not required (a pod's configuration checks
 * anywhere). */
TEST(kubeconfig_checked_at_load)
{
#define K8S "scrape-configs:\n  - job-name: k\n    kubernetes-sd-configs:\n"
    char want[1024];

    fixtures();
    ERR_IS(K8S "      - kubeconfig-file: /nonexistent/kubeconfig\n",
           "t.yaml:4:9: kubeconfig /nonexistent/kubeconfig: No such file or directory");
    snprintf(want, sizeof(want), "t.yaml:4:9: kubeconfig %s: ", fixture("kubeconfig-broken"));
    ERR_STARTS(K8S "      - kubeconfig_file: ${T}/kubeconfig-broken\n", want);
    snprintf(want, sizeof(want), "t.yaml:4:9: kubeconfig %s: current-context (unset) not found",
             fixture("kubeconfig-nocontext"));
    ERR_IS(K8S "      - kubeconfig-file: ${T}/kubeconfig-nocontext\n", want);
    snprintf(want, sizeof(want),
             "t.yaml:4:9: kubeconfig %s: certificate-authority %s cannot "
             "be read: No such file or directory",
             fixture("kubeconfig-noca"), fixture("no.pem"));
    ERR_IS(K8S "      - kubeconfig-file: ${T}/kubeconfig-noca\n", want);
    snprintf(want, sizeof(want),
             "t.yaml:4:9: kubeconfig %s: certificate-authority-data is not "
             "base64",
             fixture("kubeconfig-badb64"));
    ERR_IS(K8S "      - kubeconfig-file: ${T}/kubeconfig-badb64\n", want);
    /* Clustering's kubernetes block is the same section. */
    ERR_IS("clustering:\n  enabled: true\n  kubernetes:\n"
           "    kubeconfig-file: /nonexistent/kubeconfig\n"
           "    selectors: [{role: pod, label: app=proflet}]\n",
           "t.yaml:4:5: kubeconfig /nonexistent/kubeconfig: No such file or directory");
    /* A good one (its token file is re-read at run time: not required),
     * and in-cluster access without the in-cluster environment. */
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    cfg_free(LOAD_OK(K8S "      - kubeconfig-file: ${T}/kubeconfig\n      - role: pod\n"
                         "        namespaces: {own-namespace: true}\n"));
#undef K8S
}

static struct cfg *load_seed(const char *name)
{
    char err[1024] = "", rel[256];
    struct cfg *c = NULL;

    snprintf(rel, sizeof(rel), "seeds/%s", name);
    if (cfg_load_file(test_data_path(rel), &c, err, sizeof(err)) != 0)
        test__fail(__FILE__, __LINE__, "seed %s: %s", name, err);
    return c;
}

TEST(seed_001_static)
{
    struct cfg *c = load_seed("001_static.yaml");
    const struct scrape_job_cfg *s = &c->scrape[0];

    ASSERT_EQ(c->n_scrape, 1);
    ASSERT_STR_EQ(s->job_name, "pyroscope");
    ASSERT_U64_EQ(s->interval_ms, 10000);
    ASSERT_U64_EQ(s->timeout_ms, 10000);
    ASSERT_EQ(n_enabled(s), 5);
    ASSERT_STR_EQ(s->sd.static_configs[0].application, "my-application-name");
    ASSERT_STR_EQ(s->sd.static_configs[0].spy_name, "gospy");
    ASSERT_STR_EQ(s->sd.static_configs[0].targets[0], "hostname:6060");
    ASSERT_STR_EQ(s->sd.static_configs[0].labels[0].key, "env");
    ASSERT_STR_EQ(s->sd.static_configs[0].labels[0].value, "dev");
    cfg_free(c);

    c = load_seed("001_interval.yaml");
    ASSERT_U64_EQ(c->scrape[0].interval_ms, 60000);
    ASSERT_U64_EQ(c->scrape[0].timeout_ms, 10000);
    cfg_free(c);
}

TEST(seed_001_delta_params)
{
    struct cfg *c = load_seed("001_delta_params.yaml");
    const struct scrape_job_cfg *s = &c->scrape[0];

    ASSERT_U64_EQ(s->interval_ms, 60000);
    ASSERT_U64_EQ(s->timeout_ms, 60000);
    ASSERT_TRUE(s->use_delta_profiles);
    ASSERT_EQ(n_enabled(s), 5);
    ASSERT_STR_EQ(prof(s, "process_cpu")->params[0].key, "seconds");
    ASSERT_STR_EQ(prof(s, "process_cpu")->params[0].values[0], "30");
    ASSERT_STR_EQ(prof(s, "block")->params[0].values[0], "30");
    ASSERT_STR_EQ(prof(s, "mutex")->params[0].values[0], "30");
    ASSERT_STR_EQ(prof(s, "memory")->path, "/debug/pprof/delta_heap");
    ASSERT_STR_EQ(prof(s, "block")->path, "/debug/pprof/delta_block");
    ASSERT_EQ(prof(s, "mutex")->kind, SCRAPE_KIND_DELTA);
    cfg_free(c);
}

TEST(seed_001_godeltaprof)
{
    struct cfg *c = load_seed("001_godeltaprof.yaml");
    const struct scrape_job_cfg *s = &c->scrape[0];

    ASSERT_STR_EQ(s->job_name, "pyroscope1");
    ASSERT_EQ(n_enabled(s), 4);
    ASSERT_FALSE(prof(s, "goroutine")->enabled);
    ASSERT_STR_EQ(prof(s, "memory")->path, "/debug/pprof/delta_heap");
    ASSERT_STR_EQ(prof(s, "mutex")->path, "/debug/pprof/delta_mutex");
    ASSERT_STR_EQ(prof(s, "block")->path, "/debug/pprof/delta_block");
    cfg_free(c);
}

TEST(seed_001_kubernetes_wrapped)
{
    struct cfg *c = load_seed("001_kubernetes_wrapped.yaml");
    const struct scrape_job_cfg *s = &c->scrape[0];

    ASSERT_STR_EQ(c->log_level, "debug");
    ASSERT_STR_EQ(s->job_name, "kubernetes-pods");
    ASSERT_EQ(n_enabled(s), 2);
    ASSERT_TRUE(prof(s, "process_cpu")->enabled);
    ASSERT_TRUE(prof(s, "memory")->enabled);
    ASSERT_EQ(s->sd.n_k8s_sd, 1);
    ASSERT_STR_EQ(s->sd.k8s_sd[0].role, "pod");
    ASSERT_EQ(s->n_relabel, 9);
    ASSERT_STR_EQ(s->relabel[0].action, "keep");
    ASSERT_STR_EQ(s->relabel[0].regex, "true");
    ASSERT_STR_EQ(s->relabel[3].regex, "([^:]+)(?::\\d+)?;(\\d+)");
    ASSERT_STR_EQ(s->relabel[3].replacement, "$1:$2");
    ASSERT_EQ(s->relabel[3].n_source_labels, 2);
    ASSERT_STR_EQ(s->relabel[8].replacement, "__profile_$1");
    cfg_free(c);
}

TEST(seed_002)
{
    struct cfg *c = load_seed("002_static_two_apps.yaml");
    const struct scrape_job_cfg *s = &c->scrape[0];

    ASSERT_STR_EQ(s->job_name, "Pyroscope");
    ASSERT_EQ(s->sd.n_static, 2);
    ASSERT_STR_EQ(s->sd.static_configs[1].application, "checkoutService.otel-demo");
    ASSERT_STR_EQ(s->sd.static_configs[1].targets[0], "example-checkoutservice.otel-demo.svc:6060");
    ASSERT_EQ(n_enabled(s), 5);
    cfg_free(c);

    c = load_seed("002_kubernetes_pods.yaml");
    s = &c->scrape[0];
    ASSERT_EQ(s->n_relabel, 9);
    ASSERT_STR_EQ(s->relabel[0].source_labels[0],
                  "__meta_kubernetes_pod_annotation_Pyroscope_io_scrape");
    ASSERT_EQ(n_enabled(s), 2);
    cfg_free(c);
}

TEST(seed_004_alloy)
{
    struct cfg *c = load_seed("004_alloy_kubernetes.yaml");
    const struct scrape_job_cfg *s = &c->scrape[0];

    ASSERT_EQ(s->n_relabel, 10);
    ASSERT_STR_EQ(s->relabel[5].target_label, "service_name");
    ASSERT_STR_EQ(s->relabel[6].target_label, "__spy_name__");
    ASSERT_STR_EQ(s->relabel[8].regex, "(.+?)(?::\\d+)?;(\\d+)");
    ASSERT_EQ(n_enabled(s), 3);
    ASSERT_TRUE(prof(s, "process_cpu")->enabled);
    ASSERT_TRUE(prof(s, "memory")->enabled);
    ASSERT_TRUE(prof(s, "goroutine")->enabled);
    ASSERT_FALSE(prof(s, "block")->enabled);
    ASSERT_EQ(c->n_remote, 1);
    ASSERT_STR_EQ(c->remote[0].url, "https://example.invalid/profile");
    ASSERT_EQ(c->remote[0].protocol, CFG_PROTO_PUSH);
    ASSERT_STR_EQ(c->remote[0].name, "example.invalid");
    cfg_free(c);
}

/* The complete examples of docs/config.md (each follows a marker comment)
 * must load, and the documented default must be the embedded one. Files
 * they name under /etc/proflet/ are the fixtures' (TLS files are read at
 * load), as a pod's mounted files would be. */
/* `text` with every `prefix` replaced by the fixtures' directory and a
 * slash; the result lives until the next call. */
static const char *with_fixtures(const char *text, const char *prefix)
{
    static char out[16384];
    const char *p, *q;
    size_t n = 0;

    for (p = text; (q = strstr(p, prefix)) != NULL; p = q + strlen(prefix))
        n += (size_t)snprintf(out + n, sizeof(out) - n, "%.*s%s/", (int)(q - p), p, fixtures());
    snprintf(out + n, sizeof(out) - n, "%s", p);
    ASSERT_LT(strlen(out), sizeof(out) - 1);
    return out;
}

TEST(docs_examples_load)
{
    static const char marker[] = "<!-- loaded by tests/agent/test_config.c -->\n```yaml\n";
    char path[4096], *doc, *p;
    FILE *f;
    long n;
    int found = 0, default_seen = 0;
    const char *def;

    snprintf(path, sizeof(path), "%s", test_data_path("../../docs/config.md"));
    f = fopen(path, "rb");
    ASSERT_NOT_NULL(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    doc = calloc(1, (size_t)n + 1);
    ASSERT_EQ(fread(doc, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    def = strstr(doc, "## The embedded default");
    ASSERT_NOT_NULL(def);
    setenv("NODE_NAME", "node-1", 1);
    for (p = strstr(doc, marker); p; p = strstr(p, marker)) {
        char *body = p + strlen(marker), *end = strstr(body, "```");
        struct cfg *c;

        ASSERT_NOT_NULL(end);
        *end = '\0';
        c = LOAD_OK(with_fixtures(body, "/etc/proflet/"));
        ASSERT_GE(c->n_scrape, 1);
        if (p > def && !default_seen) { /* the embedded default, minus its comment line */
            ASSERT_STR_EQ(body, strchr(agent_default_config, '\n') + 1);
            default_seen = 1;
        }
        cfg_free(c);
        found++;
        p = end + 1;
    }
    ASSERT_EQ(found, 9);
    ASSERT_EQ(default_seen, 1);
    free(doc);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
