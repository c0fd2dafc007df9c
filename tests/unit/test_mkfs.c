/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the edges of mkfs.c: a csdfs_vol_create that fails for
 * lack of host space takes back everything it made (a leftover meta/ once
 * made the next mkfs call the directory a volume while csdfs said it was
 * none), and csdfs_vol_wait_closed, the offline tools' bounded wait for a
 * daemon that is still closing the volume.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"

static int entries(const char *dir)
{
	char cmd[4200];
	FILE *p;
	int n = -1;

	snprintf(cmd, sizeof(cmd), "ls -A '%s' | wc -l", dir);
	p = popen(cmd, "r");
	ck_assert(p);
	ck_assert_int_eq(fscanf(p, "%d", &n), 1);
	pclose(p);
	return n;
}

/* A size no host here holds: the preallocation fails. */
static void huge_opts(struct csdfs_mkfs_opts *o, bool force)
{
	fixture_mkfs_opts(o);
	o->size = CSDFS_VOL_SIZE_MAX;
	o->multiplier = 1.0;
	o->force = force;
}

START_TEST(test_failed_create_leaves_no_directory)
{
	struct csdfs_mkfs_opts o;
	char path[4096], err[512] = "";
	struct stat st;

	fixture_path(path, sizeof(path), "huge");
	huge_opts(&o, false);
	ck_assert_int_eq(csdfs_vol_create(path, &o, err, sizeof(err)), -ENOSPC);
	ck_assert_msg(strstr(err, "host filesystem"), "message: %s", err);
	ck_assert_msg(stat(path, &st) && errno == ENOENT, "'%s' left behind", path);
	/* and the same path then takes a volume */
	fixture_vol_create(path, NULL);
	fixture_rm(path);
}
END_TEST

START_TEST(test_failed_create_empties_existing_directory)
{
	struct csdfs_mkfs_opts o;
	char path[4096], err[512] = "";

	fixture_dir(path, sizeof(path), "empty");
	huge_opts(&o, false);
	ck_assert_int_eq(csdfs_vol_create(path, &o, err, sizeof(err)), -ENOSPC);
	ck_assert_int_eq(entries(path), 0);
	fixture_vol_create(path, NULL);
	ck_assert_int_eq(entries(path), 2);     /* container, meta */
	/* --force over that volume, failing: no half volume either */
	huge_opts(&o, true);
	ck_assert_int_eq(csdfs_vol_create(path, &o, err, sizeof(err)), -ENOSPC);
	ck_assert_int_eq(entries(path), 0);
	fixture_vol_create(path, NULL);
	fixture_rm(path);
}
END_TEST

static int waited;

static void count_wait(const char *path)
{
	(void)path;
	waited++;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Hold @path's container lock as a daemon does (another open file). */
static int hold_lock(const char *path)
{
	char c[4200];
	int fd;

	snprintf(c, sizeof(c), "%s/container", path);
	fd = open(c, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(flock(fd, LOCK_EX | LOCK_NB), 0);
	return fd;
}

static void *release_later(void *arg)
{
	usleep(300 * 1000);
	close(*(int *)arg);
	return NULL;
}

START_TEST(test_wait_closed)
{
	char path[4096];
	pthread_t t;
	double t0;
	int fd;

	fixture_path(path, sizeof(path), "nothing-here");
	waited = 0;
	ck_assert_int_eq(csdfs_vol_wait_closed(path, 5000, count_wait), 0);
	ck_assert_int_eq(waited, 0);

	fixture_path(path, sizeof(path), "locked");
	fixture_vol_create(path, NULL);
	ck_assert_int_eq(csdfs_vol_wait_closed(path, 5000, count_wait), 0);
	ck_assert_int_eq(waited, 0);

	/* held for good: -EBUSY once the bound has passed, not before */
	fd = hold_lock(path);
	t0 = now_s();
	ck_assert_int_eq(csdfs_vol_wait_closed(path, 500, count_wait), -EBUSY);
	ck_assert_msg(now_s() - t0 >= 0.45 && now_s() - t0 < 3.0, "waited %.2f s", now_s() - t0);
	ck_assert_int_eq(waited, 1);

	/* released while waiting: 0, soon after */
	waited = 0;
	ck_assert_int_eq(pthread_create(&t, NULL, release_later, &fd), 0);
	t0 = now_s();
	ck_assert_int_eq(csdfs_vol_wait_closed(path, 5000, count_wait), 0);
	ck_assert_msg(now_s() - t0 < 2.0, "waited %.2f s", now_s() - t0);
	ck_assert_int_eq(waited, 1);
	pthread_join(t, NULL);
	/* and the lock is not kept */
	close(hold_lock(path));
	fixture_rm(path);
}
END_TEST

static Suite *mkfs_suite(void)
{
	Suite *s = suite_create("mkfs");
	TCase *tc = tcase_create("mkfs");

	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, test_failed_create_leaves_no_directory);
	tcase_add_test(tc, test_failed_create_empties_existing_directory);
	tcase_add_test(tc, test_wait_closed);
	suite_add_tcase(s, tc);
	return s;
}

FIXTURE_MAIN(mkfs_suite, FIXTURE_TMP)
