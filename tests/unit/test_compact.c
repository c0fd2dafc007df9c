/* SPDX-License-Identifier: MIT */
/*
 * Compaction (src/compact.c) through libcsdfs: 2:1 data written in 4 KiB
 * pieces with a commit after each leaves blocks pinned by dead chunk
 * versions; a compaction pass must bring physical/logical down to the
 * large-write figure, keep every byte, leave fsck clean and count what it
 * moved; a chunk rewritten while compaction runs must keep its new
 * content; and every Nth I/O call failing during a pass must leave the
 * volume consistent with the data intact. The compaction hints
 * (src/compact_hint.c) find set regions as a plain array would, and bound
 * what a volume pass scans to the regions where dead bytes appeared.
 */
#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csdfs/csdfs.h"
#include "csdfs/io.h"
#include "csdfs/log.h"
#include "fixture.h"
#include "vol.h"   /* vol->chint: the compaction hints */

#define ROOT CSDFS_ROOT_INO
#define PIECE 4096u

static const struct csdfs_cred cred0 = { 1000, 1000 };

/* fio buffer_compress_percentage=50: half of each 4 KiB random. */
static void fill_half(char *p, size_t len, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < len; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		p[i] = (i % 4096) < 2048 ? (char)(s >> 56) : 0;
	}
}

static uint64_t mkfile(struct csdfs_vol *vol, const char *name)
{
	struct stat st;

	ck_assert_int_eq(csdfs_fs_mknod(vol, &cred0, ROOT, name, S_IFREG | 0644, 0, &st), 0);
	return st.st_ino;
}

static uint64_t xnum(struct csdfs_vol *vol, uint64_t ino, const char *attr)
{
	char name[96], buf[64];
	int n;

	snprintf(name, sizeof(name), "user.csdfs.%s", attr);
	n = csdfs_fs_getxattr(vol, ino, name, buf, sizeof(buf) - 1);
	ck_assert_msg(n > 0, "getxattr %s: %d", name, n);
	buf[n] = '\0';
	return strtoull(buf, NULL, 10);
}

static int compact(struct csdfs_vol *vol, uint64_t ino, const char *mib)
{
	return csdfs_fs_setxattr(vol, ino, "user.csdfs.compact", mib, strlen(mib), 0);
}

/* Write @ref[0..len) into @ino in 4 KiB pieces, committing after each. */
static void write_pieces(struct csdfs_vol *vol, uint64_t ino, const char *ref,
			 size_t len)
{
	for (size_t off = 0; off < len; off += PIECE) {
		ck_assert_int_eq(csdfs_fs_write(vol, ino, ref + off, PIECE, off, 0), PIECE);
		ck_assert_int_eq(csdfs_vol_sync(vol), 0);
	}
}

static void check_content(struct csdfs_vol *vol, uint64_t ino, const char *ref,
			  size_t len)
{
	char *buf = malloc(len);

	ck_assert_ptr_nonnull(buf);
	ck_assert_int_eq(csdfs_fs_read(vol, ino, buf, len, 0), (ssize_t)len);
	for (size_t i = 0; i < len; i++)
		ck_assert_msg(buf[i] == ref[i], "byte %zu differs after compaction", i);
	free(buf);
}

static void fsck_clean(const char *path)
{
	struct csdfs_fsck_opts o = { .verify_data = true };

	ck_assert_int_eq(csdfs_fsck(path, &o), 0);
}

static double ratio(struct csdfs_vol *vol, size_t logical)
{
	return (double)xnum(vol, ROOT, "used_physical") / (double)logical;
}

START_TEST(test_compact_ratio)
{
	const size_t len = 4u << 20;
	const struct csdfs_mount_opts mo = { .no_commit_thread = true, .compact_dead = -1 };
	char path[1100], *ref = malloc(len);
	struct csdfs_vol *vol = fixture_vol_new(path, sizeof(path), "ratio", &mo);
	uint64_t ino = mkfile(vol, "log"), stored, app, moved, dead_before;
	double before, after;

	ck_assert_ptr_nonnull(ref);
	fill_half(ref, len, 1);
	write_pieces(vol, ino, ref, len);
	before = ratio(vol, len);
	stored = xnum(vol, ROOT, "stored");
	app = xnum(vol, ROOT, "app_bytes_written");
	dead_before = xnum(vol, ROOT, "dead_bytes");
	ck_assert_msg(before > 0.6, "nothing to compact: ratio %.3f", before);
	ck_assert_uint_gt(xnum(vol, ROOT, "compact"), 0);

	ck_assert_int_eq(compact(vol, ROOT, "1024"), 0);
	ck_assert_int_eq(csdfs_vol_sync(vol), 0);
	after = ratio(vol, len);
	moved = xnum(vol, ROOT, "compact_bytes_written");
	fprintf(stderr, "test_compact: 4 KiB pieces of 2:1 data: %.3f -> %.3f physical/logical, "
		"%llu bytes moved (%.3f of the %llu written), %llu chunks\n", before, after,
		(unsigned long long)moved, (double)moved / (double)app,
		(unsigned long long)app, (unsigned long long)xnum(vol, ROOT, "compact_chunks"));
	ck_assert_msg(after <= 0.55, "physical/logical %.3f after compaction", after);
	/* The counters add up: the same stored bytes, in fewer blocks; the
	 * dead bytes shrank by what the used blocks did. */
	ck_assert_uint_eq(xnum(vol, ROOT, "stored"), stored);
	ck_assert_uint_eq(xnum(vol, ROOT, "app_bytes_written"), app);
	ck_assert_uint_gt(moved, 0);
	ck_assert_uint_gt(xnum(vol, ROOT, "compact_chunks"), 0);
	/* No chunk moved twice: at most the stored bytes. */
	ck_assert_msg(moved <= stored, "compaction wrote %llu for %llu stored",
		      (unsigned long long)moved, (unsigned long long)stored);
	ck_assert_uint_eq(dead_before - xnum(vol, ROOT, "dead_bytes"),
			  (uint64_t)((before - after) * (double)len + 0.5));
	ck_assert_uint_eq(xnum(vol, ino, "physical"), xnum(vol, ROOT, "used_physical"));
	check_content(vol, ino, ref, len);

	/* A file's own pass; then the file is compact: nothing left. */
	ck_assert_int_eq(compact(vol, ino, "1024"), 0);
	ck_assert_uint_eq(xnum(vol, ino, "compact"), 0);
	ck_assert_int_eq(compact(vol, ino, "0"), -EINVAL);
	ck_assert_int_eq(compact(vol, ino, "x"), -EINVAL);
	ck_assert_int_eq(csdfs_vol_close(vol), 0);
	fsck_clean(path);

	/* And it all survives a reopen. */
	vol = fixture_vol_open(path, &mo);
	check_content(vol, ino, ref, len);
	ck_assert_int_eq(csdfs_vol_close(vol), 0);
	free(ref);
}
END_TEST

/* ---- rewrites during compaction ------------------------------------------ */

#define HOT (128u << 10)   /* the rewritten part: 8 chunks */

struct race {
	struct csdfs_vol *vol;
	uint64_t ino;
	volatile int stop;
	volatile unsigned passes;
	int rc;
};

static void *compactor(void *arg)
{
	struct race *r = arg;

	while (!r->stop && !r->rc) {
		int rc = compact(r->vol, r->ino, "1");

		if (rc)
			r->rc = rc;
		r->passes++;
		/* Back to back, the passes' lock holds would starve the writer
		 * (the daemon runs one per commit round). */
		usleep(1000);
	}
	return NULL;
}

START_TEST(test_compact_interleave)
{
	const size_t len = 1u << 20;
	const struct csdfs_mount_opts mo = { .no_commit_thread = true, .compact_dead = -1 };
	char path[1100], *ref = malloc(len), piece[PIECE];
	struct csdfs_vol *vol = fixture_vol_new(path, sizeof(path), "interleave", &mo);
	struct race r = { .vol = vol };
	uint64_t s = 7, moved;
	pthread_t t;

	ck_assert_ptr_nonnull(ref);
	r.ino = mkfile(vol, "f");
	fill_half(ref, len, 2);
	ck_assert_int_eq(csdfs_fs_write(vol, r.ino, ref, len, 0, 0), (ssize_t)len);
	ck_assert_int_eq(pthread_create(&t, NULL, compactor, &r), 0);
	/* Rewrite random pieces of a few chunks (new content each time)
	 * while passes run: they keep leaving dead versions there, so the
	 * passes keep finding those very chunks. */
	for (int i = 0; i < 1000 || r.passes < 50; i++) {
		size_t off;

		s = s * 6364136223846793005ull + 1442695040888963407ull;
		off = (size_t)(s >> 33) % (HOT / PIECE) * PIECE;
		fill_half(piece, PIECE, s);
		memcpy(ref + off, piece, PIECE);
		ck_assert_int_eq(csdfs_fs_write(vol, r.ino, piece, PIECE, off, 0), PIECE);
		/* A lost rewrite is soon healed by the next one of that piece:
		 * look often. */
		if (i % 8 == 0) {
			ck_assert_int_eq(csdfs_vol_sync(vol), 0);
			check_content(vol, r.ino, ref, HOT);
		}
	}
	r.stop = 1;
	pthread_join(t, NULL);
	ck_assert_int_eq(r.rc, 0);
	moved = xnum(vol, ROOT, "compact_chunks");
	fprintf(stderr, "test_compact: %u passes beside the rewrites moved %llu chunks\n",
		r.passes, (unsigned long long)moved);
	ck_assert_uint_gt(moved, 0);
	check_content(vol, r.ino, ref, len);
	ck_assert_int_eq(csdfs_vol_close(vol), 0);
	fsck_clean(path);
	vol = fixture_vol_open(path, &mo);
	check_content(vol, r.ino, ref, len);
	ck_assert_int_eq(csdfs_vol_close(vol), 0);
	free(ref);
}
END_TEST

/*
 * The same, deterministic: the container's first pwrite once armed (the
 * compaction pass's, nothing else writes) starts a rewrite of a piece of
 * chunk 1 from another thread and gives it 200 ms before the move goes on.
 * The rewrite must wait for the move (the chunk's stripe), and its new
 * content must be what the file holds afterwards.
 */
static struct {
	struct csdfs_vol *vol;
	uint64_t ino;
	int armed;                 /* atomic */
	int done;                  /* atomic: the rewrite returned */
	int done_during_move;
	ssize_t rc;
	pthread_t t;
	char piece[PIECE];
} rw;
static struct csdfs_io_ops race_ops;
static const struct csdfs_io_ops *race_base;

static void *rewriter(void *arg)
{
	(void)arg;
	rw.rc = csdfs_fs_write(rw.vol, rw.ino, rw.piece, PIECE, 16384 + PIECE, 0);
	__atomic_store_n(&rw.done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static int race_pwrite(struct csdfs_io *io, const void *buf, size_t len, uint64_t off)
{
	if (__atomic_exchange_n(&rw.armed, 0, __ATOMIC_SEQ_CST)) {
		ck_assert_int_eq(pthread_create(&rw.t, NULL, rewriter, NULL), 0);
		for (int i = 0; i < 200 && !__atomic_load_n(&rw.done, __ATOMIC_SEQ_CST); i++)
			usleep(1000);
		rw.done_during_move = __atomic_load_n(&rw.done, __ATOMIC_SEQ_CST);
	}
	return race_base->pwrite(io, buf, len, off);
}

static int race_hook(struct csdfs_io *io, void *arg)
{
	(void)arg;
	if (io->role != CSDFS_IO_CONTAINER)
		return 0;
	race_base = io->ops;
	race_ops = *io->ops;
	race_ops.pwrite = race_pwrite;
	io->ops = &race_ops;
	return 0;
}

START_TEST(test_compact_rewrite_during_move)
{
	const size_t len = 256u << 10;
	const struct csdfs_mount_opts mo = { .no_commit_thread = true, .compact_dead = -1,
					     .io_hook = race_hook };
	char path[1100], *ref = malloc(len);

	ck_assert_ptr_nonnull(ref);
	rw.vol = fixture_vol_new(path, sizeof(path), "rewrite", &mo);
	rw.ino = mkfile(rw.vol, "f");
	fill_half(ref, len, 4);
	write_pieces(rw.vol, rw.ino, ref, len);
	fill_half(rw.piece, PIECE, 99);
	memcpy(ref + 16384 + PIECE, rw.piece, PIECE);
	__atomic_store_n(&rw.armed, 1, __ATOMIC_SEQ_CST);
	ck_assert_int_eq(compact(rw.vol, rw.ino, "64"), 0);
	ck_assert_msg(!__atomic_load_n(&rw.armed, __ATOMIC_SEQ_CST), "the pass wrote nothing");
	pthread_join(rw.t, NULL);
	ck_assert_int_eq(rw.rc, PIECE);
	ck_assert_msg(!rw.done_during_move, "the rewrite did not wait for the move of its chunk");
	ck_assert_uint_gt(xnum(rw.vol, ROOT, "compact_chunks"), 1);
	check_content(rw.vol, rw.ino, ref, len);
	ck_assert_int_eq(csdfs_vol_close(rw.vol), 0);
	fsck_clean(path);
	free(ref);
}
END_TEST

/*
 * Low space: a fragmented file, then incompressible data until the volume
 * is full. The data write that finds no free run compacts before it gives
 * ENOSPC (wplan.c): the pass must have moved chunks, and everything written
 * must read back, fsck clean.
 */
START_TEST(test_compact_lowspace)
{
	const size_t len = 1u << 20, step = 1u << 20;
	const struct csdfs_mount_opts mo = { .no_commit_thread = true, .compact_dead = -1 };
	char path[1100], *ref = malloc(len), *rnd = malloc(step);
	struct csdfs_vol *vol = fixture_vol_new(path, sizeof(path), "lowspace", &mo);
	uint64_t ino = mkfile(vol, "log"), fill = mkfile(vol, "fill"), off = 0;
	ssize_t n;

	ck_assert_ptr_nonnull(ref);
	ck_assert_ptr_nonnull(rnd);
	fill_half(ref, len, 5);
	write_pieces(vol, ino, ref, len);
	ck_assert_uint_gt(xnum(vol, ROOT, "dead_bytes"), 128u << 10);
	for (;;) {
		for (size_t i = 0; i < step; i += 8)
			memcpy(rnd + i, &(uint64_t){ (off + i) * 0x9e3779b97f4a7c15ull ^ 0xdeadbeefcafef00dull }, 8);
		n = csdfs_fs_write(vol, fill, rnd, step, off, 0);
		if (n != (ssize_t)step)
			break;
		off += step;
		ck_assert_uint_lt(off, FIXTURE_VOL_SIZE);
	}
	ck_assert_int_eq(n, -ENOSPC);
	fprintf(stderr, "test_compact: full after %llu MiB; the low-space path moved %llu chunks\n",
		(unsigned long long)(off >> 20), (unsigned long long)xnum(vol, ROOT, "compact_chunks"));
	ck_assert_uint_gt(xnum(vol, ROOT, "compact_chunks"), 0);
	check_content(vol, ino, ref, len);
	ck_assert_int_eq(csdfs_vol_close(vol), 0);
	fsck_clean(path);
	free(ref);
	free(rnd);
}
END_TEST

/* ---- faults during a pass ------------------------------------------------ */

static struct csdfs_io_fault fault;

static int install_fault(struct csdfs_io *io, void *arg)
{
	(void)arg;
	return csdfs_io_fault_install(io, &fault);
}

/*
 * A fragmented volume (made once, copied per run); then for N = 1, 2, ...:
 * open it with the Nth I/O call failing (container and metadata files,
 * sticky or not), compact, close; reopen clean: same bytes, fsck clean.
 * Ends at the first N the session never reaches.
 */
START_TEST(test_compact_faults)
{
	const size_t len = 256u << 10;
	const struct csdfs_mount_opts mo = { .no_commit_thread = true, .compact_dead = -1 };
	char tpl[1100], path[1100], cmd[2400], *ref = malloc(len);
	struct csdfs_mkfs_opts o;
	struct csdfs_vol *vol;
	uint64_t ino;
	unsigned runs = 0, fired = 0, in_pass = 0;

	fixture_mkfs_opts(&o);
	fixture_path(tpl, sizeof(tpl), "faults-tpl");
	fixture_vol_create(tpl, &o);
	vol = fixture_vol_open(tpl, &mo);
	ino = mkfile(vol, "f");
	ck_assert_ptr_nonnull(ref);
	fill_half(ref, len, 3);
	write_pieces(vol, ino, ref, len);
	ck_assert_int_eq(csdfs_vol_close(vol), 0);
	fixture_path(path, sizeof(path), "faults-run");
	csdfs_log_set_level(LOG_EMERG);
	for (int sticky = 0; sticky < 2; sticky++) {
		for (unsigned long long nth = 1;; nth++) {
			struct csdfs_mount_opts fmo = mo;
			char err[256];
			int rc;

			fixture_rm(path);
			snprintf(cmd, sizeof(cmd), "cp -a --sparse=always '%s' '%s'", tpl, path);
			ck_assert_int_eq(system(cmd), 0);
			memset(&fault, 0, sizeof(fault));
			fault.kinds = CSDFS_IO_ALL;
			fault.nth = nth;
			fault.err = EIO;
			fault.sticky = sticky;
			fmo.io_hook = install_fault;
			rc = csdfs_vol_open(path, &fmo, &vol, err, sizeof(err));
			if (!rc) {
				unsigned long long at = fault.calls;

				compact(vol, ROOT, "64");
				/* Did call N fall inside the pass itself? */
				in_pass += nth > at && nth <= fault.calls;
				csdfs_vol_close(vol);
			}
			runs++;
			if (!fault.failed)
				break;    /* the whole session ran before call N */
			fired++;
			vol = fixture_vol_open(path, &mo);
			check_content(vol, ino, ref, len);
			ck_assert_int_eq(csdfs_vol_close(vol), 0);
			fsck_clean(path);
		}
	}
	csdfs_log_set_level(LOG_WARNING);
	fprintf(stderr, "test_compact: %u faulted compaction sessions (%u with the fault fired, "
		"%u of them inside the pass)\n", runs, fired, in_pass);
	ck_assert_uint_gt(in_pass, 4);
	fixture_rm(path);
	free(ref);
}
END_TEST

/* The hints against a plain array: random sets and clears on a 4 TiB
 * volume's regions, then the next set region from random places. */
START_TEST(test_hint_bits)
{
	const uint64_t total = 1ull << 30;    /* 4 TiB of 4 KiB blocks */
	const uint64_t edges[] = { 0, 63, 64, 4095, 4096, 262143, 262144 };
	struct csdfs_chint h;
	uint64_t r, n = 0, rng = 7;
	bool *ref;

	ck_assert_int_eq(csdfs_chint_init(&h, total), 0);
	ref = calloc(h.nregions, 1);
	ck_assert_ptr_nonnull(ref);
	ck_assert(!csdfs_chint_next(&h, 0, &r));
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		csdfs_chint_set(&h, edges[i]);
	csdfs_chint_set(&h, h.nregions - 1);
	for (uint64_t from = 0; csdfs_chint_next(&h, from, &r); from = r + 1)
		ck_assert_uint_eq(r, n < 7 ? edges[n++] : (n++, h.nregions - 1));
	ck_assert_uint_eq(n, 8);
	ck_assert_uint_eq(h.nset, 8);
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		csdfs_chint_clear(&h, edges[i]);
	csdfs_chint_clear(&h, h.nregions - 1);
	ck_assert_uint_eq(h.nset, 0);
	ck_assert(!csdfs_chint_next(&h, 0, &r));

	/* A region's first block also hints the region before (a chunk
	 * starting there may reach into it); any other block only its own. */
	csdfs_chint_mark_block(&h, 5 * CSDFS_HINT_REGION_BLOCKS);
	ck_assert(csdfs_chint_test(&h, 4) && csdfs_chint_test(&h, 5));
	csdfs_chint_mark_block(&h, 9 * CSDFS_HINT_REGION_BLOCKS + 1);
	ck_assert(!csdfs_chint_test(&h, 8) && csdfs_chint_test(&h, 9));
	csdfs_chint_mark_range(&h, (20ull * CSDFS_HINT_REGION_BLOCKS - 1) * CSDFS_BLOCK_SIZE + 100,
			       8192);
	ck_assert(csdfs_chint_test(&h, 19) && csdfs_chint_test(&h, 20));
	ck_assert_uint_eq(h.nset, 5);
	for (uint64_t x = 0; x < 25; x++)
		csdfs_chint_clear(&h, x);

	for (unsigned i = 0; i < 200000; i++) {
		uint64_t x;

		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		/* Clustered, so words and summary words fill and empty too. */
		x = (rng >> 8) % (i & 1 ? h.nregions : 70000);
		if (rng & 1) {
			csdfs_chint_set(&h, x);
			ref[x] = true;
		} else {
			csdfs_chint_clear(&h, x);
			ref[x] = false;
		}
		if (i % 200 == 0) {
			uint64_t from = (rng >> 20) % h.nregions, want = from, got;
			bool found;

			while (want < h.nregions && !ref[want])
				want++;
			found = csdfs_chint_next(&h, from, &got);
			ck_assert_int_eq(found, want < h.nregions);
			if (found)
				ck_assert_uint_eq(got, want);
		}
	}
	n = 0;
	for (uint64_t x = 0; x < h.nregions; x++)
		n += ref[x];
	ck_assert_uint_eq(h.nset, n);
	free(ref);
	csdfs_chint_release(&h);
}
END_TEST

/* One volume pass, as the background one (up to 64 MiB). */
static struct csdfs_compact_stats pass_now(struct csdfs_vol *vol)
{
	struct csdfs_compact_stats st;

	ck_assert_int_eq(csdfs_compact_pass(vol, 0, 64u << 20, false, false, &st), 0);
	return st;
}

/* The hints through a volume's life: clear on a new volume, set by chunk
 * versions dying, cleared by the scans that find nothing, kept across a
 * close, and every region set on a volume that has none stored. */
START_TEST(test_hint_volume)
{
	const size_t len = 2u << 20;
	const struct csdfs_mount_opts mo = { .no_commit_thread = true, .compact_dead = -1 };
	char path[1100], *ref = malloc(len);
	struct csdfs_vol *vol = fixture_vol_new(path, sizeof(path), "hints", &mo);
	uint64_t ino = mkfile(vol, "log"), chunks, nset, *saved, pass_scanned;
	struct csdfs_compact_stats st;
	uint8_t key[9] = { 'c', 'h', 'i', 'n', 't', 0, 0, 0, 0 };
	unsigned rounds = 0;

	ck_assert_ptr_nonnull(ref);
	ck_assert_uint_eq(vol->chint.nset, 0);
	/* Whole chunks in one go: nothing dies, nothing is hinted but where
	 * the head left padding. */
	fill_half(ref, len, 3);
	ck_assert_int_eq(csdfs_fs_write(vol, ino, ref, len, 0, 0), (ssize_t)len);
	ck_assert_int_eq(csdfs_vol_sync(vol), 0);
	ck_assert_uint_le(vol->chint.nset, 1);
	chunks = xnum(vol, ino, "extents");
	ck_assert_uint_gt(chunks, 100);
	/* A pass now scans at most the head's region. */
	st = pass_now(vol);
	ck_assert_uint_lt(st.scanned, chunks / 2);
	/* Rewritten in 4 KiB pieces: dead versions everywhere. */
	fill_half(ref, len, 4);
	write_pieces(vol, ino, ref, len);
	ck_assert_uint_ge(vol->chint.nset, 2);
	/* Passes until one moves nothing: then only the head's region stays. */
	do {
		st = pass_now(vol);
		ck_assert_int_eq(csdfs_vol_sync(vol), 0);
		ck_assert_uint_lt(++rounds, 20);
	} while (st.moved);
	ck_assert_uint_le(vol->chint.nset, 1);
	st = pass_now(vol);
	pass_scanned = st.scanned;
	ck_assert_uint_lt(st.scanned, chunks / 2);
	/* The counter-check: every region hinted, the same pass scans every
	 * chunk, so it is the hints that kept the scans short. */
	pthread_mutex_lock(&vol->lock);
	for (uint64_t r = 0; r < vol->chint.nregions; r++)
		csdfs_chint_set(&vol->chint, r);
	vol->compact_next = 0;
	vol->compact_idle_dead = 0;
	pthread_mutex_unlock(&vol->lock);
	st = pass_now(vol);
	fprintf(stderr, "test_compact: %llu chunks; %u passes to compact; a pass then "
		"scans %llu of them, %llu with every region hinted\n",
		(unsigned long long)chunks, rounds, (unsigned long long)pass_scanned,
		(unsigned long long)st.scanned);
	ck_assert_uint_ge(st.scanned, chunks);
	check_content(vol, ino, ref, len);

	/* Kept across a close, bit for bit. */
	csdfs_fs_write(vol, ino, ref, PIECE, 0, 0);
	ck_assert_int_eq(csdfs_vol_sync(vol), 0);
	nset = vol->chint.nset;
	ck_assert_uint_gt(nset, 0);
	saved = malloc((vol->chint.nregions + 63) / 64 * 8);
	ck_assert_ptr_nonnull(saved);
	memcpy(saved, vol->chint.bits, (vol->chint.nregions + 63) / 64 * 8);
	ck_assert_int_eq(csdfs_vol_close(vol), 0);
	vol = fixture_vol_open(path, &mo);
	ck_assert_uint_eq(vol->chint.nset, nset);
	ck_assert_int_eq(memcmp(saved, vol->chint.bits, (vol->chint.nregions + 63) / 64 * 8), 0);

	/* A volume made before the hints (none stored): every region set. */
	pthread_mutex_lock(&vol->lock);
	ck_assert_int_eq(csdfs_meta_del(vol->group, CSDFS_DB_META, key, sizeof(key)), 0);
	memset(vol->chint.dirty, 0, 8);
	vol->chint.ndirty = 0;
	vol->dirty = true;
	pthread_mutex_unlock(&vol->lock);
	ck_assert_int_eq(csdfs_vol_sync(vol), 0);
	ck_assert_int_eq(csdfs_vol_close(vol), 0);
	vol = fixture_vol_open(path, &mo);
	ck_assert_uint_eq(vol->chint.nset, vol->chint.nregions);
	check_content(vol, ino, ref, len);

	/* A malformed page: the mount goes on (every region set), fsck
	 * reports it and repair rewrites it. */
	pthread_mutex_lock(&vol->lock);
	ck_assert_int_eq(csdfs_meta_put(vol->group, CSDFS_DB_META, key, sizeof(key), "xyz", 3, 0), 0);
	vol->dirty = true;
	pthread_mutex_unlock(&vol->lock);
	ck_assert_int_eq(csdfs_vol_sync(vol), 0);
	ck_assert_int_eq(csdfs_vol_close(vol), 0);
	{
		struct csdfs_fsck_opts check = { 0 }, fix = { .repair = true };

		ck_assert_int_eq(csdfs_fsck(path, &check), 4);   /* uncorrected */
		ck_assert_int_eq(csdfs_fsck(path, &fix), 1);     /* corrected */
	}
	vol = fixture_vol_open(path, &mo);
	ck_assert_uint_eq(vol->chint.nset, vol->chint.nregions);
	check_content(vol, ino, ref, len);
	ck_assert_int_eq(csdfs_vol_close(vol), 0);
	fsck_clean(path);
	fixture_rm(path);
	free(saved);
	free(ref);
}
END_TEST

static void add_case(Suite *s, const char *name, const TTest *test)
{
	TCase *tc = tcase_create(name);

	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, test);
	suite_add_tcase(s, tc);
}

/* One case each: CK_RUN_CASE=faults runs one alone. */
static Suite *compact_suite(void)
{
	Suite *s = suite_create("compact");

	add_case(s, "ratio", test_compact_ratio);
	add_case(s, "interleave", test_compact_interleave);
	add_case(s, "rewrite", test_compact_rewrite_during_move);
	add_case(s, "lowspace", test_compact_lowspace);
	add_case(s, "faults", test_compact_faults);
	add_case(s, "hint_bits", test_hint_bits);
	add_case(s, "hint_volume", test_hint_volume);
	return s;
}

FIXTURE_MAIN(compact_suite, FIXTURE_SHM)
