/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/promtext: tables of metric families read at their
 * offsets (u64, f64, histograms, arrays by label), the caller's labels and
 * their escaping, per-series writing, and promtool's check of the result. */
#include <stdlib.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/macros.h"
#include "common/promtext.h"
#include "test.h"

struct figures {
    uint64_t count;
    double seconds;
    uint64_t by_reason[3];
    struct prom_hist hist;
};

static const char *const reasons[] = { "a", "b\"c", "d" };

static const struct prom_family families[] = {
    PROM_FAMILY_U64("t_count_total", "counter", "A count.", struct figures, count),
    PROM_FAMILY_F64("t_seconds", "gauge", "Some seconds.", struct figures, seconds),
    PROM_FAMILY_U64_BY("t_by_reason_total", "counter", "By reason.", struct figures, by_reason,
                       "reason", reasons),
    PROM_FAMILY_HIST("t_duration_seconds", "A duration.", struct figures, hist),
};

static const double bounds[] = { 0.5, 1 };

static void fill(struct figures *f, uint64_t base)
{
    *f = (struct figures){
        .count = base,
        .seconds = 1.5,
        .by_reason = { base + 1, base + 2, base + 3 },
    };
    prom_hist_init(&f->hist, bounds, ARRAY_SIZE(bounds));
    prom_hist_observe(&f->hist, 0.25);
    prom_hist_observe(&f->hist, 0.75);
    prom_hist_observe(&f->hist, 2);
}

TEST(families_without_labels)
{
    struct figures f;
    struct buf b;

    fill(&f, 10);
    buf_init(&b, 1 << 16);
    prom_families(&b, families, ARRAY_SIZE(families), &f, NULL);
    ASSERT_STR_EQ(b.data, "# HELP t_count_total A count.\n"
                          "# TYPE t_count_total counter\n"
                          "t_count_total 10\n"
                          "# HELP t_seconds Some seconds.\n"
                          "# TYPE t_seconds gauge\n"
                          "t_seconds 1.5\n"
                          "# HELP t_by_reason_total By reason.\n"
                          "# TYPE t_by_reason_total counter\n"
                          "t_by_reason_total{reason=\"a\"} 11\n"
                          "t_by_reason_total{reason=\"b\\\"c\"} 12\n"
                          "t_by_reason_total{reason=\"d\"} 13\n"
                          "# HELP t_duration_seconds A duration.\n"
                          "# TYPE t_duration_seconds histogram\n"
                          "t_duration_seconds_bucket{le=\"0.5\"} 1\n"
                          "t_duration_seconds_bucket{le=\"1\"} 2\n"
                          "t_duration_seconds_bucket{le=\"+Inf\"} 3\n"
                          "t_duration_seconds_sum 3\n"
                          "t_duration_seconds_count 3\n");
    buf_done(&b);
}

/* The caller's labels come first, escaped, then the family's own (the
 * array's label, a histogram's le); a NULL value is written empty. */
TEST(caller_labels_first_and_escaped)
{
    struct figures f;
    struct buf b;
    const char *const labels[] = { "job", "x\\y\"z\nw", "kind", NULL, NULL };

    fill(&f, 0);
    buf_init(&b, 1 << 16);
    prom_family_series(&b, &families[0], &f, labels);
    prom_family_series(&b, &families[2], &f, labels);
    prom_family_series(&b, &families[3], &f, labels);
    ASSERT_STR_EQ(b.data,
                  "t_count_total{job=\"x\\\\y\\\"z\\nw\",kind=\"\"} 0\n"
                  "t_by_reason_total{job=\"x\\\\y\\\"z\\nw\",kind=\"\",reason=\"a\"} 1\n"
                  "t_by_reason_total{job=\"x\\\\y\\\"z\\nw\",kind=\"\",reason=\"b\\\"c\"} 2\n"
                  "t_by_reason_total{job=\"x\\\\y\\\"z\\nw\",kind=\"\",reason=\"d\"} 3\n"
                  "t_duration_seconds_bucket{job=\"x\\\\y\\\"z\\nw\",kind=\"\",le=\"0.5\"} 1\n"
                  "t_duration_seconds_bucket{job=\"x\\\\y\\\"z\\nw\",kind=\"\",le=\"1\"} 2\n"
                  "t_duration_seconds_bucket{job=\"x\\\\y\\\"z\\nw\",kind=\"\",le=\"+Inf\"} 3\n"
                  "t_duration_seconds_sum{job=\"x\\\\y\\\"z\\nw\",kind=\"\"} 3\n"
                  "t_duration_seconds_count{job=\"x\\\\y\\\"z\\nw\",kind=\"\"} 3\n");
    buf_done(&b);
}

/* One head, then a series per struct (an endpoint, a job): what the
 * forwarder and the scrape manager write, family by family. */
TEST(one_series_per_struct)
{
    struct figures f[2];
    struct buf b;

    fill(&f[0], 1);
    fill(&f[1], 7);
    f[1].seconds = 0.1;
    buf_init(&b, 1 << 16);
    for (size_t i = 0; i < 2; i++) {
        prom_family_head(&b, &families[i]);
        for (size_t j = 0; j < 2; j++)
            prom_family_series(&b, &families[i], &f[j],
                               (const char *const[]){ "job", j ? "two" : "one", NULL });
    }
    ASSERT_STR_EQ(b.data, "# HELP t_count_total A count.\n"
                          "# TYPE t_count_total counter\n"
                          "t_count_total{job=\"one\"} 1\n"
                          "t_count_total{job=\"two\"} 7\n"
                          "# HELP t_seconds Some seconds.\n"
                          "# TYPE t_seconds gauge\n"
                          "t_seconds{job=\"one\"} 1.5\n"
                          "t_seconds{job=\"two\"} 0.10000000000000001\n");
    buf_done(&b);
}

TEST(output_passes_promtool)
{
    struct figures f[2];
    struct buf b;

    fill(&f[0], 3);
    fill(&f[1], 4);
    buf_init(&b, 1 << 16);
    for (size_t i = 0; i < ARRAY_SIZE(families); i++) {
        prom_family_head(&b, &families[i]);
        for (size_t j = 0; j < 2; j++)
            prom_family_series(&b, &families[i], &f[j],
                               (const char *const[]){ "job", j ? "a\"\\\nb" : "c", NULL });
    }
    ASSERT_PROMTOOL_METRICS(b.data, b.len);
    buf_done(&b);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
