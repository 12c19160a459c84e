/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the tests/net suites: bounded loop runs, the Python test
 * server as a child process, throw-away TLS certificates. */
#ifndef PROFLET_TESTS_NET_TEST_H
#define PROFLET_TESTS_NET_TEST_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

/** A running tests/net/http_server.py. */
struct pyserver {
    pid_t pid;
    int port;
};

/** Starts the Python test server with extra arguments (NULL-terminated
 * list, may be NULL) and waits (at most 10 s) for its port. 0 or -1. */
int pyserver_start(struct pyserver *ps, const char *const *args);
/** Stops it (SIGTERM, then SIGKILL after 5 s) and reaps it. */
void pyserver_stop(struct pyserver *ps);

/** Runs `loop` until `*counter >= target` or `timeout_ms` passes, whichever
 * first; true if the counter got there. Never blocks past the deadline. */
bool run_until(uv_loop_t *loop, const int *counter, int target, uint64_t timeout_ms);
/** Runs `loop` for about `ms` milliseconds. */
void run_for(uv_loop_t *loop, uint64_t ms);
/** Runs `loop` until nothing is alive (all close callbacks done) or
 * `timeout_ms` passes; then returns uv_loop_close(). */
int finish_loop(uv_loop_t *loop, uint64_t timeout_ms);

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
