/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for bufpool.c: a buffer given back is handed out again, two
 * buffers in use are never the same, what is kept idle stays under its
 * bound, sizes outside the pool's range bypass it, and threads taking and
 * giving back at once never share a buffer. Small buffers: a thread gets
 * back what it gave, keeps at most four, never shares one with another
 * thread, and frees its own when it exits (the ASan pass's leak check).
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

START_TEST(test_small_reused_per_thread)
{
	char *a[6];

	ck_assert_uint_eq(csdfs_bufpool_small_idle(), 0);
	a[0] = csdfs_bufpool_get(16384);
	ck_assert_ptr_nonnull(a[0]);
	/* Whole whatever was asked for. */
	memset(a[0], 0x5a, CSDFS_BUFPOOL_MIN);
	csdfs_bufpool_put(a[0], 16384);
	ck_assert_uint_eq(csdfs_bufpool_small_idle(), 1);
	/* Any small size takes it back; the large pool is not touched. */
	ck_assert_ptr_eq(csdfs_bufpool_get(100), a[0]);
	ck_assert_uint_eq(csdfs_bufpool_small_idle(), 0);
	ck_assert_uint_eq(csdfs_bufpool_idle(), 0);
	for (int i = 1; i < 6; i++) {
		a[i] = csdfs_bufpool_get(CSDFS_BUFPOOL_MIN - 1);
		ck_assert_ptr_nonnull(a[i]);
		for (int j = 0; j < i; j++)
			ck_assert_ptr_ne(a[i], a[j]);
	}
	for (int i = 0; i < 6; i++)
		csdfs_bufpool_put(a[i], 0);
	/* The first four given back are kept (the last two freed), and
	 * given out again newest first, each once. */
	ck_assert_uint_eq(csdfs_bufpool_small_idle(), 4);
	for (int i = 3; i >= 0; i--)
		ck_assert_ptr_eq(csdfs_bufpool_get(1), a[i]);
	ck_assert_uint_eq(csdfs_bufpool_small_idle(), 0);
	for (int i = 0; i < 4; i++)
		csdfs_bufpool_put(a[i], 1);
}
END_TEST

/* A new thread starts with no small buffers of its own, whatever the
 * caller keeps; it keeps what it gives back until it exits. */
static void *small_in_thread(void *arg)
{
	char *x, *y;

	if (csdfs_bufpool_small_idle() != 0)
		return (void *)1L;
	x = csdfs_bufpool_get(4096);
	y = csdfs_bufpool_get(4096);
	if (!x || !y || x == y || x == arg || y == arg)
		return (void *)2L;
	csdfs_bufpool_put(x, 4096);
	csdfs_bufpool_put(y, 4096);
	return (void *)(uintptr_t)(csdfs_bufpool_small_idle() == 2 ? 0 : 3);
}

START_TEST(test_small_own_to_thread)
{
	char *mine = csdfs_bufpool_get(4096);
	pthread_t th;
	void *res;

	csdfs_bufpool_put(mine, 4096);
	ck_assert_uint_eq(csdfs_bufpool_small_idle(), 1);
	ck_assert_int_eq(pthread_create(&th, NULL, small_in_thread, mine), 0);
	pthread_join(th, &res);
	ck_assert_ptr_null(res);
	ck_assert_uint_eq(csdfs_bufpool_small_idle(), 1);
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
		char *z = csdfs_bufpool_get(16384);

		if (!x || !y || !z)
			return (void *)-1L;
		memset(z, me, CSDFS_BUFPOOL_MIN);
		memset(x, me, CSDFS_BUFPOOL_MIN);
		memset(y + CSDFS_BUFPOOL_SIZE - 4096, me, 4096);
		sched_yield();
		for (size_t k = 0; k < CSDFS_BUFPOOL_MIN; k += 512)
			bad += x[k] != me;
		for (size_t k = CSDFS_BUFPOOL_SIZE - 4096; k < CSDFS_BUFPOOL_SIZE; k += 512)
			bad += y[k] != me;
		for (size_t k = 0; k < CSDFS_BUFPOOL_MIN; k += 512)
			bad += z[k] != me;
		csdfs_bufpool_put(z, 16384);
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
	tcase_add_test(tc, test_small_reused_per_thread);
	tcase_add_test(tc, test_small_own_to_thread);
	tcase_add_test(tc, test_threads);
	suite_add_tcase(s, tc);
	return s;
}

FIXTURE_MAIN(bufpool_suite, FIXTURE_NO_TMP)
