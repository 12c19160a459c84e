/* SPDX-License-Identifier: Apache-2.0 */
/** logfmt logging to stderr. Only agent/ calls this; libraries return errors.
 *
 * Loop-thread only (no locking): workers report errors through their job
 * results instead of logging. */
#ifndef PROFLET_COMMON_LOG_H
#define PROFLET_COMMON_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum log_level { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARN = 2, LOG_ERROR = 3 };

/** Sets the lowest level that is printed. */
void log_set_level(enum log_level lvl);
/** Parses "debug|info|warn|error" (also "warning"). Returns the level or -1. */
int log_parse_level(const char *s);
/** True if `lvl` would be printed. */
bool log_enabled(enum log_level lvl);
/** Prints `ts=… level=… msg=…` followed by key/value pairs given as
 * NUL-terminated strings and ended by NULL. A NULL value prints as "". */
void log_kv(enum log_level lvl, const char *msg, ...) __attribute__((sentinel));

/** Token-bucket rate limit for repeated log lines (one per target). */
struct log_ratelimit {
    uint64_t window_start_ms;
    unsigned emitted;
    unsigned suppressed;
};
/** Allows `burst` lines per `window_ms`. Returns true if this line may be
 * printed; `*suppressed_out` receives how many were suppressed before it. */
bool log_ratelimit_allow(struct log_ratelimit *rl, uint64_t now_ms, unsigned burst,
                         uint64_t window_ms, unsigned *suppressed_out);

#define log_debug(...) log_kv(LOG_DEBUG, __VA_ARGS__, (const char *)NULL)
#define log_info(...) log_kv(LOG_INFO, __VA_ARGS__, (const char *)NULL)
#define log_warn(...) log_kv(LOG_WARN, __VA_ARGS__, (const char *)NULL)
#define log_error(...) log_kv(LOG_ERROR, __VA_ARGS__, (const char *)NULL)

#endif
