/* The disk spool of one endpoint: <spool.dir>/<endpoint>/<id>.seg segment
 * files (spool_file.c) of records (spool_record.c), plus a `cursor` file
 * naming the delivered prefix; docs/forwarding.md describes the format.
 *
 * This file is the state machine: it starts the pool jobs (the start-up
 * scan, one append job at a time gathering every pending append, one load
 * job at a time, cursor writes, unlinks), applies their results to the
 * index (spool_index.c) and enforces the caps: bytes (oldest segment
 * deleted first, its undelivered records counted as spool_full) and age
 * (segments whose newest record is older than max_age are deleted, counted
 * as spool_age). Only the spool directory is ever written.
 *
 * Threading: loop thread; the jobs run in the pool and own their inputs
 * (paths, the pending records with their references) until their done
 * callback. Ownership: the spool holds a reference to every pending
 * profile; loaded profiles are handed to the caller. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "forward/internal.h"

struct write_job {
    uv_work_t work;
    struct fwd__spool *s;
    struct fwd__seg_append a;
};

struct load_job {
    uv_work_t work;
    struct fwd__spool *s;
    uint64_t seg_id;
    struct fwd__seg_load l;
};

struct scan_job {
    uv_work_t work;
    struct fwd__spool *s;
    char dir[4096];
    struct fwd__seg *segs;
    size_t n;
    uint64_t corrupt;
    uint64_t cur_seg, cur_records; /* cursor file */
    int err;
};

struct cursor_job {
    uv_work_t work;
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
    bool ready, writing, loading_job, cursor_job, cursor_dirty;
    unsigned fs_reqs;
    uint64_t cursor_seg, cursor_records; /* written state */
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
        recs += g->records - g->acked;
        if (g->records > g->acked && (!oldest || g->created_ms < oldest))
            oldest = g->created_ms;
    }
    for (size_t i = 0; i < s->n_pend; i++) {
        bytes += s->pend[i].p->len;
        if (!oldest || s->pend[i].wall_ms < oldest)
            oldest = s->pend[i].wall_ms;
    }
    st->spool_bytes = bytes;
    st->spool_segments = s->idx.n_segs;
    st->spool_records = recs + s->n_pend;
    st->spool_oldest_ms = oldest;
}

static void fs_done(uv_fs_t *req)
{
    struct fwd__spool *s = req->data;

    uv_fs_req_cleanup(req);
    free(req);
    s->fs_reqs--;
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

/* ----- cursor: "<segment id hex> <delivered records>" */

static void cursor_work(uv_work_t *w)
{
    struct cursor_job *j = container_of(w, struct cursor_job, work);

    /* A failed write leaves the previous cursor in place; the next cursor
     * update writes the whole state again, so there is nothing to retry. */
    (void)fsutil_write_atomic(j->dir, "cursor", j->text, strlen(j->text), j->sync);
}

static void cursor_done(uv_work_t *w, int status)
{
    struct cursor_job *j = container_of(w, struct cursor_job, work);
    struct fwd__spool *s = j->s;

    free(j);
    s->cursor_job = false;
    kick(s);
    check_closed(s);
}

static void cursor_update(struct fwd__spool *s)
{
    struct cursor_job *j;
    uint64_t seg, recs;

    fwd__idx_cursor(&s->idx, &seg, &recs);
    if (seg == s->cursor_seg && recs == s->cursor_records)
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
    snprintf(j->text, sizeof(j->text), "%016" PRIx64 " %" PRIu64 "\n", seg, recs);
    j->sync = s->fsync_mode > 0;
    if (uv_queue_work(s->ep->loop, &j->work, cursor_work, cursor_done) < 0) {
        free(j);
        return;
    }
    s->cursor_job = true;
    s->cursor_dirty = false;
    s->cursor_seg = seg;
    s->cursor_records = recs;
}

/* ----- caps */

static void enforce_caps(struct fwd__spool *s, bool age)
{
    const struct cfg_spool *c = &s->ep->spool;
    uint64_t now = fwd__wall_ms(), total = s->pend_bytes;

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

static void write_work(uv_work_t *w)
{
    fwd__seg_append(&container_of(w, struct write_job, work)->a);
}

static void write_done(uv_work_t *w, int status)
{
    struct write_job *j = container_of(w, struct write_job, work);
    struct fwd__spool *s = j->s;
    struct fwd__seg *g = s->idx.n_segs ? &s->idx.segs[s->idx.n_segs - 1] : NULL;

    s->writing = false;
    for (size_t i = 0; i < j->a.n; i++) {
        struct fwd__pend *pd = &j->a.pend[i];

        if (j->a.sizes[i] && g && !g->deleted) {
            fwd__idx_rec_add(&s->idx, g, pd->series, pd->wall_ms);
            s->ep->st.spool_written_profiles++;
        } else {
            /* Not on disk: the series count taken at append is returned. */
            fwd__smap_add(&s->idx.series, pd->series, -1);
            fwd__ep_drop(s->ep, FWD_DROP_IO, 1, pd->p->len);
        }
        fwd_profile_unref(pd->p);
    }
    if (g)
        g->size += j->a.written;
    if (j->a.err < 0)
        fwd__ep_error(s->ep, "spool write %s: %s", j->a.path, strerror(-j->a.err));
    free(j->a.pend);
    free(j->a.sizes);
    free(j);
    enforce_caps(s, false);
    kick(s);
    if (s->cb->changed)
        s->cb->changed(s->ud);
    check_closed(s);
}

/* Starts a write job for everything pending. */
static void kick(struct fwd__spool *s)
{
    struct write_job *j;
    struct fwd__seg *g;
    bool create = false;

    if (s->cursor_dirty && !s->cursor_job)
        cursor_update(s);
    if (!s->ready || s->writing || s->n_pend == 0)
        return;
    g = s->idx.n_segs ? &s->idx.segs[s->idx.n_segs - 1] : NULL;
    if (!g || g->size >= s->max_seg_bytes) {
        g = fwd__idx_seg_add(&s->idx, g ? g->id + 1 : 1);
        if (!g)
            return;
        g->created_ms = s->pend[0].wall_ms;
        create = true;
    }
    j = calloc(1, sizeof(*j));
    if (!j)
        return;
    j->s = s;
    seg_path(s->dir, g->id, j->a.path, sizeof(j->a.path));
    j->a.create = create;
    j->a.created_ms = g->created_ms;
    j->a.fsync_mode = s->fsync_mode;
    j->a.pend = s->pend;
    j->a.n = s->n_pend;
    j->a.sizes = calloc(j->a.n, sizeof(*j->a.sizes));
    if (!j->a.sizes) {
        free(j);
        return;
    }
    if (uv_queue_work(s->ep->loop, &j->work, write_work, write_done) < 0) {
        free(j->a.sizes);
        free(j);
        return;
    }
    s->pend = NULL;
    s->n_pend = s->cap_pend = 0;
    s->pend_bytes = 0;
    s->writing = true;
}

void fwd__spool_append(struct fwd__spool *s, struct fwd_profile *p)
{
    struct fwd__pend *pd;

    if (s->n_pend == s->cap_pend) {
        size_t cap = s->cap_pend ? s->cap_pend * 2 : 64;
        struct fwd__pend *v = realloc(s->pend, cap * sizeof(*v));

        if (!v) {
            fwd__ep_drop(s->ep, FWD_DROP_IO, 1, p->len);
            return;
        }
        s->pend = v;
        s->cap_pend = cap;
    }
    pd = &s->pend[s->n_pend++];
    pd->p = fwd_profile_ref(p);
    pd->series = fwd__series_hash(&p->labels);
    pd->wall_ms = fwd__wall_ms();
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

static void load_work(uv_work_t *w)
{
    fwd__seg_load(&container_of(w, struct load_job, work)->l);
}

static void load_done(uv_work_t *w, int status)
{
    struct load_job *j = container_of(w, struct load_job, work);
    struct fwd__spool *s = j->s;
    struct fwd__seg *g = fwd__idx_seg_find(&s->idx, j->seg_id);
    uint64_t *tokens = calloc(j->l.n ? j->l.n : 1, sizeof(*tokens));
    size_t n = 0;

    s->loading_job = false;
    if (g) {
        n = fwd__idx_load(&s->idx, g, tokens ? j->l.n : 0, tokens);
        s->ep->st.spool_replayed_profiles += n;
        g->read_off = j->l.consumed;
        if (j->l.corrupt && j->l.n == 0) {
            /* Corrupted since the scan: the rest of this segment is lost. */
            fwd__ep_drop(s->ep, FWD_DROP_SPOOL_CORRUPT, fwd__idx_drop_unloaded(&s->idx, g), 0);
            fwd__ep_error(s->ep, "spool: corrupt record in segment %016" PRIx64, g->id);
        }
    }
    for (size_t i = n; i < j->l.n; i++)
        fwd_profile_unref(j->l.out[i]);
    stats(s);
    if (s->cb->loaded)
        s->cb->loaded(s->ud, j->l.out, tokens, n);
    free(tokens);
    free(j->l.out);
    free(j);
    check_closed(s);
}

bool fwd__spool_load(struct fwd__spool *s, size_t max, uint64_t max_bytes)
{
    struct load_job *j;
    struct fwd__seg *g = NULL;

    if (!s->ready || s->loading_job || s->closing || max == 0)
        return false;
    for (size_t i = 0; i < s->idx.n_segs; i++) {
        if (s->idx.segs[i].loaded < s->idx.segs[i].records) {
            g = &s->idx.segs[i];
            break;
        }
    }
    if (!g)
        return false;
    j = calloc(1, sizeof(*j));
    if (!j)
        return false;
    j->s = s;
    seg_path(s->dir, g->id, j->l.path, sizeof(j->l.path));
    j->seg_id = g->id;
    j->l.off = g->read_off;
    j->l.limit = g->size;
    j->l.max = max;
    if (j->l.max > g->records - g->loaded)
        j->l.max = (size_t)(g->records - g->loaded);
    j->l.max_bytes = max_bytes ? max_bytes : UINT64_MAX;
    if (uv_queue_work(s->ep->loop, &j->work, load_work, load_done) < 0) {
        free(j);
        return false;
    }
    s->loading_job = true;
    return true;
}

void fwd__spool_ack(struct fwd__spool *s, uint64_t token)
{
    struct fwd__spool_index *x = &s->idx;

    if (!fwd__idx_ack(x, token))
        return;
    /* A segment fully delivered and no longer written is removed. */
    while (x->n_segs > 0 && x->segs[0].acked == x->segs[0].records &&
           x->segs[0].loaded == x->segs[0].records &&
           (x->n_segs > 1 || (!s->writing && s->n_pend == 0))) {
        seg_delete(s, 0, FWD_DROP__N);
    }
    cursor_update(s);
    stats(s);
}

/* ----- open / scan */

static int seg_id_cmp(const void *a, const void *b)
{
    const struct fwd__seg *x = a, *y = b;

    return x->id < y->id ? -1 : x->id > y->id;
}

static void scan_work(uv_work_t *w)
{
    struct scan_job *j = container_of(w, struct scan_job, work);
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
        if (fscanf(cf, "%" SCNx64 " %" SCNu64, &j->cur_seg, &j->cur_records) != 2)
            j->cur_seg = j->cur_records = 0;
        fclose(cf);
    }
    while ((e = readdir(d)) != NULL) {
        char *end;
        uint64_t id = strtoull(e->d_name, &end, 16);

        if (e->d_name[0] == '.' || strcmp(end, ".seg") != 0 || end == e->d_name)
            continue;
        if (j->n == cap) {
            struct fwd__seg *v = realloc(j->segs, (cap ? cap * 2 : 16) * sizeof(*v));

            if (!v)
                break;
            j->segs = v;
            cap = cap ? cap * 2 : 16;
        }
        memset(&j->segs[j->n], 0, sizeof(j->segs[0]));
        j->segs[j->n++].id = id;
    }
    closedir(d);
    if (j->n > 1)
        qsort(j->segs, j->n, sizeof(*j->segs), seg_id_cmp);
    for (size_t i = 0; i < j->n; i++) {
        struct fwd__seg *g = &j->segs[i];
        struct fwd__seg_scan sc = {0};
        int fd;

        seg_path(j->dir, g->id, path, sizeof(path));
        fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            continue;
        fwd__seg_scan_fd(fd, &sc, true);
        close(fd);
        j->corrupt += sc.corrupt;
        g->size = sc.bytes;
        g->records = sc.records;
        g->created_ms = sc.created_ms ? sc.created_ms : sc.oldest_ms;
        g->newest_ms = sc.newest_ms;
        g->series = sc.series;
        g->series_n = sc.n_series;
        g->series_cap = sc.cap_series;
        g->read_off = FWD_SEG_HDR;
        if (g->size < FWD_SEG_HDR) {
            unlink(path); /* an empty, headerless file */
            g->deleted = true;
            continue;
        }
        /* Delivered before the restart: older segments, and the cursor's
         * prefix of its segment. Skip them (reading their offsets). */
        if (g->id < j->cur_seg) {
            unlink(path);
            g->deleted = true;
        } else if (g->id == j->cur_seg && j->cur_records > 0) {
            uint64_t skip = j->cur_records < g->records ? j->cur_records : g->records;

            g->read_off = fwd__seg_skip(path, skip);
            /* Treat the skipped prefix as loaded and acknowledged. */
            g->loaded = g->acked = skip;
            g->series_head = (size_t)skip;
            g->series_n -= (size_t)skip;
        }
    }
}

static void scan_done(uv_work_t *w, int status)
{
    struct scan_job *j = container_of(w, struct scan_job, work);
    struct fwd__spool *s = j->s;

    /* Segments first (older), then whatever was appended during the scan. */
    for (size_t i = 0; i < j->n; i++) {
        struct fwd__seg *g = &j->segs[i];

        if (g->deleted || fwd__idx_seg_insert(&s->idx, g) < 0)
            free(g->series);
    }
    if (j->corrupt) {
        fwd__ep_drop(s->ep, FWD_DROP_SPOOL_CORRUPT, j->corrupt, 0);
        fwd__ep_error(s->ep, "spool: truncated %" PRIu64 " torn or corrupt record(s)",
                      j->corrupt);
    }
    if (j->err < 0)
        fwd__ep_error(s->ep, "spool scan %s: %s", j->dir, strerror(-j->err));
    s->cursor_seg = j->cur_seg;
    s->cursor_records = j->cur_records;
    free(j->segs);
    free(j);
    s->ready = true;
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
    if (asprintf(&s->dir, "%s/%s", ep->spool.dir, comp) < 0) {
        s->dir = NULL;
        goto oom;
    }
    r = fsutil_mkdir_p(s->dir, 0700);
    if (r < 0) {
        snprintf(err, errlen, "%s: spool directory %s: %s", ep->name, s->dir, strerror(-r));
        fwd__spool_free(s);
        return r;
    }
    s->max_seg_bytes = ep->spool.segment_bytes;
    if (s->max_seg_bytes > ep->spool.max_bytes / 4)
        s->max_seg_bytes = ep->spool.max_bytes / 4;
    if (s->max_seg_bytes < 4096)
        s->max_seg_bytes = 4096;
    s->fsync_mode = !strcmp(ep->spool.fsync, "always") ? 2 : !strcmp(ep->spool.fsync, "never") ? 0 : 1;
    j = calloc(1, sizeof(*j));
    if (!j)
        goto oom;
    j->s = s;
    snprintf(j->dir, sizeof(j->dir), "%s", s->dir);
    r = uv_queue_work(ep->loop, &j->work, scan_work, scan_done);
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
    if (s->ready)
        enforce_caps(s, true);
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
