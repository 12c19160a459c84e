/** How to reach and authenticate to the Kubernetes API server: in-cluster
 * (service account), a kubeconfig file, or an explicit api-server. Loop
 * thread only; the token and password files are re-read off the loop. */
#ifndef PROFLET_DISCOVERY_K8S_CONN_H
#define PROFLET_DISCOVERY_K8S_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "discovery/discovery.h"
#include "net/net.h"

/** Resolved connection settings; every string owned. */
struct k8s_conn {
    char *server;       /**< base URL without trailing slash */
    char *token;        /**< inline bearer token, or NULL */
    char *token_file;   /**< re-read about every 50 s and after a 401 */
    struct net_secret *bearer; /**< the token in use (from token or token_file) */
    char *username;     /**< basic auth */
    char *password;
    char *password_file;
    struct net_secret *pass;   /**< the password in use */
    char *ca_file;
    char *cert_file;
    char *key_file;
    char *server_name;
    bool insecure;
    char *proxy_url;
    char *own_namespace; /**< from the service account dir, untrimmed; NULL if unknown */
    char *tmp_files[3];  /**< files written from kubeconfig *-data, removed on done */
    struct net_tls tls;  /**< points into the fields above */
};

/** Fills `c` from the config piece (whose combinations were checked at
 * load): reads kubeconfig or the in-cluster environment, and makes the
 * token and password secrets, re-read through `work`. Returns 0 or a
 * negative code with a message. */
int disc__k8s_conn_init(struct k8s_conn *c, uv_loop_t *loop, struct workq *work,
                        const struct disc_k8s_cfg *sd, char *err, size_t errlen);
/** Frees everything and removes temporary files (NULL-safe, idempotent). */
void disc__k8s_conn_done(struct k8s_conn *c);
/** Decodes standard base64 (whitespace ignored) into a malloc'd buffer. */
int disc__base64_decode(const char *in, size_t n, unsigned char **out, size_t *out_len);

#endif
