/* SPDX-License-Identifier: Apache-2.0 */
/* The `clustering:` settings: whether replicas share targets, this
 * replica's name, and where the peers come from (a fixed list, or the pods
 * of a kubernetes-sd-shaped block), with the checks made at load
 * (docs/design.md "Configuration").
 *
 * Const data and pure hooks; any thread. */
#include <string.h>

#include "cluster/cluster.h"

#define OPT CYAML_FLAG_OPTIONAL
#define PTR CYAML_FLAG_POINTER
#define UNL CYAML_UNLIMITED

const cyaml_schema_field_t cluster__cfg_fields[] = {
    CYAML_FIELD_BOOL("enabled", OPT, struct cluster_cfg, enabled),
    CYAML_FIELD_STRING_PTR("self", OPT, struct cluster_cfg, self, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("peers", OPT | PTR, struct cluster_cfg, peers, n_peers,
                               &conf_string_entry, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("kubernetes", OPT | PTR, struct cluster_cfg, kubernetes,
                               n_kubernetes, &disc__k8s_entry, 0, 1),
    CYAML_FIELD_END,
};

static const struct conf_key cluster_keys[] = {
    { .key = "enabled", .def = "false" },
    { 0 },
};
static const struct conf_key *const cluster_key_tables[] = { cluster_keys, NULL };

/* `kubernetes:` is written as one mapping; it loads as a list of at most
 * one kubernetes-sd config, so discovery's own schema and checks apply. */
static int cluster_pre(struct conf_load *ld, struct conf_node *n)
{
    struct conf_node *k = conf_get(n, "kubernetes"), *seq;

    if (!conf_is_map(k))
        return 0;
    if (!(seq = conf_new_seq(ld, k)) || conf_append(ld, seq, k) < 0)
        return -1;
    return conf_set_node(ld, n, "kubernetes", seq);
}

static int cluster_post(struct conf_load *ld, struct conf_node *n)
{
    struct conf_node *peers = conf_get(n, "peers"), *k8s = conf_get(n, "kubernetes");
    struct conf_node *self = conf_get(n, "self");
    bool found = false;

    if (!conf_true(conf_get(n, "enabled")))
        return 0;
    if (peers && k8s)
        return conf_fail(ld, conf_user_key(n, "kubernetes"),
                         "clustering takes either peers (a fixed list) or kubernetes, not both");
    if (!peers && !k8s)
        return conf_fail(ld, n,
                         "clustering needs its peers: a fixed list (peers) or a "
                         "kubernetes block (namespace and label selector of the replicas)");
    if (self && !*conf_str(self))
        return conf_fail(ld, self, "clustering.self cannot be empty");
    for (size_t i = 0; peers && i < conf_len(peers); i++) {
        const char *p = conf_str(conf_at(peers, i));

        if (!*p)
            return conf_fail(ld, conf_at(peers, i), "a peer name cannot be empty");
        for (size_t k = 0; k < i; k++) {
            if (strcmp(conf_str(conf_at(peers, k)), p) == 0)
                return conf_fail(ld, conf_at(peers, i), "peer \"%.80s\" listed twice", p);
        }
        if (self && strcmp(conf_str(self), p) == 0)
            found = true;
    }
    if (peers && !conf_len(peers))
        return conf_fail(ld, peers, "clustering.peers cannot be empty");
    if (peers && self && !found)
        return conf_fail(ld, self, "clustering.self \"%.80s\" is not one of the peers",
                         conf_str(self));
    return 0;
}

static const struct conf_section cluster_section = {
    .name = "clustering",
    .fields = cluster__cfg_fields,
    .keys = cluster_key_tables,
    .pre = cluster_pre,
    .post = cluster_post,
};

const struct conf_section *const cluster_cfg_sections[] = { &cluster_section, NULL };
