/* SPDX-License-Identifier: Apache-2.0 */
/* The helpers the pprof unit tests share: profiles built with protobuf-c
 * (tprof.c), fed to a delta and decoded back, and checks of their values. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delta_run.h"
#include "pprof/internal.h"
#include "pprof/pprof.h"
#include "test.h"
#include "tprof.h"

const char *const MEM_COLS[] = { "alloc_objects/count", "alloc_space/bytes", "inuse_objects/count",
                                 "inuse_space/bytes" };
const char *const CONT_COLS[] = { "contentions/count", "delay/nanoseconds" };

struct tprof *mem_prof(int64_t t)
{
    struct tprof *tp = tp_new(MEM_COLS, 4);

    tp_mapping(tp, 0x400000, 0x800000, "/app", "build-1");
    tp_time(tp, t);
    return tp;
}

struct tprof *cont_prof(int64_t t)
{
    struct tprof *tp = tp_new(CONT_COLS, 2);

    tp_mapping(tp, 0x400000, 0x800000, "/app", "build-1");
    tp_time(tp, t);
    return tp;
}

/* Adds a sample whose stack is the given addresses (each a location with a
 * function named after it). */
void add(struct tprof *tp, const uint64_t *addrs, size_t n, const int64_t *vals)
{
    uint64_t ids[16];

    for (size_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "fn_%llx", (unsigned long long)addrs[i]);
        ids[i] = tp_loc(tp, addrs[i], tp_func(tp, name, "app.go"), (int64_t)(addrs[i] & 0xff));
    }
    tp_sample(tp, ids, n, vals);
}

/* Packs `tp` (gzip), frees it, feeds it to `d`; decodes any output. */
void run_lim(struct pprof_delta *d, struct tprof *tp, const struct pprof_limits *lim, struct run *r)
{
    size_t len;
    uint8_t *in = tp_pack(tp, &len, true);

    memset(r, 0, sizeof(*r));
    tp_free(tp);
    r->rc = pprof_delta_process(d, in, len, lim, &r->out, &r->out_len, r->err, sizeof(r->err));
    free(in);
    if (r->rc == PPROF_DELTA_EMITTED)
        tp_decode(r->out, r->out_len, &r->dec);
    else
        ASSERT_NULL(r->out);
}

void run(struct pprof_delta *d, struct tprof *tp, struct run *r)
{
    struct pprof_limits lim;

    pprof_limits_default(&lim);
    run_lim(d, tp, &lim, r);
}

void run_done(struct run *r)
{
    free(r->out);
    pprof__decoded_done(&r->dec);
}

/* Feeds `d` the profile make(1, 1), a baseline, then make(2, 3), whose
 * delta `r` then holds. */
void run_scaled_pair(struct pprof_delta *d, struct tprof *(*make)(int64_t, int64_t), struct run *r)
{
    run(d, make(1, 1), r);
    ASSERT_EQ(r->rc, PPROF_DELTA_BASELINE);
    run_done(r);
    run(d, make(2, 3), r);
    ASSERT_EQ(r->rc, PPROF_DELTA_EMITTED);
}

void assert_vals(const Perftools__Profiles__Sample *s, const int64_t *want, size_t n)
{
    ASSERT_NOT_NULL(s);
    ASSERT_EQ(s->n_value, n);
    for (size_t i = 0; i < n; i++)
        ASSERT_EQ(s->value[i], want[i]);
}

/* A delta was emitted with `n` samples, each of two values v, v. */
void assert_all_emitted(const struct run *r, size_t n, int64_t v)
{
    ASSERT_EQ(r->rc, PPROF_DELTA_EMITTED);
    ASSERT_EQ(r->dec.prof->n_sample, n);
    for (size_t i = 0; i < n; i++)
        assert_vals(r->dec.prof->sample[i], (int64_t[]){ v, v }, 2);
}
