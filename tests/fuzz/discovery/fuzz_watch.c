/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: a watch stream fed in uneven chunks to an incremental
 * json_tokener (as the kubernetes provider does), each event's object, and
 * each item of a list page, run through the pod, node and namespace label
 * builders. Every label set
 * built is well formed (an empty value, e.g. a pod without an IP, is an
 * absent label, as in Prometheus). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz_invariants.h"
#include "discovery/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_targets(struct labels *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fuzz_check_labels(&t[i]);
    }
    disc__targets_free(t, n);
}

static void build(json_object *obj)
{
    struct disc__k8s_meta node, ns;
    struct labels *t;
    size_t n;
    char src[512];

    if (disc__k8s_meta_build(obj, "node", &node) == 0) {
        if (disc__k8s_meta_build(obj, "namespace", &ns) == 0) {
            fuzz_check_labels(&node.labels);
            fuzz_check_labels(&ns.labels);
            if (disc__k8s_pod_targets(obj, &node, true, &ns, false, src, sizeof(src), &t, &n) == 0)
                check_targets(t, n);
            labels_done(&ns.labels);
        }
        labels_done(&node.labels);
    }
    if (disc__k8s_pod_targets(obj, NULL, false, NULL, true, src, sizeof(src), &t, &n) == 0)
        check_targets(t, n);
}

/* A watch event ({"type", "object"}) or a list page ({"metadata",
 * "items": [...]}, as the initial list and relists read it). */
static void handle(json_object *doc)
{
    json_object *obj = NULL, *items = NULL;

    if (json_object_object_get_ex(doc, "object", &obj))
        build(obj);
    if (json_object_object_get_ex(doc, "items", &items) &&
        json_object_is_type(items, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(items) && i < 4096; i++)
            build(json_object_array_get_idx(items, i));
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct json_tokener *tok = json_tokener_new();
    const char *p = (const char *)data;
    size_t step = size ? (size_t)(data[0] % 7) + 1 : 1;

    while (size > 0) {
        size_t chunk = size < step ? size : step;
        json_object *ev = json_tokener_parse_ex(tok, p, (int)chunk);
        enum json_tokener_error err = json_tokener_get_error(tok);
        size_t used = chunk;

        if (err == json_tokener_success) {
            used = json_tokener_get_parse_end(tok);
            if (used == 0 || used > chunk)
                used = chunk;
            if (ev && json_object_is_type(ev, json_type_object))
                handle(ev);
            json_object_put(ev);
            json_tokener_reset(tok);
        } else if (err != json_tokener_continue) {
            json_tokener_reset(tok);
        }
        p += used;
        size -= used;
    }
    json_tokener_free(tok);
    return 0;
}
