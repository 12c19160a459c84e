/** Internal interface between config.c (the loader) and config_schema.c
 * (the libcyaml schema and the metadata libcyaml has no slot for). Private
 * to the agent_config library: nothing outside those two files includes it.
 * Everything declared here is const data or a pure lookup; any thread. */
#ifndef PROFLET_AGENT_CONFIG_INT_H
#define PROFLET_AGENT_CONFIG_INT_H

#include <cyaml/cyaml.h>

/** How a scalar is converted before libcyaml sees it. */
enum cfg__unit { CFG__UNIT_NONE, CFG__UNIT_DURATION, CFG__UNIT_BYTES };
/** Which YAML maps with user-chosen keys become sequences of entries. */
enum cfg__mapkind { CFG__MAP_NONE, CFG__MAP_KV, CFG__MAP_PARAM, CFG__MAP_PROFILE };

/** Metadata of one schema field, found by cfg__meta_find(). */
struct cfg__meta {
    const cyaml_schema_field_t *fields; /**< NULL: any mapping */
    const char *key;
    enum cfg__unit unit;
    const char *def;                    /**< default, as YAML text */
    const char *const *choices;         /**< NULL-terminated, for strings */
    enum cfg__mapkind mapkind;
    const cyaml_schema_value_t *check;  /**< shape of a CYAML_IGNORE field */
};

/** The document's top-level schema value and the field tables the loader
 * walks by name. */
extern const cyaml_schema_value_t cfg__top_schema;
extern const cyaml_schema_field_t cfg__top_fields[], cfg__scrape_fields[], cfg__k8s_fields[],
    cfg__relabel_fields[], cfg__remote_fields[], cfg__profile_fields[];

/** Metadata of `key` in `fields` (an entry with `fields` NULL matches any
 * mapping), or an all-default entry when there is none; never NULL. Static
 * data. */
const struct cfg__meta *cfg__meta_find(const cyaml_schema_field_t *fields, const char *key);
/** Human name of the mapping described by `fields`, for error messages;
 * "mapping" if it has none. Static data. */
const char *cfg__mapping_name(const cyaml_schema_field_t *fields);
/** The canonical key for an accepted alias (use-delta-endpoints ->
 * use-delta-profiles); any other key is returned unchanged. */
const char *cfg__key_alias(const char *key);

#endif
