/* SPDX-License-Identifier: Apache-2.0 */
/* relabel_cli: the bridge between difftest.py and our relabel library.
 *
 * Reads one JSON document from stdin (at most 64 MiB):
 *   {"scheme": "legacy"|"utf8", "mode": "rules"|"prom242",
 *    "rules": [{"source_labels": [...], "separator": ..., "regex": ...,
 *               "modulus": N, "target_label": ..., "replacement": ...,
 *               "action": ...}, ...],      absent keys keep their defaults
 *    "targets": [{"name": "value", ...}, ...]}
 * and prints one JSON line per target: {"labels": {...}}, {"dropped": true}
 * or {"error": "..."}. Mode "prom242" then does what Prometheus 2.42's
 * PopulateLabels does after the rules (with no-default-scrape-port): no
 * address, '/' in the address, a missing or bad scrape interval/timeout are
 * errors, __meta_* labels go, instance
 * defaults to __address__, then (2.42's no-default-scrape-port quirk) a
 * default port (:80 for http, :443 for https) is stripped from
 * __address__, brackets included; label values must be valid UTF-8. A rule list
 * that does not compile prints {"config_error": "..."} once and exits 2. */
#include <errno.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/duration.h"
#include "relabel/relabel.h"

#define MAX_INPUT (64u << 20)

static const char *jstr(json_object *o, const char *key)
{
    json_object *v;

    if (!json_object_object_get_ex(o, key, &v) || json_object_is_type(v, json_type_null))
        return NULL;
    return json_object_get_string(v);
}

static void print_labels(const struct labels *ls)
{
    json_object *o = json_object_new_object(), *wrap = json_object_new_object();

    for (size_t i = 0; i < ls->n; i++)
        json_object_object_add(
            o, ls->v[i].name,
            json_object_new_string_len(ls->v[i].value, (int)label_value_len(&ls->v[i])));
    json_object_object_add(wrap, "labels", o);
    puts(json_object_to_json_string_ext(wrap,
                                        JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(wrap);
}

static void print_kv(const char *key, json_object *val)
{
    json_object *wrap = json_object_new_object();

    json_object_object_add(wrap, key, val);
    puts(json_object_to_json_string_ext(wrap,
                                        JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(wrap);
}

/* Prometheus 2.42 PopulateLabels after relabeling. Returns NULL or an error. */
static const char *populate_242(struct labels *ls)
{
    const char *addr = labels_get(ls, "__address__");
    size_t i = 0;

    if (!addr)
        return "no address";
    if (strchr(addr, '/'))
        return "not a valid hostname";
    {
        const char *iv = labels_get(ls, "__scrape_interval__");
        const char *tv = labels_get(ls, "__scrape_timeout__");
        uint64_t ims, tms;

        if (!iv || duration_parse(iv, &ims) < 0 || ims == 0)
            return "bad scrape interval";
        if (!tv || duration_parse(tv, &tms) < 0 || tms == 0)
            return "bad scrape timeout";
        if (tms > ims)
            return "scrape timeout greater than interval";
    }
    while (i < ls->n) {
        if (strncmp(ls->v[i].name, "__meta_", 7) == 0)
            labels_del(ls, ls->v[i].name);
        else
            i++;
    }
    if (!labels_get(ls, "instance") && labels_set(ls, "instance", labels_get(ls, "__address__")))
        return "out of memory";
    addr = labels_get(ls, "__address__");
    {
        const char *scheme = labels_get(ls, "__scheme__");
        const char *port = strrchr(addr, ':');
        char host[512];

        if (port && scheme &&
            ((strcmp(scheme, "http") == 0 && strcmp(port, ":80") == 0) ||
             (strcmp(scheme, "https") == 0 && strcmp(port, ":443") == 0)) &&
            (size_t)(port - addr) < sizeof(host)) {
            size_t hl = (size_t)(port - addr);

            if (addr[0] == '[' && hl >= 2 && addr[hl - 1] == ']')
                snprintf(host, sizeof(host), "%.*s", (int)hl - 2, addr + 1);
            else if (!memchr(addr, ':', hl))
                snprintf(host, sizeof(host), "%.*s", (int)hl, addr);
            else
                host[0] = '\0';
            if (host[0] && labels_set(ls, "__address__", host))
                return "out of memory";
        }
    }
    for (i = 0; i < ls->n; i++)
        if (!relabel_valid_utf8(ls->v[i].value, label_value_len(&ls->v[i])))
            return "invalid label value";
    return NULL;
}

int main(void)
{
    char *in = malloc(MAX_INPUT + 1);
    size_t n = 0, r;
    json_object *doc, *rules, *targets;
    struct relabel_cfg *cfgs = NULL;
    struct relabel_rules *rs = NULL;
    const char *mode, *scheme;
    char err[1024];
    size_t nr;
    int rc, sch;

    if (!in)
        return 1;
    while ((r = fread(in + n, 1, MAX_INPUT - n, stdin)) > 0)
        n += r;
    in[n] = '\0';
    doc = json_tokener_parse(in);
    free(in);
    if (!doc || !json_object_object_get_ex(doc, "rules", &rules) ||
        !json_object_object_get_ex(doc, "targets", &targets)) {
        fprintf(stderr, "relabel_cli: bad input\n");
        return 1;
    }
    mode = jstr(doc, "mode") ? jstr(doc, "mode") : "rules";
    scheme = jstr(doc, "scheme");
    sch = relabel_parse_scheme(scheme);
    nr = json_object_array_length(rules);
    cfgs = calloc(nr + 1, sizeof(*cfgs));
    for (size_t i = 0; i < nr; i++) {
        json_object *rj = json_object_array_get_idx(rules, i), *src, *mod;

        if (json_object_object_get_ex(rj, "source_labels", &src) &&
            !json_object_is_type(src, json_type_null)) {
            cfgs[i].n_source_labels = (unsigned)json_object_array_length(src);
            cfgs[i].source_labels = calloc(cfgs[i].n_source_labels + 1, sizeof(char *));
            for (unsigned k = 0; k < cfgs[i].n_source_labels; k++)
                cfgs[i].source_labels[k] =
                    (char *)json_object_get_string(json_object_array_get_idx(src, k));
        }
        cfgs[i].separator = (char *)jstr(rj, "separator");
        cfgs[i].regex = (char *)jstr(rj, "regex");
        cfgs[i].target_label = (char *)jstr(rj, "target_label");
        cfgs[i].replacement = (char *)jstr(rj, "replacement");
        cfgs[i].action = (char *)jstr(rj, "action");
        if (json_object_object_get_ex(rj, "modulus", &mod))
            cfgs[i].modulus = (uint64_t)json_object_get_int64(mod);
    }
    rc = relabel_rules_new(cfgs, nr, sch < 0 ? RELABEL_SCHEME_UNSET : (enum relabel_scheme)sch, &rs,
                           err, sizeof(err));
    if (rc < 0) {
        print_kv("config_error", json_object_new_string(err));
        return 2;
    }
    for (size_t t = 0; t < json_object_array_length(targets); t++) {
        json_object *tj = json_object_array_get_idx(targets, t);
        struct labels ls = LABELS_INIT;
        const char *perr = NULL;

        json_object_object_foreach(tj, key, val)
            labels_setn(&ls, key, strlen(key), json_object_get_string(val),
                        (size_t)json_object_get_string_len(val));
        rc = relabel_apply(rs, &ls);
        if (rc < 0)
            print_kv("error", json_object_new_string(relabel_strerror(rc)));
        else if (rc == 0)
            print_kv("dropped", json_object_new_boolean(1));
        else if (strcmp(mode, "prom242") == 0 && (perr = populate_242(&ls)) != NULL)
            print_kv("error", json_object_new_string(perr));
        else
            print_labels(&ls);
        labels_done(&ls);
    }
    for (size_t i = 0; i < nr; i++)
        free(cfgs[i].source_labels);
    free(cfgs);
    relabel_rules_free(rs);
    json_object_put(doc);
    relabel_thread_cleanup();
    return 0;
}
