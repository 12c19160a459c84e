/* SPDX-License-Identifier: Apache-2.0 */
/* The web UI's profile page: /profile?key=K, the latest profile of a pair
 * as a flame graph and a table of the top functions (&type= picks the
 * sample type), and /profile.pb.gz?key=K, its download.
 *
 * Function names, sample types and labels come from targets: they are
 * escaped (ui_html.c), names and types cut to a display length. Loop thread,
 * but for the flame graph, built by a job on the work queue (flame_work,
 * on the pool, touching only the page's own fields) from the page's own
 * copy of the profile. The page, streamed, holds its tree, charged to the
 * memory budget while it is sent, never its HTML; the connection and the
 * job each hold a reference to it (flame_page below). (docs/design.md
 * "Threads") */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/recent.h"
#include "agent/ui.h"
#include "common/buf.h"
#include "common/workq.h"
#include "httpd/httpd.h"
#include "pprof/pprof.h"

/* The flame graph: at most this many frames, and frames narrower than
 * 1/FLAME_MIN_DIV of the whole are not drawn (their value stays in their
 * parent's width). */
#define FLAME_MAX_NODES 20000
#define FLAME_MIN_DIV 400
#define TOP_FUNCTIONS 30
/* Frames deeper than this are not drawn (their value stays in their
 * parent's width). */
#define FLAME_MAX_DEPTH 128
/* Decoding a profile is a job on the work queue (agent__ui_profile_page);
 * above this raw size the page offers the download only. */
#define FLAME_MAX_RAW (16u << 20)
/* What a flame graph job builds beside the decoded profile, added to the
 * job's cost: per node, at most, its 32 bytes (twice that while the array
 * grows), the build's three indexes (16-byte entries, at most half full)
 * and a pointer to its name: 256 bytes. The names are copies of the
 * profile's strings, within what the decode is admitted for. */
#define FLAME_TREE_MAX ((uint64_t)FLAME_MAX_NODES * 256)
/* The text of a profile page around its graph (head, menu, top table). */
#define TEXT_MAX ((size_t)1 << 20)

/* A name is shown on its frame in at most NAME_SHOWN bytes of HTML, and in
 * its tooltip and the top table in at most NAME_TITLE (the tree keeps
 * PPROF_FLAME_NAME_MAX bytes of it): a long name on every one of 20,000
 * frames must not make the page grow with it. */
#define NAME_SHOWN 96
#define NAME_TITLE 256
/* The sample types offered in the page's menu. */
#define TYPES_SHOWN 64

/* The bytes agent__ui_esc() writes for the byte `c`. */
static size_t esc_len(unsigned char c)
{
    return c == '<' || c == '>' ? 4 : c == '&' ? 5 : c == '"' || c == '\'' ? 6 : 1;
}

/* Escapes `s` into at most `cap` bytes of HTML: cut at a character (or
 * entity) boundary and ended with U+2026 when it does not fit whole. */
static void esc_cap(struct buf *b, const char *s, size_t cap)
{
    static const char ell[] = "\xe2\x80\xa6";
    size_t used = 0, i = 0, whole = 0;

    for (size_t j = 0; s && s[j] && whole <= cap; j++)
        whole += esc_len((unsigned char)s[j]);
    if (whole <= cap) {
        agent__ui_esc(b, s);
        return;
    }
    while (s[i]) {
        unsigned char c = (unsigned char)s[i];
        size_t n = c < 0x80             ? 1
                   : (c & 0xE0) == 0xC0 ? 2
                   : (c & 0xF0) == 0xE0 ? 3
                   : (c & 0xF8) == 0xF0 ? 4
                                        : 1;
        size_t k = 1;

        while (k < n && ((unsigned char)s[i + k] & 0xC0) == 0x80)
            k++;
        n = k; /* a cut sequence: its bytes as they are */
        if (used + (c < 0x80 ? esc_len(c) : n) + sizeof(ell) - 1 > cap)
            break;
        if (c < 0x80) {
            char one[2] = { s[i], '\0' };

            agent__ui_esc(b, one);
        } else {
            buf_append(b, s + i, n);
        }
        used += c < 0x80 ? esc_len(c) : n;
        i += n;
    }
    buf_puts(b, ell);
}

struct top_fn {
    uint32_t name;
    int64_t flat, cum;
};

static int top_cmp(const void *x, const void *y)
{
    const struct top_fn *a = x, *b = y;

    return a->flat != b->flat ? (a->flat > b->flat ? -1 : 1) : (a->cum > b->cum ? -1 : 1);
}

/* Flat (self) and cumulative value per function; a frame whose function
 * is also an ancestor's is counted once in cum (recursion). */
static void top_table(struct buf *b, const struct pprof_flame *f)
{
    struct top_fn *t = calloc(f->n_names, sizeof(*t));
    size_t shown = 0;

    if (!t)
        return;
    for (size_t i = 0; i < f->n_names; i++)
        t[i].name = (uint32_t)i;
    for (size_t i = 1; i < f->n_nodes; i++) {
        const struct pprof_flame_node *n = &f->nodes[i];
        bool again = false;

        t[n->name].flat += n->self;
        for (uint32_t p = n->parent; p != UINT32_MAX && p != 0 && !again; p = f->nodes[p].parent)
            again = f->nodes[p].name == n->name;
        if (!again)
            t[n->name].cum += n->total;
    }
    qsort(t, f->n_names, sizeof(*t), top_cmp);
    buf_puts(b, "<h3>Top functions</h3><table><tr><th>flat</th><th>flat %</th><th>cum</th>"
                "<th>cum %</th><th>function</th></tr>");
    for (size_t i = 0; i < f->n_names && shown < TOP_FUNCTIONS; i++) {
        int64_t root = f->nodes[0].total;

        if (t[i].name == 0 || (!t[i].flat && !t[i].cum))
            continue;
        buf_printf(b,
                   "<tr class=\"top\"><td>%" PRId64 "</td><td>%.2f%%</td><td>%" PRId64
                   "</td><td>%.2f%%</td><td>",
                   t[i].flat, root ? 100.0 * (double)t[i].flat / (double)root : 0, t[i].cum,
                   root ? 100.0 * (double)t[i].cum / (double)root : 0);
        esc_cap(b, f->names[t[i].name], NAME_TITLE);
        buf_puts(b, "</td></tr>");
        shown++;
    }
    buf_puts(b, "</table>");
    free(t);
}

/* The profile page. Decoding a profile and building its flame graph take
 * tens of milliseconds for a large one: that is a job on the work queue
 * (admitted by the memory budget, as a delta is), never loop work. The
 * page streams: its head at once, then, once the job is done, the flame
 * graph written frame by frame from the tree as the client reads it (the
 * stream is parked meanwhile), then the top table. The page never holds
 * its HTML: only the tree (charged to the budget until the graph is sent
 * or the connection closes) and the short text around it. The page owns a
 * copy of the profile until the job ends, since the store may drop it
 * while the job runs; the connection and the job each hold a reference. */
struct walk_frame {
    uint32_t node, next; /* the frame, and its next child to look at */
    int64_t rest;        /* its width not drawn by children */
    bool started, open;  /* its own div is written; its children's div is */
};

struct flame_page {
    struct agent *a;
    uint8_t *data; /* the profile, until the job is done */
    size_t len;
    struct pprof_limits lim;
    uint64_t cost;
    char type[128]; /* "" for the profile's default */
    char keytxt[32];
    struct buf html; /* loop side: text to send; `sent` of it is sent */
    size_t sent;
    /* Job side, then the loop's once the job is done. */
    struct pprof_flame *f; /* the tree, while the graph is being sent */
    struct buf pre;        /* before the graph, or the whole rest on error */
    struct buf post;       /* the top table after it */
    uint64_t charged;      /* of the budget, for f, pre and post */
    struct walk_frame stack[FLAME_MAX_DEPTH + 1];
    size_t sp;
    int refs;
    bool started, done, closed;
};

static void flame_release(struct flame_page *fp)
{
    pprof_flame_free(fp->f);
    fp->f = NULL;
    if (fp->charged)
        workq_uncharge(fp->a->work, fp->charged);
    fp->charged = 0;
}

static void flame_page_unref(struct flame_page *fp)
{
    if (--fp->refs > 0)
        return;
    flame_release(fp);
    free(fp->data);
    buf_done(&fp->html);
    buf_done(&fp->pre);
    buf_done(&fp->post);
    free(fp);
}

/* Pool thread: touches only the page's own fields. */
static void flame_work(void *arg)
{
    struct flame_page *fp = arg;
    struct pprof_flame *f = NULL;
    struct buf *b = &fp->pre;
    char err[256];

    if (pprof_flame_build(fp->data, fp->len, &fp->lim, fp->type[0] ? fp->type : NULL,
                          FLAME_MAX_NODES, &f, err, sizeof(err)) < 0) {
        buf_puts(b, "<p class=\"err\">Cannot draw this profile: ");
        agent__ui_esc(b, err);
        buf_puts(b, "</p>");
        buf_puts(b, UI_PAGE_TAIL);
        return;
    }
    buf_puts(b, "<form>Sample type: <input type=\"hidden\" name=\"key\" value=\"");
    agent__ui_esc(b, fp->keytxt);
    buf_puts(b, "\"><select name=\"type\" onchange=\"this.form.submit()\">");
    for (size_t i = 0; i < f->n_types; i++) {
        if (i >= TYPES_SHOWN && (int)i != f->sample_type)
            continue;
        buf_printf(b, "<option%s>", (int)i == f->sample_type ? " selected" : "");
        esc_cap(b, f->types[i], NAME_TITLE);
        buf_puts(b, "</option>");
    }
    buf_puts(b, "</select> <noscript><button>show</button></noscript></form>");
    if (f->truncated)
        buf_printf(b, "<p>Only the first %d frames are drawn.</p>", FLAME_MAX_NODES);
    buf_printf(b, "<h3>Flame graph (%" PRId64 " ", f->nodes[0].total);
    esc_cap(b, f->types[f->sample_type], NAME_TITLE);
    buf_puts(b, ")</h3><div class=\"fg\">");
    buf_puts(&fp->post, "</div>");
    top_table(&fp->post, f);
    buf_puts(&fp->post, UI_PAGE_TAIL);
    fp->f = f;
}

static void flame_after(void *arg, int status)
{
    struct flame_page *fp = arg;

    free(fp->data);
    fp->data = NULL;
    if (status != 0) {
        buf_reset(&fp->pre);
        buf_puts(&fp->pre, "<p class=\"err\">Cannot draw this profile now: proflet is "
                           "shutting down.</p>");
        buf_puts(&fp->pre, UI_PAGE_TAIL);
    } else if (fp->f && !fp->closed) {
        uint64_t held = fp->f->bytes + fp->pre.len + fp->post.len;

        if (workq_charge(fp->a->work, held) < 0) {
            pprof_flame_free(fp->f);
            fp->f = NULL;
            buf_reset(&fp->pre);
            buf_puts(&fp->pre, "<p class=\"err\">Too many profile pages are being sent at "
                               "once (they may hold half of limits.memory-budget): try "
                               "again in a moment.</p>");
            buf_puts(&fp->pre, UI_PAGE_TAIL);
        } else {
            fp->charged = held;
            fp->stack[0] = (struct walk_frame){ 0 };
            fp->sp = 1;
        }
    }
    if (!fp->closed && buf_append(&fp->html, fp->pre.data ? fp->pre.data : "", fp->pre.len) < 0) {
        flame_release(fp);
        buf_puts(&fp->html, UI_PAGE_TAIL); /* a short page rather than none */
    }
    buf_done(&fp->pre);
    fp->done = true;
    httpd_resume(fp->a->status, fp);
    flame_page_unref(fp);
}

static bool drawn(const struct pprof_flame *f, uint32_t c)
{
    return f->nodes[c].total > 0 && f->nodes[c].total >= f->nodes[0].total / FLAME_MIN_DIV;
}

/* Writes frames, depth first, until `out` reaches `chunk`: 1 if frames are
 * left, 0 once the whole graph is written. A frame's children are drawn
 * inside it, and what they leave of its width (its own value and the
 * undrawn children's) is kept by an empty box. */
static int flame_walk(struct flame_page *fp, struct buf *out, size_t chunk)
{
    const struct pprof_flame *f = fp->f;
    int64_t root = f->nodes[0].total;

    while (fp->sp > 0) {
        struct walk_frame *w = &fp->stack[fp->sp - 1];
        const struct pprof_flame_node *n = &f->nodes[w->node];
        uint32_t c;

        if (out->len >= chunk)
            return 1;
        if (!w->started) {
            buf_printf(out, "<div class=\"fn\" style=\"flex:%" PRId64 " 0 0\" title=\"", n->total);
            esc_cap(out, f->names[n->name], NAME_TITLE);
            buf_printf(out, ": %" PRId64 " (%.2f%%)\"><span>", n->total,
                       root ? 100.0 * (double)n->total / (double)root : 0);
            esc_cap(out, f->names[n->name], NAME_SHOWN);
            buf_puts(out, "</span>");
            w->started = true;
            w->next = fp->sp - 1 < FLAME_MAX_DEPTH ? n->first_child : UINT32_MAX;
            w->rest = n->total;
        }
        for (c = w->next; c != UINT32_MAX && !drawn(f, c); c = f->nodes[c].next_sibling)
            ;
        if (c != UINT32_MAX) {
            w->next = f->nodes[c].next_sibling;
            if (!w->open)
                buf_puts(out, "<div class=\"fc\">");
            w->open = true;
            w->rest = (int64_t)((uint64_t)w->rest - (uint64_t)f->nodes[c].total);
            fp->stack[fp->sp++] = (struct walk_frame){ .node = c };
            continue;
        }
        if (w->open) {
            if (w->rest > 0)
                buf_printf(out, "<div style=\"flex:%" PRId64 " 0 0\"></div>", w->rest);
            buf_puts(out, "</div>");
        }
        buf_puts(out, "</div>");
        fp->sp--;
    }
    return 0;
}

static int flame_part(struct buf *out, size_t chunk, void *state)
{
    struct flame_page *fp = state;
    int rc;

    if (!fp->started) {
        fp->started = true;
        fp->refs++;
        rc = workq_submit_cost(fp->a->work, 0, fp->cost, flame_work, flame_after, fp);
        if (rc < 0) {
            fp->refs--;
            free(fp->data);
            fp->data = NULL;
            buf_puts(&fp->html, rc == -E2BIG ? "<p class=\"err\">This profile is too large to "
                                               "draw within limits.memory-budget: download it.</p>"
                                             : "<p class=\"err\">Cannot draw this profile now "
                                               "(out of memory).</p>");
            buf_puts(&fp->html, UI_PAGE_TAIL);
            fp->done = true;
        }
    }
    for (;;) {
        size_t n = fp->html.len - fp->sent;

        if (n > chunk - (out->len < chunk ? out->len : chunk))
            n = chunk - (out->len < chunk ? out->len : chunk);
        if (n && buf_append(out, fp->html.data + fp->sent, n) < 0)
            return -ENOMEM;
        fp->sent += n;
        if (fp->sent < fp->html.len)
            return 1;
        buf_reset(&fp->html);
        fp->sent = 0;
        if (!fp->done)
            return HTTPD_STREAM_PARKED;
        if (!fp->f)
            return 0;
        if (flame_walk(fp, out, chunk))
            return 1;
        flame_release(fp);
        if (buf_append(&fp->html, fp->post.data ? fp->post.data : "", fp->post.len) < 0)
            return -ENOMEM;
        buf_done(&fp->post);
    }
}

static void flame_page_free(void *state)
{
    struct flame_page *fp = state;

    fp->closed = true; /* a job still running keeps its reference */
    flame_page_unref(fp);
}

void agent__ui_profile_page(struct agent *a, const struct httpd_request *req,
                            struct httpd_response *resp, bool download)
{
    const struct agent_config *c = agent_config(a->doc);
    const struct recent_profile *p;
    struct flame_page *fp;
    struct buf *b = &resp->body;
    char keytxt[32];
    size_t raw;
    uint64_t key;

    if (httpd_query_get(req->query, "key", keytxt, sizeof(keytxt)) <= 0 ||
        (key = strtoull(keytxt, NULL, 16), !(p = recent_get(a->recent, key)))) {
        resp->status = 404;
        resp->content_type = "text/html; charset=utf-8";
        agent__ui_head(b, "Profile");
        buf_puts(b, "<p>No recent profile of this target is kept: none was delivered yet, or "
                    "it left the store (server.recent-profiles-bytes).</p>");
        buf_puts(b, UI_PAGE_TAIL);
        return;
    }
    if (download) {
        resp->content_type = "application/octet-stream";
        buf_append(b, p->data, p->len);
        return;
    }
    resp->content_type = "text/html; charset=utf-8";
    fp = calloc(1, sizeof(*fp));
    if (!fp || !(fp->data = malloc(p->len ? p->len : 1))) {
        free(fp);
        resp->status = 503;
        buf_puts(b, "out of memory\n");
        return;
    }
    fp->a = a;
    fp->refs = 1; /* the connection's */
    memcpy(fp->data, p->data, p->len);
    fp->len = p->len;
    fp->lim = c->limits.pprof;
    if (fp->lim.max_decompressed > FLAME_MAX_RAW)
        fp->lim.max_decompressed = FLAME_MAX_RAW;
    if (pprof_job_cost(fp->data, fp->len, fp->lim.max_decompressed, true, &raw, &fp->cost) < 0)
        fp->cost = 0; /* the build refuses it, with the reason, in the job */
    if (httpd_query_get(req->query, "type", fp->type, sizeof(fp->type)) <= 0)
        fp->type[0] = '\0';
    fp->cost += FLAME_TREE_MAX;
    snprintf(fp->keytxt, sizeof(fp->keytxt), "%s", keytxt);
    buf_init(&fp->html, TEXT_MAX);
    buf_init(&fp->pre, TEXT_MAX);
    buf_init(&fp->post, TEXT_MAX);
    agent__ui_head(&fp->html, "Profile");
    buf_puts(&fp->html, "<h2>Latest profile</h2><p>");
    {
        char *text = labels_to_string(p->labels);

        agent__ui_esc(&fp->html, text);
        free(text);
    }
    buf_puts(&fp->html, "<br>delivered ");
    agent__ui_ago(&fp->html, (uint64_t)p->end_ns);
    buf_printf(&fp->html,
               ", %zu bytes &nbsp; <a href=\"/profile.pb.gz?key=%016" PRIx64 "\">download</a></p>",
               p->len, key);
    resp->stream = flame_part;
    resp->stream_state = fp;
    resp->stream_free = flame_page_free;
}
