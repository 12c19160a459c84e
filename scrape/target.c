/* SPDX-License-Identifier: Apache-2.0 */
/* Target building: one discovered target + its scrape config -> the
 * (target, profile type) pairs to scrape.
 *
 * The steps follow Prometheus' PopulateLabels with the Pyroscope/Alloy
 * conventions on top (docs/design.md "Targets, labels and scheduling";
 * docs/config.md "Targets and labels"). Each enabled profile type then
 * becomes a pair, with per-target overrides from
 * `__profile_<name>_{enabled,path,param_<k>}` (canonical name or alias), a
 * query built once per key, the sent labels, a de-duplication key and the
 * scrape-offset hash.
 *
 * Pure: no libuv, no curl, no logging. A target_result owns everything in
 * it except `pair->profile`, which is borrowed from the config and must
 * outlive the result. */
#include "scrape/internal.h"

#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/duration.h"
#include "common/intern.h"
#include "common/utf8.h"

#define FNV64_BASIS 14695981039346656037ULL
#define FNV64_PRIME 1099511628211ULL
#define MAX_URL 8192

/* Alloy's inferServiceName chain; the first pair is joined with "/". */
static const char *const service_name_labels[] = {
    "__meta_kubernetes_pod_annotation_pyroscope_io_service_name",
    NULL, /* namespace + "/" + container */
    "__meta_docker_container_name",
    "__meta_dockerswarm_container_label_service_name",
    "__meta_dockerswarm_service_name",
};

static uint64_t fnv64a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;

    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= FNV64_PRIME;
    }
    return h;
}

uint64_t scrape_offset_seed(const char *hostname, const struct labels *external)
{
    uint64_t h = fnv64a(FNV64_BASIS, hostname ? hostname : "", hostname ? strlen(hostname) : 0);
    char *s = external && external->n ? labels_to_string(external) : NULL;

    h = s ? fnv64a(h, s, strlen(s)) : fnv64a(h, "{}", 2);
    free(s);
    return h;
}

uint64_t target_offset_ns(uint64_t offset_hash, uint64_t seed, uint64_t interval_ns)
{
    return interval_ns ? (offset_hash ^ seed) % interval_ns : 0;
}

uint64_t target_first_delay_ns(uint64_t offset_ns, uint64_t interval_ns, uint64_t now_unix_ns)
{
    uint64_t base, next;

    if (interval_ns == 0)
        return 0;
    base = interval_ns - now_unix_ns % interval_ns;
    next = base + offset_ns % interval_ns;
    if (next > interval_ns)
        next -= interval_ns;
    return next;
}

/* ---------------------------------------------------------------------- */

static void pairs_free(struct target_pair *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        labels_done(&p[i].labels);
        free(p[i].url);
    }
    free(p);
}

void target_result_done(struct target_result *r)
{
    if (!r)
        return;
    labels_done(&r->discovered);
    labels_done(&r->labels);
    free(r->error);
    intern_unref(r->owner);
    pairs_free(r->pairs, r->n_pairs);
    memset(r, 0, sizeof(*r));
}

void target_pairs_clear(struct target_result *r)
{
    pairs_free(r->pairs, r->n_pairs);
    r->pairs = NULL;
    r->n_pairs = 0;
}

static int set_error(struct target_result *out, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int set_error(struct target_result *out, const char *fmt, ...)
{
    va_list ap;
    char msg[1024];

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    free(out->error);
    out->error = strdup(msg);
    return out->error ? 0 : -ENOMEM;
}

/* Go's net.SplitHostPort. Returns true and the host span on success. */
static bool split_host_port(const char *s, size_t *host_off, size_t *host_len)
{
    const char *last = strrchr(s, ':');
    size_t i, j = 0, k = 0;

    if (!last)
        return false;
    i = (size_t)(last - s);
    if (s[0] == '[') {
        const char *end = strchr(s, ']');

        if (!end || (size_t)(end - s) + 1 != i)
            return false;
        *host_off = 1;
        *host_len = (size_t)(end - s) - 1;
        j = 1;
        k = (size_t)(end - s) + 1;
    } else {
        if (memchr(s, ':', i))
            return false;
        *host_off = 0;
        *host_len = i;
    }
    if (strchr(s + j, '['))
        return false;
    if (strchr(s + k, ']'))
        return false;
    return true;
}

/* Go's net.JoinHostPort. */
static char *join_host_port(const char *host, size_t hlen, const char *port)
{
    bool v6 = memchr(host, ':', hlen) != NULL;
    size_t n = hlen + strlen(port) + 4;
    char *s = malloc(n);

    if (s)
        snprintf(s, n, "%s%.*s%s:%s", v6 ? "[" : "", (int)hlen, host, v6 ? "]" : "", port);
    return s;
}

/* Go's %q for the error messages Prometheus formats with it. */
static void quote(const char *s, char *out, size_t outlen)
{
    size_t o = 0;

    if (outlen < 3)
        return;
    out[o++] = '"';
    for (; *s && o + 8 < outlen; s++) {
        unsigned char c = (unsigned char)*s;
        uint32_t r;
        bool invalid;
        size_t w = utf8_decode(s, strnlen(s, UTF8_MAX_LEN), &r, &invalid);

        if (c == '"' || c == '\\') {
            o += (size_t)snprintf(out + o, outlen - o, "\\%c", c);
        } else if (c < 0x20 || c == 0x7F || invalid) {
            o += (size_t)snprintf(out + o, outlen - o, "\\x%02x", c);
        } else {
            for (size_t i = 0; i < w && o + 1 < outlen; i++)
                out[o++] = s[i];
            s += w - 1;
        }
    }
    out[o++] = '"';
    out[o] = '\0';
}

/* Query parameters: key -> values, each key once. */
struct qparam {
    const char *key;
    const char **values;
    size_t n;
    char *owned; /* a value we formatted ourselves */
};

struct query {
    struct qparam *v;
    size_t n;
};

static void query_done(struct query *q)
{
    for (size_t i = 0; i < q->n; i++) {
        free(q->v[i].values);
        free(q->v[i].owned);
    }
    free(q->v);
    q->v = NULL;
    q->n = 0;
}

static struct qparam *query_find(struct query *q, const char *key, size_t klen)
{
    for (size_t i = 0; i < q->n; i++)
        if (strlen(q->v[i].key) == klen && memcmp(q->v[i].key, key, klen) == 0)
            return &q->v[i];
    return NULL;
}

/* Replaces the whole value list of `key`. `key` and values are borrowed. */
static int query_set_all(struct query *q, const char *key, char *const *values, size_t n)
{
    struct qparam *p = query_find(q, key, strlen(key));
    const char **vals = calloc(n ? n : 1, sizeof(char *));

    if (!vals)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        vals[i] = values[i];
    if (!p) {
        struct qparam *nv = realloc(q->v, (q->n + 1) * sizeof(*nv));

        if (!nv) {
            free(vals);
            return -ENOMEM;
        }
        q->v = nv;
        p = &q->v[q->n++];
        memset(p, 0, sizeof(*p));
        p->key = key;
    }
    free(p->values);
    p->values = vals;
    p->n = n;
    return 0;
}

/* Sets the first value of `key` (as Alloy does for `__param_<k>`). */
static int query_set_first(struct query *q, const char *key, const char *value)
{
    struct qparam *p = query_find(q, key, strlen(key));

    if (p && p->n) {
        p->values[0] = value;
        return 0;
    }
    return query_set_all(q, key, (char *const *)&value, 1);
}

static int qparam_cmp(const void *a, const void *b)
{
    return strcmp(((const struct qparam *)a)->key, ((const struct qparam *)b)->key);
}

/* Go's url.QueryEscape. */
static int query_escape(struct buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = 0;

    for (; *s && rc == 0; s++) {
        unsigned char c = (unsigned char)*s;

        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~') {
            rc = buf_append(b, s, 1);
        } else if (c == ' ') {
            rc = buf_append(b, "+", 1);
        } else {
            char e[3] = { '%', hex[c >> 4], hex[c & 15] };

            rc = buf_append(b, e, 3);
        }
    }
    return rc;
}

/* Go's url.Values.Encode: keys sorted, each value k=v, joined by '&'. */
static int query_encode(struct query *q, struct buf *b)
{
    bool first = true;
    int rc = 0;

    qsort(q->v, q->n, sizeof(q->v[0]), qparam_cmp);
    for (size_t i = 0; i < q->n && rc == 0; i++) {
        for (size_t j = 0; j < q->v[i].n && rc == 0; j++) {
            if (!first)
                rc = buf_append(b, "&", 1);
            first = false;
            if (rc == 0)
                rc = query_escape(b, q->v[i].key);
            if (rc == 0)
                rc = buf_append(b, "=", 1);
            if (rc == 0)
                rc = query_escape(b, q->v[i].values[j]);
        }
    }
    return rc;
}

/* The label names a profile answers to in `__profile_<name>_*`. */
static size_t profile_names(const struct scrape_profile_cfg *p, const char **names, size_t max)
{
    names[0] = p->name;
    return 1 + scrape__profile_aliases(p->name, names + 1, max - 1);
}

/* Value of `__profile_<name>_<suffix>` for the first name that has one. */
static const char *profile_label(const struct labels *ls, const char *const *names, size_t n,
                                 const char *suffix)
{
    char key[512];

    for (size_t i = 0; i < n; i++) {
        const char *v;

        snprintf(key, sizeof(key), "__profile_%s_%s", names[i], suffix);
        if ((v = labels_get(ls, key)) != NULL)
            return v;
    }
    return NULL;
}

static int join_path(struct buf *b, const char *prefix, const char *path)
{
    size_t pl = prefix ? strlen(prefix) : 0;
    int rc = 0;

    while (pl && prefix[pl - 1] == '/')
        pl--;
    if (pl) {
        if (prefix[0] != '/')
            rc = buf_append(b, "/", 1);
        if (rc == 0)
            rc = buf_append(b, prefix, pl);
    }
    if (rc == 0 && (!path || path[0] != '/'))
        rc = buf_append(b, "/", 1);
    if (rc == 0 && path)
        rc = buf_puts(b, path);
    return rc;
}

/* A duration profile's `seconds`, from the configuration or a target's
 * labels (which any pod owner can set): a whole number from 1 to one second
 * below the interval, as Alloy requires of its delta_profiling_duration, so
 * a profile always ends before the next scrape starts and the timeout
 * (scrape-timeout + seconds) cannot overflow. */
static int parse_seconds(const char *v, uint64_t interval_ms, uint64_t *out)
{
    uint64_t n = 0;

    if (!*v)
        return -1;
    for (const char *c = v; *c; c++) {
        if (*c < '0' || *c > '9' || n > interval_ms / 1000)
            return -1;
        n = n * 10 + (uint64_t)(*c - '0');
    }
    if (n < 1 || n * 1000 + 1000 > interval_ms)
        return -1;
    *out = n;
    return 0;
}

/* Builds one pair. Returns 1 if built, 0 if the profile is disabled for this
 * target, PAIR_DROPPED if profile-relabel-configs dropped it, PAIR_NAMELESS
 * if they left it without a __name__, or a negative code. */
static int build_pair(const struct scrape_job_cfg *sc, const struct scrape_profile_cfg *p,
                      const struct labels *tl, const char *service_name, uint64_t interval_ms,
                      uint64_t timeout_ms, struct target_pair *pair)
{
    const char *names[4];
    size_t nn = profile_names(p, names, 4);
    const char *enabled = profile_label(tl, names, nn, "enabled");
    const char *path = profile_label(tl, names, nn, "path");
    const char *scheme = labels_get(tl, "__scheme__");
    const char *addr = labels_get(tl, "__address__");
    const char *spy = labels_get(tl, "__spy_name__");
    struct query q = { NULL, 0 };
    struct labels hashed = LABELS_INIT;
    struct buf url, pathbuf, s;
    int rc = 0;

    bool on = p->enabled;

    if (enabled && strcmp(enabled, "true") == 0)
        on = true;
    else if (enabled && strcmp(enabled, "false") == 0)
        on = false; /* anything else leaves the config's choice */
    if (!on)
        return 0;
    if (!path)
        path = labels_get(tl, "__profile_path__");
    if (!path)
        path = p->path;
    memset(pair, 0, sizeof(*pair));
    labels_init(&pair->labels);
    buf_init(&url, MAX_URL);
    buf_init(&pathbuf, MAX_URL);
    buf_init(&s, MAX_URL + 64);

    /* query: profile params < job params < __param_<k> < __profile_<n>_param_<k> */
    for (unsigned i = 0; i < p->n_params && rc == 0; i++)
        rc = query_set_all(&q, p->params[i].key, p->params[i].values, p->params[i].n_values);
    for (unsigned i = 0; i < sc->n_params && rc == 0; i++)
        rc = query_set_all(&q, sc->params[i].key, sc->params[i].values, sc->params[i].n_values);
    for (size_t i = 0; i < tl->n && rc == 0; i++)
        if (strncmp(tl->v[i].name, "__param_", 8) == 0 && tl->v[i].name[8])
            rc = query_set_first(&q, tl->v[i].name + 8, tl->v[i].value);
    for (size_t k = nn; k-- > 0 && rc == 0;) {
        char pre[256];
        size_t pl = (size_t)snprintf(pre, sizeof(pre), "__profile_%s_param_", names[k]);

        for (size_t i = 0; i < tl->n && rc == 0; i++)
            if (strncmp(tl->v[i].name, pre, pl) == 0 && tl->v[i].name[pl])
                rc = query_set_first(&q, tl->v[i].name + pl, tl->v[i].value);
    }
    if (rc < 0)
        goto out;
    if (p->delta) {
        struct qparam *sp = query_find(&q, "seconds", 7);

        if (!sp || sp->n == 0) {
            char secs[32];
            uint64_t sec = interval_ms / 1000 > 1 ? interval_ms / 1000 - 1 : 1;

            snprintf(secs, sizeof(secs), "%llu", (unsigned long long)sec);
            if ((rc = query_set_first(&q, "seconds", secs)) < 0)
                goto out;
            sp = query_find(&q, "seconds", 7);
            sp->owned = strdup(secs);
            if (!sp->owned) {
                rc = -ENOMEM;
                goto out;
            }
            sp->values[0] = sp->owned;
        }
        if (parse_seconds(sp->values[0], interval_ms, &pair->seconds) < 0) {
            rc = -EDOM;
            goto out;
        }
    }
    pair->interval_ms = interval_ms;
    pair->timeout_ms = timeout_ms + pair->seconds * 1000;

    /* URL */
    if ((rc = join_path(&pathbuf, labels_get(tl, "__profile_path_prefix__"), path)) < 0 ||
        (rc = buf_printf(&url, "%s://%s%s", scheme ? scheme : "http", addr, pathbuf.data)) < 0)
        goto out;
    if (q.n) {
        if ((rc = buf_append(&url, "?", 1)) < 0 || (rc = query_encode(&q, &url)) < 0)
            goto out;
    }

    /* labels sent with the profile */
    for (size_t i = 0; i < tl->n && rc == 0; i++)
        if (strncmp(tl->v[i].name, "__", 2) != 0)
            rc = labels_setn(&pair->labels, tl->v[i].name, label_name_len(&tl->v[i]),
                             tl->v[i].value, label_value_len(&tl->v[i]));
    if (rc == 0 && !labels_get(&pair->labels, "service_name"))
        rc = labels_set(&pair->labels, "service_name", service_name);
    if (rc == 0)
        rc = labels_set(&pair->labels, "__name__", p->send_name ? p->send_name : p->name);
    if (rc == 0 && (p->kind == SCRAPE_KIND_CUMULATIVE_MEMORY ||
                    p->kind == SCRAPE_KIND_CUMULATIVE_CONTENTION || p->kind == SCRAPE_KIND_DELTA))
        rc = labels_set(&pair->labels, "__delta__", "false");
    if (rc == 0 && spy)
        rc = labels_set(&pair->labels, "pyroscope_spy", spy);
    if (rc < 0)
        goto out;
    /* The labels of a pair are those of all its profiles: the profile rules
     * run once here, and a pair they drop is never scraped. */
    if (sc->profile_rules) {
        rc = relabel_apply(sc->profile_rules, &pair->labels);
        if (rc == 1 && !labels_get(&pair->labels, "__name__")) {
            rc = PAIR_NAMELESS;
            goto out;
        }
        if (rc == 0) {
            rc = PAIR_DROPPED;
            goto out;
        }
        if (rc < 0)
            goto out;
        rc = 0;
    }

    /* de-duplication key (Alloy): public labels + URL */
    if ((rc = buf_printf(&s, "%llx%s", (unsigned long long)labels_hash_public(&pair->labels),
                         url.data)) < 0)
        goto out;
    pair->key = fnv64a(FNV64_BASIS, s.data, s.len);
    /* Prometheus' thash over every target label, __metrics_path__ = the path */
    if ((rc = labels_copy(&hashed, tl)) < 0 ||
        (rc = labels_set(&hashed, "__metrics_path__", pathbuf.data)) < 0)
        goto out;
    buf_reset(&s);
    if ((rc = buf_printf(&s, "%016llu%s", (unsigned long long)labels_hash(&hashed), url.data)) < 0)
        goto out;
    pair->offset_hash = fnv64a(FNV64_BASIS, s.data, s.len);
    pair->profile = p;
    pair->url = strdup(url.data); /* exact size: a pair keeps it */
    labels_compact(&pair->labels);
    rc = pair->url ? 1 : -ENOMEM;
out:
    if (rc < 0 || rc == PAIR_DROPPED || rc == PAIR_NAMELESS)
        labels_done(&pair->labels);
    labels_done(&hashed);
    query_done(&q);
    buf_done(&url);
    buf_done(&pathbuf);
    buf_done(&s);
    return rc;
}

static int add_default(struct labels *ls, const char *name, const char *value)
{
    if (!value || !*value || labels_get(ls, name))
        return 0;
    return labels_set(ls, name, value);
}

static char *infer_service_name(const struct labels *ls)
{
    const char *v;

    if ((v = labels_get(ls, "service_name")) != NULL || (v = labels_get(ls, "__name__")) != NULL)
        return strdup(v);
    for (size_t i = 0; i < sizeof(service_name_labels) / sizeof(service_name_labels[0]); i++) {
        if (!service_name_labels[i]) {
            const char *ns = labels_get(ls, "__meta_kubernetes_namespace");
            const char *ct = labels_get(ls, "__meta_kubernetes_pod_container_name");
            char *s;

            if (!ns || !ct)
                continue;
            if (asprintf(&s, "%s/%s", ns, ct) < 0)
                return NULL;
            return s;
        }
        if ((v = labels_get(ls, service_name_labels[i])) != NULL)
            return strdup(v);
    }
    return strdup("unspecified");
}

/* Address, port, instance, UTF-8 and __meta_* (PopulateLabels after the
 * rules). Returns 0 (out->error set if invalid) or -ENOMEM. */
static int finish_labels(struct target_result *out)
{
    struct labels *ls = &out->labels;
    const char *addr = labels_get(ls, "__address__");
    const char *port = labels_get(ls, "__port__");
    size_t ho, hl;
    char q[2200], *na = NULL;
    int rc = 0;

    if (!addr)
        return set_error(out, "no address");
    if (strchr(addr, '/')) {
        quote(addr, q, sizeof(q));
        return set_error(out, "%s is not a valid hostname", q);
    }
    if (port) {
        if (split_host_port(addr, &ho, &hl)) {
            na = join_host_port(addr + ho, hl, port);
        } else {
            char *with = NULL;

            if (asprintf(&with, "%s:1", addr) < 0)
                return -ENOMEM;
            na = split_host_port(with, &ho, &hl) ? join_host_port(with + ho, hl, port)
                                                 : join_host_port(addr, strlen(addr), port);
            free(with);
        }
    } else if (!split_host_port(addr, &ho, &hl)) {
        const char *scheme = labels_get(ls, "__scheme__");
        char *with = NULL;
        bool can_add;

        if (asprintf(&with, "%s:1234", addr) < 0)
            return -ENOMEM;
        can_add = split_host_port(with, &ho, &hl);
        free(with);
        if (can_add) {
            const char *dp;

            if (!scheme || strcmp(scheme, "http") == 0)
                dp = "80";
            else if (strcmp(scheme, "https") == 0)
                dp = "443";
            else {
                quote(scheme, q, sizeof(q));
                return set_error(out, "invalid scheme: %s", q);
            }
            if (asprintf(&na, "%s:%s", addr, dp) < 0)
                return -ENOMEM;
        }
    }
    if (na) {
        rc = labels_set(ls, "__address__", na);
        free(na);
        if (rc < 0)
            return rc;
    }
    for (size_t i = 0; i < ls->n;) {
        if (strncmp(ls->v[i].name, "__meta_", 7) == 0)
            labels_del(ls, ls->v[i].name);
        else
            i++;
    }
    if (!labels_get(ls, "instance") &&
        (rc = labels_set(ls, "instance", labels_get(ls, "__address__"))) < 0)
        return rc;
    for (size_t i = 0; i < ls->n; i++) {
        if (!relabel_valid_utf8(ls->v[i].value, label_value_len(&ls->v[i]))) {
            char qv[2200];

            quote(ls->v[i].name, q, 600);
            quote(ls->v[i].value, qv, sizeof(qv));
            return set_error(out, "invalid label value for %s: %s", q, qv);
        }
    }
    return 0;
}

static int parse_duration_label(struct target_result *out, const char *name, const char *what,
                                uint64_t *ms)
{
    const char *v = labels_get(&out->labels, name);

    if (!v || duration_parse(v, ms) < 0)
        return set_error(out, "error parsing %s: not a valid duration string: \"%s\"", what,
                         v ? v : "");
    if (*ms == 0)
        return set_error(out, "%s cannot be 0", what);
    return 0;
}

int target_discovered(const struct scrape_job_cfg *sc, const struct labels *discovered,
                      struct labels *out)
{
    char dur[32];
    int rc;

    if ((rc = labels_copy(out, discovered)) < 0)
        return rc;
    if ((rc = add_default(out, "job", sc->job_name)) < 0 ||
        (rc = add_default(out, "__scheme__", sc->scheme ? sc->scheme : "http")) < 0)
        return rc;
    duration_format(sc->interval_ms, dur, sizeof(dur));
    if ((rc = add_default(out, "__scrape_interval__", dur)) < 0)
        return rc;
    duration_format(sc->timeout_ms, dur, sizeof(dur));
    if ((rc = add_default(out, "__scrape_timeout__", dur)) < 0 ||
        (rc = add_default(out, "__profile_path_prefix__", sc->path_prefix)) < 0)
        return rc;
    for (unsigned i = 0; i < sc->n_params; i++) {
        char name[600];

        if (!sc->params[i].n_values)
            continue;
        snprintf(name, sizeof(name), "__param_%s", sc->params[i].key);
        if ((rc = add_default(out, name, sc->params[i].values[0])) < 0)
            return rc;
    }
    return 0;
}

int target_build(const struct scrape_job_cfg *sc, const struct labels *discovered,
                 struct target_result *out)
{
    const struct relabel_rules *rules = sc->rules;
    char *service_name = NULL;
    uint64_t interval_ms = 0, timeout_ms = 0;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = target_discovered(sc, discovered, &out->discovered)) < 0)
        goto fail;
    if ((rc = labels_copy(&out->labels, &out->discovered)) < 0)
        goto fail;
    rc = rules ? relabel_apply(rules, &out->labels) : 1;
    if (rc == 0) {
        out->dropped = true;
        labels_done(&out->labels);
        return 0;
    }
    if (rc == RELABEL_ELIMIT)
        return set_error(out, "relabeling: %s", relabel_strerror(rc));
    if (rc < 0)
        goto fail;
    service_name = infer_service_name(&out->labels);
    if (!service_name) {
        rc = -ENOMEM;
        goto fail;
    }
    if ((rc = finish_labels(out)) < 0)
        goto fail;
    if (!out->error &&
        parse_duration_label(out, "__scrape_interval__", "scrape interval", &interval_ms) < 0)
        rc = -ENOMEM;
    if (!out->error && rc == 0 &&
        parse_duration_label(out, "__scrape_timeout__", "scrape timeout", &timeout_ms) < 0)
        rc = -ENOMEM;
    if (rc < 0)
        goto fail;
    if (out->error) {
        free(service_name);
        return 0;
    }
    if (sc->n_profiles) {
        out->pairs = calloc(sc->n_profiles, sizeof(*out->pairs));
        if (!out->pairs) {
            rc = -ENOMEM;
            goto fail;
        }
    }
    for (unsigned i = 0; i < sc->n_profiles; i++) {
        rc = build_pair(sc, &sc->profiles[i], &out->labels, service_name, interval_ms, timeout_ms,
                        &out->pairs[out->n_pairs]);
        if (rc == -E2BIG || rc == -EDOM) {
            pairs_free(out->pairs, out->n_pairs);
            out->pairs = NULL;
            out->n_pairs = 0;
            free(service_name);
            if (rc == -EDOM)
                return set_error(out,
                                 "%s: seconds must be a whole number from 1 to one second "
                                 "below the scrape interval (%s)",
                                 sc->profiles[i].name,
                                 labels_get(&out->labels, "__scrape_interval__"));
            return set_error(out, "scrape URL longer than %d bytes", MAX_URL);
        }
        if (rc == RELABEL_ELIMIT) {
            pairs_free(out->pairs, out->n_pairs);
            out->pairs = NULL;
            out->n_pairs = 0;
            free(service_name);
            return set_error(out, "profile relabeling: %s", relabel_strerror(rc));
        }
        if (rc < 0)
            goto fail;
        if (rc == PAIR_DROPPED || rc == PAIR_NAMELESS) {
            out->pairs_dropped++;
            out->pairs_nameless += rc == PAIR_NAMELESS;
        } else
            out->n_pairs += (size_t)rc;
    }
    if (out->n_pairs < sc->n_profiles) {
        /* room was made for every profile type; keep what was built */
        struct target_pair *v =
            out->n_pairs ? realloc(out->pairs, out->n_pairs * sizeof(*v)) : NULL;

        if (v || !out->n_pairs) {
            if (!out->n_pairs)
                free(out->pairs);
            out->pairs = v;
        }
    }
    free(service_name);
    return 0;
fail:
    free(service_name);
    target_result_done(out);
    return rc;
}

/* Invalid UTF-8 is rare (a target's error body, a file_sd value): valid
 * strings go to json-c as they are, the others through a copy. */
json_object *scrape__json_string(const char *s, size_t len)
{
    struct buf b;
    json_object *o;

    if (!s)
        s = "";
    if (len > (INT_MAX - 1) / 3) /* json-c takes an int length */
        len = (INT_MAX - 1) / 3;
    if (utf8_valid(s, len))
        return json_object_new_string_len(s, (int)len);
    buf_init(&b, len * 3 + 1);
    if (utf8_append_valid(&b, s, len) < 0) {
        buf_done(&b);
        return NULL;
    }
    o = json_object_new_string_len(b.data ? b.data : "", (int)b.len);
    buf_done(&b);
    return o;
}

void scrape__json_add(json_object *o, const char *key, json_object *v)
{
    size_t n = strlen(key);
    struct buf b;

    if (utf8_valid(key, n)) {
        json_object_object_add(o, key, v);
        return;
    }
    buf_init(&b, n * 3 + 1);
    if (utf8_append_valid(&b, key, n) < 0 || buf_append(&b, "", 1) < 0)
        json_object_put(v);
    else
        json_object_object_add(o, b.data, v);
    buf_done(&b);
}

json_object *scrape__labels_json(const struct labels *ls)
{
    json_object *o = json_object_new_object();

    for (size_t i = 0; o && i < ls->n; i++)
        scrape__json_add(o, ls->v[i].name,
                         scrape__json_string(ls->v[i].value, label_value_len(&ls->v[i])));
    return o;
}

static json_object *jstr(const char *s)
{
    return scrape__json_string(s, s ? strlen(s) : 0);
}

int target_result_json(const struct target_result *r, bool show_dropped, struct buf *out)
{
    json_object *o;
    int rc;

    if (r->dropped && !show_dropped)
        return 0;
    o = json_object_new_object();
    if (!o)
        return -ENOMEM;
    json_object_object_add(o, "discoveredLabels", scrape__labels_json(&r->discovered));
    json_object_object_add(o, "labels",
                           r->dropped ? json_object_new_object() : scrape__labels_json(&r->labels));
    if (r->dropped)
        json_object_object_add(o, "dropped", json_object_new_boolean(1));
    if (r->owner)
        json_object_object_add(o, "owner", jstr(r->owner));
    if (r->elsewhere)
        json_object_object_add(o, "ownedElsewhere", json_object_new_boolean(1));
    if (r->error)
        json_object_object_add(o, "error", jstr(r->error));
    rc = buf_puts(out, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                             JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
    return rc < 0 ? rc : 0;
}
