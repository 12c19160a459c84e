/* SPDX-License-Identifier: Apache-2.0 */
/* conf/walk.c through the program's schema: unknown, doubled and
 * misspelt keys, wrong shapes, bad scalars (durations, sizes, choices),
 * missing keys and ${VAR} expansion, each refusal with its FILE:LINE:COL. */
#include <stdlib.h>
#include <string.h>

#include "config_check.h"

TEST(unknown_keys)
{
    ERR_IS("bogus: 1\n", "t.yaml:1:1: unknown key \"bogus\" in top level");
    ERR_IS("scrape-configs:\n  - job-name: a\n    foo: 1\n",
           "t.yaml:3:5: unknown key \"foo\" in scrape config");
    ERR_IS("scrape-configs:\n  - job-name: a\n    static-configs:\n      - targets: []\n"
           "        lables: {a: b}\n",
           "t.yaml:5:9: unknown key \"lables\" in static config");
    ERR_IS("remote-write:\n  - url: http://a\n    tls-config: {cafile: x}\n",
           "t.yaml:3:18: unknown key \"cafile\" in tls-config");
    ERR_IS("spool: {dirr: /x}\n", "t.yaml:1:9: unknown key \"dirr\" in spool");
    /* Internal keys of the schema are not user keys. */
    ERR_IS("scrape-configs:\n  - job-name: a\n    profiles: {cpu: {.kind: gauge}}\n",
           "t.yaml:3:22: unknown key \".kind\" in profile");
}

TEST(wrong_types)
{
    ERR_IS("scrape-configs: foo\n", "t.yaml:1:17: expected a list, got \"foo\"");
    ERR_IS("scrape-configs:\n  - job-name: a\n    static-configs: [{targets: {a: b}}]\n",
           "t.yaml:3:32: expected a list, got a mapping");
    ERR_IS("scrape-configs:\n  - job-name: [a]\n", "t.yaml:2:15: expected a string, got a list");
    ERR_IS("server: 4100\n", "t.yaml:1:9: expected a mapping, got \"4100\"");
    ERR_IS("scrape-configs:\n  - job-name: a\n    use-delta-profiles: maybe\n",
           "t.yaml:3:25: expected true or false, got \"maybe\"");
    ERR_IS("remote-write:\n  - url: http://a\n    max-retries: -1\n",
           "t.yaml:3:18: expected a non-negative integer, got \"-1\"");
    ERR_IS("limits: {workers: 99999999999}\n",
           "t.yaml:1:19: expected a non-negative integer, got \"99999999999\"");
    ERR_IS("scrape-configs:\n  - job-name: a\n    static-configs: [{targets: [a], labels: [x]}]\n",
           "t.yaml:3:45: expected a mapping, got a list");
    ERR_IS("scrape-configs:\n  - job-name: a\n    static-configs:\n      -\n",
           "t.yaml:4:8: expected a mapping, got null");
    ERR_IS("scrape-configs:\n  - job-name: a\n    body-size-limit: lots\n",
           "t.yaml:3:22: expected a size like 64MiB, got \"lots\"");
}

TEST(bad_duration)
{
    ERR_IS("scrape-configs:\n  - job-name: a\n    scrape-interval: abc\n",
           "t.yaml:3:22: expected a duration like 15s, got \"abc\"");
    ERR_IS("discovery: {coalesce_delay: 5}\n",
           "t.yaml:1:29: expected a duration like 15s, got \"5\"");
    ERR_IS("scrape-configs:\n  - job-name: a\n    scrape-interval: 0s\n",
           "t.yaml:3:22: scrape-interval must be greater than 0");
}

TEST(bad_enum_values)
{
    ERR_IS("scrape-configs:\n  - job-name: a\n    scheme: ftp\n",
           "t.yaml:3:13: expected one of http, https, got \"ftp\"");
    ERR_IS("log-level: loud\n", "t.yaml:1:12: expected one of debug, info, warn, error, got "
                                "\"loud\"");
    ERR_IS("spool: {fsync: sometimes}\n",
           "t.yaml:1:16: expected one of always, batch, never, got \"sometimes\"");
    ERR_IS("name_validation_scheme: ascii\n",
           "t.yaml:1:25: expected one of utf8, legacy, got \"ascii\"");
    ERR_IS("scrape-configs:\n  - job-name: a\n    kubernetes-sd-configs: [{role: service}]\n",
           "t.yaml:3:36: expected one of pod, got \"service\"");
    ERR_IS("remote-write: [{url: 'http://h', compression: fast}]\n",
           "t.yaml:1:47: expected one of none, fastest, balanced, smallest, got \"fast\"");
    ERR_IS("limits: {gzip-level: 6}\n", "t.yaml:1:10: unknown key \"gzip-level\" in limits");
    ERR_IS("workers: 0\n", "t.yaml:1:10: workers must be at least 1");
}

TEST(missing_required)
{
    ERR_IS("scrape-configs:\n  - scrape-interval: 10s\n",
           "t.yaml:2:5: missing required key \"job-name\" in scrape config");
    ERR_IS("scrape-configs:\n  - job-name:\n",
           "t.yaml:2:5: missing required key \"job-name\" in scrape config");
    ERR_IS("scrape-configs:\n  - job-name: a\n    static-configs:\n      - labels: {a: b}\n",
           "t.yaml:4:9: missing required key \"targets\" in static config");
    ERR_IS("scrape-configs:\n  - job-name: a\n    file-sd-configs: [{refresh-interval: 1m}]\n",
           "t.yaml:3:23: missing required key \"files\" in file-sd config");
}

TEST(both_spellings_and_duplicates)
{
    ERR_IS("scrape-configs:\n  - job-name: a\n    job_name: b\n",
           "t.yaml:3:5: both \"job-name\" and \"job_name\" given in scrape config (they are the "
           "same key)");
    ERR_IS("scrape_configs: []\nscrape-configs: []\n",
           "t.yaml:2:1: both \"scrape_configs\" and \"scrape-configs\" given in top level (they "
           "are the same key)");
    ERR_IS("scrape-configs:\n  - job-name: a\n    use-delta-profiles: true\n"
           "    use-delta-endpoints: true\n",
           "t.yaml:4:5: both \"use-delta-profiles\" and \"use-delta-endpoints\" given in scrape "
           "config (they are the same key)");
    ERR_IS("log-level: info\nlog-level: debug\n",
           "t.yaml:2:1: key \"log-level\" given twice in top level");
    ERR_IS("external-labels: {a: 1, a: 2}\n", "t.yaml:1:25: key \"a\" given twice");
    ERR_IS("workers: 2\nlimits: {workers: 3}\n",
           "t.yaml:1:1: workers given both at the top level and under limits");
}

TEST(durations_out_of_range)
{
    ERR_IS("scrape-configs:\n  - job-name: a\n    scrape-interval: 18446744073710ms\n",
           "t.yaml:3:22: duration \"18446744073710ms\" out of range (at most 292y)");
}

TEST(env_expansion)
{
    struct cfg *c;

    setenv("PROFLET_T_NODE", "node-7", 1);
    setenv("PROFLET_T_IV", "30s", 1);
    setenv("PROFLET_T_EMPTY", "", 1);
    unsetenv("PROFLET_T_UNSET");
    c = LOAD_OK("external-labels:\n"
                "  a: ${PROFLET_T_NODE}\n"
                "  b: \"x-${PROFLET_T_UNSET}-y\"\n"
                "  c: ${PROFLET_T_UNSET:-dflt}\n"
                "  d: ${PROFLET_T_EMPTY:-e}\n"
                "  e: cost $$5 and $1 and ${1} and $\n"
                "  ${PROFLET_T_NODE}: key-not-expanded\n"
                "scrape-configs:\n"
                "  - job-name: a\n"
                "    scrape-interval: ${PROFLET_T_IV}\n"
                "    kubernetes-sd-configs:\n"
                "      - selectors:\n"
                "          - role: pod\n"
                "            field: \"spec.nodeName=${PROFLET_T_NODE}\"\n");
    ASSERT_STR_EQ(c->external_labels[0].value, "node-7");
    ASSERT_STR_EQ(c->external_labels[1].value, "x--y");
    ASSERT_STR_EQ(c->external_labels[2].value, "dflt");
    ASSERT_STR_EQ(c->external_labels[3].value, "e");
    ASSERT_STR_EQ(c->external_labels[4].value, "cost $5 and $1 and ${1} and $");
    ASSERT_STR_EQ(c->external_labels[5].key, "${PROFLET_T_NODE}");
    ASSERT_U64_EQ(c->scrape[0].interval_ms, 30000);
    ASSERT_STR_EQ(c->scrape[0].sd.k8s_sd[0].selectors[0].field, "spec.nodeName=node-7");
    cfg_free(c);

    ERR_IS("log-level: ${PROFLET_T_NODE\n",
           "t.yaml:1:12: malformed \"${...}\" in value \"${PROFLET_T_NODE\": expected ${NAME} or "
           "${NAME:-default}");
    ERR_IS("log-level: ${X:-abc\n", "t.yaml:1:12: unterminated \"${\" in value \"${X:-abc\"");
    /* A value that expands to something invalid is reported where it was written. */
    ERR_IS("scrape-configs:\n  - job-name: a\n    scrape-interval: ${PROFLET_T_NODE}\n",
           "t.yaml:3:22: expected a duration like 15s, got \"node-7\"");
}

/* Without CONF_EXPAND_ENV (no --config.expand-env) the file is read
 * literally, as Prometheus reads it, and the load notes the `${`. */
TEST(env_expansion_is_opt_in)
{
    const char *yaml = "external-labels:\n"
                       "  a: ${PROFLET_T_NODE}\n"
                       "  e: cost $$5 and $1\n"
                       "scrape-configs:\n"
                       "  - job-name: a\n"
                       "    relabel-configs:\n"
                       "      - {source-labels: [x], regex: '(?P<name>.*)', target-label: y,\n"
                       "         replacement: '${name}$$1'}\n";
    const struct agent_config *c;
    struct conf_doc *doc = NULL;
    char err[512];

    setenv("PROFLET_T_NODE", "node-7", 1);
    ASSERT_EQ(agent_config_load_string(yaml, strlen(yaml), "t.yaml", 0, &doc, err, sizeof(err)), 0);
    c = agent_config(doc);
    ASSERT_STR_EQ(c->external_labels[0].value, "${PROFLET_T_NODE}");
    ASSERT_STR_EQ(c->external_labels[1].value, "cost $$5 and $1");
    ASSERT_STR_EQ(c->scrape[0].relabel[0].replacement, "${name}$$1");
    ASSERT_NOT_NULL(conf_doc_warning(doc, 0));
    ASSERT_NOT_NULL(strstr(conf_doc_warning(doc, 0), "--config.expand-env"));
    ASSERT_NULL(conf_doc_warning(doc, 1));
    conf_doc_unref(doc);
    /* no `${`: nothing to note */
    ASSERT_EQ(
        agent_config_load_string("log-level: info\n", 16, "t.yaml", 0, &doc, err, sizeof(err)), 0);
    ASSERT_NULL(conf_doc_warning(doc, 0));
    conf_doc_unref(doc);
}

TEST(env_expansion_keeps_positions)
{
    /* A long multi-line expansion must not shift later line/column numbers. */
    setenv("PROFLET_T_LONG", "line one\nline two\nline three, quite a bit longer than before", 1);
    ERR_IS("external-labels: {a: \"${PROFLET_T_LONG}\", b: \"${PROFLET_T_LONG}\"}\n"
           "scrape-configs:\n  - job-name: \"${PROFLET_T_LONG}\"\n    oops: 1\n",
           "t.yaml:4:5: unknown key \"oops\" in scrape config");
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
