/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for the bounded CPU work queue (common/workq.c): exactly
 * `max_inflight` jobs run at once on libuv's pool (two jobs are seen
 * running together, never three), a bounded FIFO backlog refuses
 * skippable jobs past it while other jobs still queue, FIFO completion for
 * a window of one, cancellation of the backlog, the memory budget (running
 * costs never exceed it, the head waits for room, a job costlier than the
 * budget is refused; the bytes waiting jobs hold stay within it too),
 * charges of what is kept outside jobs (up to half the budget; a job waits
 * for them to be given back), and a clean loop close. */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common/workq.h"
#include "test.h"
#include "tests/common/workq_test.h"

static atomic_int running, peak;
static int order[64], n_order, cancelled;
static int want_together; /* a job waits (bounded) until this many run at once */

static void job(void *arg)
{
    int now = atomic_fetch_add(&running, 1) + 1;
    int p = atomic_load(&peak);

    while (now > p && !atomic_compare_exchange_weak(&peak, &p, now))
        ;
    /* Hold the thread until `want_together` jobs overlap (or 2 s pass), so
     * a queue that ran one job at a time would show peak 1. */
    for (int i = 0; i < 2000 && atomic_load(&peak) < want_together; i++)
        uv_sleep(1);
    uv_sleep(2);
    atomic_fetch_sub(&running, 1);
    (void)arg;
}

static void after(void *arg, int status)
{
    if (status == UV_ECANCELED) {
        cancelled++;
        return;
    }
    order[n_order++] = (int)(intptr_t)arg;
}

static void reset(int together)
{
    n_order = 0;
    cancelled = 0;
    want_together = together;
    atomic_store(&peak, 0);
    atomic_store(&running, 0);
}

TEST(workq_runs_exactly_the_window_and_bounds_the_backlog)
{
    struct workq_stats st;
    struct workq *q;
    uv_loop_t loop;

    ASSERT_EQ(uv_loop_init(&loop), 0);
    reset(2);
    q = test_workq_new(&loop, 2, 5);
    for (int i = 0; i < 7; i++)
        ASSERT_EQ(workq_submit(q, WORKQ_SKIPPABLE, job, after, (void *)(intptr_t)i), 0);
    /* 2 running + 5 queued: the next skippable job is refused and counted;
     * a job that must run still queues. */
    ASSERT_EQ(workq_submit(q, WORKQ_SKIPPABLE, job, after, (void *)(intptr_t)99), -EAGAIN);
    ASSERT_EQ(workq_submit(q, 0, job, after, (void *)(intptr_t)7), 0);
    workq_get_stats(q, &st);
    ASSERT_EQ(st.rejected, 1);
    ASSERT_EQ(st.inflight, 2);
    ASSERT_EQ(st.backlog, 6);
    ASSERT_EQ(workq_pending(q), 8);
    ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ASSERT_EQ(n_order, 8);
    ASSERT_EQ(atomic_load(&peak), 2);
    workq_get_stats(q, &st);
    ASSERT_EQ(st.completed, 8);
    ASSERT_EQ(workq_pending(q), 0);
    workq_free(q);
    ASSERT_EQ(uv_loop_close(&loop), 0);
}

TEST(workq_window_of_one_keeps_order)
{
    struct workq *q;
    uv_loop_t loop;

    ASSERT_EQ(uv_loop_init(&loop), 0);
    reset(1);
    q = test_workq_new(&loop, 1, 32);
    for (int i = 0; i < 20; i++)
        ASSERT_EQ(workq_submit(q, WORKQ_SKIPPABLE, job, after, (void *)(intptr_t)i), 0);
    ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ASSERT_EQ(n_order, 20);
    ASSERT_EQ(atomic_load(&peak), 1);
    for (int i = 0; i < 20; i++)
        ASSERT_EQ(order[i], i);
    workq_free(q);
    ASSERT_EQ(uv_loop_close(&loop), 0);
}

TEST(workq_cancel_backlog)
{
    struct workq *q;
    uv_loop_t loop;

    ASSERT_EQ(uv_loop_init(&loop), 0);
    reset(1);
    q = test_workq_new(&loop, 1, 10);
    for (int i = 0; i < 6; i++)
        ASSERT_EQ(workq_submit(q, 0, job, after, (void *)(intptr_t)i), 0);
    workq_cancel_backlog(q);
    ASSERT_EQ(cancelled, 5);
    ASSERT_EQ(workq_pending(q), 1);
    ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ASSERT_EQ(n_order, 1);
    workq_free(q);
    ASSERT_EQ(uv_loop_close(&loop), 0);
}

static atomic_int cost_running, cost_peak;

static void costly_job(void *arg)
{
    int cost = (int)(intptr_t)arg;
    int now = atomic_fetch_add(&cost_running, cost) + cost;
    int p = atomic_load(&cost_peak);

    while (now > p && !atomic_compare_exchange_weak(&cost_peak, &p, now))
        ;
    job(arg);
    atomic_fetch_sub(&cost_running, cost);
}

TEST(workq_budget_bounds_running_costs)
{
    static const int costs[] = { 60, 60, 30, 10 };
    struct workq_stats st;
    struct workq *q;
    uv_loop_t loop;

    ASSERT_EQ(uv_loop_init(&loop), 0);
    reset(3);
    atomic_store(&cost_peak, 0);
    q = test_workq_new(&loop, 4, 8);
    workq_set_budget(q, 100);
    for (int i = 0; i < 4; i++)
        ASSERT_EQ(workq_submit_cost(q, WORKQ_SKIPPABLE, costs[i], costly_job, after,
                                    (void *)(intptr_t)costs[i]),
                  0);
    /* The second 60 does not fit beside the first: it waits, and the
     * cheaper jobs behind it wait too (no overtaking). */
    workq_get_stats(q, &st);
    ASSERT_EQ(st.inflight, 1);
    ASSERT_EQ(st.backlog, 3);
    ASSERT_EQ(st.cost_inflight, 60);
    /* Costlier than the whole budget: refused at once, and counted. */
    ASSERT_EQ(workq_submit_cost(q, 0, 101, costly_job, after, (void *)(intptr_t)101), -E2BIG);
    ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ASSERT_EQ(n_order, 4);
    ASSERT_EQ(order[0], 60);
    /* 60 + 30 + 10 ran together once the first finished; never more. */
    ASSERT_EQ(atomic_load(&cost_peak), 100);
    workq_get_stats(q, &st);
    ASSERT_EQ(st.over_budget, 1);
    ASSERT_EQ(st.cost_inflight, 0);
    workq_free(q);
    ASSERT_EQ(uv_loop_close(&loop), 0);
}

TEST(workq_waiting_bytes_stay_within_the_budget)
{
    struct workq_stats st;
    struct workq *q;
    uv_loop_t loop;

    ASSERT_EQ(uv_loop_init(&loop), 0);
    reset(1);
    q = test_workq_new(&loop, 1, 8);
    workq_set_budget(q, 100);
    /* One runs; the others wait, holding their bytes. */
    ASSERT_EQ(workq_submit_held(q, WORKQ_SKIPPABLE, 10, 1000, job, after, (void *)1), 0);
    ASSERT_EQ(workq_submit_held(q, WORKQ_SKIPPABLE, 10, 60, job, after, (void *)2), 0);
    ASSERT_EQ(workq_submit_held(q, WORKQ_SKIPPABLE, 10, 50, job, after, (void *)3), -EAGAIN);
    ASSERT_EQ(workq_submit_held(q, WORKQ_SKIPPABLE, 10, 40, job, after, (void *)4), 0);
    /* Jobs that are not skippable queue anyway: their owners bound them. */
    ASSERT_EQ(workq_submit_held(q, 0, 10, 500, job, after, (void *)5), 0);
    workq_get_stats(q, &st);
    ASSERT_EQ(st.inflight, 1);
    ASSERT_EQ(st.backlog, 3);
    ASSERT_U64_EQ(st.backlog_held, 600); /* the running job's 1000 no longer counts */
    ASSERT_U64_EQ(st.rejected, 1);
    ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ASSERT_EQ(n_order, 4);
    workq_get_stats(q, &st);
    ASSERT_U64_EQ(st.backlog_held, 0);
    /* Cancelled jobs give their bytes back too. */
    ASSERT_EQ(workq_submit_held(q, WORKQ_SKIPPABLE, 10, 10, job, after, (void *)6), 0);
    ASSERT_EQ(workq_submit_held(q, WORKQ_SKIPPABLE, 10, 90, job, after, (void *)7), 0);
    workq_cancel_backlog(q);
    workq_get_stats(q, &st);
    ASSERT_U64_EQ(st.backlog_held, 0);
    ASSERT_EQ(cancelled, 1);
    ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
    workq_free(q);
    ASSERT_EQ(uv_loop_close(&loop), 0);
}

TEST(workq_charges_take_their_share_of_the_budget)
{
    struct workq_stats st;
    struct workq *q;
    uv_loop_t loop;

    ASSERT_EQ(uv_loop_init(&loop), 0);
    reset(1);
    q = test_workq_new(&loop, 2, 8);
    workq_set_budget(q, 100);
    ASSERT_EQ(workq_charge(q, 30), 0);
    ASSERT_EQ(workq_charge(q, 30), -EAGAIN); /* past half the budget: nothing charged */
    ASSERT_EQ(workq_charge(q, 20), 0);
    workq_get_stats(q, &st);
    ASSERT_U64_EQ(st.charged, 50);
    /* 50 + 60 would pass the budget: the job waits, though none runs. */
    ASSERT_EQ(workq_submit_cost(q, 0, 60, job, after, (void *)1), 0);
    ASSERT_EQ(uv_run(&loop, UV_RUN_NOWAIT), 0);
    workq_get_stats(q, &st);
    ASSERT_EQ(st.inflight, 0);
    ASSERT_EQ(st.backlog, 1);
    workq_uncharge(q, 20); /* 30 + 60 fit: it starts */
    workq_get_stats(q, &st);
    ASSERT_EQ(st.inflight, 1);
    ASSERT_U64_EQ(st.charged, 30);
    ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ASSERT_EQ(n_order, 1);
    workq_uncharge(q, 30);
    workq_get_stats(q, &st);
    ASSERT_U64_EQ(st.charged, 0);
    workq_free(q);
    ASSERT_EQ(uv_loop_close(&loop), 0);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
