/* SPDX-License-Identifier: Apache-2.0 */
/* Fuzz target: a server's error answer (status + untrusted body) through
 * fwd__classify(), which decides what is resent. Input: 2 bytes of status
 * (big-endian), then the body. Besides not crashing, the verdict must keep
 * the promises the sender relies on (docs/forwarding.md): a 2xx is an
 * acceptance, a 3xx is retried, an error never reads as an acceptance, a
 * partial verdict refuses at least one profile, and one without an id only
 * when it refuses them all (the endpoint's fault, not a profile's), and the message is one printable line inside its buffer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../fuzz_invariants.h"
#include "forward/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const ids[3] = { "11111111-1111-4111-8111-111111111111",
                                        "22222222-2222-4222-8222-222222222222", "" };
    uint8_t states[3];
    char msg[FWD__ERRLEN];
    long status;
    enum fwd__verdict v;
    size_t refused = 0, len;

    if (size < 2)
        return 0;
    status = (long)((data[0] << 8) | data[1]) % 600;
    memset(states, 0xff, sizeof(states));
    v = fwd__classify(0, status, (const char *)data + 2, size - 2, ids, 3, states, msg,
                      sizeof(msg));
    FUZZ_ASSERT(v >= FWD_V_OK && v <= FWD_V_REFUSED);
    FUZZ_ASSERT((v == FWD_V_OK) == (status >= 200 && status < 300));
    if (status >= 300 && status < 400)
        FUZZ_ASSERT(v == FWD_V_RETRY);
    len = strnlen(msg, sizeof(msg));
    FUZZ_ASSERT(len < sizeof(msg));
    for (size_t i = 0; i < len; i++)
        FUZZ_ASSERT((unsigned char)msg[i] >= 0x20);
    if (v != FWD_V_OK)
        FUZZ_ASSERT(len > 0);
    if (v == FWD_V_PARTIAL) {
        for (size_t i = 0; i < 3; i++) {
            FUZZ_ASSERT(states[i] <= FWD_P_DROP);
            refused += states[i] != FWD_P_OK;
        }
        FUZZ_ASSERT(refused > 0);
        FUZZ_ASSERT(states[2] == FWD_P_OK || refused == 3);
    }
    return 0;
}
