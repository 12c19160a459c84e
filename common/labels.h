/* SPDX-License-Identifier: Apache-2.0 */
/** Label sets: sorted by name, names unique, values never empty.
 *
 * Prometheus semantics: setting a label to "" deletes it and a missing label
 * reads as "". Names and values are arbitrary bytes up to NUL; validity
 * (legacy or UTF-8 names, UTF-8 values) is checked by the callers that care.
 * Not thread-safe; a set is owned by whoever embeds it and may be handed to a
 * worker as a whole. */
#ifndef PROFLET_COMMON_LABELS_H
#define PROFLET_COMMON_LABELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/intern.h"

/** One label. `name` and `value` are interned strings (common/intern.h):
 * the set holds one reference to each, shared with every other set that
 * holds the same bytes. Their lengths live with the interned copies, so a
 * label is two pointers: a cluster's discovered targets hold millions. */
struct label {
    const char *name;
    const char *value;
};

static inline size_t label_name_len(const struct label *l)
{
    return intern_len(l->name);
}

static inline size_t label_value_len(const struct label *l)
{
    return intern_len(l->value);
}

/** Embeddable label set. `v[0..n)` is sorted by name (byte order). */
struct labels {
    struct label *v;
    size_t n;
    size_t _cap;
};

#define LABELS_INIT \
    {               \
        NULL, 0, 0  \
    }

/** Initialises an empty set. */
void labels_init(struct labels *ls);
/** Frees every label; the set is empty and reusable afterwards. */
void labels_done(struct labels *ls);
/** Sets `name` to `value` (both copied). An empty value deletes the label.
 * Returns 0 or -ENOMEM. */
int labels_set(struct labels *ls, const char *name, const char *value);
/** Length-counted form of labels_set(); the strings need no NUL. */
int labels_setn(struct labels *ls, const char *name, size_t name_len, const char *value,
                size_t value_len);
/** Binary search for the length-counted `name`: its index in `ls->v`, or
 * -(insertion point) - 1 when absent (so any negative value means absent). */
long labels_find(const struct labels *ls, const char *name, size_t len);
/** Returns the value of `name` (borrowed, valid until the set changes) or NULL. */
const char *labels_get(const struct labels *ls, const char *name);
/** Deletes `name` if present. Returns 1 if it was there, else 0. */
int labels_del(struct labels *ls, const char *name);
/** Replaces `dst` with a copy of `src`. Returns 0 or -ENOMEM (dst then empty). */
int labels_copy(struct labels *dst, const struct labels *src);
/** Gives back the spare room of a set that is done growing (for sets that
 * are kept long: discovered targets, a pair's labels). */
void labels_compact(struct labels *ls);
/** Moves `src` into `dst` (dst's old labels are freed; src becomes empty). */
void labels_move(struct labels *dst, struct labels *src);
/** Orders two sets label by label (name, then value); shorter sets first. */
int labels_cmp(const struct labels *a, const struct labels *b);
/** True when both sets hold the same labels. */
bool labels_equal(const struct labels *a, const struct labels *b);
/** XXH64 (seed 0) of Prometheus' `stringlabels` encoding of the whole set:
 * for each label, len(name) name len(value) value, where a length below 255
 * is one byte and otherwise 0xFF followed by 3 bytes little-endian. */
uint64_t labels_hash(const struct labels *ls);
/** labels_hash() over the labels whose names do not start with "__". */
uint64_t labels_hash_public(const struct labels *ls);
/** Writes `{a="1", b="2"}` (Prometheus' Labels.String) into a malloc'd string.
 * Returns NULL on OOM. */
char *labels_to_string(const struct labels *ls);

#endif
