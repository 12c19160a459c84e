/* SPDX-License-Identifier: Apache-2.0 */
/** Small file-system helpers shared by the modules that read and write
 * files (secrets, the directory sink, the spool). Blocking calls: run them on a pool thread
 * (uv_queue_work), never on the loop thread. Thread-safe; no state. */
#ifndef PROFLET_COMMON_FSUTIL_H
#define PROFLET_COMMON_FSUTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/** Creates `path` and every missing parent with `mode` (as `mkdir -p`);
 * directories that already exist are fine. Returns 0, -ENAMETOOLONG or the
 * negative errno of the failing mkdir(). */
int fsutil_mkdir_p(const char *path, mode_t mode);

/** Writes `data[0..len)` to `dir`/`name` so that a reader sees either the
 * old file or the whole new one: the bytes go to `dir`/.`name`.tmp, which is
 * then renamed over the target. With `sync`, the data is flushed to disk
 * (fdatasync) before the rename. The file gets mode 0644. On failure the
 * temp file is removed and the target is untouched. Returns 0 or a negative
 * errno. */
int fsutil_write_atomic(const char *dir, const char *name, const void *data, size_t len, bool sync);

/** Reads a whole small file into a malloc'd, NUL-terminated buffer (`*len`
 * gets its length when not NULL). Returns 0, -E2BIG if it holds more than
 * `cap` bytes, or a negative errno. */
int fsutil_read_small(const char *path, size_t cap, char **out, size_t *len);

/** Whether `path` can be opened and read, as a library reading it later
 * will (a directory opens but does not read): 0 or a negative errno. */
int fsutil_readable(const char *path);

/** Cuts leading and trailing white space (space, tab, CR, LF) in place, as
 * Go's strings.TrimSpace does for ASCII; returns `s`. */
char *fsutil_trim(char *s);

#endif
