/* SPDX-License-Identifier: Apache-2.0 */
/* YAML -> json-c tree, for file_sd YAML files and kubeconfig files
 * (docs/design.md "Modules").
 *
 * Walks libyaml's event stream and builds the first document as json-c
 * objects: mappings become objects, sequences arrays, and every scalar a
 * string (as Go's YAML decoder hands them to string fields), except a plain
 * `~`, `null` or empty scalar, which becomes JSON null. Anchors/aliases are
 * rejected (no billion-laughs expansion), and so is a scalar holding a NUL
 * (json-c's readers would cut it there). Depth and node count are capped.
 *
 * Threading: pure, any thread. Ownership: the caller owns the returned
 * object (json_object_put). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "discovery/internal.h"

#define YAML_MAX_DEPTH 64
#define YAML_MAX_NODES 4000000

struct frame {
    json_object *obj;
    char *key; /* pending key in a mapping */
};

static json_object *scalar(const yaml_event_t *ev)
{
    const char *v = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;

    if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        (n == 0 || (n == 1 && v[0] == '~') || (n == 4 && memcmp(v, "null", 4) == 0) ||
         (n == 4 && (memcmp(v, "Null", 4) == 0 || memcmp(v, "NULL", 4) == 0))))
        return NULL;
    return json_object_new_string_len(v, (int)n);
}

/* Adds `v` (owned) into the frame; returns 0 or -ENOMEM / -EINVAL. */
static int add(struct frame *f, json_object *v, bool is_scalar, const yaml_event_t *ev)
{
    if (json_object_is_type(f->obj, json_type_array)) {
        return json_object_array_add(f->obj, v) == 0 ? 0 : -ENOMEM;
    }
    if (!f->key) {
        if (!is_scalar) {
            json_object_put(v);
            return -EINVAL; /* complex keys are not supported */
        }
        f->key = strndup(ev->data.scalar.value ? (const char *)ev->data.scalar.value : "",
                         ev->data.scalar.length);
        json_object_put(v);
        return f->key ? 0 : -ENOMEM;
    }
    json_object_object_add(f->obj, f->key, v);
    free(f->key);
    f->key = NULL;
    return 0;
}

int disc__yaml_to_json(const char *data, size_t len, json_object **out, char *err, size_t errlen)
{
    yaml_parser_t parser;
    yaml_event_t ev;
    struct frame st[YAML_MAX_DEPTH];
    int depth = 0, rc = 0;
    size_t nodes = 0;
    json_object *root = NULL;
    bool done = false, have_root = false;

    *out = NULL;
    if (!yaml_parser_initialize(&parser)) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
    while (!done) {
        json_object *v = NULL;
        bool is_scalar = false, push = false;

        if (!yaml_parser_parse(&parser, &ev)) {
            snprintf(err, errlen, "YAML error at line %zu column %zu: %s",
                     parser.problem_mark.line + 1, parser.problem_mark.column + 1,
                     parser.problem ? parser.problem : "syntax error");
            rc = -EINVAL;
            break;
        }
        switch (ev.type) {
        case YAML_STREAM_END_EVENT:
        case YAML_DOCUMENT_END_EVENT:
            done = true;
            break;
        case YAML_ALIAS_EVENT:
            snprintf(err, errlen, "YAML aliases are not supported (line %zu)",
                     ev.start_mark.line + 1);
            rc = -EINVAL;
            break;
        case YAML_SCALAR_EVENT:
            /* A "\0" escape decodes to a NUL that every C-string reader of
             * the tree would cut the scalar at: refused, not truncated. */
            if (ev.data.scalar.length &&
                memchr(ev.data.scalar.value, 0, ev.data.scalar.length) != NULL) {
                snprintf(err, errlen, "YAML scalar at line %zu column %zu holds a NUL character",
                         ev.start_mark.line + 1, ev.start_mark.column + 1);
                rc = -EINVAL;
                break;
            }
            v = scalar(&ev);
            is_scalar = true;
            break;
        case YAML_MAPPING_START_EVENT:
            v = json_object_new_object();
            push = true;
            break;
        case YAML_SEQUENCE_START_EVENT:
            v = json_object_new_array();
            push = true;
            break;
        case YAML_MAPPING_END_EVENT:
        case YAML_SEQUENCE_END_EVENT:
            depth--;
            free(st[depth].key);
            st[depth].key = NULL;
            if (depth == 0)
                done = true;
            break;
        default:
            break;
        }
        if (rc == 0 && (is_scalar || push)) {
            if (++nodes > YAML_MAX_NODES) {
                snprintf(err, errlen, "YAML document has too many nodes");
                json_object_put(v);
                rc = -E2BIG;
            } else if (push && !v) {
                snprintf(err, errlen, "out of memory");
                rc = -ENOMEM;
            } else if (depth == 0) {
                if (have_root) {
                    json_object_put(v);
                } else {
                    root = v;
                    have_root = true;
                    if (is_scalar)
                        done = true;
                }
            } else {
                /* The parent takes the reference; the frame borrows it. */
                rc = add(&st[depth - 1], v, is_scalar, &ev);
                if (rc < 0)
                    snprintf(err, errlen, "unsupported YAML key at line %zu",
                             ev.start_mark.line + 1);
            }
            if (rc == 0 && push) {
                if (depth >= YAML_MAX_DEPTH) {
                    snprintf(err, errlen, "YAML nesting deeper than %d", YAML_MAX_DEPTH);
                    rc = -E2BIG;
                } else {
                    st[depth].obj = v;
                    st[depth].key = NULL;
                    depth++;
                }
            }
        }
        yaml_event_delete(&ev);
        if (rc < 0)
            break;
    }
    while (depth > 0) {
        depth--;
        free(st[depth].key);
    }
    yaml_parser_delete(&parser);
    if (rc < 0) {
        json_object_put(root);
        return rc;
    }
    *out = root;
    return 0;
}
