/* SPDX-License-Identifier: Apache-2.0 */
/* Wall-clock and monotonic time (see clock.h; docs/design.md "Modules").
 * Any thread. */
#include <time.h>

#include "common/clock.h"

uint64_t clock_wall_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t clock_wall_ms(void)
{
    return clock_wall_ns() / 1000000ULL;
}

uint64_t clock_mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t clock_mono_ms(void)
{
    return clock_mono_ns() / 1000000ULL;
}

uint64_t clock_thread_cpu_ns(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}
