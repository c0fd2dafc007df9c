/*
 * posix_check: exercise the POSIX syscalls a local filesystem must get right,
 * on a directory (a csdfs mount, or a plain directory to validate the checks).
 *
 * Every check runs in a forked child, in its own fresh subdirectory of DIR,
 * under a timeout, so a crash, a hang or a leaked fd in one check cannot
 * poison the next. Each check prints "PASS name" or "FAIL name: why" (why
 * names the source line, the call and the errno). Exit status: 1 if any
 * check failed, else 0.
 *
 *   posix_check [-p PREFIX] [-o NAME,...] DIR    general checks (root or not)
 *   posix_check --perm-setup DIR                 as root: build DIR/perm
 *   posix_check --perm-user DIR                  as a normal user: access checks
 *   posix_check -l                               list check names
 *
 * Only libc and Linux syscalls. Build:
 *   gcc -O2 -Wall -Wextra -o posix_check posix_check.c -lpthread
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define KiB (1024L)
#define MiB (1024L * 1024L)
#define GiB (1024L * 1024L * 1024L)

static char g_why[4096];

static const char *errname(int e)
{
	const char *n = strerrorname_np(e);
	return n ? n : "E?";
}

static int failf(int line, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(g_why, sizeof g_why, "line %d: ", line);

	va_start(ap, fmt);
	vsnprintf(g_why + n, sizeof g_why - n, fmt, ap);
	va_end(ap);
	return -1;
}

#define FAIL(...) return failf(__LINE__, __VA_ARGS__)

/* expr must not return a negative value; on failure report errno */
#define SYS(expr) do { \
	errno = 0; \
	if ((long)(expr) < 0) { \
		int e_ = errno; \
		FAIL("%s: %s (%s)", #expr, strerror(e_), errname(e_)); \
	} \
} while (0)

#define EXPECT(cond, ...) do { if (!(cond)) FAIL(__VA_ARGS__); } while (0)

/* expr must fail with errno err (or err2) */
#define EXPECT_ERR2(expr, err, err2) do { \
	errno = 0; \
	long r_ = (long)(expr); \
	int e_ = errno; \
	if (r_ != -1) \
		FAIL("%s: succeeded (returned %ld), expected %s", #expr, r_, errname(err)); \
	if (e_ != (err) && e_ != (err2)) \
		FAIL("%s: failed with %s (%s), expected %s", #expr, errname(e_), \
		     strerror(e_), errname(err)); \
} while (0)
#define EXPECT_ERR(expr, err) EXPECT_ERR2(expr, err, err)

#define CHECKED(call) do { if ((call) < 0) return -1; } while (0)

/* ---------- helpers ---------- */

static void fill_rand(void *p, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9E3779B97F4A7C15ULL + 0x1234567ULL;
	unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++) {
		if ((i & 7) == 0) {
			x ^= x >> 12;
			x ^= x << 25;
			x ^= x >> 27;
		}
		b[i] = (unsigned char)((x * 0x2545F4914F6CDD1DULL) >> (8 * (i & 7)));
	}
}

static uint64_t g_rng = 88172645463325252ULL;

static uint64_t rnd(void)
{
	g_rng ^= g_rng << 13;
	g_rng ^= g_rng >> 7;
	g_rng ^= g_rng << 17;
	return g_rng;
}

static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (w == 0) {
			errno = EIO;
			return -1;
		}
		p += w;
		n -= w;
	}
	return 0;
}

static int pwrite_all(int fd, const void *buf, size_t n, off_t off)
{
	const char *p = buf;

	while (n) {
		ssize_t w = pwrite(fd, p, n, off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (w == 0) {
			errno = EIO;
			return -1;
		}
		p += w;
		n -= w;
		off += w;
	}
	return 0;
}

/* read up to n bytes at off, stopping only at EOF; returns bytes read or -1 */
static ssize_t pread_full(int fd, void *buf, size_t n, off_t off)
{
	char *p = buf;
	size_t got = 0;

	while (got < n) {
		ssize_t r = pread(fd, p + got, n - got, off + got);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		if (r == 0)
			break;
		got += r;
	}
	return got;
}

static int put_file(const char *path, const void *buf, size_t n, mode_t mode)
{
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, mode);

	if (fd < 0)
		return -1;
	if (write_all(fd, buf, n) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return close(fd);
}

static int is_zero(const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t i;

	for (i = 0; i < n; i++)
		if (b[i])
			return 0;
	return 1;
}

/* the whole file behind fd must equal model[0..n) exactly (size too) */
static int verify_fd_(int fd, const unsigned char *model, size_t n, int line)
{
	struct stat st;
	unsigned char *buf;
	ssize_t r;
	size_t i, bad = 0, first = 0;

	if (fstat(fd, &st) < 0)
		return failf(line, "fstat: %s", strerror(errno));
	if ((size_t)st.st_size != n)
		return failf(line, "size is %lld, expected %zu", (long long)st.st_size, n);
	buf = malloc(n + 1);
	if (!buf)
		return failf(line, "out of memory");
	r = pread_full(fd, buf, n + 1, 0);
	if (r < 0) {
		int e = errno;
		free(buf);
		return failf(line, "pread: %s (%s)", strerror(e), errname(e));
	}
	if ((size_t)r != n) {
		free(buf);
		return failf(line, "read %zd bytes, expected %zu", r, n);
	}
	for (i = 0; i < n; i++) {
		if (buf[i] != model[i]) {
			if (!bad)
				first = i;
			bad++;
		}
	}
	if (bad) {
		int got = buf[first];
		free(buf);
		return failf(line, "content differs: %zu bad bytes, first at offset %zu "
			     "(got 0x%02x, expected 0x%02x)", bad, first, got, model[first]);
	}
	free(buf);
	return 0;
}

#define VERIFY_FD(fd, model, n) do { \
	if (verify_fd_(fd, model, n, __LINE__)) return -1; \
} while (0)

#define VERIFY_PATH(path, model, n) do { \
	int vfd_ = open(path, O_RDONLY); \
	if (vfd_ < 0) FAIL("open %s: %s", path, strerror(errno)); \
	if (verify_fd_(vfd_, model, n, __LINE__)) { close(vfd_); return -1; } \
	close(vfd_); \
} while (0)

static int ts_cmp(struct timespec a, struct timespec b)
{
	if (a.tv_sec != b.tv_sec)
		return a.tv_sec < b.tv_sec ? -1 : 1;
	if (a.tv_nsec != b.tv_nsec)
		return a.tv_nsec < b.tv_nsec ? -1 : 1;
	return 0;
}

static const char *tss(struct timespec t)
{
	static char buf[4][48];
	static int i;

	i = (i + 1) & 3;
	snprintf(buf[i], sizeof buf[i], "%lld.%09ld", (long long)t.tv_sec, t.tv_nsec);
	return buf[i];
}

/* long enough for any nanosecond- or jiffy-resolution timestamp to move */
static void tick(void)
{
	struct timespec t = { 0, 30 * 1000 * 1000 };

	nanosleep(&t, NULL);
}

/* set atime/mtime to a fixed old value so a later "changed" is unambiguous */
static int set_old_times(const char *path)
{
	struct timespec ts[2] = { { 1000000000, 0 }, { 1000000000, 0 } };

	return utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Directory listing must be exactly {".", ".."} + expected (any order), each
 * once; d_type (when not DT_UNKNOWN) and d_ino must agree with lstat.
 */
static int expect_listing_(const char *dir, const char **expected, int n, int line)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **got = NULL;
	int ngot = 0, cap = 0, dots = 0, dotdots = 0, i, rc = 0;
	const char **exp = NULL;

	if (!d)
		return failf(line, "opendir %s: %s", dir, strerror(errno));
	for (;;) {
		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno) {
				rc = failf(line, "readdir %s: %s", dir, strerror(errno));
				goto out;
			}
			break;
		}
		if (!strcmp(de->d_name, ".")) {
			dots++;
			continue;
		}
		if (!strcmp(de->d_name, "..")) {
			dotdots++;
			continue;
		}
		{
			struct stat st;
			if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
				rc = failf(line, "listed entry '%s' cannot be lstat'ed: %s",
					   de->d_name, strerror(errno));
				goto out;
			}
			if (de->d_type != DT_UNKNOWN &&
			    de->d_type != IFTODT(st.st_mode)) {
				rc = failf(line, "entry '%s': d_type %d but lstat type %d",
					   de->d_name, de->d_type, IFTODT(st.st_mode));
				goto out;
			}
			if (de->d_ino != st.st_ino) {
				rc = failf(line, "entry '%s': d_ino %llu but st_ino %llu",
					   de->d_name, (unsigned long long)de->d_ino,
					   (unsigned long long)st.st_ino);
				goto out;
			}
		}
		if (ngot == cap) {
			cap = cap ? cap * 2 : 64;
			got = realloc(got, cap * sizeof *got);
		}
		got[ngot++] = strdup(de->d_name);
	}
	if (dots != 1 || dotdots != 1) {
		rc = failf(line, "'.' listed %d times, '..' listed %d times", dots, dotdots);
		goto out;
	}
	exp = malloc((n + 1) * sizeof *exp);
	if (n)
		memcpy(exp, expected, n * sizeof *exp);
	if (ngot)
		qsort(got, ngot, sizeof *got, cmp_str);
	if (n)
		qsort(exp, n, sizeof *exp, cmp_str);
	for (i = 1; i < ngot; i++)
		if (!strcmp(got[i], got[i - 1])) {
			rc = failf(line, "entry '%s' listed twice", got[i]);
			goto out;
		}
	{
		int a = 0, b = 0;
		while (a < ngot || b < n) {
			int c = a >= ngot ? 1 : b >= n ? -1 : strcmp(got[a], exp[b]);
			if (c < 0) {
				rc = failf(line, "unexpected entry '%s' (%d listed, %d expected)",
					   got[a], ngot, n);
				goto out;
			}
			if (c > 0) {
				rc = failf(line, "missing entry '%s' (%d listed, %d expected)",
					   exp[b], ngot, n);
				goto out;
			}
			a++;
			b++;
		}
	}
out:
	for (i = 0; i < ngot; i++)
		free(got[i]);
	free(got);
	free(exp);
	closedir(d);
	return rc;
}

#define EXPECT_LISTING(dir, exp, n) do { \
	if (expect_listing_(dir, exp, n, __LINE__)) return -1; \
} while (0)

static long nlink_of(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return -1;
	return (long)st.st_nlink;
}

static ino_t ino_of(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return 0;
	return st.st_ino;
}

/* ---------- checks: data path ---------- */

static int c_create_rw(void)
{
	unsigned char buf[10000], rb[10001];
	struct stat st;
	ssize_t n;
	int fd;

	fill_rand(buf, sizeof buf, 1);
	SYS(fd = open("f", O_CREAT | O_EXCL | O_RDWR, 0644));
	SYS(write_all(fd, buf, sizeof buf));
	EXPECT(lseek(fd, 0, SEEK_CUR) == 10000, "file offset after write is not 10000");
	SYS(lseek(fd, 0, SEEK_SET));
	n = read(fd, rb, sizeof rb);
	EXPECT(n == (ssize_t)sizeof buf, "read returned %zd, expected %zu", n, sizeof buf);
	EXPECT(!memcmp(rb, buf, sizeof buf), "data read back differs from data written");
	EXPECT(read(fd, rb, 1) == 0, "read at EOF did not return 0");
	SYS(fstat(fd, &st));
	EXPECT(S_ISREG(st.st_mode), "not S_ISREG (mode %o)", st.st_mode);
	EXPECT((st.st_mode & 07777) == 0644, "mode %o, expected 0644", st.st_mode & 07777);
	EXPECT(st.st_size == 10000, "st_size %lld, expected 10000", (long long)st.st_size);
	EXPECT(st.st_nlink == 1, "st_nlink %ld, expected 1", (long)st.st_nlink);
	EXPECT(st.st_uid == geteuid() && st.st_gid == getegid(),
	       "owner %d:%d, expected %d:%d", st.st_uid, st.st_gid, geteuid(), getegid());
	close(fd);

	EXPECT_ERR(open("f", O_CREAT | O_EXCL | O_RDWR, 0644), EEXIST);
	EXPECT_ERR(open("missing", O_RDONLY), ENOENT);
	EXPECT_ERR(open("f/x", O_RDONLY), ENOTDIR);
	EXPECT_ERR(open("f", O_RDONLY | O_DIRECTORY), ENOTDIR);
	SYS(mkdir("d", 0755));
	EXPECT_ERR(open("d", O_WRONLY), EISDIR);

	SYS(fd = open("f", O_RDONLY));
	EXPECT(pread_full(fd, rb, sizeof rb, 0) == (ssize_t)sizeof buf &&
	       !memcmp(rb, buf, sizeof buf), "reopened file differs");
	EXPECT_ERR(write(fd, buf, 1), EBADF);
	close(fd);

	SYS(fd = creat("g", 0600));
	SYS(fstat(fd, &st));
	EXPECT((st.st_mode & 07777) == 0600 && st.st_size == 0,
	       "creat: mode %o size %lld", st.st_mode & 07777, (long long)st.st_size);
	close(fd);

	umask(077);
	fd = open("h", O_CREAT | O_WRONLY, 0666);
	umask(022);
	SYS(fd);
	SYS(fstat(fd, &st));
	EXPECT((st.st_mode & 07777) == 0600, "umask 077 ignored: mode %o", st.st_mode & 07777);
	close(fd);
	return 0;
}

static int c_pread_pwrite(void)
{
	enum { N = 73000 };
	static unsigned char model[N], a[5000], b[3000], c[100];
	int fd;

	fill_rand(a, sizeof a, 2);
	fill_rand(b, sizeof b, 3);
	fill_rand(c, sizeof c, 4);
	SYS(fd = open("f", O_CREAT | O_RDWR, 0644));
	SYS(pwrite_all(fd, a, sizeof a, 0));
	SYS(pwrite_all(fd, b, sizeof b, 70000));
	SYS(pwrite_all(fd, c, sizeof c, 4090));
	EXPECT(lseek(fd, 0, SEEK_CUR) == 0, "pwrite moved the file offset");
	memcpy(model, a, sizeof a);
	memcpy(model + 70000, b, sizeof b);
	memcpy(model + 4090, c, sizeof c);
	VERIFY_FD(fd, model, N);
	EXPECT(lseek(fd, 0, SEEK_CUR) == 0, "pread moved the file offset");
	{
		unsigned char buf[100];
		ssize_t r = pread(fd, buf, sizeof buf, N + 10);
		EXPECT(r == 0, "pread past EOF returned %zd", r);
		r = pread(fd, buf, sizeof buf, N - 10);
		EXPECT(r == 10 && !memcmp(buf, model + N - 10, 10),
		       "pread straddling EOF returned %zd", r);
	}
	close(fd);
	VERIFY_PATH("f", model, N);
	return 0;
}

static int c_o_trunc(void)
{
	unsigned char buf[8192], tail[10];
	struct stat st;
	int fd;

	fill_rand(buf, sizeof buf, 5);
	SYS(put_file("f", buf, sizeof buf, 0644));
	SYS(fd = open("f", O_RDWR | O_TRUNC));
	SYS(fstat(fd, &st));
	EXPECT(st.st_size == 0, "size after O_TRUNC is %lld", (long long)st.st_size);
	EXPECT(read(fd, buf, sizeof buf) == 0, "read after O_TRUNC returned data");
	fill_rand(tail, sizeof tail, 6);
	SYS(write_all(fd, tail, sizeof tail));
	VERIFY_FD(fd, tail, sizeof tail);
	close(fd);
	/* O_TRUNC on an empty file and on a file opened read-write twice */
	SYS(fd = open("f", O_WRONLY | O_TRUNC));
	close(fd);
	SYS(stat("f", &st));
	EXPECT(st.st_size == 0, "size after second O_TRUNC is %lld", (long long)st.st_size);
	return 0;
}

static int c_o_append(void)
{
	unsigned char a[3000], b[5000], c[7000], model[15000];
	int fd1, fd2;

	fill_rand(a, sizeof a, 7);
	fill_rand(b, sizeof b, 8);
	fill_rand(c, sizeof c, 9);
	SYS(put_file("f", a, sizeof a, 0644));
	SYS(fd1 = open("f", O_WRONLY | O_APPEND));
	SYS(fd2 = open("f", O_WRONLY | O_APPEND));
	SYS(lseek(fd1, 0, SEEK_SET));
	SYS(write_all(fd1, b, sizeof b));
	SYS(write_all(fd2, c, sizeof c));
	EXPECT(lseek(fd1, 0, SEEK_CUR) == 8000, "offset after append write is %lld",
	       (long long)lseek(fd1, 0, SEEK_CUR));
	close(fd1);
	close(fd2);
	memcpy(model, a, sizeof a);
	memcpy(model + 3000, b, sizeof b);
	memcpy(model + 8000, c, sizeof c);
	VERIFY_PATH("f", model, sizeof model);
	return 0;
}

static int c_ftruncate(void)
{
	enum { N = 200000 };
	static unsigned char model[300000], buf[300000];
	static const long cuts[] = { 150001, 65539, 20001, 16384, 10000 };
	unsigned i;
	int fd;

	fill_rand(model, N, 10);
	SYS(fd = open("f", O_CREAT | O_RDWR, 0644));
	SYS(write_all(fd, model, N));
	for (i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
		/* read everything first so stale page cache would show */
		EXPECT(pread_full(fd, buf, N, 0) == N, "pread before cut %ld", cuts[i]);
		SYS(ftruncate(fd, cuts[i]));
		{
			struct stat st;
			SYS(fstat(fd, &st));
			EXPECT(st.st_size == cuts[i], "size after shrink to %ld is %lld",
			       cuts[i], (long long)st.st_size);
		}
		SYS(ftruncate(fd, N));
		memset(model + cuts[i], 0, N - cuts[i]);
		if (verify_fd_(fd, model, N, __LINE__)) {
			char why[sizeof g_why];
			memcpy(why, g_why, sizeof why);
			FAIL("after shrink to %ld and grow back: %s", cuts[i], why);
		}
	}
	/* data past the zeroed region, then truncate(2) by path */
	fill_rand(model + 190000, 5000, 11);
	SYS(pwrite_all(fd, model + 190000, 5000, 190000));
	SYS(truncate("f", 100));
	SYS(truncate("f", 300000));
	memset(model + 100, 0, 300000 - 100);
	VERIFY_FD(fd, model, 300000);
	close(fd);
	return 0;
}

static int c_rw_vectored(void)
{
	unsigned char a[1000], b[17000], c[5], model[18005], r1[7], r2[18000];
	struct iovec wv[3] = { { a, sizeof a }, { b, sizeof b }, { c, sizeof c } };
	struct iovec rv[2] = { { r1, sizeof r1 }, { r2, sizeof r2 } };
	ssize_t n;
	int fd;

	fill_rand(a, sizeof a, 12);
	fill_rand(b, sizeof b, 13);
	fill_rand(c, sizeof c, 14);
	memcpy(model, a, 1000);
	memcpy(model + 1000, b, 17000);
	memcpy(model + 18000, c, 5);
	SYS(fd = open("f", O_CREAT | O_RDWR, 0644));
	n = pwritev(fd, wv, 3, 0);
	EXPECT(n == 18005, "pwritev returned %zd: %s", n, strerror(errno));
	n = preadv(fd, rv, 2, 0);
	EXPECT(n == 18005, "preadv returned %zd", n);
	EXPECT(!memcmp(r1, model, 7) && !memcmp(r2, model + 7, n - 7),
	       "preadv data differs");
	VERIFY_FD(fd, model, sizeof model);
	close(fd);
	return 0;
}

static int c_large_io(void)
{
	size_t n = 3 * MiB + 123, off;
	unsigned char *model = malloc(n), *buf = malloc(n + 1);
	ssize_t r;
	int fd;

	EXPECT(model && buf, "out of memory");
	fill_rand(model, n, 15);
	SYS(fd = open("f", O_CREAT | O_RDWR, 0644));
	r = write(fd, model, n);
	EXPECT(r == (ssize_t)n, "single %zu-byte write returned %zd (%s)", n, r, strerror(errno));
	r = pread(fd, buf, n + 1, 0);
	/* a single read may legitimately be short; finish it */
	if (r > 0 && (size_t)r < n)
		r += pread_full(fd, buf + r, n + 1 - r, r);
	EXPECT(r == (ssize_t)n && !memcmp(buf, model, n), "large read differs (%zd bytes)", r);
	/* odd-sized sequential reads */
	SYS(lseek(fd, 0, SEEK_SET));
	for (off = 0; off < n;) {
		r = read(fd, buf, 7777);
		EXPECT(r > 0, "read at %zu returned %zd", off, r);
		EXPECT(!memcmp(buf, model + off, r), "7777-byte read at %zu differs", off);
		off += r;
	}
	close(fd);
	free(model);
	free(buf);
	return 0;
}

/*
 * Random small overwrites of random, zero and text data over a 256 KiB file,
 * checked against a model: chunk read-modify-write, chunks turning into
 * holes and back, compressible and incompressible data in one chunk.
 */
static int c_overwrite_mixed(void)
{
	enum { N = 256 * 1024 };
	static unsigned char model[N + 65536], buf[65536];
	size_t size = 0;
	int fd, i;

	SYS(fd = open("f", O_CREAT | O_RDWR, 0644));
	g_rng = 0xfeedbeefULL;
	for (i = 0; i < 300; i++) {
		size_t off = rnd() % N;
		size_t len = 1 + rnd() % (i % 10 == 0 ? 65536 : 9000);
		int kind = rnd() % 3, j;

		if (kind == 0)
			fill_rand(buf, len, rnd());
		else if (kind == 1)
			memset(buf, 0, len);
		else
			for (j = 0; j < (int)len; j++)
				buf[j] = "the quick brown fox jumps over the lazy dog\n"[(j + i) % 44];
		SYS(pwrite_all(fd, buf, len, off));
		memcpy(model + off, buf, len);
		if (off + len > size)
			size = off + len;
		if (i % 50 == 49 && verify_fd_(fd, model, size, __LINE__)) {
			char why[sizeof g_why];
			memcpy(why, g_why, sizeof why);
			FAIL("after %d overwrites: %s", i + 1, why);
		}
	}
	close(fd);
	VERIFY_PATH("f", model, size);
	return 0;
}

/* ---------- checks: namespace ---------- */

static int c_mkdir_rmdir(void)
{
	struct stat st;
	long n0;

	SYS(n0 = nlink_of("."));
	SYS(mkdir("d", 0755));
	SYS(stat("d", &st));
	EXPECT(S_ISDIR(st.st_mode), "mkdir made a non-directory (mode %o)", st.st_mode);
	EXPECT((st.st_mode & 07777) == 0755, "mode %o, expected 0755", st.st_mode & 07777);
	EXPECT(st.st_nlink == 2, "new dir st_nlink %ld, expected 2", (long)st.st_nlink);
	EXPECT(nlink_of(".") == n0 + 1, "parent nlink %ld after mkdir, expected %ld",
	       nlink_of("."), n0 + 1);
	EXPECT_ERR(mkdir("d", 0755), EEXIST);
	SYS(put_file("d/f", "x", 1, 0644));
	EXPECT_ERR(rmdir("d"), ENOTEMPTY);
	SYS(put_file("file", "y", 1, 0644));
	EXPECT_ERR(rmdir("file"), ENOTDIR);
	EXPECT_ERR(mkdir("file/x", 0755), ENOTDIR);
	EXPECT_ERR(mkdir("nope/x", 0755), ENOENT);
	EXPECT_ERR(rmdir("file/"), ENOTDIR);
	EXPECT_ERR(rmdir("nope"), ENOENT);
	EXPECT_ERR(unlink("d"), EISDIR);
	EXPECT_ERR(rmdir("."), EINVAL);
	SYS(unlink("d/f"));
	SYS(rmdir("d"));
	EXPECT_ERR(stat("d", &st), ENOENT);
	EXPECT(nlink_of(".") == n0, "parent nlink %ld after rmdir, expected %ld",
	       nlink_of("."), n0);
	SYS(mkdir("a", 0700));
	SYS(mkdir("a/b", 0700));
	SYS(mkdir("a/b/c", 0700));
	EXPECT(nlink_of("a") == 3 && nlink_of("a/b") == 3 && nlink_of("a/b/c") == 2,
	       "nested nlinks %ld %ld %ld, expected 3 3 2",
	       nlink_of("a"), nlink_of("a/b"), nlink_of("a/b/c"));
	EXPECT(ino_of("a/b/c/..") == ino_of("a/b"), "'..' of a/b/c is not a/b");
	SYS(rmdir("a/b/c"));
	SYS(rmdir("a/b"));
	SYS(rmdir("a"));
	SYS(unlink("file"));
	EXPECT_LISTING(".", (const char **)NULL, 0);
	return 0;
}

static int c_readdir(void)
{
	static char names[210][16];
	const char *exp[210];
	int i, n = 0;

	for (i = 0; i < 200; i++) {
		snprintf(names[i], sizeof names[i], "f%03d", i);
		SYS(put_file(names[i], names[i], 4, 0644));
		exp[n++] = names[i];
	}
	for (i = 0; i < 3; i++) {
		snprintf(names[200 + i], sizeof names[0], "d%d", i);
		SYS(mkdir(names[200 + i], 0755));
		exp[n++] = names[200 + i];
	}
	SYS(symlink("f000", "s"));
	exp[n++] = "s";
	EXPECT_LISTING(".", exp, n);

	/* delete every third file and a directory, list again */
	n = 0;
	for (i = 0; i < 200; i++) {
		if (i % 3 == 0)
			SYS(unlink(names[i]));
		else
			exp[n++] = names[i];
	}
	SYS(rmdir("d1"));
	exp[n++] = "d0";
	exp[n++] = "d2";
	exp[n++] = "s";
	EXPECT_LISTING(".", exp, n);
	EXPECT_LISTING("d0", exp, 0);

	/* rewinddir sees a name created after opendir */
	{
		DIR *d = opendir(".");
		struct dirent *de;
		int seen = 0;

		EXPECT(d, "opendir: %s", strerror(errno));
		while (readdir(d))
			;
		SYS(put_file("late", "", 0, 0644));
		rewinddir(d);
		while ((de = readdir(d)))
			if (!strcmp(de->d_name, "late"))
				seen++;
		closedir(d);
		EXPECT(seen == 1, "entry created before rewinddir seen %d times", seen);
	}
	return 0;
}

static int c_name_max(void)
{
	char name[300];
	struct stat st;

	memset(name, 'n', 255);
	name[255] = 0;
	SYS(put_file(name, "z", 1, 0644));
	SYS(stat(name, &st));
	SYS(unlink(name));
	memset(name, 'm', 256);
	name[256] = 0;
	EXPECT_ERR(open(name, O_CREAT | O_WRONLY, 0644), ENAMETOOLONG);
	return 0;
}

static int c_unlink_open(void)
{
	unsigned char model[35000], more[5000];
	struct stat st;
	int fd, fd2;

	fill_rand(model, 20000, 16);
	SYS(fd = open("f", O_CREAT | O_RDWR, 0644));
	SYS(write_all(fd, model, 20000));
	SYS(unlink("f"));
	EXPECT_ERR(stat("f", &st), ENOENT);
	EXPECT_ERR(open("f", O_RDONLY), ENOENT);
	EXPECT_LISTING(".", (const char **)NULL, 0);
	SYS(fstat(fd, &st));
	EXPECT(st.st_nlink == 0, "fstat nlink of unlinked open file is %ld", (long)st.st_nlink);
	EXPECT(st.st_size == 20000, "size of unlinked open file is %lld", (long long)st.st_size);
	VERIFY_FD(fd, model, 20000);
	fill_rand(more, sizeof more, 17);
	SYS(pwrite_all(fd, more, sizeof more, 30000));
	memset(model + 20000, 0, 10000);
	memcpy(model + 30000, more, sizeof more);
	VERIFY_FD(fd, model, 35000);
	SYS(fsync(fd));
	/* a new file under the same name is independent */
	SYS(fd2 = open("f", O_CREAT | O_EXCL | O_RDWR, 0644));
	SYS(write_all(fd2, "new", 3));
	VERIFY_FD(fd, model, 35000);
	VERIFY_FD(fd2, (const unsigned char *)"new", 3);
	SYS(ftruncate(fd, 1000));
	VERIFY_FD(fd, model, 1000);
	close(fd);
	close(fd2);
	VERIFY_PATH("f", (const unsigned char *)"new", 3);
	return 0;
}

static int c_rename(void)
{
	unsigned char A[6000], X[7000], Y[8000];
	struct stat st;
	ino_t ia, ix;
	long n1, n2;
	int fd;

	fill_rand(A, sizeof A, 18);
	fill_rand(X, sizeof X, 19);
	fill_rand(Y, sizeof Y, 20);
	/* within a directory */
	SYS(put_file("a", A, sizeof A, 0644));
	ia = ino_of("a");
	SYS(rename("a", "b"));
	EXPECT_ERR(stat("a", &st), ENOENT);
	VERIFY_PATH("b", A, sizeof A);
	EXPECT(ino_of("b") == ia, "rename changed the inode number");
	/* across directories, fd stays valid */
	SYS(mkdir("d1", 0755));
	SYS(mkdir("d2", 0755));
	SYS(fd = open("b", O_RDWR));
	SYS(rename("b", "d1/b"));
	SYS(pwrite_all(fd, "Z", 1, 0));
	close(fd);
	A[0] = 'Z';
	VERIFY_PATH("d1/b", A, sizeof A);
	EXPECT_ERR(stat("b", &st), ENOENT);
	/* over an existing file: old target gone, open fd on it keeps its data */
	SYS(put_file("d1/x", X, sizeof X, 0644));
	SYS(put_file("d1/y", Y, sizeof Y, 0644));
	ix = ino_of("d1/x");
	SYS(fd = open("d1/y", O_RDONLY));
	SYS(rename("d1/x", "d1/y"));
	EXPECT_ERR(stat("d1/x", &st), ENOENT);
	VERIFY_PATH("d1/y", X, sizeof X);
	EXPECT(ino_of("d1/y") == ix, "target does not carry the source inode");
	SYS(fstat(fd, &st));
	EXPECT(st.st_nlink == 0, "replaced target still has nlink %ld", (long)st.st_nlink);
	VERIFY_FD(fd, Y, sizeof Y);
	close(fd);
	{
		const char *e[] = { "b", "y" };
		EXPECT_LISTING("d1", e, 2);
	}
	/* a directory over an empty directory, across parents */
	SYS(mkdir("d1/e1", 0755));
	SYS(put_file("d1/e1/inner", "i", 1, 0644));
	SYS(mkdir("d2/e2", 0755));
	n1 = nlink_of("d1");
	n2 = nlink_of("d2");
	SYS(rename("d1/e1", "d2/e2"));
	EXPECT_ERR(stat("d1/e1", &st), ENOENT);
	SYS(stat("d2/e2/inner", &st));
	EXPECT(ino_of("d2/e2/..") == ino_of("d2"), "'..' of moved dir is not its new parent");
	EXPECT(nlink_of("d1") == n1 - 1 && nlink_of("d2") == n2,
	       "parent nlinks %ld/%ld after dir-over-empty-dir, expected %ld/%ld",
	       nlink_of("d1"), nlink_of("d2"), n1 - 1, n2);
	/* a directory onto a non-empty directory */
	SYS(mkdir("d1/n1", 0755));
	SYS(mkdir("d2/n2", 0755));
	SYS(put_file("d2/n2/z", "z", 1, 0644));
	EXPECT_ERR2(rename("d1/n1", "d2/n2"), ENOTEMPTY, EEXIST);
	SYS(stat("d1/n1", &st));
	SYS(stat("d2/n2/z", &st));
	/* type mismatches and loops */
	EXPECT_ERR(rename("d1/y", "d1/n1"), EISDIR);
	EXPECT_ERR(rename("d1/n1", "d1/y"), ENOTDIR);
	SYS(mkdir("p", 0755));
	SYS(mkdir("p/q", 0755));
	EXPECT_ERR(rename("p", "p/q/r"), EINVAL);
	EXPECT_ERR(rename("missing", "p/x"), ENOENT);
	/* a plain directory move updates both parents' link counts and '..' */
	n1 = nlink_of("d1");
	n2 = nlink_of("d2");
	SYS(rename("d1/n1", "d2/m"));
	EXPECT(nlink_of("d1") == n1 - 1 && nlink_of("d2") == n2 + 1,
	       "parent nlinks %ld/%ld after dir move, expected %ld/%ld",
	       nlink_of("d1"), nlink_of("d2"), n1 - 1, n2 + 1);
	EXPECT(ino_of("d2/m/..") == ino_of("d2"), "'..' of moved dir is stale");
	/* rename onto itself and onto another link of the same inode: no-ops */
	SYS(rename("d1/y", "d1/y"));
	VERIFY_PATH("d1/y", X, sizeof X);
	SYS(link("d1/y", "d1/y2"));
	SYS(rename("d1/y", "d1/y2"));
	SYS(stat("d1/y", &st));
	EXPECT(st.st_nlink == 2, "rename between two links of one inode changed nlink to %ld",
	       (long)st.st_nlink);
	return 0;
}

static int c_renameat2_noreplace(void)
{
	struct stat st;

	SYS(put_file("a", "AAAA", 4, 0644));
	SYS(put_file("b", "BBBBBB", 6, 0644));
	EXPECT_ERR(renameat2(AT_FDCWD, "a", AT_FDCWD, "b", RENAME_NOREPLACE), EEXIST);
	VERIFY_PATH("a", (const unsigned char *)"AAAA", 4);
	VERIFY_PATH("b", (const unsigned char *)"BBBBBB", 6);
	SYS(renameat2(AT_FDCWD, "a", AT_FDCWD, "c", RENAME_NOREPLACE));
	EXPECT_ERR(stat("a", &st), ENOENT);
	VERIFY_PATH("c", (const unsigned char *)"AAAA", 4);
	SYS(mkdir("d", 0755));
	SYS(mkdir("e", 0755));
	EXPECT_ERR(renameat2(AT_FDCWD, "d", AT_FDCWD, "e", RENAME_NOREPLACE), EEXIST);
	SYS(stat("d", &st));
	return 0;
}

static int c_renameat2_exchange(void)
{
	struct stat st;
	ino_t ia, ib, iA, iB;

	/* two files */
	SYS(put_file("a", "AAAA", 4, 0644));
	SYS(put_file("b", "BBBBBB", 6, 0644));
	ia = ino_of("a");
	ib = ino_of("b");
	SYS(renameat2(AT_FDCWD, "a", AT_FDCWD, "b", RENAME_EXCHANGE));
	VERIFY_PATH("a", (const unsigned char *)"BBBBBB", 6);
	VERIFY_PATH("b", (const unsigned char *)"AAAA", 4);
	EXPECT(ino_of("a") == ib && ino_of("b") == ia, "inode numbers not swapped");
	/* a file and a directory, across directories */
	SYS(mkdir("A", 0755));
	SYS(mkdir("B", 0755));
	SYS(put_file("A/f", "FFF", 3, 0644));
	SYS(mkdir("B/d", 0755));
	SYS(put_file("B/d/inner", "III", 3, 0644));
	iA = ino_of("A");
	iB = ino_of("B");
	EXPECT(nlink_of("A") == 2 && nlink_of("B") == 3, "setup nlinks %ld/%ld",
	       nlink_of("A"), nlink_of("B"));
	SYS(renameat2(AT_FDCWD, "A/f", AT_FDCWD, "B/d", RENAME_EXCHANGE));
	SYS(lstat("A/f", &st));
	EXPECT(S_ISDIR(st.st_mode), "A/f is not the directory after exchange");
	VERIFY_PATH("A/f/inner", (const unsigned char *)"III", 3);
	SYS(lstat("B/d", &st));
	EXPECT(S_ISREG(st.st_mode), "B/d is not the file after exchange");
	VERIFY_PATH("B/d", (const unsigned char *)"FFF", 3);
	EXPECT(ino_of("A/f/..") == iA, "'..' of exchanged directory is not its new parent A");
	EXPECT(nlink_of("A") == 3 && nlink_of("B") == 2,
	       "parent nlinks after file<->dir exchange: A %ld (expected 3), B %ld (expected 2)",
	       nlink_of("A"), nlink_of("B"));
	(void)iB;
	/* two directories in one parent */
	SYS(mkdir("x", 0755));
	SYS(mkdir("y", 0755));
	SYS(put_file("x/in_x", "", 0, 0644));
	SYS(renameat2(AT_FDCWD, "x", AT_FDCWD, "y", RENAME_EXCHANGE));
	SYS(stat("y/in_x", &st));
	EXPECT_ERR(stat("x/in_x", &st), ENOENT);
	EXPECT_ERR(renameat2(AT_FDCWD, "x", AT_FDCWD, "nope", RENAME_EXCHANGE), ENOENT);
	return 0;
}

static int c_hardlink(void)
{
	unsigned char A[9000];
	struct stat sa, sb, s0;

	fill_rand(A, sizeof A, 21);
	SYS(put_file("a", A, sizeof A, 0644));
	SYS(set_old_times("a"));
	SYS(lstat("a", &s0));
	tick();
	SYS(link("a", "b"));
	SYS(lstat("a", &sa));
	SYS(lstat("b", &sb));
	EXPECT(sa.st_ino == sb.st_ino, "link has a different inode");
	EXPECT(sa.st_nlink == 2 && sb.st_nlink == 2, "nlink %ld/%ld, expected 2",
	       (long)sa.st_nlink, (long)sb.st_nlink);
	EXPECT(ts_cmp(sa.st_ctim, s0.st_ctim) > 0, "link did not change ctime (%s -> %s)",
	       tss(s0.st_ctim), tss(sa.st_ctim));
	{
		int fd;
		SYS(fd = open("b", O_WRONLY));
		SYS(pwrite_all(fd, "shared", 6, 100));
		close(fd);
		memcpy(A + 100, "shared", 6);
		VERIFY_PATH("a", A, sizeof A);
	}
	EXPECT_ERR(link("a", "b"), EEXIST);
	SYS(mkdir("d", 0755));
	EXPECT_ERR(link("d", "d2"), EPERM);
	EXPECT_ERR(link("missing", "m2"), ENOENT);
	SYS(link("a", "d/c"));
	EXPECT(nlink_of("b") == 3, "nlink %ld after third link", nlink_of("b"));
	SYS(unlink("a"));
	EXPECT(nlink_of("b") == 2, "nlink %ld after unlinking one of three", nlink_of("b"));
	VERIFY_PATH("b", A, sizeof A);
	SYS(unlink("d/c"));
	EXPECT(nlink_of("b") == 1, "nlink %ld after unlinking two of three", nlink_of("b"));
	VERIFY_PATH("b", A, sizeof A);
	return 0;
}

static int c_symlink(void)
{
	char buf[PATH_MAX + 1], longt[4001];
	struct stat st;
	ssize_t n;

	SYS(put_file("target", "TTT", 3, 0644));
	SYS(symlink("target", "s"));
	n = readlink("s", buf, sizeof buf);
	EXPECT(n == 6 && !memcmp(buf, "target", 6), "readlink returned %zd '%.*s'",
	       n, (int)(n > 0 ? n : 0), buf);
	SYS(lstat("s", &st));
	EXPECT(S_ISLNK(st.st_mode), "lstat type is not a symlink (mode %o)", st.st_mode);
	EXPECT(st.st_size == 6, "symlink st_size %lld, expected 6", (long long)st.st_size);
	SYS(stat("s", &st));
	EXPECT(S_ISREG(st.st_mode) && st.st_ino == ino_of("target"), "stat does not follow");
	VERIFY_PATH("s", (const unsigned char *)"TTT", 3);
	EXPECT_ERR(open("s", O_RDONLY | O_NOFOLLOW), ELOOP);
	EXPECT_ERR(symlink("x", "s"), EEXIST);
	EXPECT_ERR(readlink("target", buf, sizeof buf), EINVAL);
	/* dangling */
	SYS(symlink("nowhere/x", "dang"));
	EXPECT_ERR(stat("dang", &st), ENOENT);
	SYS(lstat("dang", &st));
	/* long target */
	memset(longt, 'L', 4000);
	for (n = 100; n < 4000; n += 100)
		longt[n] = '/';
	longt[4000] = 0;
	SYS(symlink(longt, "long"));
	n = readlink("long", buf, sizeof buf);
	EXPECT(n == 4000 && !memcmp(buf, longt, 4000), "long readlink returned %zd", n);
	/* to a directory */
	SYS(mkdir("dir", 0755));
	SYS(put_file("dir/in", "in", 2, 0644));
	SYS(symlink("dir", "sd"));
	VERIFY_PATH("sd/in", (const unsigned char *)"in", 2);
	SYS(unlink("s"));
	SYS(stat("target", &st));
	return 0;
}

static void on_alarm(int sig)
{
	(void)sig;
}

static int c_fifo(void)
{
	static const char msg[] = "hello through a fifo\n";
	struct sigaction sa;
	struct stat st;
	char buf[256];
	size_t got = 0;
	ssize_t n;
	pid_t pid;
	int fd, status, e;

	SYS(mknod("p", S_IFIFO | 0644, 0));
	SYS(lstat("p", &st));
	EXPECT(S_ISFIFO(st.st_mode), "mknod S_IFIFO made mode %o", st.st_mode);
	EXPECT((st.st_mode & 07777) == 0644, "fifo mode %o", st.st_mode & 07777);
	SYS(mkfifo("p2", 0600));
	SYS(stat("p2", &st));
	EXPECT(S_ISFIFO(st.st_mode), "mkfifo made mode %o", st.st_mode);

	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_alarm;	/* no SA_RESTART: a stuck open returns EINTR */
	sigaction(SIGALRM, &sa, NULL);
	SYS(pid = fork());
	if (pid == 0) {
		alarm(10);
		fd = open("p", O_WRONLY);
		if (fd < 0)
			_exit(2);
		if (write(fd, msg, sizeof msg - 1) != (ssize_t)sizeof msg - 1)
			_exit(3);
		close(fd);
		_exit(0);
	}
	alarm(10);
	fd = open("p", O_RDONLY);
	if (fd < 0) {
		e = errno;
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		alarm(0);
		FAIL("open fifo for reading: %s", strerror(e));
	}
	while ((n = read(fd, buf + got, sizeof buf - got)) > 0)
		got += n;
	e = errno;
	alarm(0);
	close(fd);
	waitpid(pid, &status, 0);
	EXPECT(n == 0, "read from fifo: %s", strerror(e));
	EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	       "writer child failed (status %#x)", status);
	EXPECT(got == sizeof msg - 1 && !memcmp(buf, msg, got),
	       "message through the fifo differs (%zu bytes)", got);
	SYS(stat("p", &st));
	EXPECT(st.st_size == 0, "fifo st_size %lld after use", (long long)st.st_size);
	return 0;
}

static int c_mknod_special(void)
{
	struct stat st;

	SYS(mknod("sock", S_IFSOCK | 0644, 0));
	SYS(lstat("sock", &st));
	EXPECT(S_ISSOCK(st.st_mode), "mknod S_IFSOCK made mode %o", st.st_mode);
	SYS(mknod("reg", S_IFREG | 0640, 0));
	SYS(lstat("reg", &st));
	EXPECT(S_ISREG(st.st_mode) && st.st_size == 0, "mknod S_IFREG made mode %o",
	       st.st_mode);
	if (geteuid() == 0) {
		SYS(mknod("chr", S_IFCHR | 0666, makedev(1, 3)));
		SYS(lstat("chr", &st));
		EXPECT(S_ISCHR(st.st_mode), "mknod S_IFCHR made mode %o", st.st_mode);
		EXPECT(st.st_rdev == makedev(1, 3), "char dev st_rdev %u:%u, expected 1:3",
		       major(st.st_rdev), minor(st.st_rdev));
		SYS(mknod("blk", S_IFBLK | 0660, makedev(7, 42)));
		SYS(lstat("blk", &st));
		EXPECT(S_ISBLK(st.st_mode), "mknod S_IFBLK made mode %o", st.st_mode);
		EXPECT(st.st_rdev == makedev(7, 42), "block dev st_rdev %u:%u, expected 7:42",
		       major(st.st_rdev), minor(st.st_rdev));
	} else {
		EXPECT_ERR(mknod("chr", S_IFCHR | 0666, makedev(1, 3)), EPERM);
	}
	return 0;
}

/* ---------- checks: attributes and times ---------- */

static int c_chmod_ctime(void)
{
	struct stat s0, s1;
	int fd;

	SYS(put_file("f", "data", 4, 0644));
	SYS(set_old_times("f"));
	SYS(stat("f", &s0));
	tick();
	SYS(chmod("f", 0600));
	SYS(stat("f", &s1));
	EXPECT((s1.st_mode & 07777) == 0600, "mode %o after chmod 0600", s1.st_mode & 07777);
	EXPECT(ts_cmp(s1.st_ctim, s0.st_ctim) > 0, "chmod did not change ctime (%s -> %s)",
	       tss(s0.st_ctim), tss(s1.st_ctim));
	EXPECT(ts_cmp(s1.st_mtim, s0.st_mtim) == 0, "chmod changed mtime (%s -> %s)",
	       tss(s0.st_mtim), tss(s1.st_mtim));
	SYS(fd = open("f", O_RDONLY));
	tick();
	SYS(fchmod(fd, 04751));
	SYS(fstat(fd, &s0));
	EXPECT((s0.st_mode & 07777) == 04751, "mode %o after fchmod 04751", s0.st_mode & 07777);
	EXPECT(ts_cmp(s0.st_ctim, s1.st_ctim) > 0, "fchmod did not change ctime");
	close(fd);
	SYS(mkdir("d", 0755));
	SYS(chmod("d", 01777));
	SYS(stat("d", &s0));
	EXPECT((s0.st_mode & 07777) == 01777, "dir mode %o after chmod 01777",
	       s0.st_mode & 07777);
	return 0;
}

static int c_chown_ctime(void)
{
	struct stat s0, s1;
	int root = geteuid() == 0;
	uid_t u = root ? 1234 : geteuid();
	gid_t g = root ? 5678 : getegid();

	SYS(put_file("f", "data", 4, 0644));
	SYS(set_old_times("f"));
	SYS(stat("f", &s0));
	tick();
	SYS(chown("f", u, g));
	SYS(stat("f", &s1));
	EXPECT(s1.st_uid == u && s1.st_gid == g, "owner %d:%d after chown %d:%d",
	       s1.st_uid, s1.st_gid, u, g);
	EXPECT(ts_cmp(s1.st_ctim, s0.st_ctim) > 0, "chown did not change ctime (%s -> %s)",
	       tss(s0.st_ctim), tss(s1.st_ctim));
	EXPECT(ts_cmp(s1.st_mtim, s0.st_mtim) == 0, "chown changed mtime");
	/* chown clears set-user-ID on a regular file (even for root) */
	SYS(chmod("f", 04755));
	SYS(chown("f", u, g));
	SYS(stat("f", &s1));
	EXPECT(!(s1.st_mode & S_ISUID), "chown left S_ISUID set (mode %o)", s1.st_mode & 07777);
	/* on anything but a directory: a FIFO too (pjdfstest chown/00.t) */
	SYS(mkfifo("p", 0644));
	SYS(chown("p", u, g));
	SYS(chmod("p", 06555));
	SYS(chown("p", u, g));
	SYS(stat("p", &s1));
	EXPECT((s1.st_mode & 07777) == 0555, "chown of a FIFO left mode %o (want 555)",
	       s1.st_mode & 07777);
	SYS(unlink("p"));
	SYS(symlink("f", "s"));
	if (root) {
		SYS(lchown("s", 4321, 8765));
		SYS(lstat("s", &s1));
		EXPECT(s1.st_uid == 4321 && s1.st_gid == 8765, "lchown: symlink owner %d:%d",
		       s1.st_uid, s1.st_gid);
		SYS(stat("f", &s1));
		EXPECT(s1.st_uid == u, "lchown followed the symlink");
	} else {
		EXPECT_ERR(chown("f", 0, (gid_t)-1), EPERM);
	}
	return 0;
}

static int c_utimens(void)
{
	struct timespec ts[2], before, after;
	struct stat s0, s1;
	int fd;

	SYS(put_file("f", "data", 4, 0644));
	ts[0] = (struct timespec){ 1234567890, 123456789 };
	ts[1] = (struct timespec){ 1500000000, 987654321 };
	SYS(utimensat(AT_FDCWD, "f", ts, 0));
	SYS(stat("f", &s0));
	EXPECT(ts_cmp(s0.st_atim, ts[0]) == 0, "atime %s, expected %s", tss(s0.st_atim),
	       tss(ts[0]));
	EXPECT(ts_cmp(s0.st_mtim, ts[1]) == 0, "mtime %s, expected %s", tss(s0.st_mtim),
	       tss(ts[1]));
	/* UTIME_OMIT keeps atime, UTIME_NOW sets mtime to now, ctime moves */
	tick();
	clock_gettime(CLOCK_REALTIME, &before);
	ts[0] = (struct timespec){ 0, UTIME_OMIT };
	ts[1] = (struct timespec){ 0, UTIME_NOW };
	SYS(utimensat(AT_FDCWD, "f", ts, 0));
	clock_gettime(CLOCK_REALTIME, &after);
	SYS(stat("f", &s1));
	EXPECT(ts_cmp(s1.st_atim, s0.st_atim) == 0, "UTIME_OMIT changed atime (%s -> %s)",
	       tss(s0.st_atim), tss(s1.st_atim));
	EXPECT(s1.st_mtim.tv_sec >= before.tv_sec - 1 && s1.st_mtim.tv_sec <= after.tv_sec + 1,
	       "UTIME_NOW mtime %s not near now %s", tss(s1.st_mtim), tss(after));
	EXPECT(ts_cmp(s1.st_ctim, s0.st_ctim) > 0, "utimensat did not change ctime");
	ts[0] = (struct timespec){ 0, UTIME_NOW };
	ts[1] = (struct timespec){ 0, UTIME_OMIT };
	SYS(utimensat(AT_FDCWD, "f", ts, 0));
	SYS(stat("f", &s0));
	EXPECT(ts_cmp(s0.st_mtim, s1.st_mtim) == 0, "UTIME_OMIT changed mtime");
	EXPECT(s0.st_atim.tv_sec >= before.tv_sec - 1, "UTIME_NOW atime %s not near now",
	       tss(s0.st_atim));
	/* NULL = both now */
	SYS(utimensat(AT_FDCWD, "f", NULL, 0));
	SYS(stat("f", &s0));
	EXPECT(s0.st_mtim.tv_sec >= before.tv_sec - 1 && s0.st_atim.tv_sec >= before.tv_sec - 1,
	       "utimensat(NULL) did not set times to now");
	/* futimens, a pre-1970 and a post-2038 time */
	SYS(fd = open("f", O_RDONLY));
	ts[0] = (struct timespec){ -315619200, 5 };
	ts[1] = (struct timespec){ 4102444800LL, 999999999 };
	SYS(futimens(fd, ts));
	SYS(fstat(fd, &s0));
	close(fd);
	EXPECT(ts_cmp(s0.st_atim, ts[0]) == 0, "pre-1970 atime %s, expected %s",
	       tss(s0.st_atim), tss(ts[0]));
	EXPECT(ts_cmp(s0.st_mtim, ts[1]) == 0, "post-2038 mtime %s, expected %s",
	       tss(s0.st_mtim), tss(ts[1]));
	/* a directory */
	SYS(mkdir("d", 0755));
	ts[0] = (struct timespec){ 1111111111, 1 };
	ts[1] = (struct timespec){ 1222222222, 2 };
	SYS(utimensat(AT_FDCWD, "d", ts, 0));
	SYS(stat("d", &s0));
	EXPECT(ts_cmp(s0.st_mtim, ts[1]) == 0, "dir mtime %s, expected %s", tss(s0.st_mtim),
	       tss(ts[1]));
	return 0;
}

static int c_write_times(void)
{
	struct stat s0, s1, s2;
	char buf[16];
	int fd;

	SYS(put_file("f", "0123456789", 10, 0644));
	SYS(set_old_times("f"));
	SYS(stat("f", &s0));
	tick();
	SYS(fd = open("f", O_RDWR));
	SYS(pwrite_all(fd, "ab", 2, 3));
	SYS(fstat(fd, &s1));
	EXPECT(ts_cmp(s1.st_mtim, s0.st_mtim) > 0, "write did not change mtime (%s -> %s)",
	       tss(s0.st_mtim), tss(s1.st_mtim));
	EXPECT(ts_cmp(s1.st_ctim, s0.st_ctim) > 0, "write did not change ctime (%s -> %s)",
	       tss(s0.st_ctim), tss(s1.st_ctim));
	tick();
	EXPECT(pread(fd, buf, sizeof buf, 0) == 10, "pread");
	SYS(fstat(fd, &s2));
	EXPECT(ts_cmp(s2.st_mtim, s1.st_mtim) == 0 && ts_cmp(s2.st_ctim, s1.st_ctim) == 0,
	       "read changed mtime or ctime");
	tick();
	SYS(ftruncate(fd, 5));
	SYS(fstat(fd, &s1));
	EXPECT(ts_cmp(s1.st_mtim, s2.st_mtim) > 0 && ts_cmp(s1.st_ctim, s2.st_ctim) > 0,
	       "ftruncate did not change mtime/ctime");
	close(fd);
	/* a write through a second open (after close) also moves mtime */
	SYS(set_old_times("f"));
	SYS(stat("f", &s0));
	tick();
	SYS(fd = open("f", O_WRONLY | O_APPEND));
	SYS(write_all(fd, "x", 1));
	close(fd);
	SYS(stat("f", &s1));
	EXPECT(ts_cmp(s1.st_mtim, s0.st_mtim) > 0 && ts_cmp(s1.st_ctim, s0.st_ctim) > 0,
	       "append did not change mtime/ctime");
	return 0;
}

static int c_dir_times(void)
{
	struct stat s0, s1;

#define DIR_STEP(what, op) do { \
	SYS(set_old_times("d")); \
	SYS(stat("d", &s0)); \
	tick(); \
	SYS(op); \
	SYS(stat("d", &s1)); \
	EXPECT(ts_cmp(s1.st_mtim, s0.st_mtim) > 0, what " did not change dir mtime (%s -> %s)", \
	       tss(s0.st_mtim), tss(s1.st_mtim)); \
	EXPECT(ts_cmp(s1.st_ctim, s0.st_ctim) > 0, what " did not change dir ctime (%s -> %s)", \
	       tss(s0.st_ctim), tss(s1.st_ctim)); \
} while (0)

	SYS(mkdir("d", 0755));
	SYS(mkdir("e", 0755));
	DIR_STEP("create", put_file("d/f", "x", 1, 0644));
	DIR_STEP("rename within", rename("d/f", "d/g"));
	DIR_STEP("unlink", unlink("d/g"));
	DIR_STEP("mkdir", mkdir("d/sub", 0755));
	DIR_STEP("rmdir", rmdir("d/sub"));
	DIR_STEP("symlink", symlink("x", "d/s"));
	DIR_STEP("rename out", rename("d/s", "e/s"));
	DIR_STEP("rename in", rename("e/s", "d/s"));
	SYS(put_file("e/h", "", 0, 0644));
	DIR_STEP("link", link("e/h", "d/l"));
	return 0;
#undef DIR_STEP
}

static int c_xattr(void)
{
	unsigned char big[1000], rb[8192];
	char list[4096];
	struct stat s0, s1;
	ssize_t n;
	int fd, i, found_a = 0, found_big = 0, found_empty = 0;

	SYS(put_file("f", "data", 4, 0644));
	SYS(setxattr("f", "user.a", "v1", 2, 0));
	n = getxattr("f", "user.a", NULL, 0);
	EXPECT(n == 2, "getxattr size query returned %zd (%s)", n, strerror(errno));
	n = getxattr("f", "user.a", rb, sizeof rb);
	EXPECT(n == 2 && !memcmp(rb, "v1", 2), "getxattr user.a returned %zd", n);
	EXPECT_ERR(setxattr("f", "user.a", "v9", 2, XATTR_CREATE), EEXIST);
	EXPECT_ERR(setxattr("f", "user.b", "v9", 2, XATTR_REPLACE), ENODATA);
	SYS(setxattr("f", "user.a", "value2", 6, XATTR_REPLACE));
	n = getxattr("f", "user.a", rb, sizeof rb);
	EXPECT(n == 6 && !memcmp(rb, "value2", 6), "user.a after XATTR_REPLACE: %zd bytes", n);
	fill_rand(big, 1000, 22);
	SYS(setxattr("f", "user.big", big, 1000, XATTR_CREATE));
	n = getxattr("f", "user.big", rb, sizeof rb);
	EXPECT(n == 1000 && !memcmp(rb, big, 1000), "1000-byte value read back as %zd bytes", n);
	EXPECT_ERR(getxattr("f", "user.big", rb, 100), ERANGE);
	SYS(setxattr("f", "user.empty", "", 0, 0));
	n = getxattr("f", "user.empty", rb, sizeof rb);
	EXPECT(n == 0, "empty value read back as %zd bytes", n);
	EXPECT_ERR(getxattr("f", "user.none", rb, sizeof rb), ENODATA);

	n = listxattr("f", NULL, 0);
	EXPECT(n > 0, "listxattr size query returned %zd", n);
	n = listxattr("f", list, sizeof list);
	EXPECT(n > 0, "listxattr returned %zd (%s)", n, strerror(errno));
	for (i = 0; i < n; i += strlen(list + i) + 1) {
		const char *nm = list + i;
		if (!strcmp(nm, "user.a"))
			found_a++;
		else if (!strcmp(nm, "user.big"))
			found_big++;
		else if (!strcmp(nm, "user.empty"))
			found_empty++;
		else if (!strncmp(nm, "user.", 5))
			FAIL("listxattr shows unexpected '%s'", nm);
	}
	EXPECT(found_a == 1 && found_big == 1 && found_empty == 1,
	       "listxattr counts a=%d big=%d empty=%d", found_a, found_big, found_empty);
	EXPECT_ERR(listxattr("f", list, 3), ERANGE);

	SYS(stat("f", &s0));
	tick();
	SYS(removexattr("f", "user.a"));
	SYS(stat("f", &s1));
	EXPECT(ts_cmp(s1.st_ctim, s0.st_ctim) > 0, "removexattr did not change ctime");
	EXPECT_ERR(getxattr("f", "user.a", rb, sizeof rb), ENODATA);
	EXPECT_ERR(removexattr("f", "user.a"), ENODATA);

	/* fd variants, a directory, many names */
	SYS(fd = open("f", O_RDONLY));
	SYS(fsetxattr(fd, "user.fd", "FD", 2, 0));
	n = fgetxattr(fd, "user.fd", rb, sizeof rb);
	EXPECT(n == 2 && !memcmp(rb, "FD", 2), "fgetxattr returned %zd", n);
	close(fd);
	SYS(mkdir("d", 0755));
	SYS(setxattr("d", "user.dir", "dv", 2, 0));
	n = getxattr("d", "user.dir", rb, sizeof rb);
	EXPECT(n == 2 && !memcmp(rb, "dv", 2), "directory xattr returned %zd", n);
	SYS(put_file("many", "", 0, 0644));
	for (i = 0; i < 30; i++) {
		char nm[32], v[32];
		snprintf(nm, sizeof nm, "user.k%02d", i);
		snprintf(v, sizeof v, "value-%d", i);
		SYS(setxattr("many", nm, v, strlen(v), XATTR_CREATE));
	}
	n = listxattr("many", list, sizeof list);
	{
		int cnt = 0;
		for (i = 0; i < n; i += strlen(list + i) + 1)
			if (!strncmp(list + i, "user.k", 6))
				cnt++;
		EXPECT(cnt == 30, "listxattr shows %d of 30 names", cnt);
	}
	n = getxattr("many", "user.k17", rb, sizeof rb);
	EXPECT(n == 8 && !memcmp(rb, "value-17", 8), "user.k17 returned %zd", n);
	return 0;
}

/* separate from xattr_user: ext4 with 4 KiB blocks cannot hold it (ENOSPC) */
static int c_xattr_4k(void)
{
	unsigned char big[4096], rb[8192];
	ssize_t n;

	SYS(put_file("f", "data", 4, 0644));
	fill_rand(big, sizeof big, 41);
	SYS(setxattr("f", "user.big", big, sizeof big, XATTR_CREATE));
	n = getxattr("f", "user.big", NULL, 0);
	EXPECT(n == 4096, "size query returned %zd", n);
	n = getxattr("f", "user.big", rb, sizeof rb);
	EXPECT(n == 4096 && !memcmp(rb, big, 4096), "4 KiB value read back as %zd bytes", n);
	EXPECT_ERR(getxattr("f", "user.big", rb, 4095), ERANGE);
	big[0] ^= 0xff;
	SYS(setxattr("f", "user.big", big, sizeof big, XATTR_REPLACE));
	n = getxattr("f", "user.big", rb, sizeof rb);
	EXPECT(n == 4096 && !memcmp(rb, big, 4096), "replaced 4 KiB value read back wrong");
	SYS(removexattr("f", "user.big"));
	return 0;
}

/* ---------- checks: allocation ---------- */

static int c_fallocate_mode0(void)
{
	static unsigned char model[2 * MiB + 64 * KiB];
	int fd;

	fill_rand(model, 4096, 23);
	SYS(put_file("f", model, 4096, 0644));
	SYS(fd = open("f", O_RDWR));
	SYS(fallocate(fd, 0, 0, MiB));
	VERIFY_FD(fd, model, MiB);
	SYS(fallocate(fd, 0, 2 * MiB, 64 * KiB));
	VERIFY_FD(fd, model, 2 * MiB + 64 * KiB);
	SYS(fallocate(fd, 0, 0, 4096));
	VERIFY_FD(fd, model, 2 * MiB + 64 * KiB);
	/* allocated space is written like any other */
	fill_rand(model + 500000, 70000, 24);
	SYS(pwrite_all(fd, model + 500000, 70000, 500000));
	VERIFY_FD(fd, model, 2 * MiB + 64 * KiB);
	close(fd);
	return 0;
}

static int c_fallocate_keep_size(void)
{
	unsigned char model[9000];
	int fd;

	memset(model, 0, sizeof model);
	fill_rand(model, 5000, 25);
	SYS(put_file("f", model, 5000, 0644));
	SYS(fd = open("f", O_RDWR));
	SYS(fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, MiB));
	VERIFY_FD(fd, model, 5000);
	SYS(fallocate(fd, FALLOC_FL_KEEP_SIZE, MiB, MiB));
	VERIFY_FD(fd, model, 5000);
	fill_rand(model + 8000, 1000, 26);
	SYS(pwrite_all(fd, model + 8000, 1000, 8000));
	VERIFY_FD(fd, model, 9000);
	close(fd);
	return 0;
}

static int c_punch_hole(void)
{
	enum { N = 256 * 1024 + 1000 };
	static unsigned char model[N];
	static const long holes[][2] = {
		{ 65536, 65536 }, { 1000, 5000 }, { 16380, 20010 }, { N - 100, 200 }, { 7, 1 },
	};
	unsigned i;
	int fd;

	fill_rand(model, N, 27);
	SYS(fd = open("f", O_CREAT | O_RDWR, 0644));
	SYS(write_all(fd, model, N));
	for (i = 0; i < sizeof holes / sizeof holes[0]; i++) {
		long off = holes[i][0], len = holes[i][1];
		SYS(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len));
		if (off + len > N)
			len = N - off;
		memset(model + off, 0, len);
		if (verify_fd_(fd, model, N, __LINE__)) {
			char why[sizeof g_why];
			memcpy(why, g_why, sizeof why);
			FAIL("after punching [%ld,+%ld): %s", holes[i][0], holes[i][1], why);
		}
	}
	close(fd);
	VERIFY_PATH("f", model, N);
	return 0;
}

/* punching whole aligned chunks must give physical space back (SPEC G5) */
static int c_punch_hole_frees(void)
{
	size_t n = 4 * MiB;
	unsigned char *buf = malloc(n);
	struct stat s0, s1;
	int fd;

	EXPECT(buf, "out of memory");
	fill_rand(buf, n, 28);
	SYS(fd = open("f", O_CREAT | O_RDWR, 0644));
	SYS(write_all(fd, buf, n));
	SYS(fsync(fd));
	SYS(fstat(fd, &s0));
	SYS(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, MiB, 2 * MiB));
	SYS(fsync(fd));
	SYS(fstat(fd, &s1));
	EXPECT(s1.st_size == (off_t)n, "punch changed the size");
	EXPECT((s0.st_blocks - s1.st_blocks) * 512 >= MiB,
	       "punching 2 MiB of 4 MiB random data freed only %lld bytes (st_blocks %lld -> %lld)",
	       (long long)(s0.st_blocks - s1.st_blocks) * 512, (long long)s0.st_blocks,
	       (long long)s1.st_blocks);
	memset(buf + MiB, 0, 2 * MiB);
	VERIFY_FD(fd, buf, n);
	close(fd);
	free(buf);
	return 0;
}

static int c_zero_range(void)
{
	enum { N = 200000 };
	static unsigned char model[N + 4000];
	int fd;

	fill_rand(model, N, 29);
	SYS(fd = open("f", O_CREAT | O_RDWR, 0644));
	SYS(write_all(fd, model, N));
	SYS(fallocate(fd, FALLOC_FL_ZERO_RANGE, 3000, 40000));
	memset(model + 3000, 0, 40000);
	VERIFY_FD(fd, model, N);
	SYS(fallocate(fd, FALLOC_FL_ZERO_RANGE, 65536, 32768));
	memset(model + 65536, 0, 32768);
	VERIFY_FD(fd, model, N);
	SYS(fallocate(fd, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, N - 10, 5000));
	memset(model + N - 10, 0, 10);
	VERIFY_FD(fd, model, N);
	SYS(fallocate(fd, FALLOC_FL_ZERO_RANGE, N - 1000, 5000));
	memset(model + N - 1000, 0, 5000);
	VERIFY_FD(fd, model, N + 4000);
	close(fd);
	return 0;
}

static int c_seek_data_hole(void)
{
	unsigned char buf[64 * KiB];
	off_t r;
	int fd;

	fill_rand(buf, sizeof buf, 30);
	SYS(fd = open("f", O_CREAT | O_RDWR, 0644));
	SYS(ftruncate(fd, 8 * MiB));
	SYS(pwrite_all(fd, buf, sizeof buf, MiB));
	SYS(pwrite_all(fd, buf, 4096, 5 * MiB));
	r = lseek(fd, 0, SEEK_DATA);
	EXPECT(r >= 0, "SEEK_DATA(0): %s (%s)", strerror(errno), errname(errno));
	EXPECT(r <= MiB && r > MiB - 128 * KiB,
	       "SEEK_DATA(0) = %lld, expected within the chunk holding 1 MiB", (long long)r);
	r = lseek(fd, MiB, SEEK_HOLE);
	EXPECT(r >= MiB + 64 * KiB && r <= 8 * MiB,
	       "SEEK_HOLE(1 MiB) = %lld, expected >= %ld", (long long)r, MiB + 64 * KiB);
	r = lseek(fd, 2 * MiB, SEEK_DATA);
	EXPECT(r <= 5 * MiB && r > 5 * MiB - 128 * KiB,
	       "SEEK_DATA(2 MiB) = %lld, expected near 5 MiB", (long long)r);
	r = lseek(fd, 5 * MiB, SEEK_HOLE);
	EXPECT(r >= 5 * MiB + 4096 && r <= 8 * MiB, "SEEK_HOLE(5 MiB) = %lld", (long long)r);
	EXPECT_ERR(lseek(fd, 6 * MiB, SEEK_DATA), ENXIO);
	EXPECT_ERR(lseek(fd, 8 * MiB, SEEK_DATA), ENXIO);
	EXPECT_ERR(lseek(fd, 8 * MiB + 1, SEEK_HOLE), ENXIO);
	r = lseek(fd, 8 * MiB - 1, SEEK_HOLE);
	EXPECT(r == 8 * MiB - 1 || r == 8 * MiB, "SEEK_HOLE(size-1) = %lld", (long long)r);
	/* also after the data is durable */
	SYS(fsync(fd));
	EXPECT_ERR(lseek(fd, 6 * MiB, SEEK_DATA), ENXIO);
	r = lseek(fd, 0, SEEK_DATA);
	EXPECT(r <= MiB && r > MiB - 128 * KiB, "SEEK_DATA(0) after fsync = %lld", (long long)r);
	close(fd);
	return 0;
}

static int c_sparse_big(void)
{
	static unsigned char A[64 * KiB], B[64 * KiB], buf[64 * KiB + 200];
	const off_t oa = 4 * GiB, ob = 6 * GiB + 12345;
	struct stat st;
	int fd;

	fill_rand(A, sizeof A, 31);
	fill_rand(B, sizeof B, 32);
	SYS(fd = open("f", O_CREAT | O_RDWR, 0644));
	SYS(pwrite_all(fd, A, sizeof A, oa));
	SYS(pwrite_all(fd, B, sizeof B, ob));
	SYS(fstat(fd, &st));
	EXPECT(st.st_size == ob + (off_t)sizeof B, "size %lld, expected %lld",
	       (long long)st.st_size, (long long)(ob + sizeof B));
	EXPECT(pread_full(fd, buf, sizeof A, oa) == sizeof A && !memcmp(buf, A, sizeof A),
	       "data at 4 GiB differs");
	EXPECT(pread_full(fd, buf, sizeof B, ob) == sizeof B && !memcmp(buf, B, sizeof B),
	       "data at 6 GiB differs");
	EXPECT(pread_full(fd, buf, sizeof buf, 5 * GiB) == sizeof buf && is_zero(buf, sizeof buf),
	       "hole at 5 GiB does not read zeros");
	EXPECT(pread_full(fd, buf, 200, oa - 100) == 200 && is_zero(buf, 100) &&
	       !memcmp(buf + 100, A, 100), "bytes around 4 GiB wrong");
	EXPECT(pread_full(fd, buf, 100, 1000) == 100 && is_zero(buf, 100), "start not zeros");
	SYS(fsync(fd));
	SYS(fstat(fd, &st));
	EXPECT(st.st_blocks * 512 <= 8 * MiB,
	       "st_blocks %lld (%lld bytes) for 128 KiB of data in a %lld-byte sparse file",
	       (long long)st.st_blocks, (long long)st.st_blocks * 512, (long long)st.st_size);
	/* truncate between the regions, grow back: the tail is gone */
	SYS(ftruncate(fd, oa + 1000));
	SYS(ftruncate(fd, ob + sizeof B));
	EXPECT(pread_full(fd, buf, 1000, oa) == 1000 && !memcmp(buf, A, 1000),
	       "data at 4 GiB lost by truncate");
	EXPECT(pread_full(fd, buf, 2000, oa + 1000) == 2000 && is_zero(buf, 2000),
	       "truncated region at 4 GiB+1000 not zero");
	EXPECT(pread_full(fd, buf, sizeof B, ob) == sizeof B && is_zero(buf, sizeof B),
	       "truncated data at 6 GiB came back");
	close(fd);
	return 0;
}

/* ---------- checks: I/O modes and sync ---------- */

static int c_o_direct(void)
{
	unsigned char *w1, *w2, *r, bbuf[32768], x[4096];
	struct stat st;
	int fd, bfd;

	EXPECT(!posix_memalign((void **)&w1, 4096, 16384) &&
	       !posix_memalign((void **)&w2, 4096, 16384) &&
	       !posix_memalign((void **)&r, 4096, 32768), "posix_memalign");
	fill_rand(w1, 16384, 33);
	fill_rand(w2, 16384, 34);
	SYS(fd = open("f", O_CREAT | O_RDWR | O_DIRECT, 0644));
	EXPECT(pwrite(fd, w1, 16384, 0) == 16384, "O_DIRECT pwrite at 0: %s", strerror(errno));
	EXPECT(pwrite(fd, w2, 16384, 16384) == 16384, "O_DIRECT pwrite at 16 KiB: %s",
	       strerror(errno));
	EXPECT(pread(fd, r, 32768, 0) == 32768, "O_DIRECT pread: %s", strerror(errno));
	EXPECT(!memcmp(r, w1, 16384) && !memcmp(r + 16384, w2, 16384), "O_DIRECT readback differs");
	SYS(fstat(fd, &st));
	EXPECT(st.st_size == 32768, "size %lld after O_DIRECT writes", (long long)st.st_size);
	/* coherence with a buffered descriptor, both ways */
	SYS(bfd = open("f", O_RDWR));
	EXPECT(pread_full(bfd, bbuf, sizeof bbuf, 0) == sizeof bbuf &&
	       !memcmp(bbuf, w1, 16384) && !memcmp(bbuf + 16384, w2, 16384),
	       "buffered read after O_DIRECT write differs");
	fill_rand(x, sizeof x, 35);
	SYS(pwrite_all(bfd, x, sizeof x, 4096));
	EXPECT(pread(fd, r, 16384, 0) == 16384, "O_DIRECT pread after buffered write: %s",
	       strerror(errno));
	EXPECT(!memcmp(r, w1, 4096) && !memcmp(r + 4096, x, 4096) &&
	       !memcmp(r + 8192, w1 + 8192, 8192), "O_DIRECT read misses a buffered write");
	close(bfd);
	close(fd);
	free(w1);
	free(w2);
	free(r);
	return 0;
}

/* physical bytes the volume reports for "f" (virtual xattr) */
static long long xattr_physical(void)
{
	char v[64];
	ssize_t n = getxattr("f", "user.csdfs.physical", v, sizeof v - 1);

	if (n <= 0)
		return -1;
	v[n] = 0;
	return atoll(v);
}

/* st_blocks follows the data after fsync and close, also when the kernel
 * cached the attributes before the file's blocks changed (SPEC §5) */
static int c_blocks_follow_data(void)
{
	enum { N = 1 << 20 };
	unsigned char *text, *rnd;
	struct stat st;
	int fd;

	EXPECT(!posix_memalign((void **)&text, 4096, N) &&
	       !posix_memalign((void **)&rnd, 4096, N), "posix_memalign");
	for (size_t i = 0; i < N; i++)
		text[i] = "compressible text, the same line again\n"[i % 39];
	fill_rand(rnd, N, 37);
	SYS(fd = open("f", O_CREAT | O_RDWR | O_DIRECT, 0644));
	EXPECT(pwrite(fd, text, N, 0) == N, "O_DIRECT pwrite: %s", strerror(errno));
	SYS(fsync(fd));
	SYS(fstat(fd, &st));
	EXPECT(st.st_blocks * 512 < N / 4, "1 MiB of text takes %lld bytes",
	       (long long)st.st_blocks * 512);
	/* the same blocks again: the kernel keeps what it has */
	EXPECT(pwrite(fd, text, N, 0) == N, "O_DIRECT pwrite: %s", strerror(errno));
	SYS(fsync(fd));
	SYS(fstat(fd, &st));
	EXPECT(st.st_blocks * 512 == xattr_physical(), "st_blocks*512 %lld, physical xattr %lld",
	       (long long)st.st_blocks * 512, xattr_physical());
	/* incompressible now: st_blocks must grow at fsync */
	EXPECT(pwrite(fd, rnd, N, 0) == N, "O_DIRECT pwrite: %s", strerror(errno));
	SYS(fsync(fd));
	SYS(fstat(fd, &st));
	EXPECT(st.st_blocks * 512 >= N, "after an incompressible overwrite and fsync st_blocks*512 "
	       "is %lld (physical xattr %lld)", (long long)st.st_blocks * 512, xattr_physical());
	close(fd);
	/* and shrink again through the page cache, seen after close */
	SYS(fd = open("f", O_RDWR));
	SYS(pwrite_all(fd, text, N, 0));
	close(fd);
	SYS(stat("f", &st));
	EXPECT(st.st_blocks * 512 < N / 4 && st.st_blocks * 512 == xattr_physical(),
	       "after a compressible buffered overwrite and close st_blocks*512 is %lld "
	       "(physical xattr %lld)", (long long)st.st_blocks * 512, xattr_physical());
	free(text);
	free(rnd);
	return 0;
}

static int c_o_sync(void)
{
	unsigned char model[14096];
	int fd, fl;

	fill_rand(model, sizeof model, 36);
	SYS(fd = open("s", O_CREAT | O_WRONLY | O_SYNC, 0644));
	SYS(fl = fcntl(fd, F_GETFL));
	EXPECT((fl & O_SYNC) == O_SYNC, "O_SYNC not reported by F_GETFL (%#x)", fl);
	SYS(write_all(fd, model, 10000));
	SYS(pwrite_all(fd, model + 10000, 4096, 10000));
	close(fd);
	VERIFY_PATH("s", model, 14096);
	SYS(fd = open("d", O_CREAT | O_WRONLY | O_DSYNC, 0644));
	SYS(fl = fcntl(fd, F_GETFL));
	EXPECT(fl & O_DSYNC, "O_DSYNC not reported by F_GETFL (%#x)", fl);
	SYS(pwrite_all(fd, model, sizeof model, 0));
	close(fd);
	VERIFY_PATH("d", model, sizeof model);
	return 0;
}

static int c_fsync(void)
{
	unsigned char buf[100000];
	int fd, dfd;

	fill_rand(buf, sizeof buf, 37);
	SYS(fd = open("f", O_CREAT | O_RDWR, 0644));
	SYS(write_all(fd, buf, sizeof buf));
	SYS(fsync(fd));
	SYS(pwrite_all(fd, buf, 5000, 3));
	SYS(fdatasync(fd));
	SYS(syncfs(fd));
	SYS(dfd = open(".", O_RDONLY | O_DIRECTORY));
	SYS(fsync(dfd));
	close(dfd);
	close(fd);
	/* fsync of a read-only descriptor is allowed too */
	SYS(fd = open("f", O_RDONLY));
	SYS(fsync(fd));
	close(fd);
	return 0;
}

static int c_statfs(void)
{
	struct statvfs v0, v1;
	size_t n = 16 * MiB;
	unsigned char *buf = malloc(n);
	long long used;
	int fd, i;

	EXPECT(buf, "out of memory");
	SYS(statvfs(".", &v0));
	EXPECT(v0.f_bsize > 0 && v0.f_frsize > 0, "f_bsize %lu f_frsize %lu", v0.f_bsize,
	       v0.f_frsize);
	EXPECT(v0.f_blocks > 0, "f_blocks is 0");
	EXPECT(v0.f_bfree <= v0.f_blocks, "f_bfree %llu > f_blocks %llu",
	       (unsigned long long)v0.f_bfree, (unsigned long long)v0.f_blocks);
	EXPECT(v0.f_bavail <= v0.f_bfree, "f_bavail %llu > f_bfree %llu",
	       (unsigned long long)v0.f_bavail, (unsigned long long)v0.f_bfree);
	EXPECT(v0.f_namemax >= 255, "f_namemax %lu", v0.f_namemax);
	/* writing 16 MiB of incompressible data and fsync must consume space */
	fill_rand(buf, n, 38);
	SYS(fd = open("f", O_CREAT | O_RDWR, 0644));
	SYS(write_all(fd, buf, n));
	SYS(fsync(fd));
	close(fd);
	SYS(statvfs(".", &v1));
	used = ((long long)v0.f_bfree - (long long)v1.f_bfree) * (long long)v1.f_frsize;
	EXPECT(used >= 8 * MiB, "f_bfree dropped by only %lld bytes after 16 MiB fsync'ed", used);
	/* and unlink gives it back (allowing a few seconds of deferred reuse) */
	SYS(unlink("f"));
	for (i = 0; i < 50; i++) {
		SYS(fd = open(".", O_RDONLY | O_DIRECTORY));
		fsync(fd);
		syncfs(fd);
		close(fd);
		SYS(statvfs(".", &v0));
		if (((long long)v0.f_bfree - (long long)v1.f_bfree) * (long long)v0.f_frsize >=
		    8 * MiB)
			break;
		usleep(100000);
	}
	EXPECT(i < 50, "f_bfree grew by only %lld bytes within 5 s of unlinking 16 MiB",
	       ((long long)v0.f_bfree - (long long)v1.f_bfree) * (long long)v0.f_frsize);
	free(buf);
	return 0;
}

static int c_mmap_shared(void)
{
	enum { N = 65536 };
	static unsigned char model[N], x[4096];
	unsigned char *p;
	int fd;

	fill_rand(model, N, 39);
	SYS(put_file("f", model, N, 0644));
	SYS(fd = open("f", O_RDWR));
	p = mmap(NULL, N, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	EXPECT(p != MAP_FAILED, "mmap MAP_SHARED rw: %s (%s)", strerror(errno), errname(errno));
	EXPECT(!memcmp(p, model, N), "mapping content differs from file");
	memset(p + 100, 0xAB, 100);
	memset(model + 100, 0xAB, 100);
	SYS(msync(p, N, MS_SYNC));
	VERIFY_FD(fd, model, N);
	fill_rand(x, sizeof x, 40);
	SYS(pwrite_all(fd, x, sizeof x, 8192));
	memcpy(model + 8192, x, sizeof x);
	EXPECT(!memcmp(p + 8192, x, sizeof x), "mapping does not see a pwrite");
	SYS(munmap(p, N));
	close(fd);
	VERIFY_PATH("f", model, N);
	return 0;
}

/* ---------- permission checks (two phases) ---------- */

static int perm_setup(const char *dir)
{
	char path[PATH_MAX];
	int rc = 0;

#define P(rel) (snprintf(path, sizeof path, "%s/perm/%s", dir, rel), path)
#define DO(x) do { if ((x) < 0) { fprintf(stderr, "perm-setup: %s: %s\n", #x, \
	strerror(errno)); rc = 1; } } while (0)
	umask(0);
	snprintf(path, sizeof path, "%s/perm", dir);
	DO(mkdir(path, 0755));
	DO(put_file(P("secret"), "secret", 6, 0600));
	DO(put_file(P("public"), "public", 6, 0644));
	DO(put_file(P("world"), "world", 5, 0666));
	DO(mkdir(P("rootdir"), 0755));
	DO(put_file(P("rootdir/file"), "rf", 2, 0644));
	DO(mkdir(P("open"), 0777));
	DO(mkdir(P("private"), 0700));
	DO(put_file(P("private/f"), "pf", 2, 0644));
	DO(mkdir(P("sticky"), 01777));
	DO(put_file(P("sticky/rootfile"), "sf", 2, 0666));
	DO(mkdir(P("sgid"), 0777));
	DO(chown(P("sgid"), 0, 5678));
	DO(chmod(P("sgid"), 02777));
	return rc;
#undef DO
#undef P
}

static const char *g_perm;	/* DIR/perm during --perm-user */

static char *pp(const char *rel)
{
	static char buf[8][PATH_MAX];
	static int i;

	i = (i + 1) & 7;
	snprintf(buf[i], sizeof buf[i], "%s/%s", g_perm, rel);
	return buf[i];
}

static int p_identity(void)
{
	char line[256];
	FILE *f;
	int ok = 0;

	EXPECT(geteuid() != 0 && getuid() != 0, "running as root: permission checks meaningless");
	f = fopen("/proc/self/status", "r");
	EXPECT(f, "open /proc/self/status");
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "CapEff:", 7))
			ok = strtoull(line + 7, NULL, 16) == 0;
	fclose(f);
	EXPECT(ok, "process still has effective capabilities");
	return 0;
}

static int p_read_denied(void)
{
	EXPECT_ERR(open(pp("secret"), O_RDONLY), EACCES);
	EXPECT_ERR(open(pp("public"), O_WRONLY), EACCES);
	EXPECT_ERR(open(pp("public"), O_RDWR), EACCES);
	EXPECT_ERR(truncate(pp("public"), 0), EACCES);
	EXPECT_ERR(setxattr(pp("public"), "user.x", "1", 1, 0), EACCES);
	VERIFY_PATH(pp("public"), (const unsigned char *)"public", 6);
	return 0;
}

static int p_create_denied(void)
{
	struct stat st;

	EXPECT_ERR(open(pp("rootdir/x"), O_CREAT | O_WRONLY, 0644), EACCES);
	EXPECT_ERR(mkdir(pp("rootdir/d"), 0755), EACCES);
	EXPECT_ERR(mknod(pp("rootdir/p"), S_IFIFO | 0644, 0), EACCES);
	EXPECT_ERR(symlink("x", pp("rootdir/s")), EACCES);
	EXPECT_ERR(unlink(pp("rootdir/file")), EACCES);
	EXPECT_ERR(rename(pp("rootdir/file"), pp("open/stolen")), EACCES);
	/* a file of our own: linking another user's file is EPERM (protected_hardlinks) */
	SYS(put_file(pp("open/linksrc"), "l", 1, 0644));
	EXPECT_ERR(link(pp("open/linksrc"), pp("rootdir/l")), EACCES);
	SYS(unlink(pp("open/linksrc")));
	SYS(stat(pp("rootdir/file"), &st));
	EXPECT_ERR(stat(pp("rootdir/x"), &st), ENOENT);
	return 0;
}

static int p_search_denied(void)
{
	struct stat st;

	EXPECT_ERR(stat(pp("private/f"), &st), EACCES);
	EXPECT_ERR(open(pp("private/f"), O_RDONLY), EACCES);
	EXPECT(opendir(pp("private")) == NULL && errno == EACCES, "opendir of a 0700 root dir: %s",
	       strerror(errno));
	return 0;
}

static int p_allowed(void)
{
	struct stat st;
	int fd;

	VERIFY_PATH(pp("public"), (const unsigned char *)"public", 6);
	SYS(fd = open(pp("world"), O_WRONLY));
	SYS(pwrite_all(fd, "W", 1, 0));
	close(fd);
	VERIFY_PATH(pp("world"), (const unsigned char *)"World", 5);
	SYS(put_file(pp("open/u1"), "mine", 4, 0644));
	SYS(stat(pp("open/u1"), &st));
	EXPECT(st.st_uid == getuid() && st.st_gid == getgid(),
	       "new file owned by %d:%d, caller is %d:%d", st.st_uid, st.st_gid, getuid(), getgid());
	SYS(mkdir(pp("open/ud"), 0755));
	SYS(stat(pp("open/ud"), &st));
	EXPECT(st.st_uid == getuid() && st.st_gid == getgid(),
	       "new dir owned by %d:%d, caller is %d:%d", st.st_uid, st.st_gid, getuid(), getgid());
	SYS(symlink("u1", pp("open/us")));
	SYS(lstat(pp("open/us"), &st));
	EXPECT(st.st_uid == getuid(), "new symlink owned by uid %d", st.st_uid);
	SYS(chmod(pp("open/u1"), 0600));
	VERIFY_PATH(pp("open/u1"), (const unsigned char *)"mine", 4);
	SYS(setxattr(pp("open/u1"), "user.mine", "1", 1, 0));
	SYS(unlink(pp("open/u1")));
	return 0;
}

static int p_owner_ops(void)
{
	struct timespec ts[2] = { { 1000, 0 }, { 2000, 0 } };

	SYS(put_file(pp("open/u2"), "x", 1, 0644));
	EXPECT_ERR(chmod(pp("public"), 0666), EPERM);
	EXPECT_ERR(chown(pp("open/u2"), 0, (gid_t)-1), EPERM);
	EXPECT_ERR(chown(pp("public"), getuid(), (gid_t)-1), EPERM);
	EXPECT_ERR(utimensat(AT_FDCWD, pp("public"), ts, 0), EPERM);
	EXPECT_ERR(utimensat(AT_FDCWD, pp("public"), NULL, 0), EACCES);
	SYS(utimensat(AT_FDCWD, pp("world"), NULL, 0));
	SYS(utimensat(AT_FDCWD, pp("open/u2"), ts, 0));
	return 0;
}

static int p_sticky(void)
{
	EXPECT_ERR2(unlink(pp("sticky/rootfile")), EPERM, EACCES);
	EXPECT_ERR2(rename(pp("sticky/rootfile"), pp("sticky/moved")), EPERM, EACCES);
	SYS(put_file(pp("sticky/mine"), "m", 1, 0644));
	SYS(unlink(pp("sticky/mine")));
	return 0;
}

static int p_setgid_dir(void)
{
	struct stat st;

	SYS(put_file(pp("sgid/f"), "g", 1, 0644));
	SYS(stat(pp("sgid/f"), &st));
	EXPECT(st.st_gid == 5678, "file in a setgid dir has gid %d, expected the dir's 5678",
	       st.st_gid);
	SYS(mkdir(pp("sgid/sub"), 0755));
	SYS(stat(pp("sgid/sub"), &st));
	EXPECT(st.st_gid == 5678 && (st.st_mode & S_ISGID),
	       "subdir of a setgid dir: gid %d mode %o", st.st_gid, st.st_mode & 07777);
	return 0;
}

/* ---------- driver ---------- */

struct check {
	const char *name;
	int (*fn)(void);
	int timeout;
};

static const struct check general[] = {
	{ "create_rw", c_create_rw, 30 },
	{ "pread_pwrite", c_pread_pwrite, 30 },
	{ "o_trunc", c_o_trunc, 30 },
	{ "o_append", c_o_append, 30 },
	{ "ftruncate_grow_shrink", c_ftruncate, 30 },
	{ "rw_vectored", c_rw_vectored, 30 },
	{ "large_io", c_large_io, 60 },
	{ "overwrite_mixed", c_overwrite_mixed, 60 },
	{ "mkdir_rmdir", c_mkdir_rmdir, 30 },
	{ "readdir_exact", c_readdir, 60 },
	{ "name_max", c_name_max, 30 },
	{ "unlink_open", c_unlink_open, 30 },
	{ "rename", c_rename, 30 },
	{ "renameat2_noreplace", c_renameat2_noreplace, 30 },
	{ "renameat2_exchange", c_renameat2_exchange, 30 },
	{ "hardlink", c_hardlink, 30 },
	{ "symlink", c_symlink, 30 },
	{ "fifo", c_fifo, 30 },
	{ "mknod_special", c_mknod_special, 30 },
	{ "chmod_ctime", c_chmod_ctime, 30 },
	{ "chown_ctime", c_chown_ctime, 30 },
	{ "utimens", c_utimens, 30 },
	{ "write_times", c_write_times, 30 },
	{ "dir_times", c_dir_times, 30 },
	{ "xattr_user", c_xattr, 30 },
	{ "xattr_4k_value", c_xattr_4k, 30 },
	{ "fallocate_mode0", c_fallocate_mode0, 30 },
	{ "fallocate_keep_size", c_fallocate_keep_size, 30 },
	{ "punch_hole", c_punch_hole, 30 },
	{ "punch_hole_frees", c_punch_hole_frees, 60 },
	{ "zero_range", c_zero_range, 30 },
	{ "seek_data_hole", c_seek_data_hole, 30 },
	{ "o_direct", c_o_direct, 30 },
	{ "blocks_follow_data", c_blocks_follow_data, 30 },
	{ "o_sync_dsync", c_o_sync, 30 },
	{ "fsync_fdatasync", c_fsync, 30 },
	{ "statfs", c_statfs, 60 },
	{ "sparse_beyond_4g", c_sparse_big, 60 },
	{ "mmap_shared", c_mmap_shared, 30 },
	{ NULL, NULL, 0 },
};

static const struct check perm_user[] = {
	{ "perm_identity", p_identity, 10 },
	{ "perm_read_denied", p_read_denied, 30 },
	{ "perm_create_denied", p_create_denied, 30 },
	{ "perm_search_denied", p_search_denied, 30 },
	{ "perm_allowed", p_allowed, 30 },
	{ "perm_owner_ops", p_owner_ops, 30 },
	{ "perm_sticky", p_sticky, 30 },
	{ "perm_setgid_dir", p_setgid_dir, 30 },
	{ NULL, NULL, 0 },
};

static const char *g_prefix = "";

/* run one check in a child, in workdir (NULL = stay), bounded by its timeout */
static int run_check(const struct check *c, const char *workdir)
{
	struct timespec t0, now;
	int status = 0, waited;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid < 0) {
		printf("FAIL %s%s: fork: %s\n", g_prefix, c->name, strerror(errno));
		return 1;
	}
	if (pid == 0) {
		int rc;

		if (workdir) {
			if (mkdir(workdir, 0755) < 0 || chdir(workdir) < 0) {
				printf("FAIL %s%s: cannot make work dir %s: %s\n", g_prefix, c->name,
				       workdir, strerror(errno));
				fflush(stdout);
				_exit(1);
			}
		}
		g_why[0] = 0;
		rc = c->fn();
		if (rc)
			printf("FAIL %s%s: %s\n", g_prefix, c->name, g_why);
		else
			printf("PASS %s%s\n", g_prefix, c->name);
		fflush(stdout);
		_exit(rc ? 1 : 0);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		waited = waitpid(pid, &status, WNOHANG);
		if (waited == pid)
			break;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec > c->timeout) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			printf("FAIL %s%s: timed out after %d s (hung syscall?)\n", g_prefix,
			       c->name, c->timeout);
			return 1;
		}
		usleep(5000);
	}
	if (WIFSIGNALED(status)) {
		printf("FAIL %s%s: killed by signal %d (%s)\n", g_prefix, c->name,
		       WTERMSIG(status), strsignal(WTERMSIG(status)));
		return 1;
	}
	return WEXITSTATUS(status) != 0;
}

static int wanted(const char *only, const char *name)
{
	size_t n = strlen(name);
	const char *p = only;

	if (!only)
		return 1;
	while ((p = strstr(p, name))) {
		if ((p == only || p[-1] == ',') && (p[n] == 0 || p[n] == ','))
			return 1;
		p += n;
	}
	return 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: posix_check [-p PREFIX] [-o NAME[,NAME...]] DIR\n"
		"       posix_check --perm-setup DIR   (as root)\n"
		"       posix_check --perm-user DIR    (as an unprivileged user)\n"
		"       posix_check -l\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *only = NULL, *dir;
	char path[PATH_MAX];
	int i, fails = 0, mode = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	umask(022);
	for (i = 1; i < argc && argv[i][0] == '-'; i++) {
		if (!strcmp(argv[i], "-p") && i + 1 < argc)
			g_prefix = argv[++i];
		else if (!strcmp(argv[i], "-o") && i + 1 < argc)
			only = argv[++i];
		else if (!strcmp(argv[i], "--perm-setup"))
			mode = 1;
		else if (!strcmp(argv[i], "--perm-user"))
			mode = 2;
		else if (!strcmp(argv[i], "-l")) {
			const struct check *c;
			for (c = general; c->name; c++)
				printf("%s\n", c->name);
			for (c = perm_user; c->name; c++)
				printf("%s\n", c->name);
			return 0;
		} else
			usage();
	}
	if (i != argc - 1)
		usage();
	dir = argv[i];
	if (mode == 1)
		return perm_setup(dir);
	if (mode == 2) {
		const struct check *c;

		snprintf(path, sizeof path, "%s/perm", dir);
		g_perm = path;
		for (c = perm_user; c->name; c++)
			if (wanted(only, c->name))
				fails += run_check(c, NULL);
		return fails ? 1 : 0;
	}
	{
		const struct check *c;
		char wd[PATH_MAX];

		for (c = general; c->name; c++) {
			if (!wanted(only, c->name))
				continue;
			snprintf(wd, sizeof wd, "%s/%s", dir, c->name);
			fails += run_check(c, wd);
		}
	}
	return fails ? 1 : 0;
}
