/* Fuzz target: a spool segment file from disk (untrusted: torn, corrupt or
 * hostile). The scan must truncate at the first bad record and never crash;
 * every record it keeps must decode or be rejected cleanly. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "forward/internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[] = "/tmp/fuzz-spool-XXXXXX";
    uint64_t recs, bytes, corrupt, oldest;
    int fd = mkstemp(path);

    if (fd < 0)
        return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        unlink(path);
        return 0;
    }
    close(fd);
    fwd__seg_scan_file(path, &recs, &bytes, &corrupt, &oldest);
    unlink(path);
    /* Record payload decoding on its own (checksum bypassed). */
    if (size > FWD_REC_HDR) {
        struct fwd_profile *p = NULL;

        if (fwd__rec_decode(data + FWD_REC_HDR, size - FWD_REC_HDR, &p) == 0)
            fwd_profile_unref(p);
    }
    return 0;
}
