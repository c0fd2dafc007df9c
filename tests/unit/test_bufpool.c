/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for bufpool.c: a buffer given back is handed out again, two
 * buffers in use are never the same, what is kept idle stays under its
 * bound, sizes outside the pool's range bypass it, and threads taking and
 * giving back at once never share a buffer.
 */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "fixture.h"
#include "csdfs/bufpool.h"

START_TEST(test_reused)
{
	char *a = csdfs_bufpool_get(CSDFS_BUFPOOL_MIN);
	char *b;

	ck_assert_ptr_nonnull(a);
	ck_assert_uint_eq((uintptr_t)a % 4096, 0);
	/* A pool buffer is whole whatever was asked for. */
	memset(a, 0xa5, CSDFS_BUFPOOL_SIZE);
	csdfs_bufpool_put(a, CSDFS_BUFPOOL_MIN);
	ck_assert_uint_eq(csdfs_bufpool_idle(), 1);
	b = csdfs_bufpool_get(CSDFS_BUFPOOL_SIZE);
	ck_assert_ptr_eq(a, b);
	ck_assert_uint_eq(csdfs_bufpool_idle(), 0);
	csdfs_bufpool_put(b, CSDFS_BUFPOOL_SIZE);
	csdfs_bufpool_put(NULL, CSDFS_BUFPOOL_MIN);
	ck_assert_uint_eq(csdfs_bufpool_idle(), 1);
}
END_TEST

START_TEST(test_in_use_distinct_and_idle_bound)
{
	enum { N = CSDFS_BUFPOOL_IDLE_MAX + 5 };
	char *b[N];

	for (int i = 0; i < N; i++) {
		b[i] = csdfs_bufpool_get(CSDFS_BUFPOOL_MIN + (size_t)i * 1000);
		ck_assert_ptr_nonnull(b[i]);
		memset(b[i], i, CSDFS_BUFPOOL_SIZE);
		for (int j = 0; j < i; j++)
			ck_assert_ptr_ne(b[i], b[j]);
	}
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(b[i][CSDFS_BUFPOOL_SIZE - 1], i);
		csdfs_bufpool_put(b[i], CSDFS_BUFPOOL_MIN + (size_t)i * 1000);
	}
	ck_assert_uint_eq(csdfs_bufpool_idle(), CSDFS_BUFPOOL_IDLE_MAX);
}
END_TEST

START_TEST(test_out_of_range_bypasses)
{
	size_t sizes[] = { CSDFS_BUFPOOL_SIZE + 1, CSDFS_BUFPOOL_MIN - 1, 0, 16384 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *p = csdfs_bufpool_get(sizes[i]);

		ck_assert_ptr_nonnull(p);
		if (sizes[i] >= CSDFS_BUFPOOL_MIN)
			ck_assert_uint_eq((uintptr_t)p % 4096, 0);
		memset(p, 3, sizes[i]);
		csdfs_bufpool_put(p, sizes[i]);
		ck_assert_uint_eq(csdfs_bufpool_idle(), 0);
	}
	/* Nor do they take an idle buffer. */
	csdfs_bufpool_put(csdfs_bufpool_get(CSDFS_BUFPOOL_SIZE), CSDFS_BUFPOOL_SIZE);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char *p = csdfs_bufpool_get(sizes[i]);

		ck_assert_uint_eq(csdfs_bufpool_idle(), 1);
		csdfs_bufpool_put(p, sizes[i]);
	}
}
END_TEST

#define NTHREADS 8
#define ROUNDS 2000

/* Each thread stamps the buffers it holds with its own byte and checks the
 * stamp before giving them back: a buffer handed to two holders at once
 * shows up as a foreign stamp. */
static void *churn(void *arg)
{
	int me = (int)(uintptr_t)arg;
	long bad = 0;

	for (int r = 0; r < ROUNDS; r++) {
		char *x = csdfs_bufpool_get(CSDFS_BUFPOOL_MIN);
		char *y = csdfs_bufpool_get(CSDFS_BUFPOOL_SIZE);

		if (!x || !y)
			return (void *)-1L;
		memset(x, me, CSDFS_BUFPOOL_MIN);
		memset(y + CSDFS_BUFPOOL_SIZE - 4096, me, 4096);
		sched_yield();
		for (size_t k = 0; k < CSDFS_BUFPOOL_MIN; k += 512)
			bad += x[k] != me;
		for (size_t k = CSDFS_BUFPOOL_SIZE - 4096; k < CSDFS_BUFPOOL_SIZE; k += 512)
			bad += y[k] != me;
		csdfs_bufpool_put(y, CSDFS_BUFPOOL_SIZE);
		csdfs_bufpool_put(x, CSDFS_BUFPOOL_MIN);
	}
	return (void *)bad;
}

START_TEST(test_threads)
{
	pthread_t th[NTHREADS];

	for (int t = 0; t < NTHREADS; t++)
		ck_assert_int_eq(pthread_create(&th[t], NULL, churn, (void *)(uintptr_t)(t + 1)), 0);
	for (int t = 0; t < NTHREADS; t++) {
		void *bad;

		pthread_join(th[t], &bad);
		ck_assert_ptr_null(bad);
	}
	ck_assert_uint_le(csdfs_bufpool_idle(), CSDFS_BUFPOOL_IDLE_MAX);
}
END_TEST

static Suite *bufpool_suite(void)
{
	Suite *s = suite_create("bufpool");
	TCase *tc = tcase_create("bufpool");

	tcase_add_test(tc, test_reused);
	tcase_add_test(tc, test_in_use_distinct_and_idle_bound);
	tcase_add_test(tc, test_out_of_range_bypasses);
	tcase_add_test(tc, test_threads);
	suite_add_tcase(s, tc);
	return s;
}

FIXTURE_MAIN(bufpool_suite, FIXTURE_NO_TMP)
