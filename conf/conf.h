/* SPDX-License-Identifier: Apache-2.0 */
/** Configuration loading for every module: YAML text -> a libcyaml-loaded,
 * immutable, reference-counted document whose every error names
 * FILE:LINE:COL.
 *
 * Each module owns its settings: the struct, the libcyaml fields that load
 * it, a `struct conf_section` with the metadata libcyaml has no slot for
 * (defaults, units, choices, aliases) and hooks for the checks it alone can
 * make. The program assembles the sections into a `struct conf_schema` and
 * loads files with it; this library knows no module.
 *
 * Pure library: no logging, no global state besides getenv(). Loads may run
 * on any thread, one load per call. A loaded document is never modified. */
#ifndef PROFLET_CONF_H
#define PROFLET_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cyaml/cyaml.h>

struct buf;

/** How a scalar is converted before libcyaml sees it. */
enum conf_unit {
    CONF_UNIT_NONE,
    CONF_UNIT_DURATION, /**< a Prometheus duration ("15s"), loaded as milliseconds */
    CONF_UNIT_BYTES,    /**< "64MiB", "4096", "1GB" (KB = KiB, as Prometheus), loaded as bytes */
};

/** YAML maps whose keys the user chooses become sequences of entries. */
enum conf_mapkind {
    CONF_MAP_NONE,
    CONF_MAP_KV,    /**< {k: v} -> [{.key: k, .value: v}]: struct conf_kv */
    CONF_MAP_PARAM, /**< {k: v | [v...]} -> [{.key: k, .values: [v...]}]: struct conf_param */
    CONF_MAP_NAMED, /**< {k: {a: ...}} -> [{.name: k, a: ...}]: a struct with a `.name` field */
};

/** A string map entry (labels, headers). */
struct conf_kv {
    char *key;
    char *value;
};

/** A query parameter with its values (`params: {seconds: ["30"]}`). */
struct conf_param {
    char *key;
    char **values;
    unsigned n_values;
};

/** libcyaml fields for the two entry types above, for CONF_MAP_KV and
 * CONF_MAP_PARAM sequences. */
extern const cyaml_schema_value_t conf_kv_entry, conf_param_entry, conf_string_entry;

/** Metadata of one key of a mapping. Tables end with an entry whose `key`
 * is NULL. */
struct conf_key {
    const char *key; /**< canonical (kebab-case) spelling */
    enum conf_unit unit;
    const char *def;            /**< default as YAML text, or NULL */
    const char *const *choices; /**< allowed strings, NULL-terminated, or NULL */
    enum conf_mapkind mapkind;
    const cyaml_schema_value_t *shape; /**< shape a CYAML_IGNORE field must have */
    const char *const *aliases;        /**< other accepted spellings, NULL-terminated */
    bool has_num;                      /**< the default is `num`, already in loaded form */
    uint64_t num;
};

/** A key whose default is a number in loaded form (bytes, milliseconds),
 * so the module's own constant is the only place the default is written. */
#define CONF_KEY_NUM(k, u, n)                                \
    {                                                        \
        .key = (k), .unit = (u), .has_num = true, .num = (n) \
    }

struct conf_node;
struct conf_load;

/** One mapping type of the schema, owned by the module it configures. */
struct conf_section {
    const char *name;                   /**< human name for messages: "scrape config" */
    const cyaml_schema_field_t *fields; /**< the libcyaml fields of this mapping */
    /** Key tables: this section's own and those of fragments it inlines
     * (e.g. the HTTP client keys); NULL-terminated. */
    const struct conf_key *const *keys;
    /** Runs before the keys are checked (keys still as written). */
    int (*pre)(struct conf_load *ld, struct conf_node *map);
    /** Runs once the keys are checked, converted and defaulted: cross-field
     * rules and derived keys. */
    int (*post)(struct conf_load *ld, struct conf_node *map);
    /** Runs after libcyaml has loaded `obj` (this mapping's struct) from
     * `map`: whatever needs the loaded values (compiling rules, ...). */
    int (*finish)(struct conf_load *ld, const struct conf_node *map, void *obj);
    /** Frees what `finish` added to `obj`; runs before the document is
     * freed, also for a document whose load failed part way. */
    void (*release)(void *obj);
};

/** A whole configuration language: the top-level value and every section,
 * as a NULL-terminated list of the modules' NULL-terminated lists.
 * Mappings without a section have no metadata. */
struct conf_schema {
    const cyaml_schema_value_t *top;
    const struct conf_section *const *const *sections;
    /** A top-level key whose value is the whole document when it is the
     * only key (Helm values wrap a configuration so), or NULL. */
    const char *envelope;
};

/** Flags of a load. */
enum {
    /** Expand ${VAR} and ${VAR:-default} in values from the environment
     * ($$ is a literal $). Off: the text is taken literally. */
    CONF_EXPAND_ENV = 1 << 0,
};

/** The largest configuration file: one is refused before it is read. */
#define CONF_MAX_FILE (4u << 20)

/** A loaded document. */
struct conf_doc;

/** Loads `len` bytes of YAML. `name` (a file name, "<default>") starts
 * every message. On success returns 0 and a document with one reference;
 * on failure a negative code and "NAME:LINE:COL: what was expected" in
 * `err`. */
int conf_load_string(const struct conf_schema *schema, const char *text, size_t len,
                     const char *name, unsigned flags, struct conf_doc **out, char *err,
                     size_t errlen);
/** Same, from a file (refused before parsing past CONF_MAX_FILE). */
int conf_load_file(const struct conf_schema *schema, const char *path, unsigned flags,
                   struct conf_doc **out, char *err, size_t errlen);
/** The loaded top-level struct; valid while a reference is held. */
void *conf_doc_data(const struct conf_doc *d);
/** The name the document was loaded under. */
const char *conf_doc_name(const struct conf_doc *d);
/** Warnings the load noted (each "NAME:LINE:COL: text"), or NULL. */
const char *conf_doc_warning(const struct conf_doc *d, size_t i);
/** Adds a reference (NULL is fine). */
struct conf_doc *conf_doc_ref(struct conf_doc *d);
/** Drops a reference; frees the document at zero (NULL is fine). */
void conf_doc_unref(struct conf_doc *d);
/** Drops a reference unless it is the last one, and then returns the
 * document instead: nothing else can reach it, so the caller may drop that
 * last reference (and free it) with conf_doc_unref() on any thread. NULL
 * otherwise. Freeing a document of thousands of jobs takes tens of ms. */
struct conf_doc *conf_doc_unref_last(struct conf_doc *d);

/** Appends to `out` a signature of `data` as described by `v`: every
 * value, length-prefixed so that no two settings collide. Modules that keep
 * running objects across reloads compare signatures to tell whether their
 * settings changed. */
void conf_signature(const cyaml_schema_value_t *v, const void *data, struct buf *out);
/** Appends the object `data` (described by `v`) as YAML for people: the keys the
 * schema knows in its order (absent ones left out; durations and sizes as
 * the numbers they are stored as, milliseconds and bytes). Every value
 * under a key for which `is_secret(key)` holds is printed as <secret>. */
void conf_dump(const cyaml_schema_value_t *v, const void *data, bool (*is_secret)(const char *key),
               struct buf *out);

/* ---------------------------------------------------------- node access
 * For section hooks. Nodes belong to the load and die with it. Scalars of
 * keys that were checked hold their converted text (durations and sizes as
 * decimal integers, booleans as "true"/"false"). */

/** The value of `key` in a mapping, or NULL. */
struct conf_node *conf_get(const struct conf_node *map, const char *key);
/** The key node of `key` if the user wrote it (not a default), or NULL. */
struct conf_node *conf_user_key(const struct conf_node *map, const char *key);
/** A scalar's text ("" for other nodes). */
const char *conf_str(const struct conf_node *n);
/** A scalar as an unsigned integer (0 for NULL or non-numbers). */
uint64_t conf_uint(const struct conf_node *n);
/** True for the scalar "true". */
bool conf_true(const struct conf_node *n);
/** True for a YAML null. */
bool conf_null(const struct conf_node *n);
/** True for a mapping / a sequence. */
bool conf_is_map(const struct conf_node *n);
bool conf_is_seq(const struct conf_node *n);
/** Items of a sequence; key/value pairs of a mapping count as two. */
size_t conf_len(const struct conf_node *n);
struct conf_node *conf_at(const struct conf_node *n, size_t i);
/** The node's 1-based line. */
unsigned conf_line(const struct conf_node *n);
/** What a node is, for "got ..." in messages. */
const char *conf_describe(const struct conf_node *n, char *b, size_t blen);

/** Sets `key` of a mapping to a new scalar made by the loader (replacing
 * any value). Returns 0 or a negative code (the error is recorded). */
int conf_set(struct conf_load *ld, struct conf_node *map, const char *key, const char *value);
/** Sets `key` of a mapping to `value` (a node of this load). */
int conf_set_node(struct conf_load *ld, struct conf_node *map, const char *key,
                  struct conf_node *value);
/** Replaces the value of `key` in a mapping, keeping the key where the
 * user wrote it (messages about the entry point there). -ENOENT if absent. */
int conf_replace_value(struct conf_node *map, const char *key, struct conf_node *value);
/** Removes `key` from a mapping. */
void conf_del(struct conf_node *map, const char *key);
/** New nodes made by the loader, positioned at `at`. */
struct conf_node *conf_new_map(struct conf_load *ld, const struct conf_node *at);
struct conf_node *conf_new_seq(struct conf_load *ld, const struct conf_node *at);
struct conf_node *conf_new_str(struct conf_load *ld, const char *s, const struct conf_node *at);
/** Appends `item` to a sequence. */
int conf_append(struct conf_load *ld, struct conf_node *seq, struct conf_node *item);
/** Allocates `n` zeroed bytes that live as long as the load. */
void *conf_alloc(struct conf_load *ld, size_t n);

/** Records the error "NAME:LINE:COL: message" at `at` (NULL: no position)
 * and returns -EINVAL. */
int conf_fail(struct conf_load *ld, const struct conf_node *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** Records a warning at `at`; loading goes on. */
void conf_warn(struct conf_load *ld, const struct conf_node *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/** Records "out of memory" (or "config too large") and returns -ENOMEM. */
int conf_oom(struct conf_load *ld);

#endif
