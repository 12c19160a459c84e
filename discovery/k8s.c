/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes discovery, role pod: list + watch like client-go's reflector
 * (docs/design.md "Kubernetes discovery"), targets like Prometheus.
 *
 * One provider per distinct `kubernetes-sd-configs` entry: jobs whose
 * entries have the same settings signature (settings_sig()) share one
 * provider, so one list+watch serves them all. It runs informers: one
 * for pods per namespace (or one cluster-wide), plus one for nodes and/or
 * namespaces when attach-metadata asks for them. Metadata informers sync
 * first; pod informers start once they have, so no pod is ever built
 * against a missing node. The provider is synced when every pod informer
 * has completed its first list.
 *
 * An informer's cycle is the reflector's (list, then watch from the list's
 * resourceVersion; relists, re-watches and backoff as in docs/design.md):
 * the watch body is fed chunk by chunk to one json_tokener, each complete
 * event updating the store and the last resourceVersion; each wait of the
 * backoff is drawn from [d, 2d) so that informers that failed together
 * retry apart. A 401 asks for the token file to be re-read.
 *
 * Threading: loop thread only. Requests are never started or cancelled from
 * inside a net callback: every next step goes through the informer's timer.
 * Ownership: the provider owns its informers, their stores (json-c hash
 * tables of entries) and the connection settings. Close cancels requests
 * and closes the timers; the provider is freed after the last close. */
#include <errno.h>
#include <json-c/linkhash.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "discovery/internal.h"

#define LIST_LIMIT 500
#define LIST_TIMEOUT_MS 60000
#define BACKOFF_MIN_MS 800
#define BACKOFF_MAX_MS 30000
#define BACKOFF_RESET_MS 120000
#define DEFAULT_CAP (16u << 20)

enum inf_kind { INF_POD, INF_NODE, INF_NS };
enum next_step { NEXT_LIST, NEXT_WATCH };
enum stop_reason { STOP_NONE, STOP_ERROR_EVENT, STOP_BAD_JSON, STOP_TOO_LARGE, STOP_UNKNOWN };

struct entry {
    char *key;
    unsigned gen;
    json_object *obj;           /* pods, when attach-metadata needs rebuilding */
    char *node;                 /* pods: spec.nodeName (for node re-queues) */
    struct disc__k8s_meta meta; /* nodes and namespaces */
};

struct k8s_provider;

struct informer {
    struct k8s_provider *kp;
    enum inf_kind kind;
    char *path;      /* e.g. /api/v1/namespaces/x/pods */
    char *query_sel; /* "&labelSelector=...&fieldSelector=..." (encoded) or "" */
    struct lh_table *store;
    unsigned gen;
    char *last_rv;
    bool synced;
    bool paginated;
    bool rv_unavailable;
    bool list_no_limit;
    char *list_rv; /* RV the current paginated list started at */
    char *continue_tok;
    struct json_tokener *tok;
    size_t obj_bytes;
    bool partial;
    unsigned events;
    uint64_t watch_start;
    enum stop_reason stop;
    int err_code;
    char err_msg[160];
    bool watching;
    struct net_request *req;
    char *url;
    const char *headers[1];
    uv_timer_t timer;
    enum next_step next;
    uint64_t backoff_ms;
    uint64_t last_backoff;
    struct informer *next_inf;
};

struct k8s_provider {
    struct disc__provider base; /* first */
    struct k8s_conn conn;
    size_t cap;
    bool attach_node;
    bool attach_ns;
    bool mark_terminating; /* clustering: label pods being deleted */
    struct informer *infs;
    struct informer *nodes;
    struct informer *nss;
    unsigned open_handles;
    bool pods_started;
    bool closing;
};

/* ---------------------------------------------------------------- settings */

static char *settings_sig(const struct disc_cfg *g, const struct disc_k8s_cfg *sd)
{
    struct buf b;

    buf_init(&b, 1 << 20);
    buf_printf(&b, "cap=%llu;terminating=%d;", g ? (unsigned long long)g->max_watch_line : 0ull,
               sd->mark_terminating);
    conf_signature(&disc__k8s_entry, sd, &b);
    return b.data ? buf_steal(&b, NULL) : NULL;
}

/* ---------------------------------------------------------------- helpers */

static struct entry *lookup(struct lh_table *t, const char *key)
{
    void *v = NULL;

    return lh_table_lookup_ex(t, key, &v) ? (struct entry *)v : NULL;
}

static void entry_free(struct lh_entry *e)
{
    struct entry *en = (struct entry *)lh_entry_v(e);

    if (!en)
        return;
    json_object_put(en->obj);
    labels_done(&en->meta.labels);
    free(en->node);
    free(en->key);
    free(en);
}

static void set_str(char **dst, const char *v)
{
    char *n = v ? strdup(v) : NULL;

    free(*dst);
    *dst = n;
}

static uint64_t backoff(struct informer *inf)
{
    uint64_t now = uv_now(disc__loop(inf->kp->base.m)), d;

    if (inf->last_backoff && now - inf->last_backoff > BACKOFF_RESET_MS)
        inf->backoff_ms = 0;
    d = inf->backoff_ms ? inf->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (d > BACKOFF_MAX_MS)
        d = BACKOFF_MAX_MS;
    inf->backoff_ms = d;
    inf->last_backoff = now;
    return d + (uint64_t)((double)rand() / ((double)RAND_MAX + 1.0) * (double)d);
}

static void on_inf_timer(uv_timer_t *t);

static void schedule(struct informer *inf, enum next_step step, uint64_t delay_ms)
{
    if (inf->kp->closing)
        return;
    inf->next = step;
    /* Never 0: a 0 ms timer started inside a timer callback would run in the
     * same pass on libuv < 1.48. */
    uv_timer_start(&inf->timer, on_inf_timer, delay_ms ? delay_ms : 1, 0);
}

/* ---------------------------------------------------------------- store */

static const struct disc__k8s_meta *meta_of(struct informer *mi, const char *key)
{
    struct entry *e;

    if (!mi || !key || !*key)
        return NULL;
    e = lookup(mi->store, key);
    return e ? &e->meta : NULL;
}

static void emit_pod(struct informer *inf, json_object *pod)
{
    struct k8s_provider *kp = inf->kp;
    const char *node = disc__jstr(disc__jget(pod, "spec"), "nodeName", "");
    const char *ns = disc__jstr(disc__jget(pod, "metadata"), "namespace", "");
    struct labels *t = NULL;
    size_t n = 0;
    char src[640];
    int rc;

    rc = disc__k8s_pod_targets(pod, kp->attach_node ? meta_of(kp->nodes, node) : NULL,
                               kp->attach_node, kp->attach_ns ? meta_of(kp->nss, ns) : NULL,
                               kp->mark_terminating, src, sizeof(src), &t, &n);
    if (rc == -EINVAL)
        return;
    disc__emit(&kp->base, src, t, n);
}

static void emit_pod_gone(struct informer *inf, const char *key)
{
    char src[640];

    snprintf(src, sizeof(src), "pod/%s", key);
    disc__emit(&inf->kp->base, src, NULL, 0);
}

/* Re-emits the pods that depend on a node / namespace that changed. */
static void requeue_pods(struct k8s_provider *kp, enum inf_kind kind, const char *name)
{
    for (struct informer *inf = kp->infs; inf; inf = inf->next_inf) {
        struct lh_entry *e;

        if (inf->kind != INF_POD)
            continue;
        lh_foreach(inf->store, e)
        {
            struct entry *en = (struct entry *)lh_entry_v(e);
            const char *k = en->key;
            size_t nl = strlen(name);

            if (!en->obj)
                continue;
            if (kind == INF_NODE && (!en->node || strcmp(en->node, name) != 0))
                continue;
            if (kind == INF_NS && !(strncmp(k, name, nl) == 0 && k[nl] == '/'))
                continue;
            emit_pod(inf, en->obj);
        }
    }
}

static void upsert(struct informer *inf, json_object *obj, unsigned gen)
{
    struct k8s_provider *kp = inf->kp;
    json_object *md = disc__jget(obj, "metadata");
    char key[600];
    struct entry *e;

    if (!md)
        return;
    if (inf->kind == INF_POD)
        snprintf(key, sizeof(key), "%s/%s", disc__jstr(md, "namespace", ""),
                 disc__jstr(md, "name", ""));
    else
        snprintf(key, sizeof(key), "%s", disc__jstr(md, "name", ""));
    e = lookup(inf->store, key);
    if (!e) {
        e = calloc(1, sizeof(*e));
        if (!e || !(e->key = strdup(key))) {
            free(e);
            return;
        }
        labels_init(&e->meta.labels);
        if (lh_table_insert(inf->store, e->key, e) < 0) {
            free(e->key);
            free(e);
            return;
        }
    }
    e->gen = gen;
    if (inf->kind == INF_POD) {
        if (kp->attach_node || kp->attach_ns) {
            json_object_put(e->obj);
            e->obj = json_object_get(obj);
            set_str(&e->node, disc__jstr(disc__jget(obj, "spec"), "nodeName", ""));
        }
        emit_pod(inf, obj);
    } else {
        struct disc__k8s_meta m;
        bool same;

        if (disc__k8s_meta_build(obj, inf->kind == INF_NODE ? "node" : "namespace", &m) < 0)
            return;
        same = labels_equal(&m.labels, &e->meta.labels);
        labels_move(&e->meta.labels, &m.labels);
        if (!same && kp->pods_started)
            requeue_pods(kp, inf->kind, key);
    }
}

static void remove_key(struct informer *inf, const char *key)
{
    struct k8s_provider *kp = inf->kp;
    char *k = strdup(key);

    if (!k)
        return;
    if (lh_table_delete(inf->store, k) == 0) {
        if (inf->kind == INF_POD)
            emit_pod_gone(inf, k);
        else if (kp->pods_started)
            requeue_pods(kp, inf->kind, k);
    }
    free(k);
}

static void remove_obj(struct informer *inf, json_object *obj)
{
    json_object *md = disc__jget(obj, "metadata");
    char key[600];

    if (inf->kind == INF_POD)
        snprintf(key, sizeof(key), "%s/%s", disc__jstr(md, "namespace", ""),
                 disc__jstr(md, "name", ""));
    else
        snprintf(key, sizeof(key), "%s", disc__jstr(md, "name", ""));
    remove_key(inf, key);
}

/* After a complete list: everything not seen in it is gone. */
static void prune(struct informer *inf, unsigned gen)
{
    struct lh_entry *e, *tmp;
    char **gone = NULL;
    size_t n = 0, cap = 0;

    lh_foreach_safe(inf->store, e, tmp)
    {
        struct entry *en = (struct entry *)lh_entry_v(e);

        if (en->gen == gen)
            continue;
        if (n == cap) {
            char **g = array_grow(gone, &cap, n, sizeof(*g), 16);

            if (!g)
                break;
            gone = g;
        }
        gone[n] = strdup(en->key);
        if (gone[n])
            n++;
    }
    for (size_t i = 0; i < n; i++) {
        remove_key(inf, gone[i]);
        free(gone[i]);
    }
    free(gone);
}

/* ---------------------------------------------------------------- requests */

static void start_pods(struct k8s_provider *kp);
static void check_synced(struct k8s_provider *kp);

static void fill_opts(struct informer *inf, struct net_request_opts *o)
{
    struct k8s_conn *c = &inf->kp->conn;

    memset(o, 0, sizeof(*o));
    o->url = inf->url;
    inf->headers[0] = "Accept: application/json";
    o->headers = inf->headers;
    o->n_headers = 1;
    o->bearer_token = net_secret_get(c->bearer);
    o->username = c->username;
    o->password = net_secret_get(c->pass);
    o->tls = &c->tls;
    o->proxy_url = c->proxy_url;
    o->no_proxy = c->http.no_proxy;
    /* kubeconfig and in-cluster access honour the environment, as client-go */
    o->proxy_from_environment = c->auth ? c->http.proxy_from_environment : true;
    o->proxy_headers = c->http.proxy_connect_header;
    o->n_proxy_headers = c->http.n_proxy_connect_header;
    o->auth = c->auth;
}

/* After a 401 the token is re-read before the next request; a token file
 * that cannot be read is reported. */
static void refresh_token(struct informer *inf, bool force)
{
    const char *err = net_secret_error(inf->kp->conn.bearer);

    if (force) {
        net_secret_expire(inf->kp->conn.bearer);
        net_auth_expire(inf->kp->conn.auth);
    }
    if (force && err)
        disc__error(&inf->kp->base, DISC_ERR_AUTH, "kubernetes: %s", err);
}

static void on_list_done(struct net_request *req, struct net_response *resp, void *ud);
static void on_watch_done(struct net_request *req, struct net_response *resp, void *ud);
static int on_watch_data(const char *p, size_t n, void *ud);

static void start_request(struct informer *inf, struct buf *url, bool watch, uint64_t timeout_ms)
{
    struct net_request_opts o;
    int rc;

    free(inf->url);
    inf->url = buf_steal(url, NULL);
    if (!inf->url) {
        schedule(inf, watch ? NEXT_WATCH : NEXT_LIST, backoff(inf));
        return;
    }
    fill_opts(inf, &o);
    o.timeout_ms = timeout_ms;
    if (watch) {
        o.on_data = on_watch_data;
        o.max_response = (size_t)INT64_MAX;
    } else {
        o.max_response = inf->kp->cap;
    }
    rc = net_request_start(disc__http(inf->kp->base.m), &o, watch ? on_watch_done : on_list_done,
                           inf, &inf->req);
    if (rc < 0) {
        inf->req = NULL;
        disc__error(&inf->kp->base, DISC_ERR_HTTP, "kubernetes: cannot start request %s: %s",
                    inf->url, strerror(-rc));
        schedule(inf, watch ? NEXT_WATCH : NEXT_LIST, backoff(inf));
    }
}

static void do_list(struct informer *inf)
{
    struct buf url;
    const char *rv;
    bool limit;

    buf_init(&url, 1 << 16);
    buf_printf(&url, "%s%s?", inf->kp->conn.server, inf->path);
    if (inf->continue_tok) {
        buf_printf(&url, "limit=%d&continue=", LIST_LIMIT);
        buf_append_pct(&url, inf->continue_tok, strlen(inf->continue_tok));
    } else {
        rv = inf->rv_unavailable ? "" : inf->last_rv ? inf->last_rv : "0";
        limit = !inf->list_no_limit && (rv[0] == '\0' || strcmp(rv, "0") == 0 || inf->paginated);
        if (inf->list_no_limit && inf->list_rv)
            rv = inf->list_rv;
        set_str(&inf->list_rv, rv);
        inf->gen++;
        if (limit)
            buf_printf(&url, "limit=%d&", LIST_LIMIT);
        if (rv[0]) {
            buf_puts(&url, "resourceVersion=");
            buf_append_pct(&url, rv, strlen(rv));
            buf_puts(&url, "&");
        }
    }
    buf_puts(&url, inf->query_sel);
    /* Drop a trailing separator. */
    while (url.len && (url.data[url.len - 1] == '&' || url.data[url.len - 1] == '?'))
        url.data[--url.len] = '\0';
    inf->watching = false;
    start_request(inf, &url, false, LIST_TIMEOUT_MS);
}

static void do_watch(struct informer *inf)
{
    struct buf url;
    unsigned t = 300 + (unsigned)(rand() % 300);

    buf_init(&url, 1 << 16);
    buf_printf(&url, "%s%s?watch=true&allowWatchBookmarks=true&timeoutSeconds=%u&",
               inf->kp->conn.server, inf->path, t);
    if (inf->last_rv && inf->last_rv[0]) {
        buf_puts(&url, "resourceVersion=");
        buf_append_pct(&url, inf->last_rv, strlen(inf->last_rv));
        buf_puts(&url, "&");
    }
    buf_puts(&url, inf->query_sel);
    while (url.len && url.data[url.len - 1] == '&')
        url.data[--url.len] = '\0';
    json_tokener_reset(inf->tok);
    inf->obj_bytes = 0;
    inf->partial = false;
    inf->events = 0;
    inf->stop = STOP_NONE;
    inf->err_code = 0;
    inf->watch_start = uv_now(disc__loop(inf->kp->base.m));
    inf->watching = true;
    disc__count(&inf->kp->base, DISC_CNT_WATCHES);
    start_request(inf, &url, true, (uint64_t)(t + 60) * 1000);
}

static void on_inf_timer(uv_timer_t *t)
{
    struct informer *inf = t->data;

    if (inf->kp->closing || inf->req)
        return;
    if (inf->next == NEXT_LIST)
        do_list(inf);
    else
        do_watch(inf);
}

static bool is_expired(long status, const char *body)
{
    return status == 410 || (body && (strstr(body, "\"Expired\"") || strstr(body, "\"Gone\"")));
}

static bool too_large_rv(const char *body)
{
    return body &&
           (strstr(body, "Too large resource version") || strstr(body, "ResourceVersionTooLarge"));
}

static void on_list_done(struct net_request *req, struct net_response *resp, void *ud)
{
    struct informer *inf = ud;
    struct k8s_provider *kp = inf->kp;
    json_object *root = NULL, *items, *md;
    const char *body = resp->body.data, *cont;

    inf->req = NULL;
    if (resp->result < 0) {
        disc__error(&kp->base, resp->result == NET_ETOOLARGE ? DISC_ERR_TOO_LARGE : DISC_ERR_HTTP,
                    "kubernetes: list %s: %s", inf->url, resp->error ? resp->error : "failed");
        goto relist_later;
    }
    if (resp->status == 401 || resp->status == 403) {
        disc__error(&kp->base, DISC_ERR_AUTH, "kubernetes: list %s: HTTP %ld", inf->url,
                    resp->status);
        if (resp->status == 401)
            refresh_token(inf, true);
        goto relist_later;
    }
    if (resp->status != 200) {
        if (is_expired(resp->status, body) || too_large_rv(body)) {
            if (inf->continue_tok && is_expired(resp->status, body)) {
                /* Expired continue token: one unpaginated list at the
                 * original resourceVersion. */
                free(inf->continue_tok);
                inf->continue_tok = NULL;
                inf->list_no_limit = true;
            } else {
                inf->rv_unavailable = true;
                inf->list_no_limit = false;
                free(inf->continue_tok);
                inf->continue_tok = NULL;
            }
            disc__count(&kp->base, DISC_CNT_RELISTS_EXPIRED);
            schedule(inf, NEXT_LIST, 0);
            return;
        }
        disc__error(&kp->base, DISC_ERR_HTTP, "kubernetes: list %s: HTTP %ld", inf->url,
                    resp->status);
        goto relist_later;
    }
    root = json_tokener_parse(body ? body : "");
    items = disc__jget(root, "items");
    md = disc__jget(root, "metadata");
    if (!root || !md || (items && !json_object_is_type(items, json_type_array))) {
        disc__error(&kp->base, DISC_ERR_JSON, "kubernetes: list %s: malformed response", inf->url);
        goto relist_later;
    }
    for (size_t i = 0; items && i < json_object_array_length(items); i++)
        upsert(inf, json_object_array_get_idx(items, i), inf->gen);
    cont = disc__jstr(md, "continue", "");
    if (cont[0]) {
        if (!inf->continue_tok)
            inf->paginated = true;
        set_str(&inf->continue_tok, cont);
        json_object_put(root);
        schedule(inf, NEXT_LIST, 0);
        return;
    }
    free(inf->continue_tok);
    inf->continue_tok = NULL;
    set_str(&inf->last_rv, disc__jstr(md, "resourceVersion", ""));
    json_object_put(root);
    prune(inf, inf->gen);
    inf->rv_unavailable = false;
    inf->list_no_limit = false;
    disc__count(&kp->base, DISC_CNT_LISTS);
    if (!inf->synced) {
        inf->synced = true;
        if (inf->kind != INF_POD)
            start_pods(kp);
        check_synced(kp);
    } else {
        disc__touch_sync(&kp->base);
    }
    schedule(inf, NEXT_WATCH, 0);
    return;
relist_later:
    json_object_put(root);
    free(inf->continue_tok);
    inf->continue_tok = NULL;
    schedule(inf, NEXT_LIST, backoff(inf));
}

/* Handles one watch event. Returns 0 to go on, -1 to stop the stream. */
static int handle_event(struct informer *inf, json_object *ev)
{
    const char *type = disc__jstr(ev, "type", "");
    json_object *obj = disc__jget(ev, "object");
    const char *rv;

    if (!type[0] && strcmp(disc__jstr(ev, "kind", ""), "Status") == 0) {
        /* An HTTP error body: handled by on_watch_done from the status. */
        inf->stop = STOP_ERROR_EVENT;
        inf->err_code = (int)json_object_get_int(disc__jget(ev, "code"));
        return -1;
    }
    if (strcmp(type, "ERROR") == 0) {
        inf->stop = STOP_ERROR_EVENT;
        inf->err_code = (int)json_object_get_int(disc__jget(obj, "code"));
        snprintf(inf->err_msg, sizeof(inf->err_msg), "%s", disc__jstr(obj, "message", ""));
        return -1;
    }
    if (!obj || !json_object_is_type(obj, json_type_object) ||
        (strcmp(type, "ADDED") && strcmp(type, "MODIFIED") && strcmp(type, "DELETED") &&
         strcmp(type, "BOOKMARK"))) {
        inf->stop = STOP_UNKNOWN;
        snprintf(inf->err_msg, sizeof(inf->err_msg), "unknown watch event type \"%.64s\"", type);
        return -1;
    }
    inf->events++;
    rv = disc__jstr(disc__jget(obj, "metadata"), "resourceVersion", "");
    if (rv[0])
        set_str(&inf->last_rv, rv);
    if (strcmp(type, "DELETED") == 0)
        remove_obj(inf, obj);
    else if (strcmp(type, "BOOKMARK") != 0)
        upsert(inf, obj, inf->gen);
    return 0;
}

static bool all_space(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\n' && p[i] != '\r' && p[i] != '\t')
            return false;
    return true;
}

static int on_watch_data(const char *p, size_t n, void *ud)
{
    struct informer *inf = ud;

    if (inf->kp->closing)
        return -1;
    while (n > 0) {
        size_t chunk = n > INT32_MAX ? INT32_MAX : n, used;
        json_object *ev = json_tokener_parse_ex(inf->tok, p, (int)chunk);
        enum json_tokener_error err = json_tokener_get_error(inf->tok);

        if (err == json_tokener_continue) {
            if (!all_space(p, chunk))
                inf->partial = true;
            inf->obj_bytes += chunk;
            if (inf->obj_bytes > inf->kp->cap) {
                inf->stop = STOP_TOO_LARGE;
                return -1;
            }
            p += chunk;
            n -= chunk;
            continue;
        }
        if (err != json_tokener_success) {
            inf->stop = STOP_BAD_JSON;
            snprintf(inf->err_msg, sizeof(inf->err_msg), "%s", json_tokener_error_desc(err));
            return -1;
        }
        used = json_tokener_get_parse_end(inf->tok);
        if (used == 0 || used > chunk)
            used = chunk;
        inf->obj_bytes += used;
        if (inf->obj_bytes > inf->kp->cap) {
            json_object_put(ev);
            inf->stop = STOP_TOO_LARGE;
            return -1;
        }
        json_tokener_reset(inf->tok);
        inf->obj_bytes = 0;
        inf->partial = false;
        p += used;
        n -= used;
        if (!ev || !json_object_is_type(ev, json_type_object)) {
            json_object_put(ev);
            inf->stop = STOP_BAD_JSON;
            snprintf(inf->err_msg, sizeof(inf->err_msg), "watch event is not an object");
            return -1;
        }
        if (handle_event(inf, ev) < 0) {
            json_object_put(ev);
            return -1;
        }
        json_object_put(ev);
    }
    return 0;
}

static void on_watch_done(struct net_request *req, struct net_response *resp, void *ud)
{
    struct informer *inf = ud;
    struct k8s_provider *kp = inf->kp;
    uint64_t dur = uv_now(disc__loop(kp->base.m)) - inf->watch_start;

    inf->req = NULL;
    disc__count(&kp->base, DISC_CNT_WATCH_RESTARTS);
    if (resp->status == 401 || resp->status == 403) {
        disc__error(&kp->base, DISC_ERR_AUTH, "kubernetes: watch %s: HTTP %ld", inf->path,
                    resp->status);
        if (resp->status == 401)
            refresh_token(inf, true);
        schedule(inf, NEXT_LIST, backoff(inf));
        return;
    }
    if (resp->status == 429 || (inf->stop == STOP_ERROR_EVENT && inf->err_code == 429)) {
        disc__error(&kp->base, DISC_ERR_HTTP, "kubernetes: watch %s: too many requests", inf->path);
        schedule(inf, NEXT_WATCH, backoff(inf));
        return;
    }
    if (resp->status == 410 || (inf->stop == STOP_ERROR_EVENT && inf->err_code == 410)) {
        /* Expired: re-list at the last resourceVersion (a 410 on that list
         * falls back to ""), after a backoff, as the reflector does. */
        disc__count(&kp->base, DISC_CNT_RELISTS_EXPIRED);
        schedule(inf, NEXT_LIST, backoff(inf));
        return;
    }
    switch (inf->stop) {
    case STOP_ERROR_EVENT:
        disc__error(&kp->base, DISC_ERR_EVENT, "kubernetes: watch %s: ERROR %d %s", inf->path,
                    inf->err_code, inf->err_msg);
        schedule(inf, NEXT_LIST, backoff(inf));
        return;
    case STOP_BAD_JSON:
        disc__error(&kp->base, DISC_ERR_JSON, "kubernetes: watch %s: malformed event: %s",
                    inf->path, inf->err_msg);
        schedule(inf, NEXT_LIST, backoff(inf));
        return;
    case STOP_TOO_LARGE:
        disc__error(&kp->base, DISC_ERR_TOO_LARGE, "kubernetes: watch %s: event over %zu bytes",
                    inf->path, kp->cap);
        schedule(inf, NEXT_LIST, backoff(inf));
        return;
    case STOP_UNKNOWN:
        disc__error(&kp->base, DISC_ERR_EVENT, "kubernetes: watch %s: %s", inf->path, inf->err_msg);
        schedule(inf, NEXT_LIST, backoff(inf));
        return;
    case STOP_NONE:
        break;
    }
    if (resp->result == NET_ECONNECT) {
        disc__error(&kp->base, DISC_ERR_HTTP, "kubernetes: watch %s: %s", inf->path,
                    resp->error ? resp->error : "connection refused");
        schedule(inf, NEXT_WATCH, backoff(inf));
        return;
    }
    if (resp->result < 0 || inf->partial) {
        disc__error(&kp->base, inf->partial ? DISC_ERR_DISCONNECT : DISC_ERR_HTTP,
                    "kubernetes: watch %s: %s%s", inf->path,
                    resp->result < 0 && resp->error ? resp->error : "stream ended",
                    inf->partial ? " in the middle of an event" : "");
        schedule(inf, NEXT_LIST, backoff(inf));
        return;
    }
    if (resp->status != 200) {
        disc__error(&kp->base, DISC_ERR_HTTP, "kubernetes: watch %s: HTTP %ld", inf->path,
                    resp->status);
        schedule(inf, NEXT_LIST, backoff(inf));
        return;
    }
    if (inf->events == 0 && dur < 1000) {
        disc__error(&kp->base, DISC_ERR_DISCONNECT,
                    "kubernetes: watch %s: closed after %llu ms without any event", inf->path,
                    (unsigned long long)dur);
        schedule(inf, NEXT_LIST, backoff(inf));
        return;
    }
    /* A clean end (server timeout): watch again at once from the last RV. */
    schedule(inf, NEXT_WATCH, 0);
}

/* ---------------------------------------------------------------- provider */

static struct informer *inf_new(struct k8s_provider *kp, enum inf_kind kind, const char *ns,
                                const char *label, const char *field)
{
    struct informer *inf = calloc(1, sizeof(*inf));
    struct buf q;
    char path[600];

    if (!inf)
        return NULL;
    inf->kp = kp;
    inf->kind = kind;
    if (kind == INF_POD && ns)
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", ns);
    else
        snprintf(path, sizeof(path), "/api/v1/%s",
                 kind == INF_POD    ? "pods"
                 : kind == INF_NODE ? "nodes"
                                    : "namespaces");
    inf->path = strdup(path);
    buf_init(&q, 1 << 16);
    if (label && *label) {
        buf_puts(&q, "labelSelector=");
        buf_append_pct(&q, label, strlen(label));
        buf_puts(&q, "&");
    }
    if (field && *field) {
        buf_puts(&q, "fieldSelector=");
        buf_append_pct(&q, field, strlen(field));
        buf_puts(&q, "&");
    }
    inf->query_sel = q.data ? buf_steal(&q, NULL) : strdup("");
    inf->store = lh_kchar_table_new(64, entry_free);
    inf->tok = json_tokener_new();
    if (!inf->path || !inf->query_sel || !inf->store || !inf->tok) {
        free(inf->path);
        free(inf->query_sel);
        if (inf->store)
            lh_table_free(inf->store);
        if (inf->tok)
            json_tokener_free(inf->tok);
        free(inf);
        return NULL;
    }
    inf->next_inf = kp->infs;
    kp->infs = inf;
    return inf;
}

static void inf_free(struct informer *inf)
{
    free(inf->path);
    free(inf->query_sel);
    lh_table_free(inf->store);
    json_tokener_free(inf->tok);
    free(inf->last_rv);
    free(inf->list_rv);
    free(inf->continue_tok);
    free(inf->url);
    free(inf);
}

static void kp_free(struct disc__provider *bp)
{
    struct k8s_provider *kp = (struct k8s_provider *)bp;

    if (!kp)
        return;
    while (kp->infs) {
        struct informer *n = kp->infs->next_inf;

        inf_free(kp->infs);
        kp->infs = n;
    }
    disc__k8s_conn_done(&kp->conn);
    disc__provider_done(&kp->base);
    free(kp);
}

static const struct disc_k8s_selector_cfg *selector(const struct disc_k8s_cfg *sd, const char *role)
{
    for (unsigned i = 0; i < sd->n_selectors; i++)
        if (sd->selectors[i].role && strcmp(sd->selectors[i].role, role) == 0)
            return &sd->selectors[i];
    return NULL;
}

static struct disc__provider *kp_create(struct disc_manager *m, const struct disc_cfg *g,
                                        const char *job, const struct disc_sd_cfg *sdc,
                                        unsigned index, char *err, size_t errlen)
{
    const struct disc_k8s_cfg *sd = &sdc->k8s_sd[index];
    struct k8s_provider *kp;
    const struct disc_k8s_selector_cfg *ps = selector(sd, "pod"), *ns_sel = selector(sd, "node");
    int rc;

    /* role, selector roles and duplicates were checked when the file was
     * loaded (discovery/config.c). */
    kp = calloc(1, sizeof(*kp));
    if (!kp || disc__provider_init(&kp->base, &disc__k8s_ops, m, job) < 0) {
        free(kp);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    rc = disc__k8s_conn_init(&kp->conn, disc__loop(m), disc__work(m), sd, err, errlen);
    if (rc < 0) {
        disc__provider_done(&kp->base);
        free(kp);
        return NULL;
    }
    kp->cap = g && g->max_watch_line ? (size_t)g->max_watch_line : DEFAULT_CAP;
    kp->attach_node = sd->attach_node;
    kp->attach_ns = sd->attach_namespace;
    kp->mark_terminating = sd->mark_terminating;
    if (kp->attach_ns && !(kp->nss = inf_new(kp, INF_NS, NULL, NULL, NULL)))
        goto oom;
    if (kp->attach_node && !(kp->nodes = inf_new(kp, INF_NODE, NULL, ns_sel ? ns_sel->label : NULL,
                                                 ns_sel ? ns_sel->field : NULL)))
        goto oom;
    if (sd->n_namespaces || sd->own_namespace) {
        for (unsigned i = 0; i < sd->n_namespaces; i++)
            if (!inf_new(kp, INF_POD, sd->namespaces[i], ps ? ps->label : NULL,
                         ps ? ps->field : NULL))
                goto oom;
        if (sd->own_namespace && kp->conn.own_namespace &&
            !inf_new(kp, INF_POD, kp->conn.own_namespace, ps ? ps->label : NULL,
                     ps ? ps->field : NULL))
            goto oom;
    } else if (!inf_new(kp, INF_POD, NULL, ps ? ps->label : NULL, ps ? ps->field : NULL)) {
        goto oom;
    }
    return &kp->base;
oom:
    snprintf(err, errlen, "out of memory");
    kp_free(&kp->base);
    return NULL;
}

static char *kp_signature(const struct disc_cfg *g, const struct disc_sd_cfg *sd, unsigned index)
{
    return settings_sig(g, &sd->k8s_sd[index]);
}

static void check_synced(struct k8s_provider *kp)
{
    if (!kp->pods_started)
        return;
    for (struct informer *inf = kp->infs; inf; inf = inf->next_inf)
        if (!inf->synced)
            return;
    disc__synced(&kp->base);
}

static void start_pods(struct k8s_provider *kp)
{
    if (kp->pods_started)
        return;
    for (struct informer *inf = kp->infs; inf; inf = inf->next_inf)
        if (inf->kind != INF_POD && !inf->synced)
            return;
    kp->pods_started = true;
    for (struct informer *inf = kp->infs; inf; inf = inf->next_inf)
        if (inf->kind == INF_POD)
            schedule(inf, NEXT_LIST, 0);
}

static int kp_start(struct disc__provider *bp, char *err, size_t errlen)
{
    struct k8s_provider *kp = (struct k8s_provider *)bp;
    uv_loop_t *loop = disc__loop(bp->m);

    if (!disc__http(bp->m)) {
        snprintf(err, errlen, "no HTTP client");
        return -EINVAL;
    }
    for (struct informer *inf = kp->infs; inf; inf = inf->next_inf) {
        uv_timer_init(loop, &inf->timer);
        inf->timer.data = inf;
        kp->open_handles++;
    }
    if (!kp->nodes && !kp->nss)
        start_pods(kp);
    else
        for (struct informer *inf = kp->infs; inf; inf = inf->next_inf)
            if (inf->kind != INF_POD)
                schedule(inf, NEXT_LIST, 0);
    return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
    struct informer *inf = h->data;
    struct k8s_provider *kp = inf->kp;

    if (--kp->open_handles == 0)
        disc__provider_closed(&kp->base);
}

static void kp_close(struct disc__provider *bp)
{
    struct k8s_provider *kp = (struct k8s_provider *)bp;

    kp->closing = true;
    if (kp->open_handles == 0) {
        disc__provider_closed(bp);
        return;
    }
    for (struct informer *inf = kp->infs; inf; inf = inf->next_inf) {
        if (inf->req) {
            net_request_cancel(inf->req);
            inf->req = NULL;
        }
        uv_close((uv_handle_t *)&inf->timer, on_timer_closed);
    }
}

const struct disc__provider_ops disc__k8s_ops = {
    .name = "kubernetes",
    .create = kp_create,
    .signature = kp_signature,
    .start = kp_start,
    .close = kp_close,
    .free = kp_free,
};
