/* SPDX-License-Identifier: Apache-2.0 */
/* Configuration loads, at start and on every reload (SIGHUP, POST
 * /-/reload): the new file is loaded and checked completely, then applied
 * module by module. An invalid file, or one that discovery or the
 * forwarder cannot apply, fails the reload (counted, logged) and leaves the
 * running configuration in place; at start it fails start-up
 * (docs/design.md "Configuration").
 *
 * A reload (SIGHUP, POST /-/reload) reads, parses and checks the file (and
 * compiles its rules) as one job of the work queue, which owns its copy of
 * the path and the document it loads until the loop takes it: a file of
 * thousands of jobs takes seconds to load, and the loop goes on scraping
 * meanwhile. Only the apply runs on the loop. One load runs at a time;
 * reloads asked for while it runs are coalesced into one more load after
 * it, so that the last request sees the file as it was then. A POST waits
 * for the load it asked for and is answered with its outcome (the server
 * holds the request; the waits are listed here until answered or their
 * connection closes). Start-up loads on the loop, before it runs.
 *
 * Loop thread only, but for the job's function. The agent keeps a
 * reference to the configuration in force; modules keep their own for what
 * they still use. */
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
#include "httpd/httpd.h"
#include "scrape/scrape.h"

/* The discovery half of the jobs, as the discovery manager takes it. */
static int apply_discovery(struct agent *a, const struct agent_config *c, char *err, size_t errlen)
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
    log_warn("limits.workers changes only at restart; the worker pool keeps its size", "running",
             was, "configured", now);
}

/* Frees a configuration on the work queue: one of thousands of jobs takes
 * tens of ms to free, which the loop need not spend. */
static void doc_free_work(void *arg)
{
    conf_doc_unref(arg);
}

static void doc_free_after(void *arg, int status)
{
    if (status < 0) /* cancelled at shutdown: not freed yet */
        conf_doc_unref(arg);
}

/* Lets go of the configuration that was in force: off the loop when this
 * was its last reference. */
static void doc_let_go(struct agent *a, struct conf_doc *doc)
{
    struct conf_doc *last = conf_doc_unref_last(doc);

    if (last && workq_submit(a->work, 0, doc_free_work, doc_free_after, last) < 0)
        conf_doc_unref(last);
}

/* Applies a loaded document (`doc`, owned; NULL when the load failed with
 * `r` and `err`), or counts and logs the failure. */
static int apply(struct agent *a, struct conf_doc *doc, int r, char *err, size_t errlen,
                 const char *why, uint64_t load_ns)
{
    const struct agent_config *c;
    struct scrape_settings ss;
    bool cluster_applied = false;
    uint64_t t0 = clock_mono_ns();
    char load_s[32], apply_s[32];

    if (r < 0)
        goto fail;
    c = agent_config(doc);
    for (size_t i = 0; conf_doc_warning(doc, i); i++)
        log_warn("configuration", "warning", conf_doc_warning(doc, i));
    /* The membership first: it can fail (a kubeconfig, the in-cluster
     * environment, a name that is not a peer) and then changes nothing. */
    r = cluster_apply(a->cluster, &c->cluster, &c->discovery, err, errlen);
    if (r < 0)
        goto fail;
    cluster_applied = true;
    /* Discovery next: what can still fail at apply (a kubeconfig or the
     * in-cluster environment) fails there, and a failed apply changes
     * nothing, so a job that cannot run fails the whole reload and the
     * running configuration goes on. */
    r = apply_discovery(a, c, err, errlen);
    if (r < 0)
        goto fail;
    if (a->fwd) {
        r = fwd_apply(a->fwd, doc, c->remote, c->n_remote, &c->spool, c->external_labels,
                      c->n_external_labels, err, errlen);
        if (r < 0) {
            char again[512];

            if (a->doc && apply_discovery(a, agent_config(a->doc), again, sizeof(again)) < 0)
                log_error("discovery could not go back to the running configuration", "err", again);
            goto fail;
        }
    }
    ss = (struct scrape_settings){ &c->limits.pprof, c->limits.max_body_bytes };
    r = scrape_manager_apply(a->scrape, doc, c->scrape, c->n_scrape, &ss, err, errlen);
    if (r < 0)
        goto fail;
    workq_set_limits(a->work, a->workers, c->limits.max_jobs_backlog);
    workq_set_budget(a->work, c->limits.memory_budget);
    note_fixed(a, c);
    doc_let_go(a, a->doc);
    a->doc = doc;
    if (!a->log_level_fixed && c->log_level && log_parse_level(c->log_level) >= 0)
        log_set_level((enum log_level)log_parse_level(c->log_level));
    a->reloads_ok++;
    a->last_reload_ok = true;
    a->last_reload_ns = clock_wall_ns();
    snprintf(load_s, sizeof(load_s), "%.3f", (double)load_ns / 1e9);
    snprintf(apply_s, sizeof(apply_s), "%.3f", (double)(clock_mono_ns() - t0) / 1e9);
    log_info("configuration reloaded", "trigger", why, "file",
             a->config_path ? a->config_path : "<default>", "load_seconds", load_s, "apply_seconds",
             apply_s);
    return 0;
fail:
    if (cluster_applied && a->doc) {
        char again[512];
        const struct agent_config *run = agent_config(a->doc);

        if (cluster_apply(a->cluster, &run->cluster, &run->discovery, again, sizeof(again)) < 0)
            log_error("clustering could not go back to the running configuration", "err", again);
    }
    doc_let_go(a, doc);
    a->reloads_failed++;
    a->last_reload_ok = false;
    log_error("configuration reload failed; keeping the running configuration", "trigger", why,
              "err", err);
    return r < 0 ? r : -EINVAL;
}

int agent__reload(struct agent *a, const char *why)
{
    struct conf_doc *doc = NULL;
    uint64_t t0 = clock_mono_ns();
    char err[1024];
    int r;

    r = agent_config_load(a->config_path, a->config_flags, &doc, err, sizeof(err));
    r = apply(a, doc, r, err, sizeof(err), why, clock_mono_ns() - t0);
    /* A load on the queue may have read the file before this one: one more
     * follows it, so that what it applies is not the last word. */
    if (a->reload_running) {
        a->reload_again = true;
        a->reload_again_why = why;
    }
    return r;
}

/* ------------------------------------------------------ reloads off the loop */

/* One load on the work queue. The function reads only the job's own
 * fields; the agent is used by the completion, on the loop. */
struct reload_job {
    struct agent *a;
    char *path; /* a copy; NULL: the embedded default */
    unsigned flags;
    const char *why;      /* a static string */
    struct conf_doc *doc; /* the result, owned by the job until applied */
    uint64_t load_ns;
    int rc;
    char err[1024];
};

static void reload_work(void *arg)
{
    struct reload_job *j = arg;
    uint64_t t0 = clock_mono_ns();

    j->rc = agent_config_load(j->path, j->flags, &j->doc, j->err, sizeof(j->err));
    j->load_ns = clock_mono_ns() - t0;
}

static int start_load(struct agent *a, const char *why);

/* ------------------------------------------------- answers to POST /-/reload */

struct agent__reload_wait {
    struct agent__reload_wait *next, **pprev; /* pprev NULL: in no list */
};

static void wait_push(struct agent__reload_wait **head, struct agent__reload_wait *w)
{
    w->next = *head;
    if (w->next)
        w->next->pprev = &w->next;
    *head = w;
    w->pprev = head;
}

void agent__reload_wait_free(void *wait)
{
    struct agent__reload_wait *w = wait;

    if (w->pprev) {
        *w->pprev = w->next;
        if (w->next)
            w->next->pprev = w->pprev;
    }
    free(w);
}

/* Answers every request of `*head`; the server gives each back through
 * agent__reload_wait_free, so the list is taken first. */
static void answer_waits(struct agent *a, struct agent__reload_wait **head, int status,
                         const char *text)
{
    struct agent__reload_wait *w = *head, *next;

    *head = NULL;
    for (; w; w = next) {
        next = w->next;
        w->next = NULL;
        w->pprev = NULL;
        if (a->status)
            httpd_finish(a->status, w, status, NULL, text);
        else
            free(w);
    }
}

int agent__reload_wait(struct agent *a, struct agent__reload_wait **out)
{
    struct agent__reload_wait *w = calloc(1, sizeof(*w));
    bool running = a->reload_running;
    int r;

    *out = NULL;
    if (!w)
        return -ENOMEM;
    r = agent__reload_request(a, "http");
    if (r < 0) {
        free(w);
        return r;
    }
    /* A load already running may have read the file before this request. */
    wait_push(running ? &a->reload_waits_next : &a->reload_waits, w);
    *out = w;
    return 0;
}

static void reload_after(void *arg, int status)
{
    struct reload_job *j = arg;
    struct agent *a = j->a;
    int r;

    a->reload_running = false;
    /* Cancelled at shutdown, or done after it began: nothing to apply. */
    if (status < 0 || a->stopping) {
        conf_doc_unref(j->doc);
        answer_waits(a, &a->reload_waits, 503, "proflet is shutting down\n");
    } else if (apply(a, j->doc, j->rc, j->err, sizeof(j->err), j->why, j->load_ns) < 0) { /* logs */
        answer_waits(a, &a->reload_waits, 500,
                     "reload failed; the running configuration is kept (see log)\n");
    } else {
        answer_waits(a, &a->reload_waits, 200, "configuration reloaded\n");
    }
    free(j->path);
    free(j);
    if (a->reload_again && !a->stopping) {
        a->reload_again = false;
        r = start_load(a, a->reload_again_why);
        if (r < 0) {
            a->reloads_failed++;
            a->last_reload_ok = false;
            log_error("configuration reload could not start", "trigger", a->reload_again_why, "err",
                      strerror(-r));
            answer_waits(a, &a->reload_waits_next, 500,
                         "reload failed; the running configuration is kept (see log)\n");
        } else if ((a->reload_waits = a->reload_waits_next) != NULL) {
            a->reload_waits->pprev = &a->reload_waits;
            a->reload_waits_next = NULL;
        }
    }
    if (a->stopping) {
        a->reload_again = false;
        answer_waits(a, &a->reload_waits_next, 503, "proflet is shutting down\n");
    }
}

/* Starts a load on the work queue. */
static int start_load(struct agent *a, const char *why)
{
    struct reload_job *j = calloc(1, sizeof(*j));
    int r;

    if (!j)
        return -ENOMEM;
    j->a = a;
    j->flags = a->config_flags;
    j->why = why;
    if (a->config_path && !(j->path = strdup(a->config_path))) {
        free(j);
        return -ENOMEM;
    }
    r = workq_submit(a->work, 0, reload_work, reload_after, j);
    if (r < 0) {
        free(j->path);
        free(j);
        return r;
    }
    a->reload_running = true;
    return 0;
}

int agent__reload_request(struct agent *a, const char *why)
{
    int r;

    if (a->stopping)
        return -ECANCELED;
    if (a->reload_running) {
        /* The running load may have read the file before this request:
         * one more follows it, for every request made meanwhile. */
        a->reload_again = true;
        a->reload_again_why = why;
        return 0;
    }
    r = start_load(a, why);
    if (r < 0) {
        a->reloads_failed++;
        a->last_reload_ok = false;
        log_error("configuration reload could not start", "trigger", why, "err", strerror(-r));
    }
    return r;
}
