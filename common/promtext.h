/* SPDX-License-Identifier: Apache-2.0 */
/** Writing metrics in the Prometheus text exposition format (0.0.4):
 * family headers, samples with escaped label values, and fixed-bucket
 * histograms. Every module renders its own metrics with these. Not
 * thread-safe: a buffer and a histogram belong to their owner. */
#ifndef PROFLET_COMMON_PROMTEXT_H
#define PROFLET_COMMON_PROMTEXT_H

#include <stdint.h>

struct buf;

/** Latency-style histogram: counts per upper bound (`bounds`, ascending,
 * at most PROM_HIST_MAX) plus +Inf, sum and count. */
#define PROM_HIST_MAX 16
struct prom_hist {
    const double *bounds;
    unsigned n_bounds;
    uint64_t counts[PROM_HIST_MAX + 1]; /**< not cumulative; the last is +Inf */
    double sum;
    uint64_t count;
};

/** The bounds (seconds) of the request-latency histograms, 0.5 ms to 30 s. */
extern const double prom_latency_bounds[12];

/** An empty histogram over `bounds`. */
void prom_hist_init(struct prom_hist *h, const double *bounds, unsigned n_bounds);
/** Counts one observation. */
void prom_hist_observe(struct prom_hist *h, double v);

/** `# HELP` and `# TYPE` of a family. */
void prom_head(struct buf *b, const char *name, const char *type, const char *help);
/** A sample; `labels` is NULL or a NULL-terminated list of name, value,
 * name, value... (values escaped here). */
void prom_u64(struct buf *b, const char *name, const char *const *labels, uint64_t v);
void prom_f64(struct buf *b, const char *name, const char *const *labels, double v);
/** One metric without labels, announced (prom_head) and written. */
struct prom_one {
    const char *name, *type, *help;
    uint64_t value;
};
/** Writes each of `n` metrics of `m`. */
void prom_ones(struct buf *b, const struct prom_one *m, size_t n);
/** The `_bucket`, `_sum` and `_count` samples of a histogram. */
void prom_hist(struct buf *b, const char *name, const char *const *labels,
               const struct prom_hist *h);

#endif
