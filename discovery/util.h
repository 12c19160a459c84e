/** Small json-c helpers shared by the Kubernetes client (k8s.c), its
 * connection setup (k8s_conn.c) and the pod builder (k8s_pod.c). Pure; any
 * thread. */
#ifndef PROFLET_DISCOVERY_UTIL_H
#define PROFLET_DISCOVERY_UTIL_H

#include <json-c/json.h>

/** The member `k` of `o`, or NULL when `o` is not an object or lacks it.
 * Borrowed from `o`. */
json_object *disc__jget(json_object *o, const char *k);
/** The string member `k` of `o`, or `dflt` when it is absent or not a
 * string. Borrowed from `o`. */
const char *disc__jstr(json_object *o, const char *k, const char *dflt);

#endif
