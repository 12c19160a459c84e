/* SPDX-License-Identifier: Apache-2.0 */
/* Wire helpers for the remote sinks (docs/design.md "Modules"): label
 * validation against the server's limits, the final labels of a profile
 * (external labels, write rules), PushRequest encoding (protobuf-c), the push
 * and /ingest URLs, the bytes each endpoint sends of a profile (its compression, docs/design.md
 * "Compression"), and the classification of a response into what to do with
 * each profile of the request.
 *
 * Pure functions: no loop, no globals. fwd__push_encode() and
 * fwd__profile_body() may run in the pool; fwd__classify() parses untrusted
 * bytes and is fuzzed. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "common/utf8.h"
#include "forward/internal.h"
#include "net/net.h"
#include "push.pb-c.h"

/* The servers reject what Go's utf8.ValidString rejects. */
bool fwd__utf8_valid(const char *s, size_t n)
{
    return utf8_valid(s, n);
}

int fwd__labels_validate(const struct labels *ls, char *err, size_t errlen)
{
    const char *name = labels_get(ls, "__name__");

    if (ls->n == 0) {
        snprintf(err, errlen, "empty label set");
        return -EINVAL;
    }
    if (!name || !*name || !fwd__utf8_valid(name, strlen(name))) {
        snprintf(err, errlen, "invalid metric name (__name__)");
        return -EINVAL;
    }
    if (ls->n > FWD_MAX_LABELS) {
        snprintf(err, errlen, "%zu labels, at most %d allowed", ls->n, FWD_MAX_LABELS);
        return -EINVAL;
    }
    for (size_t i = 0; i < ls->n; i++) {
        const struct label *l = &ls->v[i];

        if (label_name_len(l) == 0 || label_name_len(l) > FWD_MAX_NAME_LEN) {
            snprintf(err, errlen, "label name length %zu out of range", label_name_len(l));
            return -EINVAL;
        }
        if (label_value_len(l) > FWD_MAX_VALUE_LEN) {
            snprintf(err, errlen, "label %.64s: value longer than %d", l->name, FWD_MAX_VALUE_LEN);
            return -EINVAL;
        }
        if (!fwd__utf8_valid(l->name, label_name_len(l)) ||
            !fwd__utf8_valid(l->value, label_value_len(l))) {
            snprintf(err, errlen, "label %.64s: not valid UTF-8", l->name);
            return -EINVAL;
        }
        if (i > 0 && label_name_len(&ls->v[i - 1]) == label_name_len(l) &&
            memcmp(ls->v[i - 1].name, l->name, label_name_len(l)) == 0) {
            snprintf(err, errlen, "duplicate label %.64s", l->name);
            return -EINVAL;
        }
    }
    return 0;
}

int fwd__labels_merge(struct labels *dst, const struct labels *src, const struct conf_kv *ext,
                      unsigned n_ext)
{
    int r = labels_copy(dst, src);

    for (unsigned i = 0; r == 0 && i < n_ext; i++)
        r = labels_set(dst, ext[i].key, ext[i].value);
    return r;
}

int fwd__labels_final(const struct fwd_ep *ep, struct labels *dst, const struct labels *src)
{
    int r = fwd__labels_merge(dst, src, ep->ext, ep->n_ext);

    if (r == 0 && ep->cfg->write_rules)
        r = relabel_apply(ep->cfg->write_rules, dst);
    else if (r == 0)
        r = 1;
    if (r <= 0) {
        labels_done(dst);
        *dst = (struct labels)LABELS_INIT;
    }
    return r < 0 ? -ENOMEM : r;
}

bool fwd__recompress_needed(const struct fwd_profile *p, enum pprof_compression c)
{
    return p->compression >= 0 && p->compression != (int)c;
}

int fwd__profile_body(const struct fwd_profile *p, enum pprof_compression c, const uint8_t **data,
                      size_t *len, uint8_t **owned)
{
    int r;

    *data = p->data;
    *len = p->len;
    *owned = NULL;
    if (!fwd__recompress_needed(p, c))
        return 0;
    r = pprof_recompress(p->data, p->len, FWD_RECOMPRESS_MAX, c, owned, len);
    if (r == -ENOMEM)
        return r;
    if (r < 0) {
        *len = p->len;
        return 0;
    }
    *data = *owned;
    return 0;
}

int fwd__push_encode(struct fwd_profile *const *p, const struct labels *const *ls, size_t n,
                     enum pprof_compression c, uint8_t **out, size_t *out_len)
{
    Push__V1__PushRequest req = PUSH__V1__PUSH_REQUEST__INIT;
    Push__V1__RawProfileSeries *series = NULL, **sp = NULL;
    Push__V1__RawSample *samples = NULL, **smp = NULL;
    Types__V1__LabelPair *pairs = NULL, **pp = NULL;
    uint8_t **owned = NULL;
    size_t npairs = 0, k = 0;
    uint8_t *buf = NULL;
    int r = -ENOMEM;

    for (size_t i = 0; i < n; i++)
        npairs += ls[i]->n;
    owned = calloc(n ? n : 1, sizeof(*owned));
    series = calloc(n ? n : 1, sizeof(*series));
    sp = calloc(n ? n : 1, sizeof(*sp));
    samples = calloc(n ? n : 1, sizeof(*samples));
    smp = calloc(n ? n : 1, sizeof(*smp));
    pairs = calloc(npairs ? npairs : 1, sizeof(*pairs));
    pp = calloc(npairs ? npairs : 1, sizeof(*pp));
    if (!owned || !series || !sp || !samples || !smp || !pairs || !pp)
        goto out;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *data;
        size_t len;

        if (fwd__profile_body(p[i], c, &data, &len, &owned[i]) < 0)
            goto out;
        push__v1__raw_profile_series__init(&series[i]);
        push__v1__raw_sample__init(&samples[i]);
        samples[i].raw_profile.data = (uint8_t *)data;
        samples[i].raw_profile.len = len;
        samples[i].id = (char *)p[i]->id;
        smp[i] = &samples[i];
        series[i].n_samples = 1;
        series[i].samples = &smp[i];
        series[i].labels = &pp[k];
        series[i].n_labels = ls[i]->n;
        for (size_t j = 0; j < ls[i]->n; j++, k++) {
            types__v1__label_pair__init(&pairs[k]);
            pairs[k].name = (char *)ls[i]->v[j].name;
            pairs[k].value = (char *)ls[i]->v[j].value;
            pp[k] = &pairs[k];
        }
        sp[i] = &series[i];
    }
    req.n_series = n;
    req.series = sp;
    *out_len = push__v1__push_request__get_packed_size(&req);
    buf = malloc(*out_len ? *out_len : 1);
    if (!buf)
        goto out;
    push__v1__push_request__pack(&req, buf);
    *out = buf;
    r = 0;
out:
    for (size_t i = 0; owned && i < n; i++)
        free(owned[i]);
    free(owned);
    free(series);
    free(sp);
    free(samples);
    free(smp);
    free(pairs);
    free(pp);
    return r;
}

char *fwd__push_url(const char *base)
{
    static const char suffix[] = "/push.v1.PusherService/Push";
    size_t n = strlen(base);
    char *u;

    while (n > 0 && base[n - 1] == '/')
        n--;
    u = malloc(n + sizeof(suffix));
    if (!u)
        return NULL;
    memcpy(u, base, n);
    memcpy(u + n, suffix, sizeof(suffix));
    return u;
}

/* Percent-encodes everything but RFC 3986 unreserved characters. */
/* The legacy labelset grammar: app names [A-Za-z0-9_.-/], label names
 * [A-Za-z0-9_.]; values may not hold the separators. Anything else becomes '_'. */
static void ingest_clean(struct buf *b, const char *s, int kind)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        bool ok;

        if (kind == 0)
            ok = isalnum(c) || c == '_' || c == '.' || c == '-' || c == '/';
        else if (kind == 1)
            ok = isalnum(c) || c == '_' || c == '.';
        else
            ok = c >= 0x20 && c != '{' && c != '}' && c != ',' && c != '=' && c != '"';
        buf_append(b, ok ? s : "_", 1);
    }
}

char *fwd__ingest_url(const char *base, const struct labels *ls, int64_t start_ns, int64_t end_ns)
{
    struct buf name, u;
    const char *svc = labels_get(ls, "service_name");
    const char *spy = labels_get(ls, "pyroscope_spy");
    size_t n = strlen(base);
    bool first = true;
    char *res = NULL;
    int64_t from = start_ns / 1000000000, until = end_ns / 1000000000;

    if (until <= from)
        until = from + 1;
    buf_init(&name, 64 * 1024);
    buf_init(&u, 128 * 1024);
    ingest_clean(&name, svc && *svc ? svc : "unspecified", 0);
    buf_puts(&name, "{");
    for (size_t i = 0; i < ls->n; i++) {
        const struct label *l = &ls->v[i];

        if (strncmp(l->name, "__", 2) == 0 || strcmp(l->name, "service_name") == 0 ||
            strcmp(l->name, "pyroscope_spy") == 0)
            continue;
        if (!first)
            buf_puts(&name, ",");
        first = false;
        ingest_clean(&name, l->name, 1);
        buf_puts(&name, "=");
        ingest_clean(&name, l->value, 2);
    }
    if (buf_puts(&name, "}") < 0)
        goto out;
    while (n > 0 && base[n - 1] == '/')
        n--;
    buf_append(&u, base, n);
    buf_puts(&u, "/ingest?name=");
    buf_append_pct(&u, name.data, name.len);
    buf_printf(&u, "&from=%" PRId64 "&until=%" PRId64 "&format=pprof&spyName=", from, until);
    if (buf_append_pct(&u, spy ? spy : "unknown", strlen(spy ? spy : "unknown")) < 0)
        goto out;
    res = buf_steal(&u, &n);
out:
    buf_done(&name);
    buf_done(&u);
    return res;
}

bool fwd__status_retryable(long status)
{
    return status == 408 || status == 429 || (status >= 500 && status != 501);
}

/* Case-insensitive substring search bounded by n. */
static bool contains_ci(const char *s, size_t n, const char *needle)
{
    size_t m = strlen(needle);

    for (size_t i = 0; i + m <= n; i++) {
        if (strncasecmp(s + i, needle, m) == 0)
            return true;
    }
    return false;
}

enum fwd__verdict fwd__classify(int result, long status, const char *body, size_t body_len,
                                const char *const *ids, size_t n, uint8_t *states, char *msg,
                                size_t msglen)
{
    struct json_tokener *tok = NULL;
    struct json_object *root = NULL, *jm, *jc;
    const char *message = NULL, *code = NULL;
    size_t mlen = 0, named = 0;
    bool json = false;
    enum fwd__verdict v;

    if (msglen)
        msg[0] = '\0';
    if (result != 0) {
        snprintf(msg, msglen, "%s", net_strerror(result));
        if (result == NET_ECONNECT || result == NET_ETLS)
            return FWD_V_UNREACHED;
        return FWD_V_AMBIGUOUS;
    }
    if (status >= 200 && status < 300)
        return FWD_V_OK;
    if (status >= 300 && status < 400) {
        /* Not followed (follow-redirects off, or too many): the endpoint's
         * url is wrong, nothing was stored. Retried, so spooled, not lost. */
        snprintf(msg, msglen,
                 "HTTP %ld: redirect not followed (check the url, or "
                 "follow-redirects)",
                 status);
        return FWD_V_RETRY;
    }
    if (body && body_len > 0 && body_len <= 1024 * 1024) {
        tok = json_tokener_new_ex(16);
        if (tok) {
            root = json_tokener_parse_ex(tok, body, (int)body_len);
            json_tokener_free(tok);
        }
        if (root && json_object_is_type(root, json_type_object)) {
            json = true;
            if (json_object_object_get_ex(root, "message", &jm) &&
                json_object_is_type(jm, json_type_string)) {
                message = json_object_get_string(jm);
                mlen = (size_t)json_object_get_string_len(jm);
            }
            if (json_object_object_get_ex(root, "code", &jc) &&
                json_object_is_type(jc, json_type_string))
                code = json_object_get_string(jc);
        }
    }
    if (!message && body && !json) {
        message = body;
        mlen = body_len;
    }
    snprintf(msg, msglen, "HTTP %ld%s%s: %.*s", status, code ? " " : "", code ? code : "",
             (int)(mlen > 200 ? 200 : mlen), message ? message : "");
    for (size_t i = 0; i < msglen && msg[i]; i++) {
        if ((unsigned char)msg[i] < 0x20)
            msg[i] = ' ';
    }

    /* Attribution: the server names the ids of the series it refused. */
    if (json && message && n > 0) {
        for (size_t i = 0; i < n; i++) {
            bool hit = ids[i][0] && contains_ci(message, mlen, ids[i]);

            states[i] = hit ? (fwd__status_retryable(status) ? FWD_P_RETRY : FWD_P_DROP) : FWD_P_OK;
            named += hit;
        }
        if (named > 0) {
            v = FWD_V_PARTIAL;
            goto out;
        }
    }
    if (status == 413 ||
        ((status == 429 || status == 400) && message &&
         (contains_ci(message, mlen, "too large") || contains_ci(message, mlen, "larger than")))) {
        v = FWD_V_TOO_LARGE;
    } else if (status == 408 || status == 429) {
        v = FWD_V_RETRY;
    } else if ((status == 502 || status == 503) && !json) {
        v = FWD_V_UNREACHED; /* a proxy that could not reach the server */
    } else if (status >= 500 && status != 501) {
        v = FWD_V_AMBIGUOUS;
    } else if (status == 400 || status == 409 || status == 422) {
        v = FWD_V_SPLIT;
    } else {
        /* 401, 403, 404, 405, 415, 501...: the endpoint, not a profile. */
        v = FWD_V_SPLIT;
        if (n > 0 && states) {
            for (size_t i = 0; i < n; i++)
                states[i] = FWD_P_DROP;
            v = FWD_V_PARTIAL;
        }
    }
out:
    json_object_put(root);
    return v;
}
