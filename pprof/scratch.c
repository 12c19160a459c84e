/* SPDX-License-Identifier: Apache-2.0 */
/* Per-thread scratch memory of pprof_delta_process() (docs/design.md
 * "Deltas"; its figures: docs/benchmarks.md "Delta memory").
 *
 * The per-call buffers of a large profile (the gunzipped input, the
 * per-sample arrays, the output before gzip), freshly malloc'd on every
 * call, would come from mmap and go back with munmap, so every call would
 * page-fault on all of them. Instead each thread keeps its buffers, and its
 * gzip (de)compressors, from one call to the next: the pages stay
 * mapped and warm.
 *
 * Memory cost: what the threads retain between calls is capped for the
 * whole process, PPROF__SCRATCH_RETAIN bytes (48 MiB) in all, each thread
 * keeping its buffers only while the total stays under the cap, plus the
 * gzip encoders a thread used (a libdeflate compressor under 1 MiB, an
 * igzip stream and level buffer of about 400 KiB). A call whose buffers do
 * not fit frees them all at its end. The agent runs deltas on any of the
 * libuv pool's threads, and what they retain lies outside every job's
 * grant: one cap for the process, not one per thread, keeps that small
 * beside the memory budget while a single large target's deltas still find
 * their pages mapped.
 *
 * Accounting. A call may be given a grant (pprof__acct_begin()): every
 * buffer it grows here, and every block it mallocs elsewhere in pprof/
 * (pprof__acct_charge()), is charged against it by its capacity, so the
 * charge is the call's memory beyond what the thread retained from earlier
 * calls. Charged per buffer growth, never per record: no cost in the hot
 * loops. Past the grant the growth fails as an allocation failure would,
 * and pprof__acct_over() tells the caller why.
 * pprof_thread_cleanup() frees a thread's scratch at once; a thread that
 * exits frees it through a thread-specific-data destructor.
 *
 * Threading: every buffer belongs to the calling thread; one delta call at
 * a time per thread (calls do not nest). */
#include <errno.h>
#include <libdeflate.h>
#include <pthread.h>
#include <stdlib.h>
#ifdef PROFLET_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif

#include "pprof/internal.h"

struct scratch {
    void *buf[PPROF__S_COUNT];
    size_t cap[PPROF__S_COUNT];
    struct libdeflate_compressor *comp;
    int comp_level;
    struct libdeflate_decompressor *dec;
#ifdef PROFLET_HAVE_ISAL
    struct isal_zstream *zs;
    uint8_t *zlevel_buf;
    uint32_t zlevel_cap;
#endif
    size_t retained; /* bytes of buf[] counted in retained_total */
    size_t grant;    /* bytes the current call may charge; 0: no limit */
    size_t charged;  /* bytes the current call has charged */
    bool over;       /* a charge went past the grant */
};

static _Thread_local struct scratch *tls_scratch;
/* Bytes every thread's kept buffers take, between calls. */
static size_t retained_total;
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_free(struct scratch *s)
{
    if (!s)
        return;
    __atomic_sub_fetch(&retained_total, s->retained, __ATOMIC_RELAXED);
    for (int i = 0; i < PPROF__S_COUNT; i++)
        free(s->buf[i]);
    if (s->comp)
        libdeflate_free_compressor(s->comp);
    if (s->dec)
        libdeflate_free_decompressor(s->dec);
#ifdef PROFLET_HAVE_ISAL
    free(s->zs);
    free(s->zlevel_buf);
#endif
    free(s);
}

static void scratch_destructor(void *p)
{
    /* tls_scratch may already be gone at this point; only `p` is used. */
    scratch_free(p);
}

static void scratch_key_init(void)
{
    scratch_key_ok = pthread_key_create(&scratch_key, scratch_destructor) == 0;
}

static struct scratch *scratch_get(void)
{
    struct scratch *s = tls_scratch;

    if (s)
        return s;
    pthread_once(&scratch_once, scratch_key_init);
    s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    if (scratch_key_ok)
        pthread_setspecific(scratch_key, s);
    tls_scratch = s;
    return s;
}

void *pprof__scratch(unsigned id, size_t bytes, bool keep)
{
    struct scratch *s = scratch_get();
    void *nb;
    size_t want;

    if (!s || id >= PPROF__S_COUNT)
        return NULL;
    if (bytes == 0)
        bytes = 1;
    if (bytes <= s->cap[id])
        return s->buf[id];
    /* Some headroom, so that profiles that grow a little from one call to
     * the next do not reallocate every time. */
    want = bytes <= SIZE_MAX / 9 * 8 ? bytes / 8 * 9 + 64 : bytes;
    /* The old block goes (freed or moved) as the new one comes: the call
     * grows by the difference. */
    if (!pprof__acct_charge(want - s->cap[id]))
        return NULL;
    if (keep) {
        nb = realloc(s->buf[id], want);
        if (!nb)
            return NULL;
    } else {
        free(s->buf[id]);
        s->buf[id] = NULL;
        s->cap[id] = 0;
        nb = malloc(want);
        if (!nb)
            return NULL;
    }
    s->buf[id] = nb;
    s->cap[id] = want;
    return nb;
}

void pprof__scratch_release(void)
{
    struct scratch *s = tls_scratch;
    size_t total = 0, all;

    if (!s)
        return;
    for (int i = 0; i < PPROF__S_COUNT; i++)
        total += s->cap[i];
    /* Counted in the total as what it keeps now, in place of what it kept
     * before; kept only while the total stays within the cap. */
    if (total >= s->retained) {
        all = __atomic_add_fetch(&retained_total, total - s->retained, __ATOMIC_RELAXED);
    } else {
        all = __atomic_sub_fetch(&retained_total, s->retained - total, __ATOMIC_RELAXED);
    }
    s->retained = total;
    if (all <= PPROF__SCRATCH_RETAIN)
        return;
    __atomic_sub_fetch(&retained_total, total, __ATOMIC_RELAXED);
    s->retained = 0;
    for (int i = 0; i < PPROF__S_COUNT; i++) {
        free(s->buf[i]);
        s->buf[i] = NULL;
        s->cap[i] = 0;
    }
}

struct libdeflate_compressor *pprof__scratch_compressor(int level)
{
    struct scratch *s = scratch_get();

    if (!s)
        return NULL;
    if (s->comp && s->comp_level == level)
        return s->comp;
    if (s->comp)
        libdeflate_free_compressor(s->comp);
    s->comp = libdeflate_alloc_compressor(level);
    s->comp_level = level;
    return s->comp;
}

#ifdef PROFLET_HAVE_ISAL
struct isal_zstream *pprof__scratch_igzip(int level)
{
    static const uint32_t level_bytes[] = { ISAL_DEF_LVL0_DEFAULT, ISAL_DEF_LVL1_DEFAULT,
                                            ISAL_DEF_LVL2_DEFAULT, ISAL_DEF_LVL3_DEFAULT };
    struct scratch *s = scratch_get();
    uint32_t need;

    if (!s || level < 0 || level > 3)
        return NULL;
    need = level_bytes[level];
    if (!s->zs && !(s->zs = malloc(sizeof(*s->zs))))
        return NULL;
    if (need > s->zlevel_cap) {
        uint8_t *nb = realloc(s->zlevel_buf, need);

        if (!nb)
            return NULL;
        s->zlevel_buf = nb;
        s->zlevel_cap = need;
    }
    isal_deflate_init(s->zs);
    s->zs->level = (uint32_t)level;
    s->zs->level_buf = need ? s->zlevel_buf : NULL;
    s->zs->level_buf_size = need;
    s->zs->gzip_flag = IGZIP_GZIP;
    return s->zs;
}
#endif

struct libdeflate_decompressor *pprof__scratch_decompressor(void)
{
    struct scratch *s = scratch_get();

    if (!s)
        return NULL;
    if (!s->dec)
        s->dec = libdeflate_alloc_decompressor();
    return s->dec;
}

void pprof__acct_begin(size_t grant)
{
    struct scratch *s = scratch_get();

    if (!s)
        return;
    s->grant = grant;
    s->charged = 0;
    s->over = false;
}

bool pprof__acct_charge(size_t bytes)
{
    struct scratch *s = tls_scratch;

    if (!s)
        return true;
    s->charged = bytes <= SIZE_MAX - s->charged ? s->charged + bytes : SIZE_MAX;
    if (s->grant && s->charged > s->grant) {
        s->over = true;
        return false;
    }
    return true;
}

size_t pprof__acct_charged(void)
{
    return tls_scratch ? tls_scratch->charged : 0;
}

bool pprof__acct_over(void)
{
    return tls_scratch && tls_scratch->over;
}

void pprof__acct_end(void)
{
    struct scratch *s = tls_scratch;

    if (s)
        s->grant = 0;
}

size_t pprof__scratch_bytes(void)
{
    struct scratch *s = tls_scratch;
    size_t total = 0;

    if (!s)
        return 0;
    for (int i = 0; i < PPROF__S_COUNT; i++)
        total += s->cap[i];
    return total;
}

void pprof_thread_cleanup(void)
{
    struct scratch *s = tls_scratch;

    if (!s)
        return;
    tls_scratch = NULL;
    if (scratch_key_ok)
        pthread_setspecific(scratch_key, NULL);
    scratch_free(s);
}
