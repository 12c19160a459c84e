/* SPDX-License-Identifier: Apache-2.0 */
/** Test peers: the Python servers C tests talk to (tests/net/http_server.py,
 * tests/receiver/receiver.py, tests/k8s/fake_apiserver.py) run as child
 * processes, and small blocking HTTP requests to their control ports on
 * 127.0.0.1. Test-process only; every wait has a deadline. */
#ifndef PROFLET_TEST_PEER_H
#define PROFLET_TEST_PEER_H

#include <sys/types.h>

/** A running child process. */
struct test_peer {
    pid_t pid;
    char line[512]; /**< the first line it printed on stdout, without the newline */
};

/** Starts `argv` (argv[0] an absolute path, NULL-terminated) with its
 * stdout on a pipe and waits (at most 10 s) for the first line it prints,
 * which announces its ports. The child is killed if the test process dies
 * first (a failed assertion, a sanitizer's exit): left running, it would
 * hold the test runner's stderr open. 0, or -1 (nothing left running). */
int test_peer_start(struct test_peer *p, const char *const *argv);
/** Stops it (SIGTERM, then SIGKILL after 5 s) and reaps it; a peer that
 * is not running is fine. */
void test_peer_stop(struct test_peer *p);

/** A blocking HTTP/1.0 request to 127.0.0.1:`port` (10 s receive timeout),
 * `body` sent as JSON when not NULL. Returns the response body (caller
 * frees) and the status in `*status` (0 if there was no answer). */
char *test_peer_http(int port, const char *method, const char *path, const char *body, int *status);

#endif
