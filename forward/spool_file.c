/* SPDX-License-Identifier: Apache-2.0 */
/* Segment files of the spool: scanning one (verify every record, resync
 * after damage, count exactly what the damage took, truncate after the last
 * valid record), appending records to one (rolled back on failure), and
 * reading given records back from one (docs/design.md "Modules").
 *
 * Threading: these functions block on the disk and run in the libuv pool
 * (or synchronously in tests and fuzzing). They touch no loop state: a job
 * describes the file and the records, and gets its results back in the
 * same struct. Ownership: appended profiles are borrowed; loaded profiles
 * and the scan's record array are returned owned. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/array.h"
#include "forward/internal.h"

#define ZLEVEL 1
#define SCAN_CHUNK (64 * 1024)

/* Reads exactly n bytes at off; returns bytes read (short at EOF) or -errno. */
static ssize_t pread_full(int fd, void *b, size_t n, uint64_t off)
{
    size_t got = 0;

    while (got < n) {
        ssize_t r = pread(fd, (uint8_t *)b + got, n - got, (off_t)(off + got));

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

/* Writes all n bytes at off; returns 0 or -errno (-ENOSPC for a short write
 * the disk refused to complete). */
static int pwrite_full(int fd, const void *b, size_t n, uint64_t off)
{
    size_t done = 0;

    while (done < n) {
        ssize_t r = pwrite(fd, (const uint8_t *)b + done, n - done, (off_t)(off + done));

        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            return -ENOSPC;
        done += (size_t)r;
    }
    return 0;
}

/* Grows *buf to at least n bytes. */
static int reserve(uint8_t **buf, size_t *cap, size_t n)
{
    uint8_t *b;

    if (n <= *cap)
        return 0;
    b = realloc(*buf, n);
    if (!b)
        return -ENOMEM;
    *buf = b;
    *cap = n;
    return 0;
}

/* ------------------------------------------------------------- scanning */

static bool is_magic(const uint8_t *b)
{
    return b[0] == 'P' && b[1] == 'R' && b[2] == 'C' && (b[3] == '1' || b[3] == '2');
}

/* The offset of the next possible record header at or after `from` (or
 * `size` if there is none): where a record magic stands. */
static uint64_t next_magic(int fd, uint64_t from, uint64_t size, uint8_t *chunk)
{
    while (from + 4 <= size) {
        size_t want = size - from < SCAN_CHUNK ? (size_t)(size - from) : SCAN_CHUNK;
        ssize_t got = pread_full(fd, chunk, want, from);

        if (got < 4)
            break;
        for (size_t i = 0; i + 4 <= (size_t)got; i++) {
            if (is_magic(chunk + i))
                return from + i;
        }
        from += (uint64_t)got - 3;
    }
    return size;
}

/* Counts the records numbered [from, to) as lost, except those delivered. */
static void lose(struct fwd__seg_scan *s, uint32_t from, uint32_t to, uint32_t delivered)
{
    if (from < delivered)
        from = delivered;
    if (to > from)
        s->lost += to - from;
}

static int add_rec(struct fwd__seg_scan *s, const struct fwd__srec *r)
{
    if (s->n == s->cap) {
        struct fwd__srec *v = array_grow(s->recs, &s->cap, s->n, sizeof(*v), 64);

        if (!v)
            return -ENOMEM;
        s->recs = v;
    }
    s->recs[s->n++] = *r;
    return 0;
}

int fwd__seg_scan_fd(int fd, struct fwd__seg_scan *s, uint32_t delivered)
{
    uint8_t sh[FWD_SEG_HDR], hb[FWD_REC_HDR];
    uint8_t *payload = NULL, *chunk = NULL;
    size_t pcap = 0;
    uint64_t off = FWD_SEG_HDR, size;
    uint32_t expect = 0;  /* number of the next record */
    bool damaged = false; /* bytes since the last record that are none */
    struct stat st;
    int r = 0;

    if (fstat(fd, &st) < 0)
        return -errno;
    size = (uint64_t)st.st_size;
    s->end = 0;
    if (size < FWD_SEG_HDR || pread_full(fd, sh, FWD_SEG_HDR, 0) != FWD_SEG_HDR) {
        /* A creation torn inside the segment header: no record follows it. */
        return ftruncate(fd, 0) < 0 ? -errno : 0;
    }
    s->version = !memcmp(sh, FWD_SEG_MAGIC, 8) ? 2 : !memcmp(sh, FWD_SEG_MAGIC_V1, 8) ? 1 : 0;
    s->created_ms = s->version ? fwd__get64(sh + 8) : 0;
    s->end = FWD_SEG_HDR;
    chunk = malloc(SCAN_CHUNK);
    if (!chunk)
        return -ENOMEM;
    while (off < size) {
        struct fwd__rec_hdr h;
        struct fwd__srec rec;
        ssize_t got =
            pread_full(fd, hb, size - off < FWD_REC_HDR ? (size_t)(size - off) : FWD_REC_HDR, off);

        if (got < 0) {
            r = (int)got;
            break;
        }
        /* Version 2 headers verify themselves; a version 1 header is only
         * believed in a segment that is not version 2. */
        if (fwd__rec_hdr_parse(hb, (size_t)got, &h) < 0 || (h.version == 1 && s->version == 2)) {
            damaged = true;
            off = next_magic(fd, off + 1, size, chunk);
            continue;
        }
        if (h.hdr_len + (uint64_t)h.len > size - off) {
            if (h.version == 1) { /* perhaps a false header: go on looking */
                damaged = true;
                off = next_magic(fd, off + 1, size, chunk);
                continue;
            }
            /* A record cut by the end of the file: a torn write. */
            lose(s, expect, h.seq + 1, delivered);
            expect = h.seq + 1;
            damaged = false;
            break;
        }
        if (reserve(&payload, &pcap, h.len) < 0) {
            r = -ENOMEM;
            break;
        }
        got = pread_full(fd, payload, h.len, off + h.hdr_len);
        if (got != (ssize_t)h.len) {
            r = got < 0 ? (int)got : -EIO;
            break;
        }
        if (!fwd__rec_check(&h, payload)) {
            if (h.version == 1) {
                damaged = true;
                off = next_magic(fd, off + 1, size, chunk);
                continue;
            }
            /* A trusted header: exactly this record is damaged. */
            lose(s, expect, h.seq + 1, delivered);
            expect = h.seq + 1;
            damaged = false;
            off += h.hdr_len + h.len;
            continue;
        }
        if (h.version == 2) {
            if (h.seq < expect) { /* a stale copy: not part of the sequence */
                damaged = true;
                off += h.hdr_len + h.len;
                continue;
            }
            lose(s, expect, h.seq, delivered);
            rec.seq = h.seq;
        } else {
            /* No numbers: a damaged region counts one record. */
            if (damaged)
                lose(s, expect, expect + 1, delivered);
            rec.seq = expect + damaged;
        }
        rec.off = off;
        rec.series = h.series;
        if (add_rec(s, &rec) < 0) {
            r = -ENOMEM;
            break;
        }
        damaged = false;
        expect = rec.seq + 1;
        if (!s->oldest_ms || h.wall_ms < s->oldest_ms)
            s->oldest_ms = h.wall_ms;
        if (h.wall_ms > s->newest_ms)
            s->newest_ms = h.wall_ms;
        off += h.hdr_len + h.len;
        s->end = off;
    }
    if (damaged)
        lose(s, expect, expect + 1, delivered); /* damage with no record after it */
    s->next_seq = expect;
    if (!s->created_ms)
        s->created_ms = s->oldest_ms;
    free(payload);
    free(chunk);
    if (r == 0 && s->end < size && ftruncate(fd, (off_t)s->end) < 0)
        r = -errno;
    return r;
}

int fwd__seg_scan_file(const char *path, struct fwd__seg_scan *s)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    int r;

    if (fd < 0)
        return -errno;
    r = fwd__seg_scan_fd(fd, s, 0);
    close(fd);
    return r < 0 ? r : (int)s->n;
}

void fwd__seg_scan_done(struct fwd__seg_scan *s)
{
    free(s->recs);
    memset(s, 0, sizeof(*s));
}

/* ------------------------------------------------------------- appending */

void fwd__seg_append(struct fwd__seg_append *a)
{
    int fd = open(a->path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    uint64_t off = a->off;
    uint32_t seq = a->seq;

    a->end = a->off;
    if (fd < 0) {
        a->err = -errno;
        return;
    }
    if (a->create) {
        uint8_t h[FWD_SEG_HDR];
        int r;

        memcpy(h, FWD_SEG_MAGIC, 8);
        fwd__put64(h + 8, a->created_ms);
        r = ftruncate(fd, 0) < 0 ? -errno : pwrite_full(fd, h, FWD_SEG_HDR, 0);
        if (r < 0) {
            a->err = r;
            (void)ftruncate(fd, 0);
            close(fd);
            return;
        }
        off = FWD_SEG_HDR;
        a->end = off;
    }
    for (size_t i = 0; i < a->n; i++) {
        uint8_t *rec;
        size_t len;
        int r = fwd__rec_encode(a->pend[i].p, a->pend[i].wall_ms, seq, ZLEVEL, &rec, &len);

        if (r < 0) {
            a->res[i] = r; /* this record is dropped (counted), the others go on */
            if (!a->err)
                a->err = r;
            continue;
        }
        r = pwrite_full(fd, rec, len, off);
        free(rec);
        if (r < 0) {
            /* Roll back a torn record: the file ends at the last whole one,
             * so the next append lands where the index says. */
            a->err = r;
            (void)ftruncate(fd, (off_t)off);
            break;
        }
        a->res[i] = (int64_t)len;
        off += len;
        seq++;
        a->end = off;
        if (a->fsync_mode == 2)
            fdatasync(fd);
    }
    if (a->fsync_mode == 1)
        fdatasync(fd);
    close(fd);
}

/* --------------------------------------------------------------- loading */

/* Reads and decodes the record at `r`; NULL if it is not valid any more. */
static struct fwd_profile *load_one(int fd, const struct fwd__srec *r, uint8_t **buf, size_t *cap)
{
    uint8_t hb[FWD_REC_HDR];
    struct fwd__rec_hdr h;
    struct fwd_profile *p = NULL;
    ssize_t got = pread_full(fd, hb, FWD_REC_HDR, r->off);

    if (got < 0 || fwd__rec_hdr_parse(hb, (size_t)got, &h) < 0 ||
        (h.version == 2 && h.seq != r->seq) || reserve(buf, cap, h.len) < 0 ||
        pread_full(fd, *buf, h.len, r->off + h.hdr_len) != (ssize_t)h.len ||
        !fwd__rec_check(&h, *buf) || fwd__rec_decode(*buf, h.len, &p) < 0)
        return NULL;
    return p;
}

void fwd__seg_load(struct fwd__seg_load *l)
{
    int fd = open(l->path, O_RDONLY | O_CLOEXEC);
    uint8_t *buf = NULL;
    size_t cap = 0;
    uint64_t bytes = 0;

    if (fd < 0 && errno != ENOENT) {
        l->err = -errno; /* try again later */
        return;
    }
    l->out = calloc(l->max ? l->max : 1, sizeof(*l->out));
    if (!l->out) {
        l->err = -ENOMEM;
        if (fd >= 0)
            close(fd);
        return;
    }
    /* A segment file that is gone lost all its records. */
    while (l->n < l->max && bytes < l->max_bytes) {
        struct fwd_profile *p = fd >= 0 ? load_one(fd, &l->recs[l->n], &buf, &cap) : NULL;

        l->out[l->n++] = p;
        bytes += p ? p->len : 0;
    }
    free(buf);
    if (fd >= 0)
        close(fd);
}
