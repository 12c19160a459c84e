/* SPDX-License-Identifier: Apache-2.0 */
/* The caps pprof applies to every profile, as configured under `limits:`:
 * their metadata (defaults are the PPROF_DEFAULT_* constants), and the
 * names of the output compression settings (docs/design.md
 * "Configuration"). Const data; any thread. */
#include "pprof/pprof.h"

const struct conf_key pprof_limits_keys[] = {
    CONF_KEY_NUM("max-decompressed", CONF_UNIT_BYTES, PPROF_DEFAULT_MAX_DECOMPRESSED),
    CONF_KEY_NUM("max-samples", CONF_UNIT_NONE, PPROF_DEFAULT_MAX_SAMPLES),
    CONF_KEY_NUM("max-locations", CONF_UNIT_NONE, PPROF_DEFAULT_MAX_LOCATIONS),
    CONF_KEY_NUM("max-functions", CONF_UNIT_NONE, PPROF_DEFAULT_MAX_FUNCTIONS),
    CONF_KEY_NUM("max-strings", CONF_UNIT_NONE, PPROF_DEFAULT_MAX_STRINGS),
    CONF_KEY_NUM("max-labels", CONF_UNIT_NONE, PPROF_DEFAULT_MAX_LABELS),
    CONF_KEY_NUM("max-stack-depth", CONF_UNIT_NONE, PPROF_DEFAULT_MAX_STACK_DEPTH),
    { 0 },
};

const cyaml_strval_t pprof_compression_strings[PPROF_COMPRESS_COUNT] = {
    { "none", PPROF_COMPRESS_NONE },
    { "fastest", PPROF_COMPRESS_FASTEST },
    { "balanced", PPROF_COMPRESS_BALANCED },
    { "smallest", PPROF_COMPRESS_SMALLEST },
};

const char *pprof_compression_name(enum pprof_compression c)
{
    return (unsigned)c < PPROF_COMPRESS_COUNT ? pprof_compression_strings[c].str : "?";
}
