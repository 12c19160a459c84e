/* SPDX-License-Identifier: Apache-2.0 */
/* Request parsing for the status server, on Debian's http-parser
 * (docs/design.md "HTTP server").
 *
 * Purpose. Turns the bytes of one connection into requests, one at a time,
 * and formats response heads; looks up the query parameters handlers ask
 * for (httpd_query_get). Kept apart from the socket code so that the fuzz
 * targets drive exactly what the server runs.
 *
 * Limits. The request line plus headers may not pass HTTPD__MAX_HEAD (431),
 * the body HTTPD__MAX_BODY (413, refused at the headers when Content-Length
 * says so, else while streaming chunks). Nothing here grows past those caps.
 *
 * Pipelining. The parser pauses after each complete message, so a buffer
 * holding several requests is consumed one request at a time and the caller
 * can answer (and apply back-pressure) in between.
 *
 * Threading and ownership. Pure code, no loop; a struct httpd__req belongs
 * to whoever embeds it (one per connection). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "httpd/internal.h"

#define SHORT_FIELD 64
#define SHORT_VALUE 1024

static struct httpd__req *REQ(http_parser *p)
{
    return p->data;
}

static int fail(struct httpd__req *q, int status)
{
    if (!q->error)
        q->error = status;
    q->keep_alive = false;
    return -1;
}

static int count_head(struct httpd__req *q, size_t n)
{
    q->head_bytes += n;
    if (q->head_bytes > HTTPD__MAX_HEAD)
        return fail(q, 431);
    return 0;
}

/* Keeps a header value in `dst` (cut at `n`); true if it did not fit. */
static bool keep_value(char *dst, size_t n, const struct httpd__req *q)
{
    const char *v = q->hvalue.data ? q->hvalue.data : "";
    size_t len = q->hvalue.len;

    while (len && (v[len - 1] == ' ' || v[len - 1] == '\t'))
        len--;
    if (q->hlong || len >= n) {
        dst[0] = '\0';
        return true;
    }
    memcpy(dst, v, len);
    dst[len] = '\0';
    return false;
}

/* A header ends when its value is followed by another name or by the end
 * of the head. Expect is looked at for 100-continue, Origin, Host and
 * Sec-Fetch-Site for the cross-origin check and Authorization for basic
 * auth; keep-alive and framing are http-parser's. A name too long to keep
 * is none of these. */
static void finish_header(struct httpd__req *q)
{
    const char *f = q->hfield.data;

    if (!q->in_header || !f) {
        /* nothing kept */
    } else if (strcasecmp(f, "expect") == 0) {
        if (!q->hlong && q->hvalue.data && strcasecmp(q->hvalue.data, "100-continue") == 0)
            q->expect_continue = true;
    } else if (strcasecmp(f, "origin") == 0) {
        q->has_origin = true;
        q->origin_long = keep_value(q->origin, sizeof(q->origin), q);
    } else if (strcasecmp(f, "host") == 0) {
        q->host_long = keep_value(q->host, sizeof(q->host), q);
    } else if (strcasecmp(f, "sec-fetch-site") == 0) {
        keep_value(q->fetch_site, sizeof(q->fetch_site), q);
    } else if (strcasecmp(f, "authorization") == 0) {
        q->authorization_long = keep_value(q->authorization, sizeof(q->authorization), q);
    }
    buf_reset(&q->hfield);
    buf_reset(&q->hvalue);
    q->hlong = false;
    q->in_header = false;
}

static int on_url(http_parser *p, const char *at, size_t n)
{
    struct httpd__req *q = REQ(p);

    if (count_head(q, n) < 0)
        return -1;
    if (buf_append(&q->url, at, n) < 0)
        return fail(q, 431);
    return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t n)
{
    struct httpd__req *q = REQ(p);

    if (q->last_was_value || !q->in_header) {
        finish_header(q);
        q->in_header = true;
        q->last_was_value = false;
        /* ": " and CRLF of the line. */
        if (count_head(q, 4) < 0)
            return -1;
    }
    if (count_head(q, n) < 0)
        return -1;
    if (!q->hlong && buf_append(&q->hfield, at, n) < 0) {
        q->hlong = true;
        buf_reset(&q->hfield); /* a long name is none we look at */
    }
    return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t n)
{
    struct httpd__req *q = REQ(p);

    q->last_was_value = true;
    if (count_head(q, n) < 0)
        return -1;
    if (!q->hlong && buf_append(&q->hvalue, at, n) < 0)
        q->hlong = true;
    return 0;
}

static int on_headers_complete(http_parser *p)
{
    struct httpd__req *q = REQ(p);

    finish_header(q);
    q->headers_done = true;
    if (!(p->flags & F_CHUNKED) && p->content_length != ULLONG_MAX &&
        p->content_length > HTTPD__MAX_BODY)
        return fail(q, 413);
    return 0;
}

static int on_body(http_parser *p, const char *at, size_t n)
{
    struct httpd__req *q = REQ(p);

    if (buf_append(&q->body, at, n) < 0)
        return fail(q, 413);
    return 0;
}

static int on_message_complete(http_parser *p)
{
    struct httpd__req *q = REQ(p);

    q->complete = true;
    /* An upgrade (or CONNECT) would switch protocols: answer and close. */
    q->keep_alive = http_should_keep_alive(p) && !p->upgrade;
    http_parser_pause(p, 1);
    return 0;
}

static const http_parser_settings settings = {
    .on_url = on_url,
    .on_header_field = on_header_field,
    .on_header_value = on_header_value,
    .on_headers_complete = on_headers_complete,
    .on_body = on_body,
    .on_message_complete = on_message_complete,
};

void httpd__req_init(struct httpd__req *q)
{
    memset(q, 0, sizeof(*q));
    http_parser_init(&q->parser, HTTP_REQUEST);
    q->parser.data = q;
    buf_init(&q->url, HTTPD__MAX_HEAD);
    buf_init(&q->body, HTTPD__MAX_BODY);
    buf_init(&q->hfield, SHORT_FIELD);
    buf_init(&q->hvalue, SHORT_VALUE);
}

void httpd__req_done(struct httpd__req *q)
{
    if (!q)
        return;
    buf_done(&q->url);
    buf_done(&q->body);
    buf_done(&q->hfield);
    buf_done(&q->hvalue);
}

size_t httpd__req_feed(struct httpd__req *q, const char *p, size_t n)
{
    enum http_errno e;
    size_t used;

    if (q->error || q->complete || n == 0)
        return 0;
    used = http_parser_execute(&q->parser, &settings, p, n);
    e = HTTP_PARSER_ERRNO(&q->parser);
    if (e == HPE_PAUSED && q->complete)
        return used;
    if (e != HPE_OK) {
        fail(q, e == HPE_HEADER_OVERFLOW ? 431 : 400);
        return used;
    }
    if (used != n) /* cannot happen without an errno, but never loop on it */
        fail(q, 400);
    return used;
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

int httpd__pct_decode(const char *s, size_t n, char *out, bool plus_is_space)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        char ch = s[i];

        if (ch == '%') {
            int hi, lo;

            if (i + 2 >= n)
                return -EINVAL;
            hi = hexval(s[i + 1]);
            lo = hexval(s[i + 2]);
            if (hi < 0 || lo < 0)
                return -EINVAL;
            ch = (char)(hi << 4 | lo);
            if (ch == '\0')
                return -EINVAL;
            i += 2;
        } else if (ch == '+' && plus_is_space) {
            ch = ' ';
        }
        if (out)
            out[o] = ch;
        o++;
    }
    return (int)o;
}

/* Percent-decodes a path. '+' stays '+' (it only means space in forms). */
static int decode_path(const char *s, size_t n, struct buf *out)
{
    int len;

    if (n > INT_MAX)
        return -E2BIG;
    if (buf_reserve(out, n) < 0)
        return -E2BIG;
    len = httpd__pct_decode(s, n, out->data + out->len, false);
    if (len < 0)
        return len;
    out->len += (size_t)len;
    out->data[out->len] = '\0';
    return 0;
}

int httpd__req_get(struct httpd__req *q, struct httpd_request *out, struct buf *path)
{
    struct http_parser_url u;
    char *url = q->url.data;
    size_t len = q->url.len;

    buf_reset(path);
    if (!url || !q->complete)
        return 400;
    http_parser_url_init(&u);
    if (http_parser_parse_url(url, len, q->parser.method == HTTP_CONNECT, &u) != 0)
        return 400;
    if (u.field_set & (1 << UF_PATH)) {
        if (decode_path(url + u.field_data[UF_PATH].off, u.field_data[UF_PATH].len, path) < 0)
            return 400;
    } else if (buf_puts(path, "/") < 0) {
        return 400;
    }
    if (u.field_set & (1 << UF_QUERY)) {
        /* Terminate the query in place (drops a fragment, if any). */
        url[u.field_data[UF_QUERY].off + u.field_data[UF_QUERY].len] = '\0';
        out->query = url + u.field_data[UF_QUERY].off;
    } else {
        out->query = "";
    }
    out->method = http_method_str(q->parser.method);
    out->path = path->data;
    out->body = q->body.data ? q->body.data : "";
    out->body_len = q->body.len;
    return 0;
}

int httpd_query_get(const char *q, const char *key, char *val, size_t vlen)
{
    size_t kl = strlen(key);
    char name[HTTPD_QUERY_MAX_KEY];

    if (kl >= sizeof(name))
        return 0;
    for (const char *pair = q, *amp; pair && *pair; pair = amp ? amp + 1 : NULL) {
        size_t n = (amp = strchr(pair, '&')) ? (size_t)(amp - pair) : strlen(pair);
        const char *eq = memchr(pair, '=', n), *raw = eq ? eq + 1 : "";
        size_t nl = eq ? (size_t)(eq - pair) : n, vl = eq ? n - nl - 1 : 0;
        int len;

        /* As Go's url.ParseQuery: names and values are decoded, and a pair
         * with a bad escape is skipped. */
        if (n > INT_MAX || httpd__pct_decode(pair, nl, NULL, true) != (int)kl)
            continue;
        httpd__pct_decode(pair, nl, name, true);
        if (memcmp(name, key, kl) != 0 || (len = httpd__pct_decode(raw, vl, NULL, true)) < 0)
            continue;
        if ((size_t)len >= vlen)
            return -E2BIG;
        httpd__pct_decode(raw, vl, val, true);
        val[len] = '\0';
        return 1;
    }
    return 0;
}

void httpd__req_next(struct httpd__req *q)
{
    buf_reset(&q->url);
    buf_reset(&q->body);
    buf_reset(&q->hfield);
    buf_reset(&q->hvalue);
    q->head_bytes = 0;
    q->in_header = false;
    q->hlong = false;
    q->last_was_value = false;
    q->expect_continue = false;
    q->origin[0] = q->host[0] = q->fetch_site[0] = q->authorization[0] = '\0';
    q->has_origin = q->origin_long = q->host_long = q->authorization_long = false;
    q->headers_done = false;
    q->complete = false;
    http_parser_pause(&q->parser, 0);
}

bool httpd__req_is_head(const struct httpd__req *q)
{
    return q->parser.method == HTTP_HEAD;
}

bool httpd__req_cross_origin(const struct httpd__req *q)
{
    const char *m = http_method_str(q->parser.method);
    const char *auth;

    if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 || strcmp(m, "OPTIONS") == 0)
        return false;
    if (q->fetch_site[0] && strcasecmp(q->fetch_site, "same-origin") != 0 &&
        strcasecmp(q->fetch_site, "none") != 0)
        return true;
    if (!q->has_origin)
        return false;
    /* "null" (sandboxed frames, file: pages), or too long to compare. */
    if (q->origin_long || q->host_long || strcasecmp(q->origin, "null") == 0)
        return true;
    auth = strstr(q->origin, "://");
    if (!auth)
        return true;
    auth += 3;
    /* Without a port in Host the origin must not name one either; a port
     * that only the origin's scheme implies is compared as written. */
    return strcasecmp(auth, q->host) != 0;
}

const char *httpd__reason(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 413:
        return "Payload Too Large";
    case 414:
        return "URI Too Long";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return "Unknown";
    }
}

int httpd__resp_head(struct buf *out, int status, const char *content_type, size_t content_length,
                     bool close, bool keep_alive_10)
{
    int rc;

    rc = buf_printf(out, "HTTP/1.1 %d %s\r\n", status, httpd__reason(status));
    /* nosniff: a browser takes the type as given, so a text answer that
     * quotes a target's words (an error body) is never read as HTML. */
    if (rc == 0 && status != 204 && status != 304)
        rc = buf_printf(out, "Content-Type: %s\r\nX-Content-Type-Options: nosniff\r\n",
                        content_type ? content_type : "text/plain; charset=utf-8");
    if (rc == 0 && status != 204 && status != 304) {
        if (content_length == HTTPD__LEN_CHUNKED)
            rc = buf_puts(out, "Transfer-Encoding: chunked\r\n");
        else if (content_length != HTTPD__LEN_UNTIL_CLOSE)
            rc = buf_printf(out, "Content-Length: %zu\r\n", content_length);
    }
    if (rc == 0 && status == 401)
        rc = buf_puts(out, "WWW-Authenticate: Basic realm=\"proflet\"\r\n");
    if (rc == 0 && close)
        rc = buf_puts(out, "Connection: close\r\n");
    else if (rc == 0 && keep_alive_10)
        rc = buf_puts(out, "Connection: keep-alive\r\n");
    if (rc == 0)
        rc = buf_puts(out, "\r\n");
    return rc;
}
