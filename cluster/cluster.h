/* SPDX-License-Identifier: Apache-2.0 */
/** Clustering: replicas that share the targets among themselves, with the
 * Kubernetes API as the membership service (docs/clustering.md).
 *
 * Every replica sees the same live peers and keeps only the targets it owns
 * under rendezvous (highest-random-weight) hashing of the target's
 * identity, the hash of its final labels. The assignment is pure: the same
 * peer list gives the same owners on every replica, and a peer that joins or
 * leaves moves only the targets it gains or loses (about 1/N).
 *
 * Peers are either a fixed list (`peers:` plus `self:`, for VMs and tests)
 * or the ready proflet pods a label selector finds in a namespace, watched
 * through discovery's Kubernetes client (list, watch, bookmarks, 410
 * relist, backoff).
 *
 * The configuration and the assignment are pure (any thread); the
 * membership runs on the loop thread. */
#ifndef PROFLET_CLUSTER_H
#define PROFLET_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "common/buf.h"
#include "common/workq.h"
#include "conf/conf.h"
#include "discovery/discovery.h"

/* --------------------------------------------------------- configuration */

/** `clustering:`. */
struct cluster_cfg {
    bool enabled;
    char *self;   /**< this replica's name; NULL: $POD_NAME, else the
                                          host name */
    char **peers; /**< static membership: every replica's name */
    unsigned n_peers;
    struct disc_k8s_cfg *kubernetes; /**< Kubernetes membership: at most one (a
                                          kubernetes-sd config, role pod) */
    unsigned n_kubernetes;
};

/** The libcyaml fields of `clustering:` and the field that embeds it as
 * member `m` of the top-level struct `S`. */
extern const cyaml_schema_field_t cluster__cfg_fields[];
#define CLUSTER_CFG_FIELD(S, m) \
    CYAML_FIELD_MAPPING("clustering", CYAML_FLAG_OPTIONAL, S, m, cluster__cfg_fields)
/** The sections of the cluster module's mappings; NULL-terminated. */
extern const struct conf_section *const cluster_cfg_sections[];

/* ------------------------------------------------------------ assignment
 * Pure. */

/** The rendezvous weight of target `id` on the peer whose name hashes to
 * `peer_hash` (cluster_peer_hash()). */
uint64_t cluster_weight(uint64_t peer_hash, uint64_t id);
/** The hash of a peer name that cluster_weight() takes. */
uint64_t cluster_peer_hash(const char *name);
/** The index in `peers[0..n)` of the owner of target `id`: the highest
 * weight, ties to the smaller name. -1 when n is 0. `peers` and `hashes`
 * (cluster_peer_hash of each name) are borrowed. */
long cluster_owner_of(const char *const *peers, const uint64_t *hashes, size_t n, uint64_t id);

/* ------------------------------------------------------------ membership
 * Loop thread only. */

struct cluster;

/** Membership errors (the API server unreachable, a bad kubeconfig...):
 * `msg` borrowed for the call. The view in force is kept. */
typedef void (*cluster_error_cb)(const char *msg, void *ud);
/** Called on the loop after the live peers changed (not from inside a
 * cluster_ call); cluster_owns() answers under the new view. */
typedef void (*cluster_changed_cb)(void *ud);

/** What a cluster is made with. */
struct cluster_opts {
    uv_loop_t *loop;         /**< the cluster's loop; both callbacks run on it */
    struct net_client *http; /**< borrowed: the Kubernetes client's transport */
    struct workq *work;      /**< borrowed: token re-reads */
    cluster_changed_cb changed;
    cluster_error_cb on_error; /**< may be NULL */
    void *ud;                  /**< for both callbacks */
};

/** Creates a cluster with clustering off (it owns everything) until
 * cluster_apply() enables it. Returns 0 and the cluster in `*out` (the
 * caller's, for cluster_close()), or -ENOMEM with "out of memory" in `err`
 * and NULL in `*out`. */
int cluster_new(const struct cluster_opts *o, struct cluster **out, char *err, size_t errlen);
/** Makes the membership match `cfg` (borrowed; what is kept is copied) under
 * discovery's settings `g` (watch line cap). Unchanged settings keep the
 * running watch and view. Returns 0 or a negative code with a message, and
 * then nothing changed. */
int cluster_apply(struct cluster *c, const struct cluster_cfg *cfg, const struct disc_cfg *g,
                  char *err, size_t errlen);
/** True with clustering off, or once the first view of the peers is known
 * and the `changed` callback announcing it has run; it stays true across
 * later views. */
bool cluster_ready(const struct cluster *c);
/** True if this replica owns target `id` (the hash of its final labels).
 * `*owner` (may be NULL) gets the owner's name, valid until the view
 * changes, or NULL when nobody owns it (no view yet, or this replica is not
 * among the live peers). With clustering off every target is owned and
 * `*owner` is NULL. Takes `const struct cluster *` as `ud`, so it can be
 * handed to the scrape manager as its owner filter. */
bool cluster_owns(uint64_t id, const char **owner, void *ud);
/** Stops every timer: from now on the replica owns nothing (shutdown: its
 * peers take its targets over once its pod stops being ready). */
void cluster_leave(struct cluster *c);
/** This replica's name ("" with clustering off). */
const char *cluster_self(const struct cluster *c);
/** The live peers in force, sorted; `*n` gets their number. Valid until
 * the view changes. */
const char *const *cluster_peers(const struct cluster *c, size_t *n);
/** Appends proflet_cluster_* metrics. `owned` is the number of targets
 * the scrape manager keeps, `total` the number it would keep alone. */
void cluster_metrics(const struct cluster *c, size_t owned, size_t total, struct buf *out);
/** Stops the watch; `cb` runs once every handle is closed. */
void cluster_close(struct cluster *c, void (*cb)(void *ud), void *ud);

#endif
