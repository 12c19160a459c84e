/* Disk spool of one endpoint: <spool.dir>/<endpoint>/<id>.seg segment files
 * of zstd-compressed, checksummed records (format in internal.h and
 * docs/forwarding.md), plus a `cursor` file naming the delivered prefix.
 *
 * Appends are batched into one write job at a time (zstd + write + fsync
 * per policy, in the pool). Loads read records back in order, one segment
 * at a time, in the pool. The loop thread keeps the index: segments, their
 * record counts, which loaded records were acknowledged (a bitmap per
 * segment), and how many unloaded records each series has (so the caller
 * can keep each series in order). The start-up scan verifies every record
 * header and checksum, truncates a torn or corrupt tail (counted, never
 * fatal) and rebuilds the index. Only the spool directory is ever written.
 *
 * Caps: bytes (oldest segment deleted first, its undelivered records
 * counted as spool_full) and age (segments whose newest record is older
 * than max_age are deleted, counted as spool_age). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>
#include <zstd.h>

#include "common/fsutil.h"
#include "forward/internal.h"

#define SEG_HDR 16 /* magic (8) + created ms (8) */
#define ZLEVEL 1

/* ------------------------------------------------------------ the format */

static void put32(uint8_t *b, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *b, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *b)
{
    uint32_t v = 0;

    for (int i = 3; i >= 0; i--)
        v = (v << 8) | b[i];
    return v;
}

static uint64_t get64(const uint8_t *b)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = (v << 8) | b[i];
    return v;
}

uint64_t fwd__series_hash(const struct labels *ls)
{
    return labels_hash(ls);
}

static uint64_t rec_sum(uint64_t series, uint64_t wall, const uint8_t *payload, uint32_t len)
{
    XXH64_state_t *st = XXH64_createState();
    uint8_t h[16];
    uint64_t r;

    put64(h, series);
    put64(h + 8, wall);
    XXH64_reset(st, 0);
    XXH64_update(st, h, sizeof(h));
    XXH64_update(st, payload, len);
    r = XXH64_digest(st);
    XXH64_freeState(st);
    return r;
}

int fwd__spool_encode(const struct fwd_profile *p, uint64_t wall_ms, int level, uint8_t **out,
                      size_t *out_len)
{
    size_t raw = 4 + 8 + 8 + 36 + 4 + 4 + p->len, bound, z;
    uint8_t *r, *o, *w;

    for (size_t i = 0; i < p->labels.n; i++)
        raw += 8 + p->labels.v[i].name_len + p->labels.v[i].value_len;
    if (raw > FWD_SPOOL_MAX_RECORD)
        return -E2BIG;
    r = malloc(raw);
    if (!r)
        return -ENOMEM;
    w = r;
    put32(w, 1);
    w += 4;
    put64(w, (uint64_t)p->start_ns);
    w += 8;
    put64(w, (uint64_t)p->end_ns);
    w += 8;
    memset(w, 0, 36);
    memcpy(w, p->id, strnlen(p->id, 36));
    w += 36;
    put32(w, (uint32_t)p->labels.n);
    w += 4;
    for (size_t i = 0; i < p->labels.n; i++) {
        const struct label *l = &p->labels.v[i];

        put32(w, l->name_len);
        memcpy(w + 4, l->name, l->name_len);
        w += 4 + l->name_len;
        put32(w, l->value_len);
        memcpy(w + 4, l->value, l->value_len);
        w += 4 + l->value_len;
    }
    put32(w, (uint32_t)p->len);
    memcpy(w + 4, p->data, p->len);
    bound = ZSTD_compressBound(raw);
    o = malloc(FWD_SPOOL_HDR + bound);
    if (!o) {
        free(r);
        return -ENOMEM;
    }
    z = ZSTD_compress(o + FWD_SPOOL_HDR, bound, r, raw, level);
    free(r);
    if (ZSTD_isError(z) || z > FWD_SPOOL_MAX_RECORD) {
        free(o);
        return -EIO;
    }
    put32(o, FWD_SPOOL_MAGIC);
    put32(o + 4, (uint32_t)z);
    put64(o + 8, fwd__series_hash(&p->labels));
    put64(o + 16, wall_ms);
    put64(o + 24, rec_sum(get64(o + 8), wall_ms, o + FWD_SPOOL_HDR, (uint32_t)z));
    *out = o;
    *out_len = FWD_SPOOL_HDR + z;
    return 0;
}

int fwd__spool_hdr_parse(const uint8_t *b, struct fwd__rec_hdr *h)
{
    if (get32(b) != FWD_SPOOL_MAGIC)
        return -EINVAL;
    h->len = get32(b + 4);
    h->series = get64(b + 8);
    h->wall_ms = get64(b + 16);
    h->sum = get64(b + 24);
    if (h->len == 0 || h->len > FWD_SPOOL_MAX_RECORD)
        return -EINVAL;
    return 0;
}

bool fwd__spool_hdr_check(const struct fwd__rec_hdr *h, const uint8_t *payload)
{
    return rec_sum(h->series, h->wall_ms, payload, h->len) == h->sum;
}

int fwd__spool_decode(const uint8_t *payload, size_t len, struct fwd_profile **out)
{
    unsigned long long raw = ZSTD_getFrameContentSize(payload, len);
    struct labels ls = LABELS_INIT;
    uint8_t *r = NULL, *data = NULL;
    const uint8_t *p, *end;
    int64_t start, stop;
    char id[37];
    uint32_t n, dl;
    size_t got;
    int ret = -EINVAL;

    if (raw == ZSTD_CONTENTSIZE_UNKNOWN || raw == ZSTD_CONTENTSIZE_ERROR ||
        raw > FWD_SPOOL_MAX_RECORD || raw < 4 + 8 + 8 + 36 + 4 + 4)
        return -EINVAL;
    r = malloc((size_t)raw);
    if (!r)
        return -ENOMEM;
    got = ZSTD_decompress(r, (size_t)raw, payload, len);
    if (ZSTD_isError(got) || got != raw)
        goto out;
    p = r;
    end = r + got;
    if (get32(p) != 1)
        goto out;
    start = (int64_t)get64(p + 4);
    stop = (int64_t)get64(p + 12);
    memcpy(id, p + 20, 36);
    id[36] = 0;
    n = get32(p + 56);
    p += 60;
    if (n > 4096)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t nl, vl;
        const uint8_t *name;

        if (end - p < 4)
            goto out;
        nl = get32(p);
        if ((size_t)(end - p) < 4 + (size_t)nl + 4)
            goto out;
        name = p + 4;
        p += 4 + nl;
        vl = get32(p);
        if ((size_t)(end - p) < 4 + (size_t)vl)
            goto out;
        if (memchr(name, 0, nl) || memchr(p + 4, 0, vl) || nl == 0 ||
            labels_setn(&ls, (const char *)name, nl, (const char *)p + 4, vl) < 0)
            goto out;
        p += 4 + vl;
    }
    if (end - p < 4)
        goto out;
    dl = get32(p);
    if ((size_t)(end - p) != 4 + (size_t)dl)
        goto out;
    data = malloc(dl ? dl : 1);
    if (!data) {
        ret = -ENOMEM;
        goto out;
    }
    memcpy(data, p + 4, dl);
    *out = fwd__profile_new_id(&ls, data, dl, start, stop, id);
    data = NULL;
    ret = *out ? 0 : -ENOMEM;
out:
    labels_done(&ls);
    free(data);
    free(r);
    return ret;
}

/* Reads exactly n bytes at off; returns bytes read (short at EOF) or -errno. */
static ssize_t pread_full(int fd, void *b, size_t n, off_t off)
{
    size_t got = 0;

    while (got < n) {
        ssize_t r = pread(fd, (uint8_t *)b + got, n - got, off + (off_t)got);

        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* Scan result for one segment. */
struct seg_scan {
    uint64_t records, bytes, corrupt, oldest_ms, newest_ms, created_ms;
    uint64_t *series; /* per record */
    size_t n_series, cap_series;
};

static int scan_fd(int fd, struct seg_scan *s, bool want_series)
{
    uint8_t hdr[FWD_SPOOL_HDR], sh[SEG_HDR];
    struct stat st;
    uint64_t off = SEG_HDR;
    uint8_t *payload = NULL;
    size_t pcap = 0;
    int r = 0;

    if (fstat(fd, &st) < 0)
        return -errno;
    if (pread_full(fd, sh, SEG_HDR, 0) != SEG_HDR || memcmp(sh, FWD_SPOOL_SEG_MAGIC, 8) != 0) {
        /* Not even a header: the whole file is torn. */
        s->corrupt += st.st_size > 0;
        if (ftruncate(fd, 0) < 0)
            return -errno;
        s->bytes = 0;
        return 0;
    }
    s->created_ms = get64(sh + 8);
    while (off < (uint64_t)st.st_size) {
        struct fwd__rec_hdr h;

        if ((uint64_t)st.st_size - off < FWD_SPOOL_HDR ||
            pread_full(fd, hdr, FWD_SPOOL_HDR, (off_t)off) != FWD_SPOOL_HDR ||
            fwd__spool_hdr_parse(hdr, &h) < 0 ||
            (uint64_t)st.st_size - off - FWD_SPOOL_HDR < h.len) {
            s->corrupt++;
            break;
        }
        if (h.len > pcap) {
            free(payload);
            pcap = h.len;
            payload = malloc(pcap);
            if (!payload) {
                r = -ENOMEM;
                break;
            }
        }
        if (pread_full(fd, payload, h.len, (off_t)(off + FWD_SPOOL_HDR)) != (ssize_t)h.len ||
            !fwd__spool_hdr_check(&h, payload)) {
            s->corrupt++;
            break;
        }
        if (want_series) {
            if (s->n_series == s->cap_series) {
                size_t cap = s->cap_series ? s->cap_series * 2 : 64;
                uint64_t *v = realloc(s->series, cap * sizeof(*v));

                if (!v) {
                    r = -ENOMEM;
                    break;
                }
                s->series = v;
                s->cap_series = cap;
            }
            s->series[s->n_series++] = h.series;
        }
        if (!s->oldest_ms || h.wall_ms < s->oldest_ms)
            s->oldest_ms = h.wall_ms;
        if (h.wall_ms > s->newest_ms)
            s->newest_ms = h.wall_ms;
        s->records++;
        off += FWD_SPOOL_HDR + h.len;
    }
    free(payload);
    if (r == 0 && off < (uint64_t)st.st_size && ftruncate(fd, (off_t)off) < 0)
        r = -errno;
    s->bytes = off;
    return r;
}

int fwd__spool_scan_file(const char *path, uint64_t *records, uint64_t *bytes_kept,
                         uint64_t *corrupt, uint64_t *oldest_ms)
{
    struct seg_scan s = {0};
    int fd = open(path, O_RDWR | O_CLOEXEC);
    int r;

    if (fd < 0)
        return -errno;
    r = scan_fd(fd, &s, false);
    close(fd);
    *records = s.records;
    *bytes_kept = s.bytes;
    *corrupt = s.corrupt;
    *oldest_ms = s.oldest_ms;
    return r < 0 ? r : (int)s.records;
}

/* ------------------------------------------------------------ series map */

struct smap {
    uint64_t *k;
    uint32_t *v;
    size_t cap, n;
};

static uint32_t *smap_slot(struct smap *m, uint64_t key, bool create)
{
    size_t i;

    if (create && (m->n + 1) * 2 > m->cap) {
        struct smap nm = {0};

        nm.cap = m->cap ? m->cap * 2 : 256;
        nm.k = calloc(nm.cap, sizeof(*nm.k));
        nm.v = calloc(nm.cap, sizeof(*nm.v));
        if (!nm.k || !nm.v) {
            free(nm.k);
            free(nm.v);
            return NULL;
        }
        for (size_t j = 0; j < m->cap; j++) {
            if (m->v[j]) {
                size_t h = (size_t)(m->k[j] % nm.cap);

                while (nm.v[h])
                    h = (h + 1) % nm.cap;
                nm.k[h] = m->k[j];
                nm.v[h] = m->v[j];
                nm.n++;
            }
        }
        free(m->k);
        free(m->v);
        *m = nm;
    }
    if (!m->cap)
        return NULL;
    i = (size_t)(key % m->cap);
    /* Zero counts stay as tombstones with their key; they are reused. */
    for (size_t probes = 0; probes < m->cap; probes++, i = (i + 1) % m->cap) {
        if (m->k[i] == key && (m->v[i] || create))
            return &m->v[i];
        if (m->k[i] == 0 && m->v[i] == 0) {
            if (!create)
                return NULL;
            m->k[i] = key;
            m->n++;
            return &m->v[i];
        }
    }
    return NULL;
}

static void smap_add(struct smap *m, uint64_t key, int d)
{
    uint32_t *v;

    key |= 1; /* 0 marks an empty slot */
    v = smap_slot(m, key, d > 0);
    if (!v)
        return;
    if (d > 0)
        *v += (uint32_t)d;
    else if (*v >= (uint32_t)-d)
        *v -= (uint32_t)-d;
    else
        *v = 0;
}

/* ------------------------------------------------------------ the spool */

struct seg {
    uint64_t id;
    uint64_t size;        /* valid bytes */
    uint64_t records;     /* records in the file */
    uint64_t loaded;      /* records handed out */
    uint64_t read_off;    /* file offset of the next record to load */
    uint64_t acked;       /* acknowledged records */
    uint64_t created_ms, newest_ms;
    uint8_t *ackmap;      /* bit per loaded record */
    size_t ackmap_len;
    uint64_t *series;     /* series hash of unloaded records, FIFO */
    size_t series_head, series_n, series_cap;
    bool deleted;
};

struct pend {
    struct fwd_profile *p;
    uint64_t series, wall_ms;
};

struct write_job {
    uv_work_t work;
    struct fwd__spool *s;
    char path[4096];
    bool create;
    uint64_t created_ms;
    int fsync_mode; /* 0 never, 1 batch, 2 always */
    struct pend *pend;
    size_t n;
    uint64_t *sizes; /* out: bytes of each record, 0 if not written */
    uint64_t written;
    int err;
};

struct load_job {
    uv_work_t work;
    struct fwd__spool *s;
    char path[4096];
    uint64_t seg_id, off, limit, max_bytes;
    size_t max;
    struct fwd_profile **out;
    size_t n;
    uint64_t consumed; /* new offset */
    bool corrupt;
    int err;
};

struct scan_job {
    uv_work_t work;
    struct fwd__spool *s;
    char dir[4096];
    struct seg *segs;
    size_t n;
    uint64_t corrupt, corrupt_bytes;
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
    struct seg *segs;
    size_t n_segs, cap_segs;
    struct smap series;
    struct pend *pend;
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

static void seg_path(const struct fwd__spool *s, uint64_t id, char *out, size_t n)
{
    snprintf(out, n, "%s/%016" PRIx64 ".seg", s->dir, id);
}

static struct seg *seg_find(struct fwd__spool *s, uint64_t id)
{
    for (size_t i = 0; i < s->n_segs; i++) {
        if (s->segs[i].id == id)
            return &s->segs[i];
    }
    return NULL;
}

static int series_push(struct seg *g, uint64_t h)
{
    if (g->series_head + g->series_n == g->series_cap) {
        if (g->series_head > 0) {
            memmove(g->series, g->series + g->series_head, g->series_n * sizeof(*g->series));
            g->series_head = 0;
        }
        if (g->series_n == g->series_cap) {
            size_t cap = g->series_cap ? g->series_cap * 2 : 64;
            uint64_t *v = realloc(g->series, cap * sizeof(*v));

            if (!v)
                return -ENOMEM;
            g->series = v;
            g->series_cap = cap;
        }
    }
    g->series[g->series_head + g->series_n++] = h;
    return 0;
}

static void stats(struct fwd__spool *s)
{
    struct fwd__stats *st = &s->ep->st;
    uint64_t bytes = 0, recs = 0, oldest = 0;

    for (size_t i = 0; i < s->n_segs; i++) {
        struct seg *g = &s->segs[i];

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
    st->spool_segments = s->n_segs;
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
    struct seg *g = &s->segs[i];
    uint64_t unloaded = g->records - g->loaded;
    char path[4096];
    uv_fs_t *req;

    if (unloaded && reason < FWD_DROP__N)
        fwd__ep_drop(s->ep, reason, unloaded, 0);
    for (size_t k = 0; k < g->series_n; k++)
        smap_add(&s->series, g->series[g->series_head + k], -1);
    seg_path(s, g->id, path, sizeof(path));
    req = malloc(sizeof(*req));
    if (req) {
        req->data = s;
        if (uv_fs_unlink(s->ep->loop, req, path, fs_done) == 0)
            s->fs_reqs++;
        else
            free(req);
    }
    free(g->ackmap);
    free(g->series);
    memmove(&s->segs[i], &s->segs[i + 1], (s->n_segs - i - 1) * sizeof(*g));
    s->n_segs--;
}

static struct seg *seg_new(struct fwd__spool *s, uint64_t id)
{
    struct seg *g;

    if (s->n_segs == s->cap_segs) {
        size_t cap = s->cap_segs ? s->cap_segs * 2 : 16;
        struct seg *v = realloc(s->segs, cap * sizeof(*v));

        if (!v)
            return NULL;
        s->segs = v;
        s->cap_segs = cap;
    }
    g = &s->segs[s->n_segs++];
    memset(g, 0, sizeof(*g));
    g->id = id;
    g->read_off = SEG_HDR;
    return g;
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
    struct seg *g = s->n_segs ? &s->segs[0] : NULL;
    uint64_t seg = g ? g->id : 0, recs = 0;

    /* The delivered prefix of the oldest segment. */
    if (g) {
        while (recs < g->loaded && (g->ackmap[recs / 8] & (1u << (recs % 8))))
            recs++;
    }
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

    for (size_t i = 0; i < s->n_segs; i++)
        total += s->segs[i].size;
    /* Oldest first; never the segment being written (the last one). */
    while (s->n_segs > 1 && total > c->max_bytes) {
        total -= s->segs[0].size;
        seg_delete(s, 0, FWD_DROP_SPOOL_FULL);
    }
    while (age && s->n_segs > 0 && s->segs[0].newest_ms &&
           s->segs[0].newest_ms + c->max_age_ms < now && !s->writing) {
        seg_delete(s, 0, FWD_DROP_SPOOL_AGE);
    }
    stats(s);
}

/* ----- writing */

static void write_work(uv_work_t *w)
{
    struct write_job *j = container_of(w, struct write_job, work);
    int fd = open(j->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

    if (fd < 0) {
        j->err = -errno;
        return;
    }
    if (j->create) {
        uint8_t h[SEG_HDR];

        memcpy(h, FWD_SPOOL_SEG_MAGIC, 8);
        put64(h + 8, j->created_ms);
        if (ftruncate(fd, 0) < 0 || write(fd, h, SEG_HDR) != SEG_HDR) {
            j->err = -EIO;
            close(fd);
            return;
        }
        j->written += SEG_HDR;
    }
    for (size_t i = 0; i < j->n; i++) {
        uint8_t *rec;
        size_t len;
        int r = fwd__spool_encode(j->pend[i].p, j->pend[i].wall_ms, ZLEVEL, &rec, &len);

        if (r < 0) {
            j->err = r;
            continue; /* this record is lost (counted), the others go on */
        }
        if (write(fd, rec, len) != (ssize_t)len) {
            j->err = -errno ? -errno : -EIO;
            free(rec);
            break;
        }
        free(rec);
        j->sizes[i] = len;
        j->written += len;
        if (j->fsync_mode == 2)
            fdatasync(fd);
    }
    if (j->fsync_mode == 1)
        fdatasync(fd);
    close(fd);
}

static void write_done(uv_work_t *w, int status)
{
    struct write_job *j = container_of(w, struct write_job, work);
    struct fwd__spool *s = j->s;
    struct seg *g = s->n_segs ? &s->segs[s->n_segs - 1] : NULL;

    s->writing = false;
    for (size_t i = 0; i < j->n; i++) {
        struct pend *pd = &j->pend[i];

        if (j->sizes[i] && g && !g->deleted) {
            g->records++;
            g->newest_ms = pd->wall_ms;
            series_push(g, pd->series);
            s->ep->st.spool_written_profiles++;
        } else {
            /* Not on disk: the series count taken at append is returned. */
            smap_add(&s->series, pd->series, -1);
            fwd__ep_drop(s->ep, FWD_DROP_IO, 1, pd->p->len);
        }
        fwd_profile_unref(pd->p);
    }
    if (g)
        g->size += j->written;
    if (j->err < 0)
        fwd__ep_error(s->ep, "spool write %s: %s", j->path, strerror(-j->err));
    free(j->pend);
    free(j->sizes);
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
    struct seg *g;
    bool create = false;

    if (s->cursor_dirty && !s->cursor_job)
        cursor_update(s);
    if (!s->ready || s->writing || s->n_pend == 0)
        return;
    g = s->n_segs ? &s->segs[s->n_segs - 1] : NULL;
    if (!g || g->size >= s->max_seg_bytes) {
        g = seg_new(s, g ? g->id + 1 : 1);
        if (!g)
            return;
        g->created_ms = s->pend[0].wall_ms;
        create = true;
    }
    j = calloc(1, sizeof(*j));
    if (!j)
        return;
    j->s = s;
    seg_path(s, g->id, j->path, sizeof(j->path));
    j->create = create;
    j->created_ms = g->created_ms;
    j->fsync_mode = s->fsync_mode;
    j->pend = s->pend;
    j->n = s->n_pend;
    j->sizes = calloc(j->n, sizeof(*j->sizes));
    if (!j->sizes) {
        free(j);
        return;
    }
    if (uv_queue_work(s->ep->loop, &j->work, write_work, write_done) < 0) {
        free(j->sizes);
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
    struct pend *pd;

    if (s->n_pend == s->cap_pend) {
        size_t cap = s->cap_pend ? s->cap_pend * 2 : 64;
        struct pend *v = realloc(s->pend, cap * sizeof(*v));

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
    smap_add(&s->series, pd->series, 1);
    enforce_caps(s, false);
    kick(s);
}

uint64_t fwd__spool_pending(const struct fwd__spool *s)
{
    uint64_t n = s->n_pend;

    for (size_t i = 0; i < s->n_segs; i++)
        n += s->segs[i].records - s->segs[i].loaded;
    return n;
}

uint32_t fwd__spool_series_count(const struct fwd__spool *s, uint64_t series)
{
    uint32_t *v = smap_slot((struct smap *)&s->series, series | 1, false);

    return v ? *v : 0;
}

/* ----- loading */

static void load_work(uv_work_t *w)
{
    struct load_job *j = container_of(w, struct load_job, work);
    int fd = open(j->path, O_RDONLY | O_CLOEXEC);
    uint64_t off = j->off, bytes = 0;
    uint8_t hdr[FWD_SPOOL_HDR];
    uint8_t *payload = NULL;

    j->consumed = off;
    if (fd < 0) {
        j->err = -errno;
        return;
    }
    j->out = calloc(j->max, sizeof(*j->out));
    while (j->out && j->n < j->max && off < j->limit && bytes < j->max_bytes) {
        struct fwd__rec_hdr h;
        struct fwd_profile *p = NULL;

        if (pread_full(fd, hdr, FWD_SPOOL_HDR, (off_t)off) != FWD_SPOOL_HDR ||
            fwd__spool_hdr_parse(hdr, &h) < 0 || off + FWD_SPOOL_HDR + h.len > j->limit) {
            j->corrupt = true;
            break;
        }
        payload = malloc(h.len);
        if (!payload)
            break;
        if (pread_full(fd, payload, h.len, (off_t)(off + FWD_SPOOL_HDR)) != (ssize_t)h.len ||
            !fwd__spool_hdr_check(&h, payload) || fwd__spool_decode(payload, h.len, &p) < 0) {
            j->corrupt = true;
            free(payload);
            payload = NULL;
            break;
        }
        free(payload);
        payload = NULL;
        j->out[j->n++] = p;
        bytes += p->len;
        off += FWD_SPOOL_HDR + h.len;
        j->consumed = off;
    }
    close(fd);
}

static void load_done(uv_work_t *w, int status)
{
    struct load_job *j = container_of(w, struct load_job, work);
    struct fwd__spool *s = j->s;
    struct seg *g = seg_find(s, j->seg_id);
    uint64_t *tokens = calloc(j->n ? j->n : 1, sizeof(*tokens));
    size_t n = 0;

    s->loading_job = false;
    if (g) {
        size_t need = (size_t)((g->loaded + j->n) / 8 + 1);

        if (need > g->ackmap_len) {
            uint8_t *m = realloc(g->ackmap, need * 2);

            if (m) {
                memset(m + g->ackmap_len, 0, need * 2 - g->ackmap_len);
                g->ackmap = m;
                g->ackmap_len = need * 2;
            }
        }
        for (size_t i = 0; i < j->n && tokens && g->ackmap && g->series_n > 0; i++) {
            tokens[n++] = (g->id << 24) | (g->loaded & 0xffffff);
            g->loaded++;
            smap_add(&s->series, g->series[g->series_head], -1);
            g->series_head++;
            g->series_n--;
            s->ep->st.spool_replayed_profiles++;
            j->out[n - 1] = j->out[i];
        }
        g->read_off = j->consumed;
        if (j->corrupt && j->n == 0) {
            /* Corrupted since the scan: the rest of this segment is lost. */
            uint64_t lost = g->records - g->loaded;

            fwd__ep_drop(s->ep, FWD_DROP_SPOOL_CORRUPT, lost, 0);
            for (size_t k = 0; k < g->series_n; k++)
                smap_add(&s->series, g->series[g->series_head + k], -1);
            g->series_n = 0;
            g->records = g->loaded;
            g->read_off = g->size;
            fwd__ep_error(s->ep, "spool: corrupt record in segment %016" PRIx64, g->id);
        }
    }
    for (size_t i = n; i < j->n; i++)
        fwd_profile_unref(j->out[i]);
    stats(s);
    if (s->cb->loaded)
        s->cb->loaded(s->ud, j->out, tokens, n);
    free(tokens);
    free(j->out);
    free(j);
    check_closed(s);
}

bool fwd__spool_load(struct fwd__spool *s, size_t max, uint64_t max_bytes)
{
    struct load_job *j;
    struct seg *g = NULL;

    if (!s->ready || s->loading_job || s->closing || max == 0)
        return false;
    for (size_t i = 0; i < s->n_segs; i++) {
        if (s->segs[i].loaded < s->segs[i].records) {
            g = &s->segs[i];
            break;
        }
    }
    if (!g)
        return false;
    j = calloc(1, sizeof(*j));
    if (!j)
        return false;
    j->s = s;
    seg_path(s, g->id, j->path, sizeof(j->path));
    j->seg_id = g->id;
    j->off = g->read_off;
    j->limit = g->size;
    j->max = max;
    if (j->max > g->records - g->loaded)
        j->max = (size_t)(g->records - g->loaded);
    j->max_bytes = max_bytes ? max_bytes : UINT64_MAX;
    if (uv_queue_work(s->ep->loop, &j->work, load_work, load_done) < 0) {
        free(j);
        return false;
    }
    s->loading_job = true;
    return true;
}

void fwd__spool_ack(struct fwd__spool *s, uint64_t token)
{
    struct seg *g = seg_find(s, token >> 24);
    uint64_t idx;

    if (!g)
        return; /* deleted by a cap meanwhile */
    idx = token & 0xffffff;
    if (idx / 8 >= g->ackmap_len || (g->ackmap[idx / 8] & (1u << (idx % 8))))
        return;
    g->ackmap[idx / 8] |= (uint8_t)(1u << (idx % 8));
    g->acked++;
    /* A segment fully delivered and no longer written is removed. */
    while (s->n_segs > 0 && s->segs[0].acked == s->segs[0].records &&
           s->segs[0].loaded == s->segs[0].records &&
           (s->n_segs > 1 || (!s->writing && s->n_pend == 0))) {
        seg_delete(s, 0, FWD_DROP__N);
    }
    cursor_update(s);
    stats(s);
}

/* ----- open / scan */

static int seg_id_cmp(const void *a, const void *b)
{
    const struct seg *x = a, *y = b;

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
            struct seg *v = realloc(j->segs, (cap ? cap * 2 : 16) * sizeof(*v));

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
        struct seg *g = &j->segs[i];
        struct seg_scan sc = {0};
        int fd;

        snprintf(path, sizeof(path), "%s/%016" PRIx64 ".seg", j->dir, g->id);
        fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            continue;
        scan_fd(fd, &sc, true);
        close(fd);
        j->corrupt += sc.corrupt;
        g->size = sc.bytes;
        g->records = sc.records;
        g->created_ms = sc.created_ms ? sc.created_ms : sc.oldest_ms;
        g->newest_ms = sc.newest_ms;
        g->series = sc.series;
        g->series_n = sc.n_series;
        g->series_cap = sc.cap_series;
        g->read_off = SEG_HDR;
        if (g->size < SEG_HDR) {
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
            uint64_t off = SEG_HDR;
            uint8_t hdr[FWD_SPOOL_HDR];

            fd = open(path, O_RDONLY | O_CLOEXEC);
            for (uint64_t k = 0; fd >= 0 && k < skip; k++) {
                struct fwd__rec_hdr h;

                if (pread_full(fd, hdr, FWD_SPOOL_HDR, (off_t)off) != FWD_SPOOL_HDR ||
                    fwd__spool_hdr_parse(hdr, &h) < 0)
                    break;
                off += FWD_SPOOL_HDR + h.len;
            }
            if (fd >= 0)
                close(fd);
            g->read_off = off;
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
    struct pend *pend = s->pend;
    size_t n_pend = s->n_pend;

    /* Segments first (older), then whatever was appended during the scan. */
    for (size_t i = 0; i < j->n; i++) {
        struct seg *g = &j->segs[i], *d;

        if (g->deleted) {
            free(g->series);
            continue;
        }
        d = seg_new(s, g->id);
        if (!d) {
            free(g->series);
            continue;
        }
        *d = *g;
        d->ackmap_len = (size_t)(d->records / 8 + 1);
        d->ackmap = calloc(d->ackmap_len, 1);
        for (uint64_t k = 0; d->ackmap && k < d->acked; k++)
            d->ackmap[k / 8] |= (uint8_t)(1u << (k % 8));
        for (size_t k = 0; k < d->series_n; k++)
            smap_add(&s->series, d->series[d->series_head + k], 1);
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
    (void)pend;
    (void)n_pend;
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
    for (size_t i = 0; i < s->n_segs; i++) {
        free(s->segs[i].ackmap);
        free(s->segs[i].series);
    }
    free(s->segs);
    free(s->series.k);
    free(s->series.v);
    free(s->dir);
    free(s);
}
