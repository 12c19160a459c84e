/* SPDX-License-Identifier: Apache-2.0 */
/* The C face of RE2, the engine Go's regexp package was ported from: the
 * only C++ in proflet. It compiles a pattern with Go's options (UTF-8, Perl
 * syntax, leftmost-first) and runs one search; everything Go-specific
 * (pattern rewrites, error wording, invalid UTF-8 subjects) is done in C by
 * regex.c.
 *
 * No exception leaves this file: an allocation failure inside RE2 becomes
 * -ENOMEM. RE2 never logs (log_errors is off), as library code must not.
 * Threads: a compiled object is immutable and RE2 serialises its own DFA
 * cache, so one object may be searched from many threads at once.
 * Ownership: relabel__re2_new() returns an owned object, freed by
 * relabel__re2_free(); the rest borrows. */
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <re2/re2.h>

#include "relabel/internal.h"

/* regex.c prints RE2's error codes with Go's words; keep the numbering. */
static_assert((int)RELABEL__RE2_BAD_ESCAPE == (int)re2::RE2::ErrorBadEscape,
              "RE2 error codes moved");
static_assert((int)RELABEL__RE2_PATTERN_TOO_LARGE == (int)re2::RE2::ErrorPatternTooLarge,
              "RE2 error codes moved");

struct relabel__re2 {
    re2::RE2 re;
    relabel__re2(const char *pat, size_t len, const re2::RE2::Options &o)
        : re(re2::StringPiece(pat, len), o)
    {
    }
};

extern "C" int relabel__re2_new(const char *pat, size_t len, int64_t max_mem,
                                struct relabel__re2 **out, char *arg, size_t arglen)
{
    *out = nullptr;
    if (arglen)
        arg[0] = '\0';
    try {
        re2::RE2::Options o;

        o.set_log_errors(false);
        o.set_max_mem(max_mem);
        /* the rest are Go's: UTF-8, Perl syntax and classes, first match */
        struct relabel__re2 *r = new relabel__re2(pat, len, o);

        if (!r->re.ok()) {
            int code = r->re.error_code();

            if (arglen)
                snprintf(arg, arglen, "%s", r->re.error_arg().c_str());
            delete r;
            return code > 0 ? code : RELABEL__RE2_INTERNAL;
        }
        *out = r;
        return 0;
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    } catch (...) {
        return RELABEL__RE2_INTERNAL;
    }
}

extern "C" void relabel__re2_free(struct relabel__re2 *r)
{
    delete r;
}

extern "C" uint32_t relabel__re2_groups(const struct relabel__re2 *r)
{
    return (uint32_t)r->re.NumberOfCapturingGroups();
}

extern "C" int relabel__re2_group_names(const struct relabel__re2 *r, char **names,
                                        uint32_t ngroups)
{
    try {
        for (const auto &g : r->re.CapturingGroupNames()) {
            if (g.first < 1 || (uint32_t)g.first > ngroups)
                continue;
            names[g.first] = strdup(g.second.c_str());
            if (!names[g.first])
                return -ENOMEM;
        }
        return 0;
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    }
}

extern "C" int relabel__re2_search(const struct relabel__re2 *r, const char *s, size_t len,
                                   size_t start, size_t *ov, uint32_t pairs)
{
    re2::StringPiece text(s, len);
    re2::StringPiece inl[16];
    std::vector<re2::StringPiece> big;
    re2::StringPiece *m = inl;

    try {
        if (pairs > sizeof(inl) / sizeof(inl[0])) {
            big.resize(pairs);
            m = big.data();
        }
        if (!r->re.Match(text, start, len, re2::RE2::UNANCHORED, m, (int)pairs))
            return 0;
    } catch (const std::bad_alloc &) {
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < pairs; i++) {
        if (m[i].data() == nullptr) {
            ov[2 * i] = ov[2 * i + 1] = RELABEL__UNSET;
        } else {
            ov[2 * i] = (size_t)(m[i].data() - s);
            ov[2 * i + 1] = ov[2 * i] + m[i].size();
        }
    }
    return 1;
}
