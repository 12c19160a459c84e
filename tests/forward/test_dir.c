/* SPDX-License-Identifier: Apache-2.0 */
/* Directory sink: exact bytes and labels on disk, atomic names, path
 * sanitising, the size cap (oldest first) and the index rebuilt at start. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "common/workq.h"
#include "forward/forward.h"
#include "forward/internal.h"
#include "tcfg.h"
#include "test.h"
#include "tests/common/workq_test.h"

static char tmpdir[256];

static void mktmp(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/fwd-dir-XXXXXX");
    ASSERT_NOT_NULL(mkdtemp(tmpdir));
}

static void rm_rf(const char *path)
{
    char cmd[512];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    ASSERT_EQ(system(cmd), 0);
}

static struct fwd_profile *mkprof(const char *svc, const char *name, size_t len, int seed)
{
    struct labels ls = LABELS_INIT;
    uint8_t *d = malloc(len);

    for (size_t i = 0; i < len; i++)
        d[i] = (uint8_t)(i * 7 + (size_t)seed);
    ASSERT_EQ(labels_set(&ls, "service_name", svc), 0);
    ASSERT_EQ(labels_set(&ls, "__name__", name), 0);
    ASSERT_EQ(labels_set(&ls, "instance", "h:1"), 0);
    return fwd_profile_new(&ls, d, len, 1000000000, 2000000000);
}

static void dir_cfg(struct tcfg *c, struct cfg_remote *r, const char *url, uint64_t cap)
{
    memset(c, 0, sizeof(*c));
    fwd_cfg_remote_init(r);
    r->name = (char *)"local";
    r->url = (char *)url;
    r->protocol = CFG_PROTO_DIR;
    r->dir_max_bytes = cap;
    c->remote = r;
    c->n_remote = 1;
}

static void closed(void *ud)
{
    *(int *)ud = 1;
}

static void close_fwd(uv_loop_t *loop, struct fwd *f)
{
    int done = 0;

    fwd_close(f, 1000, closed, &done);
    ASSERT_EQ(uv_run(loop, UV_RUN_DEFAULT), 0);
    ASSERT_EQ(done, 1);
}

/* A forwarder without an HTTP client (directory sinks need none). */
static struct fwd *new_fwd(uv_loop_t *loop, struct workq *wq)
{
    struct fwd *f;
    char err[128] = "";
    int rc = fwd_new(&(struct fwd_opts){ .loop = loop, .work = wq }, &f, err, sizeof(err));

    if (rc < 0)
        test__fail(__FILE__, __LINE__, "fwd_new: %d %s", rc, err);
    return f;
}

static size_t count_files(const char *dir, const char *suffix, char names[][128], size_t max)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = 0;

    if (!d)
        return 0;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name), s = strlen(suffix);

        if (l > s && strcmp(e->d_name + l - s, suffix) == 0) {
            if (n < max)
                snprintf(names[n], 128, "%s", e->d_name);
            n++;
        }
    }
    closedir(d);
    return n;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *b;
    long n;

    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    b = malloc((size_t)n + 1);
    ASSERT_EQ(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return b;
}

TEST(dir_writes_exact_bytes_and_labels)
{
    uv_loop_t loop;
    struct workq *wq;
    struct tcfg c;
    struct cfg_remote r;
    char url[300], err[256], sub[512], names[8][128], path[1024];
    struct fwd *f;
    struct fwd_profile *p;
    size_t len;
    char *data;
    struct json_object *o, *l, *v;
    struct buf m;

    mktmp();
    ASSERT_EQ(uv_loop_init(&loop), 0);
    wq = test_workq_new(&loop, 4, 64);
    snprintf(url, sizeof(url), "file://%s/out", tmpdir);
    dir_cfg(&c, &r, url, 1 << 30);
    f = new_fwd(&loop, wq);
    ASSERT_EQ(tcfg_apply(f, &c, err, sizeof(err)), 0);
    /* Hostile components: a slash, a leading dot, "..". */
    p = mkprof("team/app", "..", 1000, 1);
    fwd_submit(f, p);
    ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);

    snprintf(sub, sizeof(sub), "%s/out/team_app/_.", tmpdir);
    ASSERT_EQ(count_files(sub, ".pb.gz", names, 8), 1);
    ASSERT_EQ(count_files(sub, ".json", names + 1, 7), 1);
    ASSERT_EQ(count_files(sub, ".tmp", names + 2, 6), 0);
    ASSERT(strstr(names[0], p->id) != NULL);
    snprintf(path, sizeof(path), "%s/%s", sub, names[0]);
    data = slurp(path, &len);
    ASSERT_NOT_NULL(data);
    ASSERT_EQ(len, p->len);
    ASSERT_EQ(memcmp(data, p->data, len), 0);
    free(data);
    snprintf(path, sizeof(path), "%s/%s", sub, names[1]);
    data = slurp(path, &len);
    o = json_tokener_parse(data);
    ASSERT_NOT_NULL(o);
    ASSERT(json_object_object_get_ex(o, "id", &v));
    ASSERT_STR_EQ(json_object_get_string(v), p->id);
    ASSERT(json_object_object_get_ex(o, "labels", &l));
    ASSERT(json_object_object_get_ex(l, "service_name", &v));
    ASSERT_STR_EQ(json_object_get_string(v), "team/app");
    ASSERT(json_object_object_get_ex(o, "start_ns", &v));
    ASSERT_EQ(json_object_get_int64(v), 1000000000);
    json_object_put(o);
    free(data);

    buf_init(&m, 1 << 20);
    fwd_metrics(f, &m);
    ASSERT(
        strstr(m.data, "proflet_remote_sent_profiles_total{endpoint=\"local\",kind=\"dir\"} 1\n"));
    ASSERT(strstr(m.data, "# TYPE proflet_remote_sent_profiles_total counter"));
    buf_done(&m);
    fwd_profile_unref(p);
    close_fwd(&loop, f);
    workq_free(wq);
    ASSERT_EQ(uv_loop_close(&loop), 0);
    rm_rf(tmpdir);
}

TEST(dir_cap_deletes_oldest_and_rebuilds_index)
{
    uv_loop_t loop;
    struct workq *wq;
    struct tcfg c;
    struct cfg_remote r;
    char url[300], err[256], sub[512], names[64][128];
    char ids[10][37];
    struct fwd *f;
    uint64_t one;

    mktmp();
    ASSERT_EQ(uv_loop_init(&loop), 0);
    wq = test_workq_new(&loop, 4, 64);
    snprintf(url, sizeof(url), "file://%s", tmpdir);
    snprintf(sub, sizeof(sub), "%s/svc/process_cpu", tmpdir);
    dir_cfg(&c, &r, url, 1ull << 30);
    f = new_fwd(&loop, wq);
    ASSERT_EQ(tcfg_apply(f, &c, err, sizeof(err)), 0);
    for (int i = 0; i < 10; i++) {
        struct fwd_profile *p = mkprof("svc", "process_cpu", 4000, i);

        memcpy(ids[i], p->id, 37);
        fwd_submit(f, p);
        fwd_profile_unref(p);
        ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
        usleep(2000); /* distinct millisecond names; ordering is by name */
    }
    ASSERT_EQ(count_files(sub, ".pb.gz", names, 64), 10);
    close_fwd(&loop, f);

    /* Restart with a cap of about 4 profiles: the scan finds 10 files and
     * deletes the 6 oldest. */
    {
        char path[1024];
        struct stat st;

        snprintf(path, sizeof(path), "%s/%s", sub, names[0]);
        ASSERT_EQ(stat(path, &st), 0);
        one = (uint64_t)st.st_size;
        names[0][strlen(names[0]) - 6] = 0;
        snprintf(path, sizeof(path), "%s/%s.json", sub, names[0]);
        ASSERT_EQ(stat(path, &st), 0);
        one += (uint64_t)st.st_size;
    }
    dir_cfg(&c, &r, url, one * 4 + one / 2);
    f = new_fwd(&loop, wq);
    ASSERT_EQ(tcfg_apply(f, &c, err, sizeof(err)), 0);
    ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ASSERT_EQ(count_files(sub, ".pb.gz", names, 64), 4);
    ASSERT_EQ(count_files(sub, ".json", names + 10, 54), 4);
    for (int i = 6; i < 10; i++) {
        bool found = false;

        for (int k = 0; k < 4; k++)
            found |= strstr(names[k], ids[i]) != NULL;
        ASSERT(found);
    }
    /* New writes keep evicting the oldest. */
    for (int i = 0; i < 3; i++) {
        struct fwd_profile *p = mkprof("svc", "process_cpu", 4000, 100 + i);

        memcpy(ids[i], p->id, 37);
        fwd_submit(f, p);
        fwd_profile_unref(p);
        ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
        usleep(2000);
    }
    ASSERT_EQ(count_files(sub, ".pb.gz", names, 64), 4);
    {
        int newest = 0;

        for (int k = 0; k < 4; k++) {
            for (int i = 0; i < 3; i++)
                newest += strstr(names[k], ids[i]) != NULL;
        }
        ASSERT_EQ(newest, 3);
        struct buf m;

        buf_init(&m, 1 << 20);
        fwd_metrics(f, &m);
        ASSERT(strstr(m.data, "proflet_remote_dir_files{endpoint=\"local\",kind=\"dir\"} 4\n"));
        buf_done(&m);
    }
    close_fwd(&loop, f);
    workq_free(wq);
    ASSERT_EQ(uv_loop_close(&loop), 0);
    rm_rf(tmpdir);
}

/* The value of label `name` in a written profile's .json ("" if absent). */
static void json_label(const char *jsonpath, const char *name, char *out, size_t outlen)
{
    size_t len;
    char *data = slurp(jsonpath, &len);
    struct json_object *o, *l, *v;

    ASSERT_NOT_NULL(data);
    ASSERT_NOT_NULL(o = json_tokener_parse(data));
    ASSERT(json_object_object_get_ex(o, "labels", &l));
    out[0] = 0;
    if (json_object_object_get_ex(l, name, &v))
        snprintf(out, outlen, "%s", json_object_get_string(v));
    json_object_put(o);
    free(data);
}

/* The endpoint applies the write rules its settings carry compiled (as
 * forward/config.c leaves them at load) and compiles none itself: here the
 * settings have the compiled rules only, no rule configuration. The
 * external labels, global then the endpoint's own (which win), are added
 * by the endpoint, before the rules see the labels. */
TEST(dir_uses_compiled_write_rules_and_adds_external_labels)
{
    uv_loop_t loop;
    struct workq *wq;
    struct tcfg c;
    struct cfg_remote r[2];
    struct relabel_cfg drop = { 0 };
    char *src[] = { (char *)"cluster", (char *)"__name__" };
    struct conf_kv global[] = { { (char *)"cluster", (char *)"prod" },
                                { (char *)"region", (char *)"eu" } };
    struct conf_kv own[] = { { (char *)"region", (char *)"us" } };
    char url[300], url2[300], err[256], sub[512], names[8][128], path[1024], val[64];
    struct fwd *f;
    struct fwd_profile *p;
    struct buf m;

    mktmp();
    ASSERT_EQ(uv_loop_init(&loop), 0);
    wq = test_workq_new(&loop, 4, 64);
    snprintf(url, sizeof(url), "file://%s/out", tmpdir);
    snprintf(url2, sizeof(url2), "file://%s/plain", tmpdir);
    /* r[1]: no rules, no labels of its own: the global ones still come. */
    dir_cfg(&c, &r[1], url2, 1 << 30);
    r[1].name = (char *)"plain";
    dir_cfg(&c, &r[0], url, 1 << 30);
    c.n_remote = 2;
    /* Drops memory profiles of cluster prod: matches only once the global
     * external label is in. */
    drop.source_labels = src;
    drop.n_source_labels = 2;
    drop.regex = (char *)"prod;memory";
    drop.action = (char *)"drop";
    ASSERT_EQ(
        relabel_rules_new(&drop, 1, RELABEL_SCHEME_UNSET, &r[0].write_rules, err, sizeof(err)), 0);
    c.external_labels = global;
    c.n_external_labels = 2;
    r[0].external_labels = own;
    r[0].n_external_labels = 1;
    f = new_fwd(&loop, wq);
    ASSERT_EQ(tcfg_apply(f, &c, err, sizeof(err)), 0);
    p = mkprof("app", "memory", 100, 1);
    fwd_submit(f, p);
    fwd_profile_unref(p);
    p = mkprof("app", "process_cpu", 100, 2);
    fwd_submit(f, p);
    fwd_profile_unref(p);
    ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);

    snprintf(sub, sizeof(sub), "%s/out/app/memory", tmpdir);
    ASSERT_EQ(count_files(sub, ".pb.gz", names, 8), 0);
    snprintf(sub, sizeof(sub), "%s/out/app/process_cpu", tmpdir);
    ASSERT_EQ(count_files(sub, ".json", names, 8), 1);
    snprintf(path, sizeof(path), "%s/%s", sub, names[0]);
    json_label(path, "cluster", val, sizeof(val));
    ASSERT_STR_EQ(val, "prod");
    json_label(path, "region", val, sizeof(val));
    ASSERT_STR_EQ(val, "us");
    snprintf(sub, sizeof(sub), "%s/plain/app/memory", tmpdir);
    ASSERT_EQ(count_files(sub, ".json", names, 8), 1);
    snprintf(path, sizeof(path), "%s/%s", sub, names[0]);
    json_label(path, "cluster", val, sizeof(val));
    ASSERT_STR_EQ(val, "prod");
    json_label(path, "region", val, sizeof(val));
    ASSERT_STR_EQ(val, "eu");
    buf_init(&m, 1 << 20);
    fwd_metrics(f, &m);
    ASSERT(strstr(m.data, "proflet_remote_dropped_profiles_total{endpoint=\"local\",kind=\"dir\","
                          "reason=\"write_relabel\"} 1\n"));
    buf_done(&m);
    close_fwd(&loop, f);
    relabel_rules_free(r[0].write_rules);
    workq_free(wq);
    ASSERT_EQ(uv_loop_close(&loop), 0);
    rm_rf(tmpdir);
}

TEST(dir_relative_url_and_reload_keeps_endpoint)
{
    uv_loop_t loop;
    struct workq *wq;
    struct tcfg c;
    struct cfg_remote r, bad;
    char err[256], cwd[512], names[4][128];
    struct fwd *f;
    struct fwd_profile *p;

    mktmp();
    ASSERT_NOT_NULL(getcwd(cwd, sizeof(cwd)));
    ASSERT_EQ(chdir(tmpdir), 0);
    ASSERT_EQ(uv_loop_init(&loop), 0);
    wq = test_workq_new(&loop, 4, 64);
    dir_cfg(&c, &r, "file://./rel", 1 << 30);
    f = new_fwd(&loop, wq);
    ASSERT_EQ(tcfg_apply(f, &c, err, sizeof(err)), 0);
    ASSERT_EQ(tcfg_apply(f, &c, err, sizeof(err)), 0); /* unchanged: kept */
    p = mkprof("a", "memory", 10, 3);
    fwd_submit(f, p);
    fwd_profile_unref(p);
    ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ASSERT_EQ(count_files("rel/a/memory", ".pb.gz", names, 4), 1);
    /* A bad url is refused and leaves the running endpoint alone (new
     * settings: the running endpoint reads its own in place). */
    bad = r;
    bad.url = (char *)"http-not-a-file";
    bad.protocol = CFG_PROTO_DIR;
    c.remote = &bad;
    ASSERT_LT(tcfg_apply(f, &c, err, sizeof(err)), 0);
    c.remote = &r;
    ASSERT(strstr(err, "file://") != NULL);
    close_fwd(&loop, f);
    workq_free(wq);
    ASSERT_EQ(uv_loop_close(&loop), 0);
    ASSERT_EQ(chdir(cwd), 0);
    rm_rf(tmpdir);
}

/* A write the work queue cancels before it starts (the agent's shutdown
 * cancels the backlog) is still done: the file is written, nothing dropped. */
TEST(dir_cancelled_write_is_done_later)
{
    uv_loop_t loop;
    struct workq *wq;
    struct tcfg c;
    struct cfg_remote r;
    char url[300], err[256], sub[512], names[4][128];
    struct fwd *f;
    struct fwd_profile *p;
    struct buf m;
    int blocker;

    mktmp();
    ASSERT_EQ(uv_loop_init(&loop), 0);
    wq = test_workq_new(&loop, 1, 64);
    snprintf(url, sizeof(url), "file://%s", tmpdir);
    dir_cfg(&c, &r, url, 1 << 30);
    f = new_fwd(&loop, wq);
    ASSERT_EQ(tcfg_apply(f, &c, err, sizeof(err)), 0);
    ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0); /* the start-up scan */
    ASSERT_EQ(tblocker_start(wq, &blocker), 0);
    p = mkprof("svc", "cpu", 100, 5);
    fwd_submit(f, p);
    fwd_profile_unref(p);
    ASSERT_EQ(workq_pending(wq), 2);
    workq_cancel_backlog(wq);
    ASSERT_EQ(workq_pending(wq), 1); /* the write was cancelled */
    tblocker_release();
    ASSERT_EQ(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ASSERT_EQ(blocker, 1);
    snprintf(sub, sizeof(sub), "%s/svc/cpu", tmpdir);
    ASSERT_EQ(count_files(sub, ".pb.gz", names, 4), 1);
    buf_init(&m, 1 << 20);
    fwd_metrics(f, &m);
    ASSERT(
        strstr(m.data, "proflet_remote_sent_profiles_total{endpoint=\"local\",kind=\"dir\"} 1\n"));
    ASSERT(strstr(m.data, "proflet_remote_requests_total{endpoint=\"local\",kind=\"dir\"} 1\n"));
    ASSERT(strstr(m.data, "proflet_remote_dropped_profiles_total{endpoint=\"local\",kind=\"dir\","
                          "reason=\"io_error\"} 0\n"));
    buf_done(&m);
    close_fwd(&loop, f);
    workq_free(wq);
    ASSERT_EQ(uv_loop_close(&loop), 0);
    rm_rf(tmpdir);
}

TEST(path_component_sanitised)
{
    char out[16];

    fwd__path_component("../etc/passwd", out, sizeof(out));
    ASSERT_STR_EQ(out, "_._etc_passwd");
    fwd__path_component("", out, sizeof(out));
    ASSERT_STR_EQ(out, "_");
    fwd__path_component(".hidden", out, sizeof(out));
    ASSERT_STR_EQ(out, "_hidden");
    fwd__path_component("aaaaaaaaaaaaaaaaaaaaaaaaaaaaa", out, sizeof(out));
    ASSERT_EQ(strlen(out), 15);
    fwd__path_component("aaaaaaaaaaaaa\xc3\xa9\xc3\xa9", out, sizeof(out));
    ASSERT_STR_EQ(out, "aaaaaaaaaaaaa");
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
