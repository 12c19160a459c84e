/* SPDX-License-Identifier: Apache-2.0 */
/* The spool's record format: encodes one profile into a numbered,
 * checksummed, zstd-compressed record, parses and verifies a record header
 * (the current version 2, and version 1 of the previous format, which is
 * still read), and decodes a payload back into a profile (format in
 * internal.h and docs/forwarding.md; docs/design.md "Modules").
 *
 * Pure: no loop, no files, no globals. Every function may run in the pool;
 * fwd__rec_decode() reads untrusted bytes (a file on disk) and is fuzzed.
 * Ownership: encode returns a malloc'd buffer, decode a new profile. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>
#include <zstd.h>

#include "forward/internal.h"

/* Fixed part of the raw payload: version, start, end, id, label count, data length. */
#define RAW_FIXED (4 + 8 + 8 + 36 + 4 + 4)

uint64_t fwd__series_hash(const struct labels *ls)
{
    return labels_hash(ls);
}

/* Version 1 checksum: series, wall time and payload. */
static uint64_t rec_sum_v1(uint64_t series, uint64_t wall, const uint8_t *payload, uint32_t len)
{
    XXH64_state_t *st = XXH64_createState();
    uint8_t h[16];
    uint64_t r;

    if (!st)
        return 0; /* no record sums to 0 in practice: the check fails */
    fwd__put64(h, series);
    fwd__put64(h + 8, wall);
    XXH64_reset(st, 0);
    XXH64_update(st, h, sizeof(h));
    XXH64_update(st, payload, len);
    r = XXH64_digest(st);
    XXH64_freeState(st);
    return r;
}

/* Version 2 header check: over the 36 bytes before it. */
static uint32_t hdr_check(const uint8_t *b)
{
    return (uint32_t)XXH64(b, FWD_REC_HDR - 4, 0);
}

int fwd__rec_encode(const struct fwd_profile *p, uint64_t wall_ms, uint32_t seq, int level,
                    uint8_t **out, size_t *out_len)
{
    size_t raw = RAW_FIXED + p->len, bound, z;
    uint8_t *r, *o, *w;

    for (size_t i = 0; i < p->labels.n; i++)
        raw += 8 + label_name_len(&p->labels.v[i]) + label_value_len(&p->labels.v[i]);
    if (raw > FWD_REC_MAX)
        return -E2BIG;
    r = malloc(raw);
    if (!r)
        return -ENOMEM;
    w = r;
    fwd__put32(w, 1);
    w += 4;
    fwd__put64(w, (uint64_t)p->start_ns);
    w += 8;
    fwd__put64(w, (uint64_t)p->end_ns);
    w += 8;
    memset(w, 0, 36);
    memcpy(w, p->id, strnlen(p->id, 36));
    w += 36;
    fwd__put32(w, (uint32_t)p->labels.n);
    w += 4;
    for (size_t i = 0; i < p->labels.n; i++) {
        const struct label *l = &p->labels.v[i];

        fwd__put32(w, label_name_len(l));
        memcpy(w + 4, l->name, label_name_len(l));
        w += 4 + label_name_len(l);
        fwd__put32(w, label_value_len(l));
        memcpy(w + 4, l->value, label_value_len(l));
        w += 4 + label_value_len(l);
    }
    fwd__put32(w, (uint32_t)p->len);
    memcpy(w + 4, p->data, p->len);
    bound = ZSTD_compressBound(raw);
    o = malloc(FWD_REC_HDR + bound);
    if (!o) {
        free(r);
        return -ENOMEM;
    }
    z = ZSTD_compress(o + FWD_REC_HDR, bound, r, raw, level);
    free(r);
    if (ZSTD_isError(z) || z > FWD_REC_MAX) {
        free(o);
        return -EIO;
    }
    fwd__put32(o, FWD_REC_MAGIC);
    fwd__put32(o + 4, (uint32_t)z);
    fwd__put32(o + 8, seq);
    fwd__put64(o + 12, fwd__series_hash(&p->labels));
    fwd__put64(o + 20, wall_ms);
    fwd__put64(o + 28, XXH64(o + FWD_REC_HDR, z, 0));
    fwd__put32(o + 36, hdr_check(o));
    *out = o;
    *out_len = FWD_REC_HDR + z;
    return 0;
}

int fwd__rec_hdr_parse(const uint8_t *b, size_t n, struct fwd__rec_hdr *h)
{
    uint32_t magic = n >= 4 ? fwd__get32(b) : 0;

    if (magic == FWD_REC_MAGIC && n >= FWD_REC_HDR) {
        if (fwd__get32(b + 36) != hdr_check(b))
            return -EINVAL;
        h->version = 2;
        h->hdr_len = FWD_REC_HDR;
        h->len = fwd__get32(b + 4);
        h->seq = fwd__get32(b + 8);
        h->series = fwd__get64(b + 12);
        h->wall_ms = fwd__get64(b + 20);
        h->sum = fwd__get64(b + 28);
    } else if (magic == FWD_REC_MAGIC_V1 && n >= FWD_REC_HDR_V1) {
        h->version = 1;
        h->hdr_len = FWD_REC_HDR_V1;
        h->len = fwd__get32(b + 4);
        h->seq = 0;
        h->series = fwd__get64(b + 8);
        h->wall_ms = fwd__get64(b + 16);
        h->sum = fwd__get64(b + 24);
    } else {
        return -EINVAL;
    }
    if (h->len == 0 || h->len > FWD_REC_MAX)
        return -EINVAL;
    return 0;
}

bool fwd__rec_check(const struct fwd__rec_hdr *h, const uint8_t *payload)
{
    if (h->version == 1)
        return rec_sum_v1(h->series, h->wall_ms, payload, h->len) == h->sum;
    return XXH64(payload, h->len, 0) == h->sum;
}

int fwd__rec_decode(const uint8_t *payload, size_t len, struct fwd_profile **out)
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

    if (raw == ZSTD_CONTENTSIZE_UNKNOWN || raw == ZSTD_CONTENTSIZE_ERROR || raw > FWD_REC_MAX ||
        raw < RAW_FIXED)
        return -EINVAL;
    r = malloc((size_t)raw);
    if (!r)
        return -ENOMEM;
    got = ZSTD_decompress(r, (size_t)raw, payload, len);
    if (ZSTD_isError(got) || got != raw)
        goto out;
    p = r;
    end = r + got;
    if (fwd__get32(p) != 1)
        goto out;
    start = (int64_t)fwd__get64(p + 4);
    stop = (int64_t)fwd__get64(p + 12);
    memcpy(id, p + 20, 36);
    id[36] = 0;
    n = fwd__get32(p + 56);
    p += 60;
    if (n > 4096)
        goto out;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t nl, vl;
        const uint8_t *name;

        if (end - p < 4)
            goto out;
        nl = fwd__get32(p);
        if ((size_t)(end - p) < 4 + (size_t)nl + 4)
            goto out;
        name = p + 4;
        p += 4 + nl;
        vl = fwd__get32(p);
        if ((size_t)(end - p) < 4 + (size_t)vl)
            goto out;
        if (memchr(name, 0, nl) || memchr(p + 4, 0, vl) || nl == 0 ||
            labels_setn(&ls, (const char *)name, nl, (const char *)p + 4, vl) < 0)
            goto out;
        p += 4 + vl;
    }
    if (end - p < 4)
        goto out;
    dl = fwd__get32(p);
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
