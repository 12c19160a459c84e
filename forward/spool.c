/* SPDX-License-Identifier: Apache-2.0 */
/* The disk spool of one endpoint: <spool.dir>/<endpoint>/<id>.seg segment
 * files (spool_file.c) of records (spool_record.c), plus a `cursor` file
 * naming the delivered prefix; docs/forwarding.md describes the format
 * (docs/design.md "Modules").
 *
 * This file is the state machine: it starts the pool jobs (the start-up
 * scan, one append job at a time gathering the pending appends, one load
 * job at a time, cursor writes, unlinks), applies their results to the
 * index (spool_index.c) and enforces the caps: bytes (oldest segment
 * deleted first, its undelivered records counted as spool_full) and age
 * (segments whose newest record is older than max_age are deleted, counted
 * as spool_age). Only the spool directory is ever written.
 *
 * A write the disk refuses (ENOSPC, EIO) is rolled back by the job; its
 * records and those after it stay pending, in order, and are tried again
 * a second later or as soon as a segment is deleted (space may be back).
 * While writes fail, pending appends are capped by the endpoint's queue
 * limits (past them: dropped, io_error).
 *
 * Threading: loop thread; the jobs run on the agent's work queue
 * (fwd__job_submit: a job cancelled before it starts is queued again, its
 * busy flag staying set until it has run) and own their inputs
 * (paths, record lists, the pending records with their references) until
 * their done callback. Ownership: the spool holds a reference to every
 * pending profile; loaded profiles are handed to the caller. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/array.h"
#include "common/clock.h"
#include "common/fsutil.h"
#include "forward/internal.h"

#define RETRY_MS 1000 /* after a failed write or load */

struct write_job {
    struct fwd__job job;
    struct fwd__spool *s;
    uint64_t seg_id;
    struct fwd__seg_append a;
};

struct load_job {
    struct fwd__job job;
    struct fwd__spool *s;
    uint64_t seg_id;
    struct fwd__srec *recs; /* copied: appends may move the index's array */
    struct fwd__seg_load l;
};

struct scan_job {
    struct fwd__job job;
    struct fwd__spool *s;
    char dir[4096];
    struct fwd__seg *segs;
    size_t n;
    uint64_t corrupt;
    uint64_t cur_seg, cur_seq; /* cursor file */
    uint64_t max_id;
    int err;
};

struct cursor_job {
    struct fwd__job job;
    struct fwd__spool *s;
    char dir[4096];
    char text[64];
    bool sync;
};

struct fwd__spool {
    struct fwd_ep *ep;
    const struct fwd__spool_ops_cb *cb;
    void *ud;
    char *dir;
    struct fwd__spool_index idx;
    struct fwd__pend *pend;
    size_t n_pend, cap_pend;
    uint64_t pend_bytes;
    /* The records the running append job holds: still undelivered, so
     * still counted (gauges, byte cap) though in neither list above. */
    size_t writing_n;
    uint64_t writing_bytes, writing_oldest_ms;
    bool ready, writing, loading_job, cursor_job, cursor_dirty;
    bool write_failing;      /* the last write was refused */
    uint64_t write_retry_at; /* loop ms; 0: no wait */
    uint64_t load_retry_at;
    unsigned fs_reqs;
    uint64_t cursor_seg, cursor_seq; /* written state */
    uint64_t next_id;                /* of the next segment */
    uint64_t max_seg_bytes;
    int fsync_mode;
    bool closing;
    void (*close_cb)(void *);
    void *close_ud;
};

static void kick(struct fwd__spool *s);
static void check_closed(struct fwd__spool *s);

static void seg_path(const char *dir, uint64_t id, char *out, size_t n)
{
    snprintf(out, n, "%s/%016" PRIx64 ".seg", dir, id);
}

static void stats(struct fwd__spool *s)
{
    struct fwd__stats *st = &s->ep->st;
    uint64_t bytes = 0, recs = 0, oldest = 0;

    for (size_t i = 0; i < s->idx.n_segs; i++) {
        struct fwd__seg *g = &s->idx.segs[i];

        bytes += g->size;
        recs += g->n - g->acked;
        if (g->n > g->acked && (!oldest || g->created_ms < oldest))
            oldest = g->created_ms;
    }
    for (size_t i = 0; i < s->n_pend; i++) {
        bytes += s->pend[i].p->len;
        if (!oldest || s->pend[i].wall_ms < oldest)
            oldest = s->pend[i].wall_ms;
    }
    if (s->writing_n && (!oldest || s->writing_oldest_ms < oldest))
        oldest = s->writing_oldest_ms;
    st->spool_bytes = bytes + s->writing_bytes;
    st->spool_segments = s->idx.n_segs;
    st->spool_records = recs + s->n_pend + s->writing_n;
    st->spool_oldest_ms = oldest;
}

static void fs_done(uv_fs_t *req)
{
    struct fwd__spool *s = req->data;

    uv_fs_req_cleanup(req);
    free(req);
    s->fs_reqs--;
    s->write_retry_at = 0; /* a file is gone: space may be back */
    kick(s);
    check_closed(s);
}

/* Removes segment i from the index and unlinks its file. Undelivered,
 * unloaded records are counted under `reason`. */
static void seg_delete(struct fwd__spool *s, size_t i, enum fwd__drop reason)
{
    char path[4096];
    uint64_t unloaded;
    uv_fs_t *req;

    seg_path(s->dir, s->idx.segs[i].id, path, sizeof(path));
    unloaded = fwd__idx_seg_remove(&s->idx, i);
    if (unloaded && reason < FWD_DROP__N)
        fwd__ep_drop(s->ep, reason, unloaded, 0);
    req = malloc(sizeof(*req));
    if (req) {
        req->data = s;
        if (uv_fs_unlink(s->ep->loop, req, path, fs_done) == 0)
            s->fs_reqs++;
        else
            free(req);
    }
}

/* ----- cursor: "<segment id hex> <number of its first undelivered record>" */

static void cursor_work(struct fwd__job *job)
{
    struct cursor_job *j = container_of(job, struct cursor_job, job);

    /* A failed write leaves the previous cursor in place; the next cursor
     * update writes the whole state again, so there is nothing to retry. */
    (void)fsutil_write_atomic(j->dir, "cursor", j->text, strlen(j->text), j->sync);
}

static void cursor_done(struct fwd__job *job)
{
    struct cursor_job *j = container_of(job, struct cursor_job, job);
    struct fwd__spool *s = j->s;

    free(j);
    s->cursor_job = false;
    kick(s);
    check_closed(s);
}

static void cursor_update(struct fwd__spool *s)
{
    struct cursor_job *j;
    uint64_t seg, seq;

    fwd__idx_cursor(&s->idx, &seg, &seq);
    if (seg == s->cursor_seg && seq == s->cursor_seq)
        return;
    if (s->cursor_job) {
        s->cursor_dirty = true;
        return;
    }
    j = calloc(1, sizeof(*j));
    if (!j)
        return;
    j->s = s;
    snprintf(j->dir, sizeof(j->dir), "%s", s->dir);
    snprintf(j->text, sizeof(j->text), "%016" PRIx64 " %" PRIu64 "\n", seg, seq);
    j->sync = s->fsync_mode > 0;
    if (fwd__job_submit(s->ep->f, &j->job, 0, cursor_work, cursor_done) < 0) {
        free(j);
        return;
    }
    s->cursor_job = true;
    s->cursor_dirty = false;
    s->cursor_seg = seg;
    s->cursor_seq = seq;
}

/* ----- caps */

static void enforce_caps(struct fwd__spool *s, bool age)
{
    const struct cfg_spool *c = s->ep->spool;
    uint64_t now = clock_wall_ms(), total = s->pend_bytes + s->writing_bytes;

    for (size_t i = 0; i < s->idx.n_segs; i++)
        total += s->idx.segs[i].size;
    /* Oldest first; never the segment being written (the last one). */
    while (s->idx.n_segs > 1 && total > c->max_bytes) {
        total -= s->idx.segs[0].size;
        seg_delete(s, 0, FWD_DROP_SPOOL_FULL);
    }
    while (age && s->idx.n_segs > 0 && s->idx.segs[0].newest_ms &&
           s->idx.segs[0].newest_ms + c->max_age_ms < now && !s->writing) {
        seg_delete(s, 0, FWD_DROP_SPOOL_AGE);
    }
    stats(s);
}

/* ----- writing */

static void write_work(struct fwd__job *job)
{
    fwd__seg_append(&container_of(job, struct write_job, job)->a);
}

/* Puts records that were not written back at the head of the pending list
 * (they are older than anything appended since). */
static void pend_unshift(struct fwd__spool *s, const struct fwd__pend *v, size_t n)
{
    size_t total = s->n_pend + n;

    if (total > s->cap_pend) {
        struct fwd__pend *m = realloc(s->pend, total * sizeof(*m));

        if (!m) {
            for (size_t i = 0; i < n; i++) {
                fwd__smap_add(&s->idx.series, v[i].series, -1);
                fwd__ep_drop(s->ep, FWD_DROP_IO, 1, v[i].p->len);
                fwd_profile_unref(v[i].p);
            }
            return;
        }
        s->pend = m;
        s->cap_pend = total;
    }
    memmove(s->pend + n, s->pend, s->n_pend * sizeof(*s->pend));
    memcpy(s->pend, v, n * sizeof(*v));
    s->n_pend = total;
    for (size_t i = 0; i < n; i++)
        s->pend_bytes += v[i].p->len;
}

static void write_done(struct fwd__job *job)
{
    struct write_job *j = container_of(job, struct write_job, job);
    struct fwd__spool *s = j->s;
    struct fwd__seg *g = fwd__idx_seg_find(&s->idx, j->seg_id);
    struct fwd__srec rec = { .off = j->a.create ? FWD_SEG_HDR : j->a.off, .seq = j->a.seq };
    size_t n_retry = 0;

    s->writing = false;
    s->writing_n = 0;
    s->writing_bytes = 0;
    for (size_t i = 0; i < j->a.n; i++) {
        struct fwd__pend *pd = &j->a.pend[i];
        int64_t res = g ? j->a.res[i] : 0;

        if (res > 0) {
            rec.series = pd->series;
            if (fwd__idx_rec_add(g, &rec, pd->wall_ms) == 0)
                s->ep->st.spool_written_profiles++;
            else
                res = -ENOMEM; /* on disk, but unknown to the index until a restart */
            rec.off += (uint64_t)j->a.res[i];
            rec.seq++;
        }
        if (res == 0 && !s->closing) {
            j->a.pend[n_retry++] = *pd; /* the disk refused it: kept, in order */
            continue;
        }
        if (res <= 0) {
            /* Not in the spool: the series count taken at append is returned. */
            fwd__smap_add(&s->idx.series, pd->series, -1);
            fwd__ep_drop(s->ep, FWD_DROP_IO, 1, pd->p->len);
        }
        fwd_profile_unref(pd->p);
    }
    if (g)
        g->size = j->a.end;
    s->write_failing = n_retry > 0;
    s->write_retry_at = n_retry ? uv_now(s->ep->loop) + RETRY_MS : 0;
    pend_unshift(s, j->a.pend, n_retry);
    if (j->a.err < 0)
        fwd__ep_error(s->ep, "spool write %s: %s", j->a.path, strerror(-j->a.err));
    free(j->a.pend);
    free(j->a.res);
    free(j);
    enforce_caps(s, false);
    kick(s);
    if (s->cb->changed)
        s->cb->changed(s->ud);
    check_closed(s);
}

/* Starts a write job for what is pending, unless one runs or the last
 * failure is too recent (a close tries once more at once). */
static void kick(struct fwd__spool *s)
{
    struct write_job *j;
    struct fwd__seg *g;
    size_t n = s->n_pend < FWD_SEG_MAX_RECORDS ? s->n_pend : FWD_SEG_MAX_RECORDS;

    if (s->cursor_dirty && !s->cursor_job)
        cursor_update(s);
    if (!s->ready || s->writing || n == 0)
        return;
    if (s->write_retry_at && uv_now(s->ep->loop) < s->write_retry_at && !s->closing)
        return;
    g = s->idx.n_segs ? &s->idx.segs[s->idx.n_segs - 1] : NULL;
    if (!g || g->version != 2 || g->size >= s->max_seg_bytes || g->n + n > FWD_SEG_MAX_RECORDS) {
        g = fwd__idx_seg_add(&s->idx, s->next_id++);
        if (!g)
            return;
        g->created_ms = s->pend[0].wall_ms;
    }
    j = calloc(1, sizeof(*j));
    if (!j)
        return;
    j->a.pend = malloc(n * sizeof(*j->a.pend));
    j->a.res = calloc(n, sizeof(*j->a.res));
    if (!j->a.pend || !j->a.res)
        goto fail;
    j->s = s;
    j->seg_id = g->id;
    seg_path(s->dir, g->id, j->a.path, sizeof(j->a.path));
    j->a.create = g->size < FWD_SEG_HDR;
    j->a.created_ms = g->created_ms;
    j->a.off = g->size;
    j->a.seq = g->next_seq;
    j->a.fsync_mode = s->fsync_mode;
    j->a.n = n;
    memcpy(j->a.pend, s->pend, n * sizeof(*s->pend));
    if (fwd__job_submit(s->ep->f, &j->job, 0, write_work, write_done) < 0)
        goto fail;
    s->writing_n = n;
    s->writing_bytes = 0;
    s->writing_oldest_ms = s->pend[0].wall_ms;
    for (size_t i = 0; i < n; i++) {
        s->pend_bytes -= s->pend[i].p->len;
        s->writing_bytes += s->pend[i].p->len;
    }
    memmove(s->pend, s->pend + n, (s->n_pend - n) * sizeof(*s->pend));
    s->n_pend -= n;
    s->writing = true;
    return;
fail:
    free(j->a.pend);
    free(j->a.res);
    free(j);
}

void fwd__spool_append(struct fwd__spool *s, struct fwd_profile *p)
{
    const struct cfg_remote *c = s->ep->cfg;
    struct fwd__pend *pd;

    /* While the disk refuses writes, appends wait in memory: bounded. */
    if (s->write_failing &&
        (s->n_pend >= c->queue_max_profiles || s->pend_bytes + p->len > c->queue_max_bytes)) {
        fwd__ep_drop(s->ep, FWD_DROP_IO, 1, p->len);
        return;
    }
    if (s->n_pend == s->cap_pend) {
        struct fwd__pend *v = array_grow(s->pend, &s->cap_pend, s->n_pend, sizeof(*v), 64);

        if (!v) {
            fwd__ep_drop(s->ep, FWD_DROP_IO, 1, p->len);
            return;
        }
        s->pend = v;
    }
    pd = &s->pend[s->n_pend++];
    pd->p = fwd_profile_ref(p);
    pd->series = fwd__series_hash(&p->labels);
    pd->wall_ms = clock_wall_ms();
    s->pend_bytes += p->len;
    fwd__smap_add(&s->idx.series, pd->series, 1);
    enforce_caps(s, false);
    kick(s);
}

uint64_t fwd__spool_pending(const struct fwd__spool *s)
{
    return s->n_pend + fwd__idx_unloaded(&s->idx);
}

uint32_t fwd__spool_series_count(const struct fwd__spool *s, uint64_t series)
{
    return fwd__smap_get(&s->idx.series, series);
}

/* ----- loading */

static void load_work(struct fwd__job *job)
{
    fwd__seg_load(&container_of(job, struct load_job, job)->l);
}

/* Removes the oldest segments once every record is delivered; the last
 * one only while no write is running (a new one is started if needed). */
static void release(struct fwd__spool *s)
{
    struct fwd__spool_index *x = &s->idx;

    while (x->n_segs > 0 && x->segs[0].acked == x->segs[0].n && x->segs[0].loaded == x->segs[0].n &&
           (x->n_segs > 1 || !s->writing))
        seg_delete(s, 0, FWD_DROP__N);
    cursor_update(s);
    stats(s);
}

static void load_done(struct fwd__job *job)
{
    struct load_job *j = container_of(job, struct load_job, job);
    struct fwd__spool *s = j->s;
    struct fwd__seg *g = fwd__idx_seg_find(&s->idx, j->seg_id);
    uint64_t *tokens = calloc(j->l.n ? j->l.n : 1, sizeof(*tokens));
    size_t n = 0, damaged = 0;

    s->loading_job = false;
    if (j->l.err < 0)
        s->load_retry_at = uv_now(s->ep->loop) + RETRY_MS;
    if (g && tokens && j->l.n > 0) {
        fwd__idx_load(&s->idx, g, j->l.n, tokens);
        for (size_t i = 0; i < j->l.n; i++) {
            if (j->l.out[i]) {
                j->l.out[n] = j->l.out[i];
                tokens[n++] = tokens[i];
                continue;
            }
            /* Damaged since the scan: exactly this record is lost. */
            damaged++;
            fwd__idx_ack(&s->idx, tokens[i]);
        }
        s->ep->st.spool_replayed_profiles += n;
        if (damaged) {
            fwd__ep_drop(s->ep, FWD_DROP_SPOOL_CORRUPT, damaged, 0);
            fwd__ep_error(s->ep, "spool: %zu damaged record(s) in segment %016" PRIx64, damaged,
                          g->id);
            release(s);
        }
    } else {
        for (size_t i = 0; i < j->l.n; i++)
            fwd_profile_unref(j->l.out[i]);
    }
    stats(s);
    if (s->cb->loaded)
        s->cb->loaded(s->ud, j->l.out, tokens, n);
    free(tokens);
    free(j->l.out);
    free(j->recs);
    free(j);
    check_closed(s);
}

bool fwd__spool_load(struct fwd__spool *s, size_t max, uint64_t max_bytes)
{
    struct load_job *j;
    struct fwd__seg *g = NULL;

    if (!s->ready || s->loading_job || s->closing || max == 0 ||
        uv_now(s->ep->loop) < s->load_retry_at)
        return false;
    for (size_t i = 0; i < s->idx.n_segs; i++) {
        if (s->idx.segs[i].loaded < s->idx.segs[i].n) {
            g = &s->idx.segs[i];
            break;
        }
    }
    if (!g)
        return false;
    if (max > g->n - g->loaded)
        max = g->n - g->loaded;
    j = calloc(1, sizeof(*j));
    if (!j || !(j->recs = malloc(max * sizeof(*j->recs)))) {
        free(j);
        return false;
    }
    memcpy(j->recs, g->recs + g->loaded, max * sizeof(*j->recs));
    j->s = s;
    j->seg_id = g->id;
    seg_path(s->dir, g->id, j->l.path, sizeof(j->l.path));
    j->l.recs = j->recs;
    j->l.max = max;
    j->l.max_bytes = max_bytes ? max_bytes : UINT64_MAX;
    if (fwd__job_submit(s->ep->f, &j->job, 0, load_work, load_done) < 0) {
        free(j->recs);
        free(j);
        return false;
    }
    s->loading_job = true;
    return true;
}

void fwd__spool_ack(struct fwd__spool *s, uint64_t token)
{
    if (fwd__idx_ack(&s->idx, token))
        release(s);
}

/* ----- open / scan */

static int seg_id_cmp(const void *a, const void *b)
{
    const struct fwd__seg *x = a, *y = b;

    return x->id < y->id ? -1 : x->id > y->id;
}

/* Scans one segment into `g` (pool). Returns false if the file is to go:
 * delivered before the restart, or holding no record. */
static bool scan_seg(struct scan_job *j, struct fwd__seg *g, const char *path)
{
    struct fwd__seg_scan sc = { 0 };
    uint32_t delivered = g->id == j->cur_seg ? (uint32_t)j->cur_seq : 0;
    int fd;

    if (g->id < j->cur_seg)
        return false; /* delivered (the cursor is past it) */
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return false;
    fwd__seg_scan_fd(fd, &sc, delivered);
    close(fd);
    j->corrupt += sc.lost;
    if (sc.n == 0) {
        fwd__seg_scan_done(&sc);
        return false;
    }
    g->version = sc.version == 1 ? 1 : 2;
    g->size = sc.end;
    g->recs = sc.recs;
    g->n = sc.n;
    g->cap = sc.cap;
    g->next_seq = sc.next_seq;
    g->created_ms = sc.created_ms;
    g->newest_ms = sc.newest_ms;
    /* The records the cursor names as delivered count as loaded and
     * acknowledged. */
    while (g->loaded < g->n && g->recs[g->loaded].seq < delivered)
        g->loaded++;
    return true;
}

static void scan_work(struct fwd__job *job)
{
    struct scan_job *j = container_of(job, struct scan_job, job);
    DIR *d = opendir(j->dir);
    struct dirent *e;
    char path[4200];
    FILE *cf;
    size_t cap = 0;

    if (!d) {
        j->err = -errno;
        return;
    }
    snprintf(path, sizeof(path), "%s/cursor", j->dir);
    if ((cf = fopen(path, "re")) != NULL) {
        if (fscanf(cf, "%" SCNx64 " %" SCNu64, &j->cur_seg, &j->cur_seq) != 2)
            j->cur_seg = j->cur_seq = 0;
        fclose(cf);
    }
    while ((e = readdir(d)) != NULL) {
        char *end;
        uint64_t id = strtoull(e->d_name, &end, 16);

        if (e->d_name[0] == '.' || strcmp(end, ".seg") != 0 || end == e->d_name)
            continue;
        if (j->n == cap) {
            struct fwd__seg *v = array_grow(j->segs, &cap, j->n, sizeof(*v), 16);

            if (!v)
                break;
            j->segs = v;
        }
        memset(&j->segs[j->n], 0, sizeof(j->segs[0]));
        j->segs[j->n++].id = id;
        if (id > j->max_id)
            j->max_id = id;
    }
    closedir(d);
    if (j->n > 1)
        qsort(j->segs, j->n, sizeof(*j->segs), seg_id_cmp);
    for (size_t i = 0; i < j->n; i++) {
        struct fwd__seg *g = &j->segs[i];

        seg_path(j->dir, g->id, path, sizeof(path));
        if (!scan_seg(j, g, path)) {
            unlink(path);
            g->id = 0; /* gone */
        }
    }
}

static void scan_done(struct fwd__job *job)
{
    struct scan_job *j = container_of(job, struct scan_job, job);
    struct fwd__spool *s = j->s;

    /* Segments first (older), then whatever was appended during the scan. */
    for (size_t i = 0; i < j->n; i++) {
        struct fwd__seg *g = &j->segs[i];

        if (g->id && fwd__idx_seg_insert(&s->idx, g) < 0) {
            /* Out of memory: its records stay on disk for the next start. */
            free(g->recs);
        }
    }
    if (j->corrupt) {
        fwd__ep_drop(s->ep, FWD_DROP_SPOOL_CORRUPT, j->corrupt, 0);
        fwd__ep_error(s->ep, "spool: %" PRIu64 " damaged or torn record(s) lost", j->corrupt);
    }
    if (j->err < 0)
        fwd__ep_error(s->ep, "spool scan %s: %s", j->dir, strerror(-j->err));
    s->cursor_seg = j->cur_seg;
    s->cursor_seq = j->cur_seq;
    s->next_id = j->max_id + 1;
    free(j->segs);
    free(j);
    s->ready = true;
    release(s);
    enforce_caps(s, true);
    kick(s);
    if (s->cb->changed)
        s->cb->changed(s->ud);
    check_closed(s);
}

int fwd__spool_open(struct fwd_ep *ep, const struct fwd__spool_ops_cb *cb, void *ud,
                    struct fwd__spool **out, char *err, size_t errlen)
{
    struct fwd__spool *s = calloc(1, sizeof(*s));
    struct scan_job *j = NULL;
    char comp[128];
    int r;

    if (!s)
        goto oom;
    s->ep = ep;
    s->cb = cb;
    s->ud = ud;
    fwd__path_component(ep->name, comp, sizeof(comp));
    if (asprintf(&s->dir, "%s/%s", ep->spool->dir, comp) < 0) {
        s->dir = NULL;
        goto oom;
    }
    r = fsutil_mkdir_p(s->dir, 0700);
    if (r < 0) {
        snprintf(err, errlen, "%s: spool directory %s: %s", ep->name, s->dir, strerror(-r));
        fwd__spool_free(s);
        return r;
    }
    s->max_seg_bytes = ep->spool->segment_bytes;
    if (s->max_seg_bytes > ep->spool->max_bytes / 4)
        s->max_seg_bytes = ep->spool->max_bytes / 4;
    if (s->max_seg_bytes < 4096)
        s->max_seg_bytes = 4096;
    s->fsync_mode = !strcmp(ep->spool->fsync, "always")  ? 2
                    : !strcmp(ep->spool->fsync, "never") ? 0
                                                         : 1;
    j = calloc(1, sizeof(*j));
    if (!j)
        goto oom;
    j->s = s;
    snprintf(j->dir, sizeof(j->dir), "%s", s->dir);
    r = fwd__job_submit(ep->f, &j->job, 0, scan_work, scan_done);
    if (r < 0) {
        free(j);
        snprintf(err, errlen, "%s: spool scan: %s", ep->name, uv_strerror(r));
        fwd__spool_free(s);
        return r;
    }
    *out = s;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    fwd__spool_free(s);
    return -ENOMEM;
}

bool fwd__spool_busy(const struct fwd__spool *s)
{
    return !s->ready || s->writing || s->loading_job || s->cursor_job || s->fs_reqs > 0;
}

bool fwd__spool_ready(const struct fwd__spool *s)
{
    return s->ready;
}

void fwd__spool_expire(struct fwd__spool *s)
{
    if (!s->ready)
        return;
    enforce_caps(s, true);
    kick(s); /* after a refused write: try again */
}

static void check_closed(struct fwd__spool *s)
{
    void (*cb)(void *);

    if (!s->closing || !s->close_cb)
        return;
    if (s->ready && s->n_pend > 0 && !s->writing)
        kick(s);
    if (s->ready && !s->cursor_job && s->cursor_dirty)
        cursor_update(s);
    if (fwd__spool_busy(s) || s->n_pend > 0)
        return;
    cb = s->close_cb;
    s->close_cb = NULL;
    cb(s->close_ud);
}

void fwd__spool_close(struct fwd__spool *s, void (*cb)(void *ud), void *ud)
{
    s->closing = true;
    s->close_cb = cb;
    s->close_ud = ud;
    cursor_update(s);
    check_closed(s);
}

void fwd__spool_free(struct fwd__spool *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_pend; i++)
        fwd_profile_unref(s->pend[i].p);
    free(s->pend);
    fwd__idx_done(&s->idx);
    free(s->dir);
    free(s);
}
