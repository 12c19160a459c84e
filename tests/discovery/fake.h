/* SPDX-License-Identifier: Apache-2.0 */
/* Test helper: runs tests/k8s/fake_apiserver.py as a child process and talks
 * to its control port with small blocking HTTP requests (127.0.0.1 only). */
#ifndef PROFLET_TESTS_DISCOVERY_FAKE_H
#define PROFLET_TESTS_DISCOVERY_FAKE_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/harness/test.h"

extern char **environ;

struct fake {
    pid_t pid;
    int api_port;
    int ctl_port;
    char dir[64];
    char url[64];
};

/* The server of the running test: killed if a failed assertion skipped
 * fake_stop(), and at exit. */
static pid_t fake_current_pid;

static inline void fake_kill_current(void)
{
    int st;

    if (fake_current_pid > 0) {
        kill(fake_current_pid, SIGTERM);
        waitpid(fake_current_pid, &st, 0);
        fake_current_pid = 0;
    }
}

static inline const char *fake_script(void)
{
    const char *s = getenv("K8S_FAKE");

    return s ? s : "tests/k8s/fake_apiserver.py";
}

/* Starts the server with an optional scenario (path relative to the
 * script's scenarios/ directory) and extra arguments. */
static inline void fake_start(struct fake *f, const char *scenario, const char *extra1,
                              const char *extra2)
{
    char pf[128], sc[4096], script[4096];
    char *argv[12];
    int a = 0, rc;
    FILE *fp = NULL;
    uint64_t deadline;

    fake_kill_current();
    atexit(fake_kill_current);
    memset(f, 0, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/disc-fake-XXXXXX");
    ASSERT_NOT_NULL(mkdtemp(f->dir));
    snprintf(pf, sizeof(pf), "%s/ports", f->dir);
    snprintf(script, sizeof(script), "%s", fake_script());
    argv[a++] = "/usr/bin/python3";
    argv[a++] = script;
    argv[a++] = "--port-file";
    argv[a++] = pf;
    argv[a++] = "--max-seconds";
    argv[a++] = "300";
    if (scenario) {
        char *slash;

        snprintf(sc, sizeof(sc), "%s", script);
        slash = strrchr(sc, '/');
        snprintf(slash ? slash + 1 : sc, sizeof(sc) - (size_t)(slash ? slash + 1 - sc : 0),
                 "scenarios/%s", scenario);
        argv[a++] = "--scenario";
        argv[a++] = sc;
    }
    if (extra1)
        argv[a++] = (char *)extra1;
    if (extra2)
        argv[a++] = (char *)extra2;
    argv[a] = NULL;
    rc = posix_spawn(&f->pid, argv[0], NULL, NULL, argv, environ);
    ASSERT_EQ(rc, 0);
    fake_current_pid = f->pid;
    deadline = (uint64_t)time(NULL) + 15;
    while ((fp = fopen(pf, "r")) == NULL) {
        ASSERT_LT((uint64_t)time(NULL), deadline);
        usleep(20000);
    }
    ASSERT_EQ(fscanf(fp, "%d %d", &f->api_port, &f->ctl_port), 2);
    fclose(fp);
    snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d", f->api_port);
}

static inline void fake_stop(struct fake *f)
{
    char cmd[128];
    int st;

    if (f->pid > 0) {
        kill(f->pid, SIGTERM);
        waitpid(f->pid, &st, 0);
        f->pid = 0;
        fake_current_pid = 0;
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup of %s failed\n", f->dir);
}

/* A blocking HTTP request to the control port. Returns the malloc'd body
 * (caller frees) and the status in *status. */
static inline char *fake_http(const struct fake *f, const char *method, const char *path,
                              const char *body, int *status)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->ctl_port)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), n;
    char req[8192];
    size_t len = 0, cap = 1 << 16;
    char *resp = malloc(cap + 1), *p;
    struct timeval tv = {10, 0};

    ASSERT(fd >= 0 && resp);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    n = snprintf(req, sizeof(req),
                 "%s %s HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: %zu\r\n\r\n%s",
                 method, path, body ? strlen(body) : 0, body ? body : "");
    ASSERT_EQ(write(fd, req, (size_t)n), n);
    for (;;) {
        ssize_t r;

        if (len == cap) {
            cap *= 2;
            resp = realloc(resp, cap + 1);
            ASSERT_NOT_NULL(resp);
        }
        r = read(fd, resp + len, cap - len);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    resp[len] = '\0';
    *status = 0;
    sscanf(resp, "HTTP/%*s %d", status);
    p = strstr(resp, "\r\n\r\n");
    p = strdup(p ? p + 4 : "");
    free(resp);
    return p;
}

static inline void fake_ctl(const struct fake *f, const char *path, const char *body)
{
    int st;
    char *r = fake_http(f, "POST", path, body, &st);

    if (st != 200)
        test__fail(__FILE__, __LINE__, "control %s %s: %d %s", path, body, st, r);
    free(r);
}

#endif
