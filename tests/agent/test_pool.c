/* Unit tests for the agent's bounded worker pool (agent/work.c): at most
 * `max_inflight` jobs on libuv's pool, a bounded FIFO backlog, refusal past
 * it, FIFO completion order for a window of one, cancellation of the
 * backlog, and a clean loop close. */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <uv.h>

#include "agent/agent.h"
#include "test.h"

static atomic_int running, peak;
static int order[64], n_order, cancelled;

static void job(void *arg)
{
    int now = atomic_fetch_add(&running, 1) + 1;
    int p = atomic_load(&peak);

    while (now > p && !atomic_compare_exchange_weak(&peak, &p, now))
        ;
    uv_sleep(5);
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

TEST(pool_bounds_inflight_and_backlog)
{
    struct agent a;
    uv_loop_t loop;

    memset(&a, 0, sizeof(a));
    ASSERT_EQ(uv_loop_init(&loop), 0);
    a.loop = &loop;
    agent__pool_init(&a.pool, 2, 5);
    n_order = 0;
    atomic_store(&peak, 0);
    for (int i = 0; i < 7; i++)
        ASSERT_EQ(agent__pool_submit(&a, job, after, (void *)(intptr_t)i), 0);
    /* 2 running + 5 queued: the next one is refused and counted. */
    ASSERT_EQ(agent__pool_submit(&a, job, after, (void *)(intptr_t)99), -EAGAIN);
    ASSERT_EQ(a.pool.rejected, 1);
    ASSERT_EQ(a.pool.inflight, 2);
    ASSERT_EQ(a.pool.backlog_len, 5);
    ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ASSERT_EQ(n_order, 7);
    ASSERT_LE(atomic_load(&peak), 2);
    ASSERT_EQ(a.pool.completed, 7);
    ASSERT_EQ(uv_loop_close(&loop), 0);
}

TEST(pool_window_of_one_keeps_order)
{
    struct agent a;
    uv_loop_t loop;

    memset(&a, 0, sizeof(a));
    ASSERT_EQ(uv_loop_init(&loop), 0);
    a.loop = &loop;
    agent__pool_init(&a.pool, 1, 32);
    n_order = 0;
    for (int i = 0; i < 20; i++)
        ASSERT_EQ(agent__pool_submit(&a, job, after, (void *)(intptr_t)i), 0);
    ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ASSERT_EQ(n_order, 20);
    for (int i = 0; i < 20; i++)
        ASSERT_EQ(order[i], i);
    ASSERT_EQ(uv_loop_close(&loop), 0);
}

TEST(pool_cancel_backlog)
{
    struct agent a;
    uv_loop_t loop;

    memset(&a, 0, sizeof(a));
    ASSERT_EQ(uv_loop_init(&loop), 0);
    a.loop = &loop;
    agent__pool_init(&a.pool, 1, 10);
    n_order = 0;
    cancelled = 0;
    for (int i = 0; i < 6; i++)
        ASSERT_EQ(agent__pool_submit(&a, job, after, (void *)(intptr_t)i), 0);
    agent__pool_cancel_backlog(&a);
    ASSERT_EQ(cancelled, 5);
    ASSERT_EQ(a.pool.backlog_len, 0);
    ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ASSERT_EQ(n_order, 1);
    ASSERT_EQ(uv_loop_close(&loop), 0);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
