/* SPDX-License-Identifier: MIT */
/*
 * The one way every unit test runs its check suite, header-only so that a
 * test built from daemon sources (tests/daemon/test_uring_msg.c) can use it
 * without linking libcsdfs. Tests on libcsdfs use FIXTURE_MAIN (fixture.h),
 * which adds the temp directory around the same run.
 */
#ifndef CSDFS_CHECK_RUN_H
#define CSDFS_CHECK_RUN_H

#include <check.h>
#include <stdlib.h>

/* Run every test of @s (forked, CK_NORMAL output); @return how many failed. */
static inline int check_run(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed;
}

/* A test file's main: build the suite with @make_suite, run it. */
#define CHECK_RUN_MAIN(make_suite)                                      \
	int main(void)                                                  \
	{                                                               \
		return check_run(make_suite()) ? EXIT_FAILURE : EXIT_SUCCESS; \
	}

#endif
