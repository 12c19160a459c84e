/* SPDX-License-Identifier: Apache-2.0 */
/* A part of delta.c (included there, one translation unit): the record
 * scan. One pass over the top-level fields records where every record
 * lies; then the string, sample type, mapping, function and location
 * tables are read into the per-call context. */
/* True when field `f` is one of the scalar fields 1..`last` of its message
 * but not varint-encoded. protobuf-c refuses those, and so must we, or the
 * output could be something the decoder rejects. */
static bool bad_scalar(const struct pprof__field *f, uint32_t last)
{
    return f->num <= last && f->wt != PPROF__WT_VARINT;
}

/* Reads a message made of scalar fields into v[1..keep] (by field number;
 * later duplicates win, as protobuf-c). Fields up to `last` must be varints.
 * Returns 0, or -1 for a malformed message. */
static int read_scalars(const uint8_t *p, const uint8_t *end, uint32_t last, uint64_t *v,
                        uint32_t keep)
{
    struct pprof__field f;
    int r;

    while ((r = pprof__next_field(&p, end, &f)) > 0) {
        if (bad_scalar(&f, last))
            return -1;
        if (f.num >= 1 && f.num <= keep)
            v[f.num] = f.val;
    }
    return r < 0 ? -1 : 0;
}

static bool str_ok(const struct ctx *c, int64_t i)
{
    return i >= 0 && (uint64_t)i < c->n[F_STRING];
}

static uint64_t str_hash(struct ctx *c, uint64_t i)
{
    uint64_t h = c->strhash[i];

    if (h == 0) {
        const struct span *s = &c->spans[F_STRING][i];
        h = XXH3_64bits(c->raw + s->off, s->len) | 1;
        c->strhash[i] = h;
    }
    return h;
}

static bool str_eq(const struct ctx *c, uint64_t i, const char *lit)
{
    const struct span *s = &c->spans[F_STRING][i];
    size_t n = strlen(lit);

    return s->len == n && memcmp(c->raw + s->off, lit, n) == 0;
}

static void mark_str(struct ctx *c, uint64_t i)
{
    c->str_used[i] = 1;
    if (i > c->max_str_used)
        c->max_str_used = i;
}

/* ---- state ---- */

static void state_clear(struct pprof_delta *d)
{
    free(d->state);
    d->state = NULL;
    d->state_len = 0;
    d->n = 0;
    d->seeded = false;
}

/* ---- pass 1: top-level records ---- */

static const unsigned span_scratch[F_STRING + 1] = {
    [F_SAMPLE_TYPE] = PPROF__S_SPANS_TYPE,  [F_SAMPLE] = PPROF__S_SPANS_SAMPLE,
    [F_MAPPING] = PPROF__S_SPANS_MAPPING,   [F_LOCATION] = PPROF__S_SPANS_LOCATION,
    [F_FUNCTION] = PPROF__S_SPANS_FUNCTION, [F_STRING] = PPROF__S_SPANS_STRING,
};

/* Cap on the records of kind `k` (sample types and mappings have none of
 * their own: the profile's size bounds them). */
static size_t record_cap(const struct ctx *c, int k)
{
    switch (k) {
    case F_SAMPLE:
        return c->lim->max_samples;
    case F_LOCATION:
        return c->lim->max_locations;
    case F_FUNCTION:
        return c->lim->max_functions;
    case F_STRING:
        return c->lim->max_strings;
    default:
        return SIZE_MAX;
    }
}

/* The error of a profile past a cap, found by the record scan. Only then
 * are all records counted, so that the error names how many there are
 * (and a malformed profile is reported as such, whichever comes first). */
static int cap_error(struct ctx *c)
{
    const uint8_t *p = c->raw, *end = c->raw + c->len;
    struct pprof__field f;
    size_t n[F_STRING + 1] = { 0 }, comments = 0;
    int r;

    while ((r = pprof__next_field(&p, end, &f)) > 0) {
        if (f.num <= F_STRING) {
            if (f.wt != PPROF__WT_LEN)
                return corrupt(c, "wrong wire type for a repeated message");
            n[f.num]++;
        } else if (f.num == F_COMMENT) {
            comments += f.wt == PPROF__WT_LEN ? f.len : 1; /* a varint takes >= 1 byte */
        }
    }
    if (r < 0)
        return corrupt(c, "bad protobuf encoding");
    static const char *const what[F_STRING + 1] = { [F_SAMPLE] = "samples",
                                                    [F_LOCATION] = "locations",
                                                    [F_FUNCTION] = "functions",
                                                    [F_STRING] = "strings" };
    for (int k = F_SAMPLE; k <= F_STRING; k++)
        if (what[k] && n[k] > record_cap(c, k))
            return pprof__err(c->err, c->errlen, PPROF_ETOOLARGE,
                              "profile too large: %zu %s > cap %zu", n[k], what[k],
                              record_cap(c, k));
    return pprof__err(c->err, c->errlen, PPROF_ETOOLARGE,
                      "profile too large: %zu comments > cap %zu", comments, c->lim->max_strings);
}

/* Room for one more record of kind `k`: its span table, the thread's
 * scratch, doubles (contents kept), never past the kind's cap. */
static int grow_spans(struct ctx *c, int k, size_t *room)
{
    size_t cap = record_cap(c, k), want = room[k] ? 2 * room[k] : 256;

    if (c->n[k] >= cap)
        return cap_error(c);
    if (want > cap)
        want = cap;
    c->spans[k] = pprof__scratch(span_scratch[k], want * sizeof(struct span), true);
    if (!c->spans[k])
        return -ENOMEM;
    room[k] = want;
    return 0;
}

static int push_comment(struct ctx *c, size_t *room, uint64_t v)
{
    if (c->n_comments == *room) {
        size_t want = *room ? 2 * *room : 16;
        if (c->n_comments >= c->lim->max_strings)
            return cap_error(c);
        if (want > c->lim->max_strings)
            want = c->lim->max_strings;
        c->comments = pprof__scratch(PPROF__S_COMMENTS, want * sizeof(int64_t), true);
        if (!c->comments)
            return -ENOMEM;
        *room = want;
    }
    c->comments[c->n_comments++] = (int64_t)v;
    return 0;
}

/* How far ahead of the record scan the raw profile's lines are fetched,
 * in profiles of more than SCAN_PREFETCH_FROM bytes (a smaller one is still
 * in L2 after its gunzip, and fetching it again slows the scan: the figures
 * are in docs/benchmarks.md "Delta optimisation steps"). */
#define SCAN_PREFETCH 2048
#define SCAN_PREFETCH_FROM (256 * 1024)

/* A top-level field of scan_top() other than a table's record: the period
 * type, a comment, a scalar, or an unknown field (dropped). */
static int scan_top_field(struct ctx *c, const struct pprof__field *f, size_t *comment_room)
{
    int rc;

    if (f->num == F_PERIOD_TYPE) {
        if (f->wt != PPROF__WT_LEN)
            return corrupt(c, "wrong wire type for period_type");
        c->has_period_type = true;
        c->period_type.off = (uint32_t)(f->data - c->raw);
        c->period_type.len = (uint32_t)f->len;
        return 0;
    }
    if (f->num == F_COMMENT) {
        if (f->wt == PPROF__WT_LEN) {
            const uint8_t *q = f->data, *qe = f->data + f->len;
            uint64_t v;
            while (q < qe) {
                if (pprof__varint(&q, qe, &v) < 0)
                    return corrupt(c, "bad packed comment");
                if ((rc = push_comment(c, comment_room, v)) < 0)
                    return rc;
            }
            return 0;
        }
        if (f->wt == PPROF__WT_VARINT)
            return push_comment(c, comment_room, f->val);
        return corrupt(c, "wrong wire type for comment");
    }
    if (f->num > F_DOC_URL)
        return 0; /* unknown field: dropped from the output */
    if (f->wt != PPROF__WT_VARINT)
        return corrupt(c, "wrong wire type for a scalar field");
    switch (f->num) {
    case F_DROP_FRAMES:
        c->drop_frames = (int64_t)f->val;
        break;
    case F_KEEP_FRAMES:
        c->keep_frames = (int64_t)f->val;
        break;
    case F_TIME:
        c->time_nanos = (int64_t)f->val;
        break;
    case F_DURATION:
        c->duration_nanos = (int64_t)f->val;
        break;
    case F_PERIOD:
        c->period = (int64_t)f->val;
        break;
    case F_DEFAULT_SAMPLE_TYPE:
        c->default_sample_type = (int64_t)f->val;
        break;
    case F_DOC_URL:
        c->doc_url = (int64_t)f->val;
        break;
    }
    return 0;
}

/* One pass over the top-level fields: where each record lies, the scalars
 * and the comments. The span tables grow as records come, within their
 * caps. Each record's place is known only once the one before is read, and
 * a large profile has left L2 by then (its gunzip went through more than
 * L2 holds), so the lines ahead are fetched as the scan goes: the hardware
 * prefetcher alone leaves every record's first byte waiting on memory
 * (a third of the scan of heap-wide). */
static int scan_top(struct ctx *c)
{
    const uint8_t *p = c->raw, *end = c->raw + c->len;
    struct pprof__field f;
    size_t room[F_STRING + 1] = { 0 }, comment_room = 0;
    int r, rc;

    if (c->len > UINT32_MAX)
        return pprof__err(c->err, c->errlen, PPROF_ETOOLARGE,
                          "profile too large: %zu bytes > 4 GiB", c->len);
    size_t ahead = c->len > SCAN_PREFETCH_FROM ? 0 : c->len;
    for (;;) {
        const uint8_t *start = p;
        size_t k, off, len;

        /* A record of one of the tables with a one-byte tag and length, as
         * nearly all of them are: read without the general field reader,
         * whose checks and stores the chain from one record to the next
         * would wait on. */
        if (end - p >= 2 && (p[0] & 7) == PPROF__WT_LEN && (unsigned)(p[0] >> 3) - 1 < F_STRING &&
            p[1] < 0x80 && p[1] <= end - p - 2) {
            k = p[0] >> 3;
            off = (size_t)(p + 2 - c->raw);
            len = p[1];
            p += 2 + len;
        } else {
            if ((r = pprof__next_field(&p, end, &f)) <= 0)
                break;
            /* Scalars and comments: few, their lines fetched with the next
             * record's. */
            if (f.num > F_STRING) {
                if ((rc = scan_top_field(c, &f, &comment_room)) < 0)
                    return rc;
                continue;
            }
            if (f.wt != PPROF__WT_LEN)
                return corrupt(c, "wrong wire type for a repeated message");
            k = f.num;
            off = (size_t)(f.data - c->raw);
            len = f.len;
        }
        for (; ahead < (size_t)(p - c->raw) + SCAN_PREFETCH && ahead < c->len; ahead += 64)
            __builtin_prefetch(c->raw + ahead);
        if (__builtin_expect(c->n[k] == room[k], 0) && (rc = grow_spans(c, (int)k, room)) < 0)
            return rc;
        struct span *s = &c->spans[k][c->n[k]++];
        s->off = (uint32_t)off;
        s->len = (uint32_t)len;
        if (k == F_SAMPLE)
            c->samples_in += (size_t)(p - start);
    }
    if (r < 0)
        return corrupt(c, "bad protobuf encoding");
    /* Tables of kinds the profile lacks: one entry, so they are not NULL. */
    for (int k = F_SAMPLE_TYPE; k <= F_STRING; k++)
        if (room[k] == 0 &&
            !(c->spans[k] = pprof__scratch(span_scratch[k], sizeof(struct span), false)))
            return -ENOMEM;
    if (comment_room == 0 &&
        !(c->comments = pprof__scratch(PPROF__S_COMMENTS, sizeof(int64_t), false)))
        return -ENOMEM;
    return 0;
}

/* ---- strings, sample types, mappings, functions, locations ---- */

static int scan_strings(struct ctx *c)
{
    size_t n = c->n[F_STRING];

    if (n == 0 || c->spans[F_STRING][0].len != 0)
        return corrupt(c, "string_table[0] must be empty");
    c->strhash = pprof__scratch(PPROF__S_STRHASH, n * sizeof(uint64_t), false);
    c->str_used = pprof__scratch(PPROF__S_STRUSED, n, false);
    c->str_lblrefs = pprof__scratch(PPROF__S_STRREFS, n * sizeof(uint32_t), false);
    if (!c->strhash || !c->str_used || !c->str_lblrefs)
        return -ENOMEM;
    memset(c->strhash, 0, n * sizeof(uint64_t));
    memset(c->str_used, 0, n);
    memset(c->str_lblrefs, 0, n * sizeof(uint32_t));
    mark_str(c, 0);
    for (size_t i = 0; i < c->n_comments; i++) {
        if (!str_ok(c, c->comments[i]))
            return corrupt(c, "bad comment string");
        mark_str(c, (uint64_t)c->comments[i]);
    }
    if (!str_ok(c, c->drop_frames) || !str_ok(c, c->keep_frames) ||
        !str_ok(c, c->default_sample_type) || !str_ok(c, c->doc_url))
        return corrupt(c, "bad string index");
    mark_str(c, (uint64_t)c->drop_frames);
    mark_str(c, (uint64_t)c->keep_frames);
    mark_str(c, (uint64_t)c->default_sample_type);
    mark_str(c, (uint64_t)c->doc_url);
    return 0;
}

/* Reads a ValueType (sample_type, period_type) and marks its strings. */
static int value_type(struct ctx *c, const struct span *s, uint64_t *type, uint64_t *unit)
{
    const uint8_t *p = c->raw + s->off;
    uint64_t v[3] = { 0 };

    if (read_scalars(p, p + s->len, 2, v, 2) < 0 || !str_ok(c, (int64_t)v[1]) ||
        !str_ok(c, (int64_t)v[2]))
        return corrupt(c, "bad value type");
    *type = v[1];
    *unit = v[2];
    mark_str(c, *type);
    mark_str(c, *unit);
    return 0;
}

static bool is_cumulative(struct ctx *c, enum pprof_delta_kind kind, uint64_t type, uint64_t unit)
{
    if (kind == PPROF_DELTA_NONE)
        return false;
    if (kind == PPROF_DELTA_MEMORY)
        return (str_eq(c, type, "alloc_objects") && str_eq(c, unit, "count")) ||
               (str_eq(c, type, "alloc_space") && str_eq(c, unit, "bytes"));
    return (str_eq(c, type, "contentions") && str_eq(c, unit, "count")) ||
           (str_eq(c, type, "delay") && str_eq(c, unit, "nanoseconds"));
}

/* Whether the filter keeps the sample type whose name is string `type`. */
static bool type_kept(const struct ctx *c, uint64_t type)
{
    const struct pprof_filter *f = c->d->filter;
    bool listed = false;

    if (!f || !f->n_types)
        return true;
    for (size_t i = 0; i < f->n_types && !listed; i++)
        listed = str_eq(c, type, f->types[i]);
    return listed == f->types_keep;
}

static int scan_types(struct ctx *c)
{
    uint64_t type, unit;
    int rc;

    c->ncols = c->n[F_SAMPLE_TYPE];
    /* Every sample holds a value of at least a byte per column: checked
     * here, the per-sample tables (samples x columns) stay within a few
     * times the input, however many columns a hostile profile declares. */
    if (c->ncols && c->n[F_SAMPLE] > c->samples_in / c->ncols)
        return corrupt(c, "sample has fewer values than sample types");
    c->cum_of_col =
        pprof__scratch(PPROF__S_COLUMNS, (c->ncols ? c->ncols : 1) * sizeof(int), false);
    if (!c->cum_of_col)
        return -ENOMEM;
    c->types_fp = 0x51ed27;
    for (size_t i = 0; i < c->ncols; i++) {
        if ((rc = value_type(c, &c->spans[F_SAMPLE_TYPE][i], &type, &unit)) < 0)
            return rc;
        c->types_fp = mix64(c->types_fp ^ str_hash(c, type)) + str_hash(c, unit);
        if (!type_kept(c, type))
            c->cum_of_col[i] = COL_DROPPED;
        else
            c->cum_of_col[i] =
                is_cumulative(c, c->d->kind, type, unit) ? (int)c->ncum++ : COL_PLAIN;
        c->ncols_out += c->cum_of_col[i] != COL_DROPPED;
    }
    if (c->ncols && !c->ncols_out)
        return pprof__err(c->err, c->errlen, PPROF_EFILTER,
                          "the filter drops every sample type of the profile");
    if (c->has_period_type && (rc = value_type(c, &c->period_type, &type, &unit)) < 0)
        return rc;
    return 0;
}

/* Builds the id map of one table once its records were read (rc: how
 * that went); a zero or repeated id makes the profile malformed. */
static int build_idmap(struct ctx *c, int rc, struct pprof__idmap *m, const uint64_t *ids, size_t n,
                       int scratch, const char *what)
{
    if (rc == 0 && (rc = pprof__idmap_init(m, ids, n, scratch)) < 0 && rc != -ENOMEM)
        rc = pprof__err(c->err, c->errlen, PPROF_ECORRUPT, "malformed profile: %s id 0 or repeated",
                        what);
    return rc;
}

static int scan_mappings(struct ctx *c)
{
    size_t n = c->n[F_MAPPING];
    uint64_t *ids = pprof__scratch(PPROF__S_IDS, (n ? n : 1) * sizeof(uint64_t), false);
    int rc = 0;

    if (!ids)
        return -ENOMEM;
    c->mapping_fp = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const struct span *s = &c->spans[F_MAPPING][i];
        const uint8_t *p = c->raw + s->off;
        uint64_t v[7] = { 0 }; /* by field number 1..6 */

        if (read_scalars(p, p + s->len, 10, v, 6) < 0 || !str_ok(c, (int64_t)v[5]) ||
            !str_ok(c, (int64_t)v[6])) {
            rc = corrupt(c, "bad mapping");
            break;
        }
        mark_str(c, v[5]);
        mark_str(c, v[6]);
        ids[i] = v[1];
        if (i == 0) /* the main binary: a restart with ASLR or a new build changes it */
            c->mapping_fp = mix64(mix64(mix64(v[2] ^ 0x9e37) ^ v[3]) ^ v[4]) ^ str_hash(c, v[5]) ^
                            mix64(str_hash(c, v[6]));
    }
    return build_idmap(c, rc, &c->mapmap, ids, n, PPROF__S_MAPIDX, "mapping");
}

static int scan_functions(struct ctx *c)
{
    size_t n = c->n[F_FUNCTION];
    uint64_t *ids = pprof__scratch(PPROF__S_IDS, (n ? n : 1) * sizeof(uint64_t), false);
    int rc = 0;

    c->fn_name = pprof__scratch(PPROF__S_FNTAB, 3 * (n ? n : 1) * sizeof(uint32_t), false);
    c->fn_used = pprof__scratch(PPROF__S_FNUSED, n ? n : 1, false);
    if (!ids || !c->fn_name || !c->fn_used)
        return -ENOMEM;
    c->fn_sys = c->fn_name + n;
    c->fn_file = c->fn_sys + n;
    memset(c->fn_used, 0, n);
    for (size_t i = 0; i < n; i++) {
        const struct span *s = &c->spans[F_FUNCTION][i];
        const uint8_t *p = c->raw + s->off;
        uint64_t v[5] = { 0 };

        if (read_scalars(p, p + s->len, 5, v, 4) < 0 || !str_ok(c, (int64_t)v[2]) ||
            !str_ok(c, (int64_t)v[3]) || !str_ok(c, (int64_t)v[4])) {
            rc = corrupt(c, "bad function");
            break;
        }
        ids[i] = v[1];
        c->fn_name[i] = (uint32_t)v[2];
        c->fn_sys[i] = (uint32_t)v[3];
        c->fn_file[i] = (uint32_t)v[4];
    }
    return build_idmap(c, rc, &c->fnmap, ids, n, PPROF__S_FNIDX, "function");
}

/* Checks one Line of a location and, with `key`, folds its function's
 * name and file and its line number into the location's symbolic key; with
 * `fi_out`, gives the index of its function (LOC_FN_NONE for none). */
static int scan_line(struct ctx *c, const struct pprof__field *f, uint64_t *key, uint32_t *fi_out)
{
    const uint8_t *q = f->data, *qe = f->data + f->len;
    struct pprof__field g;
    uint64_t fid = 0, line = 0;
    uint32_t fi;
    int r;

    while ((r = pprof__next_field(&q, qe, &g)) > 0) {
        if (bad_scalar(&g, 3))
            return corrupt(c, "bad line");
        if (g.num == 1)
            fid = g.val;
        else if (g.num == 2)
            line = g.val;
    }
    if (r < 0)
        return corrupt(c, "bad line");
    if (fid == 0) {
        if (key)
            *key = mix64(*key ^ line);
        if (fi_out)
            *fi_out = LOC_FN_NONE;
        return 0;
    }
    if ((fi = pprof__idmap_get(&c->fnmap, fid)) == UINT32_MAX)
        return corrupt(c, "line references unknown function");
    if (fi_out)
        *fi_out = fi;
    if (key)
        *key =
            mix64(*key ^ str_hash(c, c->fn_name[fi])) + mix64(str_hash(c, c->fn_file[fi]) ^ line);
    return 0;
}

/* The function id of a Line of `len` bytes at `q` laid out as Go writes
 * it: function_id then line, each a varint of one to three bytes. Both
 * widths mix in a profile (a function id and a line number take one byte
 * or two about as often), so they are found from one eight-byte load
 * without a branch on either; the line number itself is only checked to
 * end the Line. False for any other layout, or a Line too close to the end
 * of the profile for the load, which the caller then reads field by
 * field. */
static inline bool go_line_function(const struct ctx *c, const uint8_t *q, unsigned len,
                                    uint64_t *fid)
{
    uint64_t w, tag, ends;
    unsigned used, start;

    if (len > 8 || c->raw + c->len - q < 8)
        return false;
    memcpy(&w, q, 8);
    /* The tag of the line number read as if it were a second varint. */
    used = pprof__two_varints3(w >> 8, fid, &tag);
    start = 1 + used;
    if ((w & 0xff) != 0x08 || used == 0 || tag != 0x10 || start >= len)
        return false;
    /* The line number's varint ends at the Line's last byte. */
    ends = (~w & 0x8080808080808080ULL) >> (8 * start);
    return ends && (unsigned)__builtin_ctzll(ends) == 8 * (len - 1 - start) + 7;
}

/* pprof__varint() for a location's address, which takes three to six
 * bytes (a program's text, mapped low or as a PIE): from one eight-byte
 * load, its 7-bit groups joined pairwise, instead of a loop over them. */
static inline int read_address(const uint8_t **pp, const uint8_t *end, uint64_t *addr)
{
    const uint8_t *p = *pp;
    uint64_t w, x, ends;
    unsigned e;

    if (end - p < 8)
        return pprof__varint(pp, end, addr);
    memcpy(&w, p, 8);
    ends = ~w & 0x8080808080808080ULL;
    if (ends == 0)
        return pprof__varint(pp, end, addr);
    e = (unsigned)__builtin_ctzll(ends);
    x = (w & ((2ULL << e) - 1)) & 0x7f7f7f7f7f7f7f7fULL;
    x = (x & 0x007f007f007f007fULL) | (x >> 1 & 0x3f803f803f803f80ULL);
    x = (x & 0x00003fff00003fffULL) | (x >> 2 & 0x0fffc0000fffc000ULL);
    *addr = (x & 0x000000000fffffffULL) | (x >> 4 & 0x00fffffff0000000ULL);
    *pp = p + (e + 1) / 8;
    return 0;
}

/* Reads a location laid out as Go writes it: id, address, its lines (each
 * of a one-byte length, holding a function_id and a line number), then
 * mapping_id (or the mapping_id after the id, as other writers order the
 * fields). Its tags are then single bytes at known places, and the generic
 * field loop is not needed. Returns false for any other layout (or an
 * unknown function, an address of 0, a bad varint), which scan_locations()
 * then reads field by field and judges. */
static bool read_go_location(const struct ctx *c, const uint8_t *p, const uint8_t *end,
                             uint64_t *id, uint64_t *mapping, uint64_t *addr, uint32_t *fn,
                             unsigned *nlines)
{
    uint64_t fid, line;

    if (p == end || *p != 0x08 || (p++, pprof__varint(&p, end, id) < 0))
        return false;
    if (p < end && *p == 0x10 && (p++, pprof__varint(&p, end, mapping) < 0))
        return false;
    if (p == end || *p != 0x18 || (p++, read_address(&p, end, addr) < 0) || *addr == 0)
        return false;
    while (p < end) {
        if (*p == 0x10 && *mapping == 0) /* Go writes the mapping last */
            return (p++, pprof__varint(&p, end, mapping) == 0) && p == end && *mapping != 0;
        if (end - p < 2 || p[0] != 0x22 || p[1] >= 0x80 || p[1] > end - p - 2)
            return false;
        const uint8_t *q = p + 2, *qe = q + p[1];
        if (!go_line_function(c, q, p[1], &fid)) {
            fid = 0;
            if (q < qe && *q == 0x08 && (q++, pprof__varint(&q, qe, &fid) < 0))
                return false;
            if (q < qe && *q == 0x10 && (q++, pprof__varint(&q, qe, &line) < 0))
                return false;
            if (q != qe)
                return false;
        }
        if (fid == 0)
            *fn = LOC_FN_NONE;
        else if ((*fn = pprof__idmap_get(&c->fnmap, fid)) == UINT32_MAX)
            return false;
        ++*nlines;
        p = qe;
    }
    return true;
}

static int scan_locations(struct ctx *c)
{
    size_t n = c->n[F_LOCATION];
    uint64_t *ids = pprof__scratch(PPROF__S_LOCIDS, (n ? n : 1) * sizeof(uint64_t), false);
    uint64_t *keys = pprof__scratch(PPROF__S_LOCKEY, (n ? n : 1) * sizeof(uint64_t), false);
    int rc = 0;

    c->loc_ids = ids;
    c->loc_fn = pprof__scratch(PPROF__S_LOCFN, (n ? n : 1) * sizeof(uint32_t), false);
    if (!ids || !keys || !c->loc_fn)
        return -ENOMEM;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const struct span *s = &c->spans[F_LOCATION][i];
        const uint8_t *p = c->raw + s->off, *end = p + s->len;
        uint64_t id = 0, mapping = 0, addr = 0;
        uint64_t fallback = 0x10ca7e;
        uint32_t fn = LOC_FN_NONE;
        unsigned nlines = 0;
        struct pprof__field f;
        int r = 0;

        if (read_go_location(c, p, end, &id, &mapping, &addr, &fn, &nlines)) {
            p = end;
        } else {
            id = mapping = addr = 0;
            fn = LOC_FN_NONE;
            nlines = 0;
        }
        while (p < end && (r = pprof__next_field(&p, end, &f)) > 0) {
            if (f.num == 4 && f.wt == PPROF__WT_LEN) {
                if ((r = scan_line(c, &f, NULL, &fn)) < 0)
                    return r;
                nlines++;
            } else if (f.num == 4 || (f.num <= 5 && f.wt != PPROF__WT_VARINT)) {
                r = -1;
                break;
            } else {
                if (f.num == 1)
                    id = f.val;
                else if (f.num == 2)
                    mapping = f.val;
                else if (f.num == 3)
                    addr = f.val;
            }
        }
        if (r == 0 && addr == 0) {
            /* The symbolic key, needed only without an address (Go always
             * writes one): the lines again, checked already. */
            p = c->raw + s->off;
            while (pprof__next_field(&p, end, &f) > 0)
                if (f.num == 4)
                    scan_line(c, &f, &fallback, NULL);
        }
        if (r < 0)
            rc = corrupt(c, "bad location");
        else if (mapping && pprof__idmap_get(&c->mapmap, mapping) == UINT32_MAX)
            rc = corrupt(c, "location references unknown mapping");
        ids[i] = id;
        c->loc_fn[i] = nlines > 1 ? LOC_FN_SEVERAL : fn;
        /* Addresses identify a frame in a process; without them (non-Go
         * producers) the symbolic frame does. Odd, so that 0 can mean "no
         * such location" in the by-id table. */
        keys[i] = (addr ? mix64(addr ^ 0xadd7) : fallback) | 1;
    }
    if ((rc = build_idmap(c, rc, &c->locmap, ids, n, PPROF__S_LOCIDX, "location")) < 0)
        return rc;
    /* By id when ids are dense, padded so that one-byte ids need no bounds
     * check in the sample loop (two-byte ones are checked four at a time,
     * ids of mixed widths two at a time). */
    if (c->locmap.dense) {
        size_t len = c->locmap.dense_len;
        c->loc_by_id = len <= 128 ? 128 : len;
    }
    size_t nl = c->loc_by_id ? c->loc_by_id : n ? n : 1;
    c->locs = pprof__scratch(PPROF__S_LOCS, nl * sizeof(struct loc), false);
    if (!c->locs)
        return -ENOMEM;
    memset(c->locs, 0, nl * sizeof(struct loc));
    for (size_t i = 0; i < n; i++)
        c->locs[c->loc_by_id ? ids[i] : i].key = keys[i];
    return 0;
}
