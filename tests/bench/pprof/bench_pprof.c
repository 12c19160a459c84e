/* SPDX-License-Identifier: Apache-2.0 */
/* Benchmark of one delta: `bench_pprof [-z setting] [-n iters] [-m] prev cur`.
 *
 * Each iteration seeds a fresh state with `prev` (untimed) and times
 * pprof_delta_process() on `cur`, phase by phase (gunzip, decode = wire
 * scan and symbol tables, delta = sample parse, hashing and state update,
 * encode, gzip); then, for the total, the call timed as a whole, as the
 * floor is. The floor is the fastest standard inflate and deflate here
 * alone on the same bytes, with warm buffers: libdeflate's gunzip of `cur`
 * plus the `fastest` setting's gzip of its raw bytes (igzip where built
 * in), whatever the setting timed, so that every setting's ratio is to one
 * floor; timed in turn with the call, each after the same work on `prev`.
 * Medians are printed as key=value pairs, with the CPU time of the timed
 * calls. With -m a single delta runs and the process's peak RSS (VmHWM) is
 * printed instead, with the anonymous memory before and after (the output
 * still held); with -m -f, libdeflate alone on the same bytes (the memory
 * floor: what any delta that gunzips and gzips touches at least). With -p N, N pairs are kept at once, as an agent with N targets
 * keeps them: N states, each given `prev` then `cur`, and the anonymous
 * memory before and after (what a pair costs is the slope over N). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libdeflate.h>

#include "pprof/internal.h"
#include "pprof/pprof.h"

#define MAX_ITERS 1000

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long n;

    if (!f) {
        perror(path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "%s: read failed\n", path);
        exit(1);
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* A kB field of a /proc file. */
static long proc_kb(const char *path, const char *field)
{
    char line[256];
    size_t n = strlen(field);
    long kb = -1;
    FILE *f = fopen(path, "r");

    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            kb = strtol(line + n + 1, NULL, 10);
            break;
        }
    if (f)
        fclose(f);
    return kb;
}

/* VmHWM is the peak RSS (not ru_maxrss, which survives execve() and would
 * count the launcher's RSS), VmRSS the current one. */
static long status_kb(const char *field)
{
    return proc_kb("/proc/self/status", field);
}

/* The process's anonymous memory in kB (heap, stacks, mappings), exact
 * from a walk of the page tables: VmRSS and VmHWM come from per-CPU
 * counters that may lag by tens of pages, as much as a small delta adds,
 * and count the code pages of shared libraries, which the kernel's
 * fault-around maps 64 KB at a time, differently from run to run. */
static long anon_kb(void)
{
    return proc_kb("/proc/self/smaps_rollup", "Anonymous");
}

static uint64_t ns(clockid_t clk)
{
    struct timespec ts;

    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static double median_ms(uint64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_u64);
    return (double)v[n / 2] / 1e6;
}

static size_t last_keys; /* keys the state held after the last delta_once() */
static enum pprof_delta_kind kind = PPROF_DELTA_MEMORY; /* -k */
static struct pprof_filter filter;                      /* -F */

/* -F labels: drops the `bytes` label of Go heap samples, or `span_id`. */
static bool keep_label(const char *key, size_t len, void *ud)
{
    (void)ud;
    return !(len == 5 && memcmp(key, "bytes", 5) == 0) &&
           !(len == 7 && memcmp(key, "span_id", 7) == 0);
}

/* -F types: drops the first column of each kind. */
static const char *const drop_types[] = { "alloc_objects", "contentions", "samples" };

/* A fresh state with the options' kind and filter. */
static struct pprof_delta *new_delta(void)
{
    struct pprof_delta *d = pprof_delta_new(kind);

    if (d && (filter.label_keep || filter.n_types))
        pprof_delta_set_filter(d, &filter);
    return d;
}

/* The floor's inflate and deflate alone on `cur`: libdeflate's
 * decompressor, the gunzipped input and, unless the output is plain, the
 * fastest setting's gzip of that input, all made and touched once. */
struct floor_bufs {
    struct libdeflate_decompressor *dec;
    uint8_t *raw, *gz;
    size_t raw_len, bound, gz_len;
    bool gzip;
};

static void floor_free(struct floor_bufs *fb)
{
    free(fb->raw);
    free(fb->gz);
    if (fb->dec)
        libdeflate_free_decompressor(fb->dec);
}

static int floor_setup(struct floor_bufs *fb, const uint8_t *cur, size_t cur_len,
                       const struct pprof_limits *lim)
{
    memset(fb, 0, sizeof(*fb));
    /* pprof_gunzip() frees its decompressor, whose block ours then takes. */
    if (pprof_gunzip(cur, cur_len, lim->max_decompressed, &fb->raw, &fb->raw_len) < 0 ||
        !(fb->dec = libdeflate_alloc_decompressor()))
        goto fail;
    if (lim->compression != PPROF_COMPRESS_NONE) {
        fb->gzip = true;
        fb->bound = pprof__gzip_bound(fb->raw_len);
        if (!(fb->gz = malloc(fb->bound)) ||
            !(fb->gz_len = pprof__encode_into(PPROF_COMPRESS_FASTEST, fb->raw, fb->raw_len, fb->gz,
                                              fb->bound)))
            goto fail;
    }
    return 0;
fail:
    floor_free(fb);
    return -1;
}

/* The fastest gzip of the raw bytes, unless the output is plain. */
static int floor_gzip(struct floor_bufs *fb)
{
    return fb->gzip && pprof__encode_into(PPROF_COMPRESS_FASTEST, fb->raw, fb->raw_len, fb->gz,
                                          fb->bound) == 0
               ? -1
               : 0;
}

/* libdeflate's gunzip of `in`, then floor_gzip(); timed into `*t` unless
 * `t` is NULL. */
static int floor_pass(struct floor_bufs *fb, const uint8_t *in, size_t in_len, uint64_t *t)
{
    size_t got;
    uint64_t t0 = ns(CLOCK_THREAD_CPUTIME_ID);

    if (libdeflate_gzip_decompress(fb->dec, in, in_len, fb->raw, fb->raw_len, &got) !=
            LIBDEFLATE_SUCCESS ||
        floor_gzip(fb) < 0)
        return -1;
    if (t)
        *t = ns(CLOCK_THREAD_CPUTIME_ID) - t0;
    return 0;
}

/* The first profile of a state: a baseline, or with nothing to difference
 * (-k none, or a filter that leaves no cumulative column) already output. */
static bool first_ok(int rc)
{
    return rc == PPROF_DELTA_BASELINE || rc == PPROF_DELTA_EMITTED;
}

static void delta_once(const uint8_t *prev, size_t prev_len, const uint8_t *cur, size_t cur_len,
                       const struct pprof_limits *lim, struct pprof__phase_ns *ph, uint64_t *cpu_ns,
                       size_t *out_len, size_t *state_bytes, long *held_kb,
                       struct floor_bufs *other)
{
    struct pprof_delta *d = new_delta();
    uint8_t *out = NULL;
    char err[256];
    int rc;
    uint64_t c0;

    if (!d)
        exit(1);
    rc = pprof_delta_process(d, prev, prev_len, lim, &out, out_len, err, sizeof(err));
    free(out);
    out = NULL;
    if (!first_ok(rc)) {
        fprintf(stderr, "baseline: %d %s\n", rc, err);
        exit(1);
    }
    /* The baseline gunzipped `prev`; its gzip too, as the floor's pass
     * before each of its own does. */
    if (other && floor_gzip(other) < 0)
        exit(1);
    /* Without `ph`, the call alone between two clock reads, as the floor
     * is timed: each phase boundary costs a clock read (about 0.13 us on
     * this VM), a few percent of a 10 us mutex delta. */
    c0 = ns(ph ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_THREAD_CPUTIME_ID);
    if (ph)
        rc = pprof__delta_process_timed(d, cur, cur_len, lim, &out, out_len, err, sizeof(err), ph);
    else
        rc = pprof_delta_process(d, cur, cur_len, lim, &out, out_len, err, sizeof(err));
    *cpu_ns = ns(ph ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_THREAD_CPUTIME_ID) - c0;
    if (rc != PPROF_DELTA_EMITTED) {
        fprintf(stderr, "delta: %d %s\n", rc, err);
        exit(1);
    }
    *state_bytes = pprof_delta_mem(d);
    last_keys = pprof_delta_keys(d);
    if (held_kb)
        *held_kb = anon_kb(); /* the output and the state still held */
    free(out);
    pprof_delta_free(d);
}

/* N pairs held at once, each after its delta of `cur` against `prev`. */
static int pairs_once(const uint8_t *prev, size_t prev_len, const uint8_t *cur, size_t cur_len,
                      const struct pprof_limits *lim, int n)
{
    struct pprof_delta **ds = calloc((size_t)n, sizeof(*ds));
    long base = anon_kb();
    size_t state = 0;
    char err[256];
    int rc = -1;

    if (!ds)
        return -1;
    for (int i = 0; i < n; i++) {
        uint8_t *out = NULL;
        size_t out_len;
        int first;

        if (!(ds[i] = new_delta()))
            goto out;
        first = pprof_delta_process(ds[i], prev, prev_len, lim, &out, &out_len, err, sizeof(err));
        free(out);
        out = NULL;
        if (!first_ok(first) || pprof_delta_process(ds[i], cur, cur_len, lim, &out, &out_len, err,
                                                    sizeof(err)) != PPROF_DELTA_EMITTED)
            goto out;
        free(out);
        state += pprof_delta_mem(ds[i]);
    }
    printf("pairs=%d base_anon_kb=%ld held_anon_kb=%ld state_bytes=%zu\n", n, base, anon_kb(),
           state);
    rc = 0;
out:
    for (int i = 0; i < n; i++)
        pprof_delta_free(ds[i]);
    free(ds);
    return rc;
}

/* The check of a profile sent as it came (CPU, goroutine, godeltaprof),
 * timed two ways: gunzipped into a fresh buffer that is then freed, as
 * the agent once did, and pprof_gzip_check() into the thread's scratch. */
static int check_once(const uint8_t *cur, size_t cur_len, const struct pprof_limits *lim, int iters)
{
    static uint64_t fresh[MAX_ITERS], scratch[MAX_ITERS];

    for (int i = 0; i < iters; i++) {
        uint8_t *raw;
        size_t raw_len;
        uint64_t t0 = ns(CLOCK_THREAD_CPUTIME_ID);

        if (pprof_gunzip(cur, cur_len, lim->max_decompressed, &raw, &raw_len) < 0)
            return -1;
        free(raw);
        fresh[i] = ns(CLOCK_THREAD_CPUTIME_ID) - t0;
        t0 = ns(CLOCK_THREAD_CPUTIME_ID);
        if (pprof_gzip_check(cur, cur_len, lim->max_decompressed) < 0)
            return -1;
        scratch[i] = ns(CLOCK_THREAD_CPUTIME_ID) - t0;
    }
    printf("in_bytes=%zu check_fresh_ms=%.3f check_ms=%.3f\n", cur_len, median_ms(fresh, iters),
           median_ms(scratch, iters));
    return 0;
}

/* `s` with its spaces as underscores, for a key=value field; `slot`
 * picks one of two buffers, so two calls can be printed at once. */
static const char *kv_word(const char *s, int slot)
{
    static char buf[2][64];
    size_t i;

    for (i = 0; s[i] && i + 1 < sizeof(buf[slot]); i++)
        buf[slot][i] = s[i] == ' ' ? '_' : s[i];
    buf[slot][i] = '\0';
    return buf[slot];
}

int main(int argc, char **argv)
{
    struct pprof_limits lim;
    int iters = 20, opt, peak_mode = 0, floor_mode = 0, pairs = 0, check_mode = 0;
    uint8_t *prev, *cur;
    size_t prev_len, cur_len, out_len = 0, state_bytes = 0, raw_len = 0;
    static uint64_t gunzip[MAX_ITERS], decode[MAX_ITERS], delta[MAX_ITERS], encode[MAX_ITERS],
        gzip[MAX_ITERS], total[MAX_ITERS], cpu[MAX_ITERS], floor_ns[MAX_ITERS];

    pprof_limits_default(&lim);
    while ((opt = getopt(argc, argv, "z:n:mfp:ck:F:")) != -1) {
        switch (opt) {
        case 'k':
            kind = optarg[0] == 'c'   ? PPROF_DELTA_CONTENTION
                   : optarg[0] == 'n' ? PPROF_DELTA_NONE
                                      : PPROF_DELTA_MEMORY;
            break;
        case 'F':
            if (strcmp(optarg, "labels") == 0) {
                filter.label_keep = keep_label;
            } else if (strcmp(optarg, "types") == 0) {
                filter.types = drop_types;
                filter.n_types = 3;
            } else {
                return 2;
            }
            break;
        case 'c':
            check_mode = 1;
            break;
        case 'z':
            lim.compression = PPROF_COMPRESS_COUNT;
            for (int i = 0; i < PPROF_COMPRESS_COUNT; i++)
                if (strcmp(optarg, pprof_compression_name(i)) == 0)
                    lim.compression = i;
            if (lim.compression == PPROF_COMPRESS_COUNT)
                return 2;
            break;
        case 'n':
            iters = atoi(optarg);
            if (iters < 1 || iters > MAX_ITERS)
                iters = 20;
            break;
        case 'm':
            peak_mode = 1;
            break;
        case 'f':
            floor_mode = 1;
            break;
        case 'p':
            pairs = atoi(optarg);
            if (pairs < 1)
                pairs = 1;
            break;
        default:
            return 2;
        }
    }
    if (argc - optind != 2) {
        fprintf(stderr, "usage: bench_pprof [-z none|fastest|balanced|smallest] [-n iters] "
                        "[-k memory|contention|none] "
                        "[-F labels|types] [-m [-f] | -p pairs | -c] prev cur\n");
        return 2;
    }
    prev = slurp(argv[optind], &prev_len);
    cur = slurp(argv[optind + 1], &cur_len);

    if (pairs)
        return pairs_once(prev, prev_len, cur, cur_len, &lim, pairs) < 0;
    if (check_mode)
        return check_once(cur, cur_len, &lim, iters) < 0;
    if (peak_mode && floor_mode) {
        /* The memory floor: what any delta that gunzips and gzips touches
         * at least. */
        long base = status_kb("VmRSS"), base_anon = anon_kb(), held;
        struct floor_bufs fb;
        if (floor_setup(&fb, cur, cur_len, &lim) < 0)
            return 1;
        held = anon_kb();
        out_len = lim.compression != PPROF_COMPRESS_NONE ? fb.gz_len : fb.raw_len;
        floor_free(&fb);
        printf("peak_rss_kb=%ld base_rss_kb=%ld held_anon_kb=%ld base_anon_kb=%ld "
               "out_bytes=%zu\n",
               status_kb("VmHWM"), base, held, base_anon, out_len);
        return 0;
    }
    if (peak_mode) {
        /* The process's own footprint with both inputs read, and what one
         * delta (baseline included) adds to it at its peak. */
        struct pprof__phase_ns ph;
        long base = status_kb("VmRSS"), base_anon = anon_kb(), held = 0;
        delta_once(prev, prev_len, cur, cur_len, &lim, &ph, &cpu[0], &out_len, &state_bytes, &held,
                   NULL);
        printf("peak_rss_kb=%ld base_rss_kb=%ld held_anon_kb=%ld base_anon_kb=%ld "
               "state_bytes=%zu state_keys=%zu out_bytes=%zu\n",
               status_kb("VmHWM"), base, held, base_anon, state_bytes, last_keys, out_len);
        return 0;
    }
    /* The floor: inflate and deflate alone, on buffers and (de)compressors
     * made and touched before timing, as proflet's per-thread scratch is. Its
     * passes alternate with the timed calls, so that a slow spell of the
     * machine (a VM's neighbours) weighs on both alike; and each timed
     * pass, the floor's or a call's, follows the floor's gunzip and gzip
     * of another profile (`prev`), as in an agent, where the work before a
     * profile is another one's. Run back to back on the same bytes,
     * the coders learn them (its branches predict that one input, which
     * no agent sees twice), and the floor would be up to 10 % lower than
     * any delta, even one that costs nothing, can be. */
    struct floor_bufs fb, other;

    if (floor_setup(&fb, cur, cur_len, &lim) < 0 || floor_setup(&other, prev, prev_len, &lim) < 0)
        return 1;
    raw_len = fb.raw_len;
    for (int i = 0; i < iters; i++) {
        struct pprof__phase_ns ph = { 0 };
        delta_once(prev, prev_len, cur, cur_len, &lim, &ph, &cpu[i], &out_len, &state_bytes, NULL,
                   &other);
        gunzip[i] = ph.gunzip;
        decode[i] = ph.decode;
        delta[i] = ph.delta;
        encode[i] = ph.encode;
        gzip[i] = ph.gzip;
    }
    for (int i = 0; i < iters; i++) {
        delta_once(prev, prev_len, cur, cur_len, &lim, NULL, &total[i], &out_len, &state_bytes,
                   NULL, &other);
        if (floor_pass(&other, prev, prev_len, NULL) < 0 ||
            floor_pass(&fb, cur, cur_len, &floor_ns[i]) < 0)
            return 1;
    }
    floor_free(&other);
    floor_free(&fb);
    double t = median_ms(total, iters), fl = median_ms(floor_ns, iters);
    printf("raw_bytes=%zu in_bytes=%zu out_bytes=%zu state_bytes=%zu setting=%s encoder=%s "
           "floor_encoder=%s gunzip_ms=%.3f "
           "decode_ms=%.3f delta_ms=%.3f encode_ms=%.3f gzip_ms=%.3f total_ms=%.3f "
           "cpu_ms=%.3f floor_ms=%.3f ratio=%.3f\n",
           raw_len, cur_len, out_len, state_bytes, pprof_compression_name(lim.compression),
           kv_word(pprof_compression_encoder(lim.compression), 0),
           kv_word(pprof_compression_encoder(PPROF_COMPRESS_FASTEST), 1), median_ms(gunzip, iters),
           median_ms(decode, iters), median_ms(delta, iters), median_ms(encode, iters),
           median_ms(gzip, iters), t, median_ms(cpu, iters), fl, fl > 0 ? t / fl : 0.0);
    free(prev);
    free(cur);
    return 0;
}
