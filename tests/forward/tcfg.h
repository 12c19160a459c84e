/* Test helper: the forwarder's settings as the configuration file gives
 * them (endpoints, spool, global external labels), built by hand, and
 * fwd_apply() of them. Header-only. */
#ifndef PROFLET_TESTS_FORWARD_TCFG_H
#define PROFLET_TESTS_FORWARD_TCFG_H

#include "forward/forward.h"

struct tcfg {
    struct cfg_remote *remote;
    unsigned n_remote;
    struct cfg_spool spool;
    struct conf_kv *external_labels;
    unsigned n_external_labels;
};

static inline int tcfg_apply(struct fwd *f, const struct tcfg *c, char *err, size_t errlen)
{
    return fwd_apply(f, c->remote, c->n_remote, &c->spool, c->external_labels,
                     c->n_external_labels, err, errlen);
}

#endif
