/* Invariants the fuzz targets assert on what a parser produced, so that a
 * wrong result is a finding, not only a crash. abort() makes libFuzzer
 * save the input. */
#ifndef PROFLET_FUZZ_INVARIANTS_H
#define PROFLET_FUZZ_INVARIANTS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/labels.h"

#define FUZZ_ASSERT(c)                                                             \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #c); \
            abort();                                                               \
        }                                                                          \
    } while (0)

/* common/labels.h's promise: sorted by name in byte order, names unique and
 * non-empty, values non-empty, lengths that match the strings. */
static inline void fuzz_check_labels(const struct labels *ls)
{
    for (size_t i = 0; i < ls->n; i++) {
        const struct label *l = &ls->v[i];

        FUZZ_ASSERT(l->name_len > 0 && l->value_len > 0);
        FUZZ_ASSERT(strlen(l->name) == l->name_len);
        FUZZ_ASSERT(memchr(l->value, '\0', l->value_len) == NULL || l->value[l->value_len] == '\0');
        if (i > 0) {
            const struct label *p = &ls->v[i - 1];
            size_t n = p->name_len < l->name_len ? p->name_len : l->name_len;
            int c = memcmp(p->name, l->name, n);

            FUZZ_ASSERT(c < 0 || (c == 0 && p->name_len < l->name_len));
        }
    }
}

#endif
