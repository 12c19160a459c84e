/* SPDX-License-Identifier: Apache-2.0 */
/* `clustering:` as the program's schema loads it: both key spellings, the
 * kubernetes block written as one mapping (loaded through discovery's own
 * kubernetes-sd schema and checks), and every refusal with its position. */
#include <string.h>

#include "agent/config.h"
#include "test.h"

static struct conf_doc *load(const char *yaml, char *err, size_t errlen)
{
    struct conf_doc *doc = NULL;

    if (agent_config_load_string(yaml, strlen(yaml), "t.yaml", 0, &doc, err, errlen) < 0)
        return NULL;
    return doc;
}

static void refused(const char *yaml, const char *want)
{
    char err[512] = "";
    struct conf_doc *doc = load(yaml, err, sizeof(err));

    if (doc)
        conf_doc_unref(doc);
    ASSERT_TRUE(doc == NULL);
    if (!strstr(err, want))
        test__fail(__FILE__, __LINE__, "error \"%s\" lacks \"%s\"", err, want);
}

TEST(off_by_default)
{
    char err[512];
    struct conf_doc *doc = load("scrape-configs: []\n", err, sizeof(err));

    ASSERT_TRUE(doc != NULL);
    ASSERT_FALSE(agent_config(doc)->cluster.enabled);
    conf_doc_unref(doc);
}

TEST(static_peers)
{
    char err[512];
    struct conf_doc *doc =
        load("clustering:\n  enabled: true\n  self: b\n  peers: [a, b]\n", err, sizeof(err));
    const struct cluster_cfg *c;

    ASSERT_TRUE(doc != NULL);
    c = &agent_config(doc)->cluster;
    ASSERT_TRUE(c->enabled);
    ASSERT_STR_EQ(c->self, "b");
    ASSERT_EQ(c->n_peers, 2);
    ASSERT_STR_EQ(c->peers[1], "b");
    ASSERT_EQ(c->n_kubernetes, 0);
    conf_doc_unref(doc);
}

TEST(kubernetes_block_in_both_spellings)
{
    static const char *const docs[] = {
        "clustering:\n"
        "  enabled: true\n"
        "  kubernetes:\n"
        "    api-server: http://127.0.0.1:6443\n"
        "    namespaces: {names: [monitoring]}\n"
        "    selectors: [{role: pod, label: \"app.kubernetes.io/name=proflet\"}]\n",
        "clustering:\n"
        "  enabled: true\n"
        "  kubernetes:\n"
        "    api_server: http://127.0.0.1:6443\n"
        "    namespaces: {names: [monitoring]}\n"
        "    selectors: [{role: pod, label: \"app.kubernetes.io/name=proflet\"}]\n",
    };

    for (size_t i = 0; i < 2; i++) {
        char err[512];
        struct conf_doc *doc = load(docs[i], err, sizeof(err));
        const struct cluster_cfg *c;

        if (!doc)
            test__fail(__FILE__, __LINE__, "%s", err);
        c = &agent_config(doc)->cluster;
        ASSERT_EQ(c->n_kubernetes, 1);
        ASSERT_STR_EQ(c->kubernetes[0].api_server, "http://127.0.0.1:6443");
        ASSERT_STR_EQ(c->kubernetes[0].role, "pod");
        ASSERT_STR_EQ(c->kubernetes[0].namespaces[0], "monitoring");
        ASSERT_STR_EQ(c->kubernetes[0].selectors[0].label, "app.kubernetes.io/name=proflet");
        ASSERT_TRUE(c->self == NULL); /* POD_NAME at run time */
        conf_doc_unref(doc);
    }
}

TEST(refusals)
{
    refused("clustering:\n  enabled: true\n", "t.yaml:2:3: clustering needs its peers");
    refused("clustering:\n  enabled: true\n  peers: [a]\n  kubernetes: {api-server: "
            "http://127.0.0.1:1}\n",
            "either peers");
    refused("clustering:\n  enabled: true\n  self: c\n  peers: [a, b]\n",
            "t.yaml:3:9: clustering.self \"c\" is not one of the peers");
    refused("clustering:\n  enabled: true\n  peers: [a, a]\n", "peer \"a\" listed twice");
    refused("clustering:\n  enabled: true\n  peers: []\n", "cannot be empty");
    refused("clustering:\n  enabled: yes-please\n", "true or false");
    refused("clustering:\n  enabled: true\n  gossip: true\n", "unknown key \"gossip\"");
    /* discovery's own checks run on the kubernetes block */
    refused("clustering:\n  enabled: true\n  kubernetes:\n    selectors: [{role: pod, label: "
            "\"=x\"}]\n",
            "invalid label selector");
}

int main(int argc, char **argv)
{
    return test_main(argc, argv);
}
