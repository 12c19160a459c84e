/* SPDX-License-Identifier: Apache-2.0 */
/* regex_probe: the C side of regexdiff.py. Compiles and runs regexes
 * exactly as relabeling does (relabel/regex.c: "^(?s:" + re + ")$" on RE2)
 * and prints what Go's regexp prints in tests/relabel/go_regex_probe.go.
 *
 * Input, one case per line: the regex and the subject in hex, separated by
 * a space. Output, one line per case: "ERR <message in hex>", "NOMATCH" or
 * "MATCH s0,e0 s1,e1 ..." with -1,-1 for a group that took no part. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "relabel/internal.h"

#define MAX_LINE (1u << 20)

static size_t unhex(const char *h, size_t n, char *out)
{
    size_t o = 0;

    for (size_t i = 0; i + 1 < n; i += 2) {
        unsigned v;

        if (sscanf(h + i, "%2x", &v) != 1)
            break;
        out[o++] = (char)v;
    }
    out[o] = '\0';
    return o;
}

static void run(const char *pat, size_t plen, const char *subj, size_t slen)
{
    static char err[MAX_LINE];
    struct relabel__regex *re = NULL;
    size_t *ov;
    uint32_t ng;
    int rc;

    if (relabel__regex_compile(pat, plen, &re, err, sizeof(err)) != 0) {
        fputs("ERR ", stdout);
        for (const char *p = err; *p; p++)
            printf("%02x", (unsigned char)*p);
        putchar('\n');
        return;
    }
    ng = relabel__regex_groups(re);
    ov = malloc(2 * ((size_t)ng + 1) * sizeof(*ov));
    rc = ov ? relabel__regex_search(re, subj, slen, 0, ov) : -1;
    if (rc < 0) {
        printf("FAIL %d\n", rc);
    } else if (rc == 0) {
        puts("NOMATCH");
    } else {
        fputs("MATCH", stdout);
        for (uint32_t i = 0; i <= ng; i++) {
            if (ov[2 * i] == RELABEL__UNSET)
                fputs(" -1,-1", stdout);
            else
                printf(" %zu,%zu", ov[2 * i], ov[2 * i + 1]);
        }
        putchar('\n');
    }
    free(ov);
    relabel__regex_free(re);
}

int main(void)
{
    char *line = malloc(2 * MAX_LINE + 2), *pat = malloc(MAX_LINE), *subj = malloc(MAX_LINE);

    if (!line || !pat || !subj)
        return 1;
    while (fgets(line, 2 * MAX_LINE + 2, stdin)) {
        size_t len = strcspn(line, "\n");
        char *sp = memchr(line, ' ', len);
        size_t plen, slen = 0;

        line[len] = '\0';
        plen = unhex(line, sp ? (size_t)(sp - line) : len, pat);
        if (sp)
            slen = unhex(sp + 1, strlen(sp + 1), subj);
        run(pat, plen, subj, slen);
    }
    free(line);
    free(pat);
    free(subj);
    return 0;
}
