/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers for the tests/net suites (see net_test.h). Test-process only; the
 * child server is the harness's test peer, always reaped. */
#include "net_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int pyserver_start(struct pyserver *ps, const char *const *args)
{
    const char *script = getenv("NET_TEST_SERVER");
    const char *argv[16];
    int n = 0;

    ps->port = -1;
    ps->peer.pid = -1;
    if (!script) {
        fprintf(stderr, "NET_TEST_SERVER is not set\n");
        return -1;
    }
    argv[n++] = "/usr/bin/python3";
    argv[n++] = script;
    for (int i = 0; args && args[i] && n < 15; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    if (test_peer_start(&ps->peer, argv) < 0)
        return -1;
    if (sscanf(ps->peer.line, "PORT %d", &ps->port) != 1) {
        fprintf(stderr, "test server did not start: \"%s\"\n", ps->peer.line);
        pyserver_stop(ps);
        return -1;
    }
    return 0;
}

void pyserver_stop(struct pyserver *ps)
{
    test_peer_stop(&ps->peer);
}

int make_certs(char *dir, size_t dirlen)
{
    char tmpl[] = "/tmp/proflet-net-XXXXXX";
    char cmd[4096];

    if (!mkdtemp(tmpl))
        return -1;
    snprintf(dir, dirlen, "%s", tmpl);
    snprintf(cmd, sizeof(cmd),
             "set -e; cd '%s'; exec >log 2>&1;"
             "K='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes';"
             "openssl req -x509 $K -keyout ca.key -out ca.pem -days 2 -subj /CN=proflet-test-ca"
             " -addext basicConstraints=critical,CA:TRUE"
             " -addext keyUsage=critical,keyCertSign,cRLSign;"
             "openssl req $K -keyout srv.key -out srv.csr -subj /CN=test.example;"
             "printf 'subjectAltName=DNS:test.example,DNS:localhost,IP:127.0.0.1\\n"
             "extendedKeyUsage=serverAuth\\n' > srv.ext;"
             "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial"
             " -out srv.pem -days 2 -extfile srv.ext;"
             "openssl req $K -keyout cli.key -out cli.csr -subj /CN=proflet-client;"
             "printf 'extendedKeyUsage=clientAuth\\n' > cli.ext;"
             "openssl x509 -req -in cli.csr -CA ca.pem -CAkey ca.key -CAcreateserial"
             " -out cli.pem -days 2 -extfile cli.ext",
             dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "openssl failed, see %s/log\n", dir);
        return -1;
    }
    return 0;
}

void remove_dir(const char *dir)
{
    char cmd[4200];

    if (!dir[0] || strncmp(dir, "/tmp/proflet-net-", 17) != 0)
        return;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

int unused_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (port < 0 && fd >= 0)
        close(fd);
    return port; /* fd stays open: it holds the port (see net_test.h) */
}
