/* SPDX-License-Identifier: MIT */
/*
 * pagecheck: the torn-write / lost-write workload and its verifier.
 *
 *   pagecheck write  --dir D --state S [--files F] [--pages P] [--threads T]
 *                    [--seconds N] [--sync-every K] [--seed N] [--multi M]
 *                    [--compress] [--churn] [--dsync]
 *   pagecheck verify --dir D --state S [--max-report N]
 *
 * write: T threads overwrite random 16 KiB pages (csdfs's atomic unit) of
 * files D/pc.0 .. D/pc.F-1 with one aligned pwrite each (or, with --multi M,
 * runs of 1..M consecutive pages per pwrite, so that csdfs packs several
 * compressed chunks into one extent; each page must still be whole after a
 * crash, as a chunk is csdfs's unit of mapping). Odd-numbered files are
 * opened O_DIRECT, even ones buffered; with --dsync, files 2 and 3 (mod 4)
 * are also O_DSYNC, and a write to them counts as acknowledged as soon as
 * it returns (G2). Every page
 * is self-describing: each of its four 4 KiB pieces starts with a header
 * {magic, file id, page number, generation, piece number}, piece 0 also
 * holds a CRC32 of the whole page, and the rest is random (incompressible, so csdfs stores it raw), or with
 * --compress half random, half a repeated word (about 2:1).
 * Generations come from one counter that starts above anything already on
 * disk or acknowledged, so they increase per page across runs. About every
 * K-th write a thread fsyncs or fdatasyncs a random file; only AFTER that
 * returns 0 does it append "a FILE PAGE GEN" lines to S (a plain file, never
 * on the mount under test) for the generations that had completed before the
 * call started: the acknowledged generations. Any I/O error ends the run
 * with exit 3 (after a crash that is expected; before it, it is a bug).
 *
 * verify: reads every page and classifies it:
 *   zero      all zeros (never written, or never made durable)
 *   valid     every piece carries the same {file, page, generation} and the
 *             CRC matches
 *   torn      pieces of different generations, pieces of garbage or zeros
 *             beside written ones, or a CRC mismatch: a write was split
 *   misplaced a whole valid page, but of another file or page number
 *   lost      the page is zero or valid with a generation below the one
 *             acknowledged for it in S
 *   ioerr     the read failed (EIO from a checksum mismatch, ...)
 * With --churn a further thread runs namespace and allocator churn in D/churn
 * (see churner()); verify reads every file there back and counts errors.
 * Exit 0 only when there is nothing torn, misplaced, lost or unreadable.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define PAGE_SIZE_PC 16384u
#define PIECE 4096u
#define NPIECES (PAGE_SIZE_PC / PIECE)
#define PC_MAGIC 0x4b43484345474150ull /* "PAGECHCK" */
#define MAX_FILES 256
#define MAX_PAGES 65536
#define MAX_MULTI 8
/* odd files are O_DIRECT; with --dsync, files 2, 3 (mod 4) are O_DSYNC */
#define FILE_DSYNC(f) (O.dsync && (f) % 4 >= 2)

struct piece_hdr {
	uint64_t magic;
	uint32_t file;
	uint32_t page;
	uint64_t gen;
	uint32_t piece;
	uint32_t crc;      /* piece 0 only: CRC32 of the page with this zeroed */
};
_Static_assert(sizeof(struct piece_hdr) == 32, "piece header");

/* ---- CRC32 (IEEE, reflected) ------------------------------------------- */

static uint32_t crc_table[256];

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
		crc_table[i] = c;
	}
}

static uint32_t crc32_buf(const unsigned char *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	while (n--)
		c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c ^ 0xffffffffu;
}

static uint32_t page_crc(unsigned char *page)
{
	struct piece_hdr *h = (struct piece_hdr *)page;
	uint32_t saved = h->crc, c;

	h->crc = 0;
	c = crc32_buf(page, PAGE_SIZE_PC);
	h->crc = saved;
	return c;
}

/* ---- random ------------------------------------------------------------ */

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* ---- options and shared state ------------------------------------------ */

struct opts {
	const char *dir, *state;
	unsigned files, pages, threads, sync_every, max_report, multi;
	int compress, churn, dsync;
	double seconds;
	uint64_t seed;
};

static struct opts O = { NULL, NULL, 4, 64, 4, 8, 20, 1, 0, 0, 0, 1.0, 0 };

static int fds[MAX_FILES];
static pthread_mutex_t *page_lock;      /* [files * pages] */
static uint64_t *written;               /* completed generation, atomic */
static uint64_t *acked;                 /* guarded by state_lock */
static pthread_mutex_t state_lock = PTHREAD_MUTEX_INITIALIZER;
static int state_fd = -1;
static uint64_t next_gen;               /* atomic */
static double deadline;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void file_path(char *buf, size_t len, unsigned f)
{
	snprintf(buf, len, "%s/pc.%u", O.dir, f);
}

/* ---- the state file ------------------------------------------------------ */

/* Read S: header (files, pages) and the highest acknowledged generation per
 * page into @ack. Returns 0, 1 when S does not exist, -1 on error. Lines not
 * ending in '\n' (cut by a kill) are ignored. */
static int state_load(const char *path, unsigned *files, unsigned *pages,
		      uint64_t **ack)
{
	FILE *fp = fopen(path, "r");
	char line[256];
	unsigned f, p;
	uint64_t g;

	*ack = NULL;
	if (!fp)
		return errno == ENOENT ? 1 : -1;
	if (!fgets(line, sizeof(line), fp) ||
	    sscanf(line, "pagecheck 1 files %u pages %u", files, pages) != 2 ||
	    !*files || *files > MAX_FILES || !*pages || *pages > MAX_PAGES) {
		fprintf(stderr, "pagecheck: '%s' is not a pagecheck state file\n", path);
		fclose(fp);
		return -1;
	}
	*ack = calloc((size_t)*files * *pages, sizeof(**ack));
	if (!*ack) {
		fclose(fp);
		return -1;
	}
	while (fgets(line, sizeof(line), fp)) {
		if (!strchr(line, '\n'))
			break;
		if (sscanf(line, "a %u %u %" SCNu64, &f, &p, &g) != 3 ||
		    f >= *files || p >= *pages) {
			fprintf(stderr, "pagecheck: '%s': bad line '%.60s'\n", path, line);
			fclose(fp);
			return -1;
		}
		if (g > (*ack)[(size_t)f * *pages + p])
			(*ack)[(size_t)f * *pages + p] = g;
	}
	fclose(fp);
	return 0;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Rewrite S compactly (one line per acknowledged page), then open it for
 * appending. */
static int state_rewrite(void)
{
	char tmp[4200], line[128];
	size_t n = (size_t)O.files * O.pages;
	int fd;

	snprintf(tmp, sizeof(tmp), "%s.tmp", O.state);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		goto fail;
	snprintf(line, sizeof(line), "pagecheck 1 files %u pages %u\n", O.files, O.pages);
	if (write_all(fd, line, strlen(line)))
		goto fail;
	for (size_t i = 0; i < n; i++) {
		if (!acked[i])
			continue;
		snprintf(line, sizeof(line), "a %zu %zu %" PRIu64 "\n", i / O.pages,
			 i % O.pages, acked[i]);
		if (write_all(fd, line, strlen(line)))
			goto fail;
	}
	if (close(fd) || rename(tmp, O.state))
		goto fail;
	state_fd = open(O.state, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (state_fd < 0)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "pagecheck: cannot write the state file '%s': %s\n", O.state,
		strerror(errno));
	return -1;
}

/* ---- reading and classifying a page -------------------------------------- */

enum page_kind { PK_ZERO, PK_VALID, PK_TORN, PK_MISPLACED, PK_IOERR };

struct page_info {
	enum page_kind kind;
	uint64_t gen;
	char why[200];
};

static int all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

static void classify(unsigned char *page, unsigned f, unsigned p, struct page_info *pi)
{
	struct piece_hdr h[NPIECES];
	int ok = 1, zero[NPIECES];
	size_t w = 0;

	memset(pi, 0, sizeof(*pi));
	if (all_zero(page, PAGE_SIZE_PC)) {
		pi->kind = PK_ZERO;
		return;
	}
	/* describe each piece: g=<gen>, zero, or junk */
	for (unsigned k = 0; k < NPIECES; k++) {
		memcpy(&h[k], page + k * PIECE, sizeof(h[k]));
		zero[k] = all_zero(page + k * PIECE, PIECE);
		if (zero[k])
			w += (size_t)snprintf(pi->why + w, sizeof(pi->why) - w, " zero");
		else if (h[k].magic != PC_MAGIC || h[k].piece != k)
			w += (size_t)snprintf(pi->why + w, sizeof(pi->why) - w, " junk");
		else
			w += (size_t)snprintf(pi->why + w, sizeof(pi->why) - w,
					      " f%u/p%u/g%" PRIu64, h[k].file, h[k].page,
					      h[k].gen);
		if (zero[k] || h[k].magic != PC_MAGIC || h[k].piece != k ||
		    h[k].gen != h[0].gen || h[k].file != h[0].file ||
		    h[k].page != h[0].page)
			ok = 0;
	}
	pi->gen = h[0].magic == PC_MAGIC ? h[0].gen : 0;
	if (!ok) {
		pi->kind = PK_TORN;
		return;
	}
	if (page_crc(page) != h[0].crc) {
		pi->kind = PK_TORN;
		snprintf(pi->why + w, sizeof(pi->why) - w, " (crc mismatch)");
		return;
	}
	pi->kind = h[0].file == f && h[0].page == p ? PK_VALID : PK_MISPLACED;
}

/* Read page @p of @fd (zeros past EOF). Returns 0 or -errno. */
static int read_page(int fd, unsigned p, unsigned char *buf)
{
	size_t got = 0;

	while (got < PAGE_SIZE_PC) {
		ssize_t n = pread(fd, buf + got, PAGE_SIZE_PC - got,
				  (off_t)p * PAGE_SIZE_PC + (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	memset(buf + got, 0, PAGE_SIZE_PC - got);
	return 0;
}

/* ---- metadata churn ------------------------------------------------------ */

/*
 * --churn: one more thread that keeps the namespace and the allocator busy
 * in D/churn: files of mixed content written, overwritten, truncated,
 * hole-punched, fallocated, renamed over each other, hard-linked, unlinked
 * (also while open: orphans), directories made and removed, xattrs set,
 * fsyncs of files and of the directory. Nothing about its content is
 * checked but that it reads back without error; its job is to give
 * csdfs-fsck something to check after the crash (G4).
 */
#define CHURN_NAMES 24
#define CHURN_ORPHANS 4

static int churn_ok(int rc)
{
	return rc >= 0 || errno == ENOENT || errno == EEXIST || errno == ENOTEMPTY;
}

static void churn_fail(const char *what, const char *name)
{
	fprintf(stderr, "pagecheck: churn: %s '%s' failed: %s\n", what, name, strerror(errno));
	_exit(3);
}

static void churn_fill(char *buf, size_t len, uint64_t *rs)
{
	unsigned kind = (unsigned)(splitmix(rs) % 3);

	for (size_t i = 0; i < len; i += 8) {
		uint64_t r = kind == 0 ? splitmix(rs) :	/* incompressible */
			     kind == 1 ? (i / 64) * 0x0101010101010101ull : /* compressible */
			     0;				/* zeros: holes */
		memcpy(buf + i, &r, len - i < 8 ? len - i : 8);
	}
}

static void *churner(void *arg)
{
	uint64_t rs = O.seed * 0x51ed270b27d1b9a3ull + 7;
	char dir[4200], a[4300], b[4300], *buf;
	int orphans[CHURN_ORPHANS], dfd;
	size_t maxlen = 256 * 1024;

	(void)arg;
	for (int i = 0; i < CHURN_ORPHANS; i++)
		orphans[i] = -1;
	snprintf(dir, sizeof(dir), "%s/churn", O.dir);
	if (!churn_ok(mkdir(dir, 0755)))
		churn_fail("mkdir", dir);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	buf = malloc(maxlen);
	if (dfd < 0 || !buf)
		churn_fail("open", dir);
	while (now() < deadline) {
		unsigned op = (unsigned)(splitmix(&rs) % 12);
		unsigned x = (unsigned)(splitmix(&rs) % CHURN_NAMES);
		unsigned y = (unsigned)(splitmix(&rs) % CHURN_NAMES);
		size_t len = 1 + (size_t)(splitmix(&rs) % maxlen);
		off_t off = (off_t)(splitmix(&rs) % maxlen);
		int fd, rc = 0;

		snprintf(a, sizeof(a), "%s/c.%u", dir, x);
		switch (op) {
		case 0: case 1: case 2:	/* (over)write a file */
			fd = open(a, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
			if (fd < 0)
				churn_fail("create", a);
			churn_fill(buf, len, &rs);
			if (pwrite(fd, buf, len, off) != (ssize_t)len)
				churn_fail("write", a);
			if (splitmix(&rs) % 4 == 0 && fdatasync(fd))
				churn_fail("fdatasync", a);
			close(fd);
			break;
		case 3:
			rc = truncate(a, off);
			break;
		case 4:
			fd = open(a, O_WRONLY | O_CLOEXEC);
			if (fd >= 0) {
				int mode = splitmix(&rs) % 2 ? 0 :
					   FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE;

				if (fallocate(fd, mode, off, (off_t)len) && errno != EOPNOTSUPP)
					churn_fail("fallocate", a);
				close(fd);
			}
			break;
		case 5:
			snprintf(b, sizeof(b), "%s/c.%u", dir, y);
			rc = rename(a, b);
			break;
		case 6:
			snprintf(b, sizeof(b), "%s/l.%u", dir, y);
			rc = link(a, b);
			break;
		case 7:
			snprintf(b, sizeof(b), "%s/l.%u", dir, y);
			rc = unlink(b);
			if (rc >= 0 || errno == ENOENT)
				rc = unlink(a);
			break;
		case 8: {	/* unlink while open, keep writing: an orphan */
			int k = (int)(splitmix(&rs) % CHURN_ORPHANS);

			if (orphans[k] >= 0) {
				close(orphans[k]);
				orphans[k] = -1;
				break;
			}
			orphans[k] = open(a, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
			if (orphans[k] < 0)
				churn_fail("open", a);
			if (unlink(a))
				churn_fail("unlink", a);
			churn_fill(buf, len, &rs);
			if (pwrite(orphans[k], buf, len, off) != (ssize_t)len)
				churn_fail("write orphan", a);
			break;
		}
		case 9:
			snprintf(b, sizeof(b), "%s/d.%u", dir, y);
			rc = splitmix(&rs) % 2 ? mkdir(b, 0755) : rmdir(b);
			break;
		case 10:
			rc = setxattr(a, "user.churn", buf, 1 + len % 200, 0);
			break;
		case 11:
			if (fsync(dfd))
				churn_fail("fsync", dir);
			break;
		}
		if (!churn_ok(rc))
			churn_fail("operation", a);
	}
	for (int i = 0; i < CHURN_ORPHANS; i++)
		if (orphans[i] >= 0)
			close(orphans[i]);
	close(dfd);
	free(buf);
	return NULL;
}

/* Read every file under D/churn to the end; returns the number of errors. */
static unsigned long churn_verify(void)
{
	char dir[4200], path[4500], *buf;
	unsigned long files = 0, errs = 0;
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/churn", O.dir);
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : 1;
	buf = malloc(65536);
	while (buf && (de = readdir(d))) {
		struct stat st;
		ssize_t n;
		int fd;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (lstat(path, &st) || !S_ISREG(st.st_mode))
			continue;
		files++;
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			printf("pagecheck: churn file '%s': open: %s\n", path, strerror(errno));
			errs++;
			continue;
		}
		while ((n = read(fd, buf, 65536)) > 0)
			;
		if (n < 0) {
			printf("pagecheck: churn file '%s': read: %s\n", path, strerror(errno));
			errs++;
		}
		close(fd);
	}
	closedir(d);
	free(buf);
	printf("pagecheck: churn: %lu files read back, %lu errors\n", files, errs);
	return errs;
}

/* ---- write mode ---------------------------------------------------------- */

static void fill_page(unsigned char *page, unsigned f, unsigned p, uint64_t gen,
		      uint64_t *rs)
{
	for (size_t i = 0; i < PAGE_SIZE_PC; i += 8) {
		uint64_t r = splitmix(rs);

		/* --compress: the second half of each piece repeats one word,
		 * so a page compresses to a bit over half (packed extents) */
		if (O.compress && i % PIECE >= PIECE / 2)
			r = gen * 0x9e3779b97f4a7c15ull | 1;
		memcpy(page + i, &r, 8);
	}
	for (unsigned k = 0; k < NPIECES; k++) {
		struct piece_hdr h = { PC_MAGIC, f, p, gen, k, 0 };

		memcpy(page + k * PIECE, &h, sizeof(h));
	}
	{
		struct piece_hdr *h0 = (struct piece_hdr *)page;

		h0->crc = page_crc(page);
	}
}

static void io_fail(const char *what, unsigned f, int err)
{
	fprintf(stderr, "pagecheck: %s of file %u failed: %s\n", what, f, strerror(err));
	_exit(3);
}

/* Record @gen[0..n) as acknowledged for pages @first.. of file @f (those
 * above what is already recorded). Call only once they are durable. */
static void ack_pages(unsigned f, unsigned first, unsigned n, const uint64_t *gen)
{
	char *buf, line[96];
	size_t len = 0;

	buf = malloc((size_t)n * sizeof(line));
	if (!buf)
		_exit(4);
	pthread_mutex_lock(&state_lock);
	for (unsigned k = 0; k < n; k++) {
		uint64_t *a = &acked[(size_t)f * O.pages + first + k];

		if (gen[k] <= *a)
			continue;
		*a = gen[k];
		len += (size_t)snprintf(buf + len, sizeof(line), "a %u %u %" PRIu64 "\n",
					f, first + k, gen[k]);
	}
	/* one write(): a kill cuts at most the last line, which load ignores */
	if (len && write_all(state_fd, buf, len)) {
		fprintf(stderr, "pagecheck: cannot append to '%s': %s\n", O.state,
			strerror(errno));
		_exit(4);
	}
	pthread_mutex_unlock(&state_lock);
	free(buf);
}

/* fsync/fdatasync file @f, then acknowledge what completed before it. */
static void sync_and_ack(unsigned f, uint64_t *rs, uint64_t *snap)
{
	int data_only = (int)(splitmix(rs) & 1);

	for (unsigned p = 0; p < O.pages; p++)
		snap[p] = __atomic_load_n(&written[(size_t)f * O.pages + p], __ATOMIC_ACQUIRE);
	if (data_only ? fdatasync(fds[f]) : fsync(fds[f]))
		io_fail(data_only ? "fdatasync" : "fsync", f, errno);
	ack_pages(f, 0, O.pages, snap);
}

static void *writer(void *arg)
{
	uint64_t rs = O.seed * 0x9e3779b97f4a7c15ull + (uintptr_t)arg + 1;
	unsigned char *buf;
	uint64_t *snap = malloc(O.pages * sizeof(*snap));

	if (!snap || posix_memalign((void **)&buf, 4096, (size_t)PAGE_SIZE_PC * MAX_MULTI))
		_exit(4);
	while (now() < deadline) {
		unsigned f = (unsigned)(splitmix(&rs) % O.files);
		unsigned p = (unsigned)(splitmix(&rs) % O.pages);
		unsigned n = O.multi > 1 ? 1 + (unsigned)(splitmix(&rs) % O.multi) : 1;
		size_t i = (size_t)f * O.pages + p;
		uint64_t gen[MAX_MULTI];
		ssize_t done;

		if (n > O.pages - p)
			n = O.pages - p;
		/* One writer per page at a time, so generations land in order;
		 * ranges are locked in ascending order, so no deadlock. */
		for (unsigned k = 0; k < n; k++)
			pthread_mutex_lock(&page_lock[i + k]);
		for (unsigned k = 0; k < n; k++) {
			gen[k] = __atomic_fetch_add(&next_gen, 1, __ATOMIC_RELAXED);
			fill_page(buf + (size_t)k * PAGE_SIZE_PC, f, p + k, gen[k], &rs);
		}
		done = pwrite(fds[f], buf, (size_t)n * PAGE_SIZE_PC, (off_t)p * PAGE_SIZE_PC);
		if (done != (ssize_t)n * PAGE_SIZE_PC)
			io_fail("pwrite", f, done < 0 ? errno : EIO);
		for (unsigned k = n; k-- > 0; ) {
			__atomic_store_n(&written[i + k], gen[k], __ATOMIC_RELEASE);
			pthread_mutex_unlock(&page_lock[i + k]);
		}
		/* an O_DSYNC write is durable when it returns (G2) */
		if (FILE_DSYNC(f))
			ack_pages(f, p, n, gen);
		if (O.sync_every && splitmix(&rs) % O.sync_every == 0)
			sync_and_ack((unsigned)(splitmix(&rs) % O.files), &rs, snap);
	}
	free(buf);
	free(snap);
	return NULL;
}

static int do_write(void)
{
	size_t n = (size_t)O.files * O.pages;
	unsigned char *buf;
	pthread_t *th, churn_th;
	uint64_t max = 0;
	unsigned sf, sp;
	int rc;

	rc = state_load(O.state, &sf, &sp, &acked);
	if (rc < 0)
		return 2;
	if (rc == 0 && (sf != O.files || sp != O.pages)) {
		fprintf(stderr, "pagecheck: '%s' is for %u files x %u pages, not %u x %u\n",
			O.state, sf, sp, O.files, O.pages);
		return 2;
	}
	if (rc == 1 && !(acked = calloc(n, sizeof(*acked))))
		return 4;
	written = calloc(n, sizeof(*written));
	page_lock = calloc(n, sizeof(*page_lock));
	th = calloc(O.threads, sizeof(*th));
	if (!written || !page_lock || !th || posix_memalign((void **)&buf, 4096, PAGE_SIZE_PC))
		return 4;
	for (size_t i = 0; i < n; i++) {
		pthread_mutex_init(&page_lock[i], NULL);
		if (acked[i] > max)
			max = acked[i];
	}
	for (unsigned f = 0; f < O.files; f++) {
		char path[4200];
		int flags = O_RDWR | O_CREAT | O_CLOEXEC | (f % 2 ? O_DIRECT : 0) |
			    (FILE_DSYNC(f) ? O_DSYNC : 0);

		file_path(path, sizeof(path), f);
		fds[f] = open(path, flags, 0644);
		if (fds[f] < 0) {
			fprintf(stderr, "pagecheck: cannot open '%s': %s\n", path, strerror(errno));
			return 3;
		}
		/* start above every generation already on disk */
		for (unsigned p = 0; p < O.pages; p++) {
			struct page_info pi;

			if (read_page(fds[f], p, buf))
				continue;
			classify(buf, f, p, &pi);
			if (pi.gen > max)
				max = pi.gen;
		}
	}
	free(buf);
	next_gen = max + 1;
	if (state_rewrite())
		return 4;
	printf("pagecheck: write %u files x %u pages, %u threads, %.2f s, up to %u pages"
	       " per write, %s data,%s%s seed %" PRIu64 ", first generation %" PRIu64 "\n",
	       O.files, O.pages, O.threads, O.seconds, O.multi,
	       O.compress ? "2:1" : "incompressible", O.churn ? " churn," : "",
	       O.dsync ? " O_DSYNC files," : "", O.seed, next_gen);
	fflush(stdout);
	deadline = now() + O.seconds;
	for (unsigned t = 0; t < O.threads; t++)
		if (pthread_create(&th[t], NULL, writer, (void *)(uintptr_t)t))
			return 4;
	if (O.churn && pthread_create(&churn_th, NULL, churner, NULL))
		return 4;
	for (unsigned t = 0; t < O.threads; t++)
		pthread_join(th[t], NULL);
	if (O.churn)
		pthread_join(churn_th, NULL);
	printf("pagecheck: wrote generations %" PRIu64 "..%" PRIu64 "\n", max + 1,
	       next_gen - 1);
	return 0;
}

/* ---- verify mode --------------------------------------------------------- */

static int do_verify(void)
{
	static const char *kname[] = { "zero", "valid", "TORN", "MISPLACED", "IOERR" };
	unsigned long cnt[5] = { 0 }, lost = 0, reported = 0, churn_errs;
	unsigned char *buf;
	unsigned files, pages;
	int rc;

	rc = state_load(O.state, &files, &pages, &acked);
	if (rc) {
		if (rc == 1)
			fprintf(stderr, "pagecheck: no state file '%s'\n", O.state);
		return 2;
	}
	if (posix_memalign((void **)&buf, 4096, PAGE_SIZE_PC))
		return 4;
	for (unsigned f = 0; f < files; f++) {
		char path[4200];
		int fd;

		file_path(path, sizeof(path), f);
		fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 && errno != ENOENT) {
			fprintf(stderr, "pagecheck: cannot open '%s': %s\n", path, strerror(errno));
			cnt[PK_IOERR] += pages;
			continue;
		}
		for (unsigned p = 0; p < pages; p++) {
			uint64_t a = acked[(size_t)f * pages + p];
			struct page_info pi;
			int err = fd < 0 ? 0 : read_page(fd, p, buf);
			int bad;

			if (fd < 0)
				memset(buf, 0, PAGE_SIZE_PC);
			if (err) {
				memset(&pi, 0, sizeof(pi));
				pi.kind = PK_IOERR;
				snprintf(pi.why, sizeof(pi.why), " read: %s", strerror(-err));
			} else {
				classify(buf, f, p, &pi);
			}
			cnt[pi.kind]++;
			bad = pi.kind >= PK_TORN;
			if ((pi.kind == PK_ZERO || pi.kind == PK_VALID) && pi.gen < a) {
				lost++;
				bad = 1;
			}
			if (bad && reported++ < O.max_report)
				printf("pagecheck: file %u page %u: %s%s gen %" PRIu64
				       " acked %" PRIu64 ":%s\n", f, p, kname[pi.kind],
				       (pi.kind <= PK_VALID && pi.gen < a) ? " LOST" : "",
				       pi.gen, a, pi.why[0] ? pi.why : " -");
		}
		if (fd >= 0)
			close(fd);
	}
	free(buf);
	churn_errs = churn_verify();
	printf("pagecheck: verify: %u pages: valid %lu zero %lu torn %lu lost %lu "
	       "misplaced %lu ioerr %lu%s\n", files * pages, cnt[PK_VALID], cnt[PK_ZERO],
	       cnt[PK_TORN], lost, cnt[PK_MISPLACED], cnt[PK_IOERR],
	       churn_errs ? " (and churn read errors)" : "");
	return cnt[PK_TORN] || cnt[PK_MISPLACED] || cnt[PK_IOERR] || lost || churn_errs ? 1 : 0;
}

/* ---- main ---------------------------------------------------------------- */

static void usage(FILE *out)
{
	fprintf(out,
"usage: pagecheck write  --dir DIR --state FILE [--files F] [--pages P]\n"
"                        [--threads T] [--seconds S] [--sync-every K] [--seed N]\n"
"                        [--multi M] [--compress] [--churn] [--dsync]\n"
"       pagecheck verify --dir DIR --state FILE [--max-report N]\n"
"\n"
"write: overwrite random 16 KiB pages of DIR/pc.0..F-1 (defaults 4 files x 64\n"
"pages, 4 threads, 1 s), fsync about every K-th write (default 8) and record\n"
"the acknowledged generations in FILE (keep FILE off the mount under test).\n"
"--multi M: each pwrite covers 1..M consecutive pages (default 1); --compress:\n"
"pages compress about 2:1 (default: incompressible, stored raw); --churn: one\n"
"more thread creates, truncates, punches, renames, links and unlinks files in\n"
"DIR/churn (verify then reads them all back); --dsync: files 2, 3 (mod 4)\n"
"are opened O_DSYNC and every write to them is acknowledged when it returns.\n"
"verify: every page must be all zero or whole and valid, and at least as new\n"
"as acknowledged; exit 0 when so, 1 when not, 2 on usage errors.\n");
}

static int parse_uint(const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || *end || end == s || v < lo || v > hi)
		return -1;
	*out = (unsigned)v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "state", required_argument, NULL, 'S' },
		{ "files", required_argument, NULL, 'f' },
		{ "pages", required_argument, NULL, 'p' },
		{ "threads", required_argument, NULL, 't' },
		{ "seconds", required_argument, NULL, 's' },
		{ "sync-every", required_argument, NULL, 'k' },
		{ "seed", required_argument, NULL, 'r' },
		{ "max-report", required_argument, NULL, 'm' },
		{ "multi", required_argument, NULL, 'M' },
		{ "compress", no_argument, NULL, 'c' },
		{ "churn", no_argument, NULL, 'C' },
		{ "dsync", no_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	const char *mode;
	char *end;
	int c, bad = 0;

	crc_init();
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	mode = argv[1];
	O.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	optind = 2;
	while ((c = getopt_long(argc, argv, "", lopts, NULL)) != -1) {
		switch (c) {
		case 'd': O.dir = optarg; break;
		case 'S': O.state = optarg; break;
		case 'f': bad |= parse_uint(optarg, 1, MAX_FILES, &O.files); break;
		case 'p': bad |= parse_uint(optarg, 1, MAX_PAGES, &O.pages); break;
		case 't': bad |= parse_uint(optarg, 1, 256, &O.threads); break;
		case 'k': bad |= parse_uint(optarg, 0, 1000000, &O.sync_every); break;
		case 'm': bad |= parse_uint(optarg, 0, 1000000, &O.max_report); break;
		case 'M': bad |= parse_uint(optarg, 1, MAX_MULTI, &O.multi); break;
		case 'c': O.compress = 1; break;
		case 'C': O.churn = 1; break;
		case 'D': O.dsync = 1; break;
		case 's':
			O.seconds = strtod(optarg, &end);
			bad |= *end || end == optarg || !(O.seconds >= 0);
			break;
		case 'r':
			O.seed = strtoull(optarg, &end, 0);
			bad |= *end || end == optarg;
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
		if (bad) {
			fprintf(stderr, "pagecheck: bad value '%s'\n", optarg);
			return 2;
		}
	}
	if (optind != argc || !O.dir || !O.state) {
		fprintf(stderr, "pagecheck: %s\n", optind != argc ?
			"unexpected argument" : "--dir and --state are required");
		return 2;
	}
	if (!strcmp(mode, "write"))
		return do_write();
	if (!strcmp(mode, "verify"))
		return do_verify();
	fprintf(stderr, "pagecheck: unknown mode '%s' (write or verify)\n", mode);
	return 2;
}
