/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the delta against a reference model that sums and
 * subtracts decoded samples of random profiles, of the scratch buffers
 * kept per thread, and of memory grants. */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "delta_run.h"
#include "pprof/internal.h"
#include "pprof/pprof.h"
#include "test.h"
#include "tprof.h"

/* ---- randomized check against a reference model ---- */

struct model_entry {
    char key[512];
    int64_t v[4];
};

struct model {
    struct model_entry *e;
    size_t n;
};

static int64_t *model_get(struct model *m, const char *key, bool create)
{
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->e[i].key, key) == 0)
            return m->e[i].v;
    if (!create)
        return NULL;
    m->e = realloc(m->e, (m->n + 1) * sizeof(*m->e));
    memset(&m->e[m->n], 0, sizeof(m->e[m->n]));
    snprintf(m->e[m->n].key, sizeof(m->e[m->n].key), "%s", key);
    return m->e[m->n++].v;
}

/* Sums the decoded samples of a profile by content key. */
static void model_of(const uint8_t *data, size_t len, struct model *m)
{
    struct pprof__decoded dp;
    char key[512];

    m->e = NULL;
    m->n = 0;
    tp_decode(data, len, &dp);
    for (size_t i = 0; i < dp.prof->n_sample; i++) {
        const Perftools__Profiles__Sample *s = dp.prof->sample[i];
        int64_t *v;
        tp_sample_key(dp.prof, s, key, sizeof(key));
        v = model_get(m, key, true);
        for (size_t k = 0; k < s->n_value; k++)
            v[k] += s->value[k];
    }
    pprof__decoded_done(&dp);
}

static uint32_t rnd_state = 12345;

static uint32_t rnd(uint32_t n)
{
    rnd_state = rnd_state * 1103515245u + 12345u;
    return (rnd_state >> 8) % n;
}

#define NSTACK 30

struct gen_stack {
    uint64_t frames[5];
    size_t depth;
    int label; /* -1 none, else bytes label value index */
    int64_t total[2];
    bool visible;
};

/* Builds one profile of the simulated process, with ids and strings in a
 * shuffled order and some stacks split into duplicate samples. */
static uint8_t *gen_profile(struct gen_stack *st, int64_t t, bool nogo, size_t *len)
{
    struct tprof *tp = tp_new(MEM_COLS, 4);
    int order[NSTACK];

    tp_mapping(tp, 0x400000, 0x800000, "/app", "b");
    tp_time(tp, t);
    for (int i = 0; i < NSTACK; i++)
        order[i] = i;
    for (int i = NSTACK - 1; i > 0; i--) {
        int j = (int)rnd((uint32_t)i + 1), x = order[i];
        order[i] = order[j];
        order[j] = x;
    }
    for (int oi = 0; oi < NSTACK; oi++) {
        struct gen_stack *g = &st[order[oi]];
        int parts = rnd(4) == 0 ? 2 : 1;
        if (!g->visible)
            continue;
        for (int part = 0; part < parts; part++) {
            uint64_t ids[5];
            for (size_t k = 0; k < g->depth; k++) {
                char name[32];
                snprintf(name, sizeof(name), "f%llu", (unsigned long long)g->frames[k]);
                uint64_t fn = tp_func(tp, name, "x.go");
                ids[k] = tp_loc(tp, nogo ? 0 : 0x1000 * g->frames[k], fn, (int64_t)g->frames[k]);
            }
            int64_t share0 = parts == 1
                                 ? g->total[0]
                                 : (part == 0 ? g->total[0] / 3 : g->total[0] - g->total[0] / 3);
            int64_t share1 = parts == 1
                                 ? g->total[1]
                                 : (part == 0 ? g->total[1] / 2 : g->total[1] - g->total[1] / 2);
            tp_sample(tp, ids, g->depth,
                      (int64_t[]){ share0, share1, (int64_t)rnd(3), (int64_t)rnd(3) * 64 });
            if (g->label >= 0)
                tp_label_num(tp, "bytes", 64 << g->label, NULL);
        }
    }
    uint8_t *data = tp_pack(tp, len, rnd(2) == 0);
    tp_free(tp);
    return data;
}

TEST(randomized_against_reference_model)
{
    int emitted = 0, resets = 0, clamped = 0;

    for (int round = 0; round < 12; round++) {
        struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
        struct pprof_limits lim;
        struct gen_stack st[NSTACK];
        struct model prev = { 0 };
        bool nogo = round % 3 == 2;
        int64_t t = 1000;

        pprof_limits_default(&lim);
        memset(st, 0, sizeof(st));
        for (int i = 0; i < NSTACK; i++) {
            st[i].depth = 1 + rnd(5);
            for (size_t k = 0; k < st[i].depth; k++)
                st[i].frames[k] = 1 + rnd(12);
            st[i].label = (int)rnd(3) - 1;
            st[i].visible = rnd(3) != 0;
        }
        for (int step = 0; step < 8; step++) {
            bool restart = step == 5 && round % 2 == 0;
            int lowered = -1;
            for (int i = 0; i < NSTACK; i++) {
                if (restart) {
                    st[i].total[0] = rnd(2);
                    st[i].total[1] = st[i].total[0] * 16;
                    continue;
                }
                if (!st[i].visible && rnd(4) == 0)
                    st[i].visible = true;
                if (rnd(2)) {
                    st[i].total[0] += rnd(50);
                    st[i].total[1] += rnd(5000);
                }
            }
            if (!restart && step > 0 && rnd(2) == 0) {
                lowered = (int)rnd(NSTACK);
                st[lowered].total[0] = st[lowered].total[0] / 2;
            }
            t += 1 + rnd(1000);

            size_t len;
            uint8_t *in = gen_profile(st, t, nogo, &len), *out = NULL;
            size_t out_len = 0;
            char err[256];
            struct model cur, got;
            int rc = pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err));
            model_of(in, len, &cur);
            free(in);

            /* The model of docs/design.md "Deltas": matched keys that went down
             * (any cumulative column) decide a restart. */
            size_t matched = 0, decreased = 0;
            for (size_t i = 0; i < cur.n; i++) {
                int64_t *p = model_get(&prev, cur.e[i].key, false);
                if (!p)
                    continue;
                matched++;
                if (cur.e[i].v[0] < p[0] || cur.e[i].v[1] < p[1])
                    decreased++;
            }
            if (step == 0) {
                ASSERT_EQ(rc, PPROF_DELTA_BASELINE);
            } else if (decreased * 2 > matched) {
                ASSERT_EQ(rc, PPROF_DELTA_RESET);
                resets++;
            } else {
                if (rc != PPROF_DELTA_EMITTED)
                    test__fail(__FILE__, __LINE__, "round %d step %d: rc %d %s", round, step, rc,
                               err);
                emitted++;
                model_of(out, out_len, &got);
                size_t want_n = 0;
                for (size_t i = 0; i < cur.n; i++) {
                    int64_t *p = model_get(&prev, cur.e[i].key, false), want[4];
                    for (int k = 0; k < 2; k++) {
                        want[k] = cur.e[i].v[k] - (p ? p[k] : 0);
                        if (want[k] < 0) {
                            want[k] = 0;
                            clamped++;
                        }
                    }
                    want[2] = cur.e[i].v[2];
                    want[3] = cur.e[i].v[3];
                    int64_t *g = model_get(&got, cur.e[i].key, false);
                    if (!want[0] && !want[1] && !want[2] && !want[3]) {
                        ASSERT_NULL(g);
                        continue;
                    }
                    want_n++;
                    if (!g)
                        test__fail(__FILE__, __LINE__, "missing %s", cur.e[i].key);
                    for (int k = 0; k < 4; k++)
                        ASSERT_EQ(g[k], want[k]);
                }
                ASSERT_EQ(got.n, want_n);
                free(got.e);
            }
            free(out);
            free(prev.e);
            prev = cur;
        }
        free(prev.e);
        pprof_delta_free(d);
    }
    /* The generator really exercised every branch. */
    ASSERT_GT(emitted, 50);
    ASSERT_GE(resets, 4);
    ASSERT_GT(clamped, 3);
}

TEST(scratch_kept_per_thread_capped_and_freed)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    uint64_t A[2] = { 0x1000, 0x2000 }, B[1] = { 0x3000 };
    struct tprof *tp;
    struct run r;
    size_t kept;

    pprof_thread_cleanup();
    ASSERT_EQ(pprof__scratch_bytes(), 0);
    for (int round = 0; round < 3; round++) {
        tp = mem_prof(1000 * (round + 1));
        add(tp, A, 2, (int64_t[]){ 10 * (round + 1), 640 * (round + 1), 2, 128 });
        tp_label_num(tp, "bytes", 64, NULL);
        add(tp, B, 1, (int64_t[]){ 1 + round, 128 * (round + 1), 1, 128 });
        tp_label_num(tp, "bytes", 128, NULL);
        run(d, tp, &r);
        ASSERT_EQ(r.rc, round == 0 ? PPROF_DELTA_BASELINE : PPROF_DELTA_EMITTED);
        if (round > 0) {
            ASSERT_EQ(r.dec.prof->n_sample, 2);
            assert_vals(tp_find(r.dec.prof, "1000,2000,|bytes=#64#;"),
                        (int64_t[]){ 10, 640, 2, 128 }, 4);
        }
        run_done(&r);
        /* Kept between calls, within the cap; freed on request, after
         * which the next call simply allocates again. */
        kept = pprof__scratch_bytes();
        ASSERT_GT(kept, 0);
        ASSERT_LE(kept, PPROF__SCRATCH_RETAIN);
        if (round == 1) {
            pprof_thread_cleanup();
            ASSERT_EQ(pprof__scratch_bytes(), 0);
        }
    }
    /* A call that needed more than the cap frees it all at its end. */
    ASSERT_NOT_NULL(pprof__scratch(PPROF__S_OUT, PPROF__SCRATCH_RETAIN + 1, false));
    ASSERT_GT(pprof__scratch_bytes(), PPROF__SCRATCH_RETAIN);
    pprof__scratch_release();
    ASSERT_EQ(pprof__scratch_bytes(), 0);
    pprof_thread_cleanup();
    pprof_delta_free(d);
}

/* ---- memory grants ---- */

/* A contention profile of `n` samples, each a distinct stack of two of
 * 1,000 locations with values (i % 7 + 1) * scale and 1000 * scale,
 * written by hand (protobuf-c would need hundreds of bytes of structs per
 * sample) and gzipped; `*raw` is its size before gzip. */
static uint8_t *small_samples(size_t n, int64_t scale, size_t *len, size_t *raw)
{
    struct twb w = { 0 }, m = { 0 }, inner = { 0 };
    const char *strs[] = { "", "contentions", "count", "delay", "nanoseconds", "f", "f.go" };
    uint8_t *out = NULL;

    twb_bytes(&w, 1, "\x08\x01\x10\x02", 4);
    twb_bytes(&w, 1, "\x08\x03\x10\x04", 4);
    for (size_t i = 0; i < n; i++) {
        m.len = 0;
        inner.len = 0;
        twb_varint(&inner, 1 + i % 1000);
        twb_varint(&inner, 1 + (i / 1000) % 1000);
        twb_bytes(&m, 1, inner.data, inner.len);
        inner.len = 0;
        twb_varint(&inner, (uint64_t)(scale * (int64_t)(1 + i % 7)));
        twb_varint(&inner, (uint64_t)(scale * 1000));
        twb_bytes(&m, 2, inner.data, inner.len);
        twb_bytes(&w, 2, m.data, m.len);
    }
    for (uint64_t l = 1; l <= 1000; l++) {
        m.len = 0;
        inner.len = 0;
        twb_uint(&inner, 1, 1);
        twb_uint(&inner, 2, l);
        twb_uint(&m, 1, l);
        twb_uint(&m, 3, 0x400000 + 16 * l);
        twb_bytes(&m, 4, inner.data, inner.len);
        twb_bytes(&w, 4, m.data, m.len);
    }
    m.len = 0;
    twb_uint(&m, 1, 1);
    twb_uint(&m, 2, 5);
    twb_uint(&m, 4, 6);
    twb_bytes(&w, 5, m.data, m.len);
    for (size_t i = 0; i < ARRAY_SIZE(strs); i++)
        twb_bytes(&w, 6, strs[i], strlen(strs[i]));
    *raw = w.len;
    ASSERT_EQ(pprof_compress(w.data, w.len, PPROF_COMPRESS_FASTEST, &out, len), 0);
    twb_free(&w);
    twb_free(&m);
    twb_free(&inner);
    return out;
}

/* Feeds `in` (freed) to `d` under `lim`; the output, if any, is freed. */
static int feed(struct pprof_delta *d, uint8_t *in, size_t len, const struct pprof_limits *lim,
                char *err, size_t errlen, size_t *samples)
{
    uint8_t *out = NULL;
    size_t out_len = 0;
    int rc = pprof_delta_process(d, in, len, lim, &out, &out_len, err, errlen);

    free(in);
    if (rc == PPROF_DELTA_EMITTED) {
        struct pprof__decoded dec;
        tp_decode(out, out_len, &dec);
        *samples = dec.prof->n_sample;
        pprof__decoded_done(&dec);
    }
    free(out);
    return rc;
}

TEST(grant_refuses_a_structure_too_large_before_its_samples)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct pprof_limits lim;
    size_t len, raw, samples = 0;
    uint64_t need;
    char err[256];
    uint8_t *in;

    pprof_thread_cleanup();
    pprof_limits_default(&lim);
    ASSERT_EQ(lim.max_memory, 0);
    /* 100,000 samples of 6 bytes: about 1 MB, admitted as 5x that, but
     * their structure needs three times more. */
    in = small_samples(100000, 1, &len, &raw);
    lim.max_memory = 5 * raw;
    ASSERT_EQ(feed(d, in, len, &lim, err, sizeof(err), &samples), PPROF_EOVERBUDGET);
    ASSERT(strstr(err, "over its grant") != NULL);
    /* Stopped by the structure's need, before any per-sample buffer: no
     * charge went past the grant. */
    ASSERT_FALSE(pprof__acct_over());
    ASSERT_LE(pprof__acct_charged(), lim.max_memory);
    need = pprof_delta_need(d, raw);
    ASSERT_GT(need, lim.max_memory);
    ASSERT_STR_EQ(pprof_strerror(PPROF_EOVERBUDGET), "over the job's memory grant");

    /* Granted that need, the profile seeds the state, and what the call
     * charged is within it; the next one is differenced exactly. */
    pprof_thread_cleanup();
    in = small_samples(100000, 1, &len, &raw);
    lim.max_memory = (size_t)need;
    ASSERT_EQ(feed(d, in, len, &lim, err, sizeof(err), &samples), PPROF_DELTA_BASELINE);
    ASSERT_LE(pprof__acct_charged(), need);
    pprof_thread_cleanup();
    in = small_samples(100000, 2, &len, &raw);
    lim.max_memory = (size_t)pprof_delta_need(d, raw);
    ASSERT_EQ(feed(d, in, len, &lim, err, sizeof(err), &samples), PPROF_DELTA_EMITTED);
    ASSERT_LE(pprof__acct_charged(), lim.max_memory);
    ASSERT_EQ(samples, 100000);
    pprof_thread_cleanup();
    pprof_delta_free(d);
}

TEST(grant_passed_while_running_stops_the_call_and_asks_for_more)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct pprof_limits lim;
    size_t len, raw, samples = 0;
    char err[256];
    uint8_t *in;

    /* The accounting itself: a growth past the grant fails as an
     * allocation would, and says why; without a grant nothing is held. */
    pprof_thread_cleanup();
    pprof__acct_begin(1000);
    ASSERT_NOT_NULL(pprof__scratch(PPROF__S_OUT, 500, false));
    ASSERT_NULL(pprof__scratch(PPROF__S_OUT, 4096, false));
    ASSERT_TRUE(pprof__acct_over());
    pprof__acct_end();
    ASSERT_NOT_NULL(pprof__scratch(PPROF__S_OUT, 4096, false));
    pprof_thread_cleanup();

    /* A grant below the inflated size: the gunzip passes it. */
    pprof_limits_default(&lim);
    in = small_samples(20000, 1, &len, &raw);
    lim.max_memory = raw / 2;
    ASSERT_EQ(feed(d, in, len, &lim, err, sizeof(err), &samples), PPROF_EOVERBUDGET);
    ASSERT(strstr(err, "passed its memory grant") != NULL);
    ASSERT_TRUE(pprof__acct_over());
    /* The next admission asks for at least twice as much. */
    ASSERT_GE(pprof_delta_need(d, raw), 2 * (uint64_t)lim.max_memory);
    /* The state was poisoned; its memory is back (the call released its
     * scratch past the retention cap, and kept at most that). */
    ASSERT_EQ(pprof_delta_keys(d), 0);
    ASSERT_LE(pprof__scratch_bytes(), PPROF__SCRATCH_RETAIN);
    /* Without a grant the same profile goes through. */
    lim.max_memory = 0;
    in = small_samples(20000, 1, &len, &raw);
    ASSERT_EQ(feed(d, in, len, &lim, err, sizeof(err), &samples), PPROF_DELTA_BASELINE);
    in = small_samples(20000, 3, &len, &raw);
    ASSERT_EQ(feed(d, in, len, &lim, err, sizeof(err), &samples), PPROF_DELTA_EMITTED);
    ASSERT_EQ(samples, 20000);
    pprof_thread_cleanup();
    pprof_delta_free(d);
}
