/* SPDX-License-Identifier: Apache-2.0 */
/* json-c accessors that tolerate any shape: API server objects and
 * kubeconfig files are untrusted, so a missing member or one of the wrong
 * type reads as absent instead of being trusted. Label-name sanitising and
 * UTF-8 checks come from relabel/ (relabel_sanitize_label_name,
 * relabel_valid_utf8). Pure, any thread (docs/design.md "Modules"). */
#include "discovery/internal.h"

json_object *disc__jget(json_object *o, const char *k)
{
    json_object *v = NULL;

    if (!o || !json_object_is_type(o, json_type_object))
        return NULL;
    return json_object_object_get_ex(o, k, &v) ? v : NULL;
}

const char *disc__jstr(json_object *o, const char *k, const char *dflt)
{
    json_object *v = disc__jget(o, k);

    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : dflt;
}
