/* SPDX-License-Identifier: Apache-2.0 */
/* TLS for the status server's connections, through OpenSSL memory BIOs
 * (docs/design.md "HTTP server").
 *
 * Purpose. The socket stays libuv's; OpenSSL never touches it. Ciphertext
 * read from the socket goes into the session's read BIO (httpd__tls_feed);
 * the read pump (httpd__tls_read) decrypts what it holds, which also runs
 * the handshake. Answers are encrypted as they are queued
 * (httpd__tls_write); whatever OpenSSL put in the write BIO (records,
 * handshake messages, alerts, close_notify) is handed chunk by chunk to
 * the caller's sink by the write pump (httpd__tls_flush), and the sink
 * writes it to the socket. So nothing here blocks or waits for the
 * network, and server.c keeps one write path, counted against its
 * unsent-output cap, for both plain and TLS connections.
 *
 * Threading and ownership. Loop thread only. A session belongs to its
 * connection (server.c), which frees it when it closes; the SSL owns its
 * two BIOs. The context comes from the web config (web.c), which keeps it
 * for as long as a connection holds the config. */
#include <errno.h>
#include <stdlib.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "httpd/internal.h"

struct httpd__tls {
    SSL *ssl;
    BIO *rbio, *wbio; /* ciphertext in (from the socket) and out (to it) */
};

struct httpd__tls *httpd__tls_new(SSL_CTX *ctx)
{
    struct httpd__tls *t = calloc(1, sizeof(*t));

    if (!t)
        return NULL;
    t->ssl = SSL_new(ctx);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (!t->ssl || !t->rbio || !t->wbio) {
        BIO_free(t->rbio);
        BIO_free(t->wbio);
        SSL_free(t->ssl);
        free(t);
        return NULL;
    }
    SSL_set_bio(t->ssl, t->rbio, t->wbio); /* the SSL owns them now */
    SSL_set_accept_state(t->ssl);
    return t;
}

void httpd__tls_free(struct httpd__tls *t)
{
    if (!t)
        return;
    SSL_free(t->ssl); /* and its BIOs */
    free(t);
}

int httpd__tls_feed(struct httpd__tls *t, const char *p, size_t n)
{
    return BIO_write(t->rbio, p, (int)n) == (int)n ? 0 : -EIO;
}

int httpd__tls_read(struct httpd__tls *t, char *buf, size_t len)
{
    int n, e;

    ERR_clear_error();
    n = SSL_read(t->ssl, buf, (int)len);
    if (n > 0)
        return n;
    e = SSL_get_error(t->ssl, n);
    if (e == SSL_ERROR_WANT_READ)
        return HTTPD__TLS_WANT;
    if (e == SSL_ERROR_ZERO_RETURN)
        return HTTPD__TLS_CLOSED;
    return HTTPD__TLS_FAILED;
}

int httpd__tls_write(struct httpd__tls *t, const void *p, size_t n)
{
    return SSL_write(t->ssl, p, (int)n) <= 0 ? -EPROTO : 0;
}

void httpd__tls_shutdown(struct httpd__tls *t)
{
    SSL_shutdown(t->ssl);
}

int httpd__tls_flush(struct httpd__tls *t, int (*sink)(char *p, size_t n, void *ud), void *ud)
{
    size_t n;

    while ((n = BIO_ctrl_pending(t->wbio)) > 0) {
        char *p = malloc(n);
        int rc;

        if (!p || BIO_read(t->wbio, p, (int)n) != (int)n) {
            free(p);
            return -ENOMEM;
        }
        rc = sink(p, n, ud);
        if (rc < 0)
            return rc;
    }
    return 0;
}
