/* SPDX-License-Identifier: Apache-2.0 */
/* URL checks with libcurl's own URL parser, so what the configuration
 * accepts is exactly what a request will be able to use, and the check of
 * text bound for a header line (docs/design.md "Modules"). Pure (no loop);
 * any thread. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <curl/curl.h>

#include "net/internal.h"
#include "net/net.h"

int net_url_check(const char *url, char *host, size_t hostlen, char *err, size_t errlen)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *h = NULL, *port = NULL;
    CURLUcode uc;
    int rc = -EINVAL;

    if (!u) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    uc = curl_url_set(u, CURLUPART_URL, url, 0);
    if (uc != CURLUE_OK) {
        snprintf(err, errlen, "%s", curl_url_strerror(uc));
        goto out;
    }
    if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0)) {
        snprintf(err, errlen, "the scheme must be http or https");
        goto out;
    }
    if (curl_url_get(u, CURLUPART_HOST, &h, 0) != CURLUE_OK || !*h) {
        snprintf(err, errlen, "no host");
        goto out;
    }
    if (host && curl_url_get(u, CURLUPART_PORT, &port, 0) == CURLUE_OK)
        snprintf(host, hostlen, "%s:%s", h, port);
    else if (host)
        snprintf(host, hostlen, "%s", h);
    rc = 0;
out:
    curl_free(scheme);
    curl_free(h);
    curl_free(port);
    curl_url_cleanup(u);
    return rc;
}

bool net__has_crlf(const char *s)
{
    return s && strpbrk(s, "\r\n") != NULL;
}
