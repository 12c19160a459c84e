/* SPDX-License-Identifier: Apache-2.0 */
/* Basic auth for the status server (docs/design.md "HTTP server").
 *
 * Purpose. Parses a request's Basic credentials, checks them against the
 * web config's bcrypt hashes (libxcrypt's bcrypt, $2a$/$2b$/$2y$) and
 * hands the verdict back to the server (server.c) through the callback it
 * gave httpd__auth_init: auth.c never calls into the server.
 *
 * Basic auth. A request whose credentials are in the cache of verified
 * ones is answered at once; any other costs a bcrypt check, which runs on
 * a detached thread of its own (at most AUTH_RUNNING at once) so that
 * neither the loop nor the shared work queue waits for it, and shutdown
 * does not either: a check still running when the server closes finishes
 * on its own and its result is dropped. Checks wait per client address
 * (IPv6: per /64), at most AUTH_PEER_QUEUE each (more get 429 on a
 * connection that stays open: reconnecting would cost a TLS handshake);
 * one check per address runs at a time, and the next goes to the address
 * served least recently, those without a recent wrong password first, so
 * a flood from some addresses delays a login from another by at most the
 * checks already running. An unknown user is
 * checked against a dummy hash of the configured cost (made by web.c at
 * load), so its answer takes as long as a known user's. The thread owns
 * its job (password, hash); the job's link to its connection is cut on the
 * loop when the connection closes.
 *
 * Threading and ownership. Loop thread, except auth_thread() and
 * httpd__auth_verify() (pure), which run on the check's own thread and
 * touch only the job and the hub (under its mutex). The runtime is
 * embedded in the server; a waiter (struct httpd__auth_wait) in its
 * connection, whose credentials it owns (the password is cleansed when
 * freed). The hub is shared by the server and the running checks: the
 * last to let go frees it. */
#include <crypt.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <netinet/in.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include "httpd/internal.h"

#define AUTH_RUNNING 1     /* password checks running at once: one core at most */
#define AUTH_PEER_QUEUE 4  /* checks waiting per client address */
#define AUTH_PEERS 512     /* client addresses tracked (connections are fewer) */
#define AUTH_FAIL_MS 30000 /* how long a wrong password puts its address last */

_Static_assert(SHA256_DIGEST_LENGTH == sizeof(((struct httpd__auth *)0)->cache[0]),
               "the cache holds SHA-256 digests");

/* A client address with checks waiting or running, or a recent failure. */
struct httpd__auth_peer {
    unsigned char addr[16];
    bool used;
    bool running;                      /* one of its checks runs */
    unsigned queued;                   /* waiters in q */
    STAILQ_HEAD(, httpd__auth_wait) q; /* waiting, first come first */
    uint64_t served;                   /* serial of its last check (or arrival): round robin */
    uint64_t failed_ms;                /* loop time of its last wrong password; 0: none */
};

/* One check, owned by its thread until it is handed to the loop. */
struct httpd__auth_job {
    struct httpd__auth_hub *hub;
    struct httpd__auth_wait *w; /* loop thread only; NULL once the connection closed */
    struct httpd__auth_peer *peer;
    char *pass, *hash;
    bool known; /* the user exists (else the hash is the dummy) */
    bool ok;
    struct httpd__auth_job *next;
};

/* Where finished checks meet the loop. Shared by the server and running
 * checks; the last to let go frees it. */
struct httpd__auth_hub {
    pthread_mutex_t mu;
    uv_async_t *async; /* NULL once the server closed */
    struct httpd__auth_job *done;
    unsigned refs;
};

static void free_secret(char *p)
{
    if (p)
        OPENSSL_cleanse(p, strlen(p));
    free(p);
}

static bool cache_key(const char *user, const char *pass, const char *hash, unsigned char *md)
{
    size_t u = strlen(user) + 1, p = strlen(pass) + 1, h = strlen(hash);
    unsigned char *all = malloc(u + p + h);
    bool ok;

    /* user NUL password NUL hash: a changed hash invalidates the entry */
    if (!all)
        return false;
    memcpy(all, user, u);
    memcpy(all + u, pass, p);
    memcpy(all + u + p, hash, h);
    ok = EVP_Digest(all, u + p + h, md, NULL, EVP_sha256(), NULL) == 1;
    OPENSSL_cleanse(all, u + p + h);
    free(all);
    return ok;
}

static void auth_forget(struct httpd__auth_wait *w)
{
    free_secret(w->pass);
    w->pass = NULL;
}

/* "Basic base64(user:password)" -> malloc'd user and password. 0 or -1. */
int httpd__basic_parse(const char *h, char **user, char **pass)
{
    unsigned char dec[sizeof(((struct httpd__req *)0)->authorization)];
    const char *colon;
    size_t len, pad;
    int n, rc = -1;

    *user = *pass = NULL;
    if (strncasecmp(h, "Basic ", 6) != 0)
        return -1;
    h += 6;
    while (*h == ' ')
        h++;
    len = strlen(h);
    if (len == 0 || len % 4 != 0 || len / 4 * 3 >= sizeof(dec))
        return -1;
    /* Only base64 and at most two '=' at the end: EVP_DecodeBlock alone
     * also takes '=' anywhere (as zero bits), a third '=', and trims
     * leading tabs and trailing '-', CR and LF. */
    pad = h[len - 1] == '=' ? 1 + (h[len - 2] == '=') : 0;
    if (strspn(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") != len - pad)
        return -1;
    n = EVP_DecodeBlock(dec, (const unsigned char *)h, (int)len);
    if (n < 0)
        return -1;
    n -= (int)pad;
    dec[n] = '\0';
    if (!memchr(dec, '\0', (size_t)n) && (colon = strchr((char *)dec, ':')) != NULL) {
        *user = strndup((char *)dec, (size_t)(colon - (char *)dec));
        *pass = strdup(colon + 1);
        if (*user && *pass) {
            rc = 0;
        } else {
            free(*user);
            free(*pass);
            *user = *pass = NULL;
        }
    }
    OPENSSL_cleanse(dec, sizeof(dec));
    return rc;
}

/* The request's credentials -> w->user/pass. 0 or -1. */
static int auth_parse(struct httpd__auth_wait *w, const char *authorization, bool too_long)
{
    free(w->user);
    w->user = NULL;
    auth_forget(w);
    if (too_long)
        return -1;
    return httpd__basic_parse(authorization, &w->user, &w->pass);
}

bool httpd__auth_verify(const char *password, const char *hash)
{
    struct crypt_data cd;
    const char *h;
    size_t n = strlen(hash);

    /* crypt_rn: libxcrypt's crypt_r that returns NULL on failure (and that
     * sanitizers do not intercept: their crypt_r hook breaks with it). */
    memset(&cd, 0, sizeof(cd));
    h = crypt_rn(password, hash, &cd, (int)sizeof(cd));
    return h && strlen(h) == n && CRYPTO_memcmp(h, hash, n) == 0;
}

static void job_free(struct httpd__auth_job *j)
{
    free_secret(j->pass);
    free(j->hash);
    free(j);
}

/* Drops one reference to the hub; the last frees it. */
static void hub_unref_locked(struct httpd__auth_hub *h)
{
    bool last = --h->refs == 0;

    pthread_mutex_unlock(&h->mu);
    if (last) {
        pthread_mutex_destroy(&h->mu);
        free(h);
    }
}

/* A check's thread: bcrypt, then the result to the loop, or away if the
 * server has closed meanwhile. */
static void *auth_thread(void *arg)
{
    struct httpd__auth_job *j = arg;
    struct httpd__auth_hub *h = j->hub;

    j->ok = httpd__auth_verify(j->pass, j->hash) && j->known;
    pthread_mutex_lock(&h->mu);
    if (h->async) {
        j->next = h->done;
        h->done = j;
        uv_async_send(h->async);
        j = NULL;
    }
    hub_unref_locked(h);
    if (j)
        job_free(j);
    return NULL;
}

static void auth_start_next(struct httpd__auth *a);

/* A finished check, on the loop: answer its connection if still open. */
static void auth_finish(struct httpd__auth *a, struct httpd__auth_job *j)
{
    struct httpd__auth_wait *w = j->w;

    a->running--;
    j->peer->running = false;
    j->peer->failed_ms = j->ok ? 0 : uv_now(a->loop);
    if (w) {
        w->job = NULL;
        if (j->ok && cache_key(w->user, j->pass, j->hash, a->cache[a->cache_next])) {
            a->cache_next = (a->cache_next + 1) % HTTPD__AUTH_CACHE;
            if (a->cached < HTTPD__AUTH_CACHE)
                a->cached++;
        }
        w->waiting = false;
        a->done(w, j->ok, a->ud);
    }
    job_free(j);
}

static void auth_async_cb(uv_async_t *h)
{
    struct httpd__auth *a = h->data;
    struct httpd__auth_job *list, *next;

    pthread_mutex_lock(&a->hub->mu);
    list = a->hub->done;
    a->hub->done = NULL;
    pthread_mutex_unlock(&a->hub->mu);
    for (; list; list = next) {
        next = list->next;
        auth_finish(a, list);
    }
    auth_start_next(a);
}

static void auth_async_closed(uv_handle_t *h)
{
    struct httpd__auth *a = h->data;

    a->closed(a->ud);
}

/* Lets running checks go on alone: their results are dropped. */
static void hub_detach(struct httpd__auth *a)
{
    struct httpd__auth_job *list, *next;

    pthread_mutex_lock(&a->hub->mu);
    a->hub->async = NULL;
    list = a->hub->done;
    a->hub->done = NULL;
    hub_unref_locked(a->hub);
    a->hub = NULL;
    for (; list; list = next) {
        next = list->next;
        job_free(list);
    }
    uv_close((uv_handle_t *)&a->async, auth_async_closed);
}

static int hub_init(struct httpd__auth *a)
{
    struct httpd__auth_hub *h;

    if (a->hub)
        return 0;
    if (!a->peers && !(a->peers = calloc(AUTH_PEERS, sizeof(*a->peers))))
        return -ENOMEM;
    if (!(h = calloc(1, sizeof(*h))))
        return -ENOMEM;
    if (pthread_mutex_init(&h->mu, NULL) != 0) {
        free(h);
        return -ENOMEM;
    }
    if (uv_async_init(a->loop, &a->async, auth_async_cb) < 0) {
        pthread_mutex_destroy(&h->mu);
        free(h);
        return -ENOMEM;
    }
    a->async.data = a;
    h->async = &a->async;
    h->refs = 1;
    a->hub = h;
    return 0;
}

/* Starts a check on a detached thread; the job is its own from here. */
static int auth_spawn(struct httpd__auth *a, struct httpd__auth_job *j)
{
    pthread_attr_t attr;
    pthread_t t;
    int rc;

    if (pthread_attr_init(&attr) != 0)
        return -ENOMEM;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    j->hub = a->hub;
    pthread_mutex_lock(&a->hub->mu);
    a->hub->refs++;
    pthread_mutex_unlock(&a->hub->mu);
    rc = pthread_create(&t, &attr, auth_thread, j);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        pthread_mutex_lock(&a->hub->mu);
        a->hub->refs--; /* the server still holds one */
        pthread_mutex_unlock(&a->hub->mu);
        return -rc;
    }
    return 0;
}

/* The address to serve next: one with a check waiting and none running;
 * those without a recent wrong password first, then the least recently
 * served. */
static struct httpd__auth_peer *next_peer(struct httpd__auth *a)
{
    uint64_t now = uv_now(a->loop);
    struct httpd__auth_peer *best = NULL;
    bool best_failed = false;

    for (unsigned i = 0; i < AUTH_PEERS; i++) {
        struct httpd__auth_peer *p = &a->peers[i];
        bool failed;

        if (!p->used || p->running || !p->queued)
            continue;
        failed = p->failed_ms && now - p->failed_ms < AUTH_FAIL_MS;
        if (!best || (best_failed && !failed) ||
            (best_failed == failed && p->served < best->served)) {
            best = p;
            best_failed = failed;
        }
    }
    return best;
}

static void auth_start_next(struct httpd__auth *a)
{
    struct httpd__auth_peer *p;

    while (!a->closing && a->running < AUTH_RUNNING && (p = next_peer(a)) != NULL) {
        struct httpd__auth_wait *w = STAILQ_FIRST(&p->q);
        const char *hash = httpd__web_hash(w->web, w->user);
        struct httpd__auth_job *j = calloc(1, sizeof(*j));

        STAILQ_REMOVE_HEAD(&p->q, link);
        p->queued--;
        w->queued_at = NULL;
        if (j) {
            j->known = hash != NULL;
            j->hash = strdup(hash ? hash : httpd__web_dummy_hash(w->web));
            j->pass = w->pass;
            j->peer = p;
            j->w = w;
        }
        if (!j || !j->hash || auth_spawn(a, j) < 0) {
            if (j) {
                j->pass = NULL; /* still the connection's */
                job_free(j);
            }
            w->waiting = false;
            a->done(w, false, a->ud);
            continue;
        }
        w->pass = NULL;
        w->job = j;
        p->running = true;
        p->served = ++a->serial;
        a->running++;
    }
}

/* The queue of the connection's address: found, or a free slot, or the
 * one idle the longest (failures forgotten first). */
static struct httpd__auth_peer *find_peer(struct httpd__auth *a, const unsigned char *addr)
{
    struct httpd__auth_peer *free_slot = NULL, *idle = NULL;

    for (unsigned i = 0; i < AUTH_PEERS; i++) {
        struct httpd__auth_peer *p = &a->peers[i];

        if (!p->used) {
            if (!free_slot)
                free_slot = p;
            continue;
        }
        if (memcmp(p->addr, addr, sizeof(p->addr)) == 0)
            return p;
        if (!p->running && !p->queued && (!idle || p->failed_ms < idle->failed_ms))
            idle = p;
    }
    if (!free_slot)
        free_slot = idle;
    if (free_slot) {
        memset(free_slot, 0, sizeof(*free_slot));
        STAILQ_INIT(&free_slot->q);
        free_slot->used = true;
        free_slot->served = ++a->serial; /* behind those already waiting */
        memcpy(free_slot->addr, addr, sizeof(free_slot->addr));
    }
    return free_slot;
}

void httpd__auth_init(struct httpd__auth *a, uv_loop_t *loop, httpd__auth_done_fn done, void *ud)
{
    memset(a, 0, sizeof(*a));
    a->loop = loop;
    a->done = done;
    a->ud = ud;
}

int httpd__auth_begin(struct httpd__auth *a, struct httpd__auth_wait *w,
                      const struct httpd_web *web, const char *authorization, bool too_long)
{
    unsigned char md[SHA256_DIGEST_LENGTH];
    const char *hash;
    struct httpd__auth_peer *p;

    if (auth_parse(w, authorization, too_long) < 0)
        return -1;
    hash = httpd__web_hash(web, w->user);
    if (hash && cache_key(w->user, w->pass, hash, md)) {
        for (unsigned i = 0; i < a->cached; i++) {
            if (CRYPTO_memcmp(md, a->cache[i], sizeof(md)) == 0) {
                auth_forget(w);
                return 0;
            }
        }
    }
    if (hub_init(a) < 0 || !(p = find_peer(a, w->addr)))
        return -1;
    if (p->queued >= AUTH_PEER_QUEUE)
        return -2;
    w->web = web;
    w->waiting = true;
    w->queued_at = p;
    p->queued++;
    STAILQ_INSERT_TAIL(&p->q, w, link);
    auth_start_next(a);
    return 1;
}

/* The waiter leaves its address queue, and its running check (if any)
 * forgets it. */
void httpd__auth_cancel(struct httpd__auth_wait *w)
{
    if (w->queued_at) {
        STAILQ_REMOVE(&w->queued_at->q, w, httpd__auth_wait, link);
        w->queued_at->queued--;
        w->queued_at = NULL;
    }
    if (w->job) {
        w->job->w = NULL;
        w->job = NULL;
    }
}

void httpd__auth_wait_done(struct httpd__auth_wait *w)
{
    free(w->user);
    free_secret(w->pass);
    w->user = w->pass = NULL;
}

/* The client's address as the key of its auth queue: IPv4 as v4-mapped
 * IPv6, IPv6 cut to its /64 (what one host usually gets). */
void httpd__auth_set_peer(struct httpd__auth_wait *w, const struct sockaddr *sa)
{
    memset(w->addr, 0, sizeof(w->addr));
    if (!sa)
        return;
    if (sa->sa_family == AF_INET) {
        w->addr[10] = w->addr[11] = 0xff;
        memcpy(w->addr + 12, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)sa;

        /* a v4-mapped address keeps all of it */
        memcpy(w->addr, a6->sin6_addr.s6_addr, IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr) ? 16 : 8);
    }
}

bool httpd__auth_close(struct httpd__auth *a, void (*closed)(void *ud))
{
    a->closing = true;
    if (!a->hub)
        return false;
    a->closed = closed;
    hub_detach(a);
    return true;
}

void httpd__auth_done(struct httpd__auth *a)
{
    free(a->peers);
    a->peers = NULL;
}
