/* SPDX-License-Identifier: Apache-2.0 */
/* Internal interfaces of conf/: the positioned node tree (tree.c), the
 * schema walk that checks and normalises it (walk.c) and the load driver
 * (load.c). Private to the conf library. One load at a time per struct
 * conf_load; no shared state. */
#ifndef PROFLET_CONF_INTERNAL_H
#define PROFLET_CONF_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "conf/conf.h"

/* The parse tree, defaults included: about 14 KiB per scrape job of one
 * static target (every job carries its defaults), so 10,000 such jobs take
 * 140 MiB; the cap bounds what one load may take beside the running
 * configuration, since defaults make it grow faster than the file. */
#define CONF__MAX_ARENA (256u << 20)
#define CONF__MAX_EMIT (64u << 20) /* normalised text handed to libcyaml */
#define CONF__MAX_DEPTH 64
#define CONF__MAX_MAP 65536 /* entries of one user map (labels...) */
#define CONF__MAX_WARNINGS 32

enum { CONF__SCALAR, CONF__MAP, CONF__SEQ };

struct conf__block;

struct conf_node {
    unsigned char type;
    bool synth;         /* made by the loader: no env expansion, internal keys allowed */
    bool plain;         /* plain scalar: may be a YAML null */
    bool converted;     /* scalar already in its loaded form (a numeric default) */
    unsigned line, col; /* 1-based */
    char *s;            /* scalar text, NUL-terminated */
    size_t len;
    struct conf_node **kids; /* seq: items; map: key, value, key, value... */
    unsigned n, cap;
};

struct conf_load {
    const struct conf_schema *schema;
    const char *name;
    unsigned flags;
    char *err;
    size_t errlen;
    struct conf__block *arena;
    size_t arena_bytes;
    bool oom;
    bool env_seen;            /* a "${" was read while expansion was off */
    unsigned at_line, at_col; /* where the parser is, for "config too large" */
    struct conf_node *root;
    char cymsg[256];
    char *warnings[CONF__MAX_WARNINGS];
    size_t n_warnings;
};

/* tree.c */
struct conf_node *conf__node_new(struct conf_load *ld, int type, const struct conf_node *at);
char *conf__strndup(struct conf_load *ld, const char *s, size_t len);
int conf__kid_add(struct conf_load *ld, struct conf_node *p, struct conf_node *k);
int conf__pair_add(struct conf_load *ld, struct conf_node *map, struct conf_node *k,
                   struct conf_node *v);
int conf__map_idx(const struct conf_node *m, const char *key);
int conf__set_text(struct conf_load *ld, struct conf_node *n, const char *s);
int conf__parse(struct conf_load *ld, const char *text, size_t len);
int conf__emit(struct conf_load *ld, struct buf *out);
void conf__arena_free(struct conf_load *ld);

/* walk.c */
/* Checks and normalises the tree against `v` (keys, shapes, scalars,
 * defaults, user maps, section hooks). */
int conf__walk(struct conf_load *ld, struct conf_node **slot, const cyaml_schema_value_t *v);
/* The section describing a mapping's fields, or NULL. */
const struct conf_section *conf__section(const struct conf_schema *s,
                                         const cyaml_schema_field_t *fields);

#endif
