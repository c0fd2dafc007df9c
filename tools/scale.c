/* SPDX-License-Identifier: MIT */
/*
 * csdfs-scale: how the volume's costs grow with what it holds, measured in
 * process through libcsdfs (no FUSE, no kernel in the way), so a volume of
 * 10^7 chunks or a 4 TiB allocator can be measured on a small machine.
 * Not installed; tools/scale drives it and prints the table (docs/scale.md).
 *
 *   csdfs-scale chunks N DIR   a volume of N stored 16 KiB chunks
 *   csdfs-scale files N DIR    a volume of N one-chunk files
 *   csdfs-scale statfs SIZE    statfs on a fragmented allocator of SIZE
 *
 * The chunk and file modes make the volume at DIR, fill it, close it and
 * then measure what a user who grew that far pays:
 * LMDB size, open (what mount does), fsck, and the latency of the core
 * requests on random targets. A DIR that exists is a volume an earlier
 * run made with the same mode and N (tools/scale --keep): it is measured
 * again as it is (populate_s=-1). They print one "key=value ..." line per
 * measurement on stdout and leave the volume for the caller to remove.
 *
 * Data: every chunk is unique (its file and index in its first 16 bytes)
 * and otherwise zero, so it compresses to a few dozen bytes and 10^7
 * chunks take a few hundred MiB of container: the metadata, which is what
 * grows, is the same as for real data.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "csdfs/alloc.h"
#include "csdfs/csdfs.h"
#include "csdfs/log.h"
#include "vol.h"           /* statfs mode: the volume's allocator */

#define CHUNK 16384u
#define CHUNKS_PER_FILE 10000u   /* a 160 MiB file */
#define WRITE_CHUNKS 64u         /* populate in 1 MiB writes */
#define DIR_ENTRIES 10000u       /* the "large directory" readdir lists */
#define FILES_PER_DIR 10000u
#define TRUNC_FILES 2000u        /* 2-chunk files the truncates shorten */

static struct csdfs_cred cred0;

static void die(const char *what, int rc)
{
	fprintf(stderr, "csdfs-scale: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
	exit(1);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(uint64_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng % n;
}

/* ---- latency samples ------------------------------------------------------ */

struct samples {
	double *v;
	size_t n, cap;
};

static void sample_add(struct samples *s, double x)
{
	if (s->n == s->cap) {
		s->cap = s->cap ? s->cap * 2 : 1024;
		s->v = realloc(s->v, s->cap * sizeof(*s->v));
		if (!s->v)
			die("samples", -ENOMEM);
	}
	s->v[s->n++] = x;
}

static int dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Page faults since the last report (or phase_start): a major one is a
 * read from the disk, of LMDB's map or the container's page cache. */
static struct rusage ru_prev;

static double cpu_s(const struct rusage *r)
{
	return (double)(r->ru_utime.tv_sec + r->ru_stime.tv_sec) +
	       (double)(r->ru_utime.tv_usec + r->ru_stime.tv_usec) / 1e6;
}

static void phase_start(void)
{
	getrusage(RUSAGE_SELF, &ru_prev);
}

/* Print the median and p99 of @s in microseconds, and forget them. */
static void sample_report(const char *mode, uint64_t n, const char *op, struct samples *s)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	qsort(s->v, s->n, sizeof(*s->v), dbl_cmp);
	/* CPU per call (this process, all threads) says what the request
	 * costs apart from waiting for the disk; inblock counts the waits. */
	printf("mode=%s n=%" PRIu64 " op=%s calls=%zu median_us=%.2f p99_us=%.2f"
	       " cpu_us_per_call=%.2f inblock_per_call=%.3f majflt_per_call=%.3f"
	       " minflt_per_call=%.2f\n",
	       mode, n, op, s->n, s->v[s->n / 2] * 1e6,
	       s->v[s->n * 99 / 100 < s->n ? s->n * 99 / 100 : s->n - 1] * 1e6,
	       (cpu_s(&ru) - cpu_s(&ru_prev)) * 1e6 / (double)s->n,
	       (double)(ru.ru_inblock - ru_prev.ru_inblock) / (double)s->n,
	       (double)(ru.ru_majflt - ru_prev.ru_majflt) / (double)s->n,
	       (double)(ru.ru_minflt - ru_prev.ru_minflt) / (double)s->n);
	ru_prev = ru;
	fflush(stdout);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* ---- the volume ----------------------------------------------------------- */

struct world {
	const char *mode;
	uint64_t n;
	const char *path;
	uint64_t *files;         /* inodes of the data files */
	uint64_t *sizes;         /* their sizes */
	uint64_t nfiles;
	uint64_t *parents;       /* directory of each file (files mode) */
	uint64_t bigdir;         /* DIR_ENTRIES entries */
	uint64_t *bigdir_ents;
	uint64_t trunc[TRUNC_FILES];
};

static struct csdfs_vol *open_vol(const char *path, bool commit_thread)
{
	struct csdfs_mount_opts mo = { .no_commit_thread = !commit_thread };
	struct csdfs_vol *vol;
	char err[512];
	int rc = csdfs_vol_open(path, &mo, &vol, err, sizeof(err));

	if (rc) {
		fprintf(stderr, "csdfs-scale: open '%s': %s\n", path, err);
		exit(1);
	}
	return vol;
}

static void make_vol(const char *path, uint64_t logical)
{
	struct csdfs_mkfs_opts o = {
		.logical_size = logical,
		.codec = { CSDFS_CODEC_ZSTD, 1 },
		.chunk_size = CHUNK,
	};
	char err[512];
	int rc;

	/* Logical capacity may be 16x the container: the container needs
	 * only 1/16 of the logical bytes, and the data packs far tighter. */
	o.size = logical / 16 + (64ull << 20);
	o.size = (o.size + (1 << 20) - 1) >> 20 << 20;
	rc = csdfs_vol_create(path, &o, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "csdfs-scale: mkfs '%s': %s\n", path, err);
		exit(1);
	}
}

static void name_of(char *buf, size_t len, uint64_t i)
{
	snprintf(buf, len, "f%08" PRIu64, i);
}

static uint64_t mk(struct csdfs_vol *vol, uint64_t parent, const char *name, mode_t mode)
{
	struct stat st;
	int rc = csdfs_fs_mknod(vol, &cred0, parent, name, mode, 0, &st);

	if (rc)
		die(name, rc);
	return st.st_ino;
}

/* Mark chunk (@file, @idx) unique: the rest of the chunk stays zero. */
static void stamp(char *chunk, uint64_t file, uint64_t idx, uint64_t salt)
{
	memcpy(chunk, &file, 8);
	memcpy(chunk + 8, &idx, 8);
	memcpy(chunk + 16, &salt, 8);
	chunk[24] = 1;
}

static void make_bigdir(struct world *w, struct csdfs_vol *vol)
{
	static char two[2 * CHUNK];
	char name[32];
	uint64_t dir;

	w->bigdir = mk(vol, CSDFS_ROOT_INO, "big", S_IFDIR | 0755);
	w->bigdir_ents = calloc(DIR_ENTRIES, sizeof(uint64_t));
	for (uint64_t i = 0; i < DIR_ENTRIES; i++) {
		name_of(name, sizeof(name), i);
		w->bigdir_ents[i] = mk(vol, w->bigdir, name, S_IFREG | 0644);
	}
	/* Each truncate shortens a file no other truncate touched, whatever
	 * the volume's size: the measured cost is then the same work. */
	dir = mk(vol, CSDFS_ROOT_INO, "trunc", S_IFDIR | 0755);
	for (uint64_t i = 0; i < TRUNC_FILES; i++) {
		name_of(name, sizeof(name), i);
		w->trunc[i] = mk(vol, dir, name, S_IFREG | 0644);
		stamp(two, ~0ull, 2 * i, 0);
		stamp(two + CHUNK, ~0ull, 2 * i + 1, 0);
		if (csdfs_fs_write(vol, w->trunc[i], two, sizeof(two), 0, 0) != sizeof(two))
			die("populate write", -EIO);
	}
}

static double populate_chunks(struct world *w)
{
	struct csdfs_vol *vol;
	char *buf = calloc(WRITE_CHUNKS, CHUNK), name[32];
	double t0;
	uint64_t left = w->n;

	w->nfiles = (w->n + CHUNKS_PER_FILE - 1) / CHUNKS_PER_FILE;
	w->files = calloc(w->nfiles, sizeof(uint64_t));
	w->sizes = calloc(w->nfiles, sizeof(uint64_t));
	make_vol(w->path, (w->n + DIR_ENTRIES) * CHUNK * 17 / 16 + (1ull << 30));
	vol = open_vol(w->path, true);
	t0 = now_s();
	make_bigdir(w, vol);
	for (uint64_t f = 0; f < w->nfiles; f++) {
		uint64_t chunks = left < CHUNKS_PER_FILE ? left : CHUNKS_PER_FILE;

		name_of(name, sizeof(name), f);
		w->files[f] = mk(vol, CSDFS_ROOT_INO, name, S_IFREG | 0644);
		for (uint64_t c = 0; c < chunks; c += WRITE_CHUNKS) {
			uint64_t k = chunks - c < WRITE_CHUNKS ? chunks - c : WRITE_CHUNKS;
			ssize_t r;

			for (uint64_t i = 0; i < k; i++)
				stamp(buf + i * CHUNK, f, c + i, 0);
			r = csdfs_fs_write(vol, w->files[f], buf, k * CHUNK, c * CHUNK, 0);
			if (r != (ssize_t)(k * CHUNK))
				die("populate write", r < 0 ? (int)r : -EIO);
		}
		w->sizes[f] = chunks * CHUNK;
		left -= chunks;
	}
	if (csdfs_vol_close(vol))
		die("close after populate", -EIO);
	free(buf);
	return now_s() - t0;
}

static double populate_files(struct world *w)
{
	struct csdfs_vol *vol;
	char data[64] = { 0 }, name[32];
	uint64_t dir = 0;
	double t0;

	w->nfiles = w->n;
	w->files = calloc(w->nfiles, sizeof(uint64_t));
	w->sizes = calloc(w->nfiles, sizeof(uint64_t));
	w->parents = calloc(w->nfiles, sizeof(uint64_t));
	make_vol(w->path, (w->n + DIR_ENTRIES) * CHUNK * 17 / 16 + (1ull << 30));
	vol = open_vol(w->path, true);
	t0 = now_s();
	make_bigdir(w, vol);
	for (uint64_t f = 0; f < w->nfiles; f++) {
		ssize_t r;

		if (f % FILES_PER_DIR == 0) {
			name_of(name, sizeof(name), f / FILES_PER_DIR);
			dir = mk(vol, CSDFS_ROOT_INO, name, S_IFDIR | 0755);
		}
		name_of(name, sizeof(name), f);
		w->files[f] = mk(vol, dir, name, S_IFREG | 0644);
		w->parents[f] = dir;
		stamp(data, f, 0, 0);
		r = csdfs_fs_write(vol, w->files[f], data, sizeof(data), 0, 0);
		if (r != (ssize_t)sizeof(data))
			die("populate write", r < 0 ? (int)r : -EIO);
		w->sizes[f] = sizeof(data);
	}
	if (csdfs_vol_close(vol))
		die("close after populate", -EIO);
	return now_s() - t0;
}

static uint64_t look(struct csdfs_vol *vol, uint64_t parent, const char *name, uint64_t *size)
{
	struct stat st;
	int rc = csdfs_fs_lookup(vol, parent, name, &st);

	if (rc)
		die(name, rc);
	if (size)
		*size = (uint64_t)st.st_size;
	return st.st_ino;
}

/* A volume this tool made before (DIR exists): find its files again, to
 * measure it once more (or under a profiler) without filling it again. */
static double reuse(struct world *w)
{
	struct csdfs_vol *vol = open_vol(w->path, false);
	bool files = !strcmp(w->mode, "files");
	uint64_t dir = CSDFS_ROOT_INO;
	char name[32];

	w->nfiles = files ? w->n : (w->n + CHUNKS_PER_FILE - 1) / CHUNKS_PER_FILE;
	w->files = calloc(w->nfiles, sizeof(uint64_t));
	w->sizes = calloc(w->nfiles, sizeof(uint64_t));
	if (files)
		w->parents = calloc(w->nfiles, sizeof(uint64_t));
	w->bigdir = look(vol, CSDFS_ROOT_INO, "big", NULL);
	w->bigdir_ents = calloc(DIR_ENTRIES, sizeof(uint64_t));
	for (uint64_t i = 0; i < DIR_ENTRIES; i++) {
		name_of(name, sizeof(name), i);
		w->bigdir_ents[i] = look(vol, w->bigdir, name, NULL);
	}
	dir = look(vol, CSDFS_ROOT_INO, "trunc", NULL);
	for (uint64_t i = 0; i < TRUNC_FILES; i++) {
		name_of(name, sizeof(name), i);
		w->trunc[i] = look(vol, dir, name, NULL);
	}
	dir = CSDFS_ROOT_INO;
	for (uint64_t f = 0; f < w->nfiles; f++) {
		if (files && f % FILES_PER_DIR == 0) {
			name_of(name, sizeof(name), f / FILES_PER_DIR);
			dir = look(vol, CSDFS_ROOT_INO, name, NULL);
		}
		name_of(name, sizeof(name), f);
		w->files[f] = look(vol, dir, name, &w->sizes[f]);
		if (files)
			w->parents[f] = dir;
	}
	if (csdfs_vol_close(vol))
		die("close", -EIO);
	return -1;
}

static uint64_t file_bytes(const char *path)
{
	struct stat st;

	return stat(path, &st) ? 0 : (uint64_t)st.st_size;
}

static void measure_sizes(const struct world *w, double populate)
{
	char p[4096];
	uint64_t mdb, cont_blocks;
	struct stat st;

	snprintf(p, sizeof(p), "%s/meta/data.mdb", w->path);
	mdb = file_bytes(p);
	snprintf(p, sizeof(p), "%s/container", w->path);
	cont_blocks = stat(p, &st) ? 0 : (uint64_t)st.st_blocks * 512;
	printf("mode=%s n=%" PRIu64 " populate_s=%.1f lmdb_bytes=%" PRIu64
	       " lmdb_bytes_per_item=%.1f container_alloc_bytes=%" PRIu64 "\n",
	       w->mode, w->n, populate, mdb, (double)mdb / (double)w->n, cont_blocks);
	fflush(stdout);
}

/* Open and close as mount and unmount do (the daemon opens without the
 * commit thread and starts it after forking), best of three. */
static void measure_open(const struct world *w)
{
	double best = 1e9, best_close = 1e9;

	for (int i = 0; i < 3; i++) {
		double t0 = now_s(), t1;
		struct csdfs_vol *vol = open_vol(w->path, false);

		t1 = now_s();
		if (csdfs_vol_start(vol))
			die("start", -EIO);
		if (t1 - t0 < best)
			best = t1 - t0;
		t0 = now_s();
		if (csdfs_vol_close(vol))
			die("close", -EIO);
		if (now_s() - t0 < best_close)
			best_close = now_s() - t0;
	}
	printf("mode=%s n=%" PRIu64 " open_s=%.4f close_s=%.4f\n", w->mode, w->n, best,
	       best_close);
	fflush(stdout);
}

static void measure_fsck(const struct world *w)
{
	struct csdfs_fsck_opts o = { 0 };
	struct rusage r0, r1;
	double t0 = now_s();
	int rc;

	getrusage(RUSAGE_SELF, &r0);
	rc = csdfs_fsck(w->path, &o);
	getrusage(RUSAGE_SELF, &r1);
	printf("mode=%s n=%" PRIu64 " fsck_s=%.2f fsck_cpu_s=%.2f fsck_majflt=%ld fsck_rc=%d\n",
	       w->mode, w->n, now_s() - t0, cpu_s(&r1) - cpu_s(&r0),
	       r1.ru_majflt - r0.ru_majflt, rc);
	fflush(stdout);
	if (rc)
		die("fsck found problems", -EUCLEAN);
}

/* The inode the Nth getattr/lookup targets: any file or big-dir entry. */
static uint64_t pick(const struct world *w, uint64_t *parent, char *name, size_t len)
{
	uint64_t i = rnd(w->nfiles + DIR_ENTRIES);

	if (i < w->nfiles) {
		*parent = w->parents ? w->parents[i] : CSDFS_ROOT_INO;
		name_of(name, len, i);
		return w->files[i];
	}
	*parent = w->bigdir;
	name_of(name, len, i - w->nfiles);
	return w->bigdir_ents[i - w->nfiles];
}

static void measure_requests(struct world *w, unsigned scale)
{
	struct csdfs_vol *vol = open_vol(w->path, true);
	struct samples s = { 0 };
	char *buf = calloc(1, CHUNK), name[32];
	struct stat st;
	struct statvfs sv;
	uint64_t parent;
	int rc;

	phase_start();
	for (unsigned i = 0; i < 20000 / scale; i++) {
		uint64_t ino = pick(w, &parent, name, sizeof(name));
		double t0 = now_s();

		rc = csdfs_fs_getattr(vol, ino, &st);
		sample_add(&s, now_s() - t0);
		if (rc)
			die("getattr", rc);
	}
	sample_report(w->mode, w->n, "getattr", &s);

	for (unsigned i = 0; i < 20000 / scale; i++) {
		uint64_t ino = pick(w, &parent, name, sizeof(name));
		double t0 = now_s();

		rc = csdfs_fs_lookup(vol, parent, name, &st);
		sample_add(&s, now_s() - t0);
		if (rc || st.st_ino != ino)
			die("lookup", rc ? rc : -EIO);
	}
	sample_report(w->mode, w->n, "lookup", &s);

	/* Random chunks: the decoded-chunk cache (64 MiB) holds a few
	 * thousand of them, so nearly every read decodes from the container. */
	for (unsigned i = 0; i < 20000 / scale; i++) {
		uint64_t f = rnd(w->nfiles);
		uint64_t chunks = (w->sizes[f] + CHUNK - 1) / CHUNK;
		uint64_t off = chunks ? rnd(chunks) * CHUNK : 0;
		double t0 = now_s();
		ssize_t r = csdfs_fs_read(vol, w->files[f], buf, CHUNK, off);

		sample_add(&s, now_s() - t0);
		if (r < 0)
			die("read", (int)r);
	}
	sample_report(w->mode, w->n, "read16k", &s);

	/* Overwrite a random stored chunk and make it durable. */
	for (unsigned i = 0; i < 1000 / scale; i++) {
		uint64_t f = rnd(w->nfiles);
		uint64_t chunks = (w->sizes[f] + CHUNK - 1) / CHUNK;
		uint64_t idx = chunks ? rnd(chunks) : 0;
		double t0;
		ssize_t r;

		stamp(buf, f, idx, i + 1);
		t0 = now_s();
		r = csdfs_fs_write(vol, w->files[f], buf, CHUNK, idx * CHUNK, CSDFS_WRITE_SYNC);
		sample_add(&s, now_s() - t0);
		if (r != CHUNK)
			die("write", r < 0 ? (int)r : -EIO);
		if (w->sizes[f] < (idx + 1) * CHUNK)
			w->sizes[f] = (idx + 1) * CHUNK;
	}
	sample_report(w->mode, w->n, "write16k_sync", &s);

	/* Compaction's status read and its low-space pass look only where the
	 * writes since their last look left dead bytes (compact_hint.c): the
	 * first call after the writes above scans those regions, the next
	 * ones find nothing hinted. */
	for (unsigned i = 0; i < 2; i++) {
		char val[32];

		for (unsigned j = 0; j < (i ? 100 : 1); j++) {
			double t0 = now_s();

			rc = csdfs_fs_getxattr(vol, CSDFS_ROOT_INO, "user.csdfs.compact", val,
					       sizeof(val));
			sample_add(&s, now_s() - t0);
			if (rc < 0)
				die("getxattr user.csdfs.compact", rc);
		}
		sample_report(w->mode, w->n, i ? "compact_status_again" : "compact_status_first", &s);
	}
	for (unsigned i = 0; i < 2; i++) {
		for (unsigned j = 0; j < (i ? 100 : 1); j++) {
			struct csdfs_compact_stats cs;
			double t0 = now_s();

			/* As the low-space path's pass, but never into the reserve. */
			rc = csdfs_compact_pass(vol, 0, 256u << 10, false, false, &cs);
			sample_add(&s, now_s() - t0);
			if (rc)
				die("compaction pass", rc);
		}
		sample_report(w->mode, w->n, i ? "compact_pass_again" : "compact_pass_first", &s);
	}

	for (unsigned i = 0; i < 20000 / scale; i++) {
		double t0 = now_s();

		rc = csdfs_fs_statfs(vol, &sv);
		sample_add(&s, now_s() - t0);
		if (rc)
			die("statfs", rc);
	}
	sample_report(w->mode, w->n, "statfs", &s);

	for (unsigned i = 0; i < 100 / scale; i++) {
		struct csdfs_dirsnap snap;
		double t0 = now_s();

		rc = csdfs_fs_readdir_snapshot(vol, w->bigdir, &snap);
		sample_add(&s, now_s() - t0);
		if (rc || snap.n < DIR_ENTRIES)
			die("readdir", rc ? rc : -EIO);
		csdfs_dirsnap_free(&snap);
	}
	sample_report(w->mode, w->n, "readdir10k", &s);

	for (unsigned i = 0; i < 5000 / scale; i++) {
		uint64_t ino = pick(w, &parent, name, sizeof(name));
		struct stat in = { .st_mode = (i & 1) ? 0600 : 0644 };
		double t0 = now_s();

		rc = csdfs_fs_setattr(vol, ino, &in, CSDFS_SET_MODE, &st);
		sample_add(&s, now_s() - t0);
		if (rc)
			die("setattr mode", rc);
	}
	sample_report(w->mode, w->n, "setattr_mode", &s);

	/* Drop the second chunk of a 2-chunk file, each file once, in a
	 * random order (a volume measured again has nothing left to drop:
	 * the truncates then only set the size). */
	for (unsigned i = 0; i < TRUNC_FILES / scale; i++) {
		uint64_t j = rnd(TRUNC_FILES - i) + i, t = w->trunc[j];
		struct stat in = { .st_size = CHUNK };
		double t0;

		w->trunc[j] = w->trunc[i];
		w->trunc[i] = t;
		t0 = now_s();
		rc = csdfs_fs_setattr(vol, t, &in, CSDFS_SET_SIZE, &st);
		sample_add(&s, now_s() - t0);
		if (rc)
			die("truncate", rc);
	}
	sample_report(w->mode, w->n, "truncate", &s);

	/* A kernel that has looked up every file keeps a reference to each
	 * until it forgets them: the same lookups with all of them held. */
	for (uint64_t f = 0; f < w->nfiles; f++)
		csdfs_fs_ref(vol, w->files[f]);
	phase_start();
	for (unsigned i = 0; i < 20000 / scale; i++) {
		uint64_t ino = pick(w, &parent, name, sizeof(name));
		double t0 = now_s();

		rc = csdfs_fs_getattr(vol, ino, &st);
		sample_add(&s, now_s() - t0);
		if (rc)
			die("getattr", rc);
	}
	sample_report(w->mode, w->n, "getattr_all_referenced", &s);
	for (unsigned i = 0; i < 20000 / scale; i++) {
		uint64_t f = rnd(w->nfiles);
		uint64_t chunks = (w->sizes[f] + CHUNK - 1) / CHUNK;
		uint64_t off = chunks ? rnd(chunks) * CHUNK : 0;
		double t0 = now_s();
		ssize_t r = csdfs_fs_read(vol, w->files[f], buf, CHUNK, off);

		sample_add(&s, now_s() - t0);
		if (r < 0)
			die("read", (int)r);
	}
	sample_report(w->mode, w->n, "read16k_all_referenced", &s);
	for (uint64_t f = 0; f < w->nfiles; f++)
		csdfs_fs_forget(vol, w->files[f], 1);

	if (csdfs_vol_close(vol))
		die("close", -EIO);
	free(buf);
}

/*
 * A compaction pass's search for work on SIZE worth of hints: one hinted
 * region, the last (the farthest a search for the next one can go), set
 * before each pass; the pass finds it, seeks there, finds no chunk and
 * clears it. Swapped in under the lock like the allocator below.
 */
static void measure_compact_hints(struct csdfs_vol *vol, uint64_t total)
{
	struct csdfs_chint big, saved;
	struct samples s = { 0 };
	int rc = csdfs_chint_init(&big, total);

	if (rc)
		die("compaction hints", rc);
	pthread_mutex_lock(&vol->lock);
	saved = vol->chint;
	vol->chint = big;
	pthread_mutex_unlock(&vol->lock);
	phase_start();
	for (unsigned i = 0; i < 20000; i++) {
		struct csdfs_compact_stats cs;
		double t0;

		pthread_mutex_lock(&vol->lock);
		csdfs_chint_set(&vol->chint, vol->chint.nregions - 1);
		vol->compact_next = 0;
		pthread_mutex_unlock(&vol->lock);
		t0 = now_s();
		rc = csdfs_compact_pass(vol, 0, 256u << 10, false, false, &cs);
		sample_add(&s, now_s() - t0);
		if (rc || vol->chint.nset)
			die("compaction pass on the hints", rc ? rc : -EUCLEAN);
	}
	sample_report("statfs", total * CSDFS_BLOCK_SIZE >> 30, "compact_pass_far_hint", &s);
	pthread_mutex_lock(&vol->lock);
	big = vol->chint;
	vol->chint = saved;
	pthread_mutex_unlock(&vol->lock);
	csdfs_chint_release(&big);
}

/* ---- statfs on a large allocator ------------------------------------------ */

/*
 * A 4 TiB container cannot be preallocated here, so the volume is a small
 * one whose allocator is swapped, under the volume lock, for one of
 * @size bytes that is fragmented all over: free runs of 1 to 7 blocks
 * (shorter than a raw chunk: statfs must not count them) and of 8 to 64,
 * one used block between runs. csdfs_fs_statfs then runs its real code on
 * it; the old walk (csdfs_alloc_usable_scan) is timed for comparison.
 */
static void measure_statfs(uint64_t size, const char *path)
{
	struct csdfs_alloc big, saved;
	struct csdfs_vol *vol;
	struct samples s = { 0 };
	struct statvfs sv;
	uint64_t total = size / CSDFS_BLOCK_SIZE, b, usable;
	double t0;
	int rc;

	make_vol(path, 1ull << 30);
	vol = open_vol(path, false);
	rc = csdfs_alloc_init(&big, CSDFS_FIRST_DATA_BLOCK, total);
	if (rc)
		die("allocator", rc);
	t0 = now_s();
	for (b = CSDFS_FIRST_DATA_BLOCK; b < total;) {
		uint64_t len = rnd(4) ? 1 + rnd(7) : 8 + rnd(57);

		if (b + len > total)
			len = total - b;
		csdfs_alloc_mark_free(&big, b, len);
		b += len + 1;
	}
	fprintf(stderr, "csdfs-scale: fragmented a %" PRIu64 " GiB allocator in %.1f s\n",
		size >> 30, now_s() - t0);
	/* What mount adds per volume size: one walk to count the fragments. */
	t0 = now_s();
	csdfs_alloc_set_minrun(&big, vol->alloc.minrun);
	printf("mode=statfs size_gib=%" PRIu64 " mount_fragment_count_s=%.3f\n", size >> 30,
	       now_s() - t0);

	pthread_mutex_lock(&vol->lock);
	saved = vol->alloc;
	big.reserve = saved.reserve;
	vol->alloc = big;
	pthread_mutex_unlock(&vol->lock);

	phase_start();
	for (unsigned i = 0; i < 20000; i++) {
		t0 = now_s();
		rc = csdfs_fs_statfs(vol, &sv);
		sample_add(&s, now_s() - t0);
		if (rc)
			die("statfs", rc);
	}
	printf("mode=statfs size_gib=%" PRIu64 " free_blocks=%" PRIu64 " usable_blocks=%" PRIu64
	       "\n", size >> 30, vol->alloc.navail, csdfs_alloc_usable(&vol->alloc));
	sample_report("statfs", size >> 30, "statfs", &s);

	/* The whole-map walk statfs did before the kept count, to compare
	 * with, and to check the kept count against. */
	pthread_mutex_lock(&vol->lock);
	phase_start();
	for (unsigned i = 0; i < 3; i++) {
		t0 = now_s();
		usable = csdfs_alloc_usable_scan(&vol->alloc, vol->alloc.minrun);
		sample_add(&s, now_s() - t0);
	}
	if (usable != csdfs_alloc_usable(&vol->alloc))
		die("kept usable count differs from the walk", -EUCLEAN);
	vol->alloc = saved;
	pthread_mutex_unlock(&vol->lock);
	sample_report("statfs", size >> 30, "usable_scan_walk", &s);

	/* A write's placement on the same map: the head moves to a new free
	 * run every few chunks, next-fit from where it was. */
	phase_start();
	for (unsigned i = 0; i < 20000; i++) {
		uint64_t pa;

		t0 = now_s();
		rc = csdfs_alloc_place(&big, CHUNK, false, &pa);
		sample_add(&s, now_s() - t0);
		if (rc)
			die("place", rc);
	}
	sample_report("statfs", size >> 30, "alloc_place16k", &s);
	csdfs_alloc_release(&big);

	/* The low-space worst case: plenty of free blocks, but all in runs
	 * too short for a raw chunk, so a placement finds none. */
	rc = csdfs_alloc_init(&big, CSDFS_FIRST_DATA_BLOCK, total);
	if (rc)
		die("allocator", rc);
	for (b = CSDFS_FIRST_DATA_BLOCK; b < total; b += 2)
		csdfs_alloc_mark_free(&big, b, 1);
	csdfs_alloc_set_minrun(&big, vol->alloc.minrun);
	/* A raw chunk (4 blocks) and a compressed one (2 blocks): the first
	 * 8 KiB placement walks the map, the later ones know better. */
	for (unsigned len = CHUNK; len >= CHUNK / 2; len /= 2) {
		phase_start();
		for (unsigned i = 0; i < 5; i++) {
			uint64_t pa;

			t0 = now_s();
			rc = csdfs_alloc_place(&big, len, false, &pa);
			sample_add(&s, now_s() - t0);
			if (rc != -ENOSPC)
				die("place on fragments", rc ? rc : -EEXIST);
		}
		sample_report("statfs", size >> 30, len == CHUNK ? "alloc_place16k_enospc" :
			      "alloc_place8k_enospc", &s);
	}
	csdfs_alloc_release(&big);
	measure_compact_hints(vol, total);
	if (csdfs_vol_close(vol))
		die("close", -EIO);
}

static void usage(void)
{
	fprintf(stderr, "usage: csdfs-scale chunks|files N DIR | csdfs-scale statfs SIZE DIR\n"
		"  (see tools/scale and docs/scale.md)\n");
	exit(2);
}

int main(int argc, char *argv[])
{
	struct world w = { 0 };
	uint64_t n;
	double t;
	/* Tiny runs (the test): fewer calls, same code. */
	unsigned scale = getenv("CSDFS_SCALE_QUICK") ? 20 : 1;

	if (argc != 4)
		usage();
	if (!strcmp(argv[1], "statfs")) {
		if (csdfs_parse_size(argv[2], &n) || n < (64ull << 20))
			usage();
		measure_statfs(n, argv[3]);
		return 0;
	}
	if (csdfs_parse_u64(argv[2], &n) || !n) {
		fprintf(stderr, "csdfs-scale: bad count '%s' (a whole number above 0)\n", argv[2]);
		return 2;
	}
	w.mode = argv[1];
	w.n = n;
	w.path = argv[3];
	if (strcmp(w.mode, "chunks") && strcmp(w.mode, "files"))
		usage();
	if (!access(w.path, F_OK))
		t = reuse(&w);
	else if (!strcmp(w.mode, "chunks"))
		t = populate_chunks(&w);
	else if (!strcmp(w.mode, "files"))
		t = populate_files(&w);
	else
		usage();
	measure_sizes(&w, t);
	measure_open(&w);
	measure_fsck(&w);
	measure_requests(&w, scale);
	free(w.files);
	free(w.sizes);
	free(w.bigdir_ents);
	free(w.parents);
	return 0;
}
