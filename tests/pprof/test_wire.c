/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests of the delta's wire reading: profiles written field by field
 * (unpacked repeated fields, fields in any order, every width of ids,
 * lines, addresses and record lengths, records cut short), caps, growth of
 * the record tables, and the layout of the output. */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "delta_run.h"
#include "pprof/internal.h"
#include "pprof/pprof.h"
#include "test.h"
#include "tprof.h"

/* The two sample types of a hand-written contention profile, whose string
 * table starts "", "contentions", "count", "delay", "nanoseconds". */
static void twb_contention_types(struct twb *w)
{
    struct twb m = { 0 };

    for (uint64_t i = 1; i <= 3; i += 2) {
        m.len = 0;
        twb_uint(&m, 1, i);
        twb_uint(&m, 2, i + 1);
        twb_bytes(w, 1, m.data, m.len);
    }
    twb_free(&m);
}

/* Ends a hand-written profile with its string table and time: returns its
 * bytes. */
static uint8_t *twb_profile_end(struct twb *w, const char *const *strs, size_t nstrs, int64_t t,
                                size_t *len)
{
    for (size_t i = 0; i < nstrs; i++)
        twb_bytes(w, 6, strs[i], strlen(strs[i]));
    twb_uint(w, 9, (uint64_t)t);
    *len = w->len;
    return w->data;
}

/* Ends a hand-written contention profile whose only function, 1, is f in
 * f.go: that function, the strings, time `t`. */
static uint8_t *twb_end_with_f(struct twb *w, int64_t t, size_t *len)
{
    struct twb m = { 0 };
    const char *strs[] = { "", "contentions", "count", "delay", "nanoseconds", "f", "f.go" };

    twb_uint(&m, 1, 1);
    twb_uint(&m, 2, 5);
    twb_uint(&m, 4, 6);
    twb_bytes(w, 5, m.data, m.len);
    twb_free(&m);
    return twb_profile_end(w, strs, sizeof(strs) / sizeof(strs[0]), t, len);
}

/* Encodes a contention profile with one sample by hand: unpacked repeated
 * fields, values and location ids interleaved (value, loc, value, loc). */
static uint8_t *unpacked_prof(int64_t t, const int64_t *vals, size_t *len)
{
    struct twb w = { 0 }, m = { 0 };

    twb_contention_types(&w);
    twb_uint(&m, 2, (uint64_t)vals[0]);
    twb_uint(&m, 1, 2);
    twb_uint(&m, 2, (uint64_t)vals[1]);
    twb_uint(&m, 1, 1);
    twb_bytes(&w, 2, m.data, m.len);
    for (uint64_t id = 1; id <= 2; id++) {
        struct twb line = { 0 };
        m.len = 0;
        twb_uint(&m, 1, id);
        twb_uint(&m, 3, 0x100 * id);
        twb_uint(&line, 1, 1);
        twb_uint(&line, 2, id);
        twb_bytes(&m, 4, line.data, line.len);
        twb_free(&line);
        twb_bytes(&w, 4, m.data, m.len);
    }
    twb_free(&m);
    return twb_end_with_f(&w, t, len);
}

TEST(unpacked_repeated_fields_read)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct pprof_limits lim;
    uint8_t *in, *out;
    size_t len, out_len;
    char err[256];
    struct pprof__decoded dp;

    pprof_limits_default(&lim);
    in = unpacked_prof(10, (int64_t[]){ 2, 200 }, &len);
    tp_decode(in, len, &dp); /* protobuf-c reads it too */
    ASSERT_EQ(dp.prof->sample[0]->n_location_id, 2);
    ASSERT_EQ(dp.prof->sample[0]->location_id[0], 2);
    ASSERT_EQ(dp.prof->sample[0]->value[1], 200);
    pprof__decoded_done(&dp);
    ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
              PPROF_DELTA_BASELINE);
    free(in);
    in = unpacked_prof(20, (int64_t[]){ 5, 260 }, &len);
    ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
              PPROF_DELTA_EMITTED);
    free(in);
    tp_decode(out, out_len, &dp);
    assert_vals(tp_find(dp.prof, "200,100,|"), (int64_t[]){ 3, 60 }, 2);
    ASSERT_EQ(dp.prof->duration_nanos, 10);
    pprof__decoded_done(&dp);
    free(out);
    pprof_delta_free(d);
}

/* The orders a location's fields come in: Go's (id, address, lines,
 * mapping_id last), field-number order (protobuf-c's, and most writers'),
 * and lines first, which no writer uses. */
enum loc_order { LOC_GO, LOC_BY_NUMBER, LOC_LINES_FIRST };

static void put_lines(struct twb *m, const uint64_t *fns, size_t nfns)
{
    for (size_t i = 0; i < nfns; i++) {
        struct twb line = { 0 };
        twb_uint(&line, 1, fns[i]);
        twb_uint(&line, 2, 10 + i);
        twb_bytes(m, 4, line.data, line.len);
        twb_free(&line);
    }
}

static void put_location(struct twb *w, enum loc_order order, uint64_t id, uint64_t mapping,
                         uint64_t addr, const uint64_t *fns, size_t nfns)
{
    struct twb m = { 0 };

    switch (order) {
    case LOC_GO:
        twb_uint(&m, 1, id);
        twb_uint(&m, 3, addr);
        put_lines(&m, fns, nfns);
        twb_uint(&m, 2, mapping);
        break;
    case LOC_BY_NUMBER:
        twb_uint(&m, 1, id);
        twb_uint(&m, 2, mapping);
        twb_uint(&m, 3, addr);
        put_lines(&m, fns, nfns);
        break;
    case LOC_LINES_FIRST:
        put_lines(&m, fns, nfns);
        twb_uint(&m, 3, addr);
        twb_uint(&m, 1, id);
        twb_uint(&m, 2, mapping);
        break;
    }
    twb_bytes(w, 4, m.data, m.len);
    twb_free(&m);
}

/* A contention profile whose locations are written in `order`: 0x100 and
 * 0x200 of one line each, 0x300 of two (g inlined into f). Location 2
 * names function `fn2` and mapping `map2` (1 exists, 9 does not). Samples:
 * [0x200, 0x100] with (1, 100) x scale, [0x300] with (2, 50) x scale. */
static uint8_t *ordered_prof(int64_t t, enum loc_order order, int64_t scale, uint64_t fn2,
                             uint64_t map2, size_t *len)
{
    struct twb w = { 0 }, m = { 0 }, v = { 0 };
    const char *strs[] = { "",  "contentions", "count", "delay", "nanoseconds",
                           "f", "f.go",        "g",     "main" };

    twb_contention_types(&w);
    for (int k = 0; k < 2; k++) {
        m.len = v.len = 0;
        twb_bytes(&m, 1, k == 0 ? "\x02\x01" : "\x03", k == 0 ? 2 : 1);
        twb_varint(&v, (uint64_t)((k == 0 ? 1 : 2) * scale));
        twb_varint(&v, (uint64_t)((k == 0 ? 100 : 50) * scale));
        twb_bytes(&m, 2, v.data, v.len);
        twb_bytes(&w, 2, m.data, m.len);
    }
    m.len = 0;
    twb_uint(&m, 1, 1);
    twb_uint(&m, 2, 0x1000);
    twb_uint(&m, 3, 0x9000);
    twb_uint(&m, 5, 8);
    twb_bytes(&w, 3, m.data, m.len);
    put_location(&w, order, 1, 1, 0x100, (uint64_t[]){ 1 }, 1);
    put_location(&w, order, 2, map2, 0x200, (uint64_t[]){ fn2 }, 1);
    put_location(&w, order, 3, 1, 0x300, (uint64_t[]){ 2, 1 }, 2);
    for (uint64_t id = 1; id <= 2; id++) {
        m.len = 0;
        twb_uint(&m, 1, id);
        twb_uint(&m, 2, id == 1 ? 5 : 7);
        twb_uint(&m, 4, 6);
        twb_bytes(&w, 5, m.data, m.len);
    }
    twb_free(&m);
    twb_free(&v);
    return twb_profile_end(&w, strs, sizeof(strs) / sizeof(strs[0]), t, len);
}

TEST(locations_read_alike_whatever_the_order_of_their_fields)
{
    struct pprof_limits lim;
    uint8_t *in, *out;
    size_t len, out_len;
    char err[256];
    struct pprof__decoded dp;

    pprof_limits_default(&lim);
    for (int order = LOC_GO; order <= LOC_LINES_FIRST; order++) {
        struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);

        in = ordered_prof(10, order, 1, 1, 1, &len);
        ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
                  PPROF_DELTA_BASELINE);
        free(in);
        in = ordered_prof(20, order, 3, 1, 1, &len);
        ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
                  PPROF_DELTA_EMITTED);
        free(in);
        tp_decode(out, out_len, &dp);
        ASSERT_EQ(dp.prof->n_sample, 2);
        assert_vals(tp_find(dp.prof, "200,100,|"), (int64_t[]){ 2, 200 }, 2);
        assert_vals(tp_find(dp.prof, "300,|"), (int64_t[]){ 4, 100 }, 2);
        /* g is named only by the inlined frame of 0x300, which must count
         * as a location of two lines for g to be kept. */
        ASSERT_EQ(dp.prof->n_location, 3);
        ASSERT_EQ(dp.prof->n_mapping, 1);
        ASSERT_EQ(dp.prof->n_function, 2);
        pprof__decoded_done(&dp);
        free(out);

        /* A function or a mapping that does not exist is found whatever
         * the order, and named. */
        in = ordered_prof(30, order, 4, 9, 1, &len);
        ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
                  PPROF_ECORRUPT);
        ASSERT(strstr(err, "unknown function") != NULL);
        free(in);
        in = ordered_prof(40, order, 4, 1, 9, &len);
        ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
                  PPROF_ECORRUPT);
        ASSERT(strstr(err, "unknown mapping") != NULL);
        free(in);
        pprof_delta_free(d);
    }
}

/* Lines whose function id and line number take one to five bytes each (a
 * line number of 0 is left out of the Line), some in an inlined second
 * Line: each location keeps its own function, the others are pruned. */
static const uint64_t LINE_FIDS[] = { 1, 127, 128, 16383, 16384, 16500 };
static const int64_t LINE_NUMS[] = { 0, 1, 127, 128, 16384, 2097152, 268435456 };
#define N_LINE_FIDS (sizeof(LINE_FIDS) / sizeof(LINE_FIDS[0]))
#define N_LINE_NUMS (sizeof(LINE_NUMS) / sizeof(LINE_NUMS[0]))

static struct tprof *line_widths_prof(int64_t t, int64_t scale)
{
    struct tprof *tp = mem_prof(t);
    char name[16];

    for (unsigned f = 1; f <= 16500; f++) {
        snprintf(name, sizeof(name), "fn%u", f);
        ASSERT_EQ(tp_func(tp, name, "lines.go"), f);
    }
    for (size_t i = 0; i < N_LINE_FIDS; i++) {
        for (size_t j = 0; j < N_LINE_NUMS; j++) {
            uint64_t loc = tp_loc(tp, 0x10000 + 0x100 * i + j, LINE_FIDS[i], LINE_NUMS[j]);
            if (j == 1) /* inlined into the next function id */
                tp_loc_add_line(tp, loc, LINE_FIDS[(i + 1) % N_LINE_FIDS], LINE_NUMS[i]);
            tp_sample(tp, &loc, 1, (int64_t[]){ scale, 10 * scale, 1, 10 });
        }
    }
    return tp;
}

/* A contention profile of one sample on location 1 (0x100), whose only
 * Line is the raw bytes `line`; function 1 is f. */
static uint8_t *raw_line_prof(const uint8_t *line, size_t line_len, size_t *len)
{
    struct twb w = { 0 }, m = { 0 };

    twb_contention_types(&w);
    twb_bytes(&m, 1, "\x01", 1);
    twb_bytes(&m, 2, "\x01\x02", 2);
    twb_bytes(&w, 2, m.data, m.len);
    m.len = 0;
    twb_uint(&m, 1, 1);
    twb_uint(&m, 3, 0x100);
    twb_bytes(&m, 4, line, line_len);
    twb_bytes(&w, 4, m.data, m.len);
    twb_free(&m);
    return twb_end_with_f(&w, 1, len);
}

TEST(lines_read_whatever_the_widths_of_their_function_and_number)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    struct run r;

    run_scaled_pair(d, line_widths_prof, &r);
    const Perftools__Profiles__Profile *p = r.dec.prof;
    ASSERT_EQ(p->n_sample, N_LINE_FIDS * N_LINE_NUMS);
    ASSERT_EQ(p->n_location, N_LINE_FIDS * N_LINE_NUMS);
    ASSERT_EQ(p->n_function, N_LINE_FIDS);
    for (size_t k = 0; k < p->n_location; k++) {
        const Perftools__Profiles__Location *l = p->location[k];
        size_t i = (l->address - 0x10000) / 0x100, j = (l->address - 0x10000) % 0x100;
        ASSERT_TRUE(i < N_LINE_FIDS && j < N_LINE_NUMS);
        ASSERT_EQ(l->n_line, j == 1 ? 2u : 1u);
        for (size_t n = 0; n < l->n_line; n++) {
            uint64_t want = n == 0 ? LINE_FIDS[i] : LINE_FIDS[(i + 1) % N_LINE_FIDS];
            const Perftools__Profiles__Function *fn = NULL;
            char name[16];
            for (size_t m = 0; m < p->n_function; m++)
                if (p->function[m]->id == l->line[n]->function_id)
                    fn = p->function[m];
            ASSERT_NOT_NULL(fn);
            snprintf(name, sizeof(name), "fn%" PRIu64, want);
            ASSERT_STR_EQ(p->string_table[fn->name], name);
            ASSERT_EQ(l->line[n]->line, n == 0 ? LINE_NUMS[j] : LINE_NUMS[i]);
        }
    }
    assert_vals(tp_find(p, "10203,|"), (int64_t[]){ 2, 20, 1, 10 }, 4);
    run_done(&r);
    pprof_delta_free(d);

    /* Lines of a function id and another field: a column (field 3) is
     * read past; a line number that is not a varint (field 2 of another
     * wire type, whatever follows), or that runs past its Line, makes the
     * profile malformed. */
    static const struct {
        uint8_t bytes[8];
        size_t len;
        int rc;
    } lines[] = {
        { { 0x08, 0x01, 0x10, 0x07 }, 4, PPROF_DELTA_BASELINE },
        { { 0x08, 0x01, 0x10, 0x07, 0x18, 0x02 }, 6, PPROF_DELTA_BASELINE },
        { { 0x08, 0x01, 0x18, 0x02 }, 4, PPROF_DELTA_BASELINE },
        { { 0x08, 0x01, 0x12, 0x01, 0x07 }, 5, PPROF_ECORRUPT },
        { { 0x08, 0x01, 0x12, 0x87, 0x01 }, 5, PPROF_ECORRUPT },
        { { 0x08, 0x01, 0x10, 0x87 }, 4, PPROF_ECORRUPT },
    };
    struct pprof_limits lim;
    char err[256];
    uint8_t *out;
    size_t out_len;

    pprof_limits_default(&lim);
    for (size_t k = 0; k < sizeof(lines) / sizeof(lines[0]); k++) {
        size_t len;
        uint8_t *in = raw_line_prof(lines[k].bytes, lines[k].len, &len);
        d = pprof_delta_new(PPROF_DELTA_CONTENTION);
        ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
                  lines[k].rc);
        free(in);
        pprof_delta_free(d);
    }
}

TEST(records_cut_short_are_malformed)
{
    struct pprof_limits lim;
    char err[256];
    uint8_t *out;
    size_t out_len;

    pprof_limits_default(&lim);
    /* A record of each table whose length runs past the profile's end by
     * one byte to three, after a whole profile, where the record scan
     * reads one-byte tags and lengths without the general reader. */
    for (uint8_t field = 1; field <= 6; field++) {
        for (size_t over = 1; over <= 3; over++) {
            struct tprof *tp = cont_prof(1);
            size_t len;
            add(tp, (uint64_t[]){ 0x10 }, 1, (int64_t[]){ 1, 1 });
            uint8_t *raw = tp_pack(tp, &len, false);
            uint8_t *in = realloc(raw, len + 8);
            ASSERT(in != NULL);
            in[len] = (uint8_t)(field << 3 | 2);
            in[len + 1] = (uint8_t)(4 + over);
            memset(in + len + 2, 0x08, 4);
            struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
            ASSERT_EQ(pprof_delta_process(d, in, len + 6, &lim, &out, &out_len, err, sizeof(err)),
                      PPROF_ECORRUPT);
            ASSERT(strstr(err, "bad protobuf encoding") != NULL);
            pprof_delta_free(d);
            free(in);
            tp_free(tp);
        }
    }
}

/* Addresses of one to ten bytes as varints, the smallest, the largest and
 * one between of each width: every location keeps its own key (a misread
 * address would merge two samples), and the samples' values tell each
 * delta apart. */
static void width_addresses(int64_t w, uint64_t a[3])
{
    a[0] = 1ULL << (7 * (w - 1));
    a[1] = a[0] | 0x5;
    a[2] = w == 10 ? UINT64_MAX : (1ULL << (7 * w)) - 1;
}

static struct tprof *address_widths_prof(int64_t t, int64_t scale)
{
    struct tprof *tp = mem_prof(t);
    uint64_t fn = tp_func(tp, "f", "f.go");

    for (int64_t k = 0; k < 10; k++) {
        uint64_t addrs[3];
        width_addresses(k + 1, addrs);
        for (int64_t j = 0; j < 3; j++) {
            uint64_t loc = tp_loc(tp, addrs[j], fn, 3 * k + j);
            tp_sample(tp, &loc, 1, (int64_t[]){ (3 * k + j + 1) * scale, scale, 1, 1 });
        }
    }
    return tp;
}

TEST(addresses_read_whatever_their_width)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    struct run r;
    char key[32];

    run_scaled_pair(d, address_widths_prof, &r);
    ASSERT_EQ(r.dec.prof->n_sample, 30);
    for (int64_t k = 0; k < 10; k++) {
        uint64_t addrs[3];
        width_addresses(k + 1, addrs);
        for (int64_t j = 0; j < 3; j++) {
            snprintf(key, sizeof(key), "%" PRIx64 ",|", addrs[j]);
            assert_vals(tp_find(r.dec.prof, key), (int64_t[]){ 2 * (3 * k + j + 1), 2, 1, 1 }, 4);
        }
    }
    run_done(&r);
    pprof_delta_free(d);
}

/* A heap profile whose records take headers of every length: function
 * names (string records) of 1 to 20,000 bytes, and a sample of 200 frames
 * (over 128 bytes) beside one of a frame; a record's length takes one,
 * two or three bytes. */
static const size_t NAME_LENS[] = { 1, 127, 128, 129, 16383, 16384, 20000 };
#define N_NAME_LENS (sizeof(NAME_LENS) / sizeof(NAME_LENS[0]))

static struct tprof *long_records_prof(int64_t t, int64_t scale)
{
    struct tprof *tp = mem_prof(t);
    uint64_t ids[200];
    char *name = malloc(20001);

    ASSERT_NOT_NULL(name);
    for (size_t i = 0; i < N_NAME_LENS; i++) {
        memset(name, 'a' + (int)i, NAME_LENS[i]);
        name[NAME_LENS[i]] = '\0';
        ids[i] = tp_loc(tp, 0x1000 + i, tp_func(tp, name, "app.go"), (int64_t)i);
    }
    free(name);
    for (size_t i = N_NAME_LENS; i < 200; i++)
        ids[i] = ids[i % N_NAME_LENS];
    tp_sample(tp, ids, 200, (int64_t[]){ 2 * scale, 200 * scale, 1, 100 });
    tp_sample(tp, &ids[N_NAME_LENS - 1], 1, (int64_t[]){ scale, 10 * scale, 1, 10 });
    return tp;
}

TEST(records_read_whatever_the_bytes_of_their_length)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_MEMORY);
    struct run r;
    char key[64];
    size_t found = 0;

    run_scaled_pair(d, long_records_prof, &r);
    ASSERT_EQ(r.dec.prof->n_sample, 2);
    snprintf(key, sizeof(key), "%x,|", 0x1000 + (unsigned)N_NAME_LENS - 1);
    assert_vals(tp_find(r.dec.prof, key), (int64_t[]){ 2, 20, 1, 10 }, 4);
    for (size_t i = 0; i < r.dec.prof->n_sample; i++)
        if (r.dec.prof->sample[i]->n_location_id == 200)
            assert_vals(r.dec.prof->sample[i], (int64_t[]){ 4, 400, 1, 100 }, 4);
    /* Every name came through whole. */
    ASSERT_EQ(r.dec.prof->n_function, N_NAME_LENS);
    for (size_t i = 0; i < r.dec.prof->n_function; i++) {
        const char *fn = r.dec.prof->string_table[r.dec.prof->function[i]->name];
        for (size_t j = 0; j < N_NAME_LENS; j++)
            found += strlen(fn) == NAME_LENS[j] && fn[0] == 'a' + (int)j &&
                     fn[NAME_LENS[j] - 1] == 'a' + (int)j;
    }
    ASSERT_EQ(found, N_NAME_LENS);
    run_done(&r);
    pprof_delta_free(d);
}

TEST(error_poisons_state_and_next_profile_reseeds)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct pprof_limits lim;
    uint64_t A[1] = { 0x10 };
    struct tprof *tp;
    struct run r;
    uint8_t *in, *out;
    size_t len, out_len;
    char err[256];

    pprof_limits_default(&lim);
    tp = cont_prof(1);
    add(tp, A, 1, (int64_t[]){ 1, 10 });
    run(d, tp, &r);
    run_done(&r);
    tp = cont_prof(2);
    add(tp, A, 1, (int64_t[]){ 2, 20 });
    in = tp_pack(tp, &len, false);
    tp_free(tp);
    ASSERT_EQ(pprof_delta_process(d, in, len - 3, &lim, &out, &out_len, err, sizeof(err)),
              PPROF_ECORRUPT);
    ASSERT_NULL(out);
    ASSERT(strstr(err, "malformed") != NULL);
    ASSERT_EQ(pprof_delta_keys(d), 0);
    free(in);
    tp = cont_prof(3);
    add(tp, A, 1, (int64_t[]){ 3, 30 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
    run_done(&r);
    tp = cont_prof(4);
    add(tp, A, 1, (int64_t[]){ 4, 40 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    assert_vals(tp_find(r.dec.prof, "10,|"), (int64_t[]){ 1, 10 }, 2);
    run_done(&r);
    pprof_delta_free(d);
}

/* Location ids of two bytes are bounds-checked four at a time against a
 * table sized to the profile's ids. A larger profile first leaves keys for
 * higher ids in the thread's scratch table, so an id past the end would
 * read a stale key and pass unnoticed if the check were missing. */
TEST(two_byte_ids_past_the_table_are_unknown_locations)
{
    struct pprof_delta *big = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct tprof *tp;
    struct run r;
    uint64_t ids[4];

    tp = cont_prof(1);
    for (uint64_t i = 0; i < 400; i++) {
        ids[0] = tp_loc(tp, 0x1000 + i, 0, 0);
        tp_sample(tp, ids, 1, (int64_t[]){ 1, 1 });
    }
    run(big, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
    run_done(&r);

    for (int past = 0; past < 2; past++) {
        tp = cont_prof(1);
        for (uint64_t i = 0; i < 130; i++)
            tp_loc(tp, 0x1000 + i, 0, 0);
        ids[0] = 129;
        ids[1] = 130;
        ids[2] = past ? 300 : 128;
        ids[3] = 129;
        tp_sample(tp, ids, 4, (int64_t[]){ 1, 1 });
        tp_sample(tp, ids, 4, (int64_t[]){ 1, 1 }); /* eight bytes in a row */
        run(d, tp, &r);
        if (past) {
            ASSERT_EQ(r.rc, PPROF_ECORRUPT);
            ASSERT(strstr(r.err, "unknown location 300") != NULL);
        } else {
            ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
        }
        run_done(&r);
    }
    pprof_delta_free(big);
    pprof_delta_free(d);
}

/* One profile numbers `nloc` locations in one order, the next in the
 * reverse order, so the same stacks are written with other mixes of one-,
 * two- and three-byte ids (ids from 128 on take two bytes, from 16384 on
 * three): every stack must still meet its key, whichever decoding path
 * each eight bytes took. Frames are drawn from both ends of the numbering,
 * so that every width meets every other. */
static void add_width_samples(struct tprof *tp, int nloc, bool reversed, int64_t scale)
{
    uint64_t *id_of = calloc((size_t)nloc, sizeof(uint64_t)), ids[24];
    uint32_t seed = 12345;

    ASSERT(id_of != NULL);
    for (int i = 0; i < nloc; i++) {
        int a = reversed ? nloc - 1 - i : i;
        id_of[a] = tp_loc(tp, 0x5000 + (uint64_t)a * 16, 0, 0);
    }
    for (int st = 0; st < 60; st++) {
        size_t depth = 3 + st % 22;
        ids[0] = id_of[st]; /* distinct leaves: distinct stacks */
        for (size_t k = 1; k < depth; k++) {
            seed = seed * 1103515245u + 12345u;
            uint32_t r = (seed >> 16) % 200;
            ids[k] = id_of[seed >> 31 ? (int)r : nloc - 1 - (int)r];
        }
        tp_sample(tp, ids, depth, (int64_t[]){ scale * (st + 1), scale * (st + 1) * 10 });
    }
    free(id_of);
}

static void expect_unknown_location_among(struct pprof_delta *d, uint64_t nloc,
                                          const uint64_t *stack, size_t depth, const char *msg)
{
    struct tprof *tp = cont_prof(9);
    struct run r;

    for (uint64_t i = 0; i < nloc; i++)
        tp_loc(tp, 0x1000 + i, 0, 0);
    tp_sample(tp, stack, depth, (int64_t[]){ 1, 1 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_ECORRUPT);
    if (!strstr(r.err, msg))
        test__fail(__FILE__, __LINE__, "error \"%s\" lacks \"%s\"", r.err, msg);
    run_done(&r);
}

static void expect_unknown_location(struct pprof_delta *d, const uint64_t *stack, size_t depth,
                                    const char *msg)
{
    expect_unknown_location_among(d, 130, stack, depth, msg);
}

TEST(stacks_meet_their_keys_whatever_their_id_widths)
{
    /* 400 locations: one- and two-byte ids; 20000: up to three bytes;
     * 40000: a profile over 256 KB, whose record scan prefetches. */
    static const int nlocs[] = { 400, 20000, 40000 };
    for (size_t ni = 0; ni < ARRAY_SIZE(nlocs); ni++) {
        int nloc = nlocs[ni];
        struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
        struct tprof *tp;
        struct run r;
        size_t raw_len;

        tp = cont_prof(1);
        add_width_samples(tp, nloc, false, 1);
        free(tp_pack(tp, &raw_len, false));
        ASSERT(nloc < 40000 || raw_len > 256 * 1024);
        run(d, tp, &r);
        ASSERT_EQ(r.rc, PPROF_DELTA_BASELINE);
        run_done(&r);
        for (int round = 2; round <= 3; round++) {
            tp = cont_prof(round);
            add_width_samples(tp, nloc, round == 2, round);
            run(d, tp, &r);
            ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
            ASSERT_EQ(pprof_delta_keys(d), 60);
            ASSERT_EQ(r.dec.prof->n_sample, 60);
            /* Each stack gained (st + 1) x (1, 10) since the previous
             * round; one that missed its key would show its whole round x
             * (st + 1). */
            bool seen[61] = { false };
            for (size_t i = 0; i < 60; i++) {
                const Perftools__Profiles__Sample *sm = r.dec.prof->sample[i];
                ASSERT(sm->value[0] >= 1 && sm->value[0] <= 60);
                ASSERT(!seen[sm->value[0]]);
                seen[sm->value[0]] = true;
                ASSERT_EQ(sm->value[1], sm->value[0] * 10);
            }
            run_done(&r);
        }
        pprof_delta_free(d);
    }

    /* An id past the table (130 locations) among mixed widths is an
     * unknown location, on whichever path its bytes are read: one by one
     * near the end of the stack, or two at a time, two or three bytes
     * wide. */
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    expect_unknown_location(d, (uint64_t[]){ 5, 129, 6, 300, 7, 8 }, 6, "unknown location 300");
    expect_unknown_location(d, (uint64_t[]){ 5, 129, 300, 6, 7, 8, 9, 10 }, 8,
                            "unknown location 300");
    expect_unknown_location(d, (uint64_t[]){ 5, 129, 20000, 6, 7, 8, 9, 10 }, 8,
                            "unknown location 20000");
    expect_unknown_location(d, (uint64_t[]){ 5, 6, 7, 8, 9, 10, 11, 20000, 5, 6 }, 10,
                            "unknown location 20000");
    /* Ten locations, in a table of 128 by id: 100 and 50 are in the table
     * but absent, read eight at a time; the first unknown one is named. */
    expect_unknown_location_among(d, 10, (uint64_t[]){ 1, 2, 3, 100, 4, 50, 5, 6 }, 8,
                                  "unknown location 100");
    expect_unknown_location_among(d, 10, (uint64_t[]){ 1, 2, 3, 4, 5, 6, 7, 8, 9, 50 }, 10,
                                  "unknown location 50");
    expect_unknown_location_among(d, 10, (uint64_t[]){ 1, 300, 3, 4, 5, 6, 7, 8, 9, 50 }, 10,
                                  "unknown location 300");
    /* A three-byte id among the first four of eight bytes, in the largest
     * table the four-at-once path reads: its first two bytes alone would
     * be a location. */
    expect_unknown_location_among(d, 16383, (uint64_t[]){ 5, 129, 20000, 6, 7, 8, 9, 10 }, 8,
                                  "unknown location 20000");
    /* Past 16383 locations, four ids of up to three bytes are read from
     * twelve: one past the table, and one of four bytes whose first three
     * alone would be a location. */
    expect_unknown_location_among(d, 20000,
                                  (uint64_t[]){ 5, 129, 30000, 6, 7, 8, 9, 10, 11, 12, 13, 14 }, 12,
                                  "unknown location 30000");
    expect_unknown_location_among(d, 20000,
                                  (uint64_t[]){ 5, 129, (1u << 21) + 5, 6, 7, 8, 9, 10, 11, 12 },
                                  10, "unknown location 2097157");
    pprof_delta_free(d);
}

/* An id of `width` bytes among `nloc` locations, drawn by `salt`. */
static uint64_t id_of_width(unsigned width, unsigned salt, uint64_t nloc)
{
    switch (width) {
    case 1:
        return 1 + salt % 127;
    case 2:
        return 128 + salt % ((nloc < 16383 ? nloc : 16383) - 127);
    default:
        return 16384 + salt % (nloc - 16383);
    }
}

/* Stack s of a profile numbering `nloc` locations: eight frames whose id
 * widths are the digits of s, in base 2 up to 16383 locations (one or two
 * bytes) and in base 3 past them (one to three), then up to six more of
 * alternating widths, so that the first bytes of the 256 stacks take every
 * pattern of widths the four-at-once readers see, and their ends every
 * short tail. */
static size_t width_pattern_stack(unsigned s, uint64_t nloc, uint64_t *ids)
{
    unsigned base = nloc > 16383 ? 3 : 2, digits = s;
    size_t depth = 8 + s % 7;

    for (size_t k = 0; k < depth; k++) {
        unsigned width = k < 8 ? 1 + digits % base : 1 + k % base;
        digits /= k < 8 ? base : 1;
        ids[k] = id_of_width(width, s * 11 + (unsigned)k * 17, nloc);
    }
    return depth;
}

/* A contention profile of the 256 stacks of width_pattern_stack(), stack s
 * at (s + 1) x `scale` contentions and delay; the location ids of a stack
 * packed, or each in its own field (read one at a time). */
static uint8_t *width_pattern_prof(uint64_t nloc, bool packed, int64_t scale, int64_t t,
                                   size_t *len)
{
    struct twb w = { 0 }, m = { 0 }, ids = { 0 };
    uint64_t stack[16];

    twb_contention_types(&w);
    for (unsigned s = 0; s < 256; s++) {
        size_t depth = width_pattern_stack(s, nloc, stack);
        m.len = ids.len = 0;
        for (size_t k = 0; k < depth; k++) {
            if (packed)
                twb_varint(&ids, stack[k]);
            else
                twb_uint(&m, 1, stack[k]);
        }
        if (packed)
            twb_bytes(&m, 1, ids.data, ids.len);
        twb_uint(&m, 2, (uint64_t)((s + 1) * scale));
        twb_uint(&m, 2, (uint64_t)((s + 1) * scale));
        twb_bytes(&w, 2, m.data, m.len);
    }
    for (uint64_t id = 1; id <= nloc; id++) {
        m.len = 0;
        twb_uint(&m, 1, id);
        twb_uint(&m, 3, 0x400000 + 0x10 * id);
        twb_bytes(&w, 4, m.data, m.len);
    }
    twb_free(&m);
    twb_free(&ids);
    return twb_end_with_f(&w, t, len);
}

TEST(stacks_read_alike_packed_and_one_id_at_a_time)
{
    /* 400 locations: two-byte ids past the table among them (read again
     * by the slower paths); 16383: the most ids of at most two bytes;
     * 20000: ids of one to three bytes. */
    static const uint64_t nlocs[] = { 400, 16383, 20000 };

    for (size_t ni = 0; ni < ARRAY_SIZE(nlocs); ni++) {
        struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
        struct pprof_limits lim;
        struct pprof__decoded dp;
        uint8_t *in, *out;
        size_t len, out_len;
        char err[256];
        bool seen[257] = { false };

        pprof_limits_default(&lim);
        in = width_pattern_prof(nlocs[ni], true, 1000, 10, &len);
        ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
                  PPROF_DELTA_BASELINE);
        free(in);
        in = width_pattern_prof(nlocs[ni], false, 1001, 20, &len);
        ASSERT_EQ(pprof_delta_process(d, in, len, &lim, &out, &out_len, err, sizeof(err)),
                  PPROF_DELTA_EMITTED);
        free(in);
        ASSERT_EQ(pprof_delta_keys(d), 256);
        /* Each stack gained s + 1; one whose packed ids were misread would
         * show its whole 1001 x (s + 1). */
        tp_decode(out, out_len, &dp);
        ASSERT_EQ(dp.prof->n_sample, 256);
        for (size_t i = 0; i < 256; i++) {
            const Perftools__Profiles__Sample *sm = dp.prof->sample[i];
            ASSERT(sm->value[0] >= 1 && sm->value[0] <= 256);
            ASSERT(!seen[sm->value[0]]);
            seen[sm->value[0]] = true;
            ASSERT_EQ(sm->value[1], sm->value[0]);
        }
        pprof__decoded_done(&dp);
        free(out);
        pprof_delta_free(d);
    }
}

TEST(state_forgets_vanished_keys_and_reports_memory)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct tprof *tp;
    struct run r;
    size_t mem_big, mem_small;

    tp = cont_prof(1);
    for (uint64_t i = 1; i <= 500; i++)
        add(tp, &i, 1, (int64_t[]){ 1, 1 });
    run(d, tp, &r);
    run_done(&r);
    ASSERT_EQ(pprof_delta_keys(d), 500);
    mem_big = pprof_delta_mem(d);
    /* 500 keys of 8 bytes plus two one-byte varint values: 5000 bytes of
     * data, and a small fixed header. */
    ASSERT_GE(mem_big, 500 * 10);
    ASSERT_LE(mem_big, 500 * 10 + 256);
    tp = cont_prof(2);
    uint64_t one = 7;
    add(tp, &one, 1, (int64_t[]){ 2, 2 });
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    assert_vals(tp_find(r.dec.prof, "7,|"), (int64_t[]){ 1, 1 }, 2);
    run_done(&r);
    ASSERT_EQ(pprof_delta_keys(d), 1);
    mem_small = pprof_delta_mem(d);
    ASSERT_LT(mem_small, mem_big / 8);
    pprof_delta_free(d);
}

static void expect_cap_error(struct pprof_limits *lim, struct tprof *tp, const char *msg)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct run r;

    run_lim(d, tp, lim, &r);
    ASSERT_EQ(r.rc, PPROF_ETOOLARGE);
    if (!strstr(r.err, msg))
        test__fail(__FILE__, __LINE__, "error \"%s\" lacks \"%s\"", r.err, msg);
    run_done(&r);
    pprof_delta_free(d);
}

TEST(caps_name_the_limit)
{
    struct pprof_limits lim;
    struct tprof *tp;
    uint64_t stack[3] = { 1, 2, 3 };

    pprof_limits_default(&lim);
    lim.max_samples = 2;
    tp = cont_prof(1);
    for (int i = 0; i < 3; i++)
        add(tp, stack, 1, (int64_t[]){ 1, 1 });
    expect_cap_error(&lim, tp, "3 samples > cap 2");

    pprof_limits_default(&lim);
    lim.max_stack_depth = 2;
    tp = cont_prof(1);
    add(tp, stack, 3, (int64_t[]){ 1, 1 });
    expect_cap_error(&lim, tp, "stack depth > cap 2");

    pprof_limits_default(&lim);
    lim.max_labels = 1;
    tp = cont_prof(1);
    add(tp, stack, 1, (int64_t[]){ 1, 1 });
    tp_label_str(tp, "a", "b");
    tp_label_str(tp, "c", "d");
    expect_cap_error(&lim, tp, "labels in one sample > cap 1");

    pprof_limits_default(&lim);
    lim.max_locations = 2;
    tp = cont_prof(1);
    add(tp, stack, 3, (int64_t[]){ 1, 1 });
    expect_cap_error(&lim, tp, "3 locations > cap 2");

    pprof_limits_default(&lim);
    lim.max_functions = 1;
    tp = cont_prof(1);
    add(tp, stack, 2, (int64_t[]){ 1, 1 });
    expect_cap_error(&lim, tp, "2 functions > cap 1");

    pprof_limits_default(&lim);
    lim.max_strings = 4;
    tp = cont_prof(1);
    add(tp, stack, 1, (int64_t[]){ 1, 1 });
    expect_cap_error(&lim, tp, "strings > cap 4");

    pprof_limits_default(&lim);
    lim.max_decompressed = 64;
    tp = cont_prof(1);
    add(tp, stack, 3, (int64_t[]){ 1, 1 });
    expect_cap_error(&lim, tp, "decompressed size > cap 64 bytes");
}

/* The record tables grow while the profile is read: what was read before a
 * table grew must still be there, and a cap error still names how many
 * records there are, not where reading stopped. */
TEST(record_tables_grow_keeping_what_was_read)
{
    enum { NS = 1500, NC = 40 };
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct pprof_limits lim;
    struct run r;

    pprof_limits_default(&lim);
    /* An empty scratch: every table starts small and doubles. */
    pprof_thread_cleanup();
    for (int round = 1; round <= 2; round++) {
        struct tprof *tp = cont_prof(round);
        Perftools__Profiles__Profile *p = tp_proto(tp);
        int64_t *comments = malloc(NC * sizeof(int64_t));
        size_t len;
        uint8_t *in;

        for (uint64_t i = 0; i < NS; i++)
            add(tp, (uint64_t[]){ 0x1000 + i }, 1,
                (int64_t[]){ round * (int64_t)i, round * (int64_t)i * 10 });
        for (int i = 0; i < NC; i++) {
            char text[16];
            snprintf(text, sizeof(text), "note %d", i);
            comments[i] = (int64_t)tp_str(tp, text);
        }
        p->comment = comments;
        p->n_comment = NC;
        in = tp_pack(tp, &len, true);
        p->comment = NULL;
        p->n_comment = 0;
        free(comments);
        tp_free(tp);
        memset(&r, 0, sizeof(r));
        r.rc = pprof_delta_process(d, in, len, &lim, &r.out, &r.out_len, r.err, sizeof(r.err));
        free(in);
        ASSERT_EQ(r.rc, round == 1 ? PPROF_DELTA_BASELINE : PPROF_DELTA_EMITTED);
        if (round == 1)
            continue;
        tp_decode(r.out, r.out_len, &r.dec);
        ASSERT_EQ(r.dec.prof->n_sample, NS - 1); /* sample 0 stayed 0 */
        for (uint64_t i = 1; i < NS; i++) {
            char key[32];
            snprintf(key, sizeof(key), "%llx,|", (unsigned long long)(0x1000 + i));
            assert_vals(tp_find(r.dec.prof, key), (int64_t[]){ (int64_t)i, (int64_t)i * 10 }, 2);
        }
        ASSERT_EQ(r.dec.prof->n_comment, NC);
        for (int i = 0; i < NC; i++) {
            char text[16];
            snprintf(text, sizeof(text), "note %d", i);
            ASSERT_STR_EQ(r.dec.prof->string_table[r.dec.prof->comment[i]], text);
        }
        run_done(&r);
    }
    pprof_delta_free(d);

    pprof_limits_default(&lim);
    lim.max_samples = 300;
    struct tprof *tp = cont_prof(1);
    for (uint64_t i = 0; i < 1000; i++)
        add(tp, (uint64_t[]){ 0x1000 + i % 7 }, 1, (int64_t[]){ 1, 1 });
    expect_cap_error(&lim, tp, "1000 samples > cap 300");
}

/* A profile that declares many columns and has many samples without
 * values is refused before its per-sample tables (samples x columns) are
 * sized: what the thread keeps stays small. */
TEST(many_columns_without_values_allocate_nothing_large)
{
    enum { N = 1000 };
    static const char *cols[N];
    static int64_t zeros[N];
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct tprof *tp;
    struct run r;

    for (int i = 0; i < N; i++)
        cols[i] = "contentions/count";
    tp = tp_new(cols, N);
    uint64_t loc = tp_loc(tp, 0x10, 0, 0);
    for (int i = 0; i < N; i++) {
        tp_sample(tp, &loc, 1, zeros);
        tp_proto(tp)->sample[i]->n_value = 0; /* no values: four bytes each */
    }
    pprof_thread_cleanup();
    run(d, tp, &r);
    ASSERT_EQ(r.rc, PPROF_ECORRUPT);
    ASSERT(strstr(r.err, "fewer values than sample types") != NULL);
    /* Sized from the counts, sums alone would take 1000 x 1000 x 8 bytes
     * (kept: under the retain cap). */
    ASSERT(pprof__scratch_bytes() < (size_t)1 << 20);
    run_done(&r);
    pprof_delta_free(d);
}

TEST(compression_none_writes_plain_pprof)
{
    struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
    struct pprof_limits lim;
    uint64_t A[1] = { 0x10 };
    struct tprof *tp;
    struct run r;

    pprof_limits_default(&lim);
    lim.compression = PPROF_COMPRESS_NONE;
    tp = cont_prof(1);
    add(tp, A, 1, (int64_t[]){ 1, 10 });
    run_lim(d, tp, &lim, &r);
    run_done(&r);
    tp = cont_prof(2);
    add(tp, A, 1, (int64_t[]){ 3, 10 });
    run_lim(d, tp, &lim, &r);
    ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
    ASSERT_NE(r.out[0], 0x1f);
    ASSERT_EQ(r.out[0], 0x0a); /* sample_type first */
    assert_vals(tp_find(r.dec.prof, "10,|"), (int64_t[]){ 2, 0 }, 2);
    run_done(&r);
    pprof_delta_free(d);
}

/* The places of the first and last sample record and of the last string
 * record among the top-level records of a plain profile. */
struct layout {
    size_t first_sample, last_sample, last_string, records;
};

static struct layout layout_of(const uint8_t *p, size_t len)
{
    const uint8_t *end = p + len;
    struct layout l = { SIZE_MAX, 0, 0, 0 };
    struct pprof__field f;

    while (pprof__next_field(&p, end, &f) > 0) {
        if (f.num == 2) {
            if (l.first_sample == SIZE_MAX)
                l.first_sample = l.records;
            l.last_sample = l.records;
        } else if (f.num == 6) {
            l.last_string = l.records;
        }
        l.records++;
    }
    ASSERT_EQ(p, end);
    return l;
}

/* libdeflate's level 1 compresses a Go heap delta 2-3 % faster with the
 * samples after the tables (docs/benchmarks.md), so encode() writes them
 * last when it knows the locations to keep before writing them: when most
 * samples are emitted. When most are dropped, it marks the locations of
 * the few it writes as it writes them, so these come first. Either way
 * the delta is the same. */
TEST(samples_written_after_the_tables_when_most_are_emitted)
{
    struct pprof_limits lim;
    struct tprof *tp;
    struct run r;

    pprof_limits_default(&lim);
    lim.compression = PPROF_COMPRESS_NONE;
    for (int most_dropped = 0; most_dropped <= 1; most_dropped++) {
        struct pprof_delta *d = pprof_delta_new(PPROF_DELTA_CONTENTION);
        for (int64_t t = 1; t <= 2; t++) {
            tp = cont_prof(t);
            for (uint64_t a = 1; a <= 8; a++) {
                /* In the second profile, sample 1 (most_dropped: only it)
                 * has grown; an unchanged contention sample is dropped. */
                bool grows = t == 2 && (a == 1 || !most_dropped);
                add(tp, (uint64_t[]){ 0x100 * a, 0x10 }, 2,
                    (int64_t[]){ grows ? 2 * (int64_t)a : (int64_t)a, 10 });
            }
            run_lim(d, tp, &lim, &r);
            if (t == 1) {
                run_done(&r);
                continue;
            }
            ASSERT_EQ(r.rc, PPROF_DELTA_EMITTED);
            ASSERT_EQ(r.dec.prof->n_sample, most_dropped ? 1u : 8u);
            assert_vals(tp_find(r.dec.prof, "100,10,|"), (int64_t[]){ 1, 0 }, 2);
            struct layout l = layout_of(r.out, r.out_len);
            ASSERT_NE(l.first_sample, SIZE_MAX);
            if (most_dropped)
                ASSERT_TRUE(l.last_sample < l.last_string);
            else
                ASSERT_TRUE(l.first_sample > l.last_string);
            run_done(&r);
        }
        pprof_delta_free(d);
    }
}
