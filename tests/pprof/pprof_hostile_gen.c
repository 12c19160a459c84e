/* SPDX-License-Identifier: Apache-2.0 */
/* pprof-hostile-gen: writes valid but hostile pprof profiles, and sums
 * profiles, for the memory-bound integration test
 * (tests/integration/test_memory_bound.py), which needs profiles of a
 * million samples faster than Python writes them.
 *
 *   pprof-hostile-gen gen PREFIX VERSIONS SAMPLES LOCATIONS DEPTH COLUMNS
 *                     FUNCTIONS LABELS NAME_LEN EXTRA_STRINGS
 *
 * writes PREFIX.<v>.pb.gz for v in 1..VERSIONS (gzip level 1): COLUMNS 2
 * (contentions/count, delay/nanoseconds) or 4 (the heap's); sample i has
 * DEPTH location ids (for 2: i mod LOCATIONS and i / LOCATIONS mod
 * LOCATIONS, else consecutive ids from i * DEPTH, wrapping), values
 * (i mod 7 + 1) * (column + 1) * v, and LABELS string labels
 * k<j> = v<i mod 100>; location l has one line in function
 * (l - 1) mod FUNCTIONS, whose name is NAME_LEN bytes longer than
 * "main.fn<f>"; EXTRA_STRINGS unused strings follow. Version v's delta
 * over v - 1 is version 1's values. Prints the raw size of version 1.
 *
 *   pprof-hostile-gen sum FILE
 *
 * prints "samples=<n> totals=<t0>,<t1>,..." for a gzip or plain profile.
 *
 * Single-threaded; everything is freed before exit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "tprof.h"

struct spec {
    size_t samples, locations, depth, columns, functions, labels, name_len, extra;
};

static void put_str(struct twb *w, const char *s, size_t len)
{
    twb_bytes(w, 6, s, len);
}

static int build(const struct spec *sp, int64_t version, struct twb *w)
{
    static const char *const cols[4][2] = { { "contentions", "count" },
                                            { "delay", "nanoseconds" },
                                            { "inuse_objects", "count" },
                                            { "inuse_space", "bytes" } };
    static const char *const heap[4][2] = { { "alloc_objects", "count" },
                                            { "alloc_space", "bytes" },
                                            { "inuse_objects", "count" },
                                            { "inuse_space", "bytes" } };
    struct twb m = { 0 }, inner = { 0 }, lbl = { 0 };
    size_t name0, file_s, key0, val0;
    char buf[64];
    char *name = NULL;

    for (size_t c = 0; c < sp->columns; c++) {
        m.len = 0;
        twb_uint(&m, 1, 1 + 2 * c);
        twb_uint(&m, 2, 2 + 2 * c);
        twb_bytes(w, 1, m.data, m.len);
    }
    name0 = 1 + 2 * sp->columns;
    file_s = name0 + sp->functions;
    key0 = file_s + 1;
    val0 = key0 + sp->labels;
    for (size_t i = 0; i < sp->samples; i++) {
        m.len = 0;
        inner.len = 0;
        if (sp->depth == 2) {
            twb_varint(&inner, 1 + i % sp->locations);
            twb_varint(&inner, 1 + (i / sp->locations) % sp->locations);
        } else {
            for (size_t j = 0; j < sp->depth; j++)
                twb_varint(&inner, 1 + (i * sp->depth + j) % sp->locations);
        }
        twb_bytes(&m, 1, inner.data, inner.len);
        inner.len = 0;
        for (size_t c = 0; c < sp->columns; c++)
            twb_varint(&inner, (uint64_t)((int64_t)(i % 7 + 1) * (int64_t)(c + 1) * version));
        twb_bytes(&m, 2, inner.data, inner.len);
        for (size_t j = 0; j < sp->labels; j++) {
            lbl.len = 0;
            twb_uint(&lbl, 1, key0 + j);
            twb_uint(&lbl, 2, val0 + i % 100);
            twb_bytes(&m, 3, lbl.data, lbl.len);
        }
        twb_bytes(w, 2, m.data, m.len);
    }
    for (size_t l = 1; l <= sp->locations; l++) {
        m.len = 0;
        inner.len = 0;
        twb_uint(&inner, 1, 1 + (l - 1) % sp->functions);
        twb_uint(&inner, 2, 1 + l % 1000);
        twb_uint(&m, 1, l);
        twb_uint(&m, 3, 0x400000 + 16 * l);
        twb_bytes(&m, 4, inner.data, inner.len);
        twb_bytes(w, 4, m.data, m.len);
    }
    for (size_t f = 0; f < sp->functions; f++) {
        m.len = 0;
        twb_uint(&m, 1, f + 1);
        twb_uint(&m, 2, name0 + f);
        twb_uint(&m, 4, file_s);
        twb_bytes(w, 5, m.data, m.len);
    }
    put_str(w, "", 0);
    for (size_t c = 0; c < sp->columns; c++) {
        const char *const *t = sp->columns == 4 ? heap[c] : cols[c];
        put_str(w, t[0], strlen(t[0]));
        put_str(w, t[1], strlen(t[1]));
    }
    if (!(name = malloc(sp->name_len + 64)))
        return -1;
    for (size_t f = 0; f < sp->functions; f++) {
        int n = snprintf(name, 64, "main.fn%zu", f);
        memset(name + n, 'x', sp->name_len);
        put_str(w, name, (size_t)n + sp->name_len);
    }
    free(name);
    put_str(w, "main.go", 7);
    for (size_t j = 0; j < sp->labels; j++)
        put_str(w, buf, (size_t)snprintf(buf, sizeof(buf), "k%zu", j));
    for (size_t j = 0; sp->labels && j < 100; j++)
        put_str(w, buf, (size_t)snprintf(buf, sizeof(buf), "v%zu", j));
    for (size_t j = 0; j < sp->extra; j++)
        put_str(w, buf, (size_t)snprintf(buf, sizeof(buf), "s%zu", j));
    m.len = 0;
    twb_uint(&m, 1, 1);
    twb_uint(&m, 2, 2);
    twb_bytes(w, 11, m.data, m.len);
    twb_uint(w, 12, 1);
    twb_free(&m);
    twb_free(&inner);
    twb_free(&lbl);
    return 0;
}

static int write_gz(const char *path, const struct twb *w)
{
    gzFile f = gzopen(path, "wb1");
    int ok;

    if (!f)
        return -1;
    ok = gzwrite(f, w->data, (unsigned)w->len) == (int)w->len;
    return gzclose(f) == Z_OK && ok ? 0 : -1;
}

static int gen(int argc, char **argv)
{
    struct spec sp;
    unsigned long versions;
    char path[4096];

    if (argc != 12)
        return 2;
    versions = strtoul(argv[3], NULL, 10);
    sp = (struct spec){ strtoul(argv[4], NULL, 10),  strtoul(argv[5], NULL, 10),
                        strtoul(argv[6], NULL, 10),  strtoul(argv[7], NULL, 10),
                        strtoul(argv[8], NULL, 10),  strtoul(argv[9], NULL, 10),
                        strtoul(argv[10], NULL, 10), strtoul(argv[11], NULL, 10) };
    if (!sp.samples || !sp.locations || !sp.depth || !sp.functions ||
        (sp.columns != 2 && sp.columns != 4))
        return 2;
    for (unsigned long v = 1; v <= versions; v++) {
        struct twb w = { 0 };
        int rc = build(&sp, (int64_t)v, &w);

        snprintf(path, sizeof(path), "%s.%lu.pb.gz", argv[2], v);
        if (rc == 0)
            rc = write_gz(path, &w);
        if (rc == 0 && v == 1)
            printf("%zu\n", w.len);
        twb_free(&w);
        if (rc < 0) {
            fprintf(stderr, "%s: cannot write\n", path);
            return 1;
        }
    }
    return 0;
}

/* Appends `len` bytes to `w`. */
static void twb_reserve_bytes(struct twb *w, const uint8_t *data, size_t len)
{
    if (w->len + len > w->cap) {
        size_t cap = w->cap ? w->cap : 1 << 20;
        while (cap < w->len + len)
            cap *= 2;
        uint8_t *nd = realloc(w->data, cap);
        if (!nd) {
            fprintf(stderr, "out of memory\n");
            exit(1);
        }
        w->data = nd;
        w->cap = cap;
    }
    memcpy(w->data + w->len, data, len);
    w->len += len;
}

static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t r = 0;

    for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80) {
            *v = r;
            return 0;
        }
    }
    return -1;
}

static int sum(const char *path)
{
    gzFile f = gzopen(path, "rb");
    struct twb raw = { 0 };
    uint8_t chunk[1 << 16];
    uint64_t totals[16] = { 0 }, n = 0, tag, len;
    size_t ncols = 0;
    int got;

    if (!f)
        return 1;
    /* gzread() reads gzip and plain files alike. */
    while ((got = gzread(f, chunk, sizeof(chunk))) > 0) {
        twb_reserve_bytes(&raw, chunk, (size_t)got);
    }
    gzclose(f);
    for (const uint8_t *p = raw.data, *end = raw.data + raw.len; p < end;) {
        if (varint(&p, end, &tag) < 0)
            goto bad;
        if ((tag & 7) == 0) {
            if (varint(&p, end, &len) < 0)
                goto bad;
            continue;
        }
        if ((tag & 7) != 2 || varint(&p, end, &len) < 0 || len > (uint64_t)(end - p))
            goto bad;
        if (tag >> 3 == 2) {
            n++;
            for (const uint8_t *q = p, *qe = p + len; q < qe;) {
                uint64_t t2, l2, v;
                if (varint(&q, qe, &t2) < 0)
                    goto bad;
                if ((t2 & 7) == 0) {
                    if (varint(&q, qe, &v) < 0)
                        goto bad;
                    continue;
                }
                if (varint(&q, qe, &l2) < 0 || l2 > (uint64_t)(qe - q))
                    goto bad;
                if (t2 >> 3 == 2 && (t2 & 7) == 2) {
                    size_t c = 0;
                    for (const uint8_t *r = q; r < q + l2 && c < 16; c++) {
                        if (varint(&r, q + l2, &v) < 0)
                            goto bad;
                        totals[c] += v;
                    }
                    if (c > ncols)
                        ncols = c;
                }
                q += l2;
            }
        }
        p += len;
    }
    printf("samples=%llu totals=", (unsigned long long)n);
    for (size_t c = 0; c < ncols; c++)
        printf("%s%llu", c ? "," : "", (unsigned long long)totals[c]);
    printf("\n");
    twb_free(&raw);
    return 0;
bad:
    twb_free(&raw);
    fprintf(stderr, "%s: malformed\n", path);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "gen") == 0) {
        int rc = gen(argc, argv);
        if (rc == 2)
            fprintf(stderr, "usage: pprof-hostile-gen gen PREFIX VERSIONS SAMPLES LOCATIONS "
                            "DEPTH COLUMNS FUNCTIONS LABELS NAME_LEN EXTRA_STRINGS\n");
        return rc;
    }
    if (argc == 3 && strcmp(argv[1], "sum") == 0)
        return sum(argv[2]);
    fprintf(stderr, "usage: pprof-hostile-gen gen ... | sum FILE\n");
    return 2;
}
