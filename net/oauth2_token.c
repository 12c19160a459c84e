/* SPDX-License-Identifier: Apache-2.0 */
/* The token endpoint's answer (RFC 6749 5.1) -> the Authorization line and
 * the lifetime (docs/design.md "The libcurl-libuv bridge"). Kept apart from
 * auth.c so that its fuzz target (tests/fuzz/net) runs exactly this code,
 * without a loop. Pure; any thread. The body is network input, capped by the
 * token request (64 KiB) and parsed by json-c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <json-c/json.h>

#include "net/internal.h"

/* Go's oauth2 spelling of a token type ("bearer" -> "Bearer"). */
static const char *token_type(const char *t)
{
    if (!t || !*t || strcasecmp(t, "bearer") == 0)
        return "Bearer";
    if (strcasecmp(t, "mac") == 0)
        return "MAC";
    if (strcasecmp(t, "basic") == 0)
        return "Basic";
    return t;
}

int net__oauth2_token_parse(const char *body, size_t len, char **line, int64_t *expires_in)
{
    struct json_tokener *tk = json_tokener_new();
    struct json_object *root = NULL, *v;
    const char *tok = NULL, *type = NULL;
    int rc = -EINVAL;

    *line = NULL;
    *expires_in = 0;
    if (!tk)
        return -ENOMEM;
    if (len <= INT32_MAX)
        root = json_tokener_parse_ex(tk, body ? body : "", (int)len);
    if (!root || json_tokener_get_error(tk) != json_tokener_success ||
        !json_object_is_type(root, json_type_object))
        goto out;
    if (json_object_object_get_ex(root, "access_token", &v) &&
        json_object_is_type(v, json_type_string) &&
        (size_t)json_object_get_string_len(v) == strlen(json_object_get_string(v)))
        tok = json_object_get_string(v); /* (no NUL inside) */
    if (json_object_object_get_ex(root, "token_type", &v) &&
        json_object_is_type(v, json_type_string))
        type = json_object_get_string(v);
    if (json_object_object_get_ex(root, "expires_in", &v))
        *expires_in = json_object_get_int64(v);
    /* A token or type that would break the header line is no token. */
    if (!tok || !*tok || net__has_crlf(tok) || (type && (!*type || strpbrk(type, "\r\n :"))))
        goto out;
    rc = asprintf(line, "Authorization: %s %s", token_type(type), tok) < 0 ? -ENOMEM : 0;
    if (rc < 0)
        *line = NULL;
out:
    json_object_put(root);
    json_tokener_free(tk);
    return rc;
}
