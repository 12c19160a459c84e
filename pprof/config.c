/* SPDX-License-Identifier: Apache-2.0 */
/* The caps pprof applies to every profile, as configured under `limits:`:
 * their metadata (defaults are the PPROF_DEFAULT_* constants) and range
 * check (docs/design.md "Configuration"). Const data and a pure check; any
 * thread. */
#include "pprof/pprof.h"

const struct conf_key pprof_limits_keys[] = {
    CONF_KEY_NUM("max-decompressed", CONF_UNIT_BYTES, PPROF_DEFAULT_MAX_DECOMPRESSED),
    CONF_KEY_NUM("max-samples", CONF_UNIT_NONE, PPROF_DEFAULT_MAX_SAMPLES),
    CONF_KEY_NUM("max-locations", CONF_UNIT_NONE, PPROF_DEFAULT_MAX_LOCATIONS),
    CONF_KEY_NUM("max-functions", CONF_UNIT_NONE, PPROF_DEFAULT_MAX_FUNCTIONS),
    CONF_KEY_NUM("max-strings", CONF_UNIT_NONE, PPROF_DEFAULT_MAX_STRINGS),
    CONF_KEY_NUM("max-labels", CONF_UNIT_NONE, PPROF_DEFAULT_MAX_LABELS),
    CONF_KEY_NUM("max-stack-depth", CONF_UNIT_NONE, PPROF_DEFAULT_MAX_STACK_DEPTH),
    CONF_KEY_NUM("gzip-level", CONF_UNIT_NONE, PPROF_DEFAULT_GZIP_LEVEL),
    { 0 },
};

int pprof_limits_check(struct conf_load *ld, struct conf_node *limits)
{
    struct conf_node *v = conf_get(limits, "gzip-level");
    const char *s = conf_str(v);

    if (v && (s[0] == '-' || conf_uint(v) > 12))
        return conf_fail(ld, v, "gzip-level must be between 0 and 12, got %s", s);
    return 0;
}
