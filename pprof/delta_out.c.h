/* SPDX-License-Identifier: Apache-2.0 */
/* A part of delta.c (included there, one translation unit): the output
 * writer. Referenced records are copied as raw bytes, each emitted sample
 * as its raw fields plus freshly encoded values. */
/* ---- output ---- */

/* Bytes the output buffer keeps past the end of the output, so that a
 * short copy may write a whole COPY_CHUNK. */
#define COPY_CHUNK 32

/* Copies `len` bytes of the raw profile at `src` to `o`. Most records of a
 * profile are short (a location, a function, a string: 5 to 30 bytes), and
 * a library memcpy() per record costs more than the copy: one of fixed size
 * (two vector moves) writes into the output's slack and reads within the
 * raw profile instead. */
static inline uint8_t *copy_raw(const struct ctx *c, uint8_t *o, const uint8_t *src, size_t len)
{
    if (len <= COPY_CHUNK && (size_t)(c->raw + c->len - src) >= COPY_CHUNK)
        memcpy(o, src, COPY_CHUNK);
    else
        memcpy(o, src, len);
    return o + len;
}

static uint8_t *put_raw(const struct ctx *c, uint8_t *o, uint8_t tag, const uint8_t *data,
                        size_t len)
{
    *o++ = tag;
    o = pprof__put_varint(o, len);
    return copy_raw(c, o, data, len);
}

static uint8_t *put_scalar(uint8_t *o, uint8_t tag, int64_t v)
{
    if (v == 0)
        return o;
    *o++ = tag;
    return pprof__put_varint(o, (uint64_t)v);
}

/* What visit_locations() does to each location of a stack. */
enum loc_op {
    LOC_MARK,    /* an emitted sample uses it */
    LOC_UNCOUNT, /* a sample not emitted takes its reference back */
};

static inline __attribute__((always_inline)) void visit_location(struct loc *l, enum loc_op op)
{
    if (op == LOC_MARK)
        l->used = 1;
    else
        l->refs--;
}

/* Applies `op` to the location of every id of a location_id field whose
 * ids the sample scan checked: eight one-byte or four two-byte ids per
 * load where they come so, as in add_locs(), else one at a time. */
static inline __attribute__((always_inline)) void
visit_locations(struct ctx *c, const struct pprof__field *f, enum loc_op op)
{
    struct loc *locs = c->locs;
    uint64_t id;

    if (f->wt == PPROF__WT_VARINT) {
        visit_location(&locs[c->loc_by_id ? f->val : pprof__idmap_get(&c->locmap, f->val)], op);
        return;
    }
    const uint8_t *q = f->data, *qe = f->data + f->len;
    if (!c->loc_by_id) {
        while (q < qe && pprof__varint(&q, qe, &id) == 0)
            visit_location(&locs[pprof__idmap_get(&c->locmap, id)], op);
        return;
    }
    while (q < qe) {
        if (qe - q >= 8) {
            uint64_t w, m;
            memcpy(&w, q, 8);
            m = w & 0x8080808080808080ULL;
            if (m == 0) {
#pragma GCC unroll 8
                for (unsigned j = 0; j < 8; j++)
                    visit_location(&locs[(w >> (8 * j)) & 0x7f], op);
                q += 8;
                continue;
            }
            if (m == 0x0080008000800080ULL) {
                uint64_t x = (w & 0x007f007f007f007fULL) | (w >> 1 & 0x3f803f803f803f80ULL);
#pragma GCC unroll 4
                for (unsigned j = 0; j < 4; j++)
                    visit_location(&locs[(uint16_t)(x >> (16 * j))], op);
                q += 8;
                continue;
            }
        }
        if (*q < 0x80)
            id = *q++;
        else if (pprof__varint(&q, qe, &id) < 0)
            break;
        visit_location(&locs[id], op);
    }
}

static void mark_locations(struct ctx *c, const struct pprof__field *f)
{
    visit_locations(c, f, LOC_MARK);
}

/* Copies a sample's fields except its values, marking the strings its
 * labels reference. */
static uint8_t *copy_sample_fields(struct ctx *c, uint8_t *o, const struct span *s)
{
    const uint8_t *p = c->raw + s->off, *end = p + s->len;
    struct pprof__field f;

    while (pprof__next_field(&p, end, &f) > 0) {
        if (f.num == 2)
            continue;
        if (f.num == 3 && c->lbl_verdict && label_dropped(c, label_key(f.data, f.len)))
            continue;
        memcpy(o, f.start, (size_t)(p - f.start));
        o += p - f.start;
        if (f.num == 1 && c->mark_locs)
            mark_locations(c, &f);
        if (f.num == 3 && !(f.len == c->last_label_len && c->last_label &&
                            memcmp(f.data, c->last_label, f.len) == 0)) {
            /* A repeated scalar field: the last one wins, as in protobuf-c
             * (and only the last one was checked). The strings of the
             * previous label are marked already. */
            const uint8_t *q = f.data, *qe = f.data + f.len;
            c->last_label = f.data;
            c->last_label_len = f.len;
            struct pprof__field g;
            uint64_t v[5] = { 0 };
            while (pprof__next_field(&q, qe, &g) > 0)
                if (g.num <= 4)
                    v[g.num] = g.val;
            mark_str(c, v[1]);
            mark_str(c, v[2]);
            mark_str(c, v[4]);
        }
    }
    return o;
}

/* Marks what an emitted sample references (its locations, its labels'
 * strings) without copying it, as copy_sample_fields() does. */
static void mark_sample_refs(struct ctx *c, const struct span *s)
{
    const uint8_t *p = c->raw + s->off, *end = p + s->len;
    struct pprof__field f;

    while (pprof__next_field(&p, end, &f) > 0) {
        if (f.num == 1)
            mark_locations(c, &f);
        else if (f.num == 3 && c->lbl_verdict && label_dropped(c, label_key(f.data, f.len)))
            continue;
        else if (f.num == 3 && !(f.len == c->last_label_len && c->last_label &&
                                 memcmp(f.data, c->last_label, f.len) == 0)) {
            const uint8_t *q = f.data, *qe = f.data + f.len;
            struct pprof__field g;
            uint64_t v[5] = { 0 };
            c->last_label = f.data;
            c->last_label_len = f.len;
            while (pprof__next_field(&q, qe, &g) > 0)
                if (g.num <= 4)
                    v[g.num] = g.val;
            mark_str(c, v[1]);
            mark_str(c, v[2]);
            mark_str(c, v[4]);
        }
    }
}

static void mark_function(struct ctx *c, uint32_t fi)
{
    c->fn_used[fi] = 1;
    mark_str(c, c->fn_name[fi]);
    mark_str(c, c->fn_sys[fi]);
    mark_str(c, c->fn_file[fi]);
}

static void mark_location_functions(struct ctx *c, const struct span *s)
{
    const uint8_t *p = c->raw + s->off, *end = p + s->len;
    struct pprof__field f;

    while (pprof__next_field(&p, end, &f) > 0) {
        if (f.num != 4 || f.wt != PPROF__WT_LEN)
            continue;
        const uint8_t *q = f.data, *qe = f.data + f.len;
        struct pprof__field g;
        uint64_t fid = 0;
        while (pprof__next_field(&q, qe, &g) > 0)
            if (g.num == 1)
                fid = g.val; /* the last one wins, and was checked */
        if (fid)
            mark_function(c, pprof__idmap_get(&c->fnmap, fid));
    }
}

/* Takes the references of the samples that are not emitted out of the
 * counts of the sample scan: after it, a location or label string is used
 * by the output iff its count is not zero. The ids and labels were checked
 * by the scan. */
static void uncount_not_emitted(struct ctx *c)
{
    for (size_t i = 0; i < c->n_ents; i++) {
        const struct span *s = &c->spans[F_SAMPLE][i];
        const uint8_t *p = c->raw + s->off, *end = p + s->len;
        struct pprof__field f;

        if (c->ents[i].out_vlen)
            continue;
        while (pprof__next_field(&p, end, &f) > 0) {
            if (f.num == 1) {
                visit_locations(c, &f, LOC_UNCOUNT);
            } else if (f.num == 3) {
                uint64_t v[5] = { 0 };
                read_scalars(f.data, f.data + f.len, 4, v, 4);
                if (c->lbl_verdict && label_dropped(c, v[1]))
                    continue; /* never counted */
                c->str_lblrefs[v[1]]--;
                c->str_lblrefs[v[2]]--;
                c->str_lblrefs[v[4]]--;
            }
        }
    }
}

static uint8_t *put_values(const struct ctx *c, uint8_t *o, const int64_t *v)
{
    for (size_t k = 0; k < c->ncols; k++)
        if (c->cum_of_col[k] != COL_DROPPED)
            o = pprof__put_varint(o, (uint64_t)v[k]);
    return o;
}

/* Writes the emitted samples, their new values in place of the old. */
static uint8_t *put_samples(struct ctx *c, uint8_t *o)
{
    for (size_t i = 0; i < c->n_ents; i++) {
        const struct ent *e = &c->ents[i];
        const struct span *s = &c->spans[F_SAMPLE][i];
        const int64_t *outv = c->sums + i * c->ncols;
        size_t vlen = e->out_vlen, body;

        if (vlen == 0)
            continue;
        body = s->len - e->vbytes + 1 + pprof__varint_size(vlen) + vlen;
        *o++ = 0x12;
        o = pprof__put_varint(o, body);
        if (e->vend) {
            /* One value field (as Go writes samples): the bytes around it
             * are copied as they are, the new values put in its place. */
            const uint8_t *sp = c->raw + s->off;
            if (c->mark_locs)
                mark_sample_refs(c, s);
            o = copy_raw(c, o, sp, e->voff);
            *o++ = 0x12;
            o = pprof__put_varint(o, vlen);
            o = put_values(c, o, outv);
            o = copy_raw(c, o, sp + e->vend, s->len - e->vend);
            continue;
        }
        o = copy_sample_fields(c, o, s);
        *o++ = 0x12;
        o = pprof__put_varint(o, vlen);
        o = put_values(c, o, outv);
    }
    return o;
}

/* default_sample_type names a type by its string; once the filter drops
 * that type, the output names none (readers then take the last type). */
static int64_t default_type_out(const struct ctx *c)
{
    if (c->ncols_out == c->ncols || !c->default_sample_type)
        return c->default_sample_type;
    for (size_t i = 0; i < c->ncols; i++) {
        const struct span *s = &c->spans[F_SAMPLE_TYPE][i];
        uint64_t v[3] = { 0 };

        if (c->cum_of_col[i] == COL_DROPPED)
            continue;
        read_scalars(c->raw + s->off, c->raw + s->off + s->len, 2, v, 2);
        if ((int64_t)v[1] == c->default_sample_type)
            return c->default_sample_type;
    }
    return 0;
}

static int encode(struct ctx *c, int64_t prev_time)
{
    size_t samples_in = 0, samples_out = 0, samples_kept = 0, bound;
    uint8_t *o;

    c->last_label = NULL;
    /* The output values first (finish_state() settled them, but for a
     * profile without cumulative columns), so that the output buffer can
     * be sized exactly: every other record is copied or shrunk, never
     * grown. */
    if (!c->settled) {
        for (size_t i = 0; i < c->n_ents; i++) {
            if (c->ents[i].dup)
                c->ents[i].out_vlen = 0;
            else
                settle_entry(c, i);
        }
    }
    samples_kept = c->samples_kept;
    samples_out = c->samples_out;
    samples_in = c->samples_in;
    /* The locations and label strings to keep are those the emitted
     * samples reference: the references the sample scan counted, less
     * those of the samples not emitted (duplicates merged, all-zero deltas
     * dropped) when they are the fewer; else the emitted ones are walked
     * and marked as they are written. */
    size_t not_emitted = c->n[F_SAMPLE] - samples_kept;
    c->mark_locs = not_emitted > samples_kept;
    if (!c->mark_locs) {
        if (not_emitted)
            uncount_not_emitted(c);
        for (size_t i = 0; i < c->n[F_STRING]; i++)
            if (c->str_lblrefs[i])
                mark_str(c, i);
    }
    bound = c->len - samples_in + samples_out + 11 * c->n_comments + 64 + COPY_CHUNK;
    c->out = c->out_scratch              ? pprof__scratch(PPROF__S_OUT, bound, false)
             : pprof__acct_charge(bound) ? malloc(bound)
                                         : NULL;
    if (!c->out)
        return -ENOMEM;
    o = c->out;
    for (size_t i = 0; i < c->n[F_SAMPLE_TYPE]; i++) {
        const struct span *s = &c->spans[F_SAMPLE_TYPE][i];
        if (c->cum_of_col[i] != COL_DROPPED)
            o = put_raw(c, o, 0x0a, c->raw + s->off, s->len);
    }
    if (c->mark_locs)
        o = put_samples(c, o);
    for (size_t i = 0; i < c->n[F_MAPPING]; i++) {
        const struct span *s = &c->spans[F_MAPPING][i];
        o = put_raw(c, o, 0x1a, c->raw + s->off, s->len);
    }
    for (size_t i = 0; i < c->n[F_LOCATION]; i++) {
        const struct span *s = &c->spans[F_LOCATION][i];
        size_t li = c->loc_by_id ? c->loc_ids[i] : i;
        if (c->mark_locs ? !c->locs[li].used : c->locs[li].refs == 0)
            continue;
        if (c->loc_fn[i] < LOC_FN_SEVERAL)
            mark_function(c, c->loc_fn[i]);
        else if (c->loc_fn[i] == LOC_FN_SEVERAL)
            mark_location_functions(c, s);
        o = put_raw(c, o, 0x22, c->raw + s->off, s->len);
    }
    for (size_t i = 0; i < c->n[F_FUNCTION]; i++) {
        const struct span *s = &c->spans[F_FUNCTION][i];
        if (c->fn_used[i])
            o = put_raw(c, o, 0x2a, c->raw + s->off, s->len);
    }
    for (size_t i = 0; i <= c->max_str_used; i++) {
        const struct span *s = &c->spans[F_STRING][i];
        o = put_raw(c, o, 0x32, c->raw + s->off, c->str_used[i] ? s->len : 0);
    }
    if (!c->mark_locs)
        o = put_samples(c, o);
    o = put_scalar(o, 0x38, c->drop_frames);
    o = put_scalar(o, 0x40, c->keep_frames);
    o = put_scalar(o, 0x48, c->time_nanos);
    if (c->time_nanos && prev_time)
        o = put_scalar(o, 0x50, sat_sub(c->time_nanos, prev_time));
    else
        o = put_scalar(o, 0x50, c->duration_nanos);
    if (c->has_period_type)
        o = put_raw(c, o, 0x5a, c->raw + c->period_type.off, c->period_type.len);
    o = put_scalar(o, 0x60, c->period);
    if (c->n_comments) {
        size_t clen = 0;
        for (size_t i = 0; i < c->n_comments; i++)
            clen += pprof__varint_size((uint64_t)c->comments[i]);
        *o++ = 0x6a;
        o = pprof__put_varint(o, clen);
        for (size_t i = 0; i < c->n_comments; i++)
            o = pprof__put_varint(o, (uint64_t)c->comments[i]);
    }
    o = put_scalar(o, 0x70, default_type_out(c));
    o = put_scalar(o, 0x78, c->doc_url);
    c->out_len = (size_t)(o - c->out);
    return 0;
}

static void ctx_done(struct ctx *c)
{
    /* The tables are the thread's scratch, but for sparse id maps. */
    pprof__idmap_done(&c->mapmap);
    pprof__idmap_done(&c->fnmap);
    pprof__idmap_done(&c->locmap);
    if (!c->out_scratch)
        free(c->out);
}
