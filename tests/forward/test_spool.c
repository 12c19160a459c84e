/* SPDX-License-Identifier: Apache-2.0 */
/* The spool: one record (round trip, every header byte checked), segment
 * files (a damaged byte anywhere costs exactly the record it hit, torn
 * tails, the delivered prefix, the previous format, rollback of a refused
 * append), and the state machine on a real loop (old-format files replayed,
 * a record damaged after the scan counted once). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xxhash.h>

#include "common/clock.h"
#include "common/workq.h"
#include "forward/forward.h"
#include "forward/internal.h"
#include "tcfg.h"
#include "test.h"
#include "test_loop.h"

#define NREC 12

static struct fwd_profile *mk(int i)
{
    struct labels ls = LABELS_INIT;
    size_t len = 100 + (size_t)i * 37;
    uint8_t *d = malloc(len);
    char svc[16];

    uint64_t x = 0x9e3779b97f4a7c15ull + (uint64_t)i;

    for (size_t k = 0; k < len; k++) { /* incompressible, like gzip bytes */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        d[k] = (uint8_t)x;
    }
    snprintf(svc, sizeof(svc), "svc%d", i % 3);
    labels_set(&ls, "service_name", svc);
    labels_set(&ls, "__name__", "cpu");
    return fwd_profile_new(&ls, d, len, 1000 + i, 2000 + i);
}

static bool same(const struct fwd_profile *a, const struct fwd_profile *b)
{
    return a && b && strcmp(a->id, b->id) == 0 && a->len == b->len &&
           memcmp(a->data, b->data, a->len) == 0 && labels_equal(&a->labels, &b->labels) &&
           a->start_ns == b->start_ns && a->end_ns == b->end_ns;
}

/* A segment's bytes: header, then records numbered 0..n-1; offs[i] is where
 * record i starts, offs[n] the end. `v1` writes the previous format. */
struct seg_bytes {
    uint8_t *b;
    size_t len;
    size_t offs[NREC + 1];
    struct fwd_profile *p[NREC];
};

static void v1_record(const uint8_t *v2, size_t len2, uint8_t **out, size_t *out_len)
{
    struct fwd__rec_hdr h;
    uint32_t plen;
    uint8_t *o, tmp[16];
    XXH64_state_t *st = XXH64_createState();

    ASSERT_EQ(fwd__rec_hdr_parse(v2, len2, &h), 0);
    plen = h.len;
    o = malloc(FWD_REC_HDR_V1 + plen);
    fwd__put32(o, FWD_REC_MAGIC_V1);
    fwd__put32(o + 4, plen);
    fwd__put64(o + 8, h.series);
    fwd__put64(o + 16, h.wall_ms);
    memcpy(o + FWD_REC_HDR_V1, v2 + FWD_REC_HDR, plen);
    fwd__put64(tmp, h.series);
    fwd__put64(tmp + 8, h.wall_ms);
    XXH64_reset(st, 0);
    XXH64_update(st, tmp, 16);
    XXH64_update(st, o + FWD_REC_HDR_V1, plen);
    fwd__put64(o + 24, XXH64_digest(st));
    XXH64_freeState(st);
    *out = o;
    *out_len = FWD_REC_HDR_V1 + plen;
}

static void seg_build(struct seg_bytes *sb, bool v1)
{
    size_t cap = 1 << 16;

    sb->b = malloc(cap);
    memcpy(sb->b, v1 ? FWD_SEG_MAGIC_V1 : FWD_SEG_MAGIC, 8);
    fwd__put64(sb->b + 8, 777);
    sb->len = FWD_SEG_HDR;
    for (int i = 0; i < NREC; i++) {
        uint8_t *rec, *r1;
        size_t rl, l1;

        sb->p[i] = mk(i);
        ASSERT_EQ(
            fwd__rec_encode(sb->p[i], clock_wall_ms() + (uint64_t)i, (uint32_t)i, 1, &rec, &rl), 0);
        if (v1) {
            v1_record(rec, rl, &r1, &l1);
            free(rec);
            rec = r1;
            rl = l1;
        }
        ASSERT(sb->len + rl <= cap);
        sb->offs[i] = sb->len;
        memcpy(sb->b + sb->len, rec, rl);
        sb->len += rl;
        free(rec);
    }
    sb->offs[NREC] = sb->len;
}

static void seg_free(struct seg_bytes *sb)
{
    for (int i = 0; i < NREC; i++)
        fwd_profile_unref(sb->p[i]);
    free(sb->b);
}

static void put_file(const char *path, const uint8_t *b, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

    ASSERT(fd >= 0);
    ASSERT_EQ(write(fd, b, len), (ssize_t)len);
    close(fd);
}

static off_t file_size(const char *path)
{
    struct stat st;

    ASSERT_EQ(stat(path, &st), 0);
    return st.st_size;
}

/* Scans `b` as a file; loads every record the scan kept and checks each
 * against the profile its number names. Returns the scan (records kept). */
static struct fwd__seg_scan scan_bytes(const uint8_t *b, size_t len, uint32_t delivered,
                                       struct fwd_profile *const *orig)
{
    char path[] = "/tmp/fwd-spool-XXXXXX";
    int fd = mkstemp(path);
    struct fwd__seg_scan sc = { 0 };
    struct fwd__seg_load l = { 0 };

    ASSERT(fd >= 0);
    ASSERT_EQ(write(fd, b, len), (ssize_t)len);
    ASSERT_EQ(fwd__seg_scan_fd(fd, &sc, delivered), 0);
    close(fd);
    ASSERT_U64_EQ(file_size(path), sc.end); /* truncated after the last valid record */
    snprintf(l.path, sizeof(l.path), "%s", path);
    l.recs = sc.recs;
    l.max = sc.n;
    l.max_bytes = UINT64_MAX;
    fwd__seg_load(&l);
    ASSERT_EQ(l.n, sc.n);
    for (size_t i = 0; i < sc.n; i++) {
        ASSERT(sc.recs[i].seq < NREC);
        ASSERT(i == 0 || sc.recs[i].seq > sc.recs[i - 1].seq);
        ASSERT(same(l.out[i], orig[sc.recs[i].seq]));
        fwd_profile_unref(l.out[i]);
    }
    free(l.out);
    unlink(path);
    return sc;
}

TEST(record_round_trip_every_header_byte_checked)
{
    struct fwd_profile *p = mk(3), *q = NULL;
    struct fwd__rec_hdr h;
    uint8_t *rec;
    size_t len;

    ASSERT_EQ(fwd__rec_encode(p, 1234, 42, 1, &rec, &len), 0);
    ASSERT_EQ(fwd__rec_hdr_parse(rec, len, &h), 0);
    ASSERT_EQ(h.version, 2);
    ASSERT_EQ(h.hdr_len + h.len, len);
    ASSERT_EQ(h.seq, 42);
    ASSERT_U64_EQ(h.wall_ms, 1234);
    ASSERT_U64_EQ(h.series, fwd__series_hash(&p->labels));
    ASSERT(fwd__rec_check(&h, rec + FWD_REC_HDR));
    ASSERT_EQ(fwd__rec_decode(rec + FWD_REC_HDR, h.len, &q), 0);
    ASSERT(same(p, q));
    fwd_profile_unref(q);
    /* Every bit of the header is covered by the header check. */
    for (size_t i = 0; i < FWD_REC_HDR * 8; i++) {
        rec[i / 8] ^= (uint8_t)(1u << (i % 8));
        ASSERT_EQ(fwd__rec_hdr_parse(rec, len, &h), -EINVAL);
        rec[i / 8] ^= (uint8_t)(1u << (i % 8));
    }
    /* A header cut short is no header. */
    ASSERT_EQ(fwd__rec_hdr_parse(rec, FWD_REC_HDR - 1, &h), -EINVAL);
    ASSERT_EQ(fwd__rec_hdr_parse(rec, len, &h), 0);
    rec[FWD_REC_HDR + h.len / 2] ^= 1;
    ASSERT(!fwd__rec_check(&h, rec + FWD_REC_HDR));
    free(rec);
    fwd_profile_unref(p);
}

TEST(one_damaged_byte_anywhere_costs_exactly_its_record)
{
    struct seg_bytes sb;

    seg_build(&sb, false);
    for (size_t at = 0; at < sb.len; at++) {
        struct fwd__seg_scan sc;
        int hit = -1;

        for (int i = 0; i < NREC; i++) {
            if (at >= sb.offs[i] && at < sb.offs[i + 1])
                hit = i;
        }
        sb.b[at] ^= 0x5a;
        sc = scan_bytes(sb.b, sb.len, 0, sb.p);
        sb.b[at] ^= 0x5a;
        if (sc.lost != (hit >= 0) || sc.n != NREC - (hit >= 0))
            test__fail(__FILE__, __LINE__, "byte %zu (record %d): kept %zu, lost %llu", at, hit,
                       sc.n, (unsigned long long)sc.lost);
        for (size_t i = 0; i < sc.n; i++)
            ASSERT(sc.recs[i].seq != (uint32_t)hit);
        fwd__seg_scan_done(&sc);
    }
    seg_free(&sb);
}

TEST(damage_counts_are_exact_and_skip_the_delivered_prefix)
{
    struct seg_bytes sb;
    struct fwd__seg_scan sc;

    seg_build(&sb, false);
    /* Three neighbours' headers and a far payload: four records. */
    for (int i = 4; i <= 6; i++)
        sb.b[sb.offs[i] + 9] ^= 1;
    sb.b[sb.offs[10] + FWD_REC_HDR + 3] ^= 0x80;
    sc = scan_bytes(sb.b, sb.len, 0, sb.p);
    ASSERT_EQ(sc.n, NREC - 4);
    ASSERT_U64_EQ(sc.lost, 4);
    fwd__seg_scan_done(&sc);
    /* Records numbered below the cursor were delivered: not counted. */
    sc = scan_bytes(sb.b, sb.len, 6, sb.p);
    ASSERT_U64_EQ(sc.lost, 1 + 1); /* record 6 and record 10 */
    fwd__seg_scan_done(&sc);
    sc = scan_bytes(sb.b, sb.len, 11, sb.p);
    ASSERT_U64_EQ(sc.lost, 0);
    fwd__seg_scan_done(&sc);
    seg_free(&sb);
}

TEST(torn_tail_at_every_length)
{
    struct seg_bytes sb;

    seg_build(&sb, false);
    for (size_t len = 0; len <= sb.len; len++) {
        struct fwd__seg_scan sc = scan_bytes(sb.b, len, 0, sb.p);
        size_t whole = 0;

        while (whole < NREC && sb.offs[whole + 1] <= len)
            whole++;
        ASSERT_EQ(sc.n, whole);
        /* A cut inside a record loses that record, counted once. */
        ASSERT_U64_EQ(sc.lost, len > FWD_SEG_HDR && len > sb.offs[whole] ? 1 : 0);
        ASSERT_EQ(sc.end, len < FWD_SEG_HDR ? 0 : sb.offs[whole]);
        fwd__seg_scan_done(&sc);
    }
    seg_free(&sb);
}

TEST(previous_format_is_read)
{
    struct seg_bytes sb;
    struct fwd__seg_scan sc;

    seg_build(&sb, true);
    sc = scan_bytes(sb.b, sb.len, 0, sb.p);
    ASSERT_EQ(sc.version, 1);
    ASSERT_EQ(sc.n, NREC);
    ASSERT_U64_EQ(sc.lost, 0);
    ASSERT_U64_EQ(sc.created_ms, 777);
    fwd__seg_scan_done(&sc);
    /* Without record numbers, a damaged region counts one record, and the
     * records after it are read. */
    sb.b[sb.offs[5] + FWD_REC_HDR_V1 + 2] ^= 4;
    sc = scan_bytes(sb.b, sb.len, 0, sb.p);
    ASSERT_EQ(sc.n, NREC - 1);
    ASSERT_U64_EQ(sc.lost, 1);
    fwd__seg_scan_done(&sc);
    seg_free(&sb);
}

TEST(refused_append_is_rolled_back)
{
    char path[] = "/tmp/fwd-append-XXXXXX";
    int fd = mkstemp(path);
    struct fwd__pend pend[NREC];
    struct fwd__seg_append a = { 0 };
    struct fwd__seg_scan sc = { 0 };
    struct rlimit old, lim;
    int64_t res[NREC] = { 0 };
    size_t written = 0;

    ASSERT(fd >= 0);
    close(fd);
    for (int i = 0; i < NREC; i++)
        pend[i] = (struct fwd__pend){ mk(i), 0, 100 + (uint64_t)i };
    snprintf(a.path, sizeof(a.path), "%s", path);
    a.create = true;
    a.pend = pend;
    a.n = NREC;
    a.res = res;
    /* The file may not grow past 1500 bytes: a write crossing it is short,
     * the next one fails (EFBIG), as on a full disk. */
    signal(SIGXFSZ, SIG_IGN);
    ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 1500;
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
    fwd__seg_append(&a);
    ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
    ASSERT(a.err < 0);
    while (written < NREC && res[written] > 0)
        written++;
    ASSERT(written > 0 && written < NREC);
    for (size_t i = written; i < NREC; i++)
        ASSERT_EQ(res[i], 0);              /* left for a retry */
    ASSERT_U64_EQ(file_size(path), a.end); /* no torn bytes */
    /* The retry appends the rest where the first job stopped. */
    a.create = false;
    a.off = a.end;
    a.seq = (uint32_t)written;
    a.pend = pend + written;
    a.n = NREC - written;
    a.res = res + written;
    a.err = 0;
    fwd__seg_append(&a);
    ASSERT_EQ(a.err, 0);
    ASSERT_EQ(fwd__seg_scan_file(path, &sc), NREC);
    ASSERT_U64_EQ(sc.lost, 0);
    ASSERT_EQ(sc.next_seq, NREC);
    fwd__seg_scan_done(&sc);
    for (int i = 0; i < NREC; i++)
        fwd_profile_unref(pend[i].p);
    unlink(path);
}

/* ------------------------------------------------ the spool on a real loop */

struct loop_env {
    uv_loop_t loop;
    struct workq *wq;
    struct fwd *f;
    struct fwd_ep ep;
    struct cfg_remote cfg; /* the endpoint's settings (it reads them in place) */
    struct cfg_spool spool;
    struct fwd__spool *s;
    struct fwd_profile *got[NREC];
    uint64_t tokens[NREC];
    size_t n_got;
    bool changed, closed;
};

static void on_loaded(void *ud, struct fwd_profile **p, uint64_t *tokens, size_t n)
{
    struct loop_env *e = ud;

    for (size_t i = 0; i < n; i++) {
        ASSERT(e->n_got < NREC);
        e->tokens[e->n_got] = tokens[i];
        e->got[e->n_got++] = p[i];
    }
}

static void on_changed(void *ud)
{
    ((struct loop_env *)ud)->changed = true;
}

static const struct fwd__spool_ops_cb env_cb = { on_loaded, on_changed };

static void on_closed(void *ud)
{
    ((struct loop_env *)ud)->closed = true;
}

/* Runs the loop until the spool's jobs are done; at most 20 s. */
static void run_idle(struct loop_env *e)
{
    RUN_UNTIL(&e->loop, !fwd__spool_busy(e->s), 20000);
}

static void env_open(struct loop_env *e, char *dir)
{
    char err[256];

    memset(e, 0, sizeof(*e));
    ASSERT_EQ(uv_loop_init(&e->loop), 0);
    ASSERT_EQ(
        workq_new(&(struct workq_opts){ .loop = &e->loop, .max_inflight = 4, .max_backlog = 64 },
                  &e->wq, err, sizeof(err)),
        0);
    ASSERT_EQ(
        fwd_new(&(struct fwd_opts){ .loop = &e->loop, .work = e->wq }, &e->f, err, sizeof(err)), 0);
    e->ep.f = e->f;
    e->ep.loop = &e->loop;
    e->ep.name = "ep";
    fwd_cfg_spool_init(&e->spool);
    e->spool.dir = dir;
    e->spool.fsync = (char *)"never";
    e->spool.max_bytes = 1 << 30;
    e->spool.max_age_ms = 3600 * 1000;
    e->spool.segment_bytes = 1 << 20;
    fwd_cfg_remote_init(&e->cfg);
    e->cfg.queue_max_profiles = 1000;
    e->cfg.queue_max_bytes = 1 << 30;
    e->ep.spool = &e->spool;
    e->ep.cfg = &e->cfg;
    ASSERT_EQ(fwd__spool_open(&e->ep, &env_cb, e, &e->s, err, sizeof(err)), 0);
    RUN_UNTIL(&e->loop, e->changed, 20000);
    ASSERT(fwd__spool_ready(e->s));
}

static void env_load_all(struct loop_env *e)
{
    for (int i = 0; i < 100 && fwd__spool_pending(e->s) > 0; i++) {
        e->changed = false;
        if (fwd__spool_load(e->s, NREC, 0))
            run_idle(e);
    }
    ASSERT_U64_EQ(fwd__spool_pending(e->s), 0);
}

static void env_close(struct loop_env *e)
{
    for (size_t i = 0; i < e->n_got; i++)
        fwd_profile_unref(e->got[i]);
    fwd__spool_close(e->s, on_closed, e);
    RUN_UNTIL(&e->loop, e->closed, 20000);
    fwd__spool_free(e->s);
    fwd_close(e->f, 0, NULL, NULL);
    uv_run(&e->loop, UV_RUN_DEFAULT);
    workq_free(e->wq);
    ASSERT_EQ(uv_loop_close(&e->loop), 0);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char path[1024];

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    put_file(path, (const uint8_t *)text, strlen(text));
}

TEST(old_format_spool_is_replayed_from_its_cursor)
{
    char root[] = "/tmp/fwd-spooldir-XXXXXX", dir[600], seg[700];
    struct loop_env e;
    struct seg_bytes sb;

    ASSERT_NOT_NULL(mkdtemp(root));
    snprintf(dir, sizeof(dir), "%s/ep", root);
    ASSERT_EQ(mkdir(dir, 0700), 0);
    seg_build(&sb, true);
    snprintf(seg, sizeof(seg), "%s/0000000000000003.seg", dir);
    put_file(seg, sb.b, sb.len);
    write_text(dir, "cursor", "0000000000000003 4\n"); /* the first 4 were delivered */
    env_open(&e, root);
    ASSERT_U64_EQ(fwd__spool_pending(e.s), NREC - 4);
    env_load_all(&e);
    ASSERT_EQ(e.n_got, NREC - 4);
    for (size_t i = 0; i < e.n_got; i++)
        ASSERT(same(e.got[i], sb.p[4 + i]));
    ASSERT_U64_EQ(e.ep.st.dropped_profiles[FWD_DROP_SPOOL_CORRUPT], 0);
    /* Delivered: the old segment goes; appends go to a new, current one. */
    for (size_t i = 0; i < e.n_got; i++)
        fwd__spool_ack(e.s, e.tokens[i]);
    fwd__spool_append(e.s, sb.p[0]);
    run_idle(&e);
    ASSERT(access(seg, F_OK) != 0);
    snprintf(seg, sizeof(seg), "%s/0000000000000004.seg", dir);
    ASSERT_EQ(access(seg, F_OK), 0);
    env_close(&e);
    seg_free(&sb);
    {
        struct fwd__seg_scan sc = { 0 };

        ASSERT_EQ(fwd__seg_scan_file(seg, &sc), 1);
        ASSERT_EQ(sc.version, 2);
        fwd__seg_scan_done(&sc);
    }
    unlink(seg);
    snprintf(seg, sizeof(seg), "%s/cursor", dir);
    unlink(seg);
    rmdir(dir);
    rmdir(root);
}

TEST(record_damaged_after_the_scan_is_counted_once)
{
    char root[] = "/tmp/fwd-spooldir-XXXXXX", dir[600], seg[700];
    struct loop_env e;
    struct seg_bytes sb;
    int fd;
    uint8_t x;

    ASSERT_NOT_NULL(mkdtemp(root));
    snprintf(dir, sizeof(dir), "%s/ep", root);
    ASSERT_EQ(mkdir(dir, 0700), 0);
    seg_build(&sb, false);
    snprintf(seg, sizeof(seg), "%s/0000000000000001.seg", dir);
    put_file(seg, sb.b, sb.len);
    env_open(&e, root);
    ASSERT_U64_EQ(fwd__spool_pending(e.s), NREC);
    /* The scan is done; now a payload byte of record 7 goes bad. */
    fd = open(seg, O_RDWR | O_CLOEXEC);
    ASSERT_EQ(pread(fd, &x, 1, (off_t)sb.offs[7] + FWD_REC_HDR + 5), 1);
    x ^= 0x10;
    ASSERT_EQ(pwrite(fd, &x, 1, (off_t)sb.offs[7] + FWD_REC_HDR + 5), 1);
    close(fd);
    env_load_all(&e);
    ASSERT_EQ(e.n_got, NREC - 1);
    for (size_t i = 0; i < e.n_got; i++)
        ASSERT(same(e.got[i], sb.p[i < 7 ? i : i + 1]));
    ASSERT_U64_EQ(e.ep.st.dropped_profiles[FWD_DROP_SPOOL_CORRUPT], 1);
    for (size_t i = 0; i < e.n_got; i++)
        fwd__spool_ack(e.s, e.tokens[i]);
    run_idle(&e);
    ASSERT(access(seg, F_OK) != 0); /* all delivered or counted: deleted */
    env_close(&e);
    seg_free(&sb);
    snprintf(seg, sizeof(seg), "%s/cursor", dir);
    unlink(seg);
    rmdir(dir);
    rmdir(root);
}

/* The gauges count what an append job holds: between the job's start and
 * its end those records are in neither the pending list nor the index, and
 * a spool that reads empty then lets a caller think everything went out. */
TEST(records_being_written_are_counted)
{
    char root[] = "/tmp/fwd-spooldir-XXXXXX", cmd[600];
    struct loop_env e;
    struct fwd_profile *p0 = mk(0), *p1 = mk(1);

    ASSERT_NOT_NULL(mkdtemp(root));
    env_open(&e, root);
    fwd__spool_append(e.s, p0); /* starts the append job, which holds p0 */
    ASSERT(fwd__spool_busy(e.s));
    fwd__spool_append(e.s, p1); /* recomputes the gauges while it runs */
    ASSERT_U64_EQ(e.ep.st.spool_records, 2);
    ASSERT_U64_EQ(e.ep.st.spool_bytes, p0->len + p1->len);
    ASSERT(e.ep.st.spool_oldest_ms > 0);
    run_idle(&e);
    ASSERT_U64_EQ(e.ep.st.spool_records, 2);
    env_load_all(&e);
    for (size_t i = 0; i < e.n_got; i++)
        fwd__spool_ack(e.s, e.tokens[i]);
    run_idle(&e);
    ASSERT_U64_EQ(e.ep.st.spool_records, 0);
    env_close(&e);
    fwd_profile_unref(p0);
    fwd_profile_unref(p1);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    ASSERT_EQ(system(cmd), 0);
}

/* The agent cancels the work queue's backlog when it begins to shut down;
 * a spool write cancelled so must still happen: the records are neither
 * lost nor dropped, and the spool stays busy until they are on disk. */
TEST(a_cancelled_write_is_done_later)
{
    char root[] = "/tmp/fwd-spooldir-XXXXXX", cmd[600];
    struct loop_env e;
    struct fwd_profile *p[4];
    int blocker = 0;

    ASSERT_NOT_NULL(mkdtemp(root));
    env_open(&e, root);
    workq_set_limits(e.wq, 1, 64);
    ASSERT_EQ(tblocker_start(e.wq, &blocker), 0);
    for (int i = 0; i < 4; i++) {
        p[i] = mk(i);
        fwd__spool_append(e.s, p[i]); /* the first starts an append job: queued */
    }
    ASSERT_EQ(workq_pending(e.wq), 2);
    workq_cancel_backlog(e.wq);
    ASSERT_EQ(workq_pending(e.wq), 1); /* the append job was cancelled */
    ASSERT(fwd__spool_busy(e.s));
    tblocker_release();
    run_idle(&e);
    ASSERT_EQ(blocker, 1);
    ASSERT_U64_EQ(e.ep.st.dropped_profiles[FWD_DROP_IO], 0);
    ASSERT_U64_EQ(e.ep.st.spool_written_profiles, 4);
    env_load_all(&e);
    ASSERT_EQ(e.n_got, 4);
    for (size_t i = 0; i < e.n_got; i++)
        ASSERT(same(e.got[i], p[i]));
    for (size_t i = 0; i < e.n_got; i++)
        fwd__spool_ack(e.s, e.tokens[i]);
    run_idle(&e);
    env_close(&e);
    for (int i = 0; i < 4; i++)
        fwd_profile_unref(p[i]);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    ASSERT_EQ(system(cmd), 0);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
