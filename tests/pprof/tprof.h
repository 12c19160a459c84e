/* SPDX-License-Identifier: Apache-2.0 */
/** Test helpers for pprof/: build profiles with protobuf-c (the encoder the
 * library does not use on its hot path, so tests do not reuse the code they
 * check), and read samples back by content rather than by id. */
#ifndef PROFLET_TESTS_TPROF_H
#define PROFLET_TESTS_TPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pprof/internal.h"

/** A profile under construction; ids and string indices are assigned in
 * order of first use. */
struct tprof;

/** New profile with columns given as "type/unit" strings. */
struct tprof *tp_new(const char *const *columns, size_t ncols);
/** Frees the builder (NULL is fine). */
void tp_free(struct tprof *tp);
/** String index of `s`, interning it. */
uint64_t tp_str(struct tprof *tp, const char *s);
/** Adds a mapping; returns its id. */
uint64_t tp_mapping(struct tprof *tp, uint64_t start, uint64_t limit, const char *file,
                    const char *build_id);
/** Adds (or finds) a function by name and file; returns its id. */
uint64_t tp_func(struct tprof *tp, const char *name, const char *file);
/** Adds a location with one line (func_id 0 for none); returns its id. */
uint64_t tp_loc(struct tprof *tp, uint64_t addr, uint64_t func_id, int64_t line);
/** Adds a second (inlined) line to location `loc_id`. */
void tp_loc_add_line(struct tprof *tp, uint64_t loc_id, uint64_t func_id, int64_t line);
/** Adds a sample with location ids (leaf first) and ncols values. */
void tp_sample(struct tprof *tp, const uint64_t *locs, size_t nlocs, const int64_t *vals);
/** Adds a numeric label to the last sample. */
void tp_label_num(struct tprof *tp, const char *key, int64_t num, const char *unit);
/** Adds a string label to the last sample. */
void tp_label_str(struct tprof *tp, const char *key, const char *val);
/** Sets time_nanos, period and the period type. */
void tp_time(struct tprof *tp, int64_t time_nanos);
/** Serializes with protobuf-c; gzip at level 1 when `gzip`. Caller frees. */
uint8_t *tp_pack(struct tprof *tp, size_t *len, bool gzip);
/** The protobuf-c struct being built (for direct tweaks). */
Perftools__Profiles__Profile *tp_proto(struct tprof *tp);

/** Gunzips (if needed) and decodes `data` with default limits; aborts the
 * current test on failure. Release with pprof__decoded_done(). */
void tp_decode(const uint8_t *data, size_t len, struct pprof__decoded *out);

/** Content key of a sample: "addr,addr,...|label;label" where a location
 * with address 0 reads as "fn@file:line" per line, and labels are sorted
 * "key=str#num#unit" strings. Written into `buf`. */
void tp_sample_key(const Perftools__Profiles__Profile *p, const Perftools__Profiles__Sample *s,
                   char *buf, size_t buflen);

/** Finds the sample whose tp_sample_key() equals `key`, or NULL. */
const Perftools__Profiles__Sample *tp_find(const Perftools__Profiles__Profile *p, const char *key);

/** A hand-rolled protobuf writer, for encodings protobuf-c never produces
 * (unpacked repeated fields, garbage, huge profiles written fast). */
struct twb {
    uint8_t *data;
    size_t len, cap;
};

/** Appends a raw varint. */
void twb_varint(struct twb *w, uint64_t v);
/** Appends a varint field. */
void twb_uint(struct twb *w, uint32_t field, uint64_t v);
/** Appends a length-delimited field. */
void twb_bytes(struct twb *w, uint32_t field, const void *data, size_t len);
/** Frees the buffer. */
void twb_free(struct twb *w);

#endif
