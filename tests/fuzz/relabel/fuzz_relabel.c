/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: compiles a relabel rule from fuzzed strings (regex,
 * replacement, target label, separator, action) and applies it to fuzzed
 * labels. Input, one field per line:
 *   action / regex / replacement / target_label / separator / name=value...
 * The rule may fail to compile (that is fine); nothing may crash, leak or
 * read out of bounds, and a kept target must still be a valid label set. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "relabel/relabel.h"

#define MAX_INPUT 65536
#define MAX_FIELDS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf, *field[MAX_FIELDS];
    size_t nf = 0;
    char *src[] = { "a", "b" };
    struct relabel_cfg c;
    struct relabel_rules *rs = NULL;
    struct labels ls = LABELS_INIT;
    char err[512];

    if (size > MAX_INPUT)
        return 0;
    buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    for (char *p = buf; nf < MAX_FIELDS;) {
        char *nl = memchr(p, '\n', size - (size_t)(p - buf));

        field[nf++] = p;
        if (!nl)
            break;
        *nl = '\0';
        p = nl + 1;
    }
    memset(&c, 0, sizeof(c));
    c.action = nf > 0 ? field[0] : NULL;
    c.regex = nf > 1 ? field[1] : NULL;
    c.replacement = nf > 2 ? field[2] : NULL;
    c.target_label = nf > 3 ? field[3] : NULL;
    c.separator = nf > 4 ? field[4] : NULL;
    c.source_labels = src;
    c.n_source_labels = 2;
    c.modulus = size % 7 + 1;
    if (c.action && (!strcmp(c.action, "labeldrop") || !strcmp(c.action, "labelkeep"))) {
        c.source_labels = NULL;
        c.n_source_labels = 0;
    }
    for (size_t i = 5; i < nf; i++) {
        char *eq = strchr(field[i], '=');

        if (eq && eq != field[i])
            labels_setn(&ls, field[i], (size_t)(eq - field[i]), eq + 1, strlen(eq + 1));
    }
    if (relabel_rules_new(&c, 1, (size & 1) ? RELABEL_SCHEME_LEGACY : RELABEL_SCHEME_UTF8, &rs, err,
                          sizeof(err)) == 0) {
        if (relabel_apply(rs, &ls) == 1) {
            for (size_t i = 0; i + 1 < ls.n; i++)
                if (strcmp(ls.v[i].name, ls.v[i + 1].name) >= 0 || label_value_len(&ls.v[i]) == 0)
                    abort();
        }
        relabel_rules_free(rs);
    } else if (err[0] == '\0') {
        abort(); /* every failure explains itself */
    }
    labels_done(&ls);
    free(buf);
    return 0;
}
