/* SPDX-License-Identifier: Apache-2.0 */
/* Profiles handed to the forwarder: immutable once built, shared by every
 * endpoint through a reference count (docs/design.md "Modules").
 *
 * Threading: the reference count is touched on the loop thread only. Pool
 * jobs (spool writes, directory writes) hold a reference taken on the loop
 * thread and only read the labels and bytes, which never change.
 * Ownership: fwd_profile_new() takes the labels (moved) and the data. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "forward/internal.h"

void fwd__uuid(char out[37])
{
    uint8_t r[16];
    size_t got = 0;

    while (got < sizeof(r)) {
        ssize_t n = getrandom(r + got, sizeof(r) - got, 0);

        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        /* No entropy source: fall back to a weak but unique-enough mix. */
        for (size_t i = got; i < sizeof(r); i++)
            r[i] = (uint8_t)(rand() ^ (int)(uintptr_t)out ^ (int)i);
        break;
    }
    r[6] = (uint8_t)((r[6] & 0x0f) | 0x40);
    r[8] = (uint8_t)((r[8] & 0x3f) | 0x80);
    snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", r[0],
             r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13],
             r[14], r[15]);
}

struct fwd_profile *fwd__profile_new_id(struct labels *labels, uint8_t *data, size_t len,
                                        int64_t start_ns, int64_t end_ns, const char *id)
{
    struct fwd_profile *p = calloc(1, sizeof(*p));

    if (!p) {
        free(data);
        labels_done(labels);
        return NULL;
    }
    labels_init(&p->labels);
    labels_move(&p->labels, labels);
    p->data = data;
    p->len = len;
    p->compression = -1;
    p->start_ns = start_ns;
    p->end_ns = end_ns;
    if (id) {
        snprintf(p->id, sizeof(p->id), "%s", id);
    } else {
        fwd__uuid(p->id);
    }
    p->_refs = 1;
    return p;
}

struct fwd_profile *fwd_profile_new(struct labels *labels, uint8_t *data, size_t len,
                                    int64_t start_ns, int64_t end_ns)
{
    return fwd__profile_new_id(labels, data, len, start_ns, end_ns, NULL);
}

struct fwd_profile *fwd_profile_ref(struct fwd_profile *p)
{
    if (p)
        p->_refs++;
    return p;
}

void fwd_profile_unref(struct fwd_profile *p)
{
    if (!p || --p->_refs > 0)
        return;
    labels_done(&p->labels);
    free(p->data);
    free(p);
}

void fwd__path_component(const char *in, char *out, size_t outlen)
{
    size_t o = 0;

    if (outlen == 0)
        return;
    for (const unsigned char *p = (const unsigned char *)(in ? in : ""); *p && o + 1 < outlen;
         p++) {
        unsigned char c = *p;

        if (c < 0x20 || c == 0x7f || c == '/' || c == '\\' || (o == 0 && c == '.'))
            c = '_';
        out[o++] = (char)c;
    }
    /* Do not end inside a UTF-8 sequence. */
    if (o > 0 && in && strlen(in) > o) {
        size_t k = o;

        while (k > 0 && ((unsigned char)out[k - 1] & 0xc0) == 0x80)
            k--;
        if (k > 0 && ((unsigned char)out[k - 1] & 0xc0) == 0xc0)
            o = k - 1;
    }
    if (o == 0)
        out[o++] = '_';
    out[o] = '\0';
}

char *fwd__file_url_path(const char *url)
{
    if (!url || strncmp(url, "file://", 7) != 0)
        return NULL;
    url += 7;
    if (*url == '\0')
        return NULL;
    return strdup(url);
}
