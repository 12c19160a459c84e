/* SPDX-License-Identifier: Apache-2.0 */
/* Static discovery: the `static-configs` of one job, as fixed target groups
 * (docs/design.md "The path of a profile").
 *
 * For each static config i of the job it emits the group
 * "static/<job>/<i>" with one target per address: `__address__`, the
 * config's `labels`, `service_name` = `application` and `__spy_name__` =
 * `spy-name` when set (the target's `__address__` wins over a label of the
 * same name). It is ready at once and has no handles, so it closes
 * synchronously.
 *
 * Threading: loop thread only. Ownership: the provider keeps a deep copy of
 * the static configs it was built from, only to compare on reload. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "discovery/internal.h"

struct static_provider {
    struct disc__provider base; /* first */
    struct labels *groups;      /* per static config: the group labels */
    char ***targets;            /* per static config: addresses */
    unsigned *n_targets;
    unsigned n;
};

static void sp_free(struct disc__provider *bp)
{
    struct static_provider *p = (struct static_provider *)bp;

    if (!p)
        return;
    for (unsigned i = 0; i < p->n; i++) {
        if (p->groups)
            labels_done(&p->groups[i]);
        for (unsigned k = 0; p->targets && p->targets[i] && k < p->n_targets[i]; k++)
            free(p->targets[i][k]);
        if (p->targets)
            free(p->targets[i]);
    }
    free(p->groups);
    free(p->targets);
    free(p->n_targets);
    disc__provider_done(&p->base);
    free(p);
}

static int group_labels(const struct disc_static_cfg *st, struct labels *out)
{
    int rc = 0;

    labels_init(out);
    for (unsigned k = 0; k < st->n_labels && rc == 0; k++)
        if (st->labels[k].key)
            rc = labels_set(out, st->labels[k].key, st->labels[k].value ? st->labels[k].value : "");
    if (rc == 0 && st->application && st->application[0])
        rc = labels_set(out, "service_name", st->application);
    if (rc == 0 && st->spy_name && st->spy_name[0])
        rc = labels_set(out, "__spy_name__", st->spy_name);
    return rc;
}

static struct disc__provider *sp_create(struct disc_manager *m, const struct disc_cfg *g,
                                        const char *job, const struct disc_sd_cfg *sd,
                                        unsigned index, char *err, size_t errlen)
{
    struct static_provider *p = calloc(1, sizeof(*p));
    unsigned n = sd->n_static;

    (void)g;
    (void)index;
    if (!p || disc__provider_init(&p->base, &disc__static_ops, m, job) < 0)
        goto oom;
    p->groups = calloc(n ? n : 1, sizeof(*p->groups));
    p->targets = calloc(n ? n : 1, sizeof(*p->targets));
    p->n_targets = calloc(n ? n : 1, sizeof(*p->n_targets));
    if (!p->groups || !p->targets || !p->n_targets)
        goto oom;
    p->n = n;
    for (unsigned i = 0; i < n; i++) {
        const struct disc_static_cfg *st = &sd->static_configs[i];

        if (group_labels(st, &p->groups[i]) < 0)
            goto oom;
        p->targets[i] = calloc(st->n_targets ? st->n_targets : 1, sizeof(char *));
        if (!p->targets[i])
            goto oom;
        for (unsigned k = 0; k < st->n_targets; k++) {
            p->targets[i][k] = strdup(st->targets[k] ? st->targets[k] : "");
            if (!p->targets[i][k])
                goto oom;
            p->n_targets[i]++;
        }
    }
    return &p->base;
oom:
    snprintf(err, errlen, "out of memory");
    if (p && p->base.ops)
        sp_free(&p->base);
    else
        free(p);
    return NULL;
}

static bool sp_same(const struct disc__provider *bp, const struct disc_sd_cfg *sd, unsigned index)
{
    const struct static_provider *p = (const struct static_provider *)bp;
    bool same = true;

    (void)index;
    if (p->n != sd->n_static)
        return false;
    for (unsigned i = 0; i < p->n && same; i++) {
        const struct disc_static_cfg *st = &sd->static_configs[i];
        struct labels g;

        if (st->n_targets != p->n_targets[i])
            return false;
        for (unsigned k = 0; k < st->n_targets; k++)
            if (strcmp(p->targets[i][k], st->targets[k] ? st->targets[k] : "") != 0)
                return false;
        if (group_labels(st, &g) < 0) {
            labels_done(&g);
            return false;
        }
        same = labels_equal(&g, &p->groups[i]);
        labels_done(&g);
    }
    return same;
}

static int sp_start(struct disc__provider *bp, char *err, size_t errlen)
{
    struct static_provider *p = (struct static_provider *)bp;
    char source[512];

    for (unsigned i = 0; i < p->n; i++) {
        struct labels *t = NULL;
        size_t nt = p->n_targets[i];

        if (nt) {
            t = calloc(nt, sizeof(*t));
            if (!t)
                goto oom;
            for (size_t k = 0; k < nt; k++) {
                if (labels_copy(&t[k], &p->groups[i]) < 0 ||
                    labels_set(&t[k], "__address__", p->targets[i][k]) < 0) {
                    disc__targets_free(t, nt);
                    goto oom;
                }
            }
        }
        snprintf(source, sizeof(source), "static/%s/%u", bp->job, i);
        if (disc__emit(bp, source, t, nt) < 0)
            goto oom;
    }
    disc__synced(bp);
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
}

static void sp_close(struct disc__provider *bp)
{
    disc__provider_closed(bp);
}

const struct disc__provider_ops disc__static_ops = {
    .name = "static",
    .create = sp_create,
    .same = sp_same,
    .start = sp_start,
    .close = sp_close,
    .free = sp_free,
};
