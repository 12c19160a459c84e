/** YAML to json-c conversion used by file_sd and kubeconfig parsing.
 * Pure; any thread. */
#ifndef PROFLET_DISCOVERY_YAML_H
#define PROFLET_DISCOVERY_YAML_H

#include <json-c/json.h>
#include <stddef.h>

/** Parses the first YAML document of `data` into a json-c tree (scalars
 * become strings; plain ~/null/empty become NULL). `*out` is owned by the
 * caller (may be NULL for an empty document). Returns 0 or a negative code
 * with a message (line and column for syntax errors). */
int disc__yaml_to_json(const char *data, size_t len, json_object **out, char *err,
                       size_t errlen);

#endif
