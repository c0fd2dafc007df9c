/* SPDX-License-Identifier: MIT */
/*
 * powercut_preload.so: the recording half of the power-cut simulator.
 *
 * LD_PRELOAD it into the csdfs daemon with POWERCUT_LOG=DIR. For every
 * tracked file (path ending in one of the POWERCUT_MATCH suffixes, default
 * "/container:/data.mdb:/synced") it keeps an undo log DIR/<basename>.undo from which
 * powercut(1) later rebuilds "what the disk may hold after a power cut".
 *
 * Crash model (SPEC §4): a write not yet made durable may be lost, in any
 * combination, at 4 KiB page granularity; what was made durable stays. Before
 * EVERY write-like call on a tracked file we append the current content of
 * each 4 KiB page it touches (its pre-image) to the undo log, so powercut can
 * put back any version a page had since its last durable point: the synced
 * one or an intermediate one a writeback may have caught. That is a superset
 * of "restore the content at the last sync", for the same cost on csdfs's
 * out-of-place container, where a page is written once between syncs.
 *
 * Durability points append markers instead of rewriting the log:
 *   SYNC  (fsync, fdatasync, sync, syncfs): every record logged before the
 *         call STARTED is durable. The start point is taken while holding the
 *         file's io lock exclusively, so no write is half-logged at that
 *         moment. If nothing was logged since, the log is simply truncated
 *         (unless POWERCUT_KEEP_ALL=1: then it holds every version since the
 *         start, for powercut --ignore-sync, the "disk that lies" check).
 *   RANGE (a write through an O_SYNC/O_DSYNC fd, or pwritev2 RWF_[D]SYNC):
 *         the pages of that write, with everything logged for them before,
 *         are durable.
 * Sizes: every record carries the file size before its change and every
 * durability point the durable size, so powercut can also undo an un-synced
 * extension (write past EOF, fallocate) or truncation (whose cut pages are
 * logged like overwritten ones; punched or zeroed ranges too).
 * sync_file_range and msync are not durability points (sync_file_range
 * flushes no metadata and no disk cache; csdfs and LMDB never map a tracked
 * file writably, and mmap refuses to let a writable shared mapping through,
 * so no write can bypass the log).
 *
 * The undo log is written with plain write(): the tests kill the process, not
 * the machine, and the kernel keeps what write() returned. A record is
 * appended BEFORE the real write, so every byte that reached the file has its
 * pre-image logged; a kill between the two leaves a harmless extra record.
 *
 * Locks: per file, io (rwlock: writers shared, a sync snapshot exclusive)
 * before lock (mutex: log appends, log_end, epoch, size). files_lock only guards the
 * file table. errno is preserved: callers see exactly what the real call did.
 * Not covered: fds made by dup/fcntl(F_DUPFD) (neither csdfs nor LMDB does
 * that on these files), io_uring/AIO, copy_file_range/splice into them.
 *
 * The record layout is shared with powercut.c: keep them in step.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define PC_PAGE 4096u
#define PC_MAXFD 65536
#define PC_MAXFILES 16
#define PC_MAXMATCH 8

#define PC_REC_MAGIC 0x52554350u /* "PCUR" */
enum { PC_REC_PAGE = 1, PC_REC_SYNC = 2, PC_REC_RANGE = 3, PC_REC_SIZE = 4 };

/*
 * One undo-log record; PAGE records are followed by len bytes of pre-image.
 *   PAGE:  off = page offset, len = bytes of the page that existed (< 4096
 *          only at EOF), size = file size before the write.
 *   SIZE:  size = file size before an ftruncate/fallocate changed it.
 *   SYNC:  records at log offsets < mark are durable; size = durable size.
 *   RANGE: PAGE records at log offsets < mark for pages in [off, off + len)
 *          are durable; size = durable size.
 */
struct pc_rec {
	uint32_t magic;
	uint32_t type;
	uint64_t off;
	uint64_t len;
	uint64_t size;
	uint64_t mark;
};
_Static_assert(sizeof(struct pc_rec) == 40, "undo record layout");

struct pc_file {
	dev_t dev;
	ino_t ino;
	int rfd;                 /* our own read-only fd, for pre-images */
	int logfd;               /* the undo log, O_APPEND */
	pthread_rwlock_t io;     /* shared by writes, exclusive for a snapshot */
	pthread_mutex_t lock;    /* guards log_end, epoch, size */
	uint64_t log_end;        /* bytes in the undo log */
	uint64_t epoch;          /* times the log was truncated */
	uint64_t size;           /* file size as far as our calls know */
	char base[256];          /* basename: names the undo log */
};

static struct pc_file files[PC_MAXFILES];
static int nfiles;
static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;

/* fd -> tracked file; published with release after fd_flags is set */
static struct pc_file *fd_file[PC_MAXFD];
static int fd_flags[PC_MAXFD];

static char log_dir[4096];
static char match[PC_MAXMATCH][256];
static int nmatch;
static int active;
static int keep_all;	/* POWERCUT_KEEP_ALL=1: never truncate the logs */
static long kill_at;	/* POWERCUT_KILL_AT=N: SIGKILL before the N-th event */
static char kill_file[256];	/* POWERCUT_KILL_FILE: count only its events */
static long events;	/* tracked events so far (atomic) */

/* ---- the real functions ------------------------------------------------ */

#define REAL(name)							\
	({								\
		static __typeof__(&name) real_;				\
		__typeof__(&name) p_ = __atomic_load_n(&real_, __ATOMIC_ACQUIRE); \
		if (!p_) {						\
			p_ = (__typeof__(&name))dlsym(RTLD_NEXT, #name); \
			if (!p_)					\
				pc_die("dlsym(%s) failed", #name);	\
			__atomic_store_n(&real_, p_, __ATOMIC_RELEASE); \
		}							\
		p_;							\
	})

static void pc_die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));

static void pc_die(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	n = snprintf(buf, sizeof(buf), "powercut_preload: ");
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	/* A simulator that silently stops recording would make every test
	 * after it meaningless: stop the process instead. */
	(void)!write(2, buf, (size_t)n);
	abort();
}

__attribute__((constructor)) static void pc_init(void)
{
	const char *d = getenv("POWERCUT_LOG");
	const char *m = getenv("POWERCUT_MATCH");

	if (!d || !*d)
		return;
	if (strlen(d) >= sizeof(log_dir) - 64)
		pc_die("POWERCUT_LOG '%s' is too long", d);
	strcpy(log_dir, d);
	if (!m || !*m)
		m = "/container:/data.mdb:/synced";
	while (*m && nmatch < PC_MAXMATCH) {
		size_t n = strcspn(m, ":");

		if (n && n < sizeof(match[0])) {
			memcpy(match[nmatch], m, n);
			match[nmatch++][n] = '\0';
		}
		m += n;
		if (*m == ':')
			m++;
	}
	active = nmatch > 0;
	keep_all = getenv("POWERCUT_KEEP_ALL") && *getenv("POWERCUT_KEEP_ALL") == '1';
	if (getenv("POWERCUT_KILL_AT"))
		kill_at = strtol(getenv("POWERCUT_KILL_AT"), NULL, 10);
	if (getenv("POWERCUT_KILL_FILE"))
		snprintf(kill_file, sizeof(kill_file), "%s", getenv("POWERCUT_KILL_FILE"));
}

static int path_matches(const char *path)
{
	size_t pl = strlen(path);

	for (int i = 0; i < nmatch; i++) {
		size_t ml = strlen(match[i]);

		if (pl >= ml && !strcmp(path + pl - ml, match[i]))
			return 1;
	}
	return 0;
}

static struct pc_file *lookup(int fd)
{
	if (fd < 0 || fd >= PC_MAXFD)
		return NULL;
	return __atomic_load_n(&fd_file[fd], __ATOMIC_ACQUIRE);
}

/*
 * Crash at a chosen system call: every write, resize or sync of a tracked
 * file (of POWERCUT_KILL_FILE only, when set) is an event; before the
 * POWERCUT_KILL_AT-th one runs, the process SIGKILLs itself. A timer in the
 * test driver rarely lands inside a group commit that takes microseconds;
 * counting calls does, e.g. between LMDB's page writes and its fdatasync.
 * Counting starts once the file <POWERCUT_LOG>/arm exists, so that the
 * mount and the verification before the workload are never cut short.
 */
static void pc_event(const struct pc_file *f)
{
	static int armed;

	if (!kill_at || (kill_file[0] && strcmp(kill_file, f->base)))
		return;
	if (!__atomic_load_n(&armed, __ATOMIC_RELAXED)) {
		char arm[4200];

		snprintf(arm, sizeof(arm), "%s/arm", log_dir);
		if (access(arm, F_OK))
			return;
		__atomic_store_n(&armed, 1, __ATOMIC_RELAXED);
	}
	if (__atomic_add_fetch(&events, 1, __ATOMIC_RELAXED) == kill_at)
		kill(getpid(), SIGKILL);
}

/* ---- undo log ---------------------------------------------------------- */

static void log_append(struct pc_file *f, const void *buf, size_t len)
{
	const char *p = buf;
	ssize_t (*wr)(int, const void *, size_t) = REAL(write);

	while (len) {
		ssize_t n = wr(f->logfd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			pc_die("cannot append to the undo log: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
		f->log_end += (uint64_t)n;
	}
}

/* Called with f->io held shared. Logs the pre-image of every page of
 * [off, off + len); @skip_zero drops pages that are all zero (for ops that
 * only write zeros). Returns the log offset just past these records. */
static uint64_t log_preimages(struct pc_file *f, uint64_t off, uint64_t len,
			      int skip_zero)
{
	ssize_t (*rd)(int, void *, size_t, off_t) = REAL(pread);
	uint64_t first = off / PC_PAGE, last, n, mark;
	size_t used = 0;
	char *buf;

	if (!len) {
		pthread_mutex_lock(&f->lock);
		mark = f->log_end;
		pthread_mutex_unlock(&f->lock);
		return mark;
	}
	last = (off + len - 1) / PC_PAGE;
	n = last - first + 1;
	buf = malloc(n * (sizeof(struct pc_rec) + PC_PAGE));
	if (!buf)
		pc_die("out of memory logging %llu pages", (unsigned long long)n);
	/* records are packed (a short page at EOF unaligns the next one):
	 * headers go in and out through memcpy */
	for (uint64_t pg = first; pg <= last; pg++) {
		struct pc_rec r = { PC_REC_MAGIC, PC_REC_PAGE, pg * PC_PAGE, 0, 0, 0 };
		char *data = buf + used + sizeof(r);
		size_t got = 0;
		int zero = 1;

		while (got < PC_PAGE) {
			ssize_t k = rd(f->rfd, data + got, PC_PAGE - got,
				       (off_t)(pg * PC_PAGE + got));

			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0)
				pc_die("cannot read a pre-image: %s", strerror(errno));
			if (k == 0)
				break;
			got += (size_t)k;
		}
		for (size_t i = 0; skip_zero && zero && i < got; i++)
			zero = !data[i];
		if (skip_zero && zero)
			continue;
		r.len = got;
		memcpy(buf + used, &r, sizeof(r));
		used += sizeof(r) + got;
	}
	pthread_mutex_lock(&f->lock);
	for (size_t o = 0; o < used; ) {
		struct pc_rec r;

		memcpy(&r, buf + o, sizeof(r));
		r.size = f->size;
		memcpy(buf + o, &r, sizeof(r));
		o += sizeof(r) + r.len;
	}
	log_append(f, buf, used);
	mark = f->log_end;
	pthread_mutex_unlock(&f->lock);
	free(buf);
	return mark;
}

static void log_marker(struct pc_file *f, uint32_t type, uint64_t off,
		       uint64_t len, uint64_t mark, uint64_t size)
{
	struct pc_rec r = { PC_REC_MAGIC, type, off, len, size, mark };

	log_append(f, &r, sizeof(r));
}

/* Everything logged before @mark is durable, and so is @size. A snapshot
 * from before the last truncation (two syncs of one file at once) covers
 * nothing that is still in the log. */
static void mark_durable(struct pc_file *f, uint64_t epoch, uint64_t mark,
			 uint64_t size)
{
	pthread_mutex_lock(&f->lock);
	if (f->epoch != epoch) {
		/* nothing left to declare durable */
	} else if (f->log_end == mark && !keep_all) {
		if (REAL(ftruncate)(f->logfd, 0))
			pc_die("cannot truncate the undo log: %s", strerror(errno));
		f->log_end = 0;
		f->epoch++;
	} else {
		log_marker(f, PC_REC_SYNC, 0, 0, mark, size);
	}
	pthread_mutex_unlock(&f->lock);
}

/* ---- tracking ---------------------------------------------------------- */

static void track(int fd, const char *path, int flags)
{
	int (*op)(const char *, int, ...) = REAL(open);
	int saved = errno;
	struct pc_file *f = NULL;
	char name[4200], proc[64];
	const char *base;
	struct stat st;

	if (!active || fd < 0 || !path || !path_matches(path))
		return;
	if (fd >= PC_MAXFD)
		pc_die("fd %d of '%s' is beyond the fd table", fd, path);
	if (fstat(fd, &st))
		pc_die("fstat '%s': %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode))
		goto out;
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	pthread_mutex_lock(&files_lock);
	for (int i = 0; i < nfiles; i++) {
		if (files[i].dev == st.st_dev && files[i].ino == st.st_ino)
			f = &files[i];
		else if (!strcmp(files[i].base, base))
			pc_die("'%s' is another file than the one tracked under the "
			       "name '%s' before: one undo log cannot serve both", path, base);
	}
	if (!f) {
		if (nfiles == PC_MAXFILES)
			pc_die("more than %d tracked files", PC_MAXFILES);
		f = &files[nfiles];
		f->dev = st.st_dev;
		f->ino = st.st_ino;
		f->size = (uint64_t)st.st_size;
		snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
		f->rfd = op(proc, O_RDONLY | O_CLOEXEC);
		if (f->rfd < 0)
			pc_die("cannot reopen '%s' for reading: %s", path, strerror(errno));
		snprintf(f->base, sizeof(f->base), "%s", base);
		snprintf(name, sizeof(name), "%s/%s.undo", log_dir, base);
		/* Appended to, not truncated: a log left by an earlier run of
		 * this process still describes un-synced pages. */
		f->logfd = op(name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
		if (f->logfd < 0 || fstat(f->logfd, &st))
			pc_die("cannot open the undo log '%s': %s", name, strerror(errno));
		f->log_end = (uint64_t)st.st_size;
		pthread_mutex_init(&f->lock, NULL);
		{
			pthread_rwlockattr_t a;

			/* a snapshot must not starve behind a stream of writes */
			pthread_rwlockattr_init(&a);
			pthread_rwlockattr_setkind_np(&a,
				PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
			pthread_rwlock_init(&f->io, &a);
			pthread_rwlockattr_destroy(&a);
		}
		nfiles++;
	}
	pthread_mutex_unlock(&files_lock);
	fd_flags[fd] = flags;
	__atomic_store_n(&fd_file[fd], f, __ATOMIC_RELEASE);
out:
	errno = saved;
}

static int open_mode_needed(int flags)
{
	return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE;
}

#define OPEN_WRAPPER(name)							\
	int name(const char *path, int flags, ...)			\
	{								\
		mode_t mode = 0;					\
		int fd;							\
									\
		if (open_mode_needed(flags)) {				\
			va_list ap;					\
			va_start(ap, flags);				\
			mode = va_arg(ap, mode_t);			\
			va_end(ap);					\
		}							\
		fd = REAL(name)(path, flags, mode);			\
		track(fd, path, flags);					\
		return fd;						\
	}

OPEN_WRAPPER(open)
OPEN_WRAPPER(open64)

#define OPENAT_WRAPPER(name)						\
	int name(int dirfd, const char *path, int flags, ...)		\
	{								\
		mode_t mode = 0;					\
		int fd;							\
									\
		if (open_mode_needed(flags)) {				\
			va_list ap;					\
			va_start(ap, flags);				\
			mode = va_arg(ap, mode_t);			\
			va_end(ap);					\
		}							\
		fd = REAL(name)(dirfd, path, flags, mode);		\
		track(fd, path, flags);					\
		return fd;						\
	}

OPENAT_WRAPPER(openat)
OPENAT_WRAPPER(openat64)

int creat(const char *path, mode_t mode)
{
	int fd = REAL(creat)(path, mode);

	track(fd, path, O_WRONLY | O_CREAT | O_TRUNC);
	return fd;
}

int creat64(const char *path, mode_t mode)
{
	int fd = REAL(creat64)(path, mode);

	track(fd, path, O_WRONLY | O_CREAT | O_TRUNC);
	return fd;
}

/* the _FORTIFY_SOURCE entry points */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);

int __open_2(const char *path, int flags)
{
	int fd = REAL(__open_2)(path, flags);

	track(fd, path, flags);
	return fd;
}

int __open64_2(const char *path, int flags)
{
	int fd = REAL(__open64_2)(path, flags);

	track(fd, path, flags);
	return fd;
}

int __openat_2(int dirfd, const char *path, int flags)
{
	int fd = REAL(__openat_2)(dirfd, path, flags);

	track(fd, path, flags);
	return fd;
}

int __openat64_2(int dirfd, const char *path, int flags)
{
	int fd = REAL(__openat64_2)(dirfd, path, flags);

	track(fd, path, flags);
	return fd;
}

int close(int fd)
{
	/* Forget the fd BEFORE closing it: afterwards its number may already
	 * belong to another thread's open. */
	if (lookup(fd))
		__atomic_store_n(&fd_file[fd], NULL, __ATOMIC_RELEASE);
	return REAL(close)(fd);
}

/* ---- writes ------------------------------------------------------------ */

/* What a tracked write carries from before the real call to after it. */
struct pc_wctx {
	struct pc_file *f;
	uint64_t off;
	uint64_t mark;
	int sync;
};

static void write_begin(struct pc_wctx *w, struct pc_file *f, int fd,
			int64_t off, size_t len, int sync)
{
	int saved = errno;

	pc_event(f);
	w->f = f;
	if (off < 0) {
		/* write/writev: the file position (or EOF for O_APPEND) */
		if (fd_flags[fd] & O_APPEND) {
			pthread_mutex_lock(&f->lock);
			off = (int64_t)f->size;
			pthread_mutex_unlock(&f->lock);
		} else {
			off = lseek(fd, 0, SEEK_CUR);
			if (off < 0)
				off = 0;	/* not seekable: the real call fails */
		}
	}
	w->off = (uint64_t)off;
	w->sync = sync || (fd_flags[fd] & O_DSYNC);
	pthread_rwlock_rdlock(&f->io);
	w->mark = log_preimages(f, w->off, len, 0);
	errno = saved;
}

static void write_end(struct pc_wctx *w, ssize_t done)
{
	struct pc_file *f = w->f;
	int saved = errno;

	pthread_mutex_lock(&f->lock);
	if (done > 0 && w->off + (uint64_t)done > f->size)
		f->size = w->off + (uint64_t)done;
	if (done > 0 && w->sync)
		log_marker(f, PC_REC_RANGE, w->off, (uint64_t)done, w->mark, f->size);
	pthread_mutex_unlock(&f->lock);
	pthread_rwlock_unlock(&f->io);
	errno = saved;
}

static size_t iov_len(const struct iovec *iov, int cnt)
{
	size_t n = 0;

	for (int i = 0; i < cnt && iov; i++)
		n += iov[i].iov_len;
	return n;
}

ssize_t pwrite(int fd, const void *buf, size_t len, off_t off)
{
	struct pc_file *f = lookup(fd);
	struct pc_wctx w;
	ssize_t rc;

	if (!f || off < 0)
		return REAL(pwrite)(fd, buf, len, off);
	write_begin(&w, f, fd, off, len, 0);
	rc = REAL(pwrite)(fd, buf, len, off);
	write_end(&w, rc);
	return rc;
}

ssize_t pwrite64(int fd, const void *buf, size_t len, off64_t off)
{
	struct pc_file *f = lookup(fd);
	struct pc_wctx w;
	ssize_t rc;

	if (!f || off < 0)
		return REAL(pwrite64)(fd, buf, len, off);
	write_begin(&w, f, fd, off, len, 0);
	rc = REAL(pwrite64)(fd, buf, len, off);
	write_end(&w, rc);
	return rc;
}

ssize_t write(int fd, const void *buf, size_t len)
{
	struct pc_file *f = lookup(fd);
	struct pc_wctx w;
	ssize_t rc;

	if (!f)
		return REAL(write)(fd, buf, len);
	write_begin(&w, f, fd, -1, len, 0);
	rc = REAL(write)(fd, buf, len);
	write_end(&w, rc);
	return rc;
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
	struct pc_file *f = lookup(fd);
	struct pc_wctx w;
	ssize_t rc;

	if (!f)
		return REAL(writev)(fd, iov, cnt);
	write_begin(&w, f, fd, -1, iov_len(iov, cnt), 0);
	rc = REAL(writev)(fd, iov, cnt);
	write_end(&w, rc);
	return rc;
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	struct pc_file *f = lookup(fd);
	struct pc_wctx w;
	ssize_t rc;

	if (!f || off < 0)
		return REAL(pwritev)(fd, iov, cnt, off);
	write_begin(&w, f, fd, off, iov_len(iov, cnt), 0);
	rc = REAL(pwritev)(fd, iov, cnt, off);
	write_end(&w, rc);
	return rc;
}

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
	struct pc_file *f = lookup(fd);
	struct pc_wctx w;
	ssize_t rc;

	if (!f || off < 0)
		return REAL(pwritev64)(fd, iov, cnt, off);
	write_begin(&w, f, fd, off, iov_len(iov, cnt), 0);
	rc = REAL(pwritev64)(fd, iov, cnt, off);
	write_end(&w, rc);
	return rc;
}

ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int fl)
{
	struct pc_file *f = lookup(fd);
	struct pc_wctx w;
	ssize_t rc;

	if (!f)
		return REAL(pwritev2)(fd, iov, cnt, off, fl);
	write_begin(&w, f, fd, off, iov_len(iov, cnt),
		    !!(fl & (RWF_DSYNC | RWF_SYNC)));
	rc = REAL(pwritev2)(fd, iov, cnt, off, fl);
	write_end(&w, rc);
	return rc;
}

ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int fl)
{
	struct pc_file *f = lookup(fd);
	struct pc_wctx w;
	ssize_t rc;

	if (!f)
		return REAL(pwritev64v2)(fd, iov, cnt, off, fl);
	write_begin(&w, f, fd, off, iov_len(iov, cnt),
		    !!(fl & (RWF_DSYNC | RWF_SYNC)));
	rc = REAL(pwritev64v2)(fd, iov, cnt, off, fl);
	write_end(&w, rc);
	return rc;
}

/* ---- size changes ------------------------------------------------------ */

/* Log what an ftruncate/fallocate may destroy and the size before it.
 * Called with f->io held shared. */
static void resize_begin(struct pc_file *f, uint64_t from, uint64_t to,
			 int skip_zero)
{
	uint64_t size;

	pthread_mutex_lock(&f->lock);
	size = f->size;
	log_marker(f, PC_REC_SIZE, 0, 0, 0, size);
	pthread_mutex_unlock(&f->lock);
	if (to > size)
		to = size;	/* nothing to lose past EOF */
	if (from < to)
		log_preimages(f, from, to - from, skip_zero);
}

static void resize_end(struct pc_file *f, int fd)
{
	int saved = errno;
	struct stat st;

	if (!fstat(fd, &st)) {
		pthread_mutex_lock(&f->lock);
		f->size = (uint64_t)st.st_size;
		pthread_mutex_unlock(&f->lock);
	}
	pthread_rwlock_unlock(&f->io);
	errno = saved;
}

int ftruncate(int fd, off_t len)
{
	struct pc_file *f = lookup(fd);
	int rc, saved = errno;

	if (!f || len < 0)
		return REAL(ftruncate)(fd, len);
	pc_event(f);
	pthread_rwlock_rdlock(&f->io);
	resize_begin(f, (uint64_t)len, UINT64_MAX, 0);
	errno = saved;
	rc = REAL(ftruncate)(fd, len);
	resize_end(f, fd);
	return rc;
}

int ftruncate64(int fd, off64_t len)
{
	struct pc_file *f = lookup(fd);
	int rc, saved = errno;

	if (!f || len < 0)
		return REAL(ftruncate64)(fd, len);
	pc_event(f);
	pthread_rwlock_rdlock(&f->io);
	resize_begin(f, (uint64_t)len, UINT64_MAX, 0);
	errno = saved;
	rc = REAL(ftruncate64)(fd, len);
	resize_end(f, fd);
	return rc;
}

static void falloc_begin(struct pc_file *f, int mode, off_t off, off_t len)
{
	uint64_t o = (uint64_t)off, e = (uint64_t)off + (uint64_t)len;

	pc_event(f);
	pthread_rwlock_rdlock(&f->io);
	if (mode & (FALLOC_FL_COLLAPSE_RANGE | FALLOC_FL_INSERT_RANGE))
		resize_begin(f, o, UINT64_MAX, 0);	/* data moves */
	else if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
		resize_begin(f, o, e, 1);	/* zero pages stay zero */
	else
		resize_begin(f, 0, 0, 0);	/* only the size may change */
}

int fallocate(int fd, int mode, off_t off, off_t len)
{
	struct pc_file *f = lookup(fd);
	int rc, saved = errno;

	if (!f || off < 0 || len <= 0)
		return REAL(fallocate)(fd, mode, off, len);
	falloc_begin(f, mode, off, len);
	errno = saved;
	rc = REAL(fallocate)(fd, mode, off, len);
	resize_end(f, fd);
	return rc;
}

int fallocate64(int fd, int mode, off64_t off, off64_t len)
{
	struct pc_file *f = lookup(fd);
	int rc, saved = errno;

	if (!f || off < 0 || len <= 0)
		return REAL(fallocate64)(fd, mode, off, len);
	falloc_begin(f, mode, off, len);
	errno = saved;
	rc = REAL(fallocate64)(fd, mode, off, len);
	resize_end(f, fd);
	return rc;
}

/* ---- durability points ------------------------------------------------- */

/* The log offset and size at which a sync starts: with io held exclusively
 * no write is between its log record and its real call. */
static void snapshot(struct pc_file *f, uint64_t *epoch, uint64_t *mark,
		     uint64_t *size)
{
	pthread_rwlock_wrlock(&f->io);
	pthread_mutex_lock(&f->lock);
	*epoch = f->epoch;
	*mark = f->log_end;
	*size = f->size;
	pthread_mutex_unlock(&f->lock);
	pthread_rwlock_unlock(&f->io);
}

static int do_sync(int fd, int (*real)(int))
{
	struct pc_file *f = lookup(fd);
	uint64_t epoch, mark, size;
	int rc, saved;

	if (!f)
		return real(fd);
	pc_event(f);
	saved = errno;
	snapshot(f, &epoch, &mark, &size);
	errno = saved;
	rc = real(fd);
	if (!rc) {
		saved = errno;
		mark_durable(f, epoch, mark, size);
		errno = saved;
	}
	return rc;
}

int fsync(int fd)
{
	return do_sync(fd, REAL(fsync));
}

int fdatasync(int fd)
{
	return do_sync(fd, REAL(fdatasync));
}

/* sync/syncfs: every tracked file (we do not check which file system). */
struct pc_snap {
	uint64_t epoch, mark, size;
};

static int snapshot_all(struct pc_snap *s)
{
	int n;

	pthread_mutex_lock(&files_lock);
	n = nfiles;
	pthread_mutex_unlock(&files_lock);
	for (int i = 0; i < n; i++)
		snapshot(&files[i], &s[i].epoch, &s[i].mark, &s[i].size);
	return n;
}

void sync(void)
{
	struct pc_snap s[PC_MAXFILES];
	int n, saved = errno;

	if (!active) {
		REAL(sync)();
		return;
	}
	n = snapshot_all(s);
	REAL(sync)();
	for (int i = 0; i < n; i++)
		mark_durable(&files[i], s[i].epoch, s[i].mark, s[i].size);
	errno = saved;
}

int syncfs(int fd)
{
	struct pc_snap s[PC_MAXFILES];
	int n, rc, saved = errno;

	if (!active)
		return REAL(syncfs)(fd);
	n = snapshot_all(s);
	errno = saved;
	rc = REAL(syncfs)(fd);
	saved = errno;
	for (int i = 0; !rc && i < n; i++)
		mark_durable(&files[i], s[i].epoch, s[i].mark, s[i].size);
	errno = saved;
	return rc;
}

/* ---- mappings ---------------------------------------------------------- */

/* A writable shared mapping would let writes bypass the log (LMDB with
 * MDB_WRITEMAP): refuse loudly rather than simulate nothing. */
static void check_map(int prot, int flags, int fd)
{
	if (lookup(fd) && (prot & PROT_WRITE) && (flags & MAP_SHARED))
		pc_die("fd %d: writable shared mapping of a tracked file; "
		       "writes through memory cannot be recorded", fd);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	check_map(prot, flags, fd);
	return REAL(mmap)(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
	check_map(prot, flags, fd);
	return REAL(mmap64)(addr, len, prot, flags, fd, off);
}
