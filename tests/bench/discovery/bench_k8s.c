/* SPDX-License-Identifier: Apache-2.0 */
/* Benchmark: initial sync of 10,000 pods (paginated, 500 per page) from the
 * fake API server, then 100 MODIFIED events/s for 10 s. Prints time to the
 * first sync, CPU (user+sys) of each phase and peak RSS. Not a timed test:
 * it only fails if discovery does not complete. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "net/net.h"
#include "tests/discovery/fake.h"
#include "tests/discovery/recorder.h"

static double cpu_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

static long rss_kb(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static unsigned long long total_groups;

static void count_cb(const char *job, const struct disc_group *g, size_t n, void *ud)
{
    size_t *targets = ud;

    total_groups += n;
    for (size_t i = 0; i < n; i++)
        *targets += g[i].targets ? g[i].targets->n : 0;
}

TEST(bench_initial_sync_and_churn)
{
    struct fake f;
    uv_loop_t loop;
    struct net_client *http;
    struct disc_manager *m;
    struct tcfg c = { 0 };
    struct tjob sc = { 0 };
    struct disc_k8s_cfg sd = { 0 };
    char err[256];
    size_t targets = 0;
    double c0, c1, c2;
    uint64_t t0, t1, t2;
    unsigned long long g1;
    int nclosed = 0, closed = 0;
    long rss0;

    fake_start(&f, NULL, NULL, NULL);
    fake_ctl(&f, "/generate", "{\"pods\": 10000}");
    uv_loop_init(&loop);
    ASSERT_EQ(net_client_new(&(struct net_client_opts){ .loop = &loop }, &http, err, sizeof(err)),
              0);
    m = rec_manager_new((struct disc_manager_opts){ .loop = &loop,
                                                    .http = http,
                                                    .coalesce_ms = 1000,
                                                    .on_update = count_cb,
                                                    .update_ud = &targets });
    sd.role = "pod";
    sd.api_server = f.url;
    sc.job_name = "bench";
    sc.sd.k8s_sd = &sd;
    sc.sd.n_k8s_sd = 1;
    c.scrape = &sc;
    c.n_scrape = 1;
    rss0 = rss_kb();
    c0 = cpu_s();
    t0 = uv_hrtime();
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    RUN_UNTIL(&loop, disc_manager_ready(m), 120000);
    ASSERT_TRUE(disc_manager_ready(m));
    t1 = uv_hrtime();
    c1 = cpu_s();
    ASSERT_EQ(targets, 30000); /* 2 ports + 1 port-less container per pod */
    printf("initial sync: 10000 pods, %zu targets, %.3f s wall, %.3f s CPU, peak RSS %ld KiB "
           "(%ld KiB before)\n",
           targets, (t1 - t0) / 1e9, c1 - c0, rss_kb(), rss0);
    g1 = total_groups;
    fake_ctl(&f, "/churn", "{\"rate\": 100, \"seconds\": 10}");
    run_for(&loop, 11500); /* the churn runs for a fixed 10 s: measure it */
    t2 = uv_hrtime();
    c2 = cpu_s();
    printf("churn: %llu groups delivered in %.1f s, %.3f s CPU (%.2f%% of a core), "
           "peak RSS %ld KiB\n",
           total_groups - g1, (t2 - t1) / 1e9, c2 - c1, 100.0 * (c2 - c1) / ((t2 - t1) / 1e9),
           rss_kb());
    ASSERT_GE(total_groups - g1, 500); /* events flowed (coalesced by 1 s) */
    disc_manager_close(m, closed_flag, &closed);
    net_client_close(http, closed_flag, &nclosed);
    uv_run(&loop, UV_RUN_DEFAULT);
    rec_work_done();
    ASSERT_EQ(uv_loop_close(&loop), 0);
    fake_stop(&f);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
