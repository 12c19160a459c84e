/* SPDX-License-Identifier: Apache-2.0 */
/* The Prometheus text format writer (see promtext.h; docs/design.md
 * "Modules"): families read from tables at their offsets. Pure; the
 * caller owns the buffer and lends the tables and structs for the call. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "common/promtext.h"

const double prom_latency_bounds[12] = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1, 5, 30,
};

void prom_hist_init(struct prom_hist *h, const double *bounds, unsigned n_bounds)
{
    memset(h, 0, sizeof(*h));
    h->bounds = bounds;
    h->n_bounds = n_bounds < PROM_HIST_MAX ? n_bounds : PROM_HIST_MAX;
}

void prom_hist_observe(struct prom_hist *h, double v)
{
    unsigned i = 0;

    while (i < h->n_bounds && v > h->bounds[i])
        i++;
    h->counts[i]++;
    h->sum += v;
    h->count++;
}

/* Label values escape \, " and newline. */
static void escape(struct buf *b, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            buf_printf(b, "\\%c", *v);
        else if (*v == '\n')
            buf_puts(b, "\\n");
        else
            buf_append(b, v, 1);
    }
}

/* `name suffix{labels,extra="extra_value"} `: the series up to its value. */
static void series(struct buf *b, const char *name, const char *suffix, const char *const *labels,
                   const char *extra, const char *extra_value)
{
    bool any = labels && labels[0];

    buf_puts(b, name);
    buf_puts(b, suffix);
    if (!any && !extra) {
        buf_puts(b, " ");
        return;
    }
    buf_puts(b, "{");
    for (size_t i = 0; labels && labels[i]; i += 2) {
        buf_printf(b, "%s%s=\"", i ? "," : "", labels[i]);
        escape(b, labels[i + 1] ? labels[i + 1] : "");
        buf_puts(b, "\"");
    }
    if (extra) {
        buf_printf(b, "%s%s=\"", any ? "," : "", extra);
        escape(b, extra_value ? extra_value : "");
        buf_puts(b, "\"");
    }
    buf_puts(b, "} ");
}

static void u64(struct buf *b, uint64_t v)
{
    buf_printf(b, "%llu\n", (unsigned long long)v);
}

static void f64(struct buf *b, double v)
{
    buf_printf(b, "%.17g\n", v);
}

static void hist(struct buf *b, const char *name, const char *const *labels,
                 const struct prom_hist *h)
{
    char le[32];
    uint64_t cum = 0;

    for (unsigned i = 0; i <= h->n_bounds; i++) {
        cum += h->counts[i];
        if (i < h->n_bounds)
            snprintf(le, sizeof(le), "%g", h->bounds[i]);
        else
            snprintf(le, sizeof(le), "+Inf");
        series(b, name, "_bucket", labels, "le", le);
        u64(b, cum);
    }
    series(b, name, "_sum", labels, NULL, NULL);
    f64(b, h->sum);
    series(b, name, "_count", labels, NULL, NULL);
    u64(b, h->count);
}

void prom_family_head(struct buf *b, const struct prom_family *f)
{
    buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", f->name, f->help, f->name, f->type);
}

/* One sample of `f` whose value is at `at`. */
static void sample(struct buf *b, const struct prom_family *f, const char *const *labels,
                   const char *value_name, const char *at)
{
    series(b, f->name, "", labels, value_name ? f->label : NULL, value_name);
    if (f->kind == PROM_KIND_F64)
        f64(b, *(const double *)at);
    else
        u64(b, *(const uint64_t *)at);
}

void prom_family_series(struct buf *b, const struct prom_family *f, const void *stats,
                        const char *const *labels)
{
    const char *at = (const char *)stats + f->offset;
    size_t size = f->kind == PROM_KIND_F64 ? sizeof(double) : sizeof(uint64_t);

    if (f->kind == PROM_KIND_HIST)
        hist(b, f->name, labels, (const struct prom_hist *)at);
    else if (!f->label)
        sample(b, f, labels, NULL, at);
    else
        for (size_t i = 0; i < f->n_values; i++)
            sample(b, f, labels, f->values[i], at + i * size);
}

void prom_families(struct buf *b, const struct prom_family *f, size_t n, const void *stats,
                   const char *const *labels)
{
    for (size_t i = 0; i < n; i++) {
        prom_family_head(b, &f[i]);
        prom_family_series(b, &f[i], stats, labels);
    }
}
