/* SPDX-License-Identifier: Apache-2.0 */
/** Prometheus durations ("1h30m", "15s", "500ms", "2d") in milliseconds. */
#ifndef PROFLET_COMMON_DURATION_H
#define PROFLET_COMMON_DURATION_H

#include <stddef.h>
#include <stdint.h>

/** The longest duration: what int64 nanoseconds hold (about 292 years). */
#define DURATION_MAX_MS (INT64_MAX / 1000000)

/** Parses a Prometheus duration: one or more <int><unit> with units
 * y w d h m s ms in that order, each at most once; "0" alone is 0.
 * Returns 0, -EINVAL (not a duration) or -ERANGE (beyond DURATION_MAX_MS). */
int duration_parse(const char *s, uint64_t *ms_out);
/** Formats as Prometheus' model.Duration.String() does ("1m30s", "0s").
 * Returns the length written (snprintf semantics). */
int duration_format(uint64_t ms, char *out, size_t outlen);

#endif
