/* SPDX-License-Identifier: Apache-2.0 */
/* Rendezvous (highest-random-weight) hashing: which peer owns a target
 * (docs/design.md "Modules").
 *
 * Pure, any thread. Each (peer, target) pair gets a weight, XXH64 of the
 * target's identity (8 bytes, little-endian) seeded with the hash of the
 * peer's name; the peer with the highest weight owns the target, a tie
 * going to the smaller name. Every replica computes the same owner from
 * the same peer list, and when a peer leaves only its own targets move
 * (each to the peer with the next highest weight); when one joins it takes
 * from each peer the targets it now outweighs, about 1/N of them. */
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "cluster/cluster.h"

uint64_t cluster_peer_hash(const char *name)
{
    return XXH64(name, strlen(name), 0);
}

uint64_t cluster_weight(uint64_t peer_hash, uint64_t id)
{
    unsigned char b[8];

    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(id >> (8 * i));
    return XXH64(b, sizeof(b), peer_hash);
}

long cluster_owner_of(const char *const *peers, const uint64_t *hashes, size_t n, uint64_t id)
{
    long best = -1;
    uint64_t bw = 0;

    for (size_t i = 0; i < n; i++) {
        uint64_t w = cluster_weight(hashes[i], id);

        if (best < 0 || w > bw || (w == bw && strcmp(peers[i], peers[best]) < 0)) {
            best = (long)i;
            bw = w;
        }
    }
    return best;
}
