/* SPDX-License-Identifier: Apache-2.0 */
/* Corpus replay for libFuzzer targets: every file named on the command line
 * (or every file inside a named directory) is fed once to
 * LLVMFuzzerTestOneInput, so each fuzzer is also a regression test in the
 * `fuzz` suite without clang's fuzzer runtime. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *data;
    long n;

    if (!f) {
        perror(path);
        return -1;
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    data = malloc(n > 0 ? (size_t)n : 1);
    if (!data || (n > 0 && fread(data, 1, (size_t)n, f) != (size_t)n)) {
        fclose(f);
        free(data);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(data, (size_t)n);
    free(data);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0;

    for (int i = 1; i < argc; i++) {
        struct stat st;

        if (stat(argv[i], &st) < 0) {
            perror(argv[i]);
            return 1;
        }
        if (S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;

            while (d && (e = readdir(d)) != NULL) {
                char path[4096];

                if (e->d_name[0] == '.')
                    continue;
                snprintf(path, sizeof(path), "%s/%s", argv[i], e->d_name);
                if (run_file(path) < 0)
                    return 1;
                files++;
            }
            if (d)
                closedir(d);
        } else {
            if (run_file(argv[i]) < 0)
                return 1;
            files++;
        }
    }
    if (files == 0) {
        fprintf(stderr, "no corpus files\n");
        return 1;
    }
    printf("replayed %d inputs\n", files);
    return 0;
}
