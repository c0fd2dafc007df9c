/* SPDX-License-Identifier: MIT */
/*
 * The unit tests' shared fixture (fixture.h). The temp directory's path is
 * fixed before the first fork and never changes, so the parent's exit and
 * signal handlers can remove it with nothing but system calls; forked tests
 * inherit the handlers and the atexit entry, and both check that they run
 * in the parent before touching anything. While the suite runs, Check holds
 * SIGTERM and SIGINT itself; on one it puts our handler back, kills the
 * test's process group and sends the signal again to its own, so the
 * directory still goes.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fixture.h"

/* Deeper than any volume (vol/meta/file): a loop or a runaway test. */
#define RM_MAX_DEPTH 32

static char base[PATH_MAX];     /* "" under FIXTURE_NO_TMP */
static pid_t base_owner;

/* The kernel's getdents64 record (glibc's wrapper is not everywhere). */
struct raw_dirent {
	uint64_t d_ino;
	int64_t d_off;
	unsigned short d_reclen;
	unsigned char d_type;
	char d_name[];
};

static int rm_at(int dfd, const char *name, int depth);

/*
 * Remove everything in the directory open at @dfd. Entries are removed while
 * the directory is read, which may make a filesystem skip some, so passes
 * repeat from the start until one finds nothing, or removes nothing.
 */
static int rm_below(int dfd, int depth)
{
	_Alignas(8) char buf[4096];
	int first = 0;

	for (;;) {
		unsigned seen = 0, removed = 0;
		long n;

		if (lseek(dfd, 0, SEEK_SET) < 0)
			return -errno;
		while ((n = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0) {
			for (long off = 0; off < n;) {
				struct raw_dirent *d = (struct raw_dirent *)(buf + off);
				int rc;

				off += d->d_reclen;
				if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
					continue;
				seen++;
				rc = rm_at(dfd, d->d_name, depth);
				if (!rc)
					removed++;
				else if (!first)
					first = rc;
			}
		}
		if (n < 0)
			return first ? first : -errno;
		if (!seen || !removed)
			return first;
	}
}

static int rm_at(int dfd, const char *name, int depth)
{
	int fd, rc;

	if (!unlinkat(dfd, name, 0) || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return -errno;
	if (depth >= RM_MAX_DEPTH)
		return -ELOOP;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	rc = rm_below(fd, depth + 1);
	close(fd);
	if (unlinkat(dfd, name, AT_REMOVEDIR) && errno != ENOENT && !rc)
		rc = -errno;
	return rc;
}

int fixture_rm(const char *path)
{
	return rm_at(AT_FDCWD, path, 0);
}

int fixture_clear(void)
{
	int fd = open(fixture_base(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return -errno;
	rc = rm_below(fd, 1);
	close(fd);
	return rc;
}

/* ---- the process's temp directory ---------------------------------------- */

/* At exit: forked tests exit through here too, and must leave it alone. */
static void base_remove(void)
{
	if (base[0] && getpid() == base_owner)
		fixture_rm(base);
}

static void on_term(int sig)
{
	int saved = errno;

	base_remove();
	signal(sig, SIG_DFL);
	errno = saved;
	raise(sig);     /* delivered, by default, once this handler returns */
}

static bool writable_dir(const char *dir)
{
	struct stat st;

	return !stat(dir, &st) && S_ISDIR(st.st_mode) && !access(dir, W_OK);
}

static void base_create(enum fixture_tmp where)
{
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP };
	const char *dir = getenv("CSDFS_TEST_TMPDIR");
	const char *name = program_invocation_short_name;

	if (!dir || !dir[0])
		dir = where == FIXTURE_SHM && writable_dir("/dev/shm") ? "/dev/shm" : "/tmp";
	if (!strncmp(name, "test_", 5))
		name += 5;
	if ((size_t)snprintf(base, sizeof(base), "%s/csdfs-test-%s-XXXXXX", dir, name) >=
	    sizeof(base) || !mkdtemp(base)) {
		fprintf(stderr, "%s: cannot create a temp directory in '%s': %s\n",
			program_invocation_short_name, dir, strerror(errno));
		exit(EXIT_FAILURE);
	}
	base_owner = getpid();
	if (atexit(base_remove)) {
		fixture_rm(base);
		fprintf(stderr, "%s: atexit failed\n", program_invocation_short_name);
		exit(EXIT_FAILURE);
	}
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		signal(sigs[i], on_term);
}

int fixture_main(Suite *(*make_suite)(void), enum fixture_tmp where)
{
	if (where != FIXTURE_NO_TMP)
		base_create(where);
	return check_run(make_suite()) ? EXIT_FAILURE : EXIT_SUCCESS;
}

const char *fixture_base(void)
{
	ck_assert_msg(base[0], "the suite runs with FIXTURE_NO_TMP: no temp directory");
	return base;
}

void fixture_path(char *out, size_t len, const char *name)
{
	int n = snprintf(out, len, "%s/%s", fixture_base(), name);

	ck_assert_msg(n >= 0 && (size_t)n < len, "path of '%s' longer than %zu bytes",
		      name, len);
}

void fixture_dir(char *out, size_t len, const char *name)
{
	fixture_path(out, len, name);
	ck_assert_msg(!mkdir(out, 0700), "mkdir '%s': %s", out, strerror(errno));
}

/* ---- volumes ------------------------------------------------------------- */

void fixture_mkfs_opts(struct csdfs_mkfs_opts *o)
{
	*o = (struct csdfs_mkfs_opts){
		.size = FIXTURE_VOL_SIZE,
		.multiplier = 2.0,
		.codec = { CSDFS_CODEC_ZSTD, 1 },
		.chunk_size = FIXTURE_CHUNK_SIZE,
	};
}

void fixture_vol_create(const char *path, const struct csdfs_mkfs_opts *o)
{
	struct csdfs_mkfs_opts def;
	char err[512] = "";
	int rc;

	if (!o) {
		fixture_mkfs_opts(&def);
		o = &def;
	}
	rc = csdfs_vol_create(path, o, err, sizeof(err));
	ck_assert_msg(rc == 0, "create '%s': %d %s", path, rc, err);
}

struct csdfs_vol *fixture_vol_open(const char *path, const struct csdfs_mount_opts *mo)
{
	/* Without a journal the free map covers the whole data area, which
	 * the accounting tests count on; test_journal makes its own. */
	static const struct csdfs_mount_opts def = { .no_commit_thread = true,
						     .no_journal = true };
	struct csdfs_vol *vol = NULL;
	char err[512] = "";
	int rc;

	rc = csdfs_vol_open(path, mo ? mo : &def, &vol, err, sizeof(err));
	ck_assert_msg(rc == 0, "open '%s': %d %s", path, rc, err);
	return vol;
}

struct csdfs_vol *fixture_vol_new(char *path, size_t len, const char *name,
				  const struct csdfs_mount_opts *mo)
{
	fixture_path(path, len, name);
	fixture_vol_create(path, NULL);
	return fixture_vol_open(path, mo);
}
