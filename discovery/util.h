/** Pure string helpers for discovery. Any thread. */
#ifndef PROFLET_DISCOVERY_UTIL_H
#define PROFLET_DISCOVERY_UTIL_H

#include <stdbool.h>
#include <stddef.h>

/** True if s[0..n) is valid UTF-8 (no surrogates, no overlongs). */
bool disc__valid_utf8(const char *s, size_t n);
/** Prometheus' SanitizeLabelName: each rune outside [a-zA-Z0-9_] and each
 * invalid UTF-8 byte becomes one "_". Returns a malloc'd string or NULL. */
char *disc__sanitize(const char *s, size_t n);

#endif
