/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: gunzip + wire scan + delta + encode + gzip, over a sequence
 * of three profiles fed to one delta state (A, B, A), so baselines, deltas,
 * resets and poisoned states are all reached. Every emitted profile must
 * pass the independent protobuf-c decoder and reference checks
 * (pprof_validate); anything else aborts.
 *
 * Input: byte 0 = flags (bit 0: contention kind, bit 1: gzip the output,
 * bit 2: no cumulative column (PPROF_DELTA_NONE), bit 3: a label filter
 * dropping keys of odd length, bit 4: a sample-type filter, bit 5: which
 * keeps only the types listed), bytes 1-2 = length of profile A (little
 * endian, clipped), then A, then B. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pprof/internal.h"
#include "pprof/pprof.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool keep_even_keys(const char *key, size_t len, void *ud)
{
    (void)key;
    (void)ud;
    return len % 2 == 0;
}

static const char *const filter_types[] = { "alloc_space", "delay", "inuse_objects", "" };

static void feed(struct pprof_delta *d, const uint8_t *p, size_t n, const struct pprof_limits *lim)
{
    uint8_t *out = NULL;
    size_t out_len = 0;
    char err[256];
    int rc = pprof_delta_process(d, p, n, lim, &out, &out_len, err, sizeof(err));

    if (rc == PPROF_DELTA_EMITTED) {
        if (pprof_validate(out, out_len, lim, err, sizeof(err)) != 0) {
            fprintf(stderr, "emitted profile does not validate: %s\n", err);
            abort();
        }
    } else if (out != NULL || (rc < 0 && err[0] == '\0')) {
        abort();
    }
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pprof_limits lim;
    struct pprof_delta *d;
    struct pprof_filter filter = { 0 };
    size_t a_len;

    if (size < 3)
        return 0;
    pprof_limits_default(&lim);
    lim.max_decompressed = 4u << 20;
    lim.max_samples = 20000;
    lim.max_locations = 20000;
    lim.max_functions = 20000;
    lim.max_strings = 40000;
    lim.max_labels = 16;
    lim.max_stack_depth = 256;
    /* Every output setting, with each encoder: bits 4-5 pick the setting,
     * bit 6 turns igzip off. */
    lim.compression = (enum pprof_compression)((data[0] >> 4) & 3);
    pprof__igzip_off = data[0] & 0x40;
    d = pprof_delta_new(data[0] & 4   ? PPROF_DELTA_NONE
                        : data[0] & 1 ? PPROF_DELTA_CONTENTION
                                      : PPROF_DELTA_MEMORY);
    if (!d)
        return 0;
    filter.label_keep = data[0] & 8 ? keep_even_keys : NULL;
    filter.types = filter_types;
    filter.n_types = data[0] & 16 ? 4 : 0;
    filter.types_keep = data[0] & 32;
    pprof_delta_set_filter(d, data[0] & (8 | 16) ? &filter : NULL);
    a_len = (size_t)data[1] | (size_t)data[2] << 8;
    data += 3;
    size -= 3;
    if (a_len > size)
        a_len = size;
    feed(d, data, a_len, &lim);
    feed(d, data + a_len, size - a_len, &lim);
    feed(d, data, a_len, &lim);
    pprof_delta_free(d);
    return 0;
}
