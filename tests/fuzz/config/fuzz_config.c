/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: arbitrary bytes as a configuration file. The loader must
 * either return a config (then freed) or an error with a message, never
 * crash, leak or read out of bounds. The corpus holds the test fixtures. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[512];
    struct conf_doc *doc = NULL;
    int rc;

    rc = agent_config_load_string((const char *)data, size, "fuzz.yaml", CONF_EXPAND_ENV, &doc, err,
                                  sizeof(err));
    if (rc == 0 && (!doc || !agent_config(doc)))
        abort();
    if (rc < 0 && (doc || err[0] == '\0'))
        abort();
    conf_doc_unref(doc);
    return 0;
}
