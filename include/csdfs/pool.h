/* SPDX-License-Identifier: MIT */
/*
 * A small worker pool for data-parallel loops (compressing the chunks of
 * one large write on several cores). The calling thread works too, so a
 * pool of zero threads simply runs the loop inline.
 */
#ifndef CSDFS_POOL_H
#define CSDFS_POOL_H

#include <stddef.h>

struct csdfs_pool;

/* @threads extra workers (0 = none). @return NULL on failure. */
struct csdfs_pool *csdfs_pool_new(unsigned threads);
void csdfs_pool_free(struct csdfs_pool *p);

/*
 * csdfs_pool_run - call @fn(@ctx, i) for every i in [0, n), spread over the
 * pool's workers and the caller; returns when all calls have returned.
 * @return the first non-zero value an @fn returned (all i still run).
 * Thread-safe: several callers may run loops at once.
 */
int csdfs_pool_run(struct csdfs_pool *p, size_t n,
		   int (*fn)(void *ctx, size_t i), void *ctx);

#endif
