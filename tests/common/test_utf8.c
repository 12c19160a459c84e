/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for common/utf8: Go's utf8.DecodeRune, EncodeRune and Valid,
 * and the appenders that make bytes from targets valid (JSON) or visible
 * (text).
 * Expected values are Go's documented behaviour (each invalid byte is one
 * U+FFFD of width 1; surrogates, overlong forms and values past U+10FFFF are
 * invalid), not our own output. */
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "common/utf8.h"
#include "test.h"

/* Decodes the whole of `s` (length n) and writes "rune/width" pairs, with a
 * "!" on each invalid byte, e.g. "61/1 fffd/1! ". */
static char dbuf[512];
static const char *decode_all(const char *s, size_t n)
{
    size_t o = 0;

    dbuf[0] = '\0';
    for (size_t i = 0; i < n;) {
        uint32_t r;
        bool invalid;
        size_t w = utf8_decode(s + i, n - i, &r, &invalid);

        o += (size_t)snprintf(dbuf + o, sizeof(dbuf) - o, "%x/%zu%s ", (unsigned)r, w,
                              invalid ? "!" : "");
        i += w;
    }
    return dbuf;
}

TEST(utf8_decode_like_go)
{
    ASSERT_STR_EQ(decode_all("a", 1), "61/1 ");
    ASSERT_STR_EQ(decode_all("\xc3\xa9", 2), "e9/2 ");
    ASSERT_STR_EQ(decode_all("\xe4\xb8\xad", 3), "4e2d/3 ");
    ASSERT_STR_EQ(decode_all("\xf0\x9f\x98\x80", 4), "1f600/4 ");
    ASSERT_STR_EQ(decode_all("\xf4\x8f\xbf\xbf", 4), "10ffff/4 ");
    /* a literal U+FFFD is valid and three bytes wide */
    ASSERT_STR_EQ(decode_all("\xef\xbf\xbd", 3), "fffd/3 ");
    /* continuation byte, bytes that never start a sequence */
    ASSERT_STR_EQ(decode_all("\x80", 1), "fffd/1! ");
    ASSERT_STR_EQ(decode_all("\xff\xf5", 2), "fffd/1! fffd/1! ");
    /* overlong forms */
    ASSERT_STR_EQ(decode_all("\xc0\xaf", 2), "fffd/1! fffd/1! ");
    ASSERT_STR_EQ(decode_all("\xc1\xbf", 2), "fffd/1! fffd/1! ");
    ASSERT_STR_EQ(decode_all("\xe0\x80\xaf", 3), "fffd/1! fffd/1! fffd/1! ");
    ASSERT_STR_EQ(decode_all("\xf0\x80\x80\xaf", 4), "fffd/1! fffd/1! fffd/1! fffd/1! ");
    /* a surrogate, past U+10FFFF */
    ASSERT_STR_EQ(decode_all("\xed\xa0\x80", 3), "fffd/1! fffd/1! fffd/1! ");
    ASSERT_STR_EQ(decode_all("\xf4\x90\x80\x80", 4), "fffd/1! fffd/1! fffd/1! fffd/1! ");
    /* truncated: by the end of input, or by a byte that does not continue */
    ASSERT_STR_EQ(decode_all("\xe2\x82", 2), "fffd/1! fffd/1! ");
    ASSERT_STR_EQ(decode_all("\xe2\x82x", 3), "fffd/1! fffd/1! 78/1 ");
    /* the length bounds the read even when more bytes follow in memory */
    ASSERT_STR_EQ(decode_all("\xc3\xa9", 1), "fffd/1! ");
}

TEST(utf8_encode_like_go)
{
    static const uint32_t runes[] = {
        0, 0x7f, 0x80, 0x7ff, 0x800, 0xfffd, 0xffff, 0x10000, 0x10ffff
    };
    char out[UTF8_MAX_LEN];

    for (size_t i = 0; i < sizeof(runes) / sizeof(runes[0]); i++) {
        uint32_t r;
        bool invalid;
        size_t n = utf8_encode(runes[i], out);

        ASSERT_EQ(utf8_decode(out, n, &r, &invalid), n);
        ASSERT_FALSE(invalid);
        ASSERT_EQ(r, runes[i]);
    }
    ASSERT_EQ(utf8_encode(0xe9, out), 2);
    ASSERT(memcmp(out, "\xc3\xa9", 2) == 0);
    /* what cannot be encoded becomes U+FFFD */
    ASSERT_EQ(utf8_encode(0xd800, out), 3);
    ASSERT(memcmp(out, "\xef\xbf\xbd", 3) == 0);
    ASSERT_EQ(utf8_encode(0x110000, out), 3);
    ASSERT(memcmp(out, "\xef\xbf\xbd", 3) == 0);
}

TEST(utf8_valid_and_invalid_count)
{
    ASSERT_TRUE(utf8_valid("", 0));
    ASSERT_TRUE(utf8_valid("plain ascii", 11));
    ASSERT_TRUE(utf8_valid("h\xc3\xa9\xe4\xb8\xad\xf0\x9f\x98\x80", 10));
    ASSERT_FALSE(utf8_valid("\xc0\xaf", 2));
    ASSERT_FALSE(utf8_valid("\xed\xa0\x80", 3));
    ASSERT_FALSE(utf8_valid("ok\xe2\x82", 4));
    ASSERT_EQ(utf8_invalid_count("", 0), 0);
    ASSERT_EQ(utf8_invalid_count("h\xc3\xa9", 3), 0);
    ASSERT_EQ(utf8_invalid_count("a\xff"
                                 "b\xe2\x82",
                                 5),
              3);
    ASSERT_EQ(utf8_invalid_count("\xed\xa0\x80\xef\xbf\xbd", 6), 3);
}

/* What an appender makes of `s` (length n), NUL-terminated in `out`. */
static const char *appended(int (*fn)(struct buf *, const char *, size_t), const char *s, size_t n,
                            struct buf *out)
{
    buf_reset(out);
    ASSERT_EQ(fn(out, s, n), 0);
    ASSERT_EQ(buf_append(out, "", 1), 0);
    return out->data;
}

/* Go's encoding/json writes each byte that starts no valid sequence as one
 * U+FFFD and keeps valid text, control characters included (json-c
 * escapes those). */
TEST(utf8_append_valid_replaces_each_invalid_byte)
{
    static const char bad[] = "a\xff\xfe\x1b[31m\n\xe2\x82\xac\xe2\x82z\xed\xa0\x80";
    struct buf b;

    buf_init(&b, 4096);
    ASSERT_STR_EQ(appended(utf8_append_valid, "plain", 5, &b), "plain");
    ASSERT_STR_EQ(appended(utf8_append_valid, bad, sizeof(bad) - 1, &b),
                  "a\xef\xbf\xbd\xef\xbf\xbd\x1b[31m\n\xe2\x82\xac"
                  "\xef\xbf\xbd\xef\xbf\xbdz\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    ASSERT_TRUE(utf8_valid(b.data, b.len - 1));
    ASSERT_EQ(utf8_invalid_count(bad, sizeof(bad) - 1), 7);
    /* a literal U+FFFD stays one */
    ASSERT_STR_EQ(appended(utf8_append_valid, "\xef\xbf\xbd", 3, &b), "\xef\xbf\xbd");
    buf_done(&b);
}

/* Text for people: one line, no terminal escape, valid UTF-8. */
TEST(utf8_append_visible_shows_control_characters)
{
    static const char evil[] = "up\n\x1b[2J\r\tx\x7f\xc2\x9b"
                               "1m\xff\xc3\xa9";
    struct buf b;
    const char *out;

    buf_init(&b, 4096);
    out = appended(utf8_append_visible, evil, sizeof(evil) - 1, &b);
    ASSERT_STR_EQ(out, "up\\n\\x1b[2J\\r\\tx\\x7f\\u009b1m\xef\xbf\xbd\xc3\xa9");
    for (const char *p = out; *p; p++)
        ASSERT_TRUE((unsigned char)*p >= 0x20 && *p != 0x7f);
    ASSERT_TRUE(utf8_valid(out, strlen(out)));
    ASSERT_STR_EQ(appended(utf8_append_visible, "", 0, &b), "");
    /* the cap holds: nothing past it, an error instead */
    {
        struct buf small;

        buf_init(&small, 4);
        ASSERT_LT(utf8_append_visible(&small, "\x1b\x1b", 2), 0);
        ASSERT_LE(small.len, 4);
        buf_done(&small);
    }
    buf_done(&b);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
