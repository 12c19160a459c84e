/* Configuration loads, at start and on every reload (SIGHUP, POST
 * /-/reload): the new file is loaded and checked completely, then applied
 * module by module. An invalid file, or one that discovery or the
 * forwarder cannot apply, fails the reload (counted, logged) and leaves the
 * running configuration in place; at start it fails start-up.
 *
 * Loop thread only. The agent keeps a reference to the configuration in
 * force; modules keep their own for what they still use. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "cluster/cluster.h"
#include "common/clock.h"
#include "common/log.h"
#include "discovery/discovery.h"
#include "forward/forward.h"
#include "scrape/scrape.h"

/* The discovery half of the jobs, as the discovery manager takes it. */
static int apply_discovery(struct agent *a, const struct agent_config *c, char *err,
                           size_t errlen)
{
    struct disc_job *jobs = calloc(c->n_scrape ? c->n_scrape : 1, sizeof(*jobs));
    int r;

    if (!jobs) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    for (unsigned i = 0; i < c->n_scrape; i++)
        jobs[i] = (struct disc_job){ c->scrape[i].job_name, &c->scrape[i].sd };
    r = disc_manager_apply(a->disc, jobs, c->n_scrape, &c->discovery, err, errlen);
    free(jobs);
    return r;
}

/* What a reload cannot change without a restart. */
static void note_fixed(struct agent *a, const struct agent_config *c)
{
    char was[16], now[16];

    if (!a->started || c->limits.workers == a->workers)
        return;
    snprintf(was, sizeof(was), "%u", a->workers);
    snprintf(now, sizeof(now), "%u", c->limits.workers);
    log_warn("limits.workers changes only at restart; the worker pool keeps its size",
             "running", was, "configured", now);
}

int agent__reload(struct agent *a, const char *why)
{
    const struct agent_config *c;
    struct scrape_settings ss;
    struct conf_doc *doc = NULL;
    bool cluster_applied = false;
    char err[1024];
    int r;

    r = agent_config_load(a->config_path, a->config_flags, &doc, err, sizeof(err));
    if (r < 0)
        goto fail;
    c = agent_config(doc);
    for (size_t i = 0; conf_doc_warning(doc, i); i++)
        log_warn("configuration", "warning", conf_doc_warning(doc, i));
    /* The membership first: it can fail (a kubeconfig, the in-cluster
     * environment, a name that is not a peer) and then changes nothing. */
    r = cluster_apply(a->cluster, &c->cluster, &c->discovery, err, sizeof(err));
    if (r < 0)
        goto fail;
    cluster_applied = true;
    /* Discovery next: what can still fail at apply (a kubeconfig or the
     * in-cluster environment) fails there, and a failed apply changes
     * nothing, so a job that cannot run fails the whole reload and the
     * running configuration goes on. */
    r = apply_discovery(a, c, err, sizeof(err));
    if (r < 0)
        goto fail;
    if (a->fwd) {
        r = fwd_apply(a->fwd, doc, c->remote, c->n_remote, &c->spool, c->external_labels,
                      c->n_external_labels, err, sizeof(err));
        if (r < 0) {
            char again[512];

            if (a->doc && apply_discovery(a, agent_config(a->doc), again, sizeof(again)) < 0)
                log_error("discovery could not go back to the running configuration", "err",
                          again);
            goto fail;
        }
    }
    ss = (struct scrape_settings){ &c->limits.pprof, c->limits.max_body_bytes };
    r = scrape_manager_apply(a->scrape, doc, c->scrape, c->n_scrape, &ss, err, sizeof(err));
    if (r < 0)
        goto fail;
    workq_set_limits(a->work, a->workers, c->limits.max_jobs_backlog);
    workq_set_budget(a->work, c->limits.memory_budget);
    note_fixed(a, c);
    conf_doc_unref(a->doc);
    a->doc = doc;
    if (!a->log_level_fixed && c->log_level && log_parse_level(c->log_level) >= 0)
        log_set_level((enum log_level)log_parse_level(c->log_level));
    a->reloads_ok++;
    a->last_reload_ok = true;
    a->last_reload_ns = clock_wall_ns();
    log_info("configuration reloaded", "trigger", why, "file",
             a->config_path ? a->config_path : "<default>");
    return 0;
fail:
    if (cluster_applied && a->doc) {
        char again[512];
        const struct agent_config *run = agent_config(a->doc);

        if (cluster_apply(a->cluster, &run->cluster, &run->discovery, again, sizeof(again)) < 0)
            log_error("clustering could not go back to the running configuration", "err", again);
    }
    conf_doc_unref(doc);
    a->reloads_failed++;
    a->last_reload_ok = false;
    log_error("configuration reload failed; keeping the running configuration", "trigger", why,
              "err", err);
    return r < 0 ? r : -EINVAL;
}
