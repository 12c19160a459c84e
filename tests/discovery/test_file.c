/* SPDX-License-Identifier: Apache-2.0 */
/* file_sd: parsing (JSON, YAML, errors) and the provider on a loop (globs,
 * change events, a bad file keeping its last good targets, removal). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "discovery/internal.h"
#include "tests/discovery/recorder.h"

TEST(parse_json_and_yaml)
{
    const char *js = "[{\"targets\": [\"a:1\", \"b:2\"], \"labels\": {\"env\": \"dev\", "
                     "\"__address__\": \"x\"}}, {\"targets\": []}, {\"labels\": {\"k\": \"v\"}}]";
    const char *ym = "- targets: ['c:3']\n  labels:\n    port: 8080\n    team: \"x y\"\n";
    struct disc__file_group *g;
    size_t n;
    char err[256];

    ASSERT_EQ(disc__file_parse(js, strlen(js), false, "/p/t.json", &g, &n, err, sizeof(err)), 0);
    ASSERT_EQ(n, 3);
    ASSERT_EQ(g[0].n_targets, 2);
    ASSERT_STR_EQ(labels_get(&g[0].targets[0], "__address__"), "a:1"); /* target wins */
    ASSERT_STR_EQ(labels_get(&g[0].targets[1], "__address__"), "b:2");
    ASSERT_STR_EQ(labels_get(&g[0].targets[0], "env"), "dev");
    ASSERT_STR_EQ(labels_get(&g[0].targets[0], "__meta_filepath"), "/p/t.json");
    ASSERT_EQ(g[0].targets[0].n, 3);
    ASSERT_EQ(g[1].n_targets, 0);
    ASSERT_EQ(g[2].n_targets, 0);
    disc__file_groups_free(g, n);
    ASSERT_EQ(disc__file_parse(ym, strlen(ym), true, "/p/t.yml", &g, &n, err, sizeof(err)), 0);
    ASSERT_EQ(n, 1);
    ASSERT_STR_EQ(labels_get(&g[0].targets[0], "__address__"), "c:3");
    ASSERT_STR_EQ(labels_get(&g[0].targets[0], "port"), "8080");
    ASSERT_STR_EQ(labels_get(&g[0].targets[0], "team"), "x y");
    disc__file_groups_free(g, n);
    ASSERT_EQ(disc__file_parse("", 0, true, "/p/e.yml", &g, &n, err, sizeof(err)), 0);
    ASSERT_EQ(n, 0);
}

TEST(parse_errors)
{
    const char *bad[] = {
        "[{\"targets\": [\"a\"]",                         /* truncated */
        "{\"targets\": []}",                              /* not a list */
        "[{\"targets\": [1]}]",                           /* target not a string */
        "[{\"targets\": [], \"labels\": {\"\": \"v\"}}]", /* empty label name */
        "[{\"targets\": [], \"extra\": 1}]",              /* unknown field */
        "[] []",                                          /* trailing data */
    };
    struct disc__file_group *g;
    size_t n;
    char err[256];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        ASSERT_LT(
            disc__file_parse(bad[i], strlen(bad[i]), false, "f.json", &g, &n, err, sizeof(err)), 0);
        ASSERT_NULL(g);
        ASSERT_GT(strlen(err), 0);
    }
    ASSERT_LT(disc__file_parse("- a: [\n", 7, true, "f.yml", &g, &n, err, sizeof(err)), 0);
    ASSERT_NOT_NULL(strstr(err, "line"));
    ASSERT_LT(disc__file_parse("a: &x 1\nb: *x\n", 14, true, "f.yml", &g, &n, err, sizeof(err)), 0);
}

/* A NUL in a label name, value or target would cut the C string that carries
 * it (merging groups that differ only after it): refused with its position,
 * in JSON (\u0000 or a raw NUL) and in YAML ("\0"). */
TEST(parse_refuses_nul)
{
    static const struct {
        const char *text;
        size_t len;
        bool yaml;
        const char *where;
    } bad[] = {
        { "[{\"targets\": [\"a:1\"], \"labels\": {\"v\": \"\\u0000nul\"}}]", 0, false,
          "line 1 column 40" },
        { "[{\"targets\": [\"a:1\"],\n  \"labels\": {\"v\": \"x\\u0000\"}}]", 0, false,
          "line 2 column 21" },
        { "[{\"targets\": [\"a:1\"], \"labels\": {\"k\\u0000x\": \"v\"}}]", 0, false,
          "line 1 column 36" },
        { "[{\"targets\": [\"a:1\\u0000\"]}]", 0, false, "line 1 column 19" },
        { "[{\"targets\": [\"a:1\"], \"labels\": {\"v\": \"a\0b\"}}]", 46, false,
          "line 1 column 41" },
        { "- targets: ['a:1']\n  labels:\n    v: \"\\0nul\"\n", 0, true, "line 3 column 8" },
        { "- targets: [\"a:1\\0\"]\n", 0, true, "line 1 column 13" },
        { "- targets: ['a:1']\n  labels:\n    \"k\\0\": v\n", 0, true, "line 3 column 5" },
    };
    struct disc__file_group *g;
    size_t n;
    char err[256];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t len = bad[i].len ? bad[i].len : strlen(bad[i].text);

        err[0] = '\0';
        g = NULL;
        ASSERT_EQ(disc__file_parse(bad[i].text, len, bad[i].yaml, "f", &g, &n, err, sizeof(err)),
                  -EINVAL);
        ASSERT_NULL(g);
        ASSERT_NOT_NULL(strstr(err, "NUL"));
        ASSERT_NOT_NULL(strstr(err, bad[i].where));
    }

    /* An escaped backslash before "u0000" is text, not a NUL; nor is a
     * single-quoted YAML "\0". */
    const char *js =
        "[{\"targets\": [\"a:1\"], \"labels\": {\"v\": \"\\\\u0000\", \"w\": \"\\\"\\\\\"}}]";
    ASSERT_EQ(disc__file_parse(js, strlen(js), false, "f", &g, &n, err, sizeof(err)), 0);
    ASSERT_EQ(n, 1);
    ASSERT_STR_EQ(labels_get(&g[0].targets[0], "v"), "\\u0000");
    ASSERT_STR_EQ(labels_get(&g[0].targets[0], "w"), "\"\\");
    disc__file_groups_free(g, n);
    const char *ym = "- targets: ['a:1']\n  labels: {v: '\\0nul'}\n";
    ASSERT_EQ(disc__file_parse(ym, strlen(ym), true, "f", &g, &n, err, sizeof(err)), 0);
    ASSERT_STR_EQ(labels_get(&g[0].targets[0], "v"), "\\0nul");
    disc__file_groups_free(g, n);
}

static void write_file(const char *path, const char *s)
{
    char tmp[512];
    FILE *f;

    /* Replace atomically, as config management tools do. */
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    ASSERT_NOT_NULL(f);
    fputs(s, f);
    fclose(f);
    ASSERT_EQ(rename(tmp, path), 0);
}

static char last_err[512];

static void on_err(const char *job, const char *prov, const char *msg, void *ud)
{
    (*(int *)ud)++;
    snprintf(last_err, sizeof(last_err), "%s", msg);
}

TEST(provider_watches_files)
{
    uv_loop_t loop;
    struct rec r = { 0 };
    struct tcfg c = { 0 };
    struct tjob sc = { 0 };
    struct disc_file_cfg fsd = { 0 };
    struct disc_manager *m;
    char dir[] = "/tmp/disc-file-XXXXXX", glob1[256], a[256], b[256], src[300], err[256];
    char *files[1];
    int errors = 0;
    struct rec_src *s;

    ASSERT_NOT_NULL(mkdtemp(dir));
    snprintf(glob1, sizeof(glob1), "%s/*.json", dir);
    snprintf(a, sizeof(a), "%s/a.json", dir);
    snprintf(b, sizeof(b), "%s/b.json", dir);
    write_file(a, "[{\"targets\": [\"h1:1\"], \"labels\": {\"g\": \"0\"}},"
                  " {\"targets\": [\"h2:2\", \"h3:3\"]}]");
    files[0] = glob1;
    fsd.files = files;
    fsd.n_files = 1;
    fsd.refresh_interval_ms = 300000; /* only change events can explain fast updates */
    sc.job_name = "f";
    sc.sd.file_sd = &fsd;
    sc.sd.n_file_sd = 1;
    c.scrape = &sc;
    c.n_scrape = 1;
    uv_loop_init(&loop);
    r.loop = &loop;
    m = rec_manager_new((struct disc_manager_opts){ .loop = &loop,
                                                    .on_update = rec_cb,
                                                    .update_ud = &r,
                                                    .on_error = on_err,
                                                    .error_ud = &errors });
    ASSERT_EQ(tcfg_apply(m, &c, err, sizeof(err)), 0);
    RUN_UNTIL(&loop, disc_manager_ready(m), 5000);
    ASSERT_TRUE(disc_manager_ready(m));
    ASSERT_EQ(r.n, 2);
    snprintf(src, sizeof(src), "%s:1", a);
    s = rec_find(&r, "f", src);
    ASSERT_NOT_NULL(s);
    ASSERT_EQ(s->n, 2);
    ASSERT_STR_EQ(labels_get(&s->t[1], "__address__"), "h3:3");
    ASSERT_STR_EQ(labels_get(&s->t[1], "__meta_filepath"), a);

    /* A new file matching the glob. */
    write_file(b, "[{\"targets\": [\"b1:1\"]}]");
    snprintf(src, sizeof(src), "%s:0", b);
    RUN_UNTIL(&loop, rec_find(&r, "f", src) != NULL, 5000);
    ASSERT_NOT_NULL(rec_find(&r, "f", src));

    /* A bad file keeps its last good targets and reports the error. */
    write_file(a, "[{\"targets\": [\"h1:1\"]");
    RUN_UNTIL(&loop, errors > 0, 5000);
    ASSERT_GT(errors, 0);
    ASSERT_EQ(r.n, 3);
    snprintf(src, sizeof(src), "%s:1", a);
    ASSERT_NOT_NULL(rec_find(&r, "f", src));

    /* Fixed with one group fewer: the second group goes away. */
    write_file(a, "[{\"targets\": [\"h9:9\"]}]");
    RUN_UNTIL(&loop, rec_find(&r, "f", src) == NULL, 5000);
    ASSERT_NULL(rec_find(&r, "f", src));
    snprintf(src, sizeof(src), "%s:0", a);
    ASSERT_STR_EQ(labels_get(&rec_find(&r, "f", src)->t[0], "__address__"), "h9:9");

    /* A NUL in a label value refuses the file, named with the position,
     * and the last good targets stay as they were, value included. */
    {
        int before = errors;

        write_file(a, "[{\"targets\": [\"h9:9\"], \"labels\": {\"v\": \"\\u0000nul\"}}]");
        RUN_UNTIL(&loop, errors > before, 5000);
        ASSERT_GT(errors, before);
        ASSERT_NOT_NULL(strstr(last_err, a));
        ASSERT_NOT_NULL(strstr(last_err, "NUL"));
        ASSERT_NOT_NULL(strstr(last_err, "line 1 column 41"));
        s = rec_find(&r, "f", src);
        ASSERT_NOT_NULL(s);
        ASSERT_EQ(s->n, 1);
        ASSERT_NULL(labels_get(&s->t[0], "v"));
    }

    /* Removing a file removes its groups. */
    ASSERT_EQ(unlink(b), 0);
    snprintf(src, sizeof(src), "%s:0", b);
    RUN_UNTIL(&loop, rec_find(&r, "f", src) == NULL, 5000);
    ASSERT_NULL(rec_find(&r, "f", src));
    ASSERT_EQ(r.n, 1);
    {
        struct buf mb;

        buf_init(&mb, 1 << 20);
        disc_manager_metrics(m, &mb);
        const char *line = strstr(mb.data, "proflet_discovery_errors_total{job=\"f\","
                                           "provider=\"file\",kind=\"file_parse\"} ");

        /* One for the truncated file, one or more for the NUL (a change
         * event may bring a second read of the same bad file). */
        ASSERT_NOT_NULL(line);
        ASSERT_GE(strtol(strchr(line, '}') + 2, NULL, 10), 2);
        ASSERT_EQ(strtol(strchr(line, '}') + 2, NULL, 10), errors);
        buf_done(&mb);
    }
    close_and_check(&loop, m);
    unlink(a);
    rmdir(dir);
    rec_free(&r);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
