/** Target discovery: providers (static, file, kubernetes) behind const
 * vtables, and a manager that coalesces their target groups per job.
 *
 * Loop thread only. Providers emit target groups keyed by source
 * ("static/<job>/<i>", a file path, "pod/<ns>/<name>"); an empty group
 * deletes its source. The manager hands changed groups to the agent at most
 * once per coalescing delay. */
#ifndef PROFLET_DISCOVERY_H
#define PROFLET_DISCOVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "agent/config.h"
#include "common/buf.h"
#include "common/labels.h"

struct net_client;

/** One target group, borrowed for the duration of the update callback.
 * Each target's labels already include the group's labels (target labels
 * win), as Prometheus merges them; they are the *discovered* labels. */
struct disc_group {
    const char *source;
    const struct labels *targets;
    size_t n_targets; /**< 0: the source is gone */
};

/** Called with the groups of `job` that changed since the last call. */
typedef void (*disc_update_cb)(const char *job, const struct disc_group *groups, size_t n,
                               void *ud);

struct disc_manager;

/** Creates a manager. `coalesce_ms` bounds how often updates are delivered
 * (0: deliver at once, as `proflet targets` wants). */
struct disc_manager *disc_manager_new(uv_loop_t *loop, struct net_client *http,
                                      uint64_t coalesce_ms, disc_update_cb cb, void *ud);
/** Starts, keeps or stops providers so they match `cfg` (borrowed only
 * during the call: providers copy what they keep). Kubernetes and file
 * providers run once per distinct settings and feed every job using them;
 * static ones are per job. Providers whose settings did not change keep
 * running and emit nothing new; a job that starts using a running provider
 * gets its current groups. Jobs that disappear get empty groups for all
 * their sources; a provider stops when no job uses it any more. Returns 0
 * or a negative code with a message. */
int disc_manager_apply(struct disc_manager *m, const struct cfg *cfg, char *err, size_t errlen);
/** True once every provider has completed its first sync. */
bool disc_manager_ready(const struct disc_manager *m);
/** Appends the discovery metrics in Prometheus text format. */
void disc_manager_metrics(const struct disc_manager *m, struct buf *out);
/** Stops every provider; `cb` runs once all handles are closed. */
void disc_manager_close(struct disc_manager *m, void (*cb)(void *ud), void *ud);

/** Error report: `job` and `provider` ("static", "file", "kubernetes") name
 * the source (for a provider shared by several jobs, `job` lists them,
 * joined by ','); `msg` is borrowed for the call. Runs on the loop thread. */
typedef void (*disc_error_cb)(const char *job, const char *provider, const char *msg, void *ud);
/** Sets (or clears with NULL) the callback that receives every provider
 * error as it happens, for the agent to log. Errors are also counted in the
 * metrics whether or not a callback is set. */
void disc_manager_set_error_cb(struct disc_manager *m, disc_error_cb cb, void *ud);
/** The last error message ("" if none); valid until the next error. */
const char *disc_manager_last_error(const struct disc_manager *m);
/** Number of providers running: one per static job, one per distinct file
 * or kubernetes settings however many jobs share it. */
size_t disc_manager_providers(const struct disc_manager *m);

#endif
