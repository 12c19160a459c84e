/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: bytes as a --web.config.file (exporter-toolkit's
 * tls_server_config and basic_auth_users) through httpd/web.c's loader,
 * from memory and without reading the TLS files it names (so the YAML
 * layer and its checks are fuzzed, not OpenSSL's PEM reader).
 *
 * Invariants: a failed load returns a negative code, no web config and a
 * message "web.yml:LINE:COL: text"; a successful one gives a web config
 * whose users have non-empty names without ':', each with a bcrypt hash
 * (60 characters, $2a$/$2b$/$2y$), each name found again by the server's
 * lookup (httpd__web_hash) with its own hash, and auth on exactly when there
 * are users. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz_invariants.h"
#include "httpd/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct httpd_web *w = (struct httpd_web *)1;
    char err[512];
    int rc;

    if (size > 65536)
        return 0;
    err[0] = '\0';
    rc = httpd__web_load_string((const char *)data, size, "web.yml", &w, err, sizeof(err));
    if (rc < 0) {
        unsigned line = 0, col = 0;
        int end = 0;

        FUZZ_ASSERT(w == NULL);
        if (sscanf(err, "web.yml:%u:%u: %n", &line, &col, &end) != 2 || end == 0) {
            fprintf(stderr, "no position in: %s\n", err);
            FUZZ_ASSERT(!"an error message with a position");
        }
        FUZZ_ASSERT(line >= 1 && col >= 1 && err[end] != '\0');
        return 0;
    }
    FUZZ_ASSERT(rc == 0 && w != NULL);
    FUZZ_ASSERT(!httpd_web_tls(w) && httpd__web_ssl(w) == NULL); /* no files read */
    {
        const char *name, *hash;
        unsigned i;

        for (i = 0; (name = httpd__web_user(w, i, &hash)) != NULL; i++) {
            FUZZ_ASSERT(name[0] != '\0' && strchr(name, ':') == NULL);
            FUZZ_ASSERT(hash && strlen(hash) == 60 && strncmp(hash, "$2", 2) == 0 &&
                        strchr("aby", hash[2]) && hash[3] == '$');
            FUZZ_ASSERT(httpd__web_hash(w, name) == hash); /* names are unique */
        }
        FUZZ_ASSERT(httpd_web_auth(w) == (i > 0));
    }
    FUZZ_ASSERT(httpd_web_ref(w) == w);
    httpd_web_unref(w);
    httpd_web_unref(w);
    return 0;
}
