/* Fuzz target: capped gunzip + protobuf-c decode through the arena
 * allocator + reference validation (pprof_validate), with small caps. */
#include <stdint.h>
#include <stdlib.h>

#include "pprof/pprof.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pprof_limits lim;
    char err[256];

    pprof_limits_default(&lim);
    lim.max_decompressed = 4u << 20;
    lim.max_samples = 20000;
    lim.max_locations = 20000;
    lim.max_functions = 20000;
    lim.max_strings = 40000;
    lim.max_labels = 16;
    lim.max_stack_depth = 256;
    if (pprof_validate(data, size, &lim, err, sizeof(err)) < 0 && err[0] == '\0')
        abort();
    return 0;
}
