/* SPDX-License-Identifier: Apache-2.0 */
/* A work queue for tests: made with the constructor's one shape, and a
 * failure fails the test with the constructor's own message. Header only,
 * for any test that links common. */
#ifndef PROFLET_TESTS_COMMON_WORKQ_TEST_H
#define PROFLET_TESTS_COMMON_WORKQ_TEST_H

#include "common/workq.h"
#include "test.h"

static inline struct workq *test_workq_new(uv_loop_t *loop, unsigned max_inflight,
                                           unsigned max_backlog)
{
    const struct workq_opts o = { .loop = loop,
                                  .max_inflight = max_inflight,
                                  .max_backlog = max_backlog };
    struct workq *q;
    char err[128] = "";
    int rc = workq_new(&o, &q, err, sizeof(err));

    if (rc < 0)
        test__fail(__FILE__, __LINE__, "workq_new: %d %s", rc, err);
    return q;
}

#endif
