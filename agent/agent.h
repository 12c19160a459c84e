/* SPDX-License-Identifier: Apache-2.0 */
/** The agent: one libuv loop that owns the configuration and wires the
 * modules together: the scrape manager (fed by discovery, feeding the
 * forwarder), the work queue they share, and the status server.
 *
 * Internal to agent/. Everything here is touched by the loop thread only. */
#ifndef PROFLET_AGENT_AGENT_H
#define PROFLET_AGENT_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "agent/config.h"
#include "agent/looplag.h"
#include "common/labels.h"
#include "common/workq.h"

struct net_client;
struct httpd;
struct disc_manager;
struct fwd;
struct scrape_manager;
struct cluster;

struct agent {
    uv_loop_t *loop;
    struct conf_doc *doc;    /**< current configuration */
    const char *config_path; /**< NULL: embedded default */
    unsigned config_flags;   /**< conf flags of every load (CONF_EXPAND_ENV) */
    struct workq *work;      /**< the one CPU work queue */
    struct net_client *http; /**< discovery and remote-write */
    struct httpd *status;
    struct disc_manager *disc;
    struct fwd *fwd;
    struct scrape_manager *scrape;
    struct cluster *cluster; /**< which targets are ours (clustering) */
    struct recent *recent;   /**< latest profile per pair, for the web UI */
    uv_signal_t sig_term, sig_int, sig_hup;
    uv_timer_t shutdown_timer;
    struct looplag lag; /**< the loop's own stalls (/metrics) */
    bool stopping;
    uint64_t shutdown_deadline_ms;
    bool log_level_fixed;  /**< --log-level (or `targets`) overrides the file */
    bool enable_lifecycle; /**< --web.enable-lifecycle: POST /-/reload allowed */
    unsigned workers;      /**< pool size fixed at start (limits.workers) */
    bool started;
    uint64_t start_time_ns;
    /* reloads */
    uint64_t reloads_ok, reloads_failed;
    uint64_t last_reload_ns;
    bool last_reload_ok;
    bool reload_running; /**< a load is on the work queue */
    bool reload_again;   /**< asked for meanwhile: one more load follows */
    const char *reload_again_why;
    struct agent__reload_wait *reload_waits;      /**< POST /-/reload: the running load's */
    struct agent__reload_wait *reload_waits_next; /**< ... and the one after it */
    int exit_code;
};

/* reload.c */
/** Loads the configuration file and applies it to every module, all on
 * the loop thread: start-up only, before the loop runs. An invalid file
 * or one a module refuses leaves the running configuration in place.
 * Returns 0 or a negative code (logged). */
int agent__reload(struct agent *a, const char *why);

/** Asks for a reload, loaded on the work queue and applied on the loop
 * when ready (`why` is a static string, logged). A request made while a
 * load runs is coalesced into one more load after it. Returns 0, or a
 * negative code if no load could start (counted and logged). */
int agent__reload_request(struct agent *a, const char *why);

/** A POST /-/reload waiting for its outcome: the load it asked for (the
 * next one, if a load was already running) is applied, then its answer is
 * written with httpd_finish (200, or 500 when the file or a module refused
 * it; 503 at shutdown). Made with agent__reload_wait, given back with
 * agent__reload_wait_free (the status server's `later_free`). */
struct agent__reload_wait;
int agent__reload_wait(struct agent *a, struct agent__reload_wait **out);
void agent__reload_wait_free(void *wait);

/* status.c */
struct httpd_request;
struct httpd_response;
/** The status server's handler (`ud` is the agent). */
void agent__status_handler(const struct httpd_request *req, struct httpd_response *resp, void *ud);
/** Configuration loaded and every discovery provider synced. */
bool agent__ready(const struct agent *a);

/* ui.c */
/** Answers a GET for a page of the web UI; false if `req` is not one. */
bool agent__ui_handle(struct agent *a, const struct httpd_request *req,
                      struct httpd_response *resp);

#endif
