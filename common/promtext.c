/* SPDX-License-Identifier: Apache-2.0 */
/* The Prometheus text format writer (see promtext.h; docs/design.md
 * "Modules"). Pure; the caller owns the buffer. */
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

void prom_head(struct buf *b, const char *name, const char *type, const char *help)
{
    buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
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

static void series(struct buf *b, const char *name, const char *const *labels, const char *le)
{
    bool any = (labels && labels[0]) || le;

    buf_puts(b, name);
    if (!any) {
        buf_puts(b, " ");
        return;
    }
    buf_puts(b, "{");
    for (size_t i = 0; labels && labels[i]; i += 2) {
        buf_printf(b, "%s%s=\"", i ? "," : "", labels[i]);
        escape(b, labels[i + 1] ? labels[i + 1] : "");
        buf_puts(b, "\"");
    }
    if (le)
        buf_printf(b, "%sle=\"%s\"", labels && labels[0] ? "," : "", le);
    buf_puts(b, "} ");
}

void prom_u64(struct buf *b, const char *name, const char *const *labels, uint64_t v)
{
    series(b, name, labels, NULL);
    buf_printf(b, "%llu\n", (unsigned long long)v);
}

void prom_f64(struct buf *b, const char *name, const char *const *labels, double v)
{
    series(b, name, labels, NULL);
    buf_printf(b, "%.17g\n", v);
}

void prom_hist(struct buf *b, const char *name, const char *const *labels,
               const struct prom_hist *h)
{
    char n[256], le[32];
    uint64_t cum = 0;

    snprintf(n, sizeof(n), "%s_bucket", name);
    for (unsigned i = 0; i <= h->n_bounds; i++) {
        cum += h->counts[i];
        if (i < h->n_bounds)
            snprintf(le, sizeof(le), "%g", h->bounds[i]);
        else
            snprintf(le, sizeof(le), "+Inf");
        series(b, n, labels, le);
        buf_printf(b, "%llu\n", (unsigned long long)cum);
    }
    snprintf(n, sizeof(n), "%s_sum", name);
    prom_f64(b, n, labels, h->sum);
    snprintf(n, sizeof(n), "%s_count", name);
    prom_u64(b, n, labels, h->count);
}

void prom_ones(struct buf *b, const struct prom_one *m, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        prom_head(b, m[i].name, m[i].type, m[i].help);
        prom_u64(b, m[i].name, NULL, m[i].value);
    }
}
