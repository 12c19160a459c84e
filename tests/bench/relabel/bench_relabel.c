/* Benchmark: 10,000 synthetic Kubernetes pod targets (about 20 meta labels
 * each, 90% annotated for scraping) through the relabel rules of seed 001's
 * kubernetes-pods job (9 rules), then through those plus 6 more typical
 * rules (15, DESIGN.md's figure). One core, label sets built before the
 * clock starts; prints the best of several runs. Target: under 50 ms. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "relabel/relabel.h"

#define N_TARGETS 10000
#define RUNS 7

static char *s_scrape[] = {"__meta_kubernetes_pod_annotation_pyroscope_io_scrape"};
static char *s_app[] = {"__meta_kubernetes_pod_annotation_pyroscope_io_application_name"};
static char *s_scheme[] = {"__meta_kubernetes_pod_annotation_pyroscope_io_scheme"};
static char *s_port[] = {"__address__", "__meta_kubernetes_pod_annotation_pyroscope_io_port"};
static char *s_ns[] = {"__meta_kubernetes_namespace"};
static char *s_pod[] = {"__meta_kubernetes_pod_name"};
static char *s_phase[] = {"__meta_kubernetes_pod_phase"};
static char *s_node[] = {"__meta_kubernetes_pod_node_name"};
static char *s_ctr[] = {"__meta_kubernetes_pod_container_name"};
static char *s_init[] = {"__meta_kubernetes_pod_container_init"};
static char *s_addr[] = {"__address__"};

static struct relabel_cfg rules[] = {
    /* seed 001, kubernetes-pods */
    {.source_labels = s_scrape, .n_source_labels = 1, .action = "keep", .regex = "true"},
    {.source_labels = s_app, .n_source_labels = 1, .action = "replace", .target_label = "__name__"},
    {.source_labels = s_scheme, .n_source_labels = 1, .action = "replace", .regex = "(https?)",
     .target_label = "__scheme__"},
    {.source_labels = s_port, .n_source_labels = 2, .action = "replace",
     .regex = "([^:]+)(?::\\d+)?;(\\d+)", .replacement = "$1:$2", .target_label = "__address__"},
    {.action = "labelmap", .regex = "__meta_kubernetes_pod_label_(.+)"},
    {.source_labels = s_ns, .n_source_labels = 1, .action = "replace",
     .target_label = "kubernetes_namespace"},
    {.source_labels = s_pod, .n_source_labels = 1, .action = "replace",
     .target_label = "kubernetes_pod_name"},
    {.source_labels = s_phase, .n_source_labels = 1, .regex = "Pending|Succeeded|Failed|Completed",
     .action = "drop"},
    {.action = "labelmap", .regex = "__meta_kubernetes_pod_annotation_pyroscope_io_profile_(.+)",
     .replacement = "__profile_$1"},
    /* six more, as DaemonSet/shard setups add them */
    {.source_labels = s_node, .n_source_labels = 1, .target_label = "node"},
    {.source_labels = s_ctr, .n_source_labels = 1, .target_label = "container"},
    {.source_labels = s_init, .n_source_labels = 1, .regex = "true", .action = "drop"},
    {.source_labels = s_addr, .n_source_labels = 1, .modulus = 4, .target_label = "__tmp_shard",
     .action = "hashmod"},
    {.source_labels = s_ns, .n_source_labels = 1, .regex = "kube-.*", .action = "drop"},
    {.action = "labeldrop", .regex = "pod_template_hash|controller_revision_hash"},
};

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

static int run(size_t n_rules, double *best_ms, unsigned *kept_out)
{
    static struct labels sets[N_TARGETS];
    struct relabel_rules *rs = NULL;
    char err[512];

    if (relabel_rules_new(rules, n_rules, RELABEL_SCHEME_UNSET, &rs, err, sizeof(err)) < 0) {
        fprintf(stderr, "bench_relabel: %s\n", err);
        return 1;
    }
    *best_ms = 1e9;
    for (int r = 0; r < RUNS; r++) {
        unsigned kept = 0;
        double t0, t;

        for (unsigned i = 0; i < N_TARGETS; i++) {
            labels_init(&sets[i]);
            make_target(&sets[i], i);
        }
        t0 = now_ms();
        for (unsigned i = 0; i < N_TARGETS; i++) {
            int rc = relabel_apply(rs, &sets[i]);

            if (rc < 0) {
                fprintf(stderr, "bench_relabel: apply failed %d\n", rc);
                return 1;
            }
            kept += (unsigned)rc;
        }
        t = now_ms() - t0;
        if (t < *best_ms)
            *best_ms = t;
        *kept_out = kept;
        for (unsigned i = 0; i < N_TARGETS; i++)
            labels_done(&sets[i]);
    }
    relabel_rules_free(rs);
    return 0;
}

int main(void)
{
    double ms;
    unsigned kept;

    if (run(9, &ms, &kept))
        return 1;
    printf("relabel: %d targets x 9 rules (seed 001 kubernetes-pods): %.2f ms (%.0f ns/target), "
           "%u kept\n",
           N_TARGETS, ms, ms * 1e6 / N_TARGETS, kept);
    if (run(sizeof(rules) / sizeof(rules[0]), &ms, &kept))
        return 1;
    printf("relabel: %d targets x 15 rules: %.2f ms (%.0f ns/target), %u kept\n", N_TARGETS, ms,
           ms * 1e6 / N_TARGETS, kept);
    relabel_thread_cleanup();
    return 0;
}
