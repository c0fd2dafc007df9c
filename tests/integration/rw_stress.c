/*
 * rw_stress: concurrent writers and readers with byte-exact verification.
 *
 * Data mode (default): W writer threads pwrite 4 KiB blocks that carry
 * (file, block, generation, writer) in a header and a payload derived from
 * them, so any aligned 4 KiB block read back can be checked to be exactly
 * one complete generation of that block. Every block has one owner writer
 * (block group g belongs to writer g % W), so the last generation written to
 * each block is known; concurrent writers still share chunks (group size 1
 * puts four writers in every 16 KiB chunk). R reader threads read random
 * aligned ranges the whole time and validate every block; a block seen going
 * back to an older generation counts as an error too. At the end the main
 * thread fsyncs and compares every block with what its owner last wrote.
 *
 *   rw_stress [-w W] [-r R] [-t SEC] [-s MiB] [-m same|diff] [-g BLOCKS]
 *             [-D] [-S STATEFILE] DIR
 *   rw_stress -V STATEFILE DIR        verify a saved final state (after remount)
 *
 * Namespace mode (-P N): N processes create, rename, link and unlink their
 * own names, race O_EXCL creates on shared names (exactly one winner each),
 * mkdir/rmdir a shared directory, while a reader process lists the directory
 * and checks that 200 never-touched names appear exactly once in every pass.
 * The final directory content is then compared with the expected set.
 *
 *   rw_stress -P N [-t SEC] DIR
 *
 * Exit 0 if no error was seen, 1 otherwise. Only libc, pthreads and Linux
 * syscalls. Build: gcc -O2 -Wall -Wextra -o rw_stress rw_stress.c -lpthread
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BLK 4096
#define MAGIC 0x43534446537453ULL	/* "CSDFStS" */
#define MAX_REPORT 20

struct hdr {
	uint64_t magic;
	uint64_t file;
	uint64_t block;
	uint64_t gen;
	uint64_t writer;
};

static int o_writers = 4, o_readers = 4, o_secs = 10, o_direct, o_group = 1;
static long o_mib = 8;
static int o_diff;
static const char *o_dir, *o_save, *o_verify;

static int nfiles;
static long nblocks;		/* per file */
static int *fds;		/* shared descriptors used by writers and readers */
static uint64_t **exp_gen;	/* [file][block]: last generation written (owner only) */
static volatile int stop;

static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static long n_errors;
static long n_reports;
static long n_transient;	/* torn buffered reads that healed on re-read */

static void report(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&report_lock);
	n_errors++;
	if (n_reports++ < MAX_REPORT) {
		va_start(ap, fmt);
		fputs("rw_stress: ERROR ", stdout);
		vprintf(fmt, ap);
		fputc('\n', stdout);
		va_end(ap);
	}
	pthread_mutex_unlock(&report_lock);
}

static int owner_of(long block)
{
	if (o_diff)
		return -1;	/* owner is the file's writer */
	return (int)((block / o_group) % o_writers);
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* the one valid content of (file, block, gen): even generations compress */
static void make_block(unsigned char *b, uint64_t file, uint64_t block, uint64_t gen,
		       uint64_t writer)
{
	struct hdr h = { MAGIC, file, block, gen, writer };
	uint64_t x = mix(file * 0x9E3779B97F4A7C15ULL ^ mix(block) ^ (gen << 20) ^ writer) | 1;
	size_t i;

	memcpy(b, &h, sizeof h);
	if (gen % 2 == 0) {
		unsigned char pat[64];
		for (i = 0; i < sizeof pat; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			pat[i] = (unsigned char)x;
		}
		for (i = sizeof h; i < BLK; i++)
			b[i] = (i & 1024) ? pat[i % 64] : 0;
	} else {
		for (i = sizeof h; i < BLK; i += 8) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			memcpy(b + i, &x, (BLK - i) < 8 ? BLK - i : 8);
		}
	}
}

/* returns the block's generation, or -1 with why[] saying what is wrong */
static int64_t check_block(const unsigned char *b, uint64_t file, uint64_t block,
			   unsigned char *scratch, char *why, size_t whylen)
{
	struct hdr h;

	memcpy(&h, b, sizeof h);
	if (h.magic != MAGIC) {
		int zero = 1, i;
		for (i = 0; i < BLK && zero; i++)
			zero = !b[i];
		snprintf(why, whylen, "file %lu block %lu: %s", (unsigned long)file,
			 (unsigned long)block, zero ? "all zeros" : "bad magic (garbage)");
		return -1;
	}
	if (h.file != file || h.block != block) {
		snprintf(why, whylen, "file %lu block %lu holds block %lu of file %lu (misplaced)",
			 (unsigned long)file, (unsigned long)block, (unsigned long)h.block,
			 (unsigned long)h.file);
		return -1;
	}
	make_block(scratch, h.file, h.block, h.gen, h.writer);
	if (memcmp(scratch, b, BLK)) {
		int i, first = -1, n = 0;
		for (i = 0; i < BLK; i++)
			if (scratch[i] != b[i]) {
				if (first < 0)
					first = i;
				n++;
			}
		snprintf(why, whylen, "file %lu block %lu gen %lu: torn or corrupt (%d bytes "
			 "differ, first at %d)", (unsigned long)file, (unsigned long)block,
			 (unsigned long)h.gen, n, first);
		return -1;
	}
	return (int64_t)h.gen;
}

static uint64_t xs(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *alloc_aligned(size_t n)
{
	void *p;

	if (posix_memalign(&p, BLK, n))
		return NULL;
	return p;
}

struct wstat {
	long ops, bytes;
};

static void *writer_main(void *arg)
{
	int wid = (int)(long)arg;
	uint64_t seed = 0x1234567ULL * (wid + 1), gen = 0;
	unsigned char *buf = alloc_aligned((size_t)BLK * 64);
	struct wstat *st = calloc(1, sizeof *st);
	long ngroups = nblocks / o_group;

	while (!stop) {
		long start, len, i;
		int file;

		if (o_diff) {
			file = wid;
			start = xs(&seed) % nblocks;
			len = 1 + xs(&seed) % 16;
			if (start + len > nblocks)
				len = nblocks - start;
		} else {
			long mine = (ngroups - wid + o_writers - 1) / o_writers;
			long g = (long)(xs(&seed) % mine) * o_writers + wid;
			long s = xs(&seed) % o_group;

			file = 0;
			start = g * o_group + s;
			len = 1 + xs(&seed) % (o_group - s);
		}
		if (len <= 0 || len > 64)
			continue;
		gen++;
		for (i = 0; i < len; i++)
			make_block(buf + i * BLK, file, start + i, gen, wid);
		{
			ssize_t w = pwrite(fds[file], buf, len * BLK, start * BLK);
			if (w != len * BLK) {
				report("writer %d: pwrite(%ld blocks at block %ld) returned %zd: %s",
				       wid, len, start, w, w < 0 ? strerror(errno) : "short");
				continue;
			}
		}
		for (i = 0; i < len; i++)
			exp_gen[file][start + i] = gen;
		st->ops++;
		st->bytes += len * BLK;
	}
	free(buf);
	return st;
}

static void *reader_main(void *arg)
{
	int rid = (int)(long)arg;
	uint64_t seed = 0xabcdef01ULL * (rid + 7);
	unsigned char *buf = alloc_aligned((size_t)BLK * 64), *scratch = malloc(BLK);
	struct wstat *st = calloc(1, sizeof *st);
	uint64_t **seen = calloc(nfiles, sizeof *seen);
	char who[32];
	int f;

	snprintf(who, sizeof who, "reader %d", rid);
	for (f = 0; f < nfiles; f++)
		seen[f] = calloc(nblocks, sizeof **seen);
	while (!stop) {
		int file = o_diff ? (int)(xs(&seed) % nfiles) : 0;
		long start = xs(&seed) % nblocks, len = 1 + xs(&seed) % 32, i;
		ssize_t r;

		if (start + len > nblocks)
			len = nblocks - start;
		r = pread(fds[file], buf, len * BLK, start * BLK);
		if (r != len * BLK) {
			report("%s: pread(%ld blocks at block %ld) returned %zd: %s", who, len,
			       start, r, r < 0 ? strerror(errno) : "short");
			continue;
		}
		for (i = 0; i < len; i++) {
			char why[256];
			int64_t g = check_block(buf + i * BLK, file, start + i, scratch, why,
						sizeof why);
			/*
			 * Buffered reads of a page that a buffered write is copying
			 * into are not atomic on Linux (ext4 shows it too): the
			 * reader copies the page unlocked. Re-read such a block; only
			 * a block that stays invalid is the filesystem's fault.
			 * O_DIRECT (-D) goes to the filesystem itself: no retry.
			 */
			if (g < 0 && !o_direct) {
				int k;
				for (k = 0; k < 20 && g < 0; k++) {
					char why2[256];
					usleep(200);
					if (pread(fds[file], buf + i * BLK, BLK, (start + i) * BLK)
					    != BLK)
						break;
					g = check_block(buf + i * BLK, file, start + i, scratch,
							why2, sizeof why2);
				}
				if (g >= 0) {
					__sync_fetch_and_add(&n_transient, 1);
					continue;	/* its generation may be older: skip */
				}
			}
			if (g < 0) {
				report("%s: %s", who, why);
				continue;
			}
			if ((uint64_t)g < seen[file][start + i])
				report("%s: file %d block %ld went back from generation %lu to %lu",
				       who, file, start + i, (unsigned long)seen[file][start + i],
				       (unsigned long)g);
			else
				seen[file][start + i] = g;
		}
		st->ops++;
		st->bytes += len * BLK;
	}
	for (f = 0; f < nfiles; f++)
		free(seen[f]);
	free(seen);
	free(buf);
	free(scratch);
	return st;
}

static void file_name(char *out, size_t n, int f)
{
	if (o_diff)
		snprintf(out, n, "%s/rw_diff.%d.dat", o_dir, f);
	else
		snprintf(out, n, "%s/rw_same.dat", o_dir);
}

static int writer_of(int file, long block)
{
	return o_diff ? file : owner_of(block);
}

/* read every block through a fresh descriptor and compare with exp_gen */
static long verify_final(void)
{
	unsigned char *buf = alloc_aligned((size_t)BLK * 64), *want = malloc(BLK);
	char path[PATH_MAX];
	long bad = 0;
	int f;

	for (f = 0; f < nfiles; f++) {
		struct stat st;
		long b;
		int fd;

		file_name(path, sizeof path, f);
		fd = open(path, O_RDONLY | O_DIRECT);
		if (fd < 0)
			fd = open(path, O_RDONLY);
		if (fd < 0) {
			report("final: open %s: %s", path, strerror(errno));
			bad++;
			continue;
		}
		if (fstat(fd, &st) == 0 && st.st_size != nblocks * BLK) {
			report("final: %s has size %lld, expected %ld", path,
			       (long long)st.st_size, nblocks * BLK);
			bad++;
		}
		for (b = 0; b < nblocks; b += 64) {
			long n = nblocks - b < 64 ? nblocks - b : 64, i;
			ssize_t r = pread(fd, buf, n * BLK, b * BLK);
			if (r != n * BLK) {
				report("final: pread %s at block %ld returned %zd: %s", path, b, r,
				       r < 0 ? strerror(errno) : "short");
				bad++;
				continue;
			}
			for (i = 0; i < n; i++) {
				make_block(want, f, b + i, exp_gen[f][b + i], writer_of(f, b + i));
				if (memcmp(want, buf + i * BLK, BLK)) {
					struct hdr h;
					char why[256];
					memcpy(&h, buf + i * BLK, sizeof h);
					if (check_block(buf + i * BLK, f, b + i, want, why,
							sizeof why) < 0)
						report("final: %s", why);
					else
						report("final: file %d block %ld: expected generation "
						       "%lu, found generation %lu (lost or stale write)",
						       f, b + i, (unsigned long)exp_gen[f][b + i],
						       (unsigned long)h.gen);
					bad++;
				}
			}
		}
		close(fd);
	}
	free(buf);
	free(want);
	return bad;
}

static int save_state(const char *path)
{
	FILE *f = fopen(path, "w");
	long b;
	int i;

	if (!f)
		return -1;
	fprintf(f, "rw_stress-state 1 %d %d %ld %d %d\n", o_diff, nfiles, nblocks, o_writers,
		o_group);
	for (i = 0; i < nfiles; i++)
		for (b = 0; b < nblocks; b++)
			fprintf(f, "%lu\n", (unsigned long)exp_gen[i][b]);
	return fclose(f);
}

static int load_state(const char *path)
{
	FILE *f = fopen(path, "r");
	long b;
	int i, v;

	if (!f)
		return -1;
	if (fscanf(f, "rw_stress-state %d %d %d %ld %d %d\n", &v, &o_diff, &nfiles, &nblocks,
		   &o_writers, &o_group) != 6 || v != 1) {
		fclose(f);
		return -1;
	}
	exp_gen = calloc(nfiles, sizeof *exp_gen);
	for (i = 0; i < nfiles; i++) {
		exp_gen[i] = calloc(nblocks, sizeof **exp_gen);
		for (b = 0; b < nblocks; b++) {
			unsigned long g;
			if (fscanf(f, "%lu\n", &g) != 1) {
				fclose(f);
				return -1;
			}
			exp_gen[i][b] = g;
		}
	}
	fclose(f);
	return 0;
}

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static int data_mode(void)
{
	pthread_t *wt, *rt;
	unsigned char *buf;
	char path[PATH_MAX];
	long wops = 0, wbytes = 0, rops = 0, rbytes = 0, bad;
	double t0;
	int i, f;

	if (o_verify) {
		if (load_state(o_verify) < 0) {
			fprintf(stderr, "rw_stress: cannot load state file '%s'\n", o_verify);
			return 2;
		}
		bad = verify_final();
		printf("rw_stress: verify-only: %s, %ld bad blocks\n", bad ? "FAILED" : "ok", bad);
		for (f = 0; f < nfiles; f++)
			free(exp_gen[f]);
		free(exp_gen);
		return bad || n_errors ? 1 : 0;
	}
	nfiles = o_diff ? o_writers : 1;
	nblocks = o_mib * 1024 * 1024 / BLK;
	if (!o_diff && (nblocks / o_group) < o_writers) {
		fprintf(stderr, "rw_stress: file too small for %d writers\n", o_writers);
		return 2;
	}
	fds = calloc(nfiles, sizeof *fds);
	exp_gen = calloc(nfiles, sizeof *exp_gen);
	buf = alloc_aligned((size_t)BLK * 64);
	/* pre-fill every block with generation 0 so zeros are never valid */
	for (f = 0; f < nfiles; f++) {
		long b;

		exp_gen[f] = calloc(nblocks, sizeof **exp_gen);
		file_name(path, sizeof path, f);
		fds[f] = open(path, O_CREAT | O_TRUNC | O_RDWR | (o_direct ? O_DIRECT : 0), 0644);
		if (fds[f] < 0) {
			fprintf(stderr, "rw_stress: open '%s': %s\n", path, strerror(errno));
			return 2;
		}
		for (b = 0; b < nblocks; b += 64) {
			long n = nblocks - b < 64 ? nblocks - b : 64, i2;
			for (i2 = 0; i2 < n; i2++)
				make_block(buf + i2 * BLK, f, b + i2, 0, writer_of(f, b + i2));
			if (pwrite(fds[f], buf, n * BLK, b * BLK) != n * BLK) {
				fprintf(stderr, "rw_stress: prefill '%s': %s\n", path, strerror(errno));
				return 2;
			}
		}
	}
	wt = calloc(o_writers, sizeof *wt);
	rt = calloc(o_readers, sizeof *rt);
	t0 = now_s();
	for (i = 0; i < o_writers; i++)
		pthread_create(&wt[i], NULL, writer_main, (void *)(long)i);
	for (i = 0; i < o_readers; i++)
		pthread_create(&rt[i], NULL, reader_main, (void *)(long)i);
	while (now_s() - t0 < o_secs && n_errors < 1000)
		usleep(50000);
	stop = 1;
	for (i = 0; i < o_writers; i++) {
		struct wstat *st;
		pthread_join(wt[i], (void **)&st);
		wops += st->ops;
		wbytes += st->bytes;
		free(st);
	}
	for (i = 0; i < o_readers; i++) {
		struct wstat *st;
		pthread_join(rt[i], (void **)&st);
		rops += st->ops;
		rbytes += st->bytes;
		free(st);
	}
	for (f = 0; f < nfiles; f++) {
		if (fsync(fds[f]) < 0)
			report("final: fsync: %s", strerror(errno));
		close(fds[f]);
	}
	printf("rw_stress: %s files=%d size=%ldMiB group=%d direct=%d: %d writers %ld writes "
	       "(%.1f MiB), %d readers %ld reads (%.1f MiB) in %.1f s\n",
	       o_diff ? "diff" : "same", nfiles, o_mib, o_group, o_direct, o_writers, wops,
	       wbytes / 1048576.0, o_readers, rops, rbytes / 1048576.0, now_s() - t0);
	if (wops == 0 || (o_readers && rops == 0))
		report("no progress: %ld writes, %ld reads", wops, rops);
	bad = verify_final();
	if (o_save && save_state(o_save) < 0)
		report("cannot save state to '%s': %s", o_save, strerror(errno));
	printf("rw_stress: %ld errors during run, %ld bad blocks at the end, %ld transient "
	       "torn buffered reads (page cache, tolerated): %s\n",
	       n_errors - bad, bad, n_transient, n_errors ? "FAILED" : "ok");
	for (f = 0; f < nfiles; f++)
		free(exp_gen[f]);
	free(exp_gen);
	free(fds);
	free(wt);
	free(rt);
	free(buf);
	return n_errors ? 1 : 0;
}

/* ---------------- namespace mode ---------------- */

#define MAX_ROUNDS 100000
#define NSTABLE 200

struct shared {
	volatile int stop;
	int rounds[64];			/* rounds completed per child */
	int wins[MAX_ROUNDS];		/* O_EXCL winners per race name */
	int winner[MAX_ROUNDS];
	long errors;
	long passes;			/* reader passes */
};

static struct shared *sh;

static void ns_err(const char *fmt, ...)
{
	va_list ap;

	__sync_fetch_and_add(&sh->errors, 1);
	va_start(ap, fmt);
	fputs("rw_stress: ERROR ", stdout);
	vprintf(fmt, ap);
	fputc('\n', stdout);
	fflush(stdout);
	va_end(ap);
}

static int put(const char *path, const char *content, int excl)
{
	int fd = open(path, O_CREAT | O_WRONLY | (excl ? O_EXCL : O_TRUNC), 0644);
	ssize_t n = (ssize_t)strlen(content);

	if (fd < 0)
		return -1;
	if (write(fd, content, n) != n) {
		int e = errno;
		close(fd);
		errno = e ? e : EIO;
		return -1;
	}
	return close(fd);
}

static void ns_child(int id)
{
	char p[PATH_MAX], q[PATH_MAX], l[PATH_MAX], content[64];
	int r;

	for (r = 0; r < MAX_ROUNDS && !sh->stop; r++) {
		snprintf(p, sizeof p, "%s/race_%d", o_dir, r);
		if (put(p, "", 1) == 0) {
			char w[16];
			int fd;
			__sync_fetch_and_add(&sh->wins[r], 1);
			sh->winner[r] = id;
			snprintf(w, sizeof w, "%d", id);
			fd = open(p, O_WRONLY);
			if (fd < 0 || write(fd, w, strlen(w)) != (ssize_t)strlen(w))
				ns_err("child %d: writing race_%d: %s", id, r, strerror(errno));
			if (fd >= 0)
				close(fd);
		} else if (errno != EEXIST) {
			ns_err("child %d: O_EXCL create race_%d: %s", id, r, strerror(errno));
		}
		snprintf(p, sizeof p, "%s/c_%d_%d", o_dir, id, r);
		snprintf(content, sizeof content, "child %d round %d\n", id, r);
		if (put(p, content, 1) < 0) {
			ns_err("child %d: create %s: %s", id, p, strerror(errno));
			continue;
		}
		if (r % 2 == 0) {
			snprintf(q, sizeof q, "%s/m_%d_%d", o_dir, id, r);
			if (rename(p, q) < 0)
				ns_err("child %d: rename %s: %s", id, p, strerror(errno));
			strcpy(p, q);
		}
		if (r % 5 == 1) {
			snprintf(l, sizeof l, "%s/l_%d_%d", o_dir, id, r);
			if (link(p, l) < 0)
				ns_err("child %d: link %s: %s", id, p, strerror(errno));
		}
		if (r % 3 == 0 && unlink(p) < 0)
			ns_err("child %d: unlink %s: %s", id, p, strerror(errno));
		snprintf(q, sizeof q, "%s/shared_dir", o_dir);
		if (mkdir(q, 0755) < 0 && errno != EEXIST)
			ns_err("child %d: mkdir shared_dir: %s", id, strerror(errno));
		if (rmdir(q) < 0 && errno != ENOENT)
			ns_err("child %d: rmdir shared_dir: %s", id, strerror(errno));
		sh->rounds[id] = r + 1;
	}
}

/* lists the directory repeatedly; stable names must appear exactly once per pass */
static void ns_reader(void)
{
	static unsigned char count[NSTABLE];
	char p[PATH_MAX];

	while (!sh->stop) {
		DIR *d = opendir(o_dir);
		struct dirent *de;
		int i, n;

		if (!d) {
			ns_err("reader: opendir: %s", strerror(errno));
			return;
		}
		memset(count, 0, sizeof count);
		for (;;) {
			errno = 0;
			de = readdir(d);
			if (!de)
				break;
			if (sscanf(de->d_name, "stable_%d%n", &i, &n) == 1 && !de->d_name[n] &&
			    i >= 0 && i < NSTABLE)
				count[i]++;
			else if (de->d_name[0] != '.') {
				struct stat st;
				snprintf(p, sizeof p, "%s/%s", o_dir, de->d_name);
				if (lstat(p, &st) < 0 && errno != ENOENT)
					ns_err("reader: lstat %s: %s", de->d_name, strerror(errno));
			}
		}
		if (errno)
			ns_err("reader: readdir: %s", strerror(errno));
		closedir(d);
		for (i = 0; i < NSTABLE; i++)
			if (count[i] != 1) {
				ns_err("reader: untouched entry stable_%d listed %d times in one "
				       "readdir pass during concurrent changes", i, count[i]);
				break;
			}
		sh->passes++;
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ns_mode(int nproc)
{
	char p[PATH_MAX], buf[128];
	char **exp = NULL, **got = NULL;
	int nexp = 0, ngot = 0, cap = 0, gcap = 0, i, r, maxr = 0, status;
	pid_t *pids;
	DIR *d;
	struct dirent *de;

	if (nproc < 1 || nproc > 64) {
		fprintf(stderr, "rw_stress: -P takes 1..64\n");
		return 2;
	}
	sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 2;
	for (i = 0; i < NSTABLE; i++) {
		snprintf(p, sizeof p, "%s/stable_%d", o_dir, i);
		if (put(p, "stable\n", 1) < 0) {
			fprintf(stderr, "rw_stress: create %s: %s\n", p, strerror(errno));
			return 2;
		}
	}
	fflush(stdout);
	pids = calloc(nproc + 1, sizeof *pids);
	for (i = 0; i <= nproc; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			if (i == nproc)
				ns_reader();
			else
				ns_child(i);
			fflush(stdout);
			_exit(0);
		}
	}
	sleep(o_secs);
	sh->stop = 1;
	for (i = 0; i <= nproc; i++) {
		waitpid(pids[i], &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			ns_err("process %d died (status %#x)", i, status);
	}

#define ADD(name) do { \
	if (nexp == cap) { cap = cap ? 2 * cap : 1024; exp = realloc(exp, cap * sizeof *exp); } \
	exp[nexp++] = strdup(name); \
} while (0)
	for (i = 0; i < NSTABLE; i++) {
		snprintf(p, sizeof p, "stable_%d", i);
		ADD(p);
	}
	for (i = 0; i < nproc; i++) {
		if (sh->rounds[i] > maxr)
			maxr = sh->rounds[i];
		for (r = 0; r < sh->rounds[i]; r++) {
			if (r % 3 != 0) {
				snprintf(p, sizeof p, "%s_%d_%d", r % 2 == 0 ? "m" : "c", i, r);
				ADD(p);
			}
			if (r % 5 == 1) {
				snprintf(p, sizeof p, "l_%d_%d", i, r);
				ADD(p);
			}
		}
	}
	/* a child may have started (and created race_r in) a round it did not finish */
	for (r = 0; r < MAX_ROUNDS; r++) {
		if (sh->wins[r] > 1)
			ns_err("race_%d: %d processes won an O_EXCL create", r, sh->wins[r]);
		if (sh->wins[r] == 0 && r < maxr)
			ns_err("race_%d: no process won its O_EXCL create", r);
		if (sh->wins[r]) {
			snprintf(p, sizeof p, "race_%d", r);
			ADD(p);
		}
	}
	d = opendir(o_dir);
	if (!d) {
		ns_err("final opendir: %s", strerror(errno));
		return 1;
	}
	while ((de = readdir(d))) {
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (ngot == gcap) {
			gcap = gcap ? 2 * gcap : 1024;
			got = realloc(got, gcap * sizeof *got);
		}
		got[ngot++] = strdup(de->d_name);
	}
	closedir(d);
	qsort(exp, nexp, sizeof *exp, cmp_str);
	qsort(got, ngot, sizeof *got, cmp_str);
	{
		int a = 0, b = 0, shown = 0;
		while (a < ngot || b < nexp) {
			int c = a >= ngot ? 1 : b >= nexp ? -1 : strcmp(got[a], exp[b]);
			if (c && shown++ < 10)
				ns_err("final listing: %s '%s'", c < 0 ? "unexpected" : "missing",
				       c < 0 ? got[a] : exp[b]);
			else if (c)
				__sync_fetch_and_add(&sh->errors, 1);
			if (c <= 0)
				a++;
			if (c >= 0)
				b++;
		}
	}
	/* contents */
	for (i = 0; i < nexp; i++) {
		int id, rr, fd;
		ssize_t n;
		char want[64];

		snprintf(p, sizeof p, "%s/%s", o_dir, exp[i]);
		fd = open(p, O_RDONLY);
		if (fd < 0)
			continue;	/* already reported as missing */
		n = read(fd, buf, sizeof buf - 1);
		close(fd);
		buf[n > 0 ? n : 0] = 0;
		if (sscanf(exp[i], "race_%d", &rr) == 1)
			snprintf(want, sizeof want, "%d", sh->winner[rr]);
		else if (sscanf(exp[i] + 2, "%d_%d", &id, &rr) == 2)
			snprintf(want, sizeof want, "child %d round %d\n", id, rr);
		else
			snprintf(want, sizeof want, "stable\n");
		if (strcmp(buf, want))
			ns_err("content of %s is '%s', expected '%s'", exp[i], buf, want);
	}
	printf("rw_stress: namespace: %d processes, %d rounds max, %ld listing passes, "
	       "%d entries expected, %d found, %ld errors: %s\n", nproc, maxr, sh->passes, nexp,
	       ngot, sh->errors, sh->errors ? "FAILED" : "ok");
	for (i = 0; i < nexp; i++)
		free(exp[i]);
	for (i = 0; i < ngot; i++)
		free(got[i]);
	free(exp);
	free(got);
	free(pids);
	return sh->errors ? 1 : 0;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: rw_stress [-w W] [-r R] [-t SEC] [-s MiB] [-m same|diff] [-g BLOCKS] [-D]\n"
		"                 [-S STATEFILE] DIR\n"
		"       rw_stress -V STATEFILE DIR\n"
		"       rw_stress -P NPROC [-t SEC] DIR\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int c, nproc = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt(argc, argv, "w:r:t:s:m:g:DS:V:P:")) != -1) {
		switch (c) {
		case 'w': o_writers = atoi(optarg); break;
		case 'r': o_readers = atoi(optarg); break;
		case 't': o_secs = atoi(optarg); break;
		case 's': o_mib = atol(optarg); break;
		case 'm':
			if (!strcmp(optarg, "diff"))
				o_diff = 1;
			else if (strcmp(optarg, "same"))
				usage();
			break;
		case 'g': o_group = atoi(optarg); break;
		case 'D': o_direct = 1; break;
		case 'S': o_save = optarg; break;
		case 'V': o_verify = optarg; break;
		case 'P': nproc = atoi(optarg); break;
		default: usage();
		}
	}
	if (optind != argc - 1 || o_writers < 1 || o_writers > 64 || o_readers < 0 ||
	    o_group < 1 || o_group > 64 || o_mib < 1)
		usage();
	o_dir = argv[optind];
	if (nproc)
		return ns_mode(nproc);
	return data_mode();
}
