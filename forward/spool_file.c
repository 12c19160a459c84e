/* Segment files of the spool: scanning one (verify every record, truncate a
 * torn or corrupt tail), appending records to one, and reading records back
 * from one.
 *
 * Threading: these functions block on the disk and run in the libuv pool
 * (or synchronously in tests and fuzzing). They touch no loop state: a job
 * describes the file and the records, and gets its results back in the
 * same struct. Ownership: appended profiles are borrowed; loaded profiles
 * are returned owned. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "forward/internal.h"

#define ZLEVEL 1

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

int fwd__seg_scan_fd(int fd, struct fwd__seg_scan *s, bool want_series)
{
    uint8_t hdr[FWD_REC_HDR], sh[FWD_SEG_HDR];
    struct stat st;
    uint64_t off = FWD_SEG_HDR;
    uint8_t *payload = NULL;
    size_t pcap = 0;
    int r = 0;

    if (fstat(fd, &st) < 0)
        return -errno;
    if (pread_full(fd, sh, FWD_SEG_HDR, 0) != FWD_SEG_HDR ||
        memcmp(sh, FWD_SEG_MAGIC, 8) != 0) {
        /* Not even a header: the whole file is torn. */
        s->corrupt += st.st_size > 0;
        if (ftruncate(fd, 0) < 0)
            return -errno;
        s->bytes = 0;
        return 0;
    }
    s->created_ms = fwd__get64(sh + 8);
    while (off < (uint64_t)st.st_size) {
        struct fwd__rec_hdr h;

        if ((uint64_t)st.st_size - off < FWD_REC_HDR ||
            pread_full(fd, hdr, FWD_REC_HDR, (off_t)off) != FWD_REC_HDR ||
            fwd__rec_hdr_parse(hdr, &h) < 0 ||
            (uint64_t)st.st_size - off - FWD_REC_HDR < h.len) {
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
        if (pread_full(fd, payload, h.len, (off_t)(off + FWD_REC_HDR)) != (ssize_t)h.len ||
            !fwd__rec_check(&h, payload)) {
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
        off += FWD_REC_HDR + h.len;
    }
    free(payload);
    if (r == 0 && off < (uint64_t)st.st_size && ftruncate(fd, (off_t)off) < 0)
        r = -errno;
    s->bytes = off;
    return r;
}

int fwd__seg_scan_file(const char *path, uint64_t *records, uint64_t *bytes_kept,
                       uint64_t *corrupt, uint64_t *oldest_ms)
{
    struct fwd__seg_scan s = {0};
    int fd = open(path, O_RDWR | O_CLOEXEC);
    int r;

    if (fd < 0)
        return -errno;
    r = fwd__seg_scan_fd(fd, &s, false);
    close(fd);
    *records = s.records;
    *bytes_kept = s.bytes;
    *corrupt = s.corrupt;
    *oldest_ms = s.oldest_ms;
    return r < 0 ? r : (int)s.records;
}

uint64_t fwd__seg_skip(const char *path, uint64_t n)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    uint64_t off = FWD_SEG_HDR;
    uint8_t hdr[FWD_REC_HDR];

    for (uint64_t k = 0; fd >= 0 && k < n; k++) {
        struct fwd__rec_hdr h;

        if (pread_full(fd, hdr, FWD_REC_HDR, (off_t)off) != FWD_REC_HDR ||
            fwd__rec_hdr_parse(hdr, &h) < 0)
            break;
        off += FWD_REC_HDR + h.len;
    }
    if (fd >= 0)
        close(fd);
    return off;
}

void fwd__seg_append(struct fwd__seg_append *a)
{
    int fd = open(a->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

    if (fd < 0) {
        a->err = -errno;
        return;
    }
    if (a->create) {
        uint8_t h[FWD_SEG_HDR];

        memcpy(h, FWD_SEG_MAGIC, 8);
        fwd__put64(h + 8, a->created_ms);
        if (ftruncate(fd, 0) < 0 || write(fd, h, FWD_SEG_HDR) != FWD_SEG_HDR) {
            a->err = -EIO;
            close(fd);
            return;
        }
        a->written += FWD_SEG_HDR;
    }
    for (size_t i = 0; i < a->n; i++) {
        uint8_t *rec;
        size_t len;
        int r = fwd__rec_encode(a->pend[i].p, a->pend[i].wall_ms, ZLEVEL, &rec, &len);

        if (r < 0) {
            a->err = r;
            continue; /* this record is lost (counted), the others go on */
        }
        if (write(fd, rec, len) != (ssize_t)len) {
            a->err = -errno ? -errno : -EIO;
            free(rec);
            break;
        }
        free(rec);
        a->sizes[i] = len;
        a->written += len;
        if (a->fsync_mode == 2)
            fdatasync(fd);
    }
    if (a->fsync_mode == 1)
        fdatasync(fd);
    close(fd);
}

void fwd__seg_load(struct fwd__seg_load *l)
{
    int fd = open(l->path, O_RDONLY | O_CLOEXEC);
    uint64_t off = l->off, bytes = 0;
    uint8_t hdr[FWD_REC_HDR];
    uint8_t *payload = NULL;

    l->consumed = off;
    if (fd < 0) {
        l->err = -errno;
        return;
    }
    l->out = calloc(l->max, sizeof(*l->out));
    while (l->out && l->n < l->max && off < l->limit && bytes < l->max_bytes) {
        struct fwd__rec_hdr h;
        struct fwd_profile *p = NULL;

        if (pread_full(fd, hdr, FWD_REC_HDR, (off_t)off) != FWD_REC_HDR ||
            fwd__rec_hdr_parse(hdr, &h) < 0 || off + FWD_REC_HDR + h.len > l->limit) {
            l->corrupt = true;
            break;
        }
        payload = malloc(h.len);
        if (!payload)
            break;
        if (pread_full(fd, payload, h.len, (off_t)(off + FWD_REC_HDR)) != (ssize_t)h.len ||
            !fwd__rec_check(&h, payload) || fwd__rec_decode(payload, h.len, &p) < 0) {
            l->corrupt = true;
            free(payload);
            payload = NULL;
            break;
        }
        free(payload);
        payload = NULL;
        l->out[l->n++] = p;
        bytes += p->len;
        off += FWD_REC_HDR + h.len;
        l->consumed = off;
    }
    close(fd);
}
