/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the metadata journal (src/journal.c) through the public
 * csdfs_fs_* API, no mount. The crash image: after csdfs_fs_fsync returns
 * (no commit thread, so data.mdb on disk is still the state of the open),
 * the volume's directory is copied while the volume stays open, as a
 * kill -9 leaves it (the copy reads the host's page cache, which holds
 * what was written). The copy is then fscked and opened, and must hold
 * every fsynced change. Counter-checks: a segment whose payload or whose
 * chunk bytes are damaged is dropped with all after it.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csdfs/csdfs.h"
#include "csdfs/io.h"
#include "fixture.h"
#include "vol.h"   /* vol->journal.replayed: whether an open replayed */

#define ROOT CSDFS_ROOT_INO

static const struct csdfs_cred cred0 = { 1000, 1000 };
static const struct csdfs_mount_opts jmo = { .no_commit_thread = true };
static const struct csdfs_mount_opts nojmo = { .no_commit_thread = true,
					       .no_journal = true };

static uint64_t rng_state = 1;

static uint64_t rng_next(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static void fill_random(char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (char)(rng_next() >> 56);
}

static void fill_text(char *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (char)('a' + (i / 64 + seed) % 26);
}

static uint64_t mk(struct csdfs_vol *vol, uint64_t parent, const char *name, mode_t mode)
{
	struct stat st;
	int rc = csdfs_fs_mknod(vol, &cred0, parent, name, mode, 0, &st);

	ck_assert_msg(rc == 0, "mknod '%s': %d", name, rc);
	return st.st_ino;
}

static uint64_t mkfile(struct csdfs_vol *vol, uint64_t parent, const char *name)
{
	return mk(vol, parent, name, S_IFREG | 0644);
}

static int lookup_rc(struct csdfs_vol *vol, uint64_t parent, const char *name, uint64_t *ino)
{
	struct stat st;
	int rc = csdfs_fs_lookup(vol, parent, name, &st);

	if (!rc && ino)
		*ino = st.st_ino;
	return rc;
}

static uint64_t lookup(struct csdfs_vol *vol, uint64_t parent, const char *name)
{
	uint64_t ino = 0;
	int rc = lookup_rc(vol, parent, name, &ino);

	ck_assert_msg(rc == 0, "lookup '%s': %d", name, rc);
	return ino;
}

static void wr(struct csdfs_vol *vol, uint64_t ino, const char *buf, size_t len, uint64_t off)
{
	ssize_t n = csdfs_fs_write(vol, ino, buf, len, off, false);

	ck_assert_msg(n == (ssize_t)len, "write %zu at %llu: %zd", len,
		      (unsigned long long)off, n);
}

static void fsync_ok(struct csdfs_vol *vol, uint64_t ino)
{
	int rc = csdfs_fs_fsync(vol, ino);

	ck_assert_msg(rc == 0, "fsync of %llu: %d", (unsigned long long)ino, rc);
}

static uint64_t size_of(struct csdfs_vol *vol, uint64_t ino)
{
	struct stat st;

	ck_assert_int_eq(csdfs_fs_getattr(vol, ino, &st), 0);
	return (uint64_t)st.st_size;
}

/* The whole file is @ref[0..len). */
static void expect_file(struct csdfs_vol *vol, uint64_t ino, const char *ref, size_t len,
			const char *what)
{
	char *buf = malloc(len + 1);
	ssize_t n;

	ck_assert_ptr_nonnull(buf);
	ck_assert_msg(size_of(vol, ino) == len, "%s: size %llu, expected %zu", what,
		      (unsigned long long)size_of(vol, ino), len);
	n = csdfs_fs_read(vol, ino, buf, len + 1, 0);
	ck_assert_msg(n == (ssize_t)len, "%s: read %zd, expected %zu", what, n, len);
	ck_assert_msg(!memcmp(buf, ref, len), "%s: the data differs", what);
	free(buf);
}

static void fsck_clean(const char *path)
{
	struct csdfs_fsck_opts o = { .verify_data = true };
	int rc = csdfs_fsck(path, &o);

	ck_assert_msg(rc == 0, "fsck of '%s' returned %d", path, rc);
}

/* ---- crash images -------------------------------------------------------- */

/* Copy @src to @dst, leaving all-zero 64 KiB pieces as holes. */
static void copy_file(const char *src, const char *dst)
{
	static char buf[65536];
	static const char zero[65536];
	int in = open(src, O_RDONLY), out;
	off_t off = 0;
	ssize_t n;

	ck_assert_msg(in >= 0, "open '%s': %s", src, strerror(errno));
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_msg(out >= 0, "create '%s': %s", dst, strerror(errno));
	while ((n = pread(in, buf, sizeof(buf), off)) > 0) {
		if (n != (ssize_t)sizeof(buf) || memcmp(buf, zero, sizeof(buf)))
			ck_assert_int_eq(pwrite(out, buf, (size_t)n, off), n);
		off += n;
	}
	ck_assert_int_eq(n, 0);
	ck_assert_int_eq(ftruncate(out, off), 0);
	close(in);
	close(out);
}

/* Copy directory @src (regular files and directories) to @dst. */
static void copy_tree(const char *src, const char *dst)
{
	DIR *d = opendir(src);
	struct dirent *e;

	ck_assert_msg(d != NULL, "opendir '%s': %s", src, strerror(errno));
	ck_assert_int_eq(mkdir(dst, 0700), 0);
	while ((e = readdir(d))) {
		char s[1024], t[1024];
		struct stat st;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(s, sizeof(s), "%s/%s", src, e->d_name);
		snprintf(t, sizeof(t), "%s/%s", dst, e->d_name);
		ck_assert_int_eq(lstat(s, &st), 0);
		if (S_ISDIR(st.st_mode))
			copy_tree(s, t);
		else if (S_ISREG(st.st_mode))
			copy_file(s, t);
	}
	closedir(d);
}

/* What a kill -9 of the process holding @path open leaves: @name. */
static void crash_image(const char *path, char *out, size_t len, const char *name)
{
	fixture_path(out, len, name);
	copy_tree(path, out);
}

/* Offset of journal segment @seq (its header) in the container at @path, or -1. */
static off_t find_segment(const char *path, uint64_t seq)
{
	char c[1024];
	struct csdfs_journal_seg_disk h;
	struct stat st;
	off_t found = -1;
	int fd;

	snprintf(c, sizeof(c), "%s/container", path);
	fd = open(c, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	for (off_t off = 0; off + (off_t)sizeof(h) <= st.st_size && found < 0;
	     off += CSDFS_BLOCK_SIZE) {
		ck_assert_int_eq(pread(fd, &h, sizeof(h), off), (ssize_t)sizeof(h));
		if (le32toh(h.magic) == CSDFS_JOURNAL_MAGIC && le32toh(h.version) == 1 &&
		    le64toh(h.seq) == seq)
			found = off;
	}
	close(fd);
	return found;
}

/* Offset of the first 4 KiB-aligned copy of @pat (@len bytes) in the container. */
static off_t find_bytes(const char *path, const char *pat, size_t len)
{
	char c[1024], *buf = malloc(len);
	struct stat st;
	off_t found = -1;
	int fd;

	ck_assert_ptr_nonnull(buf);
	snprintf(c, sizeof(c), "%s/container", path);
	fd = open(c, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	for (off_t off = 0; off + (off_t)len <= st.st_size && found < 0;
	     off += CSDFS_BLOCK_SIZE) {
		ck_assert_int_eq(pread(fd, buf, len, off), (ssize_t)len);
		if (!memcmp(buf, pat, len))
			found = off;
	}
	close(fd);
	free(buf);
	return found;
}

static void flip_byte(const char *path, off_t off)
{
	char c[1024];
	unsigned char b;
	int fd;

	snprintf(c, sizeof(c), "%s/container", path);
	fd = open(c, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, &b, 1, off), 1);
	b ^= 0x5a;
	ck_assert_int_eq(pwrite(fd, &b, 1, off), 1);
	close(fd);
}

/* ---- test 1/2: a workload, fsync after each step ------------------------- */

#define BIG (256u << 10)
#define RND (96u << 10)

struct wl {
	char text[BIG], rnd[RND], last[RND];
	size_t text_len;
};

static struct wl W;

/* Steps, each fsynced. Before it: "old" committed by a clean close. The
 * last step writes file "last" with incompressible data (stored raw). */
static void workload(struct csdfs_vol *vol)
{
	uint64_t a, b, d, x, old;
	struct stat in = { 0 }, st;

	rng_state = 0x10ad;
	fill_text(W.text, BIG, 3);
	fill_random(W.rnd, RND);
	fill_random(W.last, RND);
	a = mkfile(vol, ROOT, "a");
	wr(vol, a, W.text, BIG, 0);
	fsync_ok(vol, a);
	b = mkfile(vol, ROOT, "b");
	wr(vol, b, W.rnd, RND, 0);
	fsync_ok(vol, b);
	d = mk(vol, ROOT, "d", S_IFDIR | 0755);
	x = mkfile(vol, d, "x");
	wr(vol, x, "hello", 5, 0);
	fsync_ok(vol, x);
	ck_assert_int_eq(csdfs_fs_rename(vol, d, "x", ROOT, "y", 0), 0);
	fsync_ok(vol, d);
	old = lookup(vol, ROOT, "old");
	ck_assert_int_eq(csdfs_fs_unlink(vol, ROOT, "old"), 0);
	fsync_ok(vol, ROOT);
	in.st_size = 100000;
	ck_assert_int_eq(csdfs_fs_setattr(vol, a, &in, CSDFS_SET_SIZE, &st), 0);
	W.text_len = 100000;
	fsync_ok(vol, a);
	ck_assert_int_eq(csdfs_fs_setxattr(vol, b, "user.tag", "v1", 2, 0), 0);
	fsync_ok(vol, b);
	(void)old;
	x = mkfile(vol, ROOT, "last");
	wr(vol, x, W.last, RND, 0);
	fsync_ok(vol, x);
}

/* A fresh volume at @name with committed file "old", opened with @mo. */
static struct csdfs_vol *prepared(char *path, size_t len, const char *name,
				  const struct csdfs_mount_opts *mo)
{
	struct csdfs_vol *vol = fixture_vol_new(path, len, name, mo);
	uint64_t old = mkfile(vol, ROOT, "old");

	wr(vol, old, "committed", 9, 0);
	ck_assert_int_eq(csdfs_vol_close(vol), 0);
	return fixture_vol_open(path, mo);
}

/* Everything the workload fsynced, up to the step before "last" if @!last. */
static void expect_workload(struct csdfs_vol *vol, bool last)
{
	uint64_t b, y, l;
	char v[8];

	expect_file(vol, lookup(vol, ROOT, "a"), W.text, W.text_len, "a");
	b = lookup(vol, ROOT, "b");
	expect_file(vol, b, W.rnd, RND, "b");
	ck_assert_int_eq(csdfs_fs_getxattr(vol, b, "user.tag", v, sizeof(v)), 2);
	ck_assert(!memcmp(v, "v1", 2));
	y = lookup(vol, ROOT, "y");
	expect_file(vol, y, "hello", 5, "y");
	ck_assert_int_eq(lookup_rc(vol, lookup(vol, ROOT, "d"), "x", NULL), -ENOENT);
	ck_assert_int_eq(lookup_rc(vol, ROOT, "old", NULL), -ENOENT);
	if (last) {
		l = lookup(vol, ROOT, "last");
		expect_file(vol, l, W.last, RND, "last");
	}
}

START_TEST(test_crash_replay)
{
	char path[512], img[512], path2[512], img2[512];
	struct csdfs_vol *vol = prepared(path, sizeof(path), "j1", &jmo), *c;

	workload(vol);
	ck_assert_uint_gt(vol->journal.segments, 0);
	crash_image(path, img, sizeof(img), "j1-img");
	fsck_clean(img);                 /* read-only replay first */
	c = fixture_vol_open(img, &jmo);
	/* Every fsync was a segment (8 steps), and fsck consumed none. */
	ck_assert_uint_eq(vol->journal.segments, 8);
	ck_assert_uint_eq(c->journal.replayed, 8);
	expect_workload(c, true);
	ck_assert_int_eq(csdfs_vol_close(c), 0);
	fsck_clean(img);
	csdfs_vol_close(vol);

	/* The same without a journal: the classic commit per fsync. */
	vol = prepared(path2, sizeof(path2), "j1n", &nojmo);
	workload(vol);
	crash_image(path2, img2, sizeof(img2), "j1n-img");
	fsck_clean(img2);
	c = fixture_vol_open(img2, &nojmo);
	ck_assert_uint_eq(c->journal.replayed, 0);
	expect_workload(c, true);
	ck_assert_int_eq(csdfs_vol_close(c), 0);
	fsck_clean(img2);
	csdfs_vol_close(vol);
}
END_TEST

/* A flipped payload byte in segment 1: it and all after it are dropped. */
START_TEST(test_bad_segment_payload)
{
	char path[512], img[512];
	struct csdfs_vol *vol = prepared(path, sizeof(path), "j2", &jmo), *c;
	off_t seg;
	uint64_t old;

	workload(vol);
	crash_image(path, img, sizeof(img), "j2-img");
	csdfs_vol_close(vol);
	seg = find_segment(img, 1);
	ck_assert_msg(seg >= 0, "no journal segment 1 in the image");
	ck_assert_int_ge(find_segment(img, 2), 0);
	flip_byte(img, seg + (off_t)sizeof(struct csdfs_journal_seg_disk) + 3);
	fsck_clean(img);
	c = fixture_vol_open(img, &jmo);
	ck_assert_uint_eq(c->journal.replayed, 0);
	/* The state of the last LMDB commit: "old" only. */
	ck_assert_int_eq(lookup_rc(c, ROOT, "a", NULL), -ENOENT);
	ck_assert_int_eq(lookup_rc(c, ROOT, "b", NULL), -ENOENT);
	ck_assert_int_eq(lookup_rc(c, ROOT, "last", NULL), -ENOENT);
	old = lookup(c, ROOT, "old");
	expect_file(c, old, "committed", 9, "old");
	ck_assert_int_eq(csdfs_vol_close(c), 0);
	fsck_clean(img);
}
END_TEST

/* The raw chunk the last segment maps is damaged: that segment is dropped,
 * the earlier ones are kept. */
START_TEST(test_bad_segment_chunk)
{
	char path[512], img[512];
	struct csdfs_vol *vol = prepared(path, sizeof(path), "j3", &jmo), *c;
	off_t at;
	uint64_t segs;

	workload(vol);
	segs = vol->journal.segments;
	crash_image(path, img, sizeof(img), "j3-img");
	csdfs_vol_close(vol);
	at = find_bytes(img, W.last, 4096);
	ck_assert_msg(at >= 0, "the last file's raw chunk is not in the image");
	flip_byte(img, at + 100);
	fsck_clean(img);
	c = fixture_vol_open(img, &jmo);
	ck_assert_uint_eq(c->journal.replayed, segs - 1);
	expect_workload(c, false);
	ck_assert_int_eq(lookup_rc(c, ROOT, "last", NULL), -ENOENT);
	ck_assert_int_eq(csdfs_vol_close(c), 0);
	fsck_clean(img);
}
END_TEST

/* More fsyncs than the region has blocks: it fills, falls back to a group
 * commit and starts over; every fsynced write survives. */
START_TEST(test_region_full)
{
	char path[512], img[512], buf[16], got[16];
	struct csdfs_vol *vol = fixture_vol_new(path, sizeof(path), "j4", &jmo), *c;
	uint64_t f = mkfile(vol, ROOT, "log");
	const unsigned n = 200;

	for (unsigned i = 0; i < n; i++) {
		snprintf(buf, sizeof(buf), "rec%06u\n", i);
		wr(vol, f, buf, 10, (uint64_t)i * 10);
		fsync_ok(vol, f);
	}
	ck_assert_uint_lt(vol->journal.segments, n);   /* some were commits */
	crash_image(path, img, sizeof(img), "j4-img");
	csdfs_vol_close(vol);
	fsck_clean(img);
	c = fixture_vol_open(img, &jmo);
	ck_assert_uint_gt(c->journal.replayed, 0);
	f = lookup(c, ROOT, "log");
	ck_assert_uint_eq(size_of(c, f), (uint64_t)n * 10);
	for (unsigned i = 0; i < n; i++) {
		snprintf(buf, sizeof(buf), "rec%06u\n", i);
		ck_assert_int_eq(csdfs_fs_read(c, f, got, 10, (uint64_t)i * 10), 10);
		ck_assert_msg(!memcmp(got, buf, 10), "record %u differs", i);
	}
	ck_assert_int_eq(csdfs_vol_close(c), 0);
	fsck_clean(img);
}
END_TEST

/* After a clean close the old journal is not replayed again. */
START_TEST(test_remount)
{
	char path[512], img[512];
	struct csdfs_vol *vol = fixture_vol_new(path, sizeof(path), "j5", &jmo);
	uint64_t f = mkfile(vol, ROOT, "app");

	for (unsigned i = 0; i < 5; i++) {
		wr(vol, f, "0123456789", 10, size_of(vol, f));
		fsync_ok(vol, f);
	}
	ck_assert_int_eq(csdfs_vol_close(vol), 0);
	fsck_clean(path);
	for (unsigned round = 1; round <= 3; round++) {
		vol = fixture_vol_open(path, &jmo);
		ck_assert_uint_eq(vol->journal.replayed, 0);
		ck_assert_uint_eq(size_of(vol, f), 50 * round);
		for (unsigned i = 0; i < 5; i++) {
			wr(vol, f, "0123456789", 10, size_of(vol, f));
			fsync_ok(vol, f);
		}
		ck_assert_int_eq(csdfs_vol_close(vol), 0);
	}
	/* And a crash image after a remount replays just that mount's. */
	vol = fixture_vol_open(path, &jmo);
	wr(vol, f, "abcdefghij", 10, size_of(vol, f));
	fsync_ok(vol, f);
	crash_image(path, img, sizeof(img), "j5-img");
	csdfs_vol_close(vol);
	vol = fixture_vol_open(img, &jmo);
	ck_assert_uint_eq(vol->journal.replayed, 1);
	ck_assert_uint_eq(size_of(vol, f), 210);
	ck_assert_int_eq(csdfs_vol_close(vol), 0);
	fsck_clean(img);
	fsck_clean(path);
}
END_TEST

struct role_fault {
	enum csdfs_io_role role;
	struct csdfs_io_fault f;
};

static int install_role_fault(struct csdfs_io *io, void *arg)
{
	struct role_fault *rf = arg;

	return io->role == rf->role ? csdfs_io_fault_install(io, &rf->f) : 0;
}

/* The container's sync fails during a journal fsync: EIO, the volume is
 * failed, and reopened it holds the last good fsync's state or the later one. */
START_TEST(test_sync_fails)
{
	char path[512];
	size_t len = 64u << 10;
	char *a = malloc(len), *b = malloc(len), *got = malloc(len);
	struct role_fault rf = { .role = CSDFS_IO_CONTAINER,
				 .f = { .kinds = CSDFS_IO_SYNC, .err = EIO } };
	struct csdfs_mount_opts mo = { .no_commit_thread = true, .io_hook = install_role_fault,
				       .io_hook_arg = &rf };
	struct csdfs_vol *vol;
	uint64_t f;

	ck_assert(a && b && got);
	rng_state = 77;
	fill_random(a, len);
	fill_text(b, len, 9);
	vol = fixture_vol_new(path, sizeof(path), "j6", &mo);
	f = mkfile(vol, ROOT, "f");
	wr(vol, f, a, len, 0);
	fsync_ok(vol, f);
	ck_assert_uint_gt(vol->journal.segments, 0);
	wr(vol, f, b, len, 0);
	rf.f.nth = rf.f.calls + 1;
	ck_assert_int_eq(csdfs_fs_fsync(vol, f), -EIO);
	ck_assert_uint_eq(rf.f.failed, 1);
	ck_assert_int_eq(csdfs_fs_write(vol, f, a, 4096, 0, false), -EIO);
	ck_assert_int_eq(csdfs_fs_fsync(vol, f), -EIO);
	csdfs_vol_close(vol);   /* may fail: the volume failed */
	fsck_clean(path);
	vol = fixture_vol_open(path, &jmo);
	ck_assert_int_eq(size_of(vol, f), len);
	ck_assert_int_eq(csdfs_fs_read(vol, f, got, len, 0), (ssize_t)len);
	ck_assert_msg(!memcmp(got, a, len) || !memcmp(got, b, len),
		      "after a failed journal sync the file is neither the fsynced nor the written data");
	ck_assert_int_eq(csdfs_vol_close(vol), 0);
	fsck_clean(path);
	free(a);
	free(b);
	free(got);
}
END_TEST

static Suite *journal_suite(void)
{
	Suite *s = suite_create("journal");
	TCase *t = tcase_create("journal");

	tcase_set_timeout(t, 120);
	tcase_add_test(t, test_crash_replay);
	tcase_add_test(t, test_bad_segment_payload);
	tcase_add_test(t, test_bad_segment_chunk);
	tcase_add_test(t, test_region_full);
	tcase_add_test(t, test_remount);
	tcase_add_test(t, test_sync_fails);
	suite_add_tcase(s, t);
	return s;
}

FIXTURE_MAIN(journal_suite, FIXTURE_TMP)
