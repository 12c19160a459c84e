/** Target building: discovered labels + a scrape config + its relabel rules
 * -> the (target, profile type) pairs to scrape, exactly as Prometheus'
 * PopulateLabels plus the Pyroscope conventions (DESIGN.md "Targets and
 * labels"), and the Prometheus scrape offset.
 *
 * Pure: no libuv, no curl, no logging, so it is tested without a loop and
 * shared by the scraper, `proflet targets` and /api/v1/targets. */
#ifndef PROFLET_AGENT_TARGET_H
#define PROFLET_AGENT_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/config.h"
#include "common/labels.h"
#include "relabel/relabel.h"

/** One thing to scrape: a target x an enabled profile type. */
struct target_pair {
    struct labels labels;    /**< labels to send: public target labels, service_name,
                                  __name__ (sent name), __delta__="false" where the
                                  delta is ours or godeltaprof's, pyroscope_spy;
                                  external labels are NOT included */
    char *url;               /**< scheme://address/prefix/path?sorted query */
    const struct cfg_profile *profile; /**< borrowed from the config */
    uint64_t interval_ms;
    uint64_t timeout_ms;     /**< scrape-timeout + seconds for duration profiles */
    uint64_t seconds;        /**< `seconds` param of duration profiles, else 0 */
    uint64_t key;            /**< de-duplication key: hash of public labels + URL */
    uint64_t offset_hash;    /**< Prometheus thash: fnv64a(%016d of labels_hash(all
                                  target labels) + URL) */
};

/** The outcome for one discovered target. */
struct target_result {
    struct labels discovered; /**< input labels plus job/__scheme__/... defaults */
    struct labels labels;     /**< after relabeling (incl. "__" labels); empty if dropped */
    bool dropped;             /**< a rule dropped it (silently, as Prometheus) */
    char *error;              /**< malloc'd message if the target is invalid, else NULL */
    struct target_pair *pairs;
    size_t n_pairs;
};

/** Builds one discovered target (`discovered` borrowed). `rules` may be NULL
 * (no relabel-configs). Fills `out` (always target_result_done() it).
 * Returns 0 (even for a dropped or invalid target: see out->dropped and
 * out->error) or -ENOMEM / a relabel error code. */
int target_build(const struct cfg_scrape *sc, const struct relabel_rules *rules,
                 const struct labels *discovered, struct target_result *out);
/** Frees what target_build() filled. */
void target_result_done(struct target_result *r);

/** Prometheus' per-instance offset seed: fnv64a(hostname + external labels
 * as Labels.String(), "{}" when none). */
uint64_t target_offset_seed(const char *hostname, const struct labels *external);
/** Offset of a pair inside its interval: (offset_hash ^ seed) % interval. */
uint64_t target_offset_ns(uint64_t offset_hash, uint64_t seed, uint64_t interval_ns);
/** Nanoseconds from `now_unix_ns` until the first instant t > now with
 * t % interval == offset (reference/prometheus.md §4). */
uint64_t target_first_delay_ns(uint64_t offset_ns, uint64_t interval_ns, uint64_t now_unix_ns);

/** Appends `{"discoveredLabels": {...}, "labels": {...}}` for one result to
 * `out` as JSON (as `promtool check service-discovery` prints it). With
 * `show_dropped`, a dropped target is printed with "dropped": true and
 * "labels": {}. Returns 0 or -ENOMEM. */
struct buf;
int target_result_json(const struct target_result *r, bool show_dropped, struct buf *out);

#endif
