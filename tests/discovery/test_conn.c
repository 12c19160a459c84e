/* SPDX-License-Identifier: Apache-2.0 */
/* Connection settings: kubeconfig (current context, CA/cert/key data to
 * temporary files, token), in-cluster (env, service account dir, own
 * namespace), token re-reading after a 401, base64. No network. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/workq.h"
#include "discovery/internal.h"
#include "tests/harness/test.h"
#include "tests/harness/test_loop.h"

static char *slurp(const char *path)
{
    static char b[4096];
    FILE *f = fopen(path, "r");
    size_t n;

    ASSERT_NOT_NULL(f);
    n = fread(b, 1, sizeof(b) - 1, f);
    fclose(f);
    b[n] = '\0';
    return b;
}

/* Runs `loop` until the token in use is `want` (bounded: 2 s). */
static const char *token_after_reread(uv_loop_t *loop, struct k8s_conn *c, const char *want)
{
    const char *t;

    RUN_UNTIL(loop, (t = net_secret_get(c->bearer)) && strcmp(t, want) == 0, 2000);
    return t;
}

static void put(const char *path, const char *s)
{
    FILE *f = fopen(path, "w");

    ASSERT_NOT_NULL(f);
    fputs(s, f);
    fclose(f);
}

TEST(kubeconfig_current_context)
{
    char dir[] = "/tmp/disc-kc-XXXXXX", kc[256], tf[256], err[256], ca[256];
    struct disc_k8s_cfg sd = { 0 };
    struct k8s_conn c;
    uv_loop_t loop;
    struct workq *q;

    ASSERT_EQ(uv_loop_init(&loop), 0);
    ASSERT_EQ(workq_new(&(struct workq_opts){ .loop = &loop, .max_inflight = 1, .max_backlog = 8 },
                        &q, err, sizeof(err)),
              0);
    ASSERT_NOT_NULL(mkdtemp(dir));
    snprintf(kc, sizeof(kc), "%s/config", dir);
    snprintf(tf, sizeof(tf), "%s/tok", dir);
    put(tf, "file-token\n");
    /* "LS0tQ0EtLS0K" is base64 of "---CA---\n"; "Y2VydA==" of "cert". */
    put(kc, "apiVersion: v1\n"
            "kind: Config\n"
            "current-context: prod\n"
            "clusters:\n"
            "- name: dev\n"
            "  cluster: {server: 'https://dev:6443'}\n"
            "- name: prod-cluster\n"
            "  cluster:\n"
            "    server: https://prod.example:6443/\n"
            "    certificate-authority-data: LS0tQ0Et\n      LS0K\n"
            "    tls-server-name: kubernetes\n"
            "contexts:\n"
            "- name: dev\n"
            "  context: {cluster: dev, user: dev}\n"
            "- name: prod\n"
            "  context: {cluster: prod-cluster, user: admin}\n"
            "users:\n"
            "- name: admin\n"
            "  user:\n"
            "    tokenFile: tok\n"
            "    client-certificate-data: Y2VydA==\n"
            "    client-key: keys/admin.key\n");
    sd.role = "pod";
    sd.kubeconfig_file = kc;
    ASSERT_EQ(disc__k8s_conn_init(&c, &loop, q, &sd, err, sizeof(err)), 0);
    ASSERT_STR_EQ(c.server, "https://prod.example:6443");
    ASSERT_STR_EQ(c.server_name, "kubernetes");
    ASSERT_NOT_NULL(c.ca_file);
    snprintf(ca, sizeof(ca), "%s", c.ca_file);
    ASSERT_STR_EQ(slurp(c.ca_file), "---CA---\n");
    ASSERT_STR_EQ(slurp(c.cert_file), "cert");
    {
        char want[300];

        snprintf(want, sizeof(want), "%s/keys/admin.key", dir);
        ASSERT_STR_EQ(c.key_file, want);
    }
    ASSERT_STR_EQ(c.token_file, tf);
    ASSERT_STR_EQ(net_secret_get(c.bearer), "file-token");
    ASSERT_FALSE(c.insecure);
    disc__k8s_conn_done(&c);
    ASSERT_NE(access(ca, F_OK), 0); /* temporary files removed */
    /* A missing context is an error with a message. */
    put(kc, "current-context: nope\ncontexts: []\n");
    ASSERT_LT(disc__k8s_conn_init(&c, &loop, q, &sd, err, sizeof(err)), 0);
    ASSERT_NOT_NULL(strstr(err, "nope"));
    unlink(kc);
    unlink(tf);
    rmdir(dir);
    workq_free(q);
    ASSERT_EQ(uv_loop_close(&loop), 0);
}

TEST(in_cluster_and_token_rereading)
{
    char dir[] = "/tmp/disc-sa-XXXXXX", p[256], err[256];
    struct disc_k8s_cfg sd = { 0 };
    struct k8s_conn c;
    uv_loop_t loop;
    struct workq *q;

    ASSERT_EQ(uv_loop_init(&loop), 0);
    ASSERT_EQ(workq_new(&(struct workq_opts){ .loop = &loop, .max_inflight = 1, .max_backlog = 8 },
                        &q, err, sizeof(err)),
              0);
    ASSERT_NOT_NULL(mkdtemp(dir));
    snprintf(p, sizeof(p), "%s/token", dir);
    put(p, "t1\n");
    snprintf(p, sizeof(p), "%s/ca.crt", dir);
    put(p, "ca");
    snprintf(p, sizeof(p), "%s/namespace", dir);
    put(p, "team-a");
    sd.role = "pod";
    sd.service_account_dir = dir;
    sd.own_namespace = true;
    unsetenv("KUBERNETES_SERVICE_HOST");
    ASSERT_LT(disc__k8s_conn_init(&c, &loop, q, &sd, err, sizeof(err)), 0);
    ASSERT_NOT_NULL(strstr(err, "KUBERNETES_SERVICE_HOST"));
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    ASSERT_EQ(disc__k8s_conn_init(&c, &loop, q, &sd, err, sizeof(err)), 0);
    ASSERT_STR_EQ(c.server, "https://[fd00::1]:443");
    ASSERT_STR_EQ(net_secret_get(c.bearer), "t1");
    ASSERT_STR_EQ(c.own_namespace, "team-a");
    snprintf(p, sizeof(p), "%s/ca.crt", dir);
    ASSERT_STR_EQ(c.ca_file, p);
    /* After a 401 the token is re-read off the loop; until the read lands
     * the old one is used. */
    snprintf(p, sizeof(p), "%s/token", dir);
    put(p, "t2\n");
    ASSERT_STR_EQ(net_secret_get(c.bearer), "t1"); /* not due yet: no re-read */
    net_secret_expire(c.bearer);
    ASSERT_STR_EQ(token_after_reread(&loop, &c, "t2"), "t2");
    /* An empty file keeps the old token, and says why. */
    put(p, "  \n");
    net_secret_expire(c.bearer);
    net_secret_get(c.bearer);
    RUN_UNTIL(&loop, net_secret_error(c.bearer), 2000);
    ASSERT_NOT_NULL(net_secret_error(c.bearer));
    ASSERT_NOT_NULL(strstr(net_secret_error(c.bearer), "empty"));
    ASSERT_STR_EQ(net_secret_get(c.bearer), "t2");
    disc__k8s_conn_done(&c);
    uv_run(&loop, UV_RUN_DEFAULT);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    snprintf(p, sizeof(p), "rm -rf %s", dir);
    ASSERT_EQ(system(p), 0);
    workq_free(q);
    ASSERT_EQ(uv_loop_close(&loop), 0);
}

TEST(base64)
{
    unsigned char *o;
    size_t n;

    ASSERT_EQ(disc__base64_decode("aGVs\nbG8=", 9, &o, &n), 0);
    ASSERT_EQ(n, 5);
    ASSERT(memcmp(o, "hello", 5) == 0);
    free(o);
    ASSERT_LT(disc__base64_decode("a$b", 3, &o, &n), 0);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
