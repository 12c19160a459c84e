/* Fuzz target: file_sd documents; the first byte picks YAML (odd) or JSON. */
#include <stdint.h>
#include <stdlib.h>

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
                         sizeof(err)) == 0)
        disc__file_groups_free(g, n);
    return 0;
}
