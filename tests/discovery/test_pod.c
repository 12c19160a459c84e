/* SPDX-License-Identifier: Apache-2.0 */
/* Golden tests of the pod -> targets builder: every file in data/pods holds a
 * pod (plus optional node/namespace objects) and the targets expected,
 * written by hand from Prometheus' pod role (docs/design.md). Also the
 * sanitiser the builder uses (relabel's) on bytes that JSON cannot carry. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "discovery/internal.h"
#include "relabel/relabel.h"
#include "tests/harness/test.h"

static json_object *get(json_object *o, const char *k)
{
    json_object *v = NULL;

    return json_object_object_get_ex(o, k, &v) ? v : NULL;
}

static void check_labels(const char *file, size_t i, const struct labels *got, json_object *want)
{
    size_t n = 0;

    json_object_object_foreach(want, k, v)
    {
        const char *g = labels_get(got, k);

        n++;
        if (!g || strcmp(g, json_object_get_string(v)) != 0) {
            char *s = labels_to_string(got);

            test__fail(__FILE__, __LINE__, "%s target %zu: %s: want \"%s\" got \"%s\" in %s", file,
                       i, k, json_object_get_string(v), g ? g : "(absent)", s);
        }
    }
    if (n != got->n) {
        char *s = labels_to_string(got);

        test__fail(__FILE__, __LINE__, "%s target %zu: %zu labels, want %zu: %s", file, i, got->n,
                   n, s);
    }
}

static int run_case(const char *path, const char *name)
{
    json_object *c = json_object_from_file(path), *want, *jn, *jns, *an;
    struct disc__k8s_meta node, ns;
    bool have_node = false, have_ns = false, attach_node;
    struct labels *t = NULL;
    size_t n = 0;
    char src[256];

    ASSERT_NOT_NULL(c);
    want = get(c, "targets");
    jn = get(c, "node");
    jns = get(c, "namespace");
    an = get(c, "attach_node");
    attach_node = an && json_object_get_boolean(an);
    if (jn) {
        ASSERT_EQ(disc__k8s_meta_build(jn, "node", &node), 0);
        have_node = true;
    }
    if (jns) {
        ASSERT_EQ(disc__k8s_meta_build(jns, "namespace", &ns), 0);
        have_ns = true;
    }
    ASSERT_EQ(disc__k8s_pod_targets(get(c, "pod"), have_node ? &node : NULL, attach_node,
                                    have_ns ? &ns : NULL, false, src, sizeof(src), &t, &n),
              0);
    ASSERT_STR_EQ(src, json_object_get_string(get(c, "source")));
    if (n != json_object_array_length(want))
        test__fail(__FILE__, __LINE__, "%s: %zu targets, want %zu", name, n,
                   json_object_array_length(want));
    for (size_t i = 0; i < n; i++)
        check_labels(name, i, &t[i], json_object_array_get_idx(want, i));
    disc__targets_free(t, n);
    if (have_node)
        labels_done(&node.labels);
    if (have_ns)
        labels_done(&ns.labels);
    json_object_put(c);
    return 0;
}

TEST(pod_golden_files)
{
    char dir[4096];
    DIR *d;
    struct dirent *e;
    int cases = 0;

    snprintf(dir, sizeof(dir), "%s", test_data_path("pods"));
    d = opendir(dir);
    ASSERT_NOT_NULL(d);
    while ((e = readdir(d)) != NULL) {
        char path[8192];

        if (!strstr(e->d_name, ".json"))
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        run_case(path, e->d_name);
        cases++;
    }
    closedir(d);
    ASSERT_GE(cases, 6);
}

TEST(sanitize_invalid_utf8)
{
    struct {
        const char *in;
        size_t n;
        const char *out;
    } cases[] = {
        { "app.kubernetes.io/name", 22, "app_kubernetes_io_name" },
        { "\xc3\xa9", 2, "_" }, /* é: one rune, one underscore */
        { "a\xff"
          "b",
          3, "a_b" },                     /* invalid byte */
        { "\xe2\x82", 2, "__" },          /* truncated 3-byte sequence: two bytes */
        { "\xed\xa0\x80", 3, "___" },     /* surrogate: invalid, byte by byte */
        { "\xc0\xaf", 2, "__" },          /* overlong */
        { "\xf0\x9f\x98\x80x", 5, "_x" }, /* 4-byte rune */
        { "", 0, "" },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *s = relabel_sanitize_label_name(cases[i].in, cases[i].n);

        ASSERT_STR_EQ(s, cases[i].out);
        free(s);
    }
    ASSERT_TRUE(relabel_valid_utf8("\xc3\xa9", 2));
    ASSERT_FALSE(relabel_valid_utf8("\xed\xa0\x80", 3));
    ASSERT_FALSE(relabel_valid_utf8("\xe2\x82", 2));
}

TEST(pod_not_an_object)
{
    struct labels *t = (struct labels *)1;
    size_t n = 5;
    char src[64];
    json_object *o = json_tokener_parse("[1,2]");

    ASSERT_LT(disc__k8s_pod_targets(o, NULL, false, NULL, false, src, sizeof(src), &t, &n), 0);
    ASSERT_NULL(t);
    ASSERT_EQ(n, 0);
    json_object_put(o);
}

/* Clustering's own watch (and only it) marks a pod being deleted; the
 * labels of a scrape job's targets stay Prometheus' own. */
TEST(pod_being_deleted_is_marked_only_when_asked)
{
    json_object *o =
        json_tokener_parse("{\"metadata\": {\"name\": \"p\", \"namespace\": \"ns\", \"uid\": \"u\","
                           " \"deletionTimestamp\": \"2026-11-27T03:00:00Z\"},"
                           " \"spec\": {\"containers\": [{\"name\": \"c\"}]},"
                           " \"status\": {\"podIP\": \"127.0.0.9\", \"phase\": \"Running\"}}");
    struct labels *t = NULL;
    size_t n = 0;
    char src[64];

    ASSERT_NOT_NULL(o);
    for (int mark = 0; mark < 2; mark++) {
        ASSERT_EQ(disc__k8s_pod_targets(o, NULL, false, NULL, mark, src, sizeof(src), &t, &n), 0);
        ASSERT_EQ(n, 1);
        if (mark)
            ASSERT_STR_EQ(labels_get(&t[0], DISC_K8S_TERMINATING_LABEL), "true");
        else
            ASSERT_NULL(labels_get(&t[0], DISC_K8S_TERMINATING_LABEL));
        ASSERT_STR_EQ(labels_get(&t[0], "__meta_kubernetes_pod_name"), "p");
        for (size_t i = 0; i < n; i++)
            labels_done(&t[i]);
        free(t);
        t = NULL;
    }
    json_object_object_add(
        o, "metadata",
        json_tokener_parse(
            "{\"name\": \"p\", \"namespace\": \"ns\", \"deletionTimestamp\": null}"));
    ASSERT_EQ(disc__k8s_pod_targets(o, NULL, false, NULL, true, src, sizeof(src), &t, &n), 0);
    ASSERT_EQ(n, 1);
    ASSERT_NULL(labels_get(&t[0], DISC_K8S_TERMINATING_LABEL)); /* null: not being deleted */
    labels_done(&t[0]);
    free(t);
    json_object_put(o);
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
