/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: spool segment files and records (untrusted: torn, damaged
 * or hostile files on disk).
 *
 * An input starting with a segment magic ("PFLSPL") is a raw segment file:
 * the scan must not crash, every record it keeps must read back, and a
 * second scan of the (truncated) file must find the same records.
 *
 * Any other input builds a segment: byte 0 gives the number of records,
 * then for each a length byte and that many payload bytes; then pairs
 * (position, xor) damage the file and a last 32-bit word may cut it short.
 * Invariants: the scan keeps exactly the records nothing touched, each
 * equal to what was written; the count of lost records is exact (at most
 * one off when a run of damaged records reaches the end of the file, where
 * nothing says how many there were, and never zero when a record was hit).
 * The remaining bytes are also decoded as a record payload. */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "forward/internal.h"

#define MAXREC 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_spool: invariant broken: %s\n", what);
        abort();
    }
}

/* Writes `b` to a temp file, scans it; returns the path in `path` (the
 * caller unlinks) or false if the file could not be written. */
static bool scan_buf(const uint8_t *b, size_t n, char *path, struct fwd__seg_scan *sc)
{
    int fd;

    strcpy(path, "/tmp/fuzz-spool-XXXXXX");
    fd = mkstemp(path);
    if (fd < 0)
        return false;
    if (write(fd, b, n) != (ssize_t)n) {
        close(fd);
        unlink(path);
        return false;
    }
    fwd__seg_scan_fd(fd, sc, 0);
    close(fd);
    return true;
}

/* Loads every record the scan kept (owned profiles in out). */
static void load_all(const char *path, const struct fwd__seg_scan *sc, struct fwd_profile **out)
{
    struct fwd__seg_load l = { 0 };

    snprintf(l.path, sizeof(l.path), "%s", path);
    l.recs = sc->recs;
    l.max = sc->n;
    l.max_bytes = UINT64_MAX;
    fwd__seg_load(&l);
    check(l.n == sc->n, "a kept record was not read back");
    for (size_t i = 0; i < l.n; i++)
        out[i] = l.out[i];
    free(l.out);
}

static void raw(const uint8_t *data, size_t size)
{
    struct fwd__seg_scan a = { 0 }, b = { 0 };
    char path[64];
    int fd;

    if (!scan_buf(data, size, path, &a))
        return;
    for (size_t i = 0; i < a.n; i++) {
        struct fwd_profile *p[1];
        struct fwd__seg_scan one = { .recs = &a.recs[i], .n = 1 };

        load_all(path, &one, p);
        check(p[0] != NULL, "a record the scan kept does not decode");
        fwd_profile_unref(p[0]);
    }
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
        fwd__seg_scan_fd(fd, &b, 0);
        close(fd);
        check(b.n == a.n && b.end == a.end, "a second scan differs");
        for (size_t i = 0; i < a.n; i++)
            check(a.recs[i].off == b.recs[i].off && a.recs[i].seq == b.recs[i].seq,
                  "a second scan found other records");
    }
    fwd__seg_scan_done(&a);
    fwd__seg_scan_done(&b);
    unlink(path);
}

static bool same(const struct fwd_profile *a, const struct fwd_profile *b)
{
    return a && b && strcmp(a->id, b->id) == 0 && a->len == b->len &&
           memcmp(a->data, b->data, a->len) == 0 && labels_equal(&a->labels, &b->labels);
}

static void structured(const uint8_t *data, size_t size)
{
    struct fwd_profile *orig[MAXREC] = { 0 }, *got[MAXREC] = { 0 };
    size_t offs[MAXREC + 1], n = data[0] % MAXREC + 1, pos = 1, len = FWD_SEG_HDR, cut;
    bool hit[MAXREC] = { false };
    size_t n_hit = 0, n_whole, kept;
    struct fwd__seg_scan sc = { 0 };
    uint8_t *file = malloc(FWD_SEG_HDR), *clean = NULL;
    char path[64];

    if (!file)
        return;
    memcpy(file, FWD_SEG_MAGIC, 8);
    fwd__put64(file + 8, 1);
    for (size_t i = 0; i < n; i++) {
        struct labels ls = LABELS_INIT;
        size_t dl = pos < size ? data[pos++] : 0;
        uint8_t *d = malloc(dl + 1), *rec, *grown;
        size_t rl;

        dl = dl <= size - pos ? dl : size - pos;
        memcpy(d, data + pos, dl);
        pos += dl;
        labels_set(&ls, "service_name", i % 2 ? "a" : "b");
        labels_set(&ls, "__name__", "cpu");
        orig[i] = fwd_profile_new(&ls, d, dl, (int64_t)i, (int64_t)i + 1);
        if (!orig[i] || fwd__rec_encode(orig[i], i, (uint32_t)i, 1, &rec, &rl) < 0)
            goto out;
        grown = realloc(file, len + rl);
        if (!grown) {
            free(rec);
            goto out;
        }
        file = grown;
        offs[i] = len;
        memcpy(file + len, rec, rl);
        len += rl;
        free(rec);
    }
    offs[n] = len;
    if (!(clean = malloc(len)))
        goto out;
    memcpy(clean, file, len);
    /* Damage: (u16 position, xor) pairs; then an optional cut. */
    cut = len;
    while (size - pos >= 3) {
        size_t at = ((size_t)data[pos] | (size_t)data[pos + 1] << 8) % len;
        uint8_t x = data[pos + 2];

        pos += 3;
        if (x == 0xff && size - pos >= 1) { /* a cut */
            cut = FWD_SEG_HDR + at % (len - FWD_SEG_HDR + 1);
            continue;
        }
        file[at] ^= x;
    }
    /* A record is damaged when its bytes changed in the end (the same byte
     * hit an even number of times by the same xor is intact again). */
    for (size_t i = 0; i < n; i++) {
        if (memcmp(file + offs[i], clean + offs[i], offs[i + 1] - offs[i]) != 0) {
            hit[i] = true;
            n_hit++;
        }
    }
    /* Records wholly past the cut were never written; the one it splits is
     * damaged. */
    n_whole = 0;
    while (n_whole < n && offs[n_whole + 1] <= cut)
        n_whole++;
    if (n_whole < n && cut > offs[n_whole] && !hit[n_whole]) {
        hit[n_whole] = true;
        n_hit++;
    }
    for (size_t i = n_whole + (cut > offs[n_whole] ? 1 : 0); i < n; i++) {
        if (hit[i]) {
            hit[i] = false;
            n_hit--;
        }
    }
    if (!scan_buf(file, cut, path, &sc))
        goto out;
    load_all(path, &sc, got);
    unlink(path);
    kept = 0;
    for (size_t i = 0; i < n_whole; i++)
        kept += !hit[i];
    check(sc.n == kept, "the scan kept a damaged record or lost an intact one");
    for (size_t i = 0; i < sc.n; i++) {
        check(sc.recs[i].seq < n && !hit[sc.recs[i].seq], "a kept record has a damaged number");
        check(same(got[i], orig[sc.recs[i].seq]), "a record read back differs");
    }
    {
        size_t last = n_whole + (cut > offs[n_whole] && n_whole < n ? 1 : 0);
        bool tail_hit = last > 0 && hit[last - 1];

        check(sc.lost <= n_hit, "more records counted lost than damaged");
        check(n_hit == 0 || sc.lost > 0, "damage not counted");
        check(tail_hit || sc.lost == n_hit, "the count of lost records is not exact");
    }
out:
    fwd__seg_scan_done(&sc);
    for (size_t i = 0; i < MAXREC; i++) {
        fwd_profile_unref(orig[i]);
        fwd_profile_unref(got[i]);
    }
    free(file);
    free(clean);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (size >= 6 && memcmp(data, "PFLSPL", 6) == 0)
        raw(data, size);
    else
        structured(data, size);
    /* Record payload decoding on its own (checksums bypassed). */
    {
        struct fwd_profile *p = NULL;

        if (fwd__rec_decode(data, size, &p) == 0)
            fwd_profile_unref(p);
    }
    return 0;
}
