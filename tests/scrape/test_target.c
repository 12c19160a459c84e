/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for scrape/target.c: PopulateLabels-style checks (address,
 * default ports, __port__, instance, UTF-8, __meta_*), per-target profile
 * overrides, query parameters set once, duration profiles, service_name
 * inference, sent labels, de-duplication keys, the Prometheus scrape-offset
 * test vector (docs/design.md "Targets, labels and scheduling"), JSON output, and the seed 001
 * kubernetes-pods rules. Scrape configs are built by hand in C. */
#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "scrape/internal.h"
#include "test.h"
#include "tests/relabel/seed_pods_rules.h"

static struct scrape_profile_cfg go_profiles[] = {
    { .name = "process_cpu",
      .path = "/debug/pprof/profile",
      .kind = SCRAPE_KIND_DURATION,
      .enabled = true,
      .delta = true,
      .send_name = "process_cpu" },
    { .name = "memory",
      .path = "/debug/pprof/allocs",
      .kind = SCRAPE_KIND_CUMULATIVE_MEMORY,
      .enabled = true,
      .send_name = "memory" },
    { .name = "goroutine",
      .path = "/debug/pprof/goroutine",
      .kind = SCRAPE_KIND_GAUGE,
      .enabled = true,
      .send_name = "goroutine" },
    { .name = "mutex",
      .path = "/debug/pprof/mutex",
      .kind = SCRAPE_KIND_CUMULATIVE_CONTENTION,
      .enabled = true,
      .send_name = "mutex" },
    { .name = "block",
      .path = "/debug/pprof/block",
      .kind = SCRAPE_KIND_CUMULATIVE_CONTENTION,
      .enabled = true,
      .send_name = "block" },
    { .name = "fgprof",
      .path = "/debug/fgprof",
      .kind = SCRAPE_KIND_DURATION,
      .enabled = false,
      .delta = true,
      .send_name = "fgprof" },
    { .name = "godeltaprof_memory",
      .path = "/debug/pprof/delta_heap",
      .kind = SCRAPE_KIND_DELTA,
      .enabled = false,
      .send_name = "memory" },
};
#define N_GO_PROFILES (sizeof(go_profiles) / sizeof(go_profiles[0]))

static void scrape_init(struct scrape_job_cfg *sc)
{
    memset(sc, 0, sizeof(*sc));
    sc->job_name = "pprof";
    sc->interval_ms = 15000;
    sc->timeout_ms = 10000;
    sc->scheme = "http";
    sc->profiles = go_profiles;
    sc->n_profiles = N_GO_PROFILES;
}

static void build(const struct scrape_job_cfg *sc, const struct relabel_rules *rules,
                  const char *const *kv, struct target_result *out)
{
    struct scrape_job_cfg job = *sc;
    struct labels ls = LABELS_INIT;

    for (size_t i = 0; kv[i]; i += 2)
        ASSERT_EQ(labels_set(&ls, kv[i], kv[i + 1]), 0);
    job.rules = (struct relabel_rules *)rules;
    ASSERT_EQ(target_build(&job, &ls, out), 0);
    labels_done(&ls);
}

/* One compiled rule: `action` on `source` (regex and target as given). */
static struct relabel_rules *one_rule(const char *source, const char *regex, const char *target,
                                      const char *action)
{
    char *src[] = { (char *)source };
    struct relabel_cfg c = { .source_labels = src,
                             .n_source_labels = 1,
                             .regex = (char *)regex,
                             .target_label = (char *)target,
                             .action = (char *)action };
    struct relabel_rules *rs = NULL;
    char err[256];

    ASSERT_EQ(relabel_rules_new(&c, 1, RELABEL_SCHEME_UNSET, &rs, err, sizeof(err)), 0);
    return rs;
}

static const struct target_pair *pair(const struct target_result *r, const char *profile)
{
    for (size_t i = 0; i < r->n_pairs; i++)
        if (strcmp(r->pairs[i].profile->name, profile) == 0)
            return &r->pairs[i];
    return NULL;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;

    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* ---------------------------------------------------------------------- */

TEST(offset_vector_from_reference)
{
    struct scrape_profile_cfg one = { .name = "custom",
                                      .path = "/debug/pprof/profile",
                                      .kind = SCRAPE_KIND_GAUGE,
                                      .enabled = true,
                                      .send_name = "custom" };
    struct scrape_job_cfg sc;
    struct target_result r;
    uint64_t seed = scrape_offset_seed("node-1", NULL);
    struct labels empty = LABELS_INIT;

    ASSERT_U64_EQ(seed, 668727176696820463ULL);
    ASSERT_U64_EQ(scrape_offset_seed("node-1", &empty), 668727176696820463ULL);
    ASSERT_U64_EQ(target_offset_ns(316092016461882351ULL, seed, 15000000000ULL), 4015363840ULL);
    ASSERT_U64_EQ(target_offset_ns(316092016461882351ULL, 0, 15000000000ULL), 1461882351ULL);

    /* end to end: the §4 label set and URL come out of target_build */
    scrape_init(&sc);
    sc.profiles = &one;
    sc.n_profiles = 1;
    build(&sc, NULL, (const char *[]){ "__address__", "10.1.2.3:4040", NULL }, &r);
    ASSERT_NULL(r.error);
    ASSERT_EQ(r.n_pairs, 1);
    ASSERT_STR_EQ(r.pairs[0].url, "http://10.1.2.3:4040/debug/pprof/profile");
    ASSERT_U64_EQ(r.pairs[0].offset_hash, 316092016461882351ULL);
    ASSERT_U64_EQ(target_offset_ns(r.pairs[0].offset_hash, seed, 15000000000ULL), 4015363840ULL);
    target_result_done(&r);
}

TEST(offset_seed_includes_external_labels)
{
    struct labels ext = LABELS_INIT;

    ASSERT_EQ(labels_set(&ext, "cluster", "prod"), 0);
    ASSERT_NE(scrape_offset_seed("node-1", &ext), scrape_offset_seed("node-1", NULL));
    ASSERT_NE(scrape_offset_seed("node-2", NULL), scrape_offset_seed("node-1", NULL));
    labels_done(&ext);
}

TEST(first_delay_is_next_aligned_instant)
{
    /* brute-force oracle: the first t > now with t % interval == offset */
    static const uint64_t cases[][3] = { { 4, 15, 100 },  { 0, 15, 90 }, { 14, 15, 90 },
                                         { 10, 15, 100 }, { 3, 7, 0 },   { 6, 7, 6 },
                                         { 0, 1, 5 } };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t off = cases[i][0], iv = cases[i][1], now = cases[i][2], t = now + 1;

        while (t % iv != off)
            t++;
        ASSERT_U64_EQ(target_first_delay_ns(off, iv, now), t - now);
    }
    {
        uint64_t iv = 15000000000ULL, off = 4015363840ULL, now = 1700000000123456789ULL;
        uint64_t d = target_first_delay_ns(off, iv, now);

        ASSERT_GT(d, 0);
        ASSERT_LE(d, iv);
        ASSERT_U64_EQ((now + d) % iv, off);
    }
}

TEST(defaults_are_added_before_rules)
{
    struct scrape_job_cfg sc;
    struct target_result r;
    char *seconds[] = { "7", "8" };
    struct conf_param params[] = { { .key = "seconds", .values = seconds, .n_values = 2 } };

    scrape_init(&sc);
    sc.interval_ms = 90000;
    sc.path_prefix = "/app";
    sc.params = params;
    sc.n_params = 1;
    build(&sc, NULL, (const char *[]){ "__address__", "h:1", "job", "mine", NULL }, &r);
    ASSERT_STR_EQ(labels_get(&r.discovered, "job"), "mine"); /* not overwritten */
    ASSERT_STR_EQ(labels_get(&r.discovered, "__scheme__"), "http");
    ASSERT_STR_EQ(labels_get(&r.discovered, "__scrape_interval__"), "1m30s");
    ASSERT_STR_EQ(labels_get(&r.discovered, "__scrape_timeout__"), "10s");
    ASSERT_STR_EQ(labels_get(&r.discovered, "__profile_path_prefix__"), "/app");
    ASSERT_STR_EQ(labels_get(&r.discovered, "__param_seconds"), "7");
    ASSERT_NULL(labels_get(&r.discovered, "__metrics_path__"));
    ASSERT_STR_EQ(pair(&r, "memory")->url, "http://h:1/app/debug/pprof/allocs?seconds=7&seconds=8");
    target_result_done(&r);
}

TEST(address_rules)
{
    static const struct {
        const char *addr, *scheme, *port, *want_addr, *want_err;
    } v[] = {
        { "10.0.0.1:6060", "http", NULL, "10.0.0.1:6060", NULL },
        { "10.0.0.1", "http", NULL, "10.0.0.1:80", NULL },
        { "10.0.0.1", "https", NULL, "10.0.0.1:443", NULL },
        { "[fd00::1]", "http", NULL, "[fd00::1]:80", NULL },
        { "fd00::1", "http", NULL, "fd00::1", NULL }, /* cannot take a port: left alone */
        { "host", "ftp", NULL, NULL, "invalid scheme: \"ftp\"" },
        { "a/b", "http", NULL, NULL, "\"a/b\" is not a valid hostname" },
        { NULL, "http", NULL, NULL, "no address" },
        { "10.0.0.1:6060", "http", "4040", "10.0.0.1:4040", NULL },
        { "10.0.0.1", "https", "4040", "10.0.0.1:4040", NULL },
        { "[fd00::1]:80", "http", "4040", "[fd00::1]:4040", NULL },
    };

    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        struct scrape_job_cfg sc;
        struct target_result r;
        const char *kv[8];
        size_t k = 0;

        scrape_init(&sc);
        sc.scheme = (char *)v[i].scheme;
        if (v[i].addr) {
            kv[k++] = "__address__";
            kv[k++] = v[i].addr;
        }
        if (v[i].port) {
            kv[k++] = "__port__";
            kv[k++] = v[i].port;
        }
        kv[k++] = "x";
        kv[k++] = "y";
        kv[k] = NULL;
        build(&sc, NULL, kv, &r);
        if (v[i].want_err) {
            if (!r.error || strcmp(r.error, v[i].want_err) != 0)
                test__fail(__FILE__, __LINE__, "case %zu: error %s", i, r.error);
            ASSERT_EQ(r.n_pairs, 0);
        } else {
            if (r.error)
                test__fail(__FILE__, __LINE__, "case %zu: error %s", i, r.error);
            ASSERT_STR_EQ(labels_get(&r.labels, "__address__"), v[i].want_addr);
            ASSERT_STR_EQ(labels_get(&r.labels, "instance"), v[i].want_addr);
            ASSERT_EQ(r.n_pairs, 5);
        }
        target_result_done(&r);
    }
}

TEST(instance_meta_and_utf8)
{
    struct scrape_job_cfg sc;
    struct target_result r;

    scrape_init(&sc);
    build(&sc, NULL,
          (const char *[]){ "__address__", "h:1", "instance", "mine", "__meta_x", "1", "__tmp_y",
                            "2", NULL },
          &r);
    ASSERT_STR_EQ(labels_get(&r.labels, "instance"), "mine");
    ASSERT_NULL(labels_get(&r.labels, "__meta_x"));
    ASSERT_STR_EQ(labels_get(&r.labels, "__tmp_y"), "2"); /* other __ labels stay on the target */
    ASSERT_STR_EQ(labels_get(&r.discovered, "__meta_x"), "1");
    ASSERT_NULL(labels_get(&pair(&r, "memory")->labels, "__tmp_y"));
    target_result_done(&r);

    build(&sc, NULL, (const char *[]){ "__address__", "h:1", "a", "x\xff", NULL }, &r);
    ASSERT_STR_EQ(r.error, "invalid label value for \"a\": \"x\\xff\"");
    ASSERT_EQ(r.n_pairs, 0);
    target_result_done(&r);
}

TEST(bad_scrape_interval_label)
{
    struct relabel_rules *rs = one_rule("x", NULL, "__scrape_interval__", NULL);
    struct scrape_job_cfg sc;
    struct target_result r;

    scrape_init(&sc);
    build(&sc, rs, (const char *[]){ "__address__", "h:1", "x", "soon", NULL }, &r);
    ASSERT_STR_EQ(r.error, "error parsing scrape interval: not a valid duration string: \"soon\"");
    target_result_done(&r);
    build(&sc, rs, (const char *[]){ "__address__", "h:1", "x", "0s", NULL }, &r);
    ASSERT_STR_EQ(r.error, "scrape interval cannot be 0");
    target_result_done(&r);
    /* a relabeled interval drives the pairs */
    build(&sc, rs, (const char *[]){ "__address__", "h:1", "x", "1m", NULL }, &r);
    ASSERT_NULL(r.error);
    ASSERT_EQ(pair(&r, "process_cpu")->interval_ms, 60000);
    ASSERT_EQ(pair(&r, "process_cpu")->seconds, 59);
    target_result_done(&r);
    relabel_rules_free(rs);
}

TEST(dropped_target_is_silent)
{
    struct relabel_rules *rs = one_rule("keep_me", "yes", NULL, "keep");
    struct scrape_job_cfg sc;
    struct target_result r;
    struct buf b;

    scrape_init(&sc);
    build(&sc, rs, (const char *[]){ "__address__", "h:1", NULL }, &r);
    ASSERT_TRUE(r.dropped);
    ASSERT_NULL(r.error);
    ASSERT_EQ(r.n_pairs, 0);
    ASSERT_EQ(r.labels.n, 0);
    buf_init(&b, 1 << 20);
    ASSERT_EQ(target_result_json(&r, false, &b), 0);
    ASSERT_EQ(b.len, 0);
    ASSERT_EQ(target_result_json(&r, true, &b), 0);
    {
        json_object *o = json_tokener_parse(b.data), *v;

        ASSERT_NOT_NULL(o);
        ASSERT_TRUE(json_object_object_get_ex(o, "dropped", &v) && json_object_get_boolean(v));
        ASSERT_TRUE(json_object_object_get_ex(o, "labels", &v));
        ASSERT_EQ(json_object_object_length(v), 0);
        ASSERT_TRUE(json_object_object_get_ex(o, "discoveredLabels", &v));
        ASSERT_STR_EQ(json_object_get_string(json_object_object_get(v, "__address__")), "h:1");
        json_object_put(o);
    }
    buf_done(&b);
    target_result_done(&r);
    relabel_rules_free(rs);
}

TEST(json_shape_like_promtool)
{
    struct scrape_job_cfg sc;
    struct target_result r;
    struct buf b;
    json_object *o, *d, *l;

    scrape_init(&sc);
    build(&sc, NULL, (const char *[]){ "__address__", "h", "__meta_a", "1", NULL }, &r);
    buf_init(&b, 1 << 20);
    ASSERT_EQ(target_result_json(&r, false, &b), 0);
    o = json_tokener_parse(b.data);
    ASSERT_NOT_NULL(o);
    ASSERT_TRUE(json_object_object_get_ex(o, "discoveredLabels", &d));
    ASSERT_TRUE(json_object_object_get_ex(o, "labels", &l));
    ASSERT_STR_EQ(json_object_get_string(json_object_object_get(d, "__meta_a")), "1");
    ASSERT_STR_EQ(json_object_get_string(json_object_object_get(d, "job")), "pprof");
    ASSERT_STR_EQ(json_object_get_string(json_object_object_get(l, "__address__")), "h:80");
    ASSERT_STR_EQ(json_object_get_string(json_object_object_get(l, "instance")), "h:80");
    ASSERT_NULL(json_object_object_get(l, "__meta_a"));
    ASSERT_NULL(json_object_object_get(o, "error"));
    json_object_put(o);
    buf_done(&b);
    target_result_done(&r);
}

TEST(profile_overrides_by_canonical_name_or_alias)
{
    struct scrape_job_cfg sc;
    struct target_result r;

    scrape_init(&sc);
    build(&sc, NULL,
          (const char *[]){ "__address__", "h:1", "__profile_cpu_enabled", "false",
                            "__profile_fgprof_enabled", "true", "__profile_mem_path",
                            "/custom/heap", "__profile_goroutines_param_debug", "1",
                            "__profile_mutex_enabled", "maybe", NULL },
          &r);
    ASSERT_NULL(r.error);
    ASSERT_NULL(pair(&r, "process_cpu"));
    ASSERT_NOT_NULL(pair(&r, "fgprof"));
    ASSERT_NOT_NULL(pair(&r, "mutex")); /* not "true"/"false": the config decides */
    ASSERT_STR_EQ(pair(&r, "memory")->url, "http://h:1/custom/heap");
    ASSERT_STR_EQ(pair(&r, "goroutine")->url, "http://h:1/debug/pprof/goroutine?debug=1");
    ASSERT_STR_EQ(pair(&r, "block")->url, "http://h:1/debug/pprof/block");
    target_result_done(&r);
    build(&sc, NULL,
          (const char *[]){ "__address__", "h:1", "__profile_process_cpu_enabled", "false",
                            "__profile_godeltaprof_memory_enabled", "true", NULL },
          &r);
    ASSERT_NULL(pair(&r, "process_cpu"));
    ASSERT_STR_EQ(pair(&r, "godeltaprof_memory")->url, "http://h:1/debug/pprof/delta_heap");
    target_result_done(&r);
}

TEST(params_set_once_with_precedence)
{
    char *p30[] = { "30" }, *j10[] = { "10" }, *b1[] = { "1" }, *a2[] = { "2" },
         *sp[] = { "a b&c/" };
    struct conf_param prof_params[] = { { .key = "seconds", .values = p30, .n_values = 1 } };
    struct conf_param job_params[] = { { .key = "seconds", .values = j10, .n_values = 1 },
                                       { .key = "b", .values = b1, .n_values = 1 },
                                       { .key = "a", .values = a2, .n_values = 1 },
                                       { .key = "q", .values = sp, .n_values = 1 } };
    struct scrape_profile_cfg cpu = go_profiles[0];
    struct scrape_job_cfg sc;
    struct target_result r;

    cpu.params = prof_params;
    cpu.n_params = 1;
    scrape_init(&sc);
    sc.interval_ms = 60000; /* room for seconds=30 */
    sc.profiles = &cpu;
    sc.n_profiles = 1;
    /* profile params alone */
    build(&sc, NULL, (const char *[]){ "__address__", "h:1", NULL }, &r);
    ASSERT_STR_EQ(r.pairs[0].url, "http://h:1/debug/pprof/profile?seconds=30");
    ASSERT_EQ(r.pairs[0].seconds, 30);
    ASSERT_EQ(r.pairs[0].timeout_ms, 40000);
    target_result_done(&r);
    /* job params override, keys sorted, values escaped like url.Values */
    sc.params = job_params;
    sc.n_params = 4;
    build(&sc, NULL, (const char *[]){ "__address__", "h:1", NULL }, &r);
    ASSERT_STR_EQ(r.pairs[0].url, "http://h:1/debug/pprof/profile?a=2&b=1&q=a+b%26c%2F&seconds=10");
    target_result_done(&r);
    /* __param_seconds (here from the target) overrides the job */
    build(&sc, NULL, (const char *[]){ "__address__", "h:1", "__param_seconds", "20", NULL }, &r);
    ASSERT_EQ(count(r.pairs[0].url, "seconds="), 1);
    ASSERT_NOT_NULL(strstr(r.pairs[0].url, "seconds=20"));
    target_result_done(&r);
    /* and __profile_<alias>_param_seconds overrides everything */
    build(&sc, NULL,
          (const char *[]){ "__address__", "h:1", "__param_seconds", "20",
                            "__profile_cpu_param_seconds", "5", NULL },
          &r);
    ASSERT_EQ(count(r.pairs[0].url, "seconds="), 1);
    ASSERT_NOT_NULL(strstr(r.pairs[0].url, "seconds=5"));
    ASSERT_EQ(r.pairs[0].seconds, 5);
    ASSERT_EQ(r.pairs[0].timeout_ms, 15000);
    target_result_done(&r);

    /* Any pod owner can set these labels: a value that is not a whole
     * number from 1 to one second below the interval makes the target an
     * error (never an overflowing timeout, never a profile that ends
     * before it starts). */
    {
        static const char *const bad[] = { "99999999999",          "-1", "0", "60", "1e3", "5x",
                                           "184467440737095516160" };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            build(&sc, NULL,
                  (const char *[]){ "__address__", "h:1", "__profile_cpu_param_seconds", bad[i],
                                    NULL },
                  &r);
            if (!r.error || r.n_pairs != 0)
                test__fail(__FILE__, __LINE__, "seconds=\"%s\" accepted", bad[i]);
            ASSERT_NOT_NULL(strstr(r.error, "seconds must be a whole number"));
            target_result_done(&r);
        }
        build(&sc, NULL,
              (const char *[]){ "__address__", "h:1", "__profile_cpu_param_seconds", "59", NULL },
              &r);
        ASSERT_NULL(r.error);
        ASSERT_EQ(r.pairs[0].seconds, 59);
        target_result_done(&r);
    }
}

TEST(duration_profiles_get_seconds)
{
    struct scrape_job_cfg sc;
    struct target_result r;

    scrape_init(&sc);
    build(&sc, NULL, (const char *[]){ "__address__", "h:1", NULL }, &r);
    ASSERT_STR_EQ(pair(&r, "process_cpu")->url, "http://h:1/debug/pprof/profile?seconds=14");
    ASSERT_EQ(pair(&r, "process_cpu")->seconds, 14);
    ASSERT_EQ(pair(&r, "process_cpu")->timeout_ms, 24000);
    ASSERT_EQ(pair(&r, "memory")->seconds, 0);
    ASSERT_EQ(pair(&r, "memory")->timeout_ms, 10000);
    ASSERT_NULL(strchr(pair(&r, "memory")->url, '?')); /* seconds never leaks */
    target_result_done(&r);
    sc.interval_ms = 2000;
    sc.timeout_ms = 1000;
    build(&sc, NULL, (const char *[]){ "__address__", "h:1", NULL }, &r);
    ASSERT_EQ(pair(&r, "process_cpu")->seconds, 1);
    target_result_done(&r);
    /* A 1 s interval leaves no room for a 1 s profile (the loader refuses it
     * in a job; from a target's __scrape_interval__ it is the target's
     * error). */
    build(&sc, NULL, (const char *[]){ "__address__", "h:1", "__scrape_interval__", "1s", NULL },
          &r);
    ASSERT_NOT_NULL(r.error);
    ASSERT_NOT_NULL(strstr(r.error, "process_cpu: seconds must be a whole number"));
    ASSERT_EQ(r.n_pairs, 0);
    target_result_done(&r);
}

TEST(sent_labels)
{
    struct scrape_job_cfg sc;
    struct target_result r;
    const struct target_pair *p;
    char *s;

    scrape_init(&sc);
    go_profiles[6].enabled = true;
    build(&sc, NULL,
          (const char *[]){ "__address__", "h:1", "env", "dev", "__spy_name__", "gospy",
                            "service_name", "app", "__meta_k", "v", NULL },
          &r);
    go_profiles[6].enabled = false;
    p = pair(&r, "memory");
    s = labels_to_string(&p->labels);
    ASSERT_STR_EQ(s, "{__delta__=\"false\", __name__=\"memory\", env=\"dev\", instance=\"h:1\", "
                     "job=\"pprof\", pyroscope_spy=\"gospy\", service_name=\"app\"}");
    free(s);
    ASSERT_NULL(labels_get(&pair(&r, "process_cpu")->labels, "__delta__"));
    ASSERT_NULL(labels_get(&pair(&r, "goroutine")->labels, "__delta__"));
    ASSERT_STR_EQ(labels_get(&pair(&r, "mutex")->labels, "__delta__"), "false");
    ASSERT_STR_EQ(labels_get(&pair(&r, "godeltaprof_memory")->labels, "__name__"), "memory");
    ASSERT_STR_EQ(labels_get(&pair(&r, "godeltaprof_memory")->labels, "__delta__"), "false");
    target_result_done(&r);
}

/* profile-relabel-configs run over the labels a pair is sent with: a pair
 * they drop (or leave without __name__) is not built and is counted; the
 * others carry the rules' labels, and their de-duplication key follows. */
TEST(profile_rules_shape_and_drop_pairs)
{
    struct relabel_cfg cfgs[] = {
        { .source_labels = (char *[]){ "__name__" },
          .n_source_labels = 1,
          .regex = "block",
          .action = "drop" },
        { .source_labels = (char *[]){ "__name__", "__delta__" },
          .n_source_labels = 2,
          .regex = "(.+);false",
          .target_label = "kind",
          .replacement = "delta-${1}" },
        { .source_labels = (char *[]){ "__name__" },
          .n_source_labels = 1,
          .regex = "goroutine",
          .target_label = "__name__",
          .replacement = "" },
    };
    struct scrape_job_cfg sc;
    struct target_result r, plain;
    char err[256];

    scrape_init(&sc);
    ASSERT_EQ(relabel_rules_new(cfgs, 3, RELABEL_SCHEME_UNSET, &sc.profile_rules, err, sizeof(err)),
              0);
    build(&sc, NULL, (const char *[]){ "__address__", "h:1", NULL }, &r);
    ASSERT_NULL(r.error);
    /* block dropped by the rule, goroutine for losing its __name__ */
    ASSERT_NULL(pair(&r, "block"));
    ASSERT_NULL(pair(&r, "goroutine"));
    ASSERT_EQ(r.pairs_dropped, 2);
    ASSERT_STR_EQ(labels_get(&pair(&r, "memory")->labels, "kind"), "delta-memory");
    ASSERT_STR_EQ(labels_get(&pair(&r, "mutex")->labels, "kind"), "delta-mutex");
    ASSERT_NULL(labels_get(&pair(&r, "process_cpu")->labels, "kind"));
    relabel_rules_free(sc.profile_rules);
    sc.profile_rules = NULL;
    build(&sc, NULL, (const char *[]){ "__address__", "h:1", NULL }, &plain);
    ASSERT_EQ(plain.pairs_dropped, 0);
    ASSERT_NOT_NULL(pair(&plain, "block"));
    ASSERT_NE(pair(&plain, "memory")->key, pair(&r, "memory")->key);
    ASSERT_U64_EQ(pair(&plain, "process_cpu")->key, pair(&r, "process_cpu")->key);
    target_result_done(&r);
    target_result_done(&plain);
}

static const char *service_name_of(const char *const *kv)
{
    static char sn[256];
    struct scrape_job_cfg sc;
    struct target_result r;

    scrape_init(&sc);
    build(&sc, NULL, kv, &r);
    ASSERT_NULL(r.error);
    snprintf(sn, sizeof(sn), "%s", labels_get(&r.pairs[0].labels, "service_name"));
    target_result_done(&r);
    return sn;
}

TEST(service_name_chain)
{
    ASSERT_STR_EQ(service_name_of((const char *[]){ "__address__", "h:1", "service_name", "a",
                                                    "__name__", "b", NULL }),
                  "a");
    ASSERT_STR_EQ(service_name_of((const char *[]){ "__address__", "h:1", "__name__", "b",
                                                    "__meta_kubernetes_namespace", "ns", NULL }),
                  "b");
    ASSERT_STR_EQ(
        service_name_of((const char *[]){
            "__address__", "h:1", "__meta_kubernetes_pod_annotation_pyroscope_io_service_name",
            "annotated", "__meta_kubernetes_namespace", "ns",
            "__meta_kubernetes_pod_container_name", "c", NULL }),
        "annotated");
    ASSERT_STR_EQ(
        service_name_of((const char *[]){ "__address__", "h:1", "__meta_kubernetes_namespace", "ns",
                                          "__meta_kubernetes_pod_container_name", "c",
                                          "__meta_docker_container_name", "d", NULL }),
        "ns/c");
    ASSERT_STR_EQ(
        service_name_of((const char *[]){ "__address__", "h:1", "__meta_kubernetes_namespace", "ns",
                                          "__meta_docker_container_name", "d", NULL }),
        "d");
    ASSERT_STR_EQ(service_name_of((const char *[]){
                      "__address__", "h:1", "__meta_dockerswarm_container_label_service_name", "s1",
                      "__meta_dockerswarm_service_name", "s2", NULL }),
                  "s1");
    ASSERT_STR_EQ(service_name_of((const char *[]){
                      "__address__", "h:1", "__meta_dockerswarm_service_name", "s2", NULL }),
                  "s2");
    ASSERT_STR_EQ(service_name_of((const char *[]){ "__address__", "h:1", NULL }), "unspecified");
}

TEST(dedup_key_stability)
{
    struct scrape_job_cfg sc;
    struct target_result a, b, c, d;

    scrape_init(&sc);
    build(&sc, NULL, (const char *[]){ "__address__", "h:1", "env", "x", "__meta_a", "1", NULL },
          &a);
    build(&sc, NULL,
          (const char *[]){ "__address__", "h:1", "env", "x", "__meta_a", "2", "__tmp", "z", NULL },
          &b);
    build(&sc, NULL, (const char *[]){ "__address__", "h:1", "env", "y", NULL }, &c);
    build(&sc, NULL, (const char *[]){ "__address__", "h:2", "instance", "h:1", "env", "x", NULL },
          &d);
    /* hidden labels do not matter; public labels and the URL do */
    ASSERT_U64_EQ(pair(&a, "memory")->key, pair(&b, "memory")->key);
    ASSERT_NE(pair(&a, "memory")->key, pair(&c, "memory")->key);
    ASSERT_NE(pair(&a, "memory")->key, pair(&d, "memory")->key);
    ASSERT_NE(pair(&a, "memory")->key, pair(&a, "mutex")->key);
    /* the offset hash, by contrast, covers every target label */
    ASSERT_NE(pair(&a, "memory")->offset_hash, pair(&b, "memory")->offset_hash);
    target_result_done(&a);
    target_result_done(&b);
    target_result_done(&c);
    target_result_done(&d);
}

TEST(path_prefix_and_scheme)
{
    struct relabel_rules *rs = one_rule("__meta_prefix", NULL, "__profile_path_prefix__", NULL);
    struct scrape_job_cfg sc;
    struct target_result r;

    scrape_init(&sc);
    sc.path_prefix = "/base/";
    sc.scheme = "https";
    build(&sc, NULL, (const char *[]){ "__address__", "h", NULL }, &r);
    ASSERT_STR_EQ(pair(&r, "memory")->url, "https://h:443/base/debug/pprof/allocs");
    target_result_done(&r);
    build(&sc, rs, (const char *[]){ "__address__", "h:1", "__meta_prefix", "other", NULL }, &r);
    ASSERT_STR_EQ(pair(&r, "memory")->url, "https://h:1/other/debug/pprof/allocs");
    target_result_done(&r);
    relabel_rules_free(rs);
}

/* Seed 001's kubernetes-pods job, as Pyroscope documents it. */
TEST(seed_kubernetes_pods_rules)
{
    struct relabel_cfg rules[] = { SEED_PODS_RULES };
    struct relabel_rules *rs = NULL;
    struct scrape_job_cfg sc;
    struct target_result r;
    char err[256];
    char *s;

    ASSERT_EQ(
        relabel_rules_new(rules, SEED_PODS_N_RULES, RELABEL_SCHEME_UNSET, &rs, err, sizeof(err)),
        0);
    scrape_init(&sc);
    sc.job_name = "kubernetes-pods";
    build(&sc, rs,
          (const char *[]){ "__address__",
                            "10.1.2.3:8080",
                            "__meta_kubernetes_pod_annotation_pyroscope_io_scrape",
                            "true",
                            "__meta_kubernetes_pod_annotation_pyroscope_io_application_name",
                            "ride-sharing",
                            "__meta_kubernetes_pod_annotation_pyroscope_io_scheme",
                            "https",
                            "__meta_kubernetes_pod_annotation_pyroscope_io_port",
                            "6060",
                            "__meta_kubernetes_pod_label_app",
                            "web",
                            "__meta_kubernetes_namespace",
                            "prod",
                            "__meta_kubernetes_pod_name",
                            "web-1",
                            "__meta_kubernetes_pod_phase",
                            "Running",
                            "__meta_kubernetes_pod_annotation_pyroscope_io_profile_cpu_enabled",
                            "false",
                            NULL },
          &r);
    ASSERT_NULL(r.error);
    ASSERT_FALSE(r.dropped);
    ASSERT_NULL(pair(&r, "process_cpu"));
    ASSERT_EQ(r.n_pairs, 4);
    ASSERT_STR_EQ(pair(&r, "memory")->url, "https://10.1.2.3:6060/debug/pprof/allocs");
    s = labels_to_string(&pair(&r, "memory")->labels);
    ASSERT_STR_EQ(s, "{__delta__=\"false\", __name__=\"memory\", app=\"web\", "
                     "instance=\"10.1.2.3:6060\", job=\"kubernetes-pods\", "
                     "kubernetes_namespace=\"prod\", kubernetes_pod_name=\"web-1\", "
                     "service_name=\"ride-sharing\"}");
    free(s);
    target_result_done(&r);
    /* not annotated: dropped; completed pods: dropped */
    build(&sc, rs, (const char *[]){ "__address__", "10.1.2.3:8080", NULL }, &r);
    ASSERT_TRUE(r.dropped);
    target_result_done(&r);
    build(&sc, rs,
          (const char *[]){ "__address__", "10.1.2.3",
                            "__meta_kubernetes_pod_annotation_pyroscope_io_scrape", "true",
                            "__meta_kubernetes_pod_phase", "Succeeded", NULL },
          &r);
    ASSERT_TRUE(r.dropped);
    target_result_done(&r);
    relabel_rules_free(rs);
}

int main(int argc, char **argv)
{
    int rc = test_main(argc, argv);

    relabel_thread_cleanup();
    return rc;
}
