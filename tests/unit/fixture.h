/* SPDX-License-Identifier: MIT */
/*
 * The unit tests' one fixture: a temp directory per test process, paths and
 * volumes in it, and the suite main.
 *
 * Check runs every test in a forked child, so nothing a test leaves on disk
 * can be cleaned up by the test itself when it fails or is killed. The
 * directory therefore belongs to the parent: FIXTURE_MAIN creates it before
 * the first test forks and removes it with everything below it when the
 * parent exits, and on SIGTERM/SIGINT/SIGHUP (a meson timeout), whatever the
 * children did. Tests name what they create inside it; names are per test
 * (or a test removes what it made), since tests run one after another in
 * the same directory.
 *
 * Everything here that can fail fails the calling test (ck_assert), except
 * fixture_rm and fixture_clear, which callers use to tidy up best-effort.
 */
#ifndef CSDFS_TEST_FIXTURE_H
#define CSDFS_TEST_FIXTURE_H

#include <stddef.h>

#include "check_run.h"
#include "csdfs/csdfs.h"

/* What fixture_mkfs_opts gives: what most tests need and nothing more. */
#define FIXTURE_VOL_SIZE (64ull << 20)
#define FIXTURE_CHUNK_SIZE 16384u

/* Where the process's temp directory lives. $CSDFS_TEST_TMPDIR, when set,
 * overrides both choices. */
enum fixture_tmp {
	FIXTURE_NO_TMP,   /* the suite writes no files: no directory at all */
	FIXTURE_TMP,      /* /tmp: a disk-backed host, as a real volume has */
	FIXTURE_SHM,      /* /dev/shm if writable (speed: many volume lifecycles), else /tmp */
};

/*
 * fixture_main - create the temp directory (named after the program:
 * csdfs-test-<name>-XXXXXX), arm its removal, run the suite @make_suite
 * builds. @make_suite runs in the parent before any test, so process-wide
 * settings it makes (log level) reach every test.
 * @return EXIT_SUCCESS if every test passed, else EXIT_FAILURE.
 */
int fixture_main(Suite *(*make_suite)(void), enum fixture_tmp where);

#define FIXTURE_MAIN(make_suite, where) \
	int main(void) { return fixture_main(make_suite, where); }

/* The temp directory; lives until the parent exits. Fails the test under
 * FIXTURE_NO_TMP. */
const char *fixture_base(void);

/* @out (@len bytes) = the temp directory + "/" + @name; nothing is created. */
void fixture_path(char *out, size_t len, const char *name);

/* fixture_path, and mkdir it (0700): it must not exist yet. */
void fixture_dir(char *out, size_t len, const char *name);

/*
 * fixture_rm - remove @path and, if it is a directory, everything below it
 * (symlinks are removed, never followed). Async-signal-safe: no allocation,
 * no stdio.
 * @return 0 (also when @path does not exist), or the first -errno met.
 */
int fixture_rm(const char *path);

/* Empty the temp directory, keeping it; @return as fixture_rm. */
int fixture_clear(void);

/* The volume the tests make unless they need another: FIXTURE_VOL_SIZE,
 * multiplier 2, zstd level 1, FIXTURE_CHUNK_SIZE chunks. */
void fixture_mkfs_opts(struct csdfs_mkfs_opts *o);

/* csdfs_vol_create at @path with @o (NULL: fixture_mkfs_opts). */
void fixture_vol_create(const char *path, const struct csdfs_mkfs_opts *o);

/* csdfs_vol_open of @path with @mo (NULL: no commit thread, no journal,
 * the rest default); the volume is the caller's to close. */
struct csdfs_vol *fixture_vol_open(const char *path, const struct csdfs_mount_opts *mo);

/* fixture_path(@path, @len, @name), a volume made there with
 * fixture_mkfs_opts, opened as fixture_vol_open(@path, @mo). */
struct csdfs_vol *fixture_vol_new(char *path, size_t len, const char *name,
				  const struct csdfs_mount_opts *mo);

#endif
