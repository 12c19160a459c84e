/* SPDX-License-Identifier: Apache-2.0 */
/* Test helper: runs tests/k8s/fake_apiserver.py as a test peer (see
 * tests/harness/test_peer.h) and talks to its control port. */
#ifndef PROFLET_TESTS_DISCOVERY_FAKE_H
#define PROFLET_TESTS_DISCOVERY_FAKE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/harness/test.h"
#include "tests/harness/test_peer.h"

struct fake {
    struct test_peer peer;
    int api_port;
    int ctl_port;
    char dir[64];
    char url[64];
};

/* The server of the running test (a copy: the test's struct fake may be
 * gone): stopped if a failed assertion skipped fake_stop(), and at exit. */
static struct test_peer fake_current = { .pid = -1 };

static inline void fake_stop_current(void)
{
    test_peer_stop(&fake_current);
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
    const char *argv[12];
    int a = 0;

    fake_stop_current();
    atexit(fake_stop_current);
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
        argv[a++] = extra1;
    if (extra2)
        argv[a++] = extra2;
    argv[a] = NULL;
    ASSERT_EQ(test_peer_start(&f->peer, argv), 0);
    fake_current = f->peer;
    ASSERT_EQ(sscanf(f->peer.line, "%d %d", &f->api_port, &f->ctl_port), 2);
    snprintf(f->url, sizeof(f->url), "http://127.0.0.1:%d", f->api_port);
}

static inline void fake_stop(struct fake *f)
{
    char cmd[128];

    if (fake_current.pid == f->peer.pid)
        fake_current.pid = -1;
    test_peer_stop(&f->peer);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cleanup of %s failed\n", f->dir);
}

/* A blocking HTTP request to the control port. Returns the malloc'd body
 * (caller frees) and the status in *status. */
static inline char *fake_http(const struct fake *f, const char *method, const char *path,
                              const char *body, int *status)
{
    return test_peer_http(f->ctl_port, method, path, body, status);
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
