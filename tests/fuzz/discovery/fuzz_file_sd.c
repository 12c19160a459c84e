/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: file_sd documents; the first byte picks YAML (odd) or JSON.
 * Every target is a well-formed label set carrying the file's path in
 * __meta_filepath. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz_invariants.h"
#include "discovery/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct disc__file_group *g;
    size_t n;
    char err[256];

    if (size < 1)
        return 0;
    if (disc__file_parse((const char *)data + 1, size - 1, data[0] & 1, "/f", &g, &n, err,
                         sizeof(err)) == 0) {
        for (size_t i = 0; i < n; i++) {
            for (size_t k = 0; k < g[i].n_targets; k++) {
                fuzz_check_labels(&g[i].targets[k]);
                FUZZ_ASSERT(strcmp(labels_get(&g[i].targets[k], "__meta_filepath"), "/f") == 0);
            }
        }
        disc__file_groups_free(g, n);
    }
    return 0;
}
