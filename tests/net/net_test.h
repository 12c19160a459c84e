/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the tests/net suites: tests/net/http_server.py as a
 * test peer, throw-away TLS certificates, a port nothing answers on. Loop
 * runs are the harness's (test_loop.h). */
#ifndef PROFLET_TESTS_NET_TEST_H
#define PROFLET_TESTS_NET_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "test_loop.h"
#include "test_peer.h"

/** A running tests/net/http_server.py. */
struct pyserver {
    struct test_peer peer;
    int port;
};

/** Starts the Python test server ($NET_TEST_SERVER) with extra arguments
 * (NULL-terminated list, may be NULL) and waits (at most 10 s) for its
 * port. 0 or -1. */
int pyserver_start(struct pyserver *ps, const char *const *args);
/** Stops it (SIGTERM, then SIGKILL after 5 s) and reaps it. */
void pyserver_stop(struct pyserver *ps);

/** Makes a CA and a server certificate (SAN test.example, localhost,
 * 127.0.0.1) and a client certificate in a fresh temporary directory,
 * whose path is written to dir. 0 or -1. */
int make_certs(char *dir, size_t dirlen);
/** Removes a directory made by make_certs. */
void remove_dir(const char *dir);

/** A TCP port on 127.0.0.1 that nothing listens on: bound and never
 * listened on, and kept so until the process exits, so that connections to
 * it are refused and no other process is given it meanwhile. */
int unused_port(void);

#endif
