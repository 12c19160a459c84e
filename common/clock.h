/* SPDX-License-Identifier: Apache-2.0 */
/** The clocks every module reads: wall-clock time (what is reported and
 * what scrape offsets are aligned to) and monotonic time (deadlines,
 * rate limits, token ages, request durations, the status server's turns)
 * and the calling thread's CPU time (loop stalls, benchmark phases).
 * Any thread. */
#ifndef PROFLET_COMMON_CLOCK_H
#define PROFLET_COMMON_CLOCK_H

#include <stdint.h>

/** Nanoseconds since the Unix epoch (CLOCK_REALTIME). */
uint64_t clock_wall_ns(void);
/** Milliseconds since the Unix epoch. */
uint64_t clock_wall_ms(void);
/** Monotonic nanoseconds (CLOCK_MONOTONIC), for intervals only. */
uint64_t clock_mono_ns(void);
/** Monotonic milliseconds, for intervals only. */
uint64_t clock_mono_ms(void);
/** CPU nanoseconds the calling thread has used (CLOCK_THREAD_CPUTIME_ID):
 * the work of a stretch of code, apart from waiting for a core. */
uint64_t clock_thread_cpu_ns(void);

#endif
