/* SPDX-License-Identifier: Apache-2.0 */
/* forward/ pure parts: label limits, PushRequest encoding, URLs, response
 * classification (what is resent). The spool is in test_spool.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "forward/forward.h"
#include "forward/internal.h"
#include "net/net.h"
#include "push.pb-c.h"
#include "test.h"

static struct fwd_profile *mk(const char *svc, size_t len, int seed)
{
    struct labels ls = LABELS_INIT;
    uint8_t *d = malloc(len);

    for (size_t i = 0; i < len; i++)
        d[i] = (uint8_t)(i ^ (size_t)seed);
    labels_set(&ls, "service_name", svc);
    labels_set(&ls, "__name__", "memory");
    labels_set(&ls, "env", "x");
    return fwd_profile_new(&ls, d, len, 11, 22);
}

TEST(uuid_v4_format_and_unique)
{
    char a[37], b[37];

    fwd__uuid(a);
    fwd__uuid(b);
    ASSERT_EQ(strlen(a), 36);
    ASSERT_EQ(a[8], '-');
    ASSERT_EQ(a[14], '4');
    ASSERT(strchr("89ab", a[19]) != NULL);
    ASSERT(strcmp(a, b) != 0);
}

TEST(labels_validated_against_server_limits)
{
    struct labels ls = LABELS_INIT;
    char err[256], name[16], big[2100];

    labels_set(&ls, "service_name", "a");
    ASSERT_EQ(fwd__labels_validate(&ls, err, sizeof(err)), -EINVAL); /* no __name__ */
    labels_set(&ls, "__name__", "cpu");
    ASSERT_EQ(fwd__labels_validate(&ls, err, sizeof(err)), 0);
    memset(big, 'v', sizeof(big) - 1);
    big[sizeof(big) - 1] = 0;
    labels_set(&ls, "long", big);
    ASSERT_EQ(fwd__labels_validate(&ls, err, sizeof(err)), -EINVAL);
    labels_del(&ls, "long");
    labels_set(&ls, "bad", "\xff\xfe");
    ASSERT_EQ(fwd__labels_validate(&ls, err, sizeof(err)), -EINVAL);
    ASSERT(strstr(err, "UTF-8") != NULL);
    labels_del(&ls, "bad");
    for (int i = 0; i < 28; i++) {
        snprintf(name, sizeof(name), "l%02d", i);
        labels_set(&ls, name, "v");
    }
    ASSERT_EQ(ls.n, 30);
    ASSERT_EQ(fwd__labels_validate(&ls, err, sizeof(err)), 0);
    labels_set(&ls, "one_more", "v");
    ASSERT_EQ(fwd__labels_validate(&ls, err, sizeof(err)), -EINVAL);
    labels_done(&ls);
    ASSERT(fwd__utf8_valid("h\xc3\xa9", 3));
    ASSERT(!fwd__utf8_valid("\xc0\xaf", 2));     /* overlong */
    ASSERT(!fwd__utf8_valid("\xed\xa0\x80", 3)); /* surrogate */
}

TEST(push_request_round_trips)
{
    struct fwd_profile *p[2] = { mk("a", 100, 1), mk("b", 50, 2) };
    struct conf_kv ext[2] = { { (char *)"cluster", (char *)"c1" },
                              { (char *)"env", (char *)"prod" } };
    uint8_t *body;
    size_t len;
    Push__V1__PushRequest *req;
    struct labels merged[2] = { LABELS_INIT, LABELS_INIT };
    const struct labels *ls[2] = { &merged[0], &merged[1] };

    for (int i = 0; i < 2; i++)
        ASSERT_EQ(fwd__labels_merge(&merged[i], &p[i]->labels, ext, 2), 0);
    ASSERT_EQ(fwd__push_encode(p, ls, 2, PPROF_COMPRESS_BALANCED, &body, &len), 0);
    req = push__v1__push_request__unpack(NULL, len, body);
    ASSERT_NOT_NULL(req);
    ASSERT_EQ(req->n_series, 2);
    ASSERT_EQ(req->series[1]->n_samples, 1);
    ASSERT_STR_EQ(req->series[1]->samples[0]->id, p[1]->id);
    ASSERT_EQ(req->series[1]->samples[0]->raw_profile.len, 50);
    ASSERT_EQ(memcmp(req->series[1]->samples[0]->raw_profile.data, p[1]->data, 50), 0);
    /* sorted labels; the external env overrides the profile's */
    ASSERT_EQ(req->series[0]->n_labels, 4);
    ASSERT_STR_EQ(req->series[0]->labels[0]->name, "__name__");
    ASSERT_STR_EQ(req->series[0]->labels[1]->name, "cluster");
    ASSERT_STR_EQ(req->series[0]->labels[2]->name, "env");
    ASSERT_STR_EQ(req->series[0]->labels[2]->value, "prod");
    push__v1__push_request__free_unpacked(req, NULL);
    free(body);
    labels_done(&merged[0]);
    labels_done(&merged[1]);
    fwd_profile_unref(p[0]);
    fwd_profile_unref(p[1]);
}

/* A delta written with one setting goes to an endpoint that asks for
 * another compressed again, the same bytes inside; one sent as it came is
 * sent unchanged whatever the endpoint asks. */
TEST(push_request_compresses_again_for_the_endpoint)
{
    static const enum pprof_compression wants[] = { PPROF_COMPRESS_NONE, PPROF_COMPRESS_FASTEST,
                                                    PPROF_COMPRESS_BALANCED,
                                                    PPROF_COMPRESS_SMALLEST };
    size_t raw_len = 200000;
    uint8_t *raw = malloc(raw_len), *gz;
    size_t gz_len;
    struct fwd_profile *p[2];
    struct labels merged[2] = { LABELS_INIT, LABELS_INIT };
    const struct labels *ls[2] = { &merged[0], &merged[1] };

    ASSERT_NOT_NULL(raw);
    for (size_t i = 0; i < raw_len; i++)
        raw[i] = (uint8_t)(i % 251 * (i / 4096 % 3) + i / 1000);
    for (int w = 0; w < 4; w++) {
        for (int i = 0; i < 2; i++) {
            struct labels l = LABELS_INIT;

            ASSERT_EQ(pprof_compress(raw, raw_len, PPROF_COMPRESS_FASTEST, &gz, &gz_len), 0);
            ASSERT_EQ(labels_set(&l, "__name__", i ? "b" : "a"), 0);
            p[i] = fwd_profile_new(&l, gz, gz_len, 1, 2);
            labels_done(&l);
            ASSERT_NOT_NULL(p[i]);
            ASSERT_EQ(labels_copy(&merged[i], &p[i]->labels), 0);
        }
        p[0]->compression = PPROF_COMPRESS_FASTEST; /* a delta */
        ASSERT_EQ(fwd__recompress_needed(p[0], wants[w]), wants[w] != PPROF_COMPRESS_FASTEST);
        ASSERT_FALSE(fwd__recompress_needed(p[1], wants[w])); /* as it came */

        uint8_t *body, *back;
        size_t len, back_len;
        Push__V1__PushRequest *req;

        ASSERT_EQ(fwd__push_encode(p, ls, 2, wants[w], &body, &len), 0);
        req = push__v1__push_request__unpack(NULL, len, body);
        ASSERT_NOT_NULL(req);
        const ProtobufCBinaryData *got0 = &req->series[0]->samples[0]->raw_profile;
        const ProtobufCBinaryData *got1 = &req->series[1]->samples[0]->raw_profile;

        ASSERT_EQ(got1->len, p[1]->len);
        ASSERT_EQ(memcmp(got1->data, p[1]->data, p[1]->len), 0);
        if (wants[w] == PPROF_COMPRESS_NONE) {
            ASSERT_EQ(got0->len, raw_len);
            ASSERT_EQ(memcmp(got0->data, raw, raw_len), 0);
        } else {
            ASSERT(got0->len > 2 && got0->data[0] == 0x1f && got0->data[1] == 0x8b);
            ASSERT_EQ(pprof_gunzip(got0->data, got0->len, raw_len, &back, &back_len), 0);
            ASSERT_EQ(back_len, raw_len);
            ASSERT_EQ(memcmp(back, raw, raw_len), 0);
            free(back);
            /* The smallest setting is smaller than the fastest one. */
            if (wants[w] == PPROF_COMPRESS_SMALLEST)
                ASSERT_LT(got0->len, p[0]->len);
        }
        push__v1__push_request__free_unpacked(req, NULL);
        free(body);
        for (int i = 0; i < 2; i++) {
            labels_done(&merged[i]);
            merged[i] = (struct labels)LABELS_INIT;
            fwd_profile_unref(p[i]);
        }
    }
    free(raw);
}

TEST(urls)
{
    char *u = fwd__push_url("https://h/profile/");
    struct labels ls = LABELS_INIT;

    ASSERT_STR_EQ(u, "https://h/profile/push.v1.PusherService/Push");
    free(u);
    u = fwd__push_url("http://h:4040");
    ASSERT_STR_EQ(u, "http://h:4040/push.v1.PusherService/Push");
    free(u);
    labels_set(&ls, "service_name", "my app");
    labels_set(&ls, "__name__", "process_cpu");
    labels_set(&ls, "env", "a,b");
    labels_set(&ls, "pyroscope_spy", "gospy");
    u = fwd__ingest_url("http://h/", &ls, 1700000000000000000LL, 1700000010000000000LL);
    ASSERT_STR_EQ(u, "http://h/ingest?name=my_app%7Benv%3Da_b%7D&from=1700000000&until="
                     "1700000010&format=pprof&spyName=gospy");
    free(u);
    labels_done(&ls);
}

TEST(classify_outcomes)
{
    const char *ids[3] = { "11111111-1111-4111-8111-111111111111",
                           "22222222-2222-4222-8222-222222222222",
                           "33333333-3333-4333-8333-333333333333" };
    uint8_t st[3];
    char msg[256];
    const char *partial = "{\"code\":\"unavailable\",\"message\":\"series 1 (id "
                          "22222222-2222-4222-8222-222222222222): ingester down\"}";
    const char *bad = "{\"code\":\"invalid_argument\",\"message\":\"series 2 (id "
                      "33333333-3333-4333-8333-333333333333): invalid labels\"}";
    const char *big = "{\"code\":\"resource_exhausted\",\"message\":\"message size 9 is "
                      "larger than configured max 5\"}";
    const char *rl = "{\"code\":\"resource_exhausted\",\"message\":\"rate limit\"}";

    ASSERT_EQ(fwd__classify(0, 200, "", 0, ids, 3, st, msg, sizeof(msg)), FWD_V_OK);
    ASSERT_EQ(fwd__classify(NET_ECONNECT, 0, NULL, 0, ids, 3, st, msg, sizeof(msg)),
              FWD_V_UNREACHED);
    ASSERT_EQ(fwd__classify(NET_ETIMEDOUT, 0, NULL, 0, ids, 3, st, msg, sizeof(msg)),
              FWD_V_AMBIGUOUS);
    ASSERT_EQ(fwd__classify(NET_EIO, 0, NULL, 0, ids, 3, st, msg, sizeof(msg)), FWD_V_AMBIGUOUS);
    ASSERT_EQ(fwd__classify(0, 503, partial, strlen(partial), ids, 3, st, msg, sizeof(msg)),
              FWD_V_PARTIAL);
    ASSERT_EQ(st[0], FWD_P_OK);
    ASSERT_EQ(st[1], FWD_P_RETRY);
    ASSERT_EQ(st[2], FWD_P_OK);
    ASSERT_EQ(fwd__classify(0, 400, bad, strlen(bad), ids, 3, st, msg, sizeof(msg)), FWD_V_PARTIAL);
    ASSERT_EQ(st[2], FWD_P_DROP);
    ASSERT_EQ(st[0], FWD_P_OK);
    ASSERT_EQ(fwd__classify(0, 429, big, strlen(big), ids, 3, st, msg, sizeof(msg)),
              FWD_V_TOO_LARGE);
    ASSERT_EQ(fwd__classify(0, 429, rl, strlen(rl), ids, 3, st, msg, sizeof(msg)), FWD_V_RETRY);
    ASSERT_EQ(fwd__classify(0, 408, "", 0, ids, 3, st, msg, sizeof(msg)), FWD_V_RETRY);
    ASSERT_EQ(fwd__classify(0, 503, "<html>", 6, ids, 3, st, msg, sizeof(msg)), FWD_V_UNREACHED);
    ASSERT_EQ(fwd__classify(0, 504, "", 0, ids, 3, st, msg, sizeof(msg)), FWD_V_AMBIGUOUS);
    ASSERT_EQ(fwd__classify(0, 500, rl, strlen(rl), ids, 3, st, msg, sizeof(msg)), FWD_V_AMBIGUOUS);
    ASSERT_EQ(fwd__classify(0, 400, "{\"code\":\"invalid_argument\",\"message\":\"x\"}", 42, ids, 3,
                            st, msg, sizeof(msg)),
              FWD_V_SPLIT);
    /* 401/404/501: the endpoint is wrong, not a profile: drop all, no retry */
    ASSERT_EQ(fwd__classify(0, 401, "", 0, ids, 3, st, msg, sizeof(msg)), FWD_V_PARTIAL);
    ASSERT_EQ(st[0], FWD_P_DROP);
    ASSERT_EQ(st[2], FWD_P_DROP);
    ASSERT_EQ(fwd__classify(0, 501, "", 0, ids, 3, st, msg, sizeof(msg)), FWD_V_PARTIAL);
    /* A redirect that was not followed: a configuration error, retried
     * (spooled), never a reason to drop. */
    for (long code = 300; code < 400; code++)
        ASSERT_EQ(fwd__classify(0, code, "", 0, ids, 3, st, msg, sizeof(msg)), FWD_V_RETRY);
    ASSERT(strstr(msg, "redirect") != NULL);
    ASSERT(fwd__status_retryable(503));
    ASSERT(!fwd__status_retryable(501));
    ASSERT(!fwd__status_retryable(404));
    ASSERT(fwd__status_retryable(408));
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
