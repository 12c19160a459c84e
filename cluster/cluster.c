/* SPDX-License-Identifier: Apache-2.0 */
/* Cluster membership: the live peers, and which targets this replica owns
 * (docs/design.md "Modules"; docs/clustering.md).
 *
 * Loop thread only. Static membership is the configured list, in force at
 * once. Kubernetes membership runs its own discovery manager with one job
 * whose only provider is the `clustering.kubernetes` block (a kubernetes-sd
 * config, role pod): so the list/watch client, its bookmarks, 410 relists,
 * backoff and token re-reads are discovery's, not a copy. Each pod group
 * says whether the pod is a live peer: it has an IP, is Running and its
 * Ready condition is True (docs/clustering.md explains why readiness is the
 * liveness signal). The live names, sorted, are the view; a new view is
 * announced through the `changed` callback from a 1 ms timer, never from
 * inside a cluster_ call.
 *
 * Until the first view is known, and after cluster_leave(), the replica
 * owns nothing. When the API server cannot be read the provider keeps its
 * groups, so the view in force stays; errors are counted and reported.
 *
 * Ownership: the struct owns its strings, the view (names and hashes) and
 * its discovery manager; cluster_owns() hands out names valid until the
 * view changes. Two-phase close: the notify timer and the discovery
 * manager each report back, the struct is freed after the last. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "cluster/cluster.h"
#include "common/hashmap.h"
#include "common/macros.h"
#include "common/promtext.h"

#define MEMBERSHIP_JOB "clustering"
/* Pod changes that arrive together (a rollout) make one view. */
#define MEMBERSHIP_COALESCE_MS 200

/* One pod the selector finds. */
struct member {
    char *name;
    bool live;
};

struct cluster {
    uv_loop_t *loop;
    struct net_client *http;
    struct workq *work;
    cluster_changed_cb changed;
    cluster_error_cb on_error;
    void *ud;

    bool enabled;
    bool k8s;       /* membership from the Kubernetes API */
    bool leaving;   /* cluster_leave(): owns nothing */
    bool synced;    /* a view is known */
    bool announced; /* ... and `changed` has run since it became known */
    char *self;

    /* the view: live peers sorted by name, with their hashes */
    char **peers;
    uint64_t *hashes;
    size_t n_peers;
    bool self_live;

    struct disc_manager *disc; /* Kubernetes membership, or NULL */
    struct hashmap members;    /* xxhash(source) -> struct member */

    uv_timer_t notify;
    bool notify_pending;
    uv_timer_t sync_timer; /* until the first view: a selector that finds no pod */

    uint64_t view_changes;
    uint64_t errors;

    unsigned pending_closes;
    bool closing;
    void (*close_cb)(void *ud);
    void *close_ud;
};

/* ---------------------------------------------------------------- the view */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void view_free(char **peers, uint64_t *hashes, size_t n)
{
    for (size_t i = 0; peers && i < n; i++)
        free(peers[i]);
    free(peers);
    free(hashes);
}

static void notify_cb(uv_timer_t *t)
{
    struct cluster *c = t->data;

    c->notify_pending = false;
    if (!c->closing && c->changed)
        c->changed(c->ud);
    c->announced = c->synced;
}

static void schedule_notify(struct cluster *c)
{
    if (c->notify_pending || c->closing)
        return;
    c->notify_pending = true;
    uv_timer_start(&c->notify, notify_cb, 1, 0); /* 1 ms: see docs/design.md, libuv < 1.48 */
}

/* Makes the distinct names of `names[0..n)` (copied) the view; announces
 * it if it differs. A peer is its name: the assignment hashes names and a
 * replica knows itself by name, so two pods of one name (in two watched
 * namespaces, say) are one peer, not two. */
static int view_set(struct cluster *c, const char *const *names, size_t n)
{
    char **peers = calloc(n ? n : 1, sizeof(*peers));
    uint64_t *hashes = calloc(n ? n : 1, sizeof(*hashes));
    size_t all = n;
    bool same;

    if (!peers || !hashes)
        goto oom;
    for (size_t i = 0; i < n; i++)
        if (!(peers[i] = strdup(names[i])))
            goto oom;
    qsort(peers, n, sizeof(*peers), cmp_str);
    n = 0;
    for (size_t i = 0; i < all; i++) {
        if (n && strcmp(peers[i], peers[n - 1]) == 0)
            free(peers[i]);
        else
            peers[n++] = peers[i];
    }
    same = n == c->n_peers;
    c->self_live = false;
    for (size_t i = 0; i < n; i++) {
        hashes[i] = cluster_peer_hash(peers[i]);
        c->self_live |= strcmp(peers[i], c->self) == 0;
        same = same && strcmp(peers[i], c->peers[i]) == 0;
    }
    if (same && c->synced) {
        view_free(peers, hashes, n);
        return 0;
    }
    view_free(c->peers, c->hashes, c->n_peers);
    c->peers = peers;
    c->hashes = hashes;
    c->n_peers = n;
    c->synced = true;
    c->view_changes++;
    schedule_notify(c);
    return 0;
oom:
    view_free(peers, hashes, n);
    return -ENOMEM;
}

/* --------------------------------------------------- Kubernetes membership */

static void member_free(struct member *m)
{
    if (m) {
        free(m->name);
        free(m);
    }
}

static void members_clear(struct cluster *c)
{
    size_t pos = 0;
    uint64_t k;
    void *v;

    while (hashmap_next(&c->members, &pos, &k, &v))
        member_free(v);
    hashmap_done(&c->members);
    hashmap_init(&c->members);
}

static void record_error(struct cluster *c, const char *msg)
{
    c->errors++;
    if (c->on_error)
        c->on_error(msg, c->ud);
}

/* A pod is a live peer when it has an IP (a group with targets), runs, its
 * Ready condition is True and it is not being deleted: the API server marks
 * a deleted pod at once, before its container even gets SIGTERM, while
 * Ready turns False only after a failed probe. Every target of the group
 * carries the pod's labels; the first one is enough. */
static bool pod_live(const struct labels *t, const char **name)
{
    const char *ready = labels_get(t, "__meta_kubernetes_pod_ready");
    const char *phase = labels_get(t, "__meta_kubernetes_pod_phase");

    *name = labels_get(t, "__meta_kubernetes_pod_name");
    return *name && ready && strcmp(ready, "true") == 0 && phase && strcmp(phase, "Running") == 0 &&
           !labels_get(t, DISC_K8S_TERMINATING_LABEL);
}

static void rebuild_from_members(struct cluster *c)
{
    const char **names = calloc(c->members.n ? c->members.n : 1, sizeof(*names));
    size_t n = 0, pos = 0;
    uint64_t k;
    void *v;

    if (!names) {
        record_error(c, "out of memory building the view of the peers");
        return;
    }
    while (hashmap_next(&c->members, &pos, &k, &v)) {
        struct member *m = v;

        if (m->live)
            names[n++] = m->name;
    }
    if (view_set(c, names, n) < 0)
        record_error(c, "out of memory building the view of the peers");
    free(names);
}

static void on_pods(const char *job, const struct disc_group *groups, size_t n, void *ud)
{
    struct cluster *c = ud;

    (void)job;
    if (c->closing || !c->k8s)
        return;
    for (size_t i = 0; i < n; i++) {
        const struct disc_group *g = &groups[i];
        uint64_t key = XXH64(g->source, strlen(g->source), 0);
        struct member *m = hashmap_del(&c->members, key);
        const char *name = NULL;
        bool live;

        member_free(m);
        if (!g->targets || !g->targets->n)
            continue; /* gone, or no IP yet */
        live = pod_live(&g->targets->t[0], &name);
        if (!name)
            continue;
        m = calloc(1, sizeof(*m));
        if (!m || !(m->name = strdup(name)) || hashmap_put(&c->members, key, m) < 0) {
            member_free(m);
            record_error(c, "out of memory tracking the peers");
            continue;
        }
        m->live = live;
    }
    /* The first view waits for the first complete list. */
    if (disc_manager_ready(c->disc))
        rebuild_from_members(c);
}

/* The first list may find no pod at all, and then no group ever arrives:
 * the first view (empty) is made once discovery says it has synced. */
static void sync_check(uv_timer_t *t)
{
    struct cluster *c = t->data;

    if (c->synced || !c->k8s || !c->disc) {
        uv_timer_stop(t);
        return;
    }
    if (disc_manager_ready(c->disc))
        rebuild_from_members(c);
}

static void on_disc_error(const char *job, const char *provider, const char *msg, void *ud)
{
    (void)job;
    (void)provider;
    record_error(ud, msg);
}

static void closed_one(void *ud);

static void disc_stop(struct cluster *c)
{
    if (!c->disc)
        return;
    c->pending_closes++;
    disc_manager_close(c->disc, closed_one, c);
    c->disc = NULL;
    members_clear(c);
}

/* ------------------------------------------------------------------ public */

int cluster_new(const struct cluster_opts *o, struct cluster **out, char *err, size_t errlen)
{
    struct cluster *c = calloc(1, sizeof(*c));

    *out = NULL;
    if (!c || !(c->self = strdup(""))) {
        free(c);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    c->loop = o->loop;
    c->http = o->http;
    c->work = o->work;
    c->changed = o->changed;
    c->on_error = o->on_error;
    c->ud = o->ud;
    hashmap_init(&c->members);
    uv_timer_init(c->loop, &c->notify);
    c->notify.data = c;
    uv_timer_init(c->loop, &c->sync_timer);
    c->sync_timer.data = c;
    *out = c;
    return 0;
}

/* The replica's name: the configured one, else $POD_NAME (the downward
 * API), else the host name. */
static char *resolve_self(const struct cluster_cfg *cfg)
{
    char host[256] = "";
    const char *env = getenv("POD_NAME");

    if (cfg->self && *cfg->self)
        return strdup(cfg->self);
    if (env && *env)
        return strdup(env);
    gethostname(host, sizeof(host) - 1);
    return strdup(host);
}

int cluster_apply(struct cluster *c, const struct cluster_cfg *cfg, const struct disc_cfg *g,
                  char *err, size_t errlen)
{
    char *self = NULL;
    int rc;

    if (!cfg->enabled) {
        disc_stop(c);
        if (c->enabled) {
            c->enabled = false;
            view_free(c->peers, c->hashes, c->n_peers);
            c->peers = NULL;
            c->hashes = NULL;
            c->n_peers = 0;
            c->synced = c->announced = false;
            c->k8s = false;
            schedule_notify(c);
        }
        return 0;
    }
    if (!(self = resolve_self(cfg))) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (!*self) {
        free(self);
        snprintf(err, errlen,
                 "clustering: this replica has no name (set clustering.self or "
                 "POD_NAME)");
        return -EINVAL;
    }
    if (cfg->n_peers) {
        bool found = false;

        for (unsigned i = 0; i < cfg->n_peers; i++)
            found |= strcmp(cfg->peers[i], self) == 0;
        if (!found) {
            snprintf(err, errlen,
                     "clustering: this replica's name \"%.80s\" is not one of the "
                     "peers",
                     self);
            free(self);
            return -EINVAL;
        }
    }
    if (cfg->n_kubernetes) {
        struct disc_k8s_cfg k8s = *cfg->kubernetes; /* borrowed for the call */
        const struct disc_job job = { MEMBERSHIP_JOB,
                                      &(struct disc_sd_cfg){ .k8s_sd = &k8s, .n_k8s_sd = 1 } };
        bool fresh = !c->disc;

        k8s.mark_terminating = true; /* a pod being deleted is no peer */

        if (fresh) {
            const struct disc_manager_opts dopts = {
                .loop = c->loop,
                .http = c->http,
                .work = c->work,
                .coalesce_ms = MEMBERSHIP_COALESCE_MS,
                .on_update = on_pods,
                .update_ud = c,
                .on_error = on_disc_error,
                .error_ud = c,
            };

            rc = disc_manager_new(&dopts, &c->disc, err, errlen);
            if (rc < 0) {
                free(self);
                return rc;
            }
        }
        rc = disc_manager_apply(c->disc, &job, 1, g, err, errlen);
        if (rc < 0) {
            if (fresh)
                disc_stop(c);
            free(self);
            return rc;
        }
        if (fresh) {
            /* A new membership source: no view until it has listed. */
            view_free(c->peers, c->hashes, c->n_peers);
            c->peers = NULL;
            c->hashes = NULL;
            c->n_peers = 0;
            c->synced = c->announced = false;
            schedule_notify(c);
        }
        if (!c->synced)
            uv_timer_start(&c->sync_timer, sync_check, 100, 100);
    } else {
        disc_stop(c);
    }
    free(c->self);
    c->self = self;
    c->enabled = true;
    c->k8s = cfg->n_kubernetes > 0;
    if (!c->k8s && view_set(c, (const char *const *)cfg->peers, cfg->n_peers) < 0) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    if (c->k8s && c->synced)
        rebuild_from_members(c); /* self may have been renamed */
    schedule_notify(c);
    return 0;
}

bool cluster_ready(const struct cluster *c)
{
    /* Announced too: the owner filter has been applied to the targets. A
     * later view keeps the replica ready (no flapping on every change). */
    return !c->enabled || c->announced;
}

bool cluster_owns(uint64_t id, const char **owner, void *ud)
{
    const struct cluster *c = ud;
    long i;

    if (owner)
        *owner = NULL;
    if (!c->enabled)
        return true;
    if (!c->synced || !c->n_peers)
        return false;
    i = cluster_owner_of((const char *const *)c->peers, c->hashes, c->n_peers, id);
    if (owner)
        *owner = c->peers[i];
    return !c->leaving && c->self_live && strcmp(c->peers[i], c->self) == 0;
}

void cluster_leave(struct cluster *c)
{
    if (c->leaving)
        return;
    c->leaving = true;
    /* Without clustering every target stays owned: nothing to announce. */
    if (c->enabled)
        schedule_notify(c);
}

const char *cluster_self(const struct cluster *c)
{
    return c->enabled ? c->self : "";
}

const char *const *cluster_peers(const struct cluster *c, size_t *n)
{
    *n = c->n_peers;
    return (const char *const *)c->peers;
}

/* The figures /metrics shows, taken when it is written. */
struct figures {
    uint64_t enabled, peers, synced, self_live, owned, total, view_changes, errors;
};

#define U64(name, type, help, field) PROM_FAMILY_U64(name, type, help, struct figures, field)

/* The first family is all a replica without clustering shows. */
static const struct prom_family families[] = {
    U64("proflet_cluster_enabled", "gauge", "Whether clustering is on.", enabled),
    U64("proflet_cluster_peers", "gauge", "Live peers in this replica's view.", peers),
    U64("proflet_cluster_synced", "gauge",
        "Whether the first view of the peers is known (before it, nothing is owned).", synced),
    U64("proflet_cluster_self_live", "gauge",
        "Whether this replica is among the live peers of its own view.", self_live),
    U64("proflet_cluster_owned_targets", "gauge", "Targets this replica owns and scrapes.", owned),
    U64("proflet_cluster_targets", "gauge",
        "Targets the scrape jobs yield before ownership (owned here or elsewhere).", total),
    U64("proflet_cluster_membership_changes_total", "counter",
        "Times the view of the live peers changed.", view_changes),
    U64("proflet_cluster_membership_errors_total", "counter",
        "Errors reading the membership (the view in force is kept).", errors),
};

#undef U64

void cluster_metrics(const struct cluster *c, size_t owned, size_t total, struct buf *b)
{
    const struct figures f = {
        .enabled = c->enabled,
        .peers = c->n_peers,
        .synced = c->synced,
        .self_live = c->self_live && !c->leaving,
        .owned = owned,
        .total = total,
        .view_changes = c->view_changes,
        .errors = c->errors,
    };

    prom_families(b, families, c->enabled ? ARRAY_SIZE(families) : 1, &f, NULL);
}

static void closed_one(void *ud)
{
    struct cluster *c = ud;
    void (*cb)(void *);
    void *cud;

    if (--c->pending_closes || !c->closing)
        return;
    members_clear(c);
    hashmap_done(&c->members);
    view_free(c->peers, c->hashes, c->n_peers);
    free(c->self);
    cb = c->close_cb;
    cud = c->close_ud;
    free(c);
    if (cb)
        cb(cud);
}

static void notify_closed(uv_handle_t *h)
{
    closed_one(h->data);
}

void cluster_close(struct cluster *c, void (*cb)(void *ud), void *ud)
{
    if (!c) {
        if (cb)
            cb(ud);
        return;
    }
    c->closing = true;
    c->close_cb = cb;
    c->close_ud = ud;
    c->pending_closes++; /* held while the closes are started */
    disc_stop(c);
    c->pending_closes += 2;
    uv_close((uv_handle_t *)&c->notify, notify_closed);
    uv_close((uv_handle_t *)&c->sync_timer, notify_closed);
    closed_one(c);
}
