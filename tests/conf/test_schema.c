/* SPDX-License-Identifier: Apache-2.0 */
/* conf/ on its own: a small schema of the test's (a top level with a list
 * of items: a required name, a duration, a size, a flag, a choice, a
 * label map) loaded through conf_load_string, so that the loader's rules
 * (defaults and units, key spellings, refusals with FILE:LINE:COL and the
 * section's name, ${VAR} expansion only when asked) are checked without
 * any module's configuration. */
#include <stdlib.h>
#include <string.h>

#include "conf/conf.h"
#include "test.h"

#define OPT CYAML_FLAG_OPTIONAL
#define PTR CYAML_FLAG_POINTER
#define UNL CYAML_UNLIMITED

struct item {
    char *name;
    uint64_t every_ms;
    uint64_t size;
    bool on;
    char *mode;
    struct conf_kv *labels;
    unsigned n_labels;
};

struct top {
    char *title;
    struct item *items;
    unsigned n_items;
};

static const cyaml_schema_field_t item_fields[] = {
    CYAML_FIELD_STRING_PTR("name", CYAML_FLAG_POINTER, struct item, name, 0, UNL),
    CYAML_FIELD_UINT("every", OPT, struct item, every_ms),
    CYAML_FIELD_UINT("max-size", OPT, struct item, size),
    CYAML_FIELD_BOOL("on", OPT, struct item, on),
    CYAML_FIELD_STRING_PTR("mode", OPT | PTR, struct item, mode, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("labels", OPT | PTR, struct item, labels, n_labels, &conf_kv_entry,
                               0, UNL),
    CYAML_FIELD_END,
};
static const cyaml_schema_value_t item_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, struct item, item_fields),
};
static const char *const modes[] = { "fast", "slow", NULL };
static const struct conf_key item_keys[] = {
    { .key = "name" },
    CONF_KEY_NUM("every", CONF_UNIT_DURATION, 15000),
    CONF_KEY_NUM("max-size", CONF_UNIT_BYTES, 1 << 20),
    { .key = "on", .def = "false" },
    { .key = "mode", .def = "fast", .choices = modes },
    { .key = "labels", .mapkind = CONF_MAP_KV },
    { 0 },
};
static const struct conf_key *const item_key_tables[] = { item_keys, NULL };
static const struct conf_section item_section = {
    .name = "item",
    .fields = item_fields,
    .keys = item_key_tables,
};

static const cyaml_schema_field_t top_fields[] = {
    CYAML_FIELD_STRING_PTR("title", OPT | PTR, struct top, title, 0, UNL),
    CYAML_FIELD_SEQUENCE_COUNT("items", OPT | PTR, struct top, items, n_items, &item_entry, 0, UNL),
    CYAML_FIELD_END,
};
static const struct conf_key top_keys[] = {
    { .key = "title", .def = "untitled" },
    { 0 },
};
static const struct conf_key *const top_key_tables[] = { top_keys, NULL };
static const struct conf_section top_section = {
    .name = "top level",
    .fields = top_fields,
    .keys = top_key_tables,
};
static const struct conf_section *const sections[] = { &top_section, &item_section, NULL };
static const struct conf_section *const *const all_sections[] = { sections, NULL };
static const cyaml_schema_value_t top_value = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, struct top, top_fields),
};
static const struct conf_schema schema = { .top = &top_value, .sections = all_sections };

static struct conf_doc *load_ok_at(const char *file, int line, const char *yaml, unsigned flags)
{
    struct conf_doc *d = NULL;
    char err[1024] = "";

    if (conf_load_string(&schema, yaml, strlen(yaml), "t.yaml", flags, &d, err, sizeof(err)) < 0)
        test__fail(file, line, "load failed: %s", err);
    return d;
}
#define LOAD_OK(y, f) load_ok_at(__FILE__, __LINE__, (y), (f))

static void err_is_at(const char *file, int line, const char *yaml, unsigned flags,
                      const char *want)
{
    struct conf_doc *d = NULL;
    char err[1024] = "";
    int rc = conf_load_string(&schema, yaml, strlen(yaml), "t.yaml", flags, &d, err, sizeof(err));

    if (rc >= 0 || d != NULL)
        test__fail(file, line, "load succeeded, wanted error: %s", want);
    if (strcmp(err, want) != 0)
        test__fail(file, line, "error \"%s\", wanted \"%s\"", err, want);
}
#define ERR_IS(y, w) err_is_at(__FILE__, __LINE__, (y), 0, (w))

TEST(defaults_and_units)
{
    struct conf_doc *d = LOAD_OK("items:\n"
                                 "  - name: a\n"
                                 "  - name: b\n"
                                 "    every: 1m30s\n"
                                 "    max_size: 64MiB\n"
                                 "    on: true\n"
                                 "    mode: slow\n"
                                 "    labels: {x: \"1\", y: two}\n",
                                 0);
    const struct top *t = conf_doc_data(d);

    ASSERT_STR_EQ(t->title, "untitled");
    ASSERT_EQ(t->n_items, 2);
    ASSERT_STR_EQ(t->items[0].name, "a");
    ASSERT_EQ(t->items[0].every_ms, 15000);
    ASSERT_EQ(t->items[0].size, 1 << 20);
    ASSERT(!t->items[0].on);
    ASSERT_STR_EQ(t->items[0].mode, "fast");
    ASSERT_EQ(t->items[0].n_labels, 0);
    ASSERT_EQ(t->items[1].every_ms, 90000);
    ASSERT_EQ(t->items[1].size, 64u << 20);
    ASSERT(t->items[1].on);
    ASSERT_STR_EQ(t->items[1].mode, "slow");
    ASSERT_EQ(t->items[1].n_labels, 2);
    ASSERT_STR_EQ(t->items[1].labels[0].key, "x");
    ASSERT_STR_EQ(t->items[1].labels[0].value, "1");
    ASSERT_STR_EQ(t->items[1].labels[1].key, "y");
    ASSERT_STR_EQ(t->items[1].labels[1].value, "two");
    ASSERT_STR_EQ(conf_doc_name(d), "t.yaml");
    conf_doc_unref(d);
}

TEST(refusals_name_the_place_and_the_section)
{
    ERR_IS("items:\n  - name: a\n    bogus: 1\n", "t.yaml:3:5: unknown key \"bogus\" in item");
    ERR_IS("items:\n  - every: 1s\n", "t.yaml:2:5: missing required key \"name\" in item");
    ERR_IS("items:\n  - name: a\n    every: soon\n",
           "t.yaml:3:12: expected a duration like 15s, got \"soon\"");
    ERR_IS("items:\n  - name: a\n    max-size: lots\n",
           "t.yaml:3:15: expected a size like 64MiB, got \"lots\"");
    ERR_IS("items:\n  - name: a\n    mode: medium\n",
           "t.yaml:3:11: expected one of fast, slow, got \"medium\"");
    ERR_IS("items:\n  - name: a\n    on: maybe\n",
           "t.yaml:3:9: expected true or false, got \"maybe\"");
    ERR_IS("items:\n  - name: a\n    max-size: 1\n    max_size: 2\n",
           "t.yaml:4:5: both \"max-size\" and \"max_size\" given in item (they are the same key)");
    ERR_IS("items:\n  - name: a\n    labels: {k: 1, k: 2}\n", "t.yaml:3:20: key \"k\" given twice");
    ERR_IS("items: {name: a}\n", "t.yaml:1:8: expected a list, got a mapping");
    ERR_IS("title: a\ntitle: b\n", "t.yaml:2:1: key \"title\" given twice in top level");
    ERR_IS("items: [\n", "t.yaml:2:1: YAML syntax error: did not find expected node content "
                         "while parsing a flow node");
}

TEST(env_expansion_only_when_asked)
{
    struct conf_doc *d;
    const struct top *t;

    setenv("PROFLET_T_CONF", "from-env", 1);
    d = LOAD_OK("title: ${PROFLET_T_CONF}\nitems: [{name: \"${MISSING_T_CONF:-dflt}$$\"}]\n",
                CONF_EXPAND_ENV);
    t = conf_doc_data(d);
    ASSERT_STR_EQ(t->title, "from-env");
    ASSERT_STR_EQ(t->items[0].name, "dflt$");
    conf_doc_unref(d);
    d = LOAD_OK("title: ${PROFLET_T_CONF}\n", 0);
    t = conf_doc_data(d);
    ASSERT_STR_EQ(t->title, "${PROFLET_T_CONF}");
    conf_doc_unref(d);
    err_is_at(__FILE__, __LINE__, "title: ${PROFLET_T_CONF\n", CONF_EXPAND_ENV,
              "t.yaml:1:8: malformed \"${...}\" in value \"${PROFLET_T_CONF\": expected ${NAME} "
              "or ${NAME:-default}");
    unsetenv("PROFLET_T_CONF");
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
