/* SPDX-License-Identifier: Apache-2.0 */
/* Benchmark: 10,000 synthetic Kubernetes pod targets (about 20 meta labels
 * each, 90% annotated for scraping) through the relabel rules of seed 001's
 * kubernetes-pods job (9 rules), then through those plus 6 more typical
 * rules (15, the design target: under 50 ms). Most of those regexes are
 * literals or prefixes that skip the regex engine, so a third run uses 6
 * rules that all need it, and a fourth the pathological `(a+)+$` (keep) on
 * 2,000 targets whose 31-character value almost matches: exponential for a
 * backtracking engine, linear for Go's and ours. One core, label sets built
 * before the clock starts; prints the best of several runs with the kept,
 * dropped and failed counts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "relabel/relabel.h"
#include "tests/relabel/seed_pods_rules.h"

#define N_TARGETS 10000
#define RUNS 7

static char *s_node[] = { "__meta_kubernetes_pod_node_name" };
static char *s_ctr[] = { "__meta_kubernetes_pod_container_name" };
static char *s_init[] = { "__meta_kubernetes_pod_container_init" };
static char *s_addr[] = { "__address__" };

static struct relabel_cfg rules[] = {
    /* seed 001, kubernetes-pods */
    SEED_PODS_RULES,
    /* six more, as DaemonSet/shard setups add them */
    { .source_labels = s_node, .n_source_labels = 1, .target_label = "node" },
    { .source_labels = s_ctr, .n_source_labels = 1, .target_label = "container" },
    { .source_labels = s_init, .n_source_labels = 1, .regex = "true", .action = "drop" },
    { .source_labels = s_addr,
      .n_source_labels = 1,
      .modulus = 4,
      .target_label = "__tmp_shard",
      .action = "hashmod" },
    { .source_labels = seed_pods_ns, .n_source_labels = 1, .regex = "kube-.*", .action = "drop" },
    { .action = "labeldrop", .regex = "pod_template_hash|controller_revision_hash" },
};

/* Rules that all go through the regex engine (no literal or prefix shape). */
static char *s_pod_uid[] = { "__meta_kubernetes_pod_uid" };
static struct relabel_cfg engine_rules[] = {
    { .source_labels = s_addr,
      .n_source_labels = 1,
      .regex = "([^:]+)(?::\\d+)?",
      .replacement = "$1",
      .target_label = "__tmp_host" },
    { .source_labels = seed_pods_ns,
      .n_source_labels = 1,
      .regex = "(?i)(prod|staging|dev)",
      .action = "keep" },
    { .source_labels = seed_pods_pod,
      .n_source_labels = 1,
      .regex = "(.+)-[0-9a-f]{9}-(\\d+)",
      .replacement = "$1",
      .target_label = "app" },
    { .source_labels = s_node, .n_source_labels = 1, .regex = "node-3[5-9]", .action = "drop" },
    { .action = "labelmap", .regex = "__meta_kubernetes_pod_(container_\\w+)" },
    { .source_labels = s_pod_uid,
      .n_source_labels = 1,
      .regex = "([0-9a-f]{8})-.*",
      .target_label = "uid8" },
};

/* The pathological rule: Go and RE2 answer in linear time. */
static char *s_annotation[] = { "__meta_kubernetes_pod_annotation_x" };
static struct relabel_cfg pathological_rule[] = {
    { .source_labels = s_annotation, .n_source_labels = 1, .regex = "(a+)+$", .action = "keep" },
};

static void make_pathological_target(struct labels *ls, unsigned i)
{
    labels_set(ls, "__address__", "10.0.0.1:6060");
    labels_set(ls, "__meta_kubernetes_pod_annotation_x", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!");
    (void)i;
}

static void make_target(struct labels *ls, unsigned i)
{
    char v[128];

    snprintf(v, sizeof(v), "10.%u.%u.%u:%u", i / 65536, (i / 256) % 256, i % 256,
             i % 3 ? 8080 : 6060);
    labels_set(ls, "__address__", v);
    snprintf(v, sizeof(v), "web-%u-7d9c8b5f4-%05u", i % 50, i);
    labels_set(ls, "__meta_kubernetes_pod_name", v);
    labels_set(ls, "__meta_kubernetes_namespace", i % 7 ? "prod" : "staging");
    labels_set(ls, "__meta_kubernetes_pod_phase", i % 20 ? "Running" : "Succeeded");
    snprintf(v, sizeof(v), "10.%u.%u.%u", i / 65536, (i / 256) % 256, i % 256);
    labels_set(ls, "__meta_kubernetes_pod_ip", v);
    labels_set(ls, "__meta_kubernetes_pod_ready", "true");
    snprintf(v, sizeof(v), "node-%u", i % 40);
    labels_set(ls, "__meta_kubernetes_pod_node_name", v);
    labels_set(ls, "__meta_kubernetes_pod_host_ip", "192.168.1.10");
    snprintf(v, sizeof(v), "2f6a%08x-1b2c-4d5e-8f90-a1b2c3d4e5f6", i);
    labels_set(ls, "__meta_kubernetes_pod_uid", v);
    labels_set(ls, "__meta_kubernetes_pod_container_name", "app");
    labels_set(ls, "__meta_kubernetes_pod_container_image", "registry.example/app:1.2.3");
    labels_set(ls, "__meta_kubernetes_pod_container_init", "false");
    labels_set(ls, "__meta_kubernetes_pod_container_port_number", i % 3 ? "8080" : "6060");
    labels_set(ls, "__meta_kubernetes_pod_container_port_protocol", "TCP");
    labels_set(ls, "__meta_kubernetes_pod_controller_kind", "ReplicaSet");
    labels_set(ls, "__meta_kubernetes_pod_controller_name", "web-7d9c8b5f4");
    labels_set(ls, "__meta_kubernetes_pod_label_app", "web");
    labels_set(ls, "__meta_kubernetes_pod_label_pod_template_hash", "7d9c8b5f4");
    labels_set(ls, "__meta_kubernetes_pod_labelpresent_app", "true");
    labels_set(ls, "__meta_kubernetes_pod_labelpresent_pod_template_hash", "true");
    if (i % 10) {
        labels_set(ls, "__meta_kubernetes_pod_annotation_pyroscope_io_scrape", "true");
        labels_set(ls, "__meta_kubernetes_pod_annotationpresent_pyroscope_io_scrape", "true");
        labels_set(ls, "__meta_kubernetes_pod_annotation_pyroscope_io_application_name", "web");
        labels_set(ls, "__meta_kubernetes_pod_annotation_pyroscope_io_port", "6060");
        if (i % 4 == 0)
            labels_set(ls, "__meta_kubernetes_pod_annotation_pyroscope_io_profile_cpu_enabled",
                       "false");
    }
    labels_set(ls, "job", "kubernetes-pods");
    labels_set(ls, "__scheme__", "http");
    labels_set(ls, "__scrape_interval__", "15s");
    labels_set(ls, "__scrape_timeout__", "10s");
}

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

struct result {
    double best_ms;
    unsigned kept, dropped, failed;
};

static int run(const struct relabel_cfg *cfgs, size_t n_rules, unsigned n_targets,
               void (*make)(struct labels *, unsigned), struct result *res)
{
    static struct labels sets[N_TARGETS];
    struct relabel_rules *rs = NULL;
    char err[512];

    if (relabel_rules_new(cfgs, n_rules, RELABEL_SCHEME_UNSET, &rs, err, sizeof(err)) < 0) {
        fprintf(stderr, "bench_relabel: %s\n", err);
        return 1;
    }
    res->best_ms = 1e9;
    for (int r = 0; r < RUNS; r++) {
        unsigned kept = 0, dropped = 0, failed = 0;
        double t0, t;

        for (unsigned i = 0; i < n_targets; i++) {
            labels_init(&sets[i]);
            make(&sets[i], i);
        }
        t0 = now_ms();
        for (unsigned i = 0; i < n_targets; i++) {
            int rc = relabel_apply(rs, &sets[i]);

            if (rc == 1)
                kept++;
            else if (rc == 0)
                dropped++;
            else
                failed++; /* a regex limit: the target is not scraped */
        }
        t = now_ms() - t0;
        if (t < res->best_ms)
            res->best_ms = t;
        res->kept = kept;
        res->dropped = dropped;
        res->failed = failed;
        for (unsigned i = 0; i < n_targets; i++)
            labels_done(&sets[i]);
    }
    relabel_rules_free(rs);
    return 0;
}

static void print(const char *what, unsigned n_targets, const struct result *r)
{
    printf("relabel: %u targets x %s: %.2f ms (%.0f ns/target), %u kept, %u dropped, %u failed\n",
           n_targets, what, r->best_ms, r->best_ms * 1e6 / n_targets, r->kept, r->dropped,
           r->failed);
}

int main(void)
{
    struct result r;

    if (run(rules, 9, N_TARGETS, make_target, &r))
        return 1;
    print("9 rules (seed 001 kubernetes-pods)", N_TARGETS, &r);
    if (run(rules, sizeof(rules) / sizeof(rules[0]), N_TARGETS, make_target, &r))
        return 1;
    print("15 rules", N_TARGETS, &r);
    if (run(engine_rules, sizeof(engine_rules) / sizeof(engine_rules[0]), N_TARGETS, make_target,
            &r))
        return 1;
    print("6 rules that need the regex engine", N_TARGETS, &r);
    if (run(pathological_rule, 1, 2000, make_pathological_target, &r))
        return 1;
    print("`(a+)+$` keep on a 31-character value", 2000, &r);
    relabel_thread_cleanup();
    return 0;
}
