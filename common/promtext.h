/* SPDX-License-Identifier: Apache-2.0 */
/** Writing metrics in the Prometheus text exposition format (0.0.4).
 *
 * Every module describes its metrics as a const table of families (struct
 * prom_family: name, type, help and where the value sits in a struct of the
 * module's) and writes them with prom_families(), or, for families of one
 * series per endpoint or per job, with prom_family_head() and then
 * prom_family_series() for each of its structs. Label values are escaped
 * here. Not thread-safe: a buffer and a histogram belong to their owner. */
#ifndef PROFLET_COMMON_PROMTEXT_H
#define PROFLET_COMMON_PROMTEXT_H

#include <stddef.h>
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

/** What a family's value is in the caller's struct. */
enum prom_kind {
    PROM_KIND_U64,  /**< a uint64_t */
    PROM_KIND_F64,  /**< a double */
    PROM_KIND_HIST, /**< a struct prom_hist: the _bucket, _sum and _count samples */
};

/** A metric family whose value is read at `offset` in a struct of the
 * caller's. Without `label` it is one sample per struct; with it, the value
 * is an array of `n_values` (u64 or f64), one sample per element, labelled
 * `label`="values[i]" after the caller's labels. Write entries with the
 * PROM_FAMILY_* macros, which take the offset and check the field's type. */
struct prom_family {
    const char *name, *type, *help;
    size_t offset;
    enum prom_kind kind;
    const char *label;
    const char *const *values;
    size_t n_values;
};

/* The offset of `field` in `st`; does not compile unless the field is a `ctype`. */
#define PROM__OFFSET(st, field, ctype) _Generic(&((st *)0)->field, ctype * : offsetof(st, field))

/** A family read from the uint64_t `field` of struct type `st`. */
#define PROM_FAMILY_U64(name, type, help, st, field)                                            \
    {                                                                                           \
        (name), (type), (help), PROM__OFFSET(st, field, uint64_t), PROM_KIND_U64, NULL, NULL, 0 \
    }
/** A family read from the double `field` of `st`. */
#define PROM_FAMILY_F64(name, type, help, st, field)                                          \
    {                                                                                         \
        (name), (type), (help), PROM__OFFSET(st, field, double), PROM_KIND_F64, NULL, NULL, 0 \
    }
/** A histogram family read from the struct prom_hist `field` of `st`. */
#define PROM_FAMILY_HIST(name, help, st, field)                                                 \
    {                                                                                           \
        (name), "histogram", (help), PROM__OFFSET(st, field, struct prom_hist), PROM_KIND_HIST, \
            NULL, NULL, 0                                                                       \
    }
/** A family of one sample per element of the uint64_t array `field` of
 * `st`, labelled `label`="values[i]"; `values` has as many names as the
 * array has elements. */
#define PROM_FAMILY_U64_BY(name, type, help, st, field, label, values)                        \
    {                                                                                         \
        (name), (type), (help), PROM__OFFSET(st, field[0], uint64_t), PROM_KIND_U64, (label), \
            (values), sizeof(((st *)0)->field) / sizeof(uint64_t)                             \
    }

/** `# HELP` and `# TYPE` of `f`. */
void prom_family_head(struct buf *b, const struct prom_family *f);
/** The samples of `f` read from `stats` (borrowed; the struct `f` was
 * written for). `labels` is NULL or a NULL-terminated list of name, value,
 * name, value... that every sample carries first. */
void prom_family_series(struct buf *b, const struct prom_family *f, const void *stats,
                        const char *const *labels);
/** Each of the `n` families of `f`: its head, then its samples from `stats`
 * with `labels` (as prom_family_series). */
void prom_families(struct buf *b, const struct prom_family *f, size_t n, const void *stats,
                   const char *const *labels);

#endif
