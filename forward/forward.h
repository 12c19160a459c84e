/** Forwarding: every profile the scraper produces goes to every configured
 * endpoint (Pyroscope push, legacy /ingest, or a local directory), each with
 * its own bounded queue, batching, retries and disk spool.
 *
 * Loop thread only; compression and disk work run in the libuv pool.
 * fwd_submit() never blocks and never waits for a push. */
#ifndef PROFLET_FORWARD_H
#define PROFLET_FORWARD_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "agent/config.h"
#include "common/buf.h"
#include "common/labels.h"

struct net_client;

/** An immutable, reference-counted profile ready to send. */
struct fwd_profile {
    struct labels labels; /**< final labels: service_name, __name__, job, instance, ... */
    uint8_t *data;        /**< gzip pprof bytes */
    size_t len;
    int64_t start_ns;     /**< scrape window (used by /ingest from/until) */
    int64_t end_ns;
    char id[37];          /**< random UUID, the RawSample ID */
    unsigned _refs;
};

/** Creates a profile taking ownership of `labels` (moved) and `data`
 * (malloc'd). Generates its UUID. Returns NULL on OOM (data is then freed). */
struct fwd_profile *fwd_profile_new(struct labels *labels, uint8_t *data, size_t len,
                                    int64_t start_ns, int64_t end_ns);
/** Adds a reference. */
struct fwd_profile *fwd_profile_ref(struct fwd_profile *p);
/** Drops a reference; frees at zero (NULL is fine). */
void fwd_profile_unref(struct fwd_profile *p);

struct fwd;

/** Creates the forwarder. */
struct fwd *fwd_new(uv_loop_t *loop, struct net_client *http);
/** Makes the endpoints match `cfg->remote` and `cfg->spool` (borrowed during
 * the call). Endpoints whose settings did not change keep their queues.
 * Returns 0 or a negative code with a message (nothing changed then). */
int fwd_apply(struct fwd *f, const struct cfg *cfg, char *err, size_t errlen);
/** Hands a profile to every endpoint (each takes its own reference; the
 * caller keeps its own). Never blocks. */
void fwd_submit(struct fwd *f, struct fwd_profile *p);
/** Appends the forwarding metrics in Prometheus text format. */
void fwd_metrics(const struct fwd *f, struct buf *out);
/** Flushes: tries to deliver what is queued until `deadline_ms` from now,
 * spools the rest, then closes everything and calls `cb`. */
void fwd_close(struct fwd *f, uint64_t deadline_ms, void (*cb)(void *ud), void *ud);

/** Sets a callback for endpoint errors (a failed request, a disk error...),
 * called on the loop thread with the endpoint name and a message (both
 * borrowed for the call). The library never logs; the agent may, rate
 * limited. `cb` may be NULL. */
void fwd_set_error_cb(struct fwd *f, void (*cb)(const char *endpoint, const char *msg, void *ud),
                      void *ud);
/** The last endpoint error ("name: message"), "" if none. Valid until the
 * next call into the forwarder. */
const char *fwd_last_error(const struct fwd *f);

#endif
