/* SPDX-License-Identifier: Apache-2.0 */
/** A growable byte buffer with a hard cap (curl's dynbuf idea).
 *
 * Every buffer fed by the network or by a file goes through one of these so
 * that no peer can make proflet allocate without bound. Not thread-safe; a
 * buffer belongs to whoever embeds it. */
#ifndef PROFLET_COMMON_BUF_H
#define PROFLET_COMMON_BUF_H

#include <stdarg.h>
#include <stddef.h>

/** Embeddable. `data` is always NUL-terminated when non-NULL (the NUL is not
 * counted in `len`). Fields prefixed `_` are private. */
struct buf {
    char *data;
    size_t len;
    size_t _cap;
    size_t _max;
};

/** Initialises an empty buffer that may hold at most `max` bytes. */
void buf_init(struct buf *b, size_t max);
/** Frees the storage; the buffer is empty and reusable afterwards. */
void buf_done(struct buf *b);
/** Empties the buffer, keeping its storage. */
void buf_reset(struct buf *b);
/** Appends `n` bytes. Returns 0, -E2BIG past the cap (nothing appended) or -ENOMEM. */
int buf_append(struct buf *b, const void *p, size_t n);
/** Appends a NUL-terminated string. Same returns as buf_append(). */
int buf_puts(struct buf *b, const char *s);
/** Appends printf-formatted text. Same returns as buf_append(). */
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** va_list form of buf_printf(). */
int buf_vprintf(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/** Appends `n` bytes of `s` percent-encoded: every byte but RFC 3986's
 * unreserved ones (letters, digits, - . _ ~). Same returns as
 * buf_append(); on an error part of it may have been appended. */
int buf_append_pct(struct buf *b, const char *s, size_t n);
/** Ensures room for `n` more bytes without changing `len`. Returns 0, -E2BIG or -ENOMEM. */
int buf_reserve(struct buf *b, size_t n);
/** Returns the storage (caller frees) and leaves the buffer empty. `*len` gets the length. */
char *buf_steal(struct buf *b, size_t *len);

#endif
