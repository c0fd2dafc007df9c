/* SPDX-License-Identifier: MIT */
/* The one way every unit test runs its check suite. */
#ifndef CSDFS_CHECK_RUN_H
#define CSDFS_CHECK_RUN_H

#include <check.h>

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

#endif
