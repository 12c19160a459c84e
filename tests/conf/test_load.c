/* SPDX-License-Identifier: Apache-2.0 */
/* conf/tree.c and conf/load.c through the program's schema: YAML syntax
 * errors, empty documents, the envelope key, files (caps, UTF-8, missing
 * ones), the error buffer and the dump that hides secrets. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_check.h"

TEST(yaml_syntax_error)
{
    ERR_STARTS("scrape-configs:\n  - job-name: a\n   bad: [\n", "t.yaml:3:");
    ERR_IS("a: b: c\n", "t.yaml:1:5: YAML syntax error: mapping values are not allowed in this "
                        "context");
    ERR_IS("x: [1, 2\n", "t.yaml:2:1: YAML syntax error: did not find expected ',' or ']' while "
                         "parsing a flow sequence");
    ERR_IS("a: &x 1\nb: *x\n", "t.yaml:2:4: YAML aliases (*x) are not supported");
    ERR_IS("a: 1\n---\nb: 2\n", "t.yaml:2:1: only one YAML document is allowed");
    ERR_IS("- 1\n", "t.yaml:1:1: expected a mapping, got a list");
    ERR_IS("? [a]\n: 1\n", "t.yaml:1:3: mapping keys must be plain strings");
}

TEST(empty_document_is_valid)
{
    struct cfg *c = LOAD_OK("");

    ASSERT_EQ(c->n_scrape, 0);
    ASSERT_STR_EQ(c->listen_address, "127.0.0.1:4100");
    cfg_free(c);
    c = LOAD_OK("# only a comment\n");
    ASSERT_EQ(c->limits.workers, 2);
    cfg_free(c);
    cfg_free(NULL);
}

TEST(pyroscope_configs_wrapper)
{
    struct cfg *c = LOAD_OK("pyroscopeConfigs:\n  log-level: warn\n  scrape-configs:\n"
                            "    - job-name: a\n");

    ASSERT_STR_EQ(c->log_level, "warn");
    ASSERT_EQ(c->n_scrape, 1);
    cfg_free(c);
    ERR_IS("pyroscopeConfigs: {}\nlog-level: info\n",
           "t.yaml:2:1: pyroscopeConfigs must be the only top-level key, but \"log-level\" is "
           "also given");
    ERR_IS("pyroscopeConfigs:\n  bogus: 1\n", "t.yaml:2:3: unknown key \"bogus\" in top level");
}

TEST(load_file)
{
    char path[] = "/tmp/proflet-cfg-XXXXXX", err[512];
    struct cfg *c = (struct cfg *)1;
    FILE *f;
    int fd = mkstemp(path), rc;

    ASSERT_GE(fd, 0);
    f = fdopen(fd, "w");
    fputs("scrape-configs:\n  - job-name: f\n    bogus: 1\n", f);
    fclose(f);
    rc = cfg_load_file(path, &c, err, sizeof(err));
    ASSERT_LT(rc, 0);
    ASSERT_NULL(c);
    ASSERT_NOT_NULL(strstr(err, ":3:5: unknown key \"bogus\" in scrape config"));
    ASSERT_EQ(strncmp(err, path, strlen(path)), 0);

    f = fopen(path, "w");
    fputs("scrape-configs:\n  - job-name: f\n", f);
    fclose(f);
    ASSERT_EQ(cfg_load_file(path, &c, err, sizeof(err)), 0);
    ASSERT_STR_EQ(source_of(c), path);
    ASSERT_STR_EQ(c->scrape[0].job_name, "f");
    cfg_free(c);

    /* Over the 4 MiB cap: refused before it is read, let alone parsed. */
    f = fopen(path, "w");
    for (int i = 0; i < (4 << 10) + 1; i++)
        fprintf(f, "#%01022d\n", 0);
    fclose(f);
    rc = cfg_load_file(path, &c, err, sizeof(err));
    ASSERT_LT(rc, 0);
    ASSERT_NOT_NULL(strstr(err, "config file larger than 4 MiB"));

    /* Under it, but so many jobs that the parsed form passes its cap: the
     * message names where. */
    f = fopen(path, "w");
    fputs("scrape-configs:\n", f);
    for (int i = 0; i < 40000; i++)
        fprintf(f, "  - {job-name: j%d, static-configs: [{targets: [a]}]}\n", i);
    fclose(f);
    rc = cfg_load_file(path, &c, err, sizeof(err));
    ASSERT_LT(rc, 0);
    ASSERT_NOT_NULL(strstr(err, ": config too large: its parsed form passes 256 MiB here"));
    ASSERT_EQ(strncmp(err + strlen(path), ":", 1), 0);
    ASSERT(atoi(err + strlen(path) + 1) > 2);
    unlink(path);

    /* A byte that is not UTF-8 is reported where it is. */
    ERR_IS("log-level: info\nexternal-labels: {a: \"x\xffy\"}\n",
           "t.yaml:2:24: invalid leading UTF-8 octet (byte 0xff)");
    ERR_IS("log-level: info\nexternal-labels: {a: \"\xc3\xa9\xff\"}\n",
           "t.yaml:2:24: invalid leading UTF-8 octet (byte 0xff)");

    rc = cfg_load_file("/nonexistent/proflet.yaml", &c, err, sizeof(err));
    ASSERT_EQ(rc, -ENOENT);
    ASSERT_STR_EQ(err, "/nonexistent/proflet.yaml: cannot open: No such file or directory");
}

TEST(error_buffer_truncation)
{
    char err[16];
    struct cfg *c;

    ASSERT_LT(cfg_load_string("bogus: 1\n", 9, "a-long-file-name.yaml", &c, err, sizeof(err)), 0);
    ASSERT_EQ(strlen(err), sizeof(err) - 1);
    ASSERT_LT(cfg_load_string("bogus: 1\n", 9, "x", &c, NULL, 0), 0);
}

/* The web UI's view of the configuration: everything as loaded, no secret. */
TEST(dump_hides_secrets)
{
    const char *y = "scrape-configs:\n  - job-name: shop\n    scrape-interval: 30s\n"
                    "    basic-auth: {username: bob, password: hunter2-scrape}\n"
                    "    static-configs: [{targets: [127.0.0.1:6060]}]\n"
                    "remote-write:\n  - url: http://127.0.0.1:4040\n"
                    "    bearer-token: tok-4f3a9\n"
                    "    headers: {X-Api-Key: key-77c1}\n";
    struct conf_doc *doc = NULL;
    struct buf b;
    char err[512];

    ASSERT_EQ(agent_config_load_string(y, strlen(y), "t.yaml", 0, &doc, err, sizeof(err)), 0);
    buf_init(&b, 1u << 20);
    agent_config_dump(doc, &b);
    ASSERT_NOT_NULL(strstr(b.data, "job-name: \"shop\""));
    ASSERT_NOT_NULL(strstr(b.data, "scrape-interval: 30000"));
    ASSERT_NOT_NULL(strstr(b.data, "username: \"bob\""));
    ASSERT_NOT_NULL(strstr(b.data, "127.0.0.1:4040"));
    ASSERT_NOT_NULL(strstr(b.data, "<secret>"));
    ASSERT_NULL(strstr(b.data, "hunter2"));
    ASSERT_NULL(strstr(b.data, "tok-4f3a9"));
    ASSERT_NULL(strstr(b.data, "key-77c1"));
    buf_done(&b);
    conf_doc_unref(doc);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
