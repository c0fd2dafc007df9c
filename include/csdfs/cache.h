/* SPDX-License-Identifier: MIT */
/*
 * A bounded cache of decoded chunks. A stored chunk is immutable, so an
 * entry is keyed by what identifies one stored version — inode, chunk
 * index, container offset and checksum — and never needs invalidation: a
 * rewritten chunk has a new key, and the old entry ages out (LRU).
 * Thread-safe (sharded locks); memory is bounded by the configured size.
 */
#ifndef CSDFS_CACHE_H
#define CSDFS_CACHE_H

#include <stddef.h>
#include <stdint.h>

struct csdfs_cache;

struct csdfs_cache_key {
	uint64_t ino, idx, pa;
	uint32_t csum;
};

/* @bytes 0 disables the cache (every call is a miss / no-op).
 * @return NULL only on allocation failure. */
struct csdfs_cache *csdfs_cache_new(size_t bytes);
void csdfs_cache_free(struct csdfs_cache *c);

/* Copy the cached @len decoded bytes of @key into @dst.
 * @return 0 on a hit, -ENOENT on a miss. */
int csdfs_cache_get(struct csdfs_cache *c, const struct csdfs_cache_key *key,
		    void *dst, size_t len);

/* Insert the @used bytes at @src followed by zeros up to @len (evicting
 * the least recently used entries). */
void csdfs_cache_put(struct csdfs_cache *c, const struct csdfs_cache_key *key,
		     const void *src, size_t used, size_t len);

/* Change the bound (not below one entry per shard in effect; evicts at
 * once). No effect on a cache created disabled. */
void csdfs_cache_set_budget(struct csdfs_cache *c, size_t bytes);

/* The smallest cache (csdfs_cache_new's @bytes) that can keep an entry of
 * @len bytes: each of its shards holds an equal share of the bytes. */
size_t csdfs_cache_min_bytes(size_t len);

/* Counters for the status page: lookups answered and not since creation,
 * decoded bytes held, and the bound in effect (0: disabled). */
void csdfs_cache_stats(struct csdfs_cache *c, uint64_t *hits, uint64_t *misses,
		       size_t *bytes, size_t *budget);

#endif
