/* SPDX-License-Identifier: Apache-2.0 */
/* The helpers the pprof unit tests share (delta_run.c). */
#ifndef PROFLET_TESTS_PPROF_DELTA_RUN_H
#define PROFLET_TESTS_PPROF_DELTA_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "pprof/internal.h"
#include "pprof/pprof.h"
#include "tprof.h"

/** Sample columns of a Go heap and of a mutex or block profile. */
extern const char *const MEM_COLS[];
extern const char *const CONT_COLS[];

/** An empty heap / contention profile at time `t`, with one mapping. */
struct tprof *mem_prof(int64_t t);
struct tprof *cont_prof(int64_t t);
/** Adds a sample whose stack is the given addresses (each a location with a
 * function named after it). */
void add(struct tprof *tp, const uint64_t *addrs, size_t n, const int64_t *vals);

struct run {
    int rc;
    char err[256];
    uint8_t *out;
    size_t out_len;
    struct pprof__decoded dec;
};

/** Packs `tp` (gzip), frees it, feeds it to `d` under `lim` (or the
 * default limits); decodes any output into `r`. */
void run_lim(struct pprof_delta *d, struct tprof *tp, const struct pprof_limits *lim,
             struct run *r);
void run(struct pprof_delta *d, struct tprof *tp, struct run *r);
void run_done(struct run *r);
/** Feeds `d` the profile make(1, 1), a baseline, then make(2, 3), whose
 * delta `r` then holds. */
void run_scaled_pair(struct pprof_delta *d, struct tprof *(*make)(int64_t, int64_t), struct run *r);
void assert_vals(const Perftools__Profiles__Sample *s, const int64_t *want, size_t n);
/** A delta was emitted with `n` samples, each of two values v, v. */
void assert_all_emitted(const struct run *r, size_t n, int64_t v);

#endif
