/* SPDX-License-Identifier: Apache-2.0 */
/** proflet's configuration file: the top level, assembled from the
 * settings each module owns (scrape jobs, discovery, remote-write and
 * spool, pprof limits, HTTP client settings) and loaded with conf/.
 *
 * Keys are accepted in kebab-case (canonical, as the Pyroscope server) and
 * snake_case (Prometheus/Alloy). A loaded configuration is an immutable,
 * reference-counted struct conf_doc; a reload loads a new one and swaps it
 * in. Loop thread only for the references. */
#ifndef PROFLET_AGENT_CONFIG_H
#define PROFLET_AGENT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/cluster.h"
#include "conf/conf.h"
#include "discovery/discovery.h"
#include "forward/forward.h"
#include "pprof/pprof.h"
#include "relabel/relabel.h"
#include "scrape/scrape.h"

/** `limits:`, the caps on untrusted input and on work in flight. Each
 * module's part is its own struct; the mapping also holds discovery's
 * max-watch-line (struct disc_cfg). */
struct agent_limits {
    struct pprof_limits pprof; /**< profile caps, output gzip level */
    uint64_t max_body_bytes;   /**< scraped body cap unless a job sets body-size-limit */
    unsigned workers;          /**< worker threads, default 2 */
    unsigned max_jobs_backlog; /**< queued CPU jobs, default 1024 */
    uint64_t memory_budget;    /**< peak bytes of all profile jobs in flight */
};

/** The whole file. */
struct agent_config {
    char *log_level;                /**< debug|info|warn|error */
    char *listen_address;           /**< server.listen-address, default 127.0.0.1:4100 */
    uint64_t header_timeout_ms;     /**< server.header-timeout, default 10s (read at start) */
    uint64_t recent_profiles_bytes; /**< server.recent-profiles-bytes: the UI's store (at start) */
    struct conf_kv *external_labels;
    unsigned n_external_labels;
    struct scrape_job_cfg *scrape;
    unsigned n_scrape;
    struct cfg_remote *remote;
    unsigned n_remote;
    struct cfg_spool spool;
    struct agent_limits limits;
    struct disc_cfg discovery;
    struct cluster_cfg cluster;          /**< `clustering:` (cluster/config.c) */
    enum relabel_scheme name_validation; /**< global, default utf8 */
};

/** The embedded default: scrape 127.0.0.1:6060 with the default Go
 * profiles and write to ./proflet-data. */
extern const char agent_default_config[];

/** Loads a file (`path`) or, with `path` NULL, the embedded default.
 * `flags` are conf's (CONF_EXPAND_ENV). On error returns a negative code
 * and writes "FILE:LINE:COL: what was expected" into err. */
int agent_config_load(const char *path, unsigned flags, struct conf_doc **out, char *err,
                      size_t errlen);
/** Same, from memory; `name` is used in messages. */
int agent_config_load_string(const char *yaml, size_t len, const char *name, unsigned flags,
                             struct conf_doc **out, char *err, size_t errlen);
/** The configuration a document holds. */
const struct agent_config *agent_config(const struct conf_doc *doc);
/** Appends the configuration as loaded, as YAML, secrets shown as
 * <secret> (for the web UI). */
void agent_config_dump(const struct conf_doc *doc, struct buf *out);

#endif
