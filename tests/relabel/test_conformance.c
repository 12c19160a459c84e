/* SPDX-License-Identifier: Apache-2.0 */
/* Conformance: Prometheus' own TestRelabel (34 cases), TestRelabelValidate
 * (10) and TestTargetLabelLegacyValidity (16), exported as JSON from
 * prometheus/model/relabel/relabel_test.go and checked in under
 * tests/relabel/data/. The expected outputs are Prometheus', not ours. */
#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "relabel/relabel.h"
#include "test.h"

static json_object *load(const char *name)
{
    json_object *j = json_object_from_file(test_data_path(name));

    if (!j)
        test__fail(__FILE__, __LINE__, "cannot read %s", test_data_path(name));
    return j;
}

static const char *jstr(json_object *o, const char *key)
{
    json_object *v;

    if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
        return NULL;
    return json_object_get_string(v);
}

static bool in_list(json_object *list, const char *name)
{
    for (size_t i = 0; list && i < json_object_array_length(list); i++)
        if (strcmp(json_object_get_string(json_object_array_get_idx(list, i)), name) == 0)
            return true;
    return false;
}

/* Fills `c` from one JSON rule. Fields the Go literal did not set are left
 * NULL so that our defaults apply, exactly as the harness's defaults did
 * (this matters for keepequal/dropequal, whose regex must be the default). */
static void cfg_from_json(json_object *r, json_object *explicit_fields, const char *scheme,
                          bool raw, struct relabel_cfg *c)
{
    json_object *src, *mod;

    memset(c, 0, sizeof(*c));
    if (json_object_object_get_ex(r, "source_labels", &src) &&
        json_object_is_type(src, json_type_array) && json_object_array_length(src) > 0) {
        c->n_source_labels = (unsigned)json_object_array_length(src);
        c->source_labels = calloc(c->n_source_labels, sizeof(char *));
        for (unsigned i = 0; i < c->n_source_labels; i++)
            c->source_labels[i] = (char *)json_object_get_string(json_object_array_get_idx(src, i));
    }
#define FIELD(f)                                 \
    do {                                         \
        if (raw || in_list(explicit_fields, #f)) \
            c->f = (char *)jstr(r, #f);          \
    } while (0)
    FIELD(separator);
    FIELD(target_label);
    FIELD(replacement);
    FIELD(action);
    if (raw || in_list(explicit_fields, "regex")) {
        c->regex = (char *)jstr(r, "regex");
        /* in the raw Validate cases a JSON null means "unset" (the Go zero value) */
    }
#undef FIELD
    if (json_object_object_get_ex(r, "modulus", &mod))
        c->modulus = (uint64_t)json_object_get_int64(mod);
    c->name_validation_scheme = (char *)scheme;
}

TEST(prometheus_relabel_cases)
{
    json_object *all = load("relabel_cases.json");
    size_t n = json_object_array_length(all), passed = 0;

    ASSERT_EQ(n, 34);
    for (size_t k = 0; k < n; k++) {
        json_object *tc = json_object_array_get_idx(all, k), *rules, *expl, *in, *out;
        const char *name = jstr(tc, "name"), *scheme = jstr(tc, "validation_scheme");
        struct relabel_cfg cfgs[8];
        struct relabel_rules *rs = NULL;
        struct labels ls = LABELS_INIT, want = LABELS_INIT;
        char err[512];
        size_t nr;
        int rc;

        json_object_object_get_ex(tc, "relabel", &rules);
        json_object_object_get_ex(tc, "explicit_fields", &expl);
        json_object_object_get_ex(tc, "input", &in);
        json_object_object_get_ex(tc, "output", &out);
        nr = json_object_array_length(rules);
        ASSERT_LE(nr, 8);
        for (size_t i = 0; i < nr; i++)
            cfg_from_json(json_object_array_get_idx(rules, i), json_object_array_get_idx(expl, i),
                          scheme, false, &cfgs[i]);
        rc = relabel_rules_new(cfgs, nr, RELABEL_SCHEME_UTF8, &rs, err, sizeof(err));
        if (rc != 0)
            test__fail(__FILE__, __LINE__, "%s: compile failed: %s", name, err);
        json_object_object_foreach(in, key, val)
            ASSERT_EQ(labels_set(&ls, key, json_object_get_string(val)), 0);
        rc = relabel_apply(rs, &ls);
        if (json_object_is_type(out, json_type_null)) {
            if (rc != 0)
                test__fail(__FILE__, __LINE__, "%s: expected drop, got %d", name, rc);
        } else {
            char *got, *exp;

            json_object_object_foreach(out, okey, oval)
                ASSERT_EQ(labels_set(&want, okey, json_object_get_string(oval)), 0);
            got = labels_to_string(&ls);
            exp = labels_to_string(&want);
            if (rc != 1 || !labels_equal(&ls, &want))
                test__fail(__FILE__, __LINE__, "%s: rc=%d got %s want %s", name, rc, got, exp);
            free(got);
            free(exp);
        }
        passed++;
        for (size_t i = 0; i < nr; i++)
            free(cfgs[i].source_labels);
        relabel_rules_free(rs);
        labels_done(&ls);
        labels_done(&want);
    }
    ASSERT_EQ(passed, n);
    json_object_put(all);
}

TEST(prometheus_validate_cases)
{
    json_object *all = load("relabel_validate_cases.json"), *suite, *cases;
    size_t n;

    json_object_object_get_ex(all, "TestRelabelValidate", &suite);
    json_object_object_get_ex(suite, "cases", &cases);
    n = json_object_array_length(cases);
    ASSERT_EQ(n, 10);
    for (size_t k = 0; k < n; k++) {
        json_object *tc = json_object_array_get_idx(cases, k), *config;
        const char *name = jstr(tc, "name"), *want = jstr(tc, "expected_error");
        struct relabel_cfg c;
        struct relabel_rules *rs = NULL;
        char err[512] = "";
        int rc;

        json_object_object_get_ex(tc, "config", &config);
        cfg_from_json(config, NULL, jstr(config, "validation_scheme"), true, &c);
        rc = relabel_rules_new(&c, 1, RELABEL_SCHEME_UNSET, &rs, err, sizeof(err));
        if (want) {
            if (rc != RELABEL_EINVAL || !strstr(err, want))
                test__fail(__FILE__, __LINE__, "%s: rc=%d err \"%s\", want \"%s\"", name, rc, err,
                           want);
        } else if (rc != 0) {
            test__fail(__FILE__, __LINE__, "%s: unexpected error %s", name, err);
        }
        relabel_rules_free(rs);
        free(c.source_labels);
    }
    json_object_put(all);
}

/* relabelTargetLegacy is what labelmap's replacement must match under legacy. */
TEST(prometheus_legacy_target_validity)
{
    json_object *all = load("relabel_validate_cases.json"), *suite, *cases;
    size_t n;

    json_object_object_get_ex(all, "TestTargetLabelLegacyValidity", &suite);
    json_object_object_get_ex(suite, "cases", &cases);
    n = json_object_array_length(cases);
    ASSERT_EQ(n, 16);
    for (size_t k = 0; k < n; k++) {
        json_object *tc = json_object_array_get_idx(cases, k), *valid;
        const char *str = jstr(tc, "str");
        struct relabel_cfg c = { .action = "labelmap",
                                 .replacement = (char *)str,
                                 .name_validation_scheme = "legacy" };
        struct relabel_rules *rs = NULL;
        char err[512] = "";
        int rc;

        json_object_object_get_ex(tc, "valid", &valid);
        rc = relabel_rules_new(&c, 1, RELABEL_SCHEME_UNSET, &rs, err, sizeof(err));
        if ((rc == 0) != json_object_get_boolean(valid))
            test__fail(__FILE__, __LINE__, "\"%s\": rc=%d (%s), want valid=%d", str, rc, err,
                       json_object_get_boolean(valid));
        relabel_rules_free(rs);
    }
    json_object_put(all);
}

int main(int argc, char **argv)
{
    int rc = test_main(argc, argv);

    relabel_thread_cleanup();
    return rc;
}
