/* SPDX-License-Identifier: Apache-2.0 */
/* Invariants the fuzz targets assert on what a parser produced, so that a
 * wrong result is a finding, not only a crash. abort() makes libFuzzer
 * save the input. */
#ifndef PROFLET_FUZZ_INVARIANTS_H
#define PROFLET_FUZZ_INVARIANTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/labels.h"

#define FUZZ_ASSERT(c)                                                                \
    do {                                                                              \
        if (!(c)) {                                                                   \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #c); \
            abort();                                                                  \
        }                                                                             \
    } while (0)

/* common/labels.h's promise: sorted by name in byte order, names unique and
 * non-empty, values non-empty, lengths that match the strings. */
static inline void fuzz_check_labels(const struct labels *ls)
{
    for (size_t i = 0; i < ls->n; i++) {
        const struct label *l = &ls->v[i];
        size_t nlen = label_name_len(l), vlen = label_value_len(l);

        FUZZ_ASSERT(nlen > 0 && vlen > 0);
        FUZZ_ASSERT(strlen(l->name) == nlen);
        FUZZ_ASSERT(memchr(l->value, '\0', vlen) == NULL || l->value[vlen] == '\0');
        if (i > 0) {
            const struct label *p = &ls->v[i - 1];
            size_t plen = label_name_len(p);
            size_t n = plen < nlen ? plen : nlen;
            int c = memcmp(p->name, l->name, n);

            FUZZ_ASSERT(c < 0 || (c == 0 && plen < nlen));
        }
    }
}

#endif
