/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a token endpoint's answer, as the oauth2 client reads
 * it (net__oauth2_token_parse). Checks what the request path relies on: a
 * token it accepts makes one header line (no CR, LF or NUL) of the form
 * "Authorization: TYPE TOKEN", and nothing leaks (ASan). */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *line = NULL;
    int64_t expires_in = -1;
    int rc = net__oauth2_token_parse((const char *)data, size, &line, &expires_in);

    if (rc == 0) {
        const char *sp;

        assert(line && strncmp(line, "Authorization: ", 15) == 0);
        assert(!strpbrk(line, "\r\n"));
        sp = strchr(line + 15, ' ');
        assert(sp && sp > line + 15 && sp[1]);
    } else {
        assert(!line);
    }
    free(line);
    return 0;
}
