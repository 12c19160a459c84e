/** How to reach and authenticate to the Kubernetes API server: in-cluster
 * (service account), a kubeconfig file, or an explicit api-server. Loop
 * thread only (the token file is re-read on the loop; it is tiny). */
#ifndef PROFLET_DISCOVERY_K8S_CONN_H
#define PROFLET_DISCOVERY_K8S_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/config.h"
#include "net/net.h"

/** Resolved connection settings; every string owned. */
struct k8s_conn {
    char *server;       /**< base URL without trailing slash */
    char *token;        /**< current bearer token or NULL */
    char *token_file;   /**< re-read about every 50 s and after a 401 */
    uint64_t token_read_ms; /**< uv_now() of the last read, 0 = never */
    char *username;     /**< basic auth */
    char *password;
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

/** Fills `c` from the config piece: validates the rejected combinations,
 * reads kubeconfig or the in-cluster environment. Returns 0 or a negative
 * code with a message. */
int disc__k8s_conn_init(struct k8s_conn *c, const struct cfg_k8s_sd *sd, char *err,
                        size_t errlen);
/** Frees everything and removes temporary files (NULL-safe, idempotent). */
void disc__k8s_conn_done(struct k8s_conn *c);
/** Re-reads the token file when it is older than 50 s (or `force`). A failed
 * or empty read keeps the old token and returns a negative code with a
 * message; 0 otherwise. */
int disc__k8s_conn_refresh_token(struct k8s_conn *c, uint64_t now_ms, bool force, char *err,
                                 size_t errlen);
/** Decodes standard base64 (whitespace ignored) into a malloc'd buffer. */
int disc__base64_decode(const char *in, size_t n, unsigned char **out, size_t *out_len);

#endif
