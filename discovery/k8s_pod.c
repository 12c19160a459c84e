/* SPDX-License-Identifier: Apache-2.0 */
/* Pod -> target group, exactly as Prometheus' pod role builds it
 * (docs/design.md "Kubernetes discovery": the targets, their order and
 * labels, and when a group is empty), as a pure function over json-c
 * objects as the API server serves them.
 *
 * Threading: pure, any thread. Ownership: inputs are borrowed; the target
 * array returned is owned by the caller. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/array.h"
#include "discovery/internal.h"
#include "relabel/relabel.h"

#define META "__meta_kubernetes_"

/* The string at o[k], or "" (length in *len) when absent or not a string. */
static const char *jstr(json_object *o, const char *k, size_t *len)
{
    json_object *v = disc__jget(o, k);

    if (!v || !json_object_is_type(v, json_type_string)) {
        if (len)
            *len = 0;
        return "";
    }
    if (len)
        *len = (size_t)json_object_get_string_len(v);
    return json_object_get_string(v);
}

static int set_str(struct labels *ls, const char *name, json_object *o, const char *k)
{
    size_t n;
    const char *v = jstr(o, k, &n);

    return labels_setn(ls, name, strlen(name), v, n);
}

/* Adds <prefix>label_<san(k)> = v and <prefix>labelpresent_<san(k)> = "true"
 * for each entry of the map `m` (kind is "label" or "annotation"). */
static int add_map(struct labels *ls, const char *prefix, const char *kind, json_object *m)
{
    if (!m || !json_object_is_type(m, json_type_object))
        return 0;
    json_object_object_foreach(m, k, v)
    {
        char *san = relabel_sanitize_label_name(k, strlen(k));
        char *name;
        size_t cap;
        int rc = 0;

        if (!san)
            return -ENOMEM;
        cap = strlen(prefix) + strlen(kind) + strlen("present_") + strlen(san) + 2;
        name = malloc(cap);
        if (!name) {
            free(san);
            return -ENOMEM;
        }
        snprintf(name, cap, "%s%s_%s", prefix, kind, san);
        if (v && json_object_is_type(v, json_type_string))
            rc = labels_setn(ls, name, strlen(name), json_object_get_string(v),
                             (size_t)json_object_get_string_len(v));
        if (rc == 0) {
            snprintf(name, cap, "%s%spresent_%s", prefix, kind, san);
            rc = labels_set(ls, name, "true");
        }
        free(name);
        free(san);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int disc__k8s_meta_build(json_object *obj, const char *kind, struct disc__k8s_meta *out)
{
    json_object *md = disc__jget(obj, "metadata");
    char prefix[64];
    int rc = 0;

    labels_init(&out->labels);
    if (!md)
        return -EINVAL;
    snprintf(prefix, sizeof(prefix), META "%s_", kind);
    if (strcmp(kind, "node") == 0)
        rc = set_str(&out->labels, META "node_name", md, "name");
    if (rc == 0)
        rc = add_map(&out->labels, prefix, "label", disc__jget(md, "labels"));
    if (rc == 0)
        rc = add_map(&out->labels, prefix, "annotation", disc__jget(md, "annotations"));
    if (rc < 0)
        labels_done(&out->labels);
    return rc;
}

static int merge(struct labels *dst, const struct labels *src)
{
    for (size_t i = 0; i < src->n; i++) {
        const struct label *l = &src->v[i];
        int rc = labels_setn(dst, l->name, label_name_len(l), l->value, label_value_len(l));

        if (rc < 0)
            return rc;
    }
    return 0;
}

static int group_labels(json_object *pod, const struct disc__k8s_meta *node,
                        const struct disc__k8s_meta *ns, struct labels *g)
{
    json_object *md = disc__jget(pod, "metadata"), *spec = disc__jget(pod, "spec");
    json_object *status = disc__jget(pod, "status"), *conds, *owners;
    const char *ready = "unknown";
    char lower[32];
    int rc;

    if ((rc = set_str(g, META "namespace", md, "namespace")) < 0 ||
        (rc = set_str(g, META "pod_name", md, "name")) < 0 ||
        (rc = set_str(g, META "pod_uid", md, "uid")) < 0 ||
        (rc = set_str(g, META "pod_ip", status, "podIP")) < 0 ||
        (rc = set_str(g, META "pod_host_ip", status, "hostIP")) < 0 ||
        (rc = set_str(g, META "pod_node_name", spec, "nodeName")) < 0 ||
        (rc = set_str(g, META "pod_phase", status, "phase")) < 0)
        return rc;
    conds = disc__jget(status, "conditions");
    if (conds && json_object_is_type(conds, json_type_array)) {
        size_t n = json_object_array_length(conds);

        for (size_t i = 0; i < n; i++) {
            json_object *c = json_object_array_get_idx(conds, i);
            size_t len;
            const char *s;

            if (strcmp(jstr(c, "type", NULL), "Ready") != 0)
                continue;
            s = jstr(c, "status", &len);
            if (len >= sizeof(lower))
                len = sizeof(lower) - 1;
            for (size_t k = 0; k < len; k++)
                lower[k] = (s[k] >= 'A' && s[k] <= 'Z') ? (char)(s[k] - 'A' + 'a') : s[k];
            lower[len] = '\0';
            ready = lower;
            break;
        }
    }
    if ((rc = labels_set(g, META "pod_ready", ready)) < 0)
        return rc;
    if ((rc = add_map(g, META "pod_", "label", disc__jget(md, "labels"))) < 0 ||
        (rc = add_map(g, META "pod_", "annotation", disc__jget(md, "annotations"))) < 0)
        return rc;
    owners = disc__jget(md, "ownerReferences");
    if (owners && json_object_is_type(owners, json_type_array)) {
        size_t n = json_object_array_length(owners);

        for (size_t i = 0; i < n; i++) {
            json_object *o = json_object_array_get_idx(owners, i);
            json_object *ctl = disc__jget(o, "controller");

            if (!ctl || !json_object_is_type(ctl, json_type_boolean) ||
                !json_object_get_boolean(ctl))
                continue;
            if ((rc = set_str(g, META "pod_controller_kind", o, "kind")) < 0 ||
                (rc = set_str(g, META "pod_controller_name", o, "name")) < 0)
                return rc;
            break;
        }
    }
    if (node && (rc = merge(g, &node->labels)) < 0)
        return rc;
    if (ns && (rc = merge(g, &ns->labels)) < 0)
        return rc;
    return 0;
}

/* containerID of the first status with this name in `statuses`. */
static const char *container_id(json_object *statuses, const char *name, size_t *len)
{
    if (statuses && json_object_is_type(statuses, json_type_array)) {
        size_t n = json_object_array_length(statuses);

        for (size_t i = 0; i < n; i++) {
            json_object *s = json_object_array_get_idx(statuses, i);

            if (strcmp(jstr(s, "name", NULL), name) == 0)
                return jstr(s, "containerID", len);
        }
    }
    *len = 0;
    return "";
}

struct tvec {
    struct labels *v;
    size_t n, cap;
};

static struct labels *tvec_push(struct tvec *t)
{
    if (t->n == t->cap) {
        struct labels *v = array_grow(t->v, &t->cap, t->n, sizeof(*v), 4);

        if (!v)
            return NULL;
        t->v = v;
    }
    labels_init(&t->v[t->n]);
    return &t->v[t->n++];
}

static int add_containers(struct tvec *tv, const struct labels *g, json_object *list,
                          json_object *statuses, bool init, const char *ip, size_t ip_len)
{
    size_t n;

    if (!list || !json_object_is_type(list, json_type_array))
        return 0;
    n = json_object_array_length(list);
    for (size_t i = 0; i < n; i++) {
        json_object *c = json_object_array_get_idx(list, i), *ports = disc__jget(c, "ports");
        size_t nports = ports && json_object_is_type(ports, json_type_array)
                            ? json_object_array_length(ports)
                            : 0;
        const char *name = jstr(c, "name", NULL);
        size_t id_len;
        const char *id = container_id(statuses, name, &id_len);

        for (size_t k = 0; k < (nports ? nports : 1); k++) {
            struct labels *t = tvec_push(tv);
            json_object *p = nports ? json_object_array_get_idx(ports, k) : NULL;
            char addr[512], num[24];
            int rc;

            if (!t)
                return -ENOMEM;
            if ((rc = labels_copy(t, g)) < 0)
                return rc;
            if (!p) {
                rc = labels_setn(t, "__address__", 11, ip, ip_len);
            } else {
                int64_t port = 0;
                json_object *pn = disc__jget(p, "containerPort");
                bool v6 = memchr(ip, ':', ip_len) != NULL;

                if (pn && json_object_is_type(pn, json_type_int))
                    port = json_object_get_int64(pn);
                snprintf(num, sizeof(num), "%lld", (long long)port);
                snprintf(addr, sizeof(addr), "%s%.*s%s:%s", v6 ? "[" : "", (int)ip_len, ip,
                         v6 ? "]" : "", num);
                if ((rc = labels_set(t, "__address__", addr)) == 0 &&
                    (rc = set_str(t, META "pod_container_port_name", p, "name")) == 0 &&
                    (rc = labels_set(t, META "pod_container_port_number", num)) == 0)
                    rc = set_str(t, META "pod_container_port_protocol", p, "protocol");
            }
            if (rc == 0)
                rc = set_str(t, META "pod_container_name", c, "name");
            if (rc == 0)
                rc = set_str(t, META "pod_container_image", c, "image");
            if (rc == 0)
                rc = labels_set(t, META "pod_container_init", init ? "true" : "false");
            if (rc == 0)
                rc = labels_setn(t, META "pod_container_id", strlen(META "pod_container_id"), id,
                                 id_len);
            if (rc < 0)
                return rc;
        }
    }
    return 0;
}

int disc__k8s_pod_targets(json_object *pod, const struct disc__k8s_meta *node, bool need_node,
                          const struct disc__k8s_meta *ns, bool mark_terminating, char *source,
                          size_t source_len, struct labels **targets, size_t *n)
{
    json_object *md = disc__jget(pod, "metadata"), *spec = disc__jget(pod, "spec");
    json_object *status = disc__jget(pod, "status");
    struct labels g = LABELS_INIT;
    struct tvec tv = { 0 };
    const char *ip;
    size_t ip_len;
    int rc;

    *targets = NULL;
    *n = 0;
    if (!md || !json_object_is_type(md, json_type_object))
        return -EINVAL;
    snprintf(source, source_len, "pod/%s/%s", jstr(md, "namespace", NULL), jstr(md, "name", NULL));
    ip = jstr(status, "podIP", &ip_len);
    if (ip_len == 0 || (need_node && !node))
        return 0;
    rc = group_labels(pod, node, ns, &g);
    if (rc == 0 && mark_terminating) {
        json_object *del = disc__jget(md, "deletionTimestamp");

        if (del && json_object_is_type(del, json_type_string))
            rc = labels_set(&g, DISC_K8S_TERMINATING_LABEL, "true");
    }
    if (rc == 0)
        rc = add_containers(&tv, &g, disc__jget(spec, "containers"),
                            disc__jget(status, "containerStatuses"), false, ip, ip_len);
    if (rc == 0)
        rc = add_containers(&tv, &g, disc__jget(spec, "initContainers"),
                            disc__jget(status, "initContainerStatuses"), true, ip, ip_len);
    labels_done(&g);
    if (rc < 0) {
        disc__targets_free(tv.v, tv.n);
        return rc;
    }
    *targets = tv.v;
    *n = tv.n;
    return 0;
}
