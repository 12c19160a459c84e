/* SPDX-License-Identifier: Apache-2.0 */
/* File-based discovery (Prometheus file_sd): one provider per distinct
 * `file-sd-configs` entry (jobs with the same entry share it, see
 * fp_signature(); docs/design.md "The path of a profile").
 *
 * A file holds `[{"targets": [...], "labels": {...}}, ...]` in JSON
 * (`.json`) or YAML (`.yml`, `.yaml`). Group i of file P has source "P:i";
 * every target gets `__address__`, the group's labels and `__meta_filepath`.
 * The globs are expanded on every refresh: at start, `refresh-interval`
 * after the previous one, and 100 ms after a change event from the
 * uv_fs_event watcher on each glob's directory (bursts of events coalesce).
 * A file that fails to read or parse keeps its last good groups and counts
 * an error; a file that vanished from the globs loses its groups; a file
 * with fewer groups than before gets empty groups for the rest.
 *
 * Threading: the provider lives on the loop thread. A refresh (glob, read
 * with a hard cap of limits.max_watch_line, 16 MiB by default, and parse)
 * runs as one job in libuv's pool, so a large or slow file never stalls the
 * loop; its results are applied on the loop. One refresh runs at a time; a
 * request during it runs once more afterwards. Ownership: the provider copies
 * the globs, which the job borrows (they outlive it: the job counts as an
 * open handle for the two-phase close); handles are embedded. */
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "discovery/internal.h"
#include "relabel/relabel.h"

#define FILE_DEBOUNCE_MS 100
#define FILE_DEFAULT_CAP (16u << 20)

/* ---------------------------------------------------------------- parsing */

void disc__file_groups_free(struct disc__file_group *g, size_t n)
{
    if (!g)
        return;
    for (size_t i = 0; i < n; i++)
        disc__targets_free(g[i].targets, g[i].n_targets);
    free(g);
}

static int parse_group(json_object *g, size_t gi, const char *path, struct disc__file_group *out,
                       char *err, size_t errlen)
{
    json_object *targets = NULL, *labels = NULL;
    struct labels base = LABELS_INIT;
    size_t n;
    int rc = 0;

    if (!json_object_is_type(g, json_type_object)) {
        snprintf(err, errlen, "group %zu: not an object", gi);
        return -EINVAL;
    }
    json_object_object_foreach(g, key, val)
    {
        if (strcmp(key, "targets") == 0) {
            targets = val;
        } else if (strcmp(key, "labels") == 0) {
            labels = val;
        } else {
            snprintf(err, errlen, "group %zu: unknown field \"%s\"", gi, key);
            return -EINVAL;
        }
    }
    if (targets && !json_object_is_type(targets, json_type_array)) {
        snprintf(err, errlen, "group %zu: \"targets\" is not a list", gi);
        return -EINVAL;
    }
    if (labels && !json_object_is_type(labels, json_type_object)) {
        snprintf(err, errlen, "group %zu: \"labels\" is not a map", gi);
        return -EINVAL;
    }
    if (labels) {
        json_object_object_foreach(labels, lk, lv)
        {
            const char *v = lv ? json_object_get_string(lv) : "";

            if (lv && !json_object_is_type(lv, json_type_string) &&
                !json_object_is_type(lv, json_type_int) &&
                !json_object_is_type(lv, json_type_double) &&
                !json_object_is_type(lv, json_type_boolean)) {
                snprintf(err, errlen, "group %zu: label \"%s\" is not a string", gi, lk);
                rc = -EINVAL;
                goto out;
            }
            /* model.LabelName.IsValid under UTF-8 validation; values must be
             * valid UTF-8 too. */
            if (!relabel_valid_label_name(lk, strlen(lk), RELABEL_SCHEME_UTF8) ||
                !relabel_valid_utf8(v, strlen(v))) {
                snprintf(err, errlen, "group %zu: \"%s\" is not a valid label name", gi, lk);
                rc = -EINVAL;
                goto out;
            }
            if (labels_set(&base, lk, v) < 0)
                goto oom;
        }
    }
    if (labels_set(&base, "__meta_filepath", path) < 0)
        goto oom;
    n = targets ? json_object_array_length(targets) : 0;
    out->targets = n ? calloc(n, sizeof(*out->targets)) : NULL;
    if (n && !out->targets)
        goto oom;
    for (size_t i = 0; i < n; i++) {
        json_object *t = json_object_array_get_idx(targets, i);
        const char *a;

        if (!t || !json_object_is_type(t, json_type_string)) {
            snprintf(err, errlen, "group %zu: target %zu is not a string", gi, i);
            rc = -EINVAL;
            goto out;
        }
        a = json_object_get_string(t);
        if (labels_copy(&out->targets[i], &base) < 0 ||
            labels_set(&out->targets[i], "__address__", a) < 0)
            goto oom;
        out->n_targets = i + 1;
    }
out:
    labels_done(&base);
    return rc;
oom:
    snprintf(err, errlen, "out of memory");
    labels_done(&base);
    return -ENOMEM;
}

/* The first NUL a JSON text's strings would hold, escaped (\u0000) or raw:
 * its byte offset, or `len` if none. json-c decodes \u0000 into the string
 * but hands keys and values back as C strings, so a NUL would silently cut
 * a label name, value or target short (and merge groups that differ only
 * after it); label values are UTF-8 strings in which NUL has no place. */
static size_t json_first_nul(const char *data, size_t len)
{
    bool in_string = false;

    for (size_t i = 0; i < len; i++) {
        if (data[i] == '\0')
            return i;
        if (!in_string) {
            in_string = data[i] == '"';
        } else if (data[i] == '"') {
            in_string = false;
        } else if (data[i] == '\\' && i + 1 < len) {
            if (data[i + 1] == 'u' && i + 5 < len && memcmp(data + i + 2, "0000", 4) == 0)
                return i;
            i++; /* the escaped character: a quote there does not end the string */
        }
    }
    return len;
}

int disc__file_parse(const char *data, size_t len, bool yaml, const char *path,
                     struct disc__file_group **out, size_t *n_out, char *err, size_t errlen)
{
    json_object *root = NULL;
    struct disc__file_group *g = NULL;
    size_t n = 0;
    int rc = 0;

    *out = NULL;
    *n_out = 0;
    if (yaml) {
        rc = disc__yaml_to_json(data, len, &root, err, errlen);
        if (rc < 0)
            return rc;
    } else {
        struct json_tokener *tok = json_tokener_new();
        enum json_tokener_error jerr;
        size_t nul;

        if (!tok) {
            snprintf(err, errlen, "out of memory");
            return -ENOMEM;
        }
        if (len > INT32_MAX) {
            json_tokener_free(tok);
            snprintf(err, errlen, "file too large");
            return -E2BIG;
        }
        nul = json_first_nul(data, len);
        if (nul < len) {
            size_t line = 1, col = 1;

            for (size_t i = 0; i < nul; i++) {
                if (data[i] == '\n') {
                    line++;
                    col = 1;
                } else {
                    col++;
                }
            }
            json_tokener_free(tok);
            snprintf(err, errlen,
                     "JSON: a NUL character at line %zu column %zu (offset %zu): "
                     "label names, values and targets cannot hold one",
                     line, col, nul);
            return -EINVAL;
        }
        root = json_tokener_parse_ex(tok, data, (int)len);
        jerr = json_tokener_get_error(tok);
        if (jerr == json_tokener_continue) {
            json_object_put(root);
            root = NULL;
            snprintf(err, errlen, "JSON: unexpected end of input");
            rc = -EINVAL;
        } else if (jerr != json_tokener_success) {
            snprintf(err, errlen, "JSON: %s at offset %zu", json_tokener_error_desc(jerr),
                     json_tokener_get_parse_end(tok));
            rc = -EINVAL;
        } else {
            size_t end = json_tokener_get_parse_end(tok);

            for (; end < len; end++) {
                if (data[end] != ' ' && data[end] != '\n' && data[end] != '\t' &&
                    data[end] != '\r') {
                    snprintf(err, errlen, "JSON: trailing data at offset %zu", end);
                    rc = -EINVAL;
                    break;
                }
            }
        }
        json_tokener_free(tok);
        if (rc < 0) {
            json_object_put(root);
            return rc;
        }
    }
    if (root == NULL) {
        /* An empty YAML document (or JSON null): no groups. */
        return 0;
    }
    if (!json_object_is_type(root, json_type_array)) {
        snprintf(err, errlen, "expected a list of target groups");
        rc = -EINVAL;
        goto fail;
    }
    n = json_object_array_length(root);
    if (n) {
        g = calloc(n, sizeof(*g));
        if (!g) {
            snprintf(err, errlen, "out of memory");
            rc = -ENOMEM;
            goto fail;
        }
    }
    for (size_t i = 0; i < n; i++) {
        rc = parse_group(json_object_array_get_idx(root, i), i, path, &g[i], err, errlen);
        if (rc < 0)
            goto fail;
    }
    json_object_put(root);
    *out = g;
    *n_out = n;
    return 0;
fail:
    disc__file_groups_free(g, n);
    json_object_put(root);
    return rc;
}

/* ---------------------------------------------------------------- provider */

struct file_entry {
    char *path;
    size_t n_groups; /* groups currently emitted */
    bool seen;       /* matched by this refresh */
};

struct file_watch {
    uv_fs_event_t h;
    struct file_provider *fp;
    char *dir;
    bool started;
};

struct file_provider {
    struct disc__provider base; /* first */
    char **globs;
    unsigned n_globs;
    uint64_t refresh_ms;
    size_t cap;
    struct file_entry *files;
    size_t n_files;
    struct file_watch *watches;
    size_t n_watches;
    uv_timer_t refresh;
    uv_timer_t debounce;
    unsigned open_handles; /* handles, plus a refresh job in flight */
    bool closing;
    bool refreshing; /* a refresh job is in flight */
    bool again;      /* a refresh was asked for during it */
};

static size_t cap_of(const struct disc_cfg *g)
{
    return g && g->max_watch_line ? (size_t)g->max_watch_line : FILE_DEFAULT_CAP;
}

static void fp_free(struct disc__provider *bp)
{
    struct file_provider *p = (struct file_provider *)bp;

    if (!p)
        return;
    for (unsigned i = 0; i < p->n_globs; i++)
        free(p->globs[i]);
    free(p->globs);
    for (size_t i = 0; i < p->n_files; i++)
        free(p->files[i].path);
    free(p->files);
    for (size_t i = 0; i < p->n_watches; i++)
        free(p->watches[i].dir);
    free(p->watches);
    disc__provider_done(&p->base);
    free(p);
}

static struct disc__provider *fp_create(struct disc_manager *m, const struct disc_cfg *g,
                                        const char *job, const struct disc_sd_cfg *sd,
                                        unsigned index, char *err, size_t errlen)
{
    const struct disc_file_cfg *f = &sd->file_sd[index];
    struct file_provider *p = calloc(1, sizeof(*p));

    if (!p || disc__provider_init(&p->base, &disc__file_ops, m, job) < 0)
        goto oom;
    p->globs = calloc(f->n_files ? f->n_files : 1, sizeof(char *));
    if (!p->globs)
        goto oom;
    /* The paths' form was checked when the file was loaded. */
    for (unsigned i = 0; i < f->n_files; i++) {
        p->globs[i] = strdup(f->files[i] ? f->files[i] : "");
        if (!p->globs[i])
            goto oom;
        p->n_globs++;
    }
    p->refresh_ms = f->refresh_interval_ms ? f->refresh_interval_ms : 300000;
    p->cap = cap_of(g);
    return &p->base;
oom:
    snprintf(err, errlen, "out of memory");
    if (p && p->base.ops)
        fp_free(&p->base);
    else
        free(p);
    return NULL;
}

/* The settings a file provider runs with: its globs, refresh interval and
 * size cap. The job is not part of it, so identical file_sd pieces of
 * several jobs share one provider. */
static char *fp_signature(const struct disc_cfg *g, const struct disc_sd_cfg *sd, unsigned index)
{
    struct buf b;

    buf_init(&b, 1 << 20);
    buf_printf(&b, "cap=%zu;", cap_of(g));
    conf_signature(&disc__file_entry, &sd->file_sd[index], &b);
    return b.data ? buf_steal(&b, NULL) : NULL;
}

static bool is_yaml(const char *path)
{
    const char *ext = strrchr(path, '.');

    return ext && (strcmp(ext, ".yml") == 0 || strcmp(ext, ".yaml") == 0);
}

/* Reads a whole file up to `cap` bytes into a malloc'd, NUL-terminated buffer. */
static int read_capped(const char *path, size_t cap, char **out, size_t *len, char *err,
                       size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct buf b;
    char chunk[65536];
    ssize_t r;
    int rc = 0;

    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -errno;
    }
    buf_init(&b, cap);
    while ((r = read(fd, chunk, sizeof(chunk))) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            rc = -errno;
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
            break;
        }
        rc = buf_append(&b, chunk, (size_t)r);
        if (rc < 0) {
            snprintf(err, errlen, "%s: %s", path,
                     rc == -E2BIG ? "file larger than the limit" : "out of memory");
            break;
        }
    }
    close(fd);
    if (rc < 0) {
        buf_done(&b);
        return rc;
    }
    if (!b.data) {
        *out = strdup("");
        *len = 0;
    } else {
        *out = buf_steal(&b, len);
    }
    if (!*out) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    return 0;
}

static struct file_entry *entry_get(struct file_provider *p, const char *path)
{
    struct file_entry *e;

    for (size_t i = 0; i < p->n_files; i++)
        if (strcmp(p->files[i].path, path) == 0)
            return &p->files[i];
    e = realloc(p->files, (p->n_files + 1) * sizeof(*e));
    if (!e)
        return NULL;
    p->files = e;
    e = &p->files[p->n_files];
    e->path = strdup(path);
    if (!e->path)
        return NULL;
    e->n_groups = 0;
    e->seen = false;
    p->n_files++;
    return e;
}

static void emit_empty(struct file_provider *p, const char *path, size_t from, size_t to)
{
    char src[4200];

    for (size_t i = from; i < to; i++) {
        snprintf(src, sizeof(src), "%s:%zu", path, i);
        disc__emit(&p->base, src, NULL, 0);
    }
}

/* What a refresh job found for one file. */
struct file_result {
    char *path;
    int rc;                   /* 0, or the error of `kind` */
    enum disc__err_kind kind; /* DISC_ERR_FILE_READ or DISC_ERR_FILE_PARSE */
    char err[512];
    struct disc__file_group *groups;
    size_t n_groups;
};

struct refresh_job {
    struct file_provider *p;
    struct file_result *res;
    size_t n_res;
};

static bool result_has(const struct refresh_job *j, const char *path)
{
    for (size_t i = 0; i < j->n_res; i++)
        if (strcmp(j->res[i].path, path) == 0)
            return true;
    return false;
}

/* Pool thread: expands the globs, reads and parses every file. Touches only
 * the job and the provider's immutable globs and cap. */
static void refresh_work(void *arg)
{
    struct refresh_job *j = arg;
    const struct file_provider *p = j->p;

    for (unsigned k = 0; k < p->n_globs; k++) {
        glob_t gl;

        memset(&gl, 0, sizeof(gl));
        if (glob(p->globs[k], GLOB_NOSORT, NULL, &gl) == 0) {
            for (size_t i = 0; i < gl.gl_pathc; i++) {
                struct file_result *r, *res;
                char *data = NULL;
                size_t len = 0;

                if (result_has(j, gl.gl_pathv[i]))
                    continue;
                res = realloc(j->res, (j->n_res + 1) * sizeof(*res));
                if (!res)
                    break;
                j->res = res;
                r = &res[j->n_res];
                memset(r, 0, sizeof(*r));
                if (!(r->path = strdup(gl.gl_pathv[i])))
                    break;
                j->n_res++;
                r->rc = read_capped(r->path, p->cap, &data, &len, r->err, sizeof(r->err));
                if (r->rc < 0) {
                    r->kind = DISC_ERR_FILE_READ;
                    continue;
                }
                r->rc = disc__file_parse(data, len, is_yaml(r->path), r->path, &r->groups,
                                         &r->n_groups, r->err, sizeof(r->err));
                r->kind = DISC_ERR_FILE_PARSE;
                free(data);
            }
        }
        globfree(&gl);
    }
}

static void refresh(struct file_provider *p);

/* Loop thread: applies what the job found. */
static void refresh_done(void *arg, int status)
{
    struct refresh_job *j = arg;
    struct file_provider *p = j->p;
    char src[4200];
    size_t i;

    p->refreshing = false;
    if (!p->closing && status == 0) {
        for (i = 0; i < p->n_files; i++)
            p->files[i].seen = false;
        for (size_t k = 0; k < j->n_res; k++) {
            struct file_result *r = &j->res[k];
            struct file_entry *e = entry_get(p, r->path);

            if (!e)
                continue;
            e->seen = true;
            if (r->rc < 0) {
                /* Keep the last good groups. */
                if (r->kind == DISC_ERR_FILE_READ)
                    disc__error(&p->base, r->kind, "file_sd: %s", r->err);
                else
                    disc__error(&p->base, r->kind, "file_sd: %s: %s", r->path, r->err);
                continue;
            }
            for (size_t g = 0; g < r->n_groups; g++) {
                snprintf(src, sizeof(src), "%s:%zu", r->path, g);
                disc__emit(&p->base, src, r->groups[g].targets, r->groups[g].n_targets);
                r->groups[g].targets = NULL; /* ownership passed */
                r->groups[g].n_targets = 0;
            }
            if (e->n_groups > r->n_groups)
                emit_empty(p, e->path, r->n_groups, e->n_groups);
            e->n_groups = r->n_groups;
        }
        /* Files that are gone lose their groups. */
        for (i = 0; i < p->n_files;) {
            struct file_entry *e = &p->files[i];

            if (e->seen) {
                i++;
                continue;
            }
            emit_empty(p, e->path, 0, e->n_groups);
            free(e->path);
            p->files[i] = p->files[--p->n_files];
        }
        disc__synced(&p->base);
    }
    for (size_t k = 0; k < j->n_res; k++) {
        disc__file_groups_free(j->res[k].groups, j->res[k].n_groups);
        free(j->res[k].path);
    }
    free(j->res);
    free(j);
    if (p->closing) {
        if (--p->open_handles == 0)
            disc__provider_closed(&p->base);
        return;
    }
    p->open_handles--;
    if (p->again) {
        p->again = false;
        refresh(p);
    }
}

static void refresh(struct file_provider *p)
{
    struct refresh_job *j;

    if (p->refreshing) {
        p->again = true;
        return;
    }
    j = calloc(1, sizeof(*j));
    if (!j) {
        disc__error(&p->base, DISC_ERR_FILE_READ, "file_sd: out of memory");
        return;
    }
    j->p = p;
    if (workq_submit(disc__work(p->base.m), 0, refresh_work, refresh_done, j) < 0) {
        free(j);
        disc__error(&p->base, DISC_ERR_FILE_READ, "file_sd: cannot queue a refresh");
        return;
    }
    p->refreshing = true;
    p->open_handles++;
}

static void on_refresh(uv_timer_t *t)
{
    struct file_provider *p = t->data;

    if (!p->closing)
        refresh(p);
}

static void on_fs_event(uv_fs_event_t *h, const char *filename, int events, int status)
{
    struct file_watch *w = h->data;
    struct file_provider *p = w->fp;

    if (p->closing)
        return;
    if (!uv_is_active((uv_handle_t *)&p->debounce))
        uv_timer_start(&p->debounce, on_refresh, FILE_DEBOUNCE_MS, 0);
}

static int fp_start(struct disc__provider *bp, char *err, size_t errlen)
{
    struct file_provider *p = (struct file_provider *)bp;
    uv_loop_t *loop = disc__loop(bp->m);

    uv_timer_init(loop, &p->refresh);
    uv_timer_init(loop, &p->debounce);
    p->refresh.data = p;
    p->debounce.data = p;
    p->open_handles += 2;
    p->watches = calloc(p->n_globs ? p->n_globs : 1, sizeof(*p->watches));
    if (!p->watches) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    for (unsigned k = 0; k < p->n_globs; k++) {
        char *copy = strdup(p->globs[k]), *dir;
        bool dup = false;
        struct file_watch *w;

        if (!copy)
            continue;
        dir = dirname(copy);
        for (size_t i = 0; i < p->n_watches; i++)
            dup = dup || strcmp(p->watches[i].dir, dir) == 0;
        w = &p->watches[p->n_watches];
        if (dup || !(w->dir = strdup(dir))) {
            free(copy);
            continue;
        }
        free(copy);
        w->fp = p;
        p->n_watches++;
        if (uv_fs_event_init(loop, &w->h) < 0)
            continue;
        w->h.data = w;
        p->open_handles++;
        w->started = true;
        /* A missing directory is not fatal: the refresh timer still runs. */
        uv_fs_event_start(&w->h, on_fs_event, w->dir, 0);
    }
    refresh(p);
    uv_timer_start(&p->refresh, on_refresh, p->refresh_ms, p->refresh_ms);
    return 0;
}

static void on_handle_closed(uv_handle_t *h)
{
    struct file_provider *p = h->data;

    if (h->type == UV_FS_EVENT)
        p = ((struct file_watch *)h->data)->fp;
    if (--p->open_handles == 0)
        disc__provider_closed(&p->base);
}

static void fp_close(struct disc__provider *bp)
{
    struct file_provider *p = (struct file_provider *)bp;

    p->closing = true;
    if (p->open_handles == 0) {
        disc__provider_closed(bp);
        return;
    }
    uv_close((uv_handle_t *)&p->refresh, on_handle_closed);
    uv_close((uv_handle_t *)&p->debounce, on_handle_closed);
    for (size_t i = 0; i < p->n_watches; i++)
        if (p->watches[i].started)
            uv_close((uv_handle_t *)&p->watches[i].h, on_handle_closed);
}

const struct disc__provider_ops disc__file_ops = {
    .name = "file",
    .create = fp_create,
    .signature = fp_signature,
    .start = fp_start,
    .close = fp_close,
    .free = fp_free,
};
