/* SPDX-License-Identifier: Apache-2.0 */
/* Credentials from files, refreshed off the loop thread (see net.h;
 * docs/design.md "Threads").
 *
 * The loop thread owns a secret. A re-read is a workq job (or, for owners
 * without a workq, a uv_queue_work job) that owns a copy of the path and
 * returns the text; the secret is freed only once no
 * re-read is in flight, so a job never outlives what it reports to. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/fsutil.h"
#include "net/net.h"

#define SECRET_MAX 65536
#define DEFAULT_REFRESH_MS 60000

struct net_secret {
    uv_loop_t *loop;
    struct workq *q; /* NULL: uv_queue_work on loop */
    char *value;     /* current value, or NULL */
    char *file;      /* NULL: inline value, never refreshed */
    char *error;
    uint64_t refresh_ms;
    uint64_t read_ms; /* monotonic time of the last read started, 0: expired */
    bool reading;
    bool orphan; /* freed by its owner while a read was in flight */
};

struct reread {
    uv_work_t req; /* without a workq */
    struct net_secret *s;
    char *path;
    char *text;
    int rc;
};

/* Reads and trims; any thread. */
static int read_secret(const char *path, char **out)
{
    int rc = fsutil_read_small(path, SECRET_MAX, out, NULL);

    if (rc == 0)
        fsutil_trim(*out);
    return rc;
}

static void set_result(struct net_secret *s, int rc, char *text)
{
    char msg[512];

    if (rc == 0 && !*text) {
        /* A file being rewritten reads empty for a moment: keep the value
         * it had. */
        free(text);
        rc = -ENODATA;
    }
    if (rc == 0) {
        free(s->value);
        s->value = text;
        free(s->error);
        s->error = NULL;
        return;
    }
    snprintf(msg, sizeof(msg), "reading %s: %s", s->file,
             rc == -E2BIG     ? "file too large"
             : rc == -ENODATA ? "file is empty"
                              : strerror(-rc));
    free(s->error);
    s->error = strdup(msg);
}

static void secret_free(struct net_secret *s)
{
    free(s->value);
    free(s->file);
    free(s->error);
    free(s);
}

static void reread_work(void *arg)
{
    struct reread *r = arg;

    r->rc = read_secret(r->path, &r->text);
}

static void reread_after(void *arg, int status)
{
    struct reread *r = arg;
    struct net_secret *s = r->s;

    s->reading = false;
    if (s->orphan) {
        free(r->text);
        secret_free(s);
    } else if (status == 0) {
        set_result(s, r->rc, r->text);
    } else {
        free(r->text);
    }
    free(r->path);
    free(r);
}

static void uv_reread_work(uv_work_t *w)
{
    reread_work(w->data);
}

static void uv_reread_after(uv_work_t *w, int status)
{
    reread_after(w->data, status);
}

static int submit(struct net_secret *s, struct reread *r)
{
    if (s->q)
        return workq_submit(s->q, 0, reread_work, reread_after, r);
    r->req.data = r;
    return uv_queue_work(s->loop, &r->req, uv_reread_work, uv_reread_after);
}

struct net_secret *net_secret_new(uv_loop_t *loop, struct workq *q, const char *value,
                                  const char *file, uint64_t refresh_ms)
{
    struct net_secret *s;
    char *text = NULL;
    int rc;

    if (!value && !file)
        return NULL;
    if (!(s = calloc(1, sizeof(*s))))
        return NULL;
    s->loop = loop;
    s->q = q;
    s->refresh_ms = refresh_ms ? refresh_ms : DEFAULT_REFRESH_MS;
    if (value) {
        if (!(s->value = strdup(value)))
            goto oom;
        return s;
    }
    if (!(s->file = strdup(file)))
        goto oom;
    /* The first read is synchronous, once per configuration load, so the
     * first request already carries the credential. */
    s->read_ms = clock_mono_ms();
    rc = read_secret(file, &text);
    set_result(s, rc, text);
    return s;
oom:
    secret_free(s);
    return NULL;
}

const char *net_secret_get(struct net_secret *s)
{
    struct reread *r;

    if (!s)
        return NULL;
    if (!s->file || s->reading || (s->read_ms && clock_mono_ms() - s->read_ms < s->refresh_ms))
        return s->value;
    if (!(r = calloc(1, sizeof(*r))) || !(r->path = strdup(s->file))) {
        free(r);
        return s->value;
    }
    r->s = s;
    if (submit(s, r) < 0) {
        free(r->path);
        free(r);
        return s->value;
    }
    s->reading = true;
    s->read_ms = clock_mono_ms();
    return s->value;
}

void net_secret_expire(struct net_secret *s)
{
    if (s)
        s->read_ms = 0;
}

const char *net_secret_error(const struct net_secret *s)
{
    return s ? s->error : NULL;
}

void net_secret_free(struct net_secret *s)
{
    if (!s)
        return;
    if (s->reading)
        s->orphan = true;
    else
        secret_free(s);
}
