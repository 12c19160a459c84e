/* SPDX-License-Identifier: Apache-2.0 */
/* A part of delta.c (included there, one translation unit): the samples.
 * Each is parsed just enough to hash its key (its stack's location keys
 * and its labels) and read its values. */
/* ---- samples ---- */

/* Adds with saturation: a hostile profile must not cause signed overflow. */
static int64_t sat_add(int64_t a, int64_t b)
{
    int64_t r;

    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static int64_t sat_sub(int64_t a, int64_t b)
{
    int64_t r;

    if (__builtin_sub_overflow(a, b, &r))
        return b < 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static int label_hash_slow(struct ctx *c, const uint8_t *p, size_t len, uint64_t *h);

/* Whether the label filter drops labels whose key is string `key` (a
 * checked index); asked once per key string per profile. */
static bool label_dropped(struct ctx *c, uint64_t key)
{
    const struct pprof_filter *f = c->d->filter;

    if (!c->lbl_verdict)
        return false;
    if (c->lbl_verdict[key] == LBL_UNKNOWN) {
        const struct span *s = &c->spans[F_STRING][key];
        c->lbl_verdict[key] =
            f->label_keep((const char *)c->raw + s->off, s->len, f->label_ud) ? LBL_KEEP : LBL_DROP;
    }
    return c->lbl_verdict[key] == LBL_DROP;
}

/* The key string of a label the sample scan checked. */
static uint64_t label_key(const uint8_t *p, size_t len)
{
    uint64_t v[2] = { 0 };

    read_scalars(p, p + len, 1, v, 1);
    return v[1];
}

/* Hashes a label and counts the references to its strings. */
static inline int label_hash(struct ctx *c, const uint8_t *p, size_t len, uint64_t *h)
{
    int rc;

    /* A label of one to seven bytes is its own key in the memo: one
     * eight-byte load, within the profile, masked to its length. */
    if (len - 1 < 7 && c->raw + c->len - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w = (w & ((1ULL << (8 * len)) - 1)) | (uint64_t)len << 56;
        struct lbl_memo *m = &c->lbl_memo[(w * GOLDEN) >> (64 - LBL_MEMO_BITS)];
        if (m->word != w) {
            if ((rc = label_hash_slow(c, p, len, &m->hash)) < 0)
                return rc;
            m->word = w;
            m->str[0] = (uint32_t)c->last_label_str[0];
            m->str[1] = (uint32_t)c->last_label_str[1];
            m->str[2] = (uint32_t)c->last_label_str[2];
        } else {
            c->last_label_str[0] = m->str[0];
            c->last_label_str[1] = m->str[1];
            c->last_label_str[2] = m->str[2];
        }
        /* last_label_str no longer belongs to the last long label. */
        c->last_label = NULL;
        *h = m->hash;
    } else if (len == c->last_label_len && c->last_label && memcmp(p, c->last_label, len) == 0) {
        *h = c->last_label_hash;
    } else {
        if ((rc = label_hash_slow(c, p, len, h)) < 0)
            return rc;
        c->last_label = p;
        c->last_label_len = len;
        c->last_label_hash = *h;
    }
    c->str_lblrefs[c->last_label_str[0]]++;
    c->str_lblrefs[c->last_label_str[1]]++;
    c->str_lblrefs[c->last_label_str[2]]++;
    return 0;
}

static int label_hash_slow(struct ctx *c, const uint8_t *p, size_t len, uint64_t *h)
{
    uint64_t v[5] = { 0 };

    if (read_scalars(p, p + len, 4, v, 4) < 0 || !str_ok(c, (int64_t)v[1]) ||
        !str_ok(c, (int64_t)v[2]) || !str_ok(c, (int64_t)v[4]))
        return corrupt(c, "bad label");
    /* Each part moved differently (rotated, shifted), so that swapping key
     * and value does not give the same label; the number spread by an odd
     * multiplier; one mix for all. */
    uint64_t str = str_hash(c, v[2]);
    *h = mix64(str_hash(c, v[1]) ^ ((str << 21 | str >> 43) + v[3] * GOLDEN) ^
               (str_hash(c, v[4]) << 1));
    c->last_label_str[0] = v[1];
    c->last_label_str[1] = v[2];
    c->last_label_str[2] = v[4];
    return 0;
}

static int add_loc_error(struct ctx *c, uint32_t li, uint64_t id)
{
    if (li == UINT32_MAX)
        return pprof__err(c->err, c->errlen, PPROF_ECORRUPT,
                          "malformed profile: sample references unknown location %" PRIu64, id);
    return pprof__err(c->err, c->errlen, PPROF_ETOOLARGE,
                      "profile too large: stack depth > cap %zu", c->lim->max_stack_depth);
}

/* The four ids of `w`'s 16-bit lanes, each two 7-bit groups joined. */
static inline uint64_t join_lanes16(uint64_t w)
{
    return (w & 0x007f007f007f007fULL) | (w >> 1 & 0x3f803f803f803f80ULL);
}

/* Four frames whose ids are the 16-bit lanes of `x`, at the depths whose
 * weights are `weight[0..3]`: their part of the stack hash, and their
 * references counted. */
static inline __attribute__((always_inline)) uint64_t four_frames(struct loc *locs, uint64_t x,
                                                                  const uint64_t *weight)
{
    uint64_t sum = 0;

#pragma GCC unroll 4
    for (unsigned j = 0; j < 4; j++) {
        size_t i = (uint16_t)(x >> (16 * j));
        sum += locs[i].key * weight[j];
        locs[i].refs++;
    }
    return sum;
}

/* The innermost loop of a delta: the location ids of one sample, folded
 * into the stack hash `*h`. The hash is the sum of each frame's key times a
 * random odd weight for its depth: unlike a polynomial (h + k) * C, whose
 * every step waits for the previous multiply, the products are independent,
 * so frames cost throughput rather than latency. Random weights keep it
 * order-sensitive (no two depth sets share a weight sum, which small weights
 * such as 2i+1 would break on palindromic recursion). The ids are checked
 * here, or after the scan where that saves a test per frame, and the
 * references to every location are counted in its refs, so that encode()
 * can tell which locations the emitted samples use by taking out the few
 * samples it does not emit (recursion makes some increments wait on the
 * previous one of the same counter, a small cost against a second walk
 * over every emitted stack).
 * The ids lie in [q, qe); bytes up to `readable_end` may be loaded.
 * Locals, not ctx fields, so the compiler keeps them in registers; not
 * inlined, so that parse_sample()'s own locals do not crowd them out
 * (inlined, both spilled to the stack; docs/benchmarks.md "Delta
 * optimisation steps"). */
static __attribute__((noinline)) int add_locs(struct ctx *c, const uint8_t *q, const uint8_t *qe,
                                              const uint8_t *readable_end, size_t *depth,
                                              uint64_t *h)
{
    struct loc *locs = c->locs;
    const size_t nid = c->loc_by_id, cap = c->lim->max_stack_depth;
    size_t dep = *depth;
    uint64_t hh = *h;

    const size_t fast_cap = nid && cap < POS_WEIGHTS ? cap : nid ? POS_WEIGHTS : 0;
    /* Added to four two-byte ids in their 16-bit lanes, sets a lane's top
     * bit iff its id is out of the table (0 when every such id is in). */
    const uint64_t lane_bias =
        nid >= LOC_FAST_IDS ? 0 : (uint64_t)(0x8000 - nid) * 0x0001000100010001ULL;
    /* Each shuffle reader on the profiles whose ids it takes: one or two
     * bytes up to 16384 ids, one to three past them (a table looked up
     * for nothing costs more than it saves). */
    const bool ids2_on = have_pshufb && nid <= LOC_FAST_IDS;
    const bool ids3_on = have_pshufb && nid > LOC_FAST_IDS && nid <= INT32_MAX;
    while (q < qe) {
        uint64_t id, k;

        /* Eight bytes of one-byte ids, or of two-byte ids (how Go writes
         * the stacks of profiles with under 128, resp. 16384, locations):
         * decoded at a fixed stride, so frames do not wait on each other.
         * The by-id table has at least 128 entries, so one-byte ids need
         * no bounds check, and two-byte ones are checked four at once; an
         * absent id (key 0; keys are odd) is counted like any other, and
         * check_location_refs() finds its reference after the scan: on
         * error nothing computed here is kept. */
        if (qe - q >= 8 && dep + 8 <= fast_cap) {
            uint64_t w, m;
            memcpy(&w, q, 8);
            m = w & 0x8080808080808080ULL;
            if (m == 0) {
                uint64_t sum = 0;
#pragma GCC unroll 8
                for (unsigned j = 0; j < 8; j++) {
                    k = locs[(w >> (8 * j)) & 0x7f].key;
                    locs[(w >> (8 * j)) & 0x7f].refs++;
                    sum += k * pos_weight[dep + j];
                }
                hh += sum;
                q += 8;
                dep += 8;
                continue;
            }
            /* Four two-byte ids: both 7-bit halves of each joined in its
             * 16-bit lane at once. */
            uint64_t x = join_lanes16(w);
            if (m == 0x0080008000800080ULL && ((x + lane_bias) & LANES16_HIGH) == 0) {
                hh += four_frames(locs, x, &pos_weight[dep]);
                q += 8;
                dep += 4;
                continue;
            }
            /* Four ids of one or two bytes (a profile with under 16384
             * locations numbers them across both widths), each put in its
             * lane by one shuffle. */
            if (ids2_on) {
                unsigned len = four_ids2(w, &x);
                x = join_lanes16(x);
                if (len && ((x + lane_bias) & LANES16_HIGH) == 0) {
                    hh += four_frames(locs, x, &pos_weight[dep]);
                    q += len;
                    dep += 4;
                    continue;
                }
            }
            /* Four ids of one to three bytes (a profile past 16383
             * locations), from twelve bytes that may run past the stack
             * but not past `readable_end`. */
            if (ids3_on && readable_end - q >= 16) {
                uint64_t ids4[4];
                unsigned len = four_ids3(q, (size_t)(qe - q), (uint32_t)nid, ids4);
                if (len) {
                    uint64_t sum = 0;
                    for (unsigned j = 0; j < 4; j++) {
                        sum += locs[ids4[j]].key * pos_weight[dep + j];
                        locs[ids4[j]].refs++;
                    }
                    hh += sum;
                    q += len;
                    dep += 4;
                    continue;
                }
            }
            /* Mixed widths the shuffles do not take (or no shuffle): two
             * ids at a time, without a branch on their widths. Out-of-table
             * ids become id 0, which no location has. */
            uint64_t id1, id2;
            unsigned used = pprof__two_varints3(w, &id1, &id2);
            if (used) {
                id1 = id1 < nid ? id1 : 0;
                id2 = id2 < nid ? id2 : 0;
                uint64_t k2 = locs[id2].key;
                k = locs[id1].key;
                locs[id1].refs++;
                locs[id2].refs++;
                hh += k * pos_weight[dep] + k2 * pos_weight[dep + 1];
                q += used;
                dep += 2;
                continue;
            }
        }
        if (*q < 0x80)
            id = *q++;
        else if (pprof__varint(&q, qe, &id) < 0)
            return corrupt(c, "bad packed location_id");
        if (nid) {
            if (__builtin_expect(id >= nid || locs[id].key == 0, 0))
                return add_loc_error(c, UINT32_MAX, id);
            k = locs[id].key;
            locs[id].refs++;
        } else {
            uint32_t li = pprof__idmap_get(&c->locmap, id);
            if (__builtin_expect(li == UINT32_MAX, 0))
                return add_loc_error(c, li, id);
            k = locs[li].key;
            locs[li].refs++;
        }
        if (__builtin_expect(dep == cap, 0))
            return add_loc_error(c, 0, id);
        hh += k * (dep < POS_WEIGHTS ? pos_weight[dep] : mix64(dep) | 1);
        dep++;
    }
    *depth = dep;
    *h = hh;
    return 0;
}

/* Parses sample `i`: its key, its values into `row`, and the bytes its
 * value fields take. */
static int parse_sample(struct ctx *c, size_t i, int64_t *row, uint64_t *key_out,
                        uint32_t *vbytes_out, uint64_t *vspan_out)
{
    const struct span *s = &c->spans[F_SAMPLE][i];
    const uint8_t *p = c->raw + s->off, *end = p + s->len, *base = p;
    size_t depth = 0, nv = 0, nlabels = 0, vbytes = 0, nvf = 0, dropped = 0;
    uint64_t vspan = 0;
    uint64_t labels = 0, stack = 0x5eed, key;
    struct pprof__field f;
    int r = 0, rc;

    for (;;) {
        /* Fast path: a length-delimited field 1-3 with a one-byte length,
         * which is how Go writes nearly every sample. */
        if (end - p >= 2 && (p[0] == 0x0a || p[0] == 0x12 || p[0] == 0x1a) && p[1] < 0x80 &&
            p[1] <= end - p - 2) {
            f.start = p;
            f.num = p[0] >> 3;
            f.wt = PPROF__WT_LEN;
            f.val = 0;
            f.data = p + 2;
            f.len = p[1];
            p += 2 + p[1];
        } else if ((r = pprof__next_field(&p, end, &f)) <= 0) {
            break;
        }
        switch (f.num) {
        case 1:
            if (f.wt == PPROF__WT_LEN) {
                if ((rc = add_locs(c, f.data, f.data + f.len, c->raw + c->len, &depth, &stack)) < 0)
                    return rc;
            } else if (f.wt == PPROF__WT_VARINT) {
                /* Unpacked (rare): re-encode the id for the same loop. */
                uint8_t one[10];
                uint8_t *one_end = pprof__put_varint(one, f.val);
                if ((rc = add_locs(c, one, one_end, one_end, &depth, &stack)) < 0)
                    return rc;
            } else {
                return corrupt(c, "wrong wire type for location_id");
            }
            break;
        case 2:
            vbytes += (size_t)(p - f.start);
            nvf++;
            vspan = (uint64_t)(p - base) << 32 | (uint64_t)(f.start - base);
            if (f.wt == PPROF__WT_LEN) {
                const uint8_t *q = f.data, *qe = f.data + f.len;
                uint64_t v;
                while (q < qe) {
                    if (pprof__varint(&q, qe, &v) < 0)
                        return corrupt(c, "bad packed value");
                    if (nv == c->ncols)
                        return corrupt(c, "sample has more values than sample types");
                    row[nv++] = (int64_t)v;
                }
            } else if (f.wt == PPROF__WT_VARINT) {
                if (nv == c->ncols)
                    return corrupt(c, "sample has more values than sample types");
                row[nv++] = (int64_t)f.val;
            } else {
                return corrupt(c, "wrong wire type for value");
            }
            break;
        case 3: {
            uint64_t h = 0;
            if (f.wt != PPROF__WT_LEN)
                return corrupt(c, "wrong wire type for label");
            if (++nlabels > c->lim->max_labels)
                return pprof__err(c->err, c->errlen, PPROF_ETOOLARGE,
                                  "profile too large: labels in one sample > cap %zu",
                                  c->lim->max_labels);
            if ((rc = label_hash(c, f.data, f.len, &h)) < 0)
                return rc;
            if (c->lbl_verdict && label_dropped(c, c->last_label_str[0])) {
                /* Not part of the key, not written, its strings unused. */
                c->str_lblrefs[c->last_label_str[0]]--;
                c->str_lblrefs[c->last_label_str[1]]--;
                c->str_lblrefs[c->last_label_str[2]]--;
                dropped += (size_t)(p - f.start);
                break;
            }
            labels += h; /* a sum: the order of labels does not matter */
            break;
        }
        default:
            break;
        }
    }
    if (r < 0)
        return corrupt(c, "bad sample");
    if (nv != c->ncols)
        return corrupt(c, "sample has fewer values than sample types");
    key = mix64(stack ^ (labels + depth) * GOLDEN);
    *key_out = key;
    /* Dropped labels leave the body as the value fields do; the sample is
     * then rewritten field by field, not copied around its values. */
    *vbytes_out = (uint32_t)(vbytes + dropped);
    *vspan_out = nvf == 1 && !dropped ? vspan : 0;
    return 0;
}

/* The first location id of the samples, in their order, that has no
 * location, or 0 when there is none. */
static uint64_t first_unknown_location(const struct ctx *c)
{
    const size_t nid = c->loc_by_id;

    for (size_t i = 0; i < c->n[F_SAMPLE]; i++) {
        const struct span *s = &c->spans[F_SAMPLE][i];
        const uint8_t *p = c->raw + s->off, *end = p + s->len;
        struct pprof__field f;

        while (pprof__next_field(&p, end, &f) > 0) {
            uint64_t id;
            if (f.num != 1)
                continue;
            if (f.wt != PPROF__WT_LEN) {
                if (f.val >= nid || c->locs[f.val].key == 0)
                    return f.val;
                continue;
            }
            for (const uint8_t *q = f.data, *qe = f.data + f.len;
                 q < qe && pprof__varint(&q, qe, &id) == 0;)
                if (id >= nid || c->locs[id].key == 0)
                    return id;
        }
    }
    return 0;
}

/* add_locs() takes an id without a location (absent from the by-id table,
 * or out of it and counted on id 0, which no location has) as one whose
 * key is 0 rather than test each: its reference shows here, once the
 * samples are scanned. */
static int check_location_refs(struct ctx *c)
{
    for (size_t id = 0; id < c->loc_by_id; id++)
        if (c->locs[id].key == 0 && c->locs[id].refs != 0)
            return add_loc_error(c, UINT32_MAX, first_unknown_location(c));
    return 0;
}

static int scan_samples(struct ctx *c)
{
    size_t n = c->n[F_SAMPLE], ncols1 = c->ncols ? c->ncols : 1;
    int rc;

    c->ents = pprof__scratch(PPROF__S_ENTS, (n ? n : 1) * sizeof(struct ent), false);
    c->keys = pprof__scratch(PPROF__S_KEYS, (n ? n : 1) * sizeof(uint64_t), false);
    c->sums = pprof__scratch(PPROF__S_SUMS, (n ? n : 1) * ncols1 * sizeof(int64_t), false);
    c->prev = pprof__scratch(PPROF__S_PREVS, (c->ncum ? c->ncum : 1) * sizeof(int64_t), false);
    if (!c->ents || !c->keys || !c->sums || !c->prev)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        struct ent *e = &c->ents[i];
        uint64_t vspan = 0; /* set by parse_sample(); GCC cannot always tell */

        if ((rc = parse_sample(c, i, c->sums + i * c->ncols, &c->keys[i], &e->vbytes, &vspan)) < 0)
            return rc;
        e->voff = (uint32_t)vspan;
        e->vend = (uint32_t)(vspan >> 32);
        e->matched = false;
        e->dup = false;
        e->fresh = false;
    }
    c->n_ents = n;
    return check_location_refs(c);
}
