/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes connection settings (docs/design.md "Kubernetes discovery").
 *
 * Three ways (the combinations Prometheus rejects are refused when the
 * file is loaded, discovery/config.c):
 *  - api-server: URL plus the piece's HTTP settings (bearer token or token
 *    file, basic auth, tls-config, proxy);
 *  - kubeconfig-file: the current context's cluster (server, CA file or
 *    base64 data, insecure-skip-tls-verify, tls-server-name) and user
 *    (token, tokenFile, client certificate/key as files or data, basic
 *    auth). Base64 data goes to 0600 temporary files removed on done;
 *  - in-cluster: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT
 *    with the service account's token (re-read), CA and namespace, from
 *    service_account_dir (default /var/run/secrets/kubernetes.io/serviceaccount).
 *
 * Threading: loop thread; token and password files are re-read off it
 * (net_secret). Ownership: struct k8s_conn owns all its strings. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "discovery/internal.h"

#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define TOKEN_MAX (64 * 1024)
#define KUBECONFIG_MAX (4 << 20)
#define TOKEN_TTL_MS 50000

static char *xstrdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

int disc__base64_decode(const char *in, size_t n, unsigned char **out, size_t *out_len)
{
    unsigned char *o = malloc(n / 4 * 3 + 4);
    unsigned acc = 0;
    int bits = 0;
    size_t k = 0;

    if (!o)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        char c = in[i];
        int v;

        if (c >= 'A' && c <= 'Z')
            v = c - 'A';
        else if (c >= 'a' && c <= 'z')
            v = c - 'a' + 26;
        else if (c >= '0' && c <= '9')
            v = c - '0' + 52;
        else if (c == '+')
            v = 62;
        else if (c == '/')
            v = 63;
        else if (c == '=' || c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        else {
            free(o);
            return -EINVAL;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[k++] = (unsigned char)(acc >> bits);
        }
    }
    *out = o;
    *out_len = k;
    return 0;
}

/* Writes base64-decoded data to a 0600 temporary file; the path goes into a
 * free slot of tmp_files. */
static int write_tmp(struct k8s_conn *c, const char *b64, char **path_out, char *err, size_t errlen)
{
    unsigned char *data;
    size_t n, slot;
    char path[] = "/tmp/proflet-kube-XXXXXX";
    int fd, rc;

    for (slot = 0; slot < 3 && c->tmp_files[slot]; slot++)
        ;
    if (slot == 3)
        return -EINVAL;
    rc = disc__base64_decode(b64, strlen(b64), &data, &n);
    if (rc < 0) {
        snprintf(err, errlen, "kubeconfig: invalid base64 data");
        return rc;
    }
    fd = mkstemp(path);
    if (fd < 0) {
        rc = -errno;
        free(data);
        snprintf(err, errlen, "kubeconfig: temporary file: %s", strerror(-rc));
        return rc;
    }
    if (write(fd, data, n) != (ssize_t)n) {
        rc = -EIO;
        close(fd);
        unlink(path);
        free(data);
        snprintf(err, errlen, "kubeconfig: writing temporary file failed");
        return rc;
    }
    close(fd);
    free(data);
    c->tmp_files[slot] = strdup(path);
    *path_out = strdup(path);
    if (!c->tmp_files[slot] || !*path_out)
        return -ENOMEM;
    return 0;
}

/* Finds `name` in a kubeconfig list of {name, <field>: {...}}. */
static json_object *named(json_object *list, const char *name, const char *field)
{
    size_t n;

    if (!list || !json_object_is_type(list, json_type_array) || !name)
        return NULL;
    n = json_object_array_length(list);
    for (size_t i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(list, i);
        const char *nm = disc__jstr(e, "name", NULL);

        if (nm && strcmp(nm, name) == 0)
            return disc__jget(e, field);
    }
    return NULL;
}

/* A path relative to the kubeconfig's directory. */
static char *resolve(const char *dir, const char *p)
{
    char *out;
    size_t n;

    if (!p)
        return NULL;
    if (p[0] == '/')
        return strdup(p);
    n = strlen(dir) + strlen(p) + 2;
    out = malloc(n);
    if (out)
        snprintf(out, n, "%s/%s", dir, p);
    return out;
}

/* Reads and parses `file` and finds its current context's cluster (with a
 * server) and user (NULL if none). `*root` owns both; `*dir` (malloc'd) is
 * the file's directory, for the relative paths it names. */
static int kubeconfig_read(const char *file, json_object **root, json_object **cluster,
                           json_object **user, char **dir, char *err, size_t errlen)
{
    json_object *ctx;
    char *data = NULL, *dircopy, yerr[256];
    const char *cur;
    size_t len;
    int rc;

    *root = NULL;
    *dir = NULL;
    rc = fsutil_read_small(file, KUBECONFIG_MAX, &data, &len);
    if (rc < 0) {
        snprintf(err, errlen, "kubeconfig %s: %s", file, strerror(-rc));
        return rc;
    }
    rc = disc__yaml_to_json(data, len, root, yerr, sizeof(yerr));
    free(data);
    if (rc < 0) {
        snprintf(err, errlen, "kubeconfig %s: %s", file, yerr);
        return rc;
    }
    cur = disc__jstr(*root, "current-context", NULL);
    ctx = named(disc__jget(*root, "contexts"), cur, "context");
    if (!ctx) {
        snprintf(err, errlen, "kubeconfig %s: current-context %s not found", file,
                 cur ? cur : "(unset)");
        rc = -EINVAL;
        goto fail;
    }
    *cluster = named(disc__jget(*root, "clusters"), disc__jstr(ctx, "cluster", NULL), "cluster");
    *user = named(disc__jget(*root, "users"), disc__jstr(ctx, "user", NULL), "user");
    if (!*cluster || !disc__jstr(*cluster, "server", NULL)) {
        snprintf(err, errlen, "kubeconfig %s: cluster of context %s has no server", file, cur);
        rc = -EINVAL;
        goto fail;
    }
    if (!(dircopy = strdup(file)) || !(*dir = strdup(dirname(dircopy)))) {
        free(dircopy);
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto fail;
    }
    free(dircopy);
    return 0;
fail:
    json_object_put(*root);
    *root = NULL;
    return rc;
}

static int load_kubeconfig(struct k8s_conn *c, const char *file, char *err, size_t errlen)
{
    json_object *root, *cluster, *user;
    char *dir;
    const char *v;
    int rc;

    rc = kubeconfig_read(file, &root, &cluster, &user, &dir, err, errlen);
    if (rc < 0)
        return rc;
    c->server = strdup(disc__jstr(cluster, "server", NULL));
    if ((v = disc__jstr(cluster, "certificate-authority-data", NULL)) != NULL)
        rc = write_tmp(c, v, &c->ca_file, err, errlen);
    else
        c->ca_file = resolve(dir, disc__jstr(cluster, "certificate-authority", NULL));
    if (rc < 0)
        goto out;
    v = disc__jstr(cluster, "insecure-skip-tls-verify", NULL);
    c->insecure = v && strcmp(v, "true") == 0;
    c->server_name = xstrdup(disc__jstr(cluster, "tls-server-name", NULL));
    c->proxy_url = xstrdup(disc__jstr(cluster, "proxy-url", NULL));
    if (user) {
        if ((v = disc__jstr(user, "client-certificate-data", NULL)) != NULL)
            rc = write_tmp(c, v, &c->cert_file, err, errlen);
        else
            c->cert_file = resolve(dir, disc__jstr(user, "client-certificate", NULL));
        if (rc == 0 && (v = disc__jstr(user, "client-key-data", NULL)) != NULL)
            rc = write_tmp(c, v, &c->key_file, err, errlen);
        else if (rc == 0)
            c->key_file = resolve(dir, disc__jstr(user, "client-key", NULL));
        if (rc < 0)
            goto out;
        c->token = xstrdup(disc__jstr(user, "token", NULL));
        if (!c->token)
            c->token_file = resolve(dir, disc__jstr(user, "tokenFile", NULL));
        c->username = xstrdup(disc__jstr(user, "username", NULL));
        c->password = xstrdup(disc__jstr(user, "password", NULL));
    }
    rc = c->server ? 0 : -ENOMEM;
out:
    free(dir);
    json_object_put(root);
    return rc;
}

/* One TLS item of a kubeconfig: inline base64 `data_key`, or the file
 * `file_key` (relative to the kubeconfig), which must be readable. */
static int kubeconfig_item_ok(json_object *o, const char *dir, const char *data_key,
                              const char *file_key, const char *file, char *err, size_t errlen)
{
    const char *v = disc__jstr(o, data_key, NULL);
    unsigned char *bytes;
    char *path;
    size_t n;
    int rc;

    if (v) {
        rc = disc__base64_decode(v, strlen(v), &bytes, &n);
        if (rc == 0)
            free(bytes);
        else
            snprintf(err, errlen, "kubeconfig %s: %s is not base64", file, data_key);
        return rc;
    }
    if (!(v = disc__jstr(o, file_key, NULL)))
        return 0;
    if (!(path = resolve(dir, v))) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    rc = fsutil_readable(path);
    if (rc < 0)
        snprintf(err, errlen, "kubeconfig %s: %s %s cannot be read: %s", file, file_key, path,
                 strerror(-rc));
    free(path);
    return rc;
}

int disc__kubeconfig_check(const char *file, char *err, size_t errlen)
{
    json_object *root, *cluster, *user;
    char *dir;
    int rc;

    rc = kubeconfig_read(file, &root, &cluster, &user, &dir, err, errlen);
    if (rc < 0)
        return rc;
    rc = kubeconfig_item_ok(cluster, dir, "certificate-authority-data", "certificate-authority",
                            file, err, errlen);
    if (rc == 0 && user)
        rc = kubeconfig_item_ok(user, dir, "client-certificate-data", "client-certificate", file,
                                err, errlen);
    if (rc == 0 && user)
        rc = kubeconfig_item_ok(user, dir, "client-key-data", "client-key", file, err, errlen);
    free(dir);
    json_object_put(root);
    return rc;
}

static int from_http(struct k8s_conn *c, const struct net_http_cfg *h)
{
    c->token = xstrdup(h->bearer_token);
    c->token_file = xstrdup(h->bearer_token_file);
    if (h->basic_auth) {
        c->username = xstrdup(h->basic_auth->username);
        c->password = xstrdup(h->basic_auth->password);
        c->password_file = xstrdup(h->basic_auth->password_file);
    }
    c->ca_file = xstrdup(h->tls.ca_file);
    c->cert_file = xstrdup(h->tls.cert_file);
    c->key_file = xstrdup(h->tls.key_file);
    c->server_name = xstrdup(h->tls.server_name);
    c->insecure = h->tls.insecure_skip_verify;
    c->proxy_url = xstrdup(h->proxy_url);
    return net_http_cfg_copy(&c->http, h);
}

int disc__k8s_conn_init(struct k8s_conn *c, uv_loop_t *loop, struct workq *work,
                        const struct disc_k8s_cfg *sd, char *err, size_t errlen)
{
    const char *sa =
        sd->service_account_dir && sd->service_account_dir[0] ? sd->service_account_dir : SA_DIR;
    char path[4096];
    int rc = 0;

    memset(c, 0, sizeof(*c));
    if (sd->api_server) {
        c->server = strdup(sd->api_server);
        rc = c->server && from_http(c, &sd->http) == 0 ? 0 : -ENOMEM;
    } else if (sd->kubeconfig_file) {
        rc = load_kubeconfig(c, sd->kubeconfig_file, err, errlen);
    } else {
        const char *host = getenv("KUBERNETES_SERVICE_HOST");
        const char *port = getenv("KUBERNETES_SERVICE_PORT");
        size_t n;

        if (!host || !*host || !port || !*port) {
            snprintf(err, errlen,
                     "unable to load in-cluster configuration, "
                     "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT "
                     "must be defined");
            return -EINVAL;
        }
        n = strlen(host) + strlen(port) + 16;
        c->server = malloc(n);
        if (!c->server)
            return -ENOMEM;
        snprintf(c->server, n, strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host, port);
        snprintf(path, sizeof(path), "%s/token", sa);
        c->token_file = strdup(path);
        snprintf(path, sizeof(path), "%s/ca.crt", sa);
        if (access(path, R_OK) == 0)
            c->ca_file = strdup(path); /* else the system roots, as client-go */
    }
    if (rc == 0 && sd->own_namespace) {
        char *ns = NULL;

        snprintf(path, sizeof(path), "%s/namespace", sa);
        rc = fsutil_read_small(path, 4096, &ns, NULL);
        if (rc < 0)
            snprintf(err, errlen, "reading own namespace from %s: %s", path, strerror(-rc));
        c->own_namespace = ns;
    }
    if (rc < 0) {
        disc__k8s_conn_done(c);
        return rc;
    }
    if (c->server) {
        size_t n = strlen(c->server);

        while (n > 0 && c->server[n - 1] == '/')
            c->server[--n] = '\0';
    }
    /* A token that cannot be read at start is not fatal: requests go out
     * without one and the 401 path asks for a re-read. */
    if ((c->token || c->token_file) &&
        !(c->bearer = net_secret_new(loop, work, c->token, c->token_file, TOKEN_TTL_MS)))
        goto oom;
    if ((c->password || c->password_file) &&
        !(c->pass = net_secret_new(loop, work, c->password, c->password_file, 0)))
        goto oom;
    c->tls.ca_file = c->ca_file;
    c->tls.cert_file = c->cert_file;
    c->tls.key_file = c->key_file;
    c->tls.server_name = c->server_name;
    c->tls.insecure_skip_verify = c->insecure;
    c->tls.ca_pem = c->http.tls.ca;
    c->tls.cert_pem = c->http.tls.cert;
    c->tls.key_pem = c->http.tls.key;
    c->tls.min_version = net_tls_version(c->http.tls.min_version);
    c->tls.max_version = net_tls_version(c->http.tls.max_version);
    if (sd->api_server && !(c->auth = net_auth_new(loop, work, &c->http)))
        goto oom;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    disc__k8s_conn_done(c);
    return -ENOMEM;
}

void disc__k8s_conn_done(struct k8s_conn *c)
{
    if (!c)
        return;
    for (int i = 0; i < 3; i++) {
        if (c->tmp_files[i]) {
            unlink(c->tmp_files[i]);
            free(c->tmp_files[i]);
        }
    }
    free(c->server);
    free(c->token);
    free(c->token_file);
    net_secret_free(c->bearer);
    net_secret_free(c->pass);
    free(c->username);
    free(c->password);
    free(c->password_file);
    free(c->ca_file);
    free(c->cert_file);
    free(c->key_file);
    free(c->server_name);
    free(c->proxy_url);
    net_auth_free(c->auth);
    net_http_cfg_done(&c->http);
    free(c->own_namespace);
    memset(c, 0, sizeof(*c));
}
