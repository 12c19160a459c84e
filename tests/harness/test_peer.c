/* SPDX-License-Identifier: Apache-2.0 */
/* Test peers as child processes and blocking requests to their control
 * ports (see test_peer.h). Test-process only, called from the test's own
 * thread; the child is always reaped, and every wait has a deadline. */
#include "test_peer.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int test_peer_start(struct test_peer *p, const char *const *argv)
{
    int pipefd[2];
    size_t got = 0;
    uint64_t deadline = now_ms() + 10000;
    pid_t parent = getpid();
    char *nl;

    p->pid = -1;
    p->line[0] = '\0';
    if (pipe2(pipefd, O_CLOEXEC) < 0)
        return -1;
    p->pid = fork();
    if (p->pid == 0) {
        /* The child: only async-signal-safe calls until exec. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent || dup2(pipefd[1], 1) < 0)
            _exit(127);
        execve(argv[0], (char *const *)argv, environ);
        _exit(127);
    }
    close(pipefd[1]);
    if (p->pid < 0) {
        close(pipefd[0]);
        return -1;
    }
    while (got < sizeof(p->line) - 1 && !memchr(p->line, '\n', got)) {
        struct pollfd pfd = { .fd = pipefd[0], .events = POLLIN };
        uint64_t now = now_ms();
        ssize_t r;

        if (now >= deadline || poll(&pfd, 1, (int)(deadline - now)) <= 0)
            break;
        r = read(pipefd[0], p->line + got, sizeof(p->line) - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
        p->line[got] = '\0';
    }
    close(pipefd[0]);
    p->line[got] = '\0';
    nl = strchr(p->line, '\n');
    if (!nl) {
        fprintf(stderr, "%s did not start: \"%s\"\n", argv[1] ? argv[1] : argv[0], p->line);
        test_peer_stop(p);
        return -1;
    }
    *nl = '\0';
    return 0;
}

void test_peer_stop(struct test_peer *p)
{
    uint64_t deadline = now_ms() + 5000;
    int st;

    if (p->pid <= 0)
        return;
    kill(p->pid, SIGTERM);
    while (waitpid(p->pid, &st, WNOHANG) == 0) {
        if (now_ms() > deadline) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            break;
        }
        usleep(10000); /* polling a child's exit, not hiding a race */
    }
    p->pid = -1;
}

char *test_peer_http(int port, const char *method, const char *path, const char *body, int *status)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), n;
    char req[8192];
    size_t len = 0, cap = 1 << 16;
    char *resp = malloc(cap + 1), *at, *out;
    struct timeval tv = { 10, 0 };

    *status = 0;
    if (fd < 0 || !resp)
        goto fail;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        goto fail;
    n = snprintf(req, sizeof(req),
                 "%s %s HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\n"
                 "Content-Length: %zu\r\n\r\n%s",
                 method, path, body ? strlen(body) : 0, body ? body : "");
    if (n < 0 || (size_t)n >= sizeof(req) || write(fd, req, (size_t)n) != n)
        goto fail;
    for (;;) {
        ssize_t r;

        if (len == cap) {
            char *bigger = realloc(resp, 2 * cap + 1);

            if (!bigger)
                goto fail;
            resp = bigger;
            cap *= 2;
        }
        r = read(fd, resp + len, cap - len);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    resp[len] = '\0';
    sscanf(resp, "HTTP/%*s %d", status);
    at = strstr(resp, "\r\n\r\n");
    out = strdup(at ? at + 4 : "");
    free(resp);
    return out;

fail:
    if (fd >= 0)
        close(fd);
    free(resp);
    return strdup("");
}
