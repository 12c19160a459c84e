/* SPDX-License-Identifier: Apache-2.0 */
/* The web UI's profile pages, /profile?key=K and /profile.pb.gz?key=K
 * (agent/ui_query.c reads the rest of the query):
 *
 *   - the newest profile of a pair, or the merge of its profiles in a time
 *     range (from, to: the store keeps each pair's history), as a flame
 *     graph (colour by package, a tooltip with self and total, an icicle
 *     or flame orientation) and a table of functions sorted by self or
 *     total, values in their units;
 *   - a diff: the same against a baseline (another range, another target
 *     or both), frames coloured by how their share grew or shrank;
 *   - a sandwich of one function (fn=): its callers above, its callees
 *     below;
 *   - the same as JSON (format=json, exact numbers), as collapsed stacks
 *     (format=collapsed, for flamegraph.pl and speedscope), and as pprof
 *     (/profile.pb.gz: the profile as delivered, or the merged range).
 *
 * The text before the graphs (labels, downloads, the range form, the
 * history) is ui_profile.c's. Function names, sample types and labels
 * come from targets: they are escaped (ui_html.c), names cut to a display
 * length. The page reads without JavaScript; agent/assets/flame.js adds
 * zoom, search and the orientation switch, and makes no request.
 *
 * Loop thread, but for the merge and the trees, built by a job on the work
 * queue (page_work, on the pool, touching only the page's own fields) from
 * references to the store's blobs (recent_ref(): no copy on the loop). The
 * page, streamed, holds its trees (or, for collapsed stacks, its fold),
 * charged to the memory budget while it is sent, never its HTML; the
 * connection and the job each hold a reference to it. (docs/design.md
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
#include "agent/ui_assets.h"
#include "common/buf.h"
#include "common/clock.h"
#include "common/workq.h"
#include "httpd/httpd.h"
#include "pprof/pprof.h"

/* A flame graph: at most this many frames, and frames narrower than
 * 1/FLAME_MIN_DIV of the whole are not drawn (their value stays in their
 * parent's width). */
#define FLAME_MAX_NODES 20000
#define FLAME_MIN_DIV 400
/* Frames deeper than this are not drawn (their value stays in their
 * parent's width). */
#define FLAME_MAX_DEPTH 128
#define TOP_FUNCTIONS 100
/* A profile larger than this (gunzipped) is not drawn: download it. */
#define FLAME_MAX_RAW (16u << 20)
/* What a tree holds beside its fold, at most: per node its 48 bytes
 * (twice that while the array grows), the build's index (16-byte entries,
 * at least a third full), a name pointer and its hue: 160 bytes; and its
 * names, copies of some of the fold's (counted as the fold's cap). */
#define FLAME_TREE_NODES ((uint64_t)FLAME_MAX_NODES * 160)
/* The merge of a range holds at most an eighth of limits.memory-budget
 * (pprof_fold_new()), within these, and less when the page's job would
 * otherwise cost more than half the budget (page_cost()). */
#define FOLD_MAX ((size_t)32 << 20)
#define FOLD_MIN ((size_t)256 << 10)
/* Profiles merged per side: the newest of a longer range. */
#define MERGE_MAX 2000
/* The text the loop writes before a page's graphs (head, forms, history),
 * and each of the three parts the job writes around them (its table). The
 * JSON view holds at most four times the fold's cap. */
#define TEXT_MAX ((size_t)1 << 20)
#define SEG_MAX ((size_t)256 << 10)

enum page_kind { PAGE_HTML, PAGE_JSON, PAGE_COLLAPSED, PAGE_PPROF };

/* Sums and differences of a target's values wrap instead of overflowing. */
static int64_t wadd(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

static int64_t wsub(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a - (uint64_t)b);
}

/* ------------------------------------------------------------ the page */

/* One profile of a side, as the page took it from the store. */
struct taken {
    struct recent_blob *blob;
    int64_t start_ns, end_ns;
    size_t len;
};

struct walk_frame {
    uint32_t node, next; /* the frame, and its next child to look at */
    int64_t at;          /* where its next drawn child starts, in value */
};

/* A page, streamed as: `html` (the loop's text), then from the job's
 * output seg[0], tree[0], seg[1], tree[1], seg[2]; or the fold's collapsed
 * stacks; or `bytes`. */
struct flame_page {
    struct agent *a;
    struct agent__ui_query q;
    enum page_kind kind;
    uint64_t key;
    /* Job input: side 0's profiles, then side 1's. */
    struct taken *in;
    size_t n_in, n_side[2], not_merged[2];
    int sides;
    struct pprof_limits lim;
    uint64_t cost;
    size_t fold_max;
    /* Loop side: text to send; `sent` of it is sent. */
    struct buf html;
    size_t sent;
    /* Job side, then the loop's once the job is done. */
    struct buf seg[3];
    struct pprof_flame *tree[2];
    uint16_t *hue[2]; /* per tree name */
    int n_trees;
    struct pprof_fold *fold; /* collapsed stacks: kept while sent */
    int fold_type;
    size_t fold_pos;
    uint8_t *bytes; /* a merged pprof */
    size_t bytes_len, bytes_sent;
    bool failed;        /* the job could not make what was asked */
    size_t skipped;     /* profiles the merge could not take */
    char skip_why[256]; /* the first one's reason */
    uint64_t charged;
    int at; /* 0 seg0, 1 tree0, 2 seg1, 3 tree1, 4 seg2, 5 done */
    struct walk_frame stack[FLAME_MAX_DEPTH + 1];
    size_t sp;
    bool walking;
    int refs;
    bool started, done, closed;
};

static void page_release(struct flame_page *fp)
{
    for (int i = 0; i < 2; i++) {
        pprof_flame_free(fp->tree[i]);
        fp->tree[i] = NULL;
        free(fp->hue[i]);
        fp->hue[i] = NULL;
    }
    pprof_fold_free(fp->fold);
    fp->fold = NULL;
    free(fp->bytes);
    fp->bytes = NULL;
    if (fp->charged)
        workq_uncharge(fp->a->work, fp->charged);
    fp->charged = 0;
}

static void drop_input(struct flame_page *fp)
{
    for (size_t i = 0; i < fp->n_in; i++)
        recent_unref(fp->in[i].blob);
    free(fp->in);
    fp->in = NULL;
    fp->n_in = 0;
}

static void page_unref(struct flame_page *fp)
{
    if (--fp->refs > 0)
        return;
    page_release(fp);
    drop_input(fp);
    buf_done(&fp->html);
    for (int i = 0; i < 3; i++)
        buf_done(&fp->seg[i]);
    free(fp);
}

/* --------------------------------------------------------- job: content */

/* The unit of a "type/unit" sample type. */
static enum agent__ui_unit unit_of(const char *type)
{
    const char *slash = type ? strrchr(type, '/') : NULL;

    return agent__ui_unit_of(slash ? slash + 1 : NULL);
}

static void type_links(struct buf *b, const struct flame_page *fp, const struct pprof_fold *fd,
                       int type)
{
    struct pprof_fold_info info;
    struct agent__ui_query q = fp->q;

    pprof_fold_info(fd, &info);
    if (info.n_types < 2)
        return;
    buf_puts(b, "<p class=\"types\">Sample type:");
    for (size_t i = 0; i < info.n_types && i < 64; i++) {
        const char *t = pprof_fold_type(fd, i);

        buf_puts(b, " ");
        if ((int)i == type) {
            buf_puts(b, "<b>");
            agent__ui_esc_cap(b, t, UI_NAME_TITLE);
            buf_puts(b, "</b>");
            continue;
        }
        if (strlen(t) >= sizeof(q.type))
            continue;
        snprintf(q.type, sizeof(q.type), "%s", t);
        agent__ui_query_link(b, &q);
        agent__ui_esc_cap(b, t, UI_NAME_TITLE);
        buf_puts(b, "</a>");
    }
    buf_puts(b, "</p>");
}

static int cmp_i64_desc(int64_t a, int64_t b)
{
    return a > b ? -1 : a < b ? 1 : 0;
}

/* The table's order: by self or total, of the comparison; in a diff, by
 * how much it grew. qsort_r's context. */
struct order {
    int sort;
    bool diff;
};

static int fn_cmp(const void *x, const void *y, void *ctx)
{
    const struct pprof_fold_fn *a = x, *b = y;
    const struct order *o = ctx;
    int c;

    if (o->diff)
        c = o->sort ? cmp_i64_desc(wsub(a->total[0], a->total[1]), wsub(b->total[0], b->total[1]))
                    : cmp_i64_desc(wsub(a->self[0], a->self[1]), wsub(b->self[0], b->self[1]));
    else
        c = o->sort ? cmp_i64_desc(a->total[0], b->total[0]) : cmp_i64_desc(a->self[0], b->self[0]);
    if (c)
        return c;
    c = o->sort ? cmp_i64_desc(a->self[0], b->self[0]) : cmp_i64_desc(a->total[0], b->total[0]);
    return c ? c : (a->name < b->name ? -1 : a->name > b->name);
}

static void cell(struct buf *b, int64_t v, enum agent__ui_unit u, bool sign)
{
    buf_printf(b, "<td data-v=\"%" PRId64 "\">", v);
    if (sign)
        agent__ui_fmt_signed(b, v, u);
    else
        agent__ui_fmt_value(b, v, u);
    buf_puts(b, "</td>");
}

static void pct_cell(struct buf *b, int64_t v, int64_t whole)
{
    buf_puts(b, "<td>");
    agent__ui_fmt_pct(b, v, whole);
    buf_puts(b, "</td>");
}

/* A header that sorts the table. */
static void sort_th(struct buf *b, const struct flame_page *fp, int sort, const char *text)
{
    struct agent__ui_query q = fp->q;

    q.sort = sort;
    buf_puts(b, "<th class=\"sort\">");
    agent__ui_query_link(b, &q);
    buf_puts(b, text);
    buf_puts(b, fp->q.sort == sort ? " \xe2\x96\xbc" : "");
    buf_puts(b, "</a></th>");
}

static void top_table(struct buf *b, const struct flame_page *fp, const struct pprof_fold *fd,
                      int type, int64_t root)
{
    struct order o = { fp->q.sort, fp->sides > 1 };
    enum agent__ui_unit u = unit_of(pprof_fold_type(fd, (size_t)type));
    struct pprof_fold_fn *fns;
    size_t n, shown = 0;

    if (pprof_fold_functions(fd, type, &fns, &n) < 0)
        return;
    qsort_r(fns, n, sizeof(*fns), fn_cmp, &o);
    buf_puts(b, "<h3>Top functions</h3><table class=\"fns\"><tr>");
    if (o.diff) {
        buf_puts(b, "<th>baseline self</th><th>baseline total</th><th>self</th><th>total</th>");
        sort_th(b, fp, 0, "self change");
        sort_th(b, fp, 1, "total change");
    } else {
        sort_th(b, fp, 0, "self");
        buf_puts(b, "<th>self %</th>");
        sort_th(b, fp, 1, "total");
        buf_puts(b, "<th>total %</th>");
    }
    buf_puts(b, "<th>function (its sandwich view)</th></tr>");
    for (size_t i = 0; i < n && shown < TOP_FUNCTIONS; i++) {
        const struct pprof_fold_fn *f = &fns[i];
        const char *name = pprof_fold_name(fd, f->name);
        struct agent__ui_query q = fp->q;

        if (!f->self[0] && !f->total[0] && !f->self[1] && !f->total[1])
            continue;
        buf_puts(b, "<tr class=\"top\">");
        if (o.diff) {
            cell(b, f->self[1], u, false);
            cell(b, f->total[1], u, false);
            cell(b, f->self[0], u, false);
            cell(b, f->total[0], u, false);
            cell(b, wsub(f->self[0], f->self[1]), u, true);
            cell(b, wsub(f->total[0], f->total[1]), u, true);
        } else {
            cell(b, f->self[0], u, false);
            pct_cell(b, f->self[0], root);
            cell(b, f->total[0], u, false);
            pct_cell(b, f->total[0], root);
        }
        buf_puts(b, "<td>");
        if (strlen(name) < sizeof(q.fn)) {
            snprintf(q.fn, sizeof(q.fn), "%s", name);
            agent__ui_query_link(b, &q);
            agent__ui_esc_cap(b, name, UI_NAME_TITLE);
            buf_puts(b, "</a>");
        } else {
            agent__ui_esc_cap(b, name, UI_NAME_TITLE);
        }
        buf_puts(b, "</td></tr>");
        shown++;
    }
    buf_puts(b, "</table>");
    free(fns);
}

/* The hue of every name of a tree. */
static uint16_t *hues(const struct pprof_flame *f)
{
    uint16_t *h = malloc((f->n_names ? f->n_names : 1) * sizeof(*h));

    for (size_t i = 0; h && i < f->n_names; i++)
        h[i] = (uint16_t)agent__ui_package_hue(f->names[i]);
    return h;
}

/* The opening of a graph: its controls (shown by the script) and its box. */
static bool drawn(const struct pprof_flame *f, uint32_t c);

/* The rows a tree's drawn frames take: its deepest drawn frame's depth,
 * plus one (at most FLAME_MAX_DEPTH + 1). A walk with one cursor a level. */
static int rows_of(const struct pprof_flame *f)
{
    uint32_t next[FLAME_MAX_DEPTH + 1];
    int sp = 0, most = 0;

    next[0] = f->nodes[0].first_child;
    while (sp >= 0) {
        uint32_t c = next[sp];

        while (c != UINT32_MAX && !drawn(f, c))
            c = f->nodes[c].next_sibling;
        if (c == UINT32_MAX || sp == FLAME_MAX_DEPTH) {
            sp--;
            continue;
        }
        next[sp] = f->nodes[c].next_sibling;
        next[++sp] = f->nodes[c].first_child;
        most = sp > most ? sp : most;
    }
    return most + 1;
}

/* The opening of a graph: a box of its rows, and in it the frames' box
 * (.fgi), which the script widens and shifts to zoom. */
static void graph_open(struct buf *b, const struct flame_page *fp, const struct pprof_flame *f,
                       bool flame)
{
    const char *type = f->types[f->sample_type];
    const char *slash = strrchr(type, '/');

    buf_printf(b, "<div class=\"fg %s%s\" data-unit=\"", flame ? "flame" : "icicle",
               fp->sides > 1 ? " diff" : "");
    agent__ui_esc(b, slash ? slash + 1 : "");
    buf_printf(b, "\" data-total=\"%" PRId64 "\" style=\"--rows:%d\"><div class=\"fgi\">",
               f->nodes[0].total, rows_of(f));
}

/* The controls the script brings to life: hidden without it. */
static void graph_bar(struct buf *b, const struct flame_page *fp)
{
    struct agent__ui_query q = fp->q;

    buf_puts(b, "<div class=\"fgbar\"><span class=\"js\" hidden><input id=\"search\" "
                "type=\"search\" placeholder=\"search functions (text or /regexp/)\" size=\"36\"> "
                "<output id=\"share\"></output> <button type=\"button\" id=\"unzoom\">reset "
                "zoom</button> </span>Orientation: ");
    for (int v = 0; v < 2; v++) {
        q.view = v;
        buf_puts(b, v ? " \xc2\xb7 <a class=\"orient" : "<a class=\"orient");
        buf_puts(b, fp->q.view == v ? " cur\" href=\"/profile?" : "\" href=\"/profile?");
        agent__ui_query_write(b, &q, true);
        buf_puts(b, v ? "\">flame</a>" : "\">icicle</a>");
    }
    buf_puts(b, " <span class=\"hint\">Click a frame to zoom into it, the top frame or "
                "Escape to zoom out; hover for its values.</span></div>");
}

static void legend_diff(struct buf *b)
{
    buf_puts(b, "<p class=\"legend\"><span class=\"sw grew\"></span> grew <span class=\"sw "
                "same\"></span> same share <span class=\"sw shrank\"></span> shrank (a frame's "
                "share of the comparison against its share of the baseline; widths are both "
                "sides together)</p>");
}

/* What the fold holds, in a sentence. */
static void summary(struct buf *b, const struct flame_page *fp, const struct pprof_fold *fd,
                    int type, int64_t root, int64_t base_root)
{
    struct pprof_fold_info info;
    enum agent__ui_unit u = unit_of(pprof_fold_type(fd, (size_t)type));

    pprof_fold_info(fd, &info);
    buf_puts(b, "<p class=\"sum\">");
    if (fp->sides > 1)
        buf_puts(b, "Comparison: ");
    buf_puts(b, "<b>");
    agent__ui_fmt_value(b, root, u);
    buf_puts(b, "</b> ");
    agent__ui_esc_cap(b, pprof_fold_type(fd, (size_t)type), UI_NAME_TITLE);
    buf_puts(b, " in ");
    agent__ui_fmt_count(b, info.profiles[0]);
    buf_puts(b, info.profiles[0] == 1 ? " profile" : " profiles merged");
    if (fp->not_merged[0]) {
        buf_puts(b, " (the newest of the range; ");
        agent__ui_fmt_count(b, fp->not_merged[0]);
        buf_puts(b, " older ones left out)");
    }
    if (fp->sides > 1) {
        buf_puts(b, "; baseline: <b>");
        agent__ui_fmt_value(b, base_root, u);
        buf_puts(b, "</b> in ");
        agent__ui_fmt_count(b, info.profiles[1]);
        buf_puts(b, info.profiles[1] == 1 ? " profile" : " profiles merged");
        buf_puts(b, "; change ");
        agent__ui_fmt_signed(b, wsub(root, base_root), u);
    }
    buf_puts(b, ".</p>");
}

/* Builds the HTML page's trees, table and text from the fold. */
static int html_content(struct flame_page *fp, const struct pprof_fold *fd, int type)
{
    struct pprof_flame_opts o = { .type = type, .max_nodes = FLAME_MAX_NODES };
    struct buf *b = &fp->seg[0];
    int64_t root, base_root;
    int rc;

    if (fp->q.fn[0]) {
        o.mode = PPROF_FLAME_CALLERS;
        o.focus = fp->q.fn;
        if ((rc = pprof_flame_from_fold(fd, &o, &fp->tree[0])) < 0)
            return rc;
        o.mode = PPROF_FLAME_CALLEES;
        if ((rc = pprof_flame_from_fold(fd, &o, &fp->tree[1])) < 0)
            return rc;
        fp->n_trees = 2;
    } else {
        o.mode = PPROF_FLAME_ALL;
        if ((rc = pprof_flame_from_fold(fd, &o, &fp->tree[0])) < 0)
            return rc;
        fp->n_trees = 1;
    }
    for (int i = 0; i < fp->n_trees; i++)
        if (!(fp->hue[i] = hues(fp->tree[i])))
            return -ENOMEM;
    {
        /* The whole profile's totals, for the summary and the table. */
        struct pprof_flame_opts all = { .type = type, .max_nodes = 1 };
        struct pprof_flame *t;

        if ((rc = pprof_flame_from_fold(fd, &all, &t)) < 0)
            return rc;
        root = t->nodes[0].total;
        base_root = t->nodes[0].base_total;
        pprof_flame_free(t);
    }
    type_links(b, fp, fd, type);
    summary(b, fp, fd, type, root, base_root);
    if (!fp->q.fn[0])
        buf_puts(b, fp->sides > 1 ? "<h3>Flame graph of the change</h3>" : "<h3>Flame graph</h3>");
    if (fp->sides > 1)
        legend_diff(b);
    graph_bar(b, fp);
    if (fp->q.fn[0]) {
        struct agent__ui_query q = fp->q;

        q.fn[0] = '\0';
        buf_puts(b, "<h3>Callers of <code>");
        agent__ui_esc_cap(b, fp->q.fn, UI_NAME_TITLE);
        buf_puts(b, "</code></h3><p>");
        agent__ui_query_link(b, &q);
        buf_puts(b, "back to the whole graph</a></p>");
        if (fp->tree[0]->nodes[0].total == 0 && fp->tree[0]->nodes[0].base_total == 0)
            buf_puts(b, "<p>This function is in no sample of this sample type.</p>");
        graph_open(b, fp, fp->tree[0], true);
        buf_puts(&fp->seg[1], "</div></div><h3>Callees of <code>");
        agent__ui_esc_cap(&fp->seg[1], fp->q.fn, UI_NAME_TITLE);
        buf_puts(&fp->seg[1], "</code></h3>");
        graph_open(&fp->seg[1], fp, fp->tree[1], false);
    } else {
        if (fp->tree[0]->truncated)
            buf_printf(b, "<p>Only the first %d frames are drawn.</p>", FLAME_MAX_NODES);
        graph_open(b, fp, fp->tree[0], fp->q.view == 1);
    }
    b = &fp->seg[2];
    buf_puts(b, "</div></div>");
    top_table(b, fp, fd, type, root);
    agent__ui_script(b, agent__ui_asset_flame_js, agent__ui_asset_flame_js_len);
    buf_puts(b, UI_PAGE_TAIL);
    return 0;
}

/* The JSON view: exact values of every function, and what was merged. */
static void json_side(struct buf *b, const struct flame_page *fp, int side, size_t merged,
                      int64_t total)
{
    const struct taken *t = fp->in + (side ? fp->n_side[0] : 0);

    buf_printf(b, "{\"merged\":%zu,\"left_out\":%zu,\"total\":%" PRId64 ",\"profiles\":[", merged,
               fp->not_merged[side], total);
    for (size_t i = 0; i < fp->n_side[side]; i++)
        buf_printf(b, "%s{\"start_ns\":%" PRId64 ",\"end_ns\":%" PRId64 ",\"bytes\":%zu}",
                   i ? "," : "", t[i].start_ns, t[i].end_ns, t[i].len);
    buf_puts(b, "]}");
}

static int json_content(struct flame_page *fp, const struct pprof_fold *fd, int type)
{
    struct buf *b = &fp->seg[0];
    struct pprof_fold_info info;
    struct pprof_fold_fn *fns;
    struct order o = { 1, false };
    int64_t total[2] = { 0, 0 };
    const char *t = pprof_fold_type(fd, (size_t)type), *slash = strrchr(t, '/');
    size_t n;
    bool first = true;

    if (pprof_fold_functions(fd, type, &fns, &n) < 0)
        return -ENOMEM;
    qsort_r(fns, n, sizeof(*fns), fn_cmp, &o);
    pprof_fold_info(fd, &info);
    {
        struct pprof_flame_opts all = { .type = type, .max_nodes = 1 };
        struct pprof_flame *tr;

        if (pprof_flame_from_fold(fd, &all, &tr) == 0) {
            total[0] = tr->nodes[0].total;
            total[1] = tr->nodes[0].base_total;
        }
        pprof_flame_free(tr);
    }
    buf_printf(b, "{\"key\":\"%016" PRIx64 "\",\"sample_type\":", fp->key);
    agent__ui_json_str(b, t);
    buf_puts(b, ",\"unit\":");
    agent__ui_json_str(b, slash ? slash + 1 : "");
    buf_puts(b, ",\"sample_types\":[");
    for (size_t i = 0; i < info.n_types; i++) {
        if (i)
            buf_puts(b, ",");
        agent__ui_json_str(b, pprof_fold_type(fd, i));
    }
    buf_printf(b, "],\"skipped\":%zu,\"skipped_why\":", fp->skipped);
    agent__ui_json_str(b, fp->skip_why);
    buf_puts(b, ",\"comparison\":");
    json_side(b, fp, 0, info.profiles[0], total[0]);
    if (fp->sides > 1) {
        buf_puts(b, ",\"baseline\":");
        json_side(b, fp, 1, info.profiles[1], total[1]);
    }
    buf_puts(b, ",\"functions\":[");
    for (size_t i = 0; i < n; i++) {
        const struct pprof_fold_fn *f = &fns[i];

        if (!f->self[0] && !f->total[0] && !f->self[1] && !f->total[1])
            continue;
        buf_puts(b, first ? "{\"name\":" : ",{\"name\":");
        first = false;
        agent__ui_json_str(b, pprof_fold_name(fd, f->name));
        buf_printf(b, ",\"self\":%" PRId64 ",\"total\":%" PRId64, f->self[0], f->total[0]);
        if (fp->sides > 1)
            buf_printf(b,
                       ",\"base_self\":%" PRId64 ",\"base_total\":%" PRId64
                       ",\"diff_self\":%" PRId64 ",\"diff_total\":%" PRId64,
                       f->self[1], f->total[1], wsub(f->self[0], f->self[1]),
                       wsub(f->total[0], f->total[1]));
        if (buf_puts(b, "}") < 0)
            break;
    }
    free(fns);
    return buf_puts(b, "]}\n") < 0 ? -E2BIG : 0;
}

/* The job's failure, said in the page's format, in place of what it made
 * (an HTML page ends with seg[2]: links may follow in seg[0]). */
static void job_error(struct flame_page *fp, const char *what, const char *why)
{
    struct buf *b = &fp->seg[0];

    fp->failed = true;
    for (int i = 0; i < 3; i++)
        buf_reset(&fp->seg[i]);
    if (fp->kind == PAGE_JSON) {
        struct buf t;

        buf_init(&t, 4096);
        buf_printf(&t, "%s: %s", what, why);
        buf_puts(b, "{\"error\":");
        agent__ui_json_str(b, t.data);
        buf_puts(b, "}\n");
        buf_done(&t);
    } else if (fp->kind == PAGE_COLLAPSED) {
        buf_printf(b, "# %s: ", what);
        agent__ui_esc(b, why); /* plain text, but a target's words: kept harmless */
        buf_puts(b, "\n");
    } else if (fp->kind == PAGE_HTML) {
        buf_printf(b, "<p class=\"err\">%s: ", what);
        agent__ui_esc(b, why);
        buf_puts(b, "</p>");
        buf_puts(&fp->seg[2], UI_PAGE_TAIL);
    }
}

/* Pool thread: touches only the page's own fields. */
static void page_work(void *arg)
{
    struct flame_page *fp = arg;
    struct pprof_fold *fd = pprof_fold_new(fp->sides, fp->fold_max);
    struct pprof_fold_info info;
    char err[256], first_err[256] = "";
    size_t skipped = 0;
    int type, rc;

    if (!fd) {
        job_error(fp, "Cannot merge these profiles", "out of memory");
        return;
    }
    for (size_t i = 0; i < fp->n_in; i++) {
        size_t len;
        const uint8_t *d = recent_blob_data(fp->in[i].blob, &len);

        rc = pprof_fold_add(fd, i < fp->n_side[0] ? 0 : 1, d, len, &fp->lim, err, sizeof(err));
        if (rc == PPROF_EMISMATCH || rc == PPROF_ECORRUPT) {
            if (!skipped++)
                snprintf(first_err, sizeof(first_err), "%s", err);
            continue;
        }
        if (rc < 0) {
            job_error(fp, "Cannot merge these profiles", err);
            goto out;
        }
    }
    pprof_fold_info(fd, &info);
    if (info.profiles[0] == 0 || (fp->sides > 1 && info.profiles[1] == 0)) {
        job_error(fp, "No profile of this range could be read",
                  first_err[0] ? first_err : "none was kept");
        goto out;
    }
    type = fp->q.type[0] ? pprof_fold_find_type(fd, fp->q.type) : info.default_type;
    if (type < 0) {
        job_error(fp, "No such sample type", fp->q.type);
        type_links(&fp->seg[0], fp, fd, -1);
        goto out;
    }
    fp->skipped = skipped;
    snprintf(fp->skip_why, sizeof(fp->skip_why), "%s", first_err);
    if (skipped && fp->kind == PAGE_HTML) {
        buf_puts(&fp->seg[0], "<p class=\"err\">");
        agent__ui_fmt_count(&fp->seg[0], skipped);
        buf_puts(&fp->seg[0], " profiles could not be merged with the others: ");
        agent__ui_esc(&fp->seg[0], first_err);
        buf_puts(&fp->seg[0], "</p>");
    }
    switch (fp->kind) {
    case PAGE_HTML:
        if ((rc = html_content(fp, fd, type)) < 0)
            job_error(fp, "Cannot draw this profile", pprof_strerror(rc));
        break;
    case PAGE_JSON:
        if (json_content(fp, fd, type) < 0)
            job_error(fp, "Cannot write this profile", "too many functions for the JSON view");
        break;
    case PAGE_COLLAPSED:
        if (fp->q.side >= fp->sides) {
            job_error(fp, "No baseline", "side=base needs a diff");
            break;
        }
        fp->fold = fd;
        fp->fold_type = type;
        fd = NULL;
        break;
    case PAGE_PPROF:
        if (fp->q.side >= fp->sides || pprof_fold_encode(fd, fp->q.side, PPROF_COMPRESS_BALANCED,
                                                         &fp->bytes, &fp->bytes_len) < 0)
            fp->failed = true;
        break;
    }
out:
    pprof_fold_free(fd);
}

/* --------------------------------------------------------- loop: stream */

static uint64_t held_bytes(const struct flame_page *fp)
{
    uint64_t held = fp->seg[0].len + fp->seg[1].len + fp->seg[2].len + fp->bytes_len;

    for (int i = 0; i < 2; i++)
        if (fp->tree[i])
            held += fp->tree[i]->bytes + fp->tree[i]->n_names * sizeof(*fp->hue[i]);
    if (fp->fold) {
        struct pprof_fold_info info;

        pprof_fold_info(fp->fold, &info);
        held += info.bytes;
    }
    return held;
}

static void page_after(void *arg, int status)
{
    struct flame_page *fp = arg;

    drop_input(fp); /* the blobs go back on the loop */
    if (status != 0) {
        page_release(fp);
        job_error(fp, "Cannot draw this profile now", "proflet is shutting down");
    } else if (!fp->closed && !fp->failed) {
        uint64_t held = held_bytes(fp);

        if (workq_charge(fp->a->work, held) < 0) {
            page_release(fp);
            job_error(fp, "Too many profile pages are being sent at once",
                      "they may hold half of limits.memory-budget: try again in a moment");
        } else {
            fp->charged = held;
        }
    }
    fp->done = true;
    fp->at = 0;
    httpd_resume(fp->a->status, fp);
    page_unref(fp);
}

static bool drawn(const struct pprof_flame *f, uint32_t c)
{
    int64_t w = wadd(f->nodes[c].total, f->nodes[c].base_total);
    int64_t whole = wadd(f->nodes[0].total, f->nodes[0].base_total);

    return w > 0 && w >= whole / FLAME_MIN_DIV;
}

/* A diff frame's colour: red as its share grew, green as it shrank, grey
 * when it stayed within 1% of what it was; saturation by how much, full
 * at double (or new) and at gone. */
static void diff_colour(const struct pprof_flame *f, const struct pprof_flame_node *n, int *hue,
                        int *sat, double *rel)
{
    double right = f->nodes[0].total ? (double)n->total / (double)f->nodes[0].total : 0;
    double left =
        f->nodes[0].base_total ? (double)n->base_total / (double)f->nodes[0].base_total : 0;
    double d = left > 0 ? (right - left) / left : right > 0 ? 1 : 0;
    double m = d < 0 ? -d : d;

    *rel = d;
    if (m > 1)
        m = 1;
    *hue = d > 0 ? 0 : 120;
    *sat = m < 0.01 ? 0 : 30 + (int)(m * 60);
}

/* `label`, `v` in its unit and its share of `whole`: "total 1.2 s (40 %)". */
static void value_share(struct buf *out, const char *label, int64_t v, int64_t whole,
                        enum agent__ui_unit u)
{
    buf_puts(out, label);
    agent__ui_fmt_value(out, v, u);
    buf_puts(out, " (");
    agent__ui_fmt_pct(out, v, whole);
    buf_puts(out, ")");
}

/* The frame's tooltip (a title attribute: "&#10;" breaks its lines). */
static void frame_title(struct buf *out, const struct flame_page *fp, const struct pprof_flame *f,
                        const struct pprof_flame_node *n, double rel)
{
    enum agent__ui_unit u = unit_of(f->types[f->sample_type]);

    agent__ui_esc_cap(out, f->names[n->name], UI_NAME_TITLE);
    if (fp->sides > 1) {
        value_share(out, "&#10;comparison: ", n->total, f->nodes[0].total, u);
        buf_puts(out, ", self ");
        agent__ui_fmt_value(out, n->self, u);
        value_share(out, "&#10;baseline: ", n->base_total, f->nodes[0].base_total, u);
        buf_puts(out, ", self ");
        agent__ui_fmt_value(out, n->base_self, u);
        buf_puts(out, "&#10;change: ");
        agent__ui_fmt_signed(out, wsub(n->total, n->base_total), u);
        if (n->base_total == 0 && n->total)
            buf_puts(out, ", new");
        else if (n->total == 0 && n->base_total)
            buf_puts(out, ", gone");
        else
            buf_printf(out, ", share %+.1f%%", rel * 100);
        return;
    }
    value_share(out, "&#10;total ", n->total, f->nodes[0].total, u);
    value_share(out, "&#10;self ", n->self, f->nodes[0].total, u);
}

/* A position or width as a percentage of the whole, for CSS. */
static void pct_css(struct buf *out, const char *prop, int64_t v, int64_t whole)
{
    buf_printf(out, "%s:%.4f%%", prop, whole > 0 ? 100.0 * (double)v / (double)whole : 0.0);
}

/* One frame's div: at `start` (in value) in row fp->sp. False when the
 * buffer refused it. */
static bool frame_div(struct flame_page *fp, int t, struct buf *out, uint32_t node, int64_t start,
                      int64_t whole, bool diff)
{
    const struct pprof_flame *f = fp->tree[t];
    const struct pprof_flame_node *n = &f->nodes[node];
    int64_t width = wadd(n->total, n->base_total);
    double rel = 0;

    buf_puts(out, "<div class=\"fn\" style=\"");
    pct_css(out, "left", start, whole);
    pct_css(out, ";width", width, whole);
    buf_printf(out, ";--d:%zu", fp->sp);
    if (node == 0) {
        /* the root: grey (ui.css) */
    } else if (diff) {
        int hue, sat;

        diff_colour(f, n, &hue, &sat, &rel);
        buf_printf(out, ";--h:%d;--s:%d%%", hue, sat);
    } else {
        buf_printf(out, ";--h:%u", fp->hue[t][n->name]);
    }
    buf_printf(out, "\" data-v=\"%" PRId64 "\"", width);
    if (diff)
        buf_printf(out, " data-b=\"%" PRId64 "\"", n->base_total);
    buf_puts(out, " title=\"");
    frame_title(out, fp, f, n, rel);
    buf_puts(out, "\">");
    agent__ui_esc_cap(out, f->names[n->name], UI_NAME_SHOWN);
    return buf_puts(out, "</div>") == 0;
}

/* Writes frames of tree `t`, depth first, until `out` reaches `chunk`: 1
 * if frames are left, 0 once the whole graph is written. Frames are one
 * flat list, each placed in the graph's box by its row (--d) and its start
 * and width as percentages of the whole: a frame's drawn children are
 * packed from its start, and what they leave of its width (its own value
 * and its undrawn children's) stays empty. A frame carries its value
 * (data-v, and the baseline's part in a diff, data-b) for the script. */
static int flame_walk(struct flame_page *fp, int t, struct buf *out, size_t chunk)
{
    const struct pprof_flame *f = fp->tree[t];
    int64_t whole = wadd(f->nodes[0].total, f->nodes[0].base_total);
    bool diff = fp->sides > 1;

    if (!fp->walking) {
        fp->stack[0] = (struct walk_frame){ 0, f->nodes[0].first_child, 0 };
        fp->sp = 0;
        fp->walking = true;
        if (!frame_div(fp, t, out, 0, 0, whole, diff))
            return -ENOMEM;
        fp->sp = 1;
    }
    while (fp->sp > 0) {
        struct walk_frame *w = &fp->stack[fp->sp - 1];
        uint32_t c;

        if (out->len >= chunk)
            return 1;
        for (c = w->next; c != UINT32_MAX && !drawn(f, c); c = f->nodes[c].next_sibling)
            ;
        if (c == UINT32_MAX || fp->sp - 1 == FLAME_MAX_DEPTH) {
            fp->sp--;
            continue;
        }
        w->next = f->nodes[c].next_sibling;
        if (!frame_div(fp, t, out, c, w->at, whole, diff))
            return -ENOMEM;
        fp->stack[fp->sp] = (struct walk_frame){ c, f->nodes[c].first_child, w->at };
        w->at = wadd(w->at, wadd(f->nodes[c].total, f->nodes[c].base_total));
        fp->sp++;
    }
    fp->walking = false;
    return 0;
}

/* Sends `src` from `*sent` within what `out` has room for: true once all
 * of it is sent. */
static bool send_text(struct buf *out, size_t chunk, const char *src, size_t len, size_t *sent)
{
    size_t room = chunk > out->len ? chunk - out->len : 0, n = len - *sent;

    if (n > room)
        n = room;
    if (n && buf_append(out, src + *sent, n) < 0)
        return false;
    *sent += n;
    return *sent == len;
}

static int page_part(struct buf *out, size_t chunk, void *state);

static int start_job(struct flame_page *fp)
{
    int rc;

    fp->started = true;
    fp->refs++;
    rc = workq_submit_cost(fp->a->work, 0, fp->cost, page_work, page_after, fp);
    if (rc < 0) {
        fp->refs--;
        drop_input(fp);
        job_error(fp, "Cannot draw this profile now",
                  rc == -E2BIG ? "it needs more than limits.memory-budget: download it"
                               : "out of memory");
        fp->done = true;
    }
    return rc;
}

static int page_part(struct buf *out, size_t chunk, void *state)
{
    struct flame_page *fp = state;

    if (!fp->started)
        start_job(fp);
    if (fp->html.len) {
        if (!send_text(out, chunk, fp->html.data, fp->html.len, &fp->sent))
            return 1;
        buf_done(&fp->html); /* sent: from here on the job's output */
        fp->sent = 0;
    }
    if (!fp->done)
        return HTTPD_STREAM_PARKED;
    if (fp->kind == PAGE_PPROF) {
        if (fp->failed)
            return -EIO; /* a pprof cut short: the client sees the failure */
        if (!send_text(out, chunk, (const char *)fp->bytes, fp->bytes_len, &fp->bytes_sent))
            return 1;
        page_release(fp);
        return 0;
    }
    while (fp->at < 5) {
        if (fp->at % 2 == 0) {
            struct buf *s = &fp->seg[fp->at / 2];

            if (!send_text(out, chunk, s->data ? s->data : "", s->len, &fp->sent))
                return 1;
            fp->sent = 0;
            fp->at++;
            continue;
        }
        if (fp->at / 2 < fp->n_trees && fp->tree[fp->at / 2] && !fp->failed) {
            int rc = flame_walk(fp, fp->at / 2, out, chunk);

            if (rc != 0)
                return rc;
        }
        fp->at++;
    }
    if (fp->kind == PAGE_COLLAPSED && fp->fold && !fp->failed) {
        int rc =
            pprof_fold_collapsed(fp->fold, fp->fold_type, fp->q.side, &fp->fold_pos, out, chunk);

        if (rc != 0)
            return rc;
    }
    page_release(fp);
    return 0;
}

static void page_free(void *state)
{
    struct flame_page *fp = state;

    fp->closed = true; /* a job still running keeps its reference */
    page_unref(fp);
}

/* ----------------------------------------------------------- loop: text */

/* The profiles of `key` whose end falls in [from, to] (the newest alone
 * without a range), oldest first, the newest MERGE_MAX of them. */
static int take(struct flame_page *fp, int side, uint64_t key, bool ranged, int64_t from,
                int64_t to, size_t *cost, size_t *raw_max)
{
    const struct recent_profile *p = recent_get(fp->a->recent, key);
    size_t n = 0, at = fp->n_in;

    for (const struct recent_profile *x = p; x && ranged; x = recent_older(x)) {
        if (x->end_ns < from)
            break;
        if (x->end_ns > to)
            continue;
        if (n == MERGE_MAX) {
            fp->not_merged[side]++;
            continue;
        }
        n++;
    }
    if (!ranged && p)
        n = 1;
    if (n) {
        struct taken *in = realloc(fp->in, (fp->n_in + n) * sizeof(*in));

        if (!in)
            return -ENOMEM;
        fp->in = in;
    }
    fp->n_in += n;
    fp->n_side[side] = n;
    /* Newest first from the end, so the array is oldest first. */
    for (const struct recent_profile *x = p; x && n > 0; x = recent_older(x)) {
        size_t raw;
        uint64_t c;

        if (ranged && (x->end_ns > to || x->end_ns < from))
            continue;
        n--;
        fp->in[at + n] = (struct taken){ recent_ref(x), x->start_ns, x->end_ns, x->len };
        if (pprof_job_cost(x->data, x->len, fp->lim.max_decompressed, true, &raw, &c) == 0) {
            if (c > *cost)
                *cost = c;
            if (raw > *raw_max)
                *raw_max = raw;
        }
    }
    return 0;
}

/* What a page's job holds at its peak, with a fold of fp->fold_max: the
 * fold, and beside it either the largest profile's decode (they come one
 * at a time, each freed before the next) or what is made from the fold:
 * its trees (a sandwich has two), its JSON, or the encoded merge; and the
 * text around them. */
static uint64_t page_cost(const struct flame_page *fp, uint64_t decode)
{
    uint64_t fm = fp->fold_max, made = 0;

    switch (fp->kind) {
    case PAGE_HTML:
        made = (fp->q.fn[0] ? 2 : 1) * (FLAME_TREE_NODES + fm);
        break;
    case PAGE_JSON:
        made = 4 * fm;
        break;
    case PAGE_PPROF:
        made = 2 * fm;
        break;
    case PAGE_COLLAPSED:
        break;
    }
    return fm + (decode > made ? decode : made) + 3 * SEG_MAX;
}

static void err_page(struct httpd_response *resp, int status, const char *msg, const char *why)
{
    struct buf *b = &resp->body;

    resp->status = status;
    resp->content_type = "text/html; charset=utf-8";
    agent__ui_head(b, "Profile");
    buf_printf(b, "<p class=\"err\">%s", msg);
    if (why) {
        buf_puts(b, ": ");
        agent__ui_esc(b, why);
    }
    buf_puts(b, "</p>");
    buf_puts(b, UI_PAGE_TAIL);
}

void agent__ui_profile_page(struct agent *a, const struct httpd_request *req,
                            struct httpd_response *resp, bool download)
{
    const struct agent_config *c = agent_config(a->doc);
    const struct recent_profile *p;
    struct flame_page *fp;
    struct agent__ui_query q;
    char err[256];
    size_t cost = 0, raw_max = 0;
    int64_t now = (int64_t)clock_wall_ns();

    if (agent__ui_query_parse(req->query, &q, err, sizeof(err)) < 0) {
        err_page(resp, 400, "This page's address is not one it understands", err);
        return;
    }
    if (!q.has_key || !(p = recent_get(a->recent, q.key))) {
        err_page(resp, 404,
                 "No recent profile of this target is kept: none was delivered yet, or it left "
                 "the store (server.recent-profiles-bytes)",
                 NULL);
        return;
    }
    if (download && !agent__ui_query_diff(&q) && q.from.kind == UI_TIME_NONE &&
        q.to.kind == UI_TIME_NONE) {
        resp->content_type = "application/octet-stream";
        buf_append(&resp->body, p->data, p->len); /* as delivered */
        return;
    }
    if (!(fp = calloc(1, sizeof(*fp)))) {
        resp->status = 503;
        buf_puts(&resp->body, "out of memory\n");
        return;
    }
    fp->a = a;
    fp->refs = 1; /* the connection's */
    fp->q = q;
    fp->key = q.key;
    fp->kind = download        ? PAGE_PPROF
               : q.format == 1 ? PAGE_JSON
               : q.format == 2 ? PAGE_COLLAPSED
                               : PAGE_HTML;
    fp->sides = agent__ui_query_diff(&q) ? 2 : 1;
    fp->lim = c->limits.pprof;
    if (fp->lim.max_decompressed > FLAME_MAX_RAW)
        fp->lim.max_decompressed = FLAME_MAX_RAW;
    buf_init(&fp->html, TEXT_MAX);
    for (int i = 0; i < 3; i++)
        buf_init(&fp->seg[i], SEG_MAX);
    {
        bool ranged = q.from.kind != UI_TIME_NONE || q.to.kind != UI_TIME_NONE;
        int64_t from = agent__ui_time_ns(&q.from, now, 0), to = agent__ui_time_ns(&q.to, now, now);
        bool backwards = from > to;
        int rc = take(fp, 0, q.key, ranged, from, to, &cost, &raw_max);

        if (rc == 0 && fp->sides > 1) {
            uint64_t bkey = q.has_bkey ? q.bkey : q.key;
            bool branged = q.bfrom.kind != UI_TIME_NONE || q.bto.kind != UI_TIME_NONE;

            if (branged) {
                from = agent__ui_time_ns(&q.bfrom, now, 0);
                to = agent__ui_time_ns(&q.bto, now, now);
            }
            backwards = backwards || from > to;
            rc = take(fp, 1, bkey, branged || ranged, from, to, &cost, &raw_max);
        }
        if (rc < 0 || backwards) {
            page_unref(fp);
            err_page(resp, rc < 0 ? 503 : 400,
                     rc < 0 ? "out of memory" : "The range ends before it starts", NULL);
            return;
        }
    }
    fp->fold_max = c->limits.memory_budget / 8;
    fp->fold_max = fp->fold_max > FOLD_MAX ? FOLD_MAX : fp->fold_max;
    /* Pages may hold half the budget (workq_charge()): a job that fits in
     * the other half always starts. */
    while (fp->fold_max > FOLD_MIN && page_cost(fp, cost) > c->limits.memory_budget / 2)
        fp->fold_max /= 2;
    if (fp->fold_max < FOLD_MIN)
        fp->fold_max = FOLD_MIN;
    fp->cost = page_cost(fp, cost);
    if (fp->kind == PAGE_JSON)
        buf_init(&fp->seg[0], 4 * fp->fold_max); /* still empty: made anew */
    switch (fp->kind) {
    case PAGE_HTML:
        resp->content_type = "text/html; charset=utf-8";
        agent__ui_profile_head(&fp->html, a, fp->key, &fp->q, p);
        break;
    case PAGE_JSON:
        resp->content_type = "application/json";
        break;
    case PAGE_COLLAPSED:
        resp->content_type = "text/plain; charset=utf-8";
        break;
    case PAGE_PPROF:
        resp->content_type = "application/octet-stream";
        break;
    }
    if ((fp->n_side[0] == 0 || (fp->sides > 1 && fp->n_side[1] == 0)) && fp->kind != PAGE_HTML) {
        bool base = fp->n_side[0] != 0;

        page_unref(fp); /* a download of nothing: said before anything is sent */
        resp->status = 404;
        resp->content_type = "text/plain; charset=utf-8";
        buf_puts(&resp->body, base ? "the baseline has no profile kept in its range\n"
                                   : "no profile kept in this range\n");
        return;
    }
    if (fp->n_side[0] == 0 || (fp->sides > 1 && fp->n_side[1] == 0)) {
        fp->done = fp->started = true;
        job_error(fp, "No profile kept in this range",
                  fp->n_side[0] == 0 ? "choose a longer one" : "the baseline has none");
    }
    resp->stream = page_part;
    resp->stream_state = fp;
    resp->stream_free = page_free;
}
