/* SPDX-License-Identifier: Apache-2.0 */
/* Loading YAML with the program's schema (agent/config.c) and checking the
 * outcome: it loads, or it fails with exactly (or starting with) a
 * FILE:LINE:COL message. Shared by tests/agent and tests/conf. */
#ifndef PROFLET_TESTS_AGENT_CONFIG_CHECK_H
#define PROFLET_TESTS_AGENT_CONFIG_CHECK_H

#include <string.h>

#include "agent/config.h"

/* The whole file, as the tests were first written against it. */
#define cfg agent_config
#include "test.h"

/* The documents the tests loaded, so cfg_free() can find a config's. */
static struct conf_doc *held[64];

static inline struct cfg *keep(struct conf_doc *doc)
{
    for (size_t i = 0; i < sizeof(held) / sizeof(held[0]); i++) {
        if (!held[i]) {
            held[i] = doc;
            return conf_doc_data(doc);
        }
    }
    test__fail(__FILE__, __LINE__, "too many documents held");
    return NULL;
}

static inline void cfg_free(struct cfg *c)
{
    for (size_t i = 0; c && i < sizeof(held) / sizeof(held[0]); i++) {
        if (held[i] && conf_doc_data(held[i]) == c) {
            conf_doc_unref(held[i]);
            held[i] = NULL;
            return;
        }
    }
}

static inline int cfg_load_string(const char *yaml, size_t len, const char *name, struct cfg **out,
                                  char *err, size_t errlen)
{
    struct conf_doc *doc = NULL;
    int rc = agent_config_load_string(yaml, len, name, CONF_EXPAND_ENV, &doc, err, errlen);

    *out = rc == 0 ? keep(doc) : NULL;
    return rc;
}

static inline int cfg_load_file(const char *path, struct cfg **out, char *err, size_t errlen)
{
    struct conf_doc *doc = NULL;
    int rc = agent_config_load(path, CONF_EXPAND_ENV, &doc, err, errlen);

    *out = rc == 0 ? keep(doc) : NULL;
    return rc;
}

/* The name a loaded config was loaded under. */
static inline const char *source_of(const struct cfg *c)
{
    for (size_t i = 0; i < sizeof(held) / sizeof(held[0]); i++) {
        if (held[i] && conf_doc_data(held[i]) == c)
            return conf_doc_name(held[i]);
    }
    return NULL;
}
static inline struct cfg *load_ok_at(const char *file, int line, const char *yaml)
{
    char err[1024] = "";
    struct cfg *c = NULL;
    int rc = cfg_load_string(yaml, strlen(yaml), "t.yaml", &c, err, sizeof(err));

    if (rc != 0 || !c)
        test__fail(file, line, "load failed (%d): %s", rc, err);
    return c;
}
#define LOAD_OK(y) load_ok_at(__FILE__, __LINE__, (y))

/* Loading must fail and the message must be exactly `want`. */
static inline void err_is_at(const char *file, int line, const char *yaml, const char *want)
{
    char err[1024] = "";
    struct cfg *c = (struct cfg *)1;
    int rc = cfg_load_string(yaml, strlen(yaml), "t.yaml", &c, err, sizeof(err));

    if (rc >= 0 || c != NULL)
        test__fail(file, line, "load succeeded, wanted error: %s", want);
    if (strcmp(err, want) != 0)
        test__fail(file, line, "error \"%s\", wanted \"%s\"", err, want);
}
#define ERR_IS(y, w) err_is_at(__FILE__, __LINE__, (y), (w))

/* Loading must fail and the message must start with `want`. */
static inline void err_starts_at(const char *file, int line, const char *yaml, const char *want)
{
    char err[1024] = "";
    struct cfg *c = NULL;
    int rc = cfg_load_string(yaml, strlen(yaml), "t.yaml", &c, err, sizeof(err));

    if (rc >= 0 || c != NULL)
        test__fail(file, line, "load succeeded, wanted error: %s", want);
    if (strncmp(err, want, strlen(want)) != 0)
        test__fail(file, line, "error \"%s\", wanted prefix \"%s\"", err, want);
}
#define ERR_STARTS(y, w) err_starts_at(__FILE__, __LINE__, (y), (w))

#endif
