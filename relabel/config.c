/* SPDX-License-Identifier: Apache-2.0 */
/* How a relabel rule is written in YAML (docs/design.md "Configuration"): the
 * libcyaml fields of struct relabel_cfg and the one thing libcyaml cannot say
 * (an explicit `regex:` null is the empty regex, not the default). Const
 * data; any thread. */
#include "relabel/relabel.h"

#define OPT CYAML_FLAG_OPTIONAL
#define STR(k, s, m) CYAML_FIELD_STRING_PTR(k, OPT, s, m, 0, CYAML_UNLIMITED)

static const cyaml_schema_field_t rule_fields[] = {
    CYAML_FIELD_SEQUENCE_COUNT("source-labels", OPT | CYAML_FLAG_POINTER, struct relabel_cfg,
                               source_labels, n_source_labels, &conf_string_entry, 0,
                               CYAML_UNLIMITED),
    STR("separator", struct relabel_cfg, separator),
    STR("regex", struct relabel_cfg, regex),
    CYAML_FIELD_BOOL(".regex-null", OPT, struct relabel_cfg, regex_null),
    CYAML_FIELD_UINT("modulus", OPT, struct relabel_cfg, modulus),
    STR("target-label", struct relabel_cfg, target_label),
    STR("replacement", struct relabel_cfg, replacement),
    STR("action", struct relabel_cfg, action),
    STR("name-validation-scheme", struct relabel_cfg, name_validation_scheme),
    CYAML_FIELD_END,
};

const cyaml_schema_value_t relabel_cfg_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct relabel_cfg, rule_fields),
};

/* `regex:` (null) is the empty regex, not the default (.*): note it before
 * the walk drops keys whose value is null. */
static int rule_pre(struct conf_load *ld, struct conf_node *map)
{
    struct conf_node *re = conf_get(map, "regex");

    if (!re || !conf_null(re))
        return 0;
    if (conf_set(ld, map, "regex", "") < 0 || conf_set(ld, map, ".regex-null", "true") < 0)
        return -1;
    return 0;
}

const struct conf_section relabel_cfg_section = {
    .name = "relabel config",
    .fields = rule_fields,
    .pre = rule_pre,
};
