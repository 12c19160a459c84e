/* SPDX-License-Identifier: Apache-2.0 */
/* Directory sink (`url: file:///DIR` or `file://./relative`): each profile
 * becomes <DIR>/<service_name>/<__name__>/<unix-ms>-<id>.pb.gz, its exact
 * bytes, beside <unix-ms>-<id>.json holding its id, labels and times. Both
 * are written atomically (a dot-named temp file, then rename) so a reader
 * never sees a partial file; the .json goes first, so every .pb.gz has its
 * labels. The directory is bounded by dir_max_bytes: the oldest profiles
 * are deleted first (docs/design.md "Modules").
 *
 * Threading: writes, deletions and the start-up scan run on the agent's
 * work queue (fwd__job_submit); each job owns its input (a profile reference, strings)
 * and output. The index of files (oldest first) and every counter live on
 * the loop thread. At most max_inflight writes run at once; the rest wait in
 * a bounded queue, past which profiles are dropped and counted. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "common/array.h"
#include "common/clock.h"
#include "common/fsutil.h"
#include "forward/internal.h"

#define COMP_MAX 100

struct dir_ent {
    char *rel; /* "<svc>/<name>/<ms>-<id>" without extension */
    uint64_t ms;
    uint64_t bytes;
};

struct dir_index {
    struct dir_ent *v;
    size_t head, n, cap; /* live entries are v[head..n) */
};

struct dir_sink {
    struct fwd_ep *ep;
    char *root;
    struct dir_index idx;
    uint64_t total;
    unsigned jobs;
    struct fwd_profile **pend; /* FIFO ring */
    size_t pend_head, pend_n, pend_cap;
    uint64_t pend_bytes;
    bool scanning;
    bool closing;
};

struct write_job {
    struct fwd__job job;
    struct dir_sink *d;
    struct fwd_profile *p;
    char *root;
    char svc[COMP_MAX + 1], name[COMP_MAX + 1], base[64];
    uint64_t ms;
    enum pprof_compression compression; /* the endpoint's */
    uint64_t bytes;                     /* out: written, sidecar included */
    size_t sent;                        /* out: the profile's bytes written */
    int err;                            /* out */
    char msg[160];                      /* out */
};

struct delete_job {
    struct fwd__job job;
    struct dir_sink *d;
    char *root;
    char **rel;
    size_t n;
};

struct scan_job {
    struct fwd__job job;
    struct dir_sink *d;
    char *root;
    struct dir_index out;
    int err;
};

static void maybe_closed(struct dir_sink *d);
static void pump(struct dir_sink *d);

/* ----------------------------------------------------------------- index */

static int index_push(struct dir_index *x, char *rel, uint64_t ms, uint64_t bytes)
{
    if (x->n == x->cap) {
        if (x->head > 0) {
            memmove(x->v, x->v + x->head, (x->n - x->head) * sizeof(*x->v));
            x->n -= x->head;
            x->head = 0;
        }
        if (x->n == x->cap) {
            struct dir_ent *v = array_grow(x->v, &x->cap, x->n, sizeof(*v), 64);

            if (!v)
                return -ENOMEM;
            x->v = v;
        }
    }
    x->v[x->n++] = (struct dir_ent){ rel, ms, bytes };
    return 0;
}

static void index_done(struct dir_index *x)
{
    for (size_t i = x->head; i < x->n; i++)
        free(x->v[i].rel);
    free(x->v);
    memset(x, 0, sizeof(*x));
}

static int ent_cmp(const void *a, const void *b)
{
    const struct dir_ent *x = a, *y = b;

    if (x->ms != y->ms)
        return x->ms < y->ms ? -1 : 1;
    return strcmp(x->rel, y->rel);
}

/* ------------------------------------------------------------ pool work */

static char *sidecar_json(const struct fwd_profile *p, size_t bytes, uint64_t ms)
{
    struct json_object *o = json_object_new_object(), *l = json_object_new_object();
    char *s = NULL;

    if (!o || !l) {
        json_object_put(o);
        json_object_put(l);
        return NULL;
    }
    json_object_object_add(o, "id", json_object_new_string(p->id));
    for (size_t i = 0; i < p->labels.n; i++)
        json_object_object_add(l, p->labels.v[i].name,
                               json_object_new_string_len(p->labels.v[i].value,
                                                          (int)label_value_len(&p->labels.v[i])));
    json_object_object_add(o, "labels", l);
    json_object_object_add(o, "start_ns", json_object_new_int64(p->start_ns));
    json_object_object_add(o, "end_ns", json_object_new_int64(p->end_ns));
    json_object_object_add(o, "written_ms", json_object_new_int64((int64_t)ms));
    json_object_object_add(o, "bytes", json_object_new_int64((int64_t)bytes));
    s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
    json_object_put(o);
    return s;
}

static void write_work(struct fwd__job *job)
{
    struct write_job *j = container_of(job, struct write_job, job);
    char dir[4096], name[128];
    char *json = NULL;
    const uint8_t *data;
    uint8_t *owned = NULL;
    size_t len;
    int r;

    if ((size_t)snprintf(dir, sizeof(dir), "%s/%s/%s", j->root, j->svc, j->name) >= sizeof(dir)) {
        r = -ENAMETOOLONG;
        goto out;
    }
    r = fsutil_mkdir_p(dir, 0755);
    if (r < 0)
        goto out;
    r = fwd__profile_body(j->p, j->compression, &data, &len, &owned);
    if (r < 0)
        goto out;
    json = sidecar_json(j->p, len, j->ms);
    if (!json) {
        r = -ENOMEM;
        goto out;
    }
    snprintf(name, sizeof(name), "%s.json", j->base);
    r = fsutil_write_atomic(dir, name, json, strlen(json), false);
    if (r < 0)
        goto out;
    snprintf(name, sizeof(name), "%s.pb.gz", j->base);
    r = fsutil_write_atomic(dir, name, data, len, false);
    if (r < 0) {
        snprintf(name, sizeof(name), "%s/%s.json", dir, j->base);
        unlink(name);
        goto out;
    }
    j->bytes = strlen(json) + len;
    j->sent = len;
out:
    if (r < 0)
        snprintf(j->msg, sizeof(j->msg), "write %s: %s", dir, strerror(-r));
    j->err = r;
    free(json);
    free(owned);
}

static void delete_work(struct fwd__job *job)
{
    struct delete_job *j = container_of(job, struct delete_job, job);
    char path[4096];

    for (size_t i = 0; i < j->n; i++) {
        snprintf(path, sizeof(path), "%s/%s.pb.gz", j->root, j->rel[i]);
        unlink(path);
        snprintf(path, sizeof(path), "%s/%s.json", j->root, j->rel[i]);
        unlink(path);
    }
}

static uint64_t file_size(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/* Walks root/<svc>/<name>/ for <ms>-<id>.pb.gz and removes stale temps. */
static void scan_work(struct fwd__job *job)
{
    struct scan_job *j = container_of(job, struct scan_job, job);
    DIR *d1 = opendir(j->root), *d2, *d3;
    struct dirent *e1, *e2, *e3;
    char p2[4096], p3[4096], f[4096];

    if (!d1) {
        j->err = errno == ENOENT ? 0 : -errno;
        return;
    }
    while ((e1 = readdir(d1)) != NULL) {
        if (e1->d_name[0] == '.')
            continue;
        snprintf(p2, sizeof(p2), "%s/%s", j->root, e1->d_name);
        if (!(d2 = opendir(p2)))
            continue;
        while ((e2 = readdir(d2)) != NULL) {
            if (e2->d_name[0] == '.')
                continue;
            snprintf(p3, sizeof(p3), "%s/%s", p2, e2->d_name);
            if (!(d3 = opendir(p3)))
                continue;
            while ((e3 = readdir(d3)) != NULL) {
                const char *n = e3->d_name;
                size_t len = strlen(n);
                char *rel, *end;
                uint64_t ms;

                if (n[0] == '.') {
                    if (len > 4 && strcmp(n + len - 4, ".tmp") == 0) {
                        snprintf(f, sizeof(f), "%s/%s", p3, n);
                        unlink(f);
                    }
                    continue;
                }
                if (len < 7 || strcmp(n + len - 6, ".pb.gz") != 0)
                    continue;
                ms = strtoull(n, &end, 10);
                if (end == n || *end != '-')
                    continue;
                if (asprintf(&rel, "%s/%s/%.*s", e1->d_name, e2->d_name, (int)(len - 6), n) < 0)
                    continue;
                snprintf(f, sizeof(f), "%s/%s", p3, n);
                {
                    uint64_t bytes = file_size(f);

                    snprintf(f, sizeof(f), "%s/%.*s.json", p3, (int)(len - 6), n);
                    bytes += file_size(f);
                    if (index_push(&j->out, rel, ms, bytes) < 0)
                        free(rel);
                }
            }
            closedir(d3);
        }
        closedir(d2);
    }
    closedir(d1);
    if (j->out.n > 1)
        qsort(j->out.v, j->out.n, sizeof(*j->out.v), ent_cmp);
}

/* ------------------------------------------------------------- loop side */

static void delete_done(struct fwd__job *job)
{
    struct delete_job *j = container_of(job, struct delete_job, job);
    struct dir_sink *d = j->d;

    for (size_t i = 0; i < j->n; i++)
        free(j->rel[i]);
    free(j->rel);
    free(j->root);
    free(j);
    d->jobs--;
    maybe_closed(d);
}

/* Deletes the oldest files while the directory is over its cap. */
static void enforce_cap(struct dir_sink *d)
{
    struct fwd_ep *ep = d->ep;
    struct delete_job *j;
    size_t cap = 16;

    if (d->scanning || d->total <= ep->cfg->dir_max_bytes)
        return;
    j = calloc(1, sizeof(*j));
    if (!j)
        return;
    j->d = d;
    j->root = strdup(d->root);
    j->rel = malloc(cap * sizeof(*j->rel));
    if (!j->root || !j->rel)
        goto fail;
    while (d->total > ep->cfg->dir_max_bytes && d->idx.head < d->idx.n) {
        struct dir_ent *e = &d->idx.v[d->idx.head++];

        if (j->n == cap) {
            char **v = array_grow(j->rel, &cap, j->n, sizeof(*v), 16);

            if (!v) {
                d->idx.head--;
                break;
            }
            j->rel = v;
        }
        j->rel[j->n++] = e->rel;
        d->total -= e->bytes;
        ep->st.files--;
        ep->st.files_deleted++;
    }
    ep->st.dir_bytes = d->total;
    if (fwd__job_submit(ep->f, &j->job, 0, delete_work, delete_done) < 0)
        goto fail;
    d->jobs++;
    return;
fail:
    if (j->rel) {
        for (size_t i = 0; i < j->n; i++)
            free(j->rel[i]);
    }
    free(j->rel);
    free(j->root);
    free(j);
}

static void write_done(struct fwd__job *job)
{
    struct write_job *j = container_of(job, struct write_job, job);
    struct dir_sink *d = j->d;
    struct fwd_ep *ep = d->ep;

    d->jobs--;
    if (j->err == 0) {
        char *rel = NULL;

        ep->st.sent_profiles++;
        ep->st.sent_bytes += j->sent;
        if (asprintf(&rel, "%s/%s/%s", j->svc, j->name, j->base) >= 0 &&
            index_push(&d->idx, rel, j->ms, j->bytes) == 0) {
            d->total += j->bytes;
            ep->st.files++;
            ep->st.dir_bytes = d->total;
        } else {
            free(rel);
        }
    } else {
        ep->st.failed_requests++;
        fwd__ep_drop(ep, FWD_DROP_IO, 1, j->p->len);
        fwd__ep_error(ep, "%s", j->msg);
    }
    fwd_profile_unref(j->p);
    free(j->root);
    free(j);
    enforce_cap(d);
    pump(d);
    maybe_closed(d);
}

static void start_write(struct dir_sink *d, struct fwd_profile *p)
{
    struct fwd_ep *ep = d->ep;
    struct write_job *j = calloc(1, sizeof(*j));
    const char *svc = labels_get(&p->labels, "service_name");
    const char *name = labels_get(&p->labels, "__name__");
    int r;

    if (!j || !(j->root = strdup(d->root))) {
        free(j);
        fwd__ep_drop(ep, FWD_DROP_IO, 1, p->len);
        fwd_profile_unref(p);
        return;
    }
    j->d = d;
    j->p = p; /* the pending reference moves to the job */
    j->ms = clock_wall_ms();
    j->compression = ep->cfg->compression;
    fwd__path_component(svc ? svc : "unspecified", j->svc, sizeof(j->svc));
    fwd__path_component(name ? name : "unknown", j->name, sizeof(j->name));
    snprintf(j->base, sizeof(j->base), "%" PRIu64 "-%s", j->ms, p->id);
    /* The id is ours (hex and dashes) unless it came from a spool; keep it safe. */
    for (char *c = j->base; *c; c++) {
        if (*c == '/' || *c == '.')
            *c = '_';
    }
    ep->st.requests++;
    /* Compressing again inflates the profile first (gzip'd pprof: 3-5x). */
    bool again = fwd__recompress_needed(p, j->compression);

    r = fwd__job_submit(ep->f, &j->job, again ? (uint64_t)p->len * 6 : 0, write_work, write_done);
    if (r < 0) {
        fwd__ep_drop(ep, FWD_DROP_IO, 1, p->len);
        fwd__ep_error(ep, "queue write: %s", uv_strerror(r));
        fwd_profile_unref(p);
        free(j->root);
        free(j);
        return;
    }
    d->jobs++;
    ep->st.recompressed_profiles += again;
}

static void pump(struct dir_sink *d)
{
    struct fwd_ep *ep = d->ep;

    /* No write while the start-up scan runs: it removes leftover temp files
     * and would take a write's temp file for one. */
    while (!d->scanning && d->pend_n > 0 && d->jobs < ep->cfg->max_inflight) {
        struct fwd_profile *p = d->pend[d->pend_head];

        d->pend_head = (d->pend_head + 1) % d->pend_cap;
        d->pend_n--;
        d->pend_bytes -= p->len;
        start_write(d, p);
    }
    ep->st.queue_len = d->pend_n;
    ep->st.queue_bytes = d->pend_bytes;
}

/* The profile as this endpoint writes it: with external labels or write
 * rules, a copy under its final labels (same id), or NULL when a rule drops
 * it (counted). The external labels are added here, as a remote endpoint
 * adds them: the profile comes with the target's labels only. */
static struct fwd_profile *relabelled(struct fwd_ep *ep, struct fwd_profile *p)
{
    struct fwd_profile *q;
    struct labels fin = LABELS_INIT;
    uint8_t *data;
    int kept;

    if (!ep->cfg->write_rules && !ep->n_ext)
        return fwd_profile_ref(p);
    if ((kept = fwd__labels_final(ep, &fin, &p->labels)) <= 0 || !(data = malloc(p->len))) {
        labels_done(&fin);
        fwd__ep_drop(ep, kept == 0 ? FWD_DROP_WRITE_RELABEL : FWD_DROP_IO, 1, p->len);
        return NULL;
    }
    memcpy(data, p->data, p->len);
    q = fwd__profile_new_id(&fin, data, p->len, p->start_ns, p->end_ns, p->id);
    labels_done(&fin);
    if (!q)
        fwd__ep_drop(ep, FWD_DROP_IO, 1, 0);
    else
        q->compression = p->compression;
    return q;
}

static void dir_submit(struct fwd_ep *ep, struct fwd_profile *p)
{
    struct dir_sink *d = ep->sink;

    if (d->closing)
        return;
    if (d->pend_n >= d->pend_cap || d->pend_bytes + p->len > ep->cfg->queue_max_bytes) {
        fwd__ep_drop(ep, FWD_DROP_QUEUE_FULL, 1, p->len);
        return;
    }
    if (!(p = relabelled(ep, p)))
        return;
    d->pend[(d->pend_head + d->pend_n) % d->pend_cap] = p;
    d->pend_n++;
    d->pend_bytes += p->len;
    pump(d);
}

static void scan_done(struct fwd__job *job)
{
    struct scan_job *j = container_of(job, struct scan_job, job);
    struct dir_sink *d = j->d;
    struct fwd_ep *ep = d->ep;

    d->jobs--;
    d->scanning = false;
    if (j->err < 0)
        fwd__ep_error(ep, "scan %s: %s", d->root, strerror(-j->err));
    /* Files found at start are older than anything written since. */
    for (size_t i = d->idx.head; i < d->idx.n; i++) {
        struct dir_ent *e = &d->idx.v[i];

        if (index_push(&j->out, e->rel, e->ms, e->bytes) < 0)
            free(e->rel);
    }
    free(d->idx.v);
    d->idx = j->out;
    d->total = 0;
    for (size_t i = d->idx.head; i < d->idx.n; i++)
        d->total += d->idx.v[i].bytes;
    ep->st.files = d->idx.n - d->idx.head;
    ep->st.dir_bytes = d->total;
    free(j->root);
    free(j);
    enforce_cap(d);
    pump(d);
    maybe_closed(d);
}

static int dir_start(struct fwd_ep *ep, char *err, size_t errlen)
{
    struct dir_sink *d = calloc(1, sizeof(*d));
    struct scan_job *j = NULL;
    int r;

    if (!d)
        goto oom;
    ep->sink = d;
    d->ep = ep;
    d->root = fwd__file_url_path(ep->cfg->url);
    if (!d->root) {
        snprintf(err, errlen, "%s: directory sink needs a file:// url, not %s", ep->name,
                 ep->cfg->url);
        return -EINVAL;
    }
    r = fsutil_mkdir_p(d->root, 0755);
    if (r < 0) {
        snprintf(err, errlen, "%s: cannot create %s: %s", ep->name, d->root, strerror(-r));
        return r;
    }
    d->pend_cap = ep->cfg->queue_max_profiles;
    d->pend = calloc(d->pend_cap, sizeof(*d->pend));
    j = calloc(1, sizeof(*j));
    if (!d->pend || !j || !(j->root = strdup(d->root)))
        goto oom;
    j->d = d;
    r = fwd__job_submit(ep->f, &j->job, 0, scan_work, scan_done);
    if (r < 0) {
        snprintf(err, errlen, "%s: queue scan: %s", ep->name, uv_strerror(r));
        free(j->root);
        free(j);
        return r;
    }
    d->jobs++;
    d->scanning = true;
    return 0;
oom:
    if (j)
        free(j->root);
    free(j);
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
}

static void maybe_closed(struct dir_sink *d)
{
    if (d->closing && d->jobs == 0 && d->pend_n == 0)
        fwd__ep_closed(d->ep);
}

static void dir_close(struct fwd_ep *ep, uint64_t deadline)
{
    struct dir_sink *d = ep->sink;

    if (!d) {
        fwd__ep_closed(ep);
        return;
    }
    d->closing = true;
    pump(d);
    maybe_closed(d);
}

static void dir_free(struct fwd_ep *ep)
{
    struct dir_sink *d = ep->sink;

    if (!d)
        return;
    while (d->pend && d->pend_n > 0) {
        fwd_profile_unref(d->pend[d->pend_head]);
        d->pend_head = (d->pend_head + 1) % d->pend_cap;
        d->pend_n--;
    }
    free(d->pend);
    index_done(&d->idx);
    free(d->root);
    free(d);
    ep->sink = NULL;
}

const struct fwd__sink_ops fwd__dir_ops = {
    .kind = "dir",
    .start = dir_start,
    .submit = dir_submit,
    .close = dir_close,
    .free = dir_free,
};
