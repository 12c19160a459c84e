/* SPDX-License-Identifier: Apache-2.0 */
/** Discovery internals shared by the manager and the providers.
 *
 * Loop thread only. A provider is a struct embedding `struct disc__provider`
 * as its first member and a const vtable (`struct disc__provider_ops`). The
 * manager owns every provider: it creates it from one piece of a scrape
 * config, finds it again on reload (by settings signature for shareable
 * kinds, which then feed every job with those settings; with same() for
 * per-job kinds), starts it and closes it (two-phase: close() starts
 * tearing down handles and the provider calls disc__provider_closed() once
 * the last one is gone; the manager frees it).
 *
 * Providers report through disc__emit() (a group, ownership of the target
 * array passes to the manager), disc__synced() (first sync done),
 * disc__error() (a counted error with a message) and disc__count(); the
 * counters are kept per (job, provider kind) and outlive provider restarts
 * so they stay monotonic. */
#ifndef PROFLET_DISCOVERY_INTERNAL_H
#define PROFLET_DISCOVERY_INTERNAL_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "discovery/discovery.h"
#include "net/net.h"

/** Error kinds counted in proflet_discovery_errors_total{kind}. */
enum disc__err_kind {
    DISC_ERR_CONFIG,     /**< bad provider settings (kubeconfig, token file...) */
    DISC_ERR_HTTP,       /**< connection failure or unexpected HTTP status */
    DISC_ERR_AUTH,       /**< 401/403 from the API server */
    DISC_ERR_JSON,       /**< malformed JSON in a list page or a watch line */
    DISC_ERR_TOO_LARGE,  /**< a watch line or list page passed its cap */
    DISC_ERR_EVENT,      /**< unknown watch event type or ERROR event */
    DISC_ERR_DISCONNECT, /**< a watch stream that ended mid-line or too early */
    DISC_ERR_FILE_READ,  /**< a file_sd file could not be read */
    DISC_ERR_FILE_PARSE, /**< a file_sd file did not parse */
    DISC_ERR__N,
};

/** Per (job, provider kind) counters; owned by the manager. A provider
 * shared by several jobs counts in each job's entry. */
struct disc__stats {
    char *job;
    const char *provider;
    uint64_t lists;           /**< completed LISTs (all pages) */
    uint64_t watches;         /**< WATCH requests started */
    uint64_t watch_restarts;  /**< watches that ended and were restarted */
    uint64_t relists_expired; /**< re-lists caused by 410 Gone/Expired */
    uint64_t errors[DISC_ERR__N];
    double last_sync;       /**< unix seconds of the last successful sync, 0 never */
    uint64_t targets_shown; /**< proflet_discovery_targets as a /metrics rendering
                                    summed it when it began that family */
    struct disc__stats *next;
};

/** The counters a provider bumps with disc__count(). */
enum disc__counter {
    DISC_CNT_LISTS,
    DISC_CNT_WATCHES,
    DISC_CNT_WATCH_RESTARTS,
    DISC_CNT_RELISTS_EXPIRED,
};

struct disc__provider;
struct disc__sub;
struct disc__srctab;

struct disc__provider_ops {
    const char *name; /**< "static", "file", "kubernetes" */
    /** Creates a stopped provider for piece `index` of job `job`'s `sd`
     * (for static: all of the job's static configs), under the manager's
     * settings `g`. Copies what it keeps. NULL with a message on failure. */
    struct disc__provider *(*create)(struct disc_manager *m, const struct disc_cfg *g,
                                     const char *job, const struct disc_sd_cfg *sd, unsigned index,
                                     char *err, size_t errlen);
    /** Shareable kinds: a malloc'd string that is equal for two pieces
     * exactly when a provider created from one would serve the other (NULL
     * on OOM). The manager runs one provider per distinct signature and
     * feeds its groups to every job whose pieces give that signature, so
     * such a provider must not depend on the job. NULL for per-job kinds. */
    char *(*signature)(const struct disc_cfg *g, const struct disc_sd_cfg *sd, unsigned index);
    /** Per-job kinds (no signature): true if piece `index` of `sd` has
     * exactly the settings `p` runs with. */
    bool (*same)(const struct disc__provider *p, const struct disc_sd_cfg *sd, unsigned index);
    /** Starts watching/listing. Returns 0 or a negative code with a message. */
    int (*start)(struct disc__provider *p, char *err, size_t errlen);
    /** Stops: no emits after this returns; disc__provider_closed(p) follows
     * (possibly from inside this call) once every handle is closed. */
    void (*close)(struct disc__provider *p);
    /** Frees the provider's own memory (after disc__provider_closed). */
    void (*free)(struct disc__provider *p);
};

/** The base of every provider; manager-owned fields are prefixed `_`. */
struct disc__provider {
    const struct disc__provider_ops *ops;
    struct disc_manager *m;
    char *job;                  /**< the job fed (owned); for a shared provider the
                          *   names of every job it feeds, joined by ',' */
    bool synced;                /**< first sync done */
    size_t n_targets;           /**< targets currently contributed */
    char *_sig;                 /**< shareable kinds: the settings signature */
    struct disc__srctab *_srcs; /**< the provider's groups, by source */
    struct disc__sub *_subs;    /**< the jobs it feeds */
    bool _closing;
    struct disc__provider *_next, *_prev; /**< the manager's list */
    struct disc__pbucket *_bucket;        /**< the manager's index: same kind and key */
    struct disc__provider *_hnext;        /**< next provider of the bucket */
};

/** Initialises the base fields (copies job). Returns 0 or -ENOMEM. */
int disc__provider_init(struct disc__provider *p, const struct disc__provider_ops *ops,
                        struct disc_manager *m, const char *job);
/** Frees what disc__provider_init and the manager attached to the base. */
void disc__provider_done(struct disc__provider *p);

/** Replaces p's contribution to `source` with `targets[0..n)`, for every
 * job p feeds. Takes ownership of `targets` (malloc'd array, each set
 * initialised) even on error; n == 0 (targets may be NULL) deletes the
 * contribution. Returns 0 or -ENOMEM. Never calls the update callback
 * synchronously. */
int disc__emit(struct disc__provider *p, const char *source, struct labels *targets, size_t n);
/** Marks the provider's first sync as done and stamps last_sync. */
void disc__synced(struct disc__provider *p);
/** Stamps last_sync (a later successful sync). */
void disc__touch_sync(struct disc__provider *p);
/** Adds one to counter `c` of every job p feeds. */
void disc__count(struct disc__provider *p, enum disc__counter c);
/** Counts an error of `kind` (for every job p feeds) and reports `fmt` once
 * to the error callback, naming p->job. */
void disc__error(struct disc__provider *p, enum disc__err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** Called by a provider once it has fully closed (from close() or later). */
void disc__provider_closed(struct disc__provider *p);

/** The manager's loop, HTTP client and work queue. */
uv_loop_t *disc__loop(const struct disc_manager *m);
struct net_client *disc__http(const struct disc_manager *m);
struct workq *disc__work(const struct disc_manager *m);

/** Frees an array of `n` label sets (NULL is fine). */
void disc__targets_free(struct labels *t, size_t n);

extern const struct disc__provider_ops disc__static_ops;
extern const struct disc__provider_ops disc__file_ops;
extern const struct disc__provider_ops disc__k8s_ops;

/* ---------------------------------------------------------------- pure parts */

/** One parsed file_sd group. */
struct disc__file_group {
    struct labels *targets;
    size_t n_targets;
};

/** Parses a file_sd document (JSON, or YAML when `yaml`) into groups; every
 * target already merged with its group's labels plus `__meta_filepath`.
 * `*out` is a malloc'd array (free with disc__file_groups_free). Returns 0 or
 * a negative code with a message. */
int disc__file_parse(const char *data, size_t len, bool yaml, const char *path,
                     struct disc__file_group **out, size_t *n_out, char *err, size_t errlen);
/** Frees groups from disc__file_parse. */
void disc__file_groups_free(struct disc__file_group *g, size_t n);

/** Node / namespace metadata attached to pods (attach-metadata). */
struct disc__k8s_meta {
    struct labels labels; /**< already prefixed (__meta_kubernetes_node_...) */
};

/** Builds the targets of a pod (json-c object as served by the API server)
 * as Prometheus does (docs/design.md "Kubernetes discovery"): `*targets` gets a malloc'd array (NULL and
 * 0 for an empty group). `node` / `ns` are the attached metadata or NULL;
 * `need_node` means attach-metadata.node is on, so a pod whose node is
 * unknown (node == NULL) gives an empty group. `mark_terminating` adds
 * DISC_K8S_TERMINATING_LABEL to a pod being deleted. Writes the source
 * ("pod/<ns>/<name>") into `source`. Returns 0, -EINVAL (not a pod) or
 * -ENOMEM. */
int disc__k8s_pod_targets(json_object *pod, const struct disc__k8s_meta *node, bool need_node,
                          const struct disc__k8s_meta *ns, bool mark_terminating, char *source,
                          size_t source_len, struct labels **targets, size_t *n);
/** Builds `__meta_kubernetes_<kind>_{name,label,labelpresent,annotation,
 * annotationpresent}_*` for a node (kind "node", with node_name) or a
 * namespace (kind "namespace", labels and annotations only). */
int disc__k8s_meta_build(json_object *obj, const char *kind, struct disc__k8s_meta *out);

/* ------------------------------------------------------------ json helpers
 * Shared by the Kubernetes client (k8s.c), its connection setup
 * (k8s_conn.c), the pod builder (k8s_pod.c) and file_sd (file.c). Pure. */

/** The member `k` of `o`, or NULL when `o` is not an object or lacks it.
 * Borrowed from `o`. */
json_object *disc__jget(json_object *o, const char *k);
/** The string member `k` of `o`, or `dflt` when it is absent or not a
 * string. Borrowed from `o`. */
const char *disc__jstr(json_object *o, const char *k, const char *dflt);

/** Parses the first YAML document of `data` into a json-c tree (scalars
 * become strings; plain ~/null/empty become NULL). `*out` is owned by the
 * caller (may be NULL for an empty document). Returns 0 or a negative code
 * with a message (line and column for syntax errors). */
int disc__yaml_to_json(const char *data, size_t len, json_object **out, char *err, size_t errlen);

/* ------------------------------------------------ Kubernetes connection */

/** How to reach and authenticate to the Kubernetes API server: in-cluster
 * (service account), a kubeconfig file, or an explicit api-server. Loop
 * thread only; the token and password files are re-read off the loop. */

/** Resolved connection settings; every string owned. */
struct k8s_conn {
    char *server;              /**< base URL without trailing slash */
    char *token;               /**< inline bearer token, or NULL */
    char *token_file;          /**< re-read about every 50 s and after a 401 */
    struct net_secret *bearer; /**< the token in use (from token or token_file) */
    char *username;            /**< basic auth */
    char *password;
    char *password_file;
    struct net_secret *pass; /**< the password in use */
    char *ca_file;
    char *cert_file;
    char *key_file;
    char *server_name;
    bool insecure;
    char *proxy_url;
    struct net_http_cfg http; /**< api-server's client settings (copy), else zero */
    struct net_auth *auth;    /**< their authorization, http-headers, oauth2 */
    char *own_namespace;      /**< from the service account dir, untrimmed; NULL if unknown */
    char *tmp_files[3];       /**< files written from kubeconfig *-data, removed on done */
    struct net_tls tls;       /**< points into the fields above */
};

/** Fills `c` from the config piece (whose combinations were checked at
 * load): reads kubeconfig or the in-cluster environment, and makes the
 * token and password secrets, re-read through `work`. Returns 0 or a
 * negative code with a message. */
int disc__k8s_conn_init(struct k8s_conn *c, uv_loop_t *loop, struct workq *work,
                        const struct disc_k8s_cfg *sd, char *err, size_t errlen);
/** Frees everything and removes temporary files (NULL-safe, idempotent). */
void disc__k8s_conn_done(struct k8s_conn *c);
/** Checks a kubeconfig as disc__k8s_conn_init will use it, without writing
 * anything: it reads and parses, its current context has a cluster with a
 * server, its *-data is base64, and the CA, client certificate and key
 * files it names can be read (libcurl reads them for every connection).
 * Its token file is not required: it is re-read at run time. For the load
 * (discovery/config.c); any thread. Returns 0 or a negative code with a
 * message in `err`. */
int disc__kubeconfig_check(const char *file, char *err, size_t errlen);
/** Decodes standard base64 (whitespace ignored) into a malloc'd buffer. */
int disc__base64_decode(const char *in, size_t n, unsigned char **out, size_t *out_len);

#endif
