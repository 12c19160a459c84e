/* SPDX-License-Identifier: Apache-2.0 */
/* Seed 001's kubernetes-pods relabel rules, as Pyroscope documents them:
 * keep annotated pods, name the application, take scheme and port from
 * annotations, map pod labels, name namespace and pod, drop finished pods,
 * and turn profile annotations into __profile_ labels. Nine rules, shared
 * by the target-building test and the relabel benchmark; the source-label
 * arrays are static, one copy per program that includes this. */
#ifndef PROFLET_TESTS_RELABEL_SEED_PODS_RULES_H
#define PROFLET_TESTS_RELABEL_SEED_PODS_RULES_H

#include "relabel/relabel.h"

static char *seed_pods_scrape[] = { "__meta_kubernetes_pod_annotation_pyroscope_io_scrape" };
static char *seed_pods_app[] = { "__meta_kubernetes_pod_annotation_pyroscope_io_application_name" };
static char *seed_pods_scheme[] = { "__meta_kubernetes_pod_annotation_pyroscope_io_scheme" };
static char *seed_pods_port[] = { "__address__",
                                  "__meta_kubernetes_pod_annotation_pyroscope_io_port" };
static char *seed_pods_ns[] = { "__meta_kubernetes_namespace" };
static char *seed_pods_pod[] = { "__meta_kubernetes_pod_name" };
static char *seed_pods_phase[] = { "__meta_kubernetes_pod_phase" };

/* The rules, as initializers of a struct relabel_cfg array. */
#define SEED_PODS_N_RULES 9
#define SEED_PODS_RULES                                                                            \
    {                                                                                              \
        .source_labels = seed_pods_scrape, .n_source_labels = 1, .action = "keep", .regex = "true" \
    },                                                                                             \
        { .source_labels = seed_pods_app,                                                          \
          .n_source_labels = 1,                                                                    \
          .action = "replace",                                                                     \
          .target_label = "__name__" },                                                            \
        { .source_labels = seed_pods_scheme,                                                       \
          .n_source_labels = 1,                                                                    \
          .action = "replace",                                                                     \
          .regex = "(https?)",                                                                     \
          .target_label = "__scheme__" },                                                          \
        { .source_labels = seed_pods_port,                                                         \
          .n_source_labels = 2,                                                                    \
          .action = "replace",                                                                     \
          .regex = "([^:]+)(?::\\d+)?;(\\d+)",                                                     \
          .replacement = "$1:$2",                                                                  \
          .target_label = "__address__" },                                                         \
        { .action = "labelmap", .regex = "__meta_kubernetes_pod_label_(.+)" },                     \
        { .source_labels = seed_pods_ns,                                                           \
          .n_source_labels = 1,                                                                    \
          .action = "replace",                                                                     \
          .target_label = "kubernetes_namespace" },                                                \
        { .source_labels = seed_pods_pod,                                                          \
          .n_source_labels = 1,                                                                    \
          .action = "replace",                                                                     \
          .target_label = "kubernetes_pod_name" },                                                 \
        { .source_labels = seed_pods_phase,                                                        \
          .n_source_labels = 1,                                                                    \
          .regex = "Pending|Succeeded|Failed|Completed",                                           \
          .action = "drop" },                                                                      \
    {                                                                                              \
        .action = "labelmap",                                                                      \
        .regex = "__meta_kubernetes_pod_annotation_pyroscope_io_profile_(.+)",                     \
        .replacement = "__profile_$1"                                                              \
    }

#endif
