/* SPDX-License-Identifier: Apache-2.0 */
/* Prometheus duration syntax (prometheus/common model.ParseDuration and
 * Duration.String; docs/design.md "Configuration"). Pure. */
#include "duration.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const struct {
    const char *unit;
    uint64_t ms;
} units[] = {
    { "y", 365ULL * 24 * 3600 * 1000 },
    { "w", 7ULL * 24 * 3600 * 1000 },
    { "d", 24ULL * 3600 * 1000 },
    { "h", 3600ULL * 1000 },
    { "m", 60ULL * 1000 },
    { "s", 1000 },
    { "ms", 1 },
};
#define N_UNITS (sizeof(units) / sizeof(units[0]))

int duration_parse(const char *s, uint64_t *ms_out)
{
    uint64_t total = 0;
    size_t next_unit = 0;

    if (!s || !*s)
        return -EINVAL;
    if (strcmp(s, "0") == 0) {
        *ms_out = 0;
        return 0;
    }
    while (*s) {
        uint64_t v = 0;
        size_t u, ulen;
        int digits = 0;

        while (*s >= '0' && *s <= '9') {
            if (v > (UINT64_MAX - 9) / 10)
                return -EINVAL;
            v = v * 10 + (uint64_t)(*s - '0');
            s++;
            digits++;
        }
        if (!digits)
            return -EINVAL;
        /* "ms" must win over "m". */
        if (s[0] == 'm' && s[1] == 's') {
            u = N_UNITS - 1;
            ulen = 2;
        } else {
            for (u = 0; u < N_UNITS - 1; u++)
                if (s[0] == units[u].unit[0])
                    break;
            if (u == N_UNITS - 1)
                return -EINVAL;
            ulen = 1;
        }
        if (u < next_unit)
            return -EINVAL;
        next_unit = u + 1;
        if (v && units[u].ms > UINT64_MAX / v)
            return -EINVAL;
        if (total > UINT64_MAX - v * units[u].ms)
            return -EINVAL;
        total += v * units[u].ms;
        s += ulen;
    }
    /* Prometheus holds durations in int64 nanoseconds and refuses what
     * does not fit; so does proflet, so a duration never wraps when it is
     * turned into nanoseconds. */
    if (total > DURATION_MAX_MS)
        return -ERANGE;
    *ms_out = total;
    return 0;
}

int duration_format(uint64_t ms, char *out, size_t outlen)
{
    size_t off = 0;

    if (ms == 0)
        return snprintf(out, outlen, "0s");
    if (outlen)
        out[0] = '\0';
    for (size_t u = 0; u < N_UNITS; u++) {
        uint64_t n = ms / units[u].ms;
        int w;

        if (!n)
            continue;
        ms -= n * units[u].ms;
        w = snprintf(out + (off < outlen ? off : outlen), off < outlen ? outlen - off : 0, "%llu%s",
                     (unsigned long long)n, units[u].unit);
        off += (size_t)w;
    }
    return (int)off;
}
