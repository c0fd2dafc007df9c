/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for cache.c (decoded-chunk cache) and pool.c (worker pool):
 * hits return exactly what was put, keys differ by every field, the byte
 * budget is never exceeded and evicts the least recently used, an entry
 * recycled by a full cache holds only its new key's bytes, a zero budget
 * disables the cache; the pool runs every index exactly once from
 * many callers at once and reports the first error.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "csdfs/cache.h"
#include "csdfs/pool.h"

#define CS 16384

START_TEST(test_hit_miss)
{
	struct csdfs_cache *c = csdfs_cache_new(1 << 20);
	struct csdfs_cache_key k = { 7, 3, 65536, 0xabcd };
	char in[CS], out[CS];

	memset(in, 'x', 100);
	ck_assert_int_eq(csdfs_cache_get(c, &k, out, CS), -ENOENT);
	csdfs_cache_put(c, &k, in, 100, CS);
	memset(out, 1, CS);
	ck_assert_int_eq(csdfs_cache_get(c, &k, out, CS), 0);
	ck_assert_int_eq(memcmp(out, in, 100), 0);
	for (int i = 100; i < CS; i++)
		ck_assert_int_eq(out[i], 0);  /* tail zero-filled */
	/* Every key field matters: a different stored version is a miss. */
	{
		struct csdfs_cache_key v[4] = { k, k, k, k };

		v[0].ino++;
		v[1].idx++;
		v[2].pa += 4096;
		v[3].csum ^= 1;
		for (int i = 0; i < 4; i++)
			ck_assert_int_eq(csdfs_cache_get(c, &v[i], out, CS), -ENOENT);
	}
	/* A different length is a miss, never a short copy. */
	ck_assert_int_eq(csdfs_cache_get(c, &k, out, 4096), -ENOENT);
	csdfs_cache_free(c);
}
END_TEST

START_TEST(test_budget_lru)
{
	size_t budget = 64 * CS * 16;  /* 64 entries per shard */
	struct csdfs_cache *c = csdfs_cache_new(budget);
	char buf[CS];
	uint64_t hits, misses;
	size_t bytes, cap;

	memset(buf, 7, sizeof(buf));
	for (uint64_t i = 0; i < 5000; i++) {
		struct csdfs_cache_key k = { 1, i, i * 4096, (uint32_t)i };

		csdfs_cache_put(c, &k, buf, CS, CS);
		csdfs_cache_stats(c, &hits, &misses, &bytes, &cap);
		ck_assert_uint_le(bytes, budget);
	}
	/* The most recent entry is there; the oldest are gone. */
	{
		struct csdfs_cache_key last = { 1, 4999, 4999 * 4096, 4999 };
		struct csdfs_cache_key first = { 1, 0, 0, 0 };

		ck_assert_int_eq(csdfs_cache_get(c, &last, buf, CS), 0);
		ck_assert_int_eq(csdfs_cache_get(c, &first, buf, CS), -ENOENT);
	}
	csdfs_cache_free(c);
}
END_TEST

/* A full cache puts each new chunk into the entry it evicts. Every key gets
 * its own bytes and used length, and the sizes alternate so that some
 * insertions recycle and some cannot: what a hit returns must always be
 * exactly what was put under that key, never a recycled entry's old
 * bytes or a stale tail. */
START_TEST(test_full_recycles)
{
	size_t budget = 8 * CS * 16;  /* 8 entries per shard */
	struct csdfs_cache *c = csdfs_cache_new(budget);
	char in[CS], out[CS];
	uint64_t hits, misses;
	size_t bytes, cap, found = 0;

	for (uint64_t i = 0; i < 3000; i++) {
		struct csdfs_cache_key k = { 3, i, i * 4096, (uint32_t)(i * 7) };
		size_t len = i % 5 == 4 ? CS / 2 : CS;
		size_t used = 1 + (i * 131) % len;

		memset(in, (int)(i % 251) + 1, used);
		csdfs_cache_put(c, &k, in, used, len);
		csdfs_cache_stats(c, &hits, &misses, &bytes, &cap);
		ck_assert_uint_le(bytes, budget);
	}
	for (uint64_t i = 0; i < 3000; i++) {
		struct csdfs_cache_key k = { 3, i, i * 4096, (uint32_t)(i * 7) };
		size_t len = i % 5 == 4 ? CS / 2 : CS;
		size_t used = 1 + (i * 131) % len;

		memset(out, 0x77, sizeof(out));
		if (csdfs_cache_get(c, &k, out, len))
			continue;
		found++;
		for (size_t b = 0; b < len; b++)
			ck_assert_int_eq(out[b], b < used ? (char)((i % 251) + 1) : 0);
	}
	/* The newest entries of every shard are still there. */
	ck_assert_uint_ge(found, 16 * 4);
	csdfs_cache_free(c);
}
END_TEST

START_TEST(test_set_budget)
{
	size_t budget = 64 * CS * 16;
	struct csdfs_cache *c = csdfs_cache_new(budget);
	char buf[CS];
	uint64_t hits, misses;
	size_t bytes, cap;

	memset(buf, 9, sizeof(buf));
	for (uint64_t i = 0; i < 2000; i++) {
		struct csdfs_cache_key k = { 2, i, i * 4096, (uint32_t)i };

		csdfs_cache_put(c, &k, buf, CS, CS);
	}
	csdfs_cache_stats(c, &hits, &misses, &bytes, &cap);
	ck_assert_uint_gt(bytes, budget / 2);
	ck_assert_uint_eq(cap, budget);
	/* Shrinking evicts at once, oldest first, and bounds later puts. */
	csdfs_cache_set_budget(c, budget / 4);
	csdfs_cache_stats(c, &hits, &misses, &bytes, &cap);
	ck_assert_uint_le(bytes, budget / 4);
	ck_assert_uint_eq(cap, budget / 4);
	{
		struct csdfs_cache_key last = { 2, 1999, 1999 * 4096, 1999 };
		struct csdfs_cache_key first = { 2, 0, 0, 0 };

		ck_assert_int_eq(csdfs_cache_get(c, &last, buf, CS), 0);
		ck_assert_int_eq(csdfs_cache_get(c, &first, buf, CS), -ENOENT);
	}
	for (uint64_t i = 2000; i < 3000; i++) {
		struct csdfs_cache_key k = { 2, i, i * 4096, (uint32_t)i };

		csdfs_cache_put(c, &k, buf, CS, CS);
		csdfs_cache_stats(c, &hits, &misses, &bytes, &cap);
		ck_assert_uint_le(bytes, budget / 4);
	}
	/* Growing again lets it fill up to the new bound. */
	csdfs_cache_set_budget(c, budget);
	for (uint64_t i = 3000; i < 5000; i++) {
		struct csdfs_cache_key k = { 2, i, i * 4096, (uint32_t)i };

		csdfs_cache_put(c, &k, buf, CS, CS);
	}
	csdfs_cache_stats(c, &hits, &misses, &bytes, &cap);
	ck_assert_uint_gt(bytes, budget / 2);
	ck_assert_uint_le(bytes, budget);
	csdfs_cache_free(c);
}
END_TEST

START_TEST(test_disabled)
{
	struct csdfs_cache *c = csdfs_cache_new(0);
	struct csdfs_cache_key k = { 1, 1, 1, 1 };
	char buf[CS] = { 1 };
	uint64_t hits, misses;
	size_t bytes, cap;

	ck_assert_ptr_nonnull(c);
	csdfs_cache_put(c, &k, buf, CS, CS);
	ck_assert_int_eq(csdfs_cache_get(c, &k, buf, CS), -ENOENT);
	/* Disabled stays disabled, and says so with a budget of 0. */
	csdfs_cache_set_budget(c, 1u << 20);
	csdfs_cache_put(c, &k, buf, CS, CS);
	ck_assert_int_eq(csdfs_cache_get(c, &k, buf, CS), -ENOENT);
	csdfs_cache_stats(c, &hits, &misses, &bytes, &cap);
	ck_assert_uint_eq(hits + misses + bytes + cap, 0);
	csdfs_cache_free(c);
	ck_assert_int_eq(csdfs_cache_get(NULL, &k, buf, CS), -ENOENT);
}
END_TEST

/* csdfs_cache_min_bytes is exact: one byte less and an entry of that size
 * is never kept. */
START_TEST(test_min_bytes)
{
	struct csdfs_cache_key k = { 1, 1, 4096, 9 };
	char buf[CS] = { 5 };

	for (int smaller = 0; smaller < 2; smaller++) {
		struct csdfs_cache *c = csdfs_cache_new(csdfs_cache_min_bytes(CS) - smaller);

		ck_assert_ptr_nonnull(c);
		csdfs_cache_put(c, &k, buf, CS, CS);
		ck_assert_int_eq(csdfs_cache_get(c, &k, buf, CS), smaller ? -ENOENT : 0);
		csdfs_cache_free(c);
	}
}
END_TEST

struct counts {
	int *hits;
	size_t n;
	int fail_at;
};

static int count_fn(void *ctx, size_t i)
{
	struct counts *c = ctx;

	__atomic_add_fetch(&c->hits[i], 1, __ATOMIC_SEQ_CST);
	return (int)i == c->fail_at ? -EIO : 0;
}

static struct csdfs_pool *shared_pool;

static void *caller(void *arg)
{
	struct counts c = { calloc(1000, sizeof(int)), 1000, -1 };

	(void)arg;
	for (int round = 0; round < 50; round++) {
		memset(c.hits, 0, 1000 * sizeof(int));
		if (csdfs_pool_run(shared_pool, c.n, count_fn, &c))
			return (void *)1;
		for (size_t i = 0; i < c.n; i++)
			if (c.hits[i] != 1)
				return (void *)1;
	}
	free(c.hits);
	return NULL;
}

START_TEST(test_pool)
{
	pthread_t t[4];
	struct counts c = { calloc(100, sizeof(int)), 100, 37 };

	for (unsigned workers = 0; workers < 4; workers++) {
		struct csdfs_pool *p = csdfs_pool_new(workers);

		ck_assert_ptr_nonnull(p);
		memset(c.hits, 0, 100 * sizeof(int));
		ck_assert_int_eq(csdfs_pool_run(p, c.n, count_fn, &c), -EIO);
		for (size_t i = 0; i < c.n; i++)
			ck_assert_int_eq(c.hits[i], 1);  /* every index, once */
		ck_assert_int_eq(csdfs_pool_run(p, 0, count_fn, &c), 0);
		csdfs_pool_free(p);
	}
	/* Several callers at once share the workers. */
	shared_pool = csdfs_pool_new(2);
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, caller, NULL);
	for (int i = 0; i < 4; i++) {
		void *r;

		pthread_join(t[i], &r);
		ck_assert_ptr_null(r);
	}
	csdfs_pool_free(shared_pool);
	free(c.hits);
}
END_TEST

static Suite *cache_suite(void)
{
	Suite *s = suite_create("cache");
	TCase *tc = tcase_create("core");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_hit_miss);
	tcase_add_test(tc, test_budget_lru);
	tcase_add_test(tc, test_full_recycles);
	tcase_add_test(tc, test_set_budget);
	tcase_add_test(tc, test_disabled);
	tcase_add_test(tc, test_min_bytes);
	tcase_add_test(tc, test_pool);
	suite_add_tcase(s, tc);
	return s;
}

FIXTURE_MAIN(cache_suite, FIXTURE_NO_TMP)
