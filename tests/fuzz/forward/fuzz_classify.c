/* Fuzz target: a server's error answer (status + untrusted body) through
 * fwd__classify(), which decides what is resent. Input: 2 bytes of status
 * (big-endian), then the body. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "forward/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const ids[3] = {"11111111-1111-4111-8111-111111111111",
                                       "22222222-2222-4222-8222-222222222222", ""};
    uint8_t states[3];
    char msg[FWD__ERRLEN];
    long status;

    if (size < 2)
        return 0;
    status = (long)((data[0] << 8) | data[1]) % 600;
    fwd__classify(0, status, (const char *)data + 2, size - 2, ids, 3, states, msg, sizeof(msg));
    return 0;
}
