/** Small file-system helpers shared by the modules that write files (the
 * directory sink and the spool). Blocking calls: run them on a pool thread
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
int fsutil_write_atomic(const char *dir, const char *name, const void *data, size_t len,
                        bool sync);

#endif
