/* SPDX-License-Identifier: Apache-2.0 */
/* File-system helpers: `mkdir -p` and the temp-file-then-rename write that
 * the directory sink and the spool cursor both rely on, so that a crash or a
 * concurrent reader never sees half a file (docs/design.md "Modules").
 *
 * Threading: plain blocking syscalls with no shared state; callers run them
 * on libuv pool threads. Paths are bounded by PATH_MAX-sized stack buffers. */
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FSUTIL_PATH_MAX 4096

int fsutil_mkdir_p(const char *path, mode_t mode)
{
    char tmp[FSUTIL_PATH_MAX];
    size_t n = strlen(path);

    if (n >= sizeof(tmp))
        return -ENAMETOOLONG;
    memcpy(tmp, path, n + 1);
    /* Start at 1 so that an absolute path does not try to create "". */
    for (size_t i = 1; i <= n; i++) {
        if (tmp[i] == '/' || tmp[i] == '\0') {
            char c = tmp[i];

            tmp[i] = '\0';
            if (mkdir(tmp, mode) < 0 && errno != EEXIST)
                return -errno;
            tmp[i] = c;
        }
    }
    return 0;
}

int fsutil_write_atomic(const char *dir, const char *name, const void *data, size_t len, bool sync)
{
    char tmp[FSUTIL_PATH_MAX], dst[FSUTIL_PATH_MAX];
    const uint8_t *p = data;
    int fd, r = 0;

    if ((size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name) >= sizeof(tmp) ||
        (size_t)snprintf(dst, sizeof(dst), "%s/%s", dir, name) >= sizeof(dst))
        return -ENAMETOOLONG;
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -errno;
    while (len > 0) {
        ssize_t w = write(fd, p, len);

        if (w < 0) {
            if (errno == EINTR)
                continue;
            r = -errno;
            break;
        }
        p += w;
        len -= (size_t)w;
    }
    /* The data must be durable before the rename makes it visible, or a
     * crash could leave a renamed but empty file. */
    if (r == 0 && sync && fdatasync(fd) < 0)
        r = -errno;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && rename(tmp, dst) < 0)
        r = -errno;
    if (r < 0)
        unlink(tmp);
    return r;
}

int fsutil_readable(const char *path)
{
    char c;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY), rc = 0;

    if (fd < 0)
        return -errno;
    if (read(fd, &c, 1) < 0)
        rc = -errno;
    close(fd);
    return rc;
}

int fsutil_read_small(const char *path, size_t cap, char **out, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    char *b;
    size_t n = 0;
    ssize_t r;

    if (fd < 0)
        return -errno;
    if (!(b = malloc(cap + 1))) {
        close(fd);
        return -ENOMEM;
    }
    while (n < cap && (r = read(fd, b + n, cap - n)) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            r = -errno;
            free(b);
            close(fd);
            return (int)r;
        }
        n += (size_t)r;
    }
    if (n == cap) {
        char extra;

        if (read(fd, &extra, 1) > 0) {
            free(b);
            close(fd);
            return -E2BIG;
        }
    }
    close(fd);
    b[n] = '\0';
    *out = b;
    if (len)
        *len = n;
    return 0;
}

static bool space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

char *fsutil_trim(char *s)
{
    size_t n = strlen(s), i = 0;

    while (n && space(s[n - 1]))
        s[--n] = '\0';
    while (i < n && space(s[i]))
        i++;
    memmove(s, s + i, n - i + 1);
    return s;
}
