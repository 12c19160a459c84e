/* SPDX-License-Identifier: Apache-2.0 */
/* pprof-delta: runs pprof_delta_process() over profile files in order, as
 * consecutive scrapes of one (target, profile type) pair, and writes every
 * emitted delta to OUTDIR/<n>.pb.gz (n = position of the input, from 0).
 * Used by the Go oracle test and handy for debugging:
 *
 *   pprof-delta -k memory -o /tmp/out a.pb.gz b.pb.gz c.pb.gz
 *
 * prints one line per input: "<n> emitted|baseline|reset|error <detail>",
 * then " charged=<bytes> need=<bytes>": what the call charged to its grant
 * and what the state says a profile of that size needs. `-m BYTES` gives
 * every call that grant (limits.max_memory).
 * Exit status 0 unless a file cannot be read or written. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pprof/internal.h"

#define MAX_FILE (512u << 20)

static int read_file(const char *path, uint8_t **data, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t cap = 0, n = 0;

    if (!f)
        return -errno;
    for (;;) {
        if (n == cap) {
            uint8_t *nb;
            if (cap >= MAX_FILE) {
                free(buf);
                fclose(f);
                return -EFBIG;
            }
            cap = cap ? cap * 2 : 1 << 16;
            nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                return -ENOMEM;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    *data = buf;
    *len = n;
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: pprof-delta [-k memory|contention] [-z none|fastest|balanced|smallest] "
                    "[-m grant] [-o outdir] "
                    "file...\n");
}

int main(int argc, char **argv)
{
    enum pprof_delta_kind kind = PPROF_DELTA_MEMORY;
    struct pprof_limits lim;
    const char *outdir = ".";
    struct pprof_delta *d;
    int opt, status = 0;

    pprof_limits_default(&lim);
    while ((opt = getopt(argc, argv, "k:z:m:o:")) != -1) {
        switch (opt) {
        case 'k':
            if (strcmp(optarg, "memory") == 0) {
                kind = PPROF_DELTA_MEMORY;
            } else if (strcmp(optarg, "contention") == 0) {
                kind = PPROF_DELTA_CONTENTION;
            } else {
                usage();
                return 2;
            }
            break;
        case 'z':
            lim.compression = PPROF_COMPRESS_COUNT;
            for (int c = 0; c < PPROF_COMPRESS_COUNT; c++)
                if (strcmp(optarg, pprof_compression_name(c)) == 0)
                    lim.compression = c;
            if (lim.compression == PPROF_COMPRESS_COUNT) {
                usage();
                return 2;
            }
            break;
        case 'm':
            lim.max_memory = (size_t)strtoull(optarg, NULL, 10);
            break;
        case 'o':
            outdir = optarg;
            break;
        default:
            usage();
            return 2;
        }
    }
    if (optind >= argc) {
        usage();
        return 2;
    }
    d = pprof_delta_new(kind);
    if (!d)
        return 1;
    for (int i = optind; i < argc; i++) {
        uint8_t *in = NULL, *out = NULL;
        size_t in_len = 0, out_len = 0;
        char err[256], path[4096];
        int rc = read_file(argv[i], &in, &in_len);

        if (rc < 0) {
            fprintf(stderr, "%s: %s\n", argv[i], strerror(-rc));
            status = 1;
            break;
        }
        rc = pprof_delta_process(d, in, in_len, &lim, &out, &out_len, err, sizeof(err));
        free(in);
        fprintf(stderr, "%d charged=%zu need=%llu\n", i - optind, pprof__acct_charged(),
                (unsigned long long)pprof_delta_need(d, pprof__delta_need_raw(d)));
        switch (rc) {
        case PPROF_DELTA_BASELINE:
            printf("%d baseline\n", i - optind);
            break;
        case PPROF_DELTA_RESET:
            printf("%d reset\n", i - optind);
            break;
        case PPROF_DELTA_EMITTED: {
            FILE *f;
            snprintf(path, sizeof(path), "%s/%d.pb.gz", outdir, i - optind);
            f = fopen(path, "wb");
            if (!f || fwrite(out, 1, out_len, f) != out_len) {
                fprintf(stderr, "%s: cannot write\n", path);
                status = 1;
            }
            if (f)
                fclose(f);
            printf("%d emitted %s %zu\n", i - optind, path, out_len);
            break;
        }
        default:
            printf("%d error %s\n", i - optind, err);
            break;
        }
        free(out);
    }
    printf("state %zu keys %zu bytes\n", pprof_delta_keys(d), pprof_delta_mem(d));
    pprof_delta_free(d);
    return status;
}
