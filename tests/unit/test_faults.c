/* SPDX-License-Identifier: MIT */
/*
 * Fault injection through the I/O seam (STYLE.md habits 10 and 11; SPEC G1,
 * G2, G4). A fixed workload runs through the csdfs_fs_* API (no FUSE) on a
 * fresh volume whose I/O fails at the Nth call, for every N the workload
 * reaches, with EIO and ENOSPC, once and sticky. The count runs across all
 * of the volume's files: the container, and the metadata layer's own I/O
 * (reads and writes of its durability record, the meta-page rollback of
 * data.mdb at open, and data.mdb's sync; LMDB writes its pages itself,
 * outside the seam, but a failed sync stands for their loss). The workload is
 * two sessions: the volume is closed and reopened in between under the same
 * fault (its count goes on), so opening a used volume and reading cold
 * chunks are faulted too. Then:
 *   - every operation that failed returned a clean negative errno, and none
 *     failed before the fault fired;
 *   - what the session reads back at the end is exactly what its successful
 *     operations wrote (a failed operation changes nothing);
 *   - csdfs_vol_close may fail, but csdfs_fsck (verify_data) is clean;
 *   - reopened without faults, every file holds its content as of its last
 *     acknowledged fsync (or O_SYNC write), or a later state its successful
 *     writes produced, or what an O_SYNC write that failed would have made
 *     it (its commit may have reached the disk: a failed sync of the
 *     durability record leaves the record written but its durability
 *     unknown, and either way is consistent): the volume never goes back
 *     past an acknowledged fsync and never shows a state that was not
 *     written.
 * A hang (no return within FAULT_RUN_SECONDS) aborts with the case named.
 *
 * The main sweeps run without the commit thread (no_commit_thread), so
 * commits happen only at fsync, O_SYNC writes and close, and the Nth call is
 * the same call every run. Two more sweeps run the commit thread every 2 ms,
 * so commits (and their failures) also happen behind the workload's back;
 * that needs a thread-safe fault wrapper (test_fault_seam_threads).
 *
 * Every run starts from a copy of one freshly made volume; volumes live in
 * the fixture's temp directory (fixture.h: $CSDFS_TEST_TMPDIR, else
 * /dev/shm, else /tmp), which goes away at exit or a meson timeout.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "csdfs/csdfs.h"
#include "csdfs/io.h"
#include "csdfs/log.h"
#include "fixture.h"

#define VOL_SIZE FIXTURE_VOL_SIZE
#define FAULT_RUN_SECONDS 30
#define MAX_PROBLEMS_SHOWN 40

/* ---- deterministic data -------------------------------------------------- */

enum data_kind { D_TEXT, D_RANDOM, D_HALF, D_ZERO };

static void fill(unsigned char *p, size_t len, enum data_kind kind, uint64_t seed)
{
	static const char words[] = "the row was committed to the page of the index ";
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 0x1234567;

	for (size_t i = 0; i < len; i++) {
		s ^= s >> 12;
		s ^= s << 25;
		s ^= s >> 27;
		switch (kind) {
		case D_TEXT:
			p[i] = (unsigned char)words[(i + seed) % (sizeof(words) - 1)];
			break;
		case D_RANDOM:
			p[i] = (unsigned char)((s * 0x2545f4914f6cdd1dull) >> 56);
			break;
		case D_HALF:    /* 2:1: random 256-byte runs between zero runs */
			p[i] = (i / 256) % 2 ? 0 :
			       (unsigned char)((s * 0x2545f4914f6cdd1dull) >> 56);
			break;
		case D_ZERO:
			p[i] = 0;
			break;
		}
	}
}

/* ---- the model ----------------------------------------------------------- */

struct state {
	unsigned char *data;
	size_t len;
};

enum { F_ALPHA, F_BETA, F_GAMMA, F_DELTA, F_EPS, NFILES };
static const char *const file_labels[NFILES] = {
	"'alpha'", "'dir/beta'", "'gamma' (renamed 'dir/gamma2')", "'delta'", "'eps'",
};

struct mfile {
	const char *label;
	uint64_t ino;             /* 0: not created */
	uint64_t parent;          /* where its name is now */
	char name[32];
	bool gone;                /* unlinked successfully */
	unsigned char *cur;       /* content as the successful ops left it */
	size_t len;
	/* What may be found after reopen: states[0] is the content at the
	 * last acknowledged fsync (or creation), then each later state. */
	struct state *states;
	size_t nstates;
	bool durable;             /* an fsync of it was acknowledged */
	bool may_vanish;          /* an unlink succeeded after that */
	bool lost_track;          /* content unknown (a read failed): leave it */
};

struct run {
	struct csdfs_vol *vol;
	struct csdfs_io_fault fault;
	struct csdfs_io_fault meta_seen;  /* counts the metadata files' calls */
	const char *tag;          /* "N=12 err=EIO once", for messages */
	struct csdfs_cred cred;
	uint64_t dir;             /* ino of "dir", or root if not created */
	struct mfile f[NFILES];
	unsigned ops, failed_ops;
	unsigned problems;
	char first_problem[512];
};

static unsigned total_problems;
static unsigned other_errnos;   /* failures neither EIO nor ENOSPC */
static char first_total_problem[512];

static void problem(struct run *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void problem(struct run *r, const char *fmt, ...)
{
	char msg[400], line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(line, sizeof(line), "%s: %s", r->tag, msg);
	if (!r->problems)
		snprintf(r->first_problem, sizeof(r->first_problem), "%s", line);
	if (!total_problems)
		snprintf(first_total_problem, sizeof(first_total_problem), "%s", line);
	r->problems++;
	total_problems++;
	if (total_problems <= MAX_PROBLEMS_SHOWN)
		fprintf(stderr, "test_faults: %s\n", line);
}

/* @data (@len bytes) may be found after reopen. */
static void state_push_data(struct mfile *m, const unsigned char *data, size_t len)
{
	struct state *s = realloc(m->states, (m->nstates + 1) * sizeof(*s));

	ck_assert_ptr_nonnull(s);
	m->states = s;
	s[m->nstates].data = malloc(len ? len : 1);
	ck_assert_ptr_nonnull(s[m->nstates].data);
	if (len)
		memcpy(s[m->nstates].data, data, len);
	s[m->nstates].len = len;
	m->nstates++;
}

static void state_push(struct mfile *m)
{
	state_push_data(m, m->cur, m->len);
}

static void states_clear(struct mfile *m)
{
	for (size_t i = 0; i < m->nstates; i++)
		free(m->states[i].data);
	free(m->states);
	m->states = NULL;
	m->nstates = 0;
}

static void model_free(struct run *r)
{
	for (int i = 0; i < NFILES; i++) {
		states_clear(&r->f[i]);
		free(r->f[i].cur);
		r->f[i].cur = NULL;
	}
}

static void model_resize(struct mfile *m, size_t len)
{
	unsigned char *p = realloc(m->cur, len ? len : 1);

	ck_assert_ptr_nonnull(p);
	if (len > m->len)
		memset(p + m->len, 0, len - m->len);
	m->cur = p;
	m->len = len;
}

/* An operation returned @rc: a clean -errno, and only after the fault. */
static bool op_result(struct run *r, const char *what, long rc)
{
	r->ops++;
	if (rc >= 0)
		return true;
	r->failed_ops++;
	if (rc < -4095)
		problem(r, "%s returned %ld, not a -errno", what, rc);
	else if (!__atomic_load_n(&r->fault.failed, __ATOMIC_SEQ_CST))
		problem(r, "%s failed with %ld (%s) before any injected fault",
			what, rc, strerror((int)-rc));
	else if (rc != -EIO && rc != -ENOSPC && ++other_errnos <= 10)
		/* Not wrong as such, but worth a look: say what it was. */
		fprintf(stderr, "test_faults: note: %s: %s failed with %s\n", r->tag, what,
			strerror((int)-rc));
	return false;
}

/* ---- workload steps ------------------------------------------------------ */

static void w_create(struct run *r, int fi, uint64_t parent, const char *name)
{
	struct mfile *m = &r->f[fi];
	struct stat st;
	int rc;

	rc = csdfs_fs_mknod(r->vol, &r->cred, parent, name, S_IFREG | 0644, 0, &st);
	if (!op_result(r, "create", rc))
		return;
	m->ino = st.st_ino;
	m->parent = parent;
	snprintf(m->name, sizeof(m->name), "%s", name);
	model_resize(m, 0);
	states_clear(m);
	state_push(m);       /* may be absent, or empty, after reopen */
}

static bool live(struct mfile *m)
{
	return m->ino && !m->gone && !m->lost_track;
}

static void w_write(struct run *r, int fi, uint64_t off, size_t len,
		    enum data_kind kind, bool sync)
{
	struct mfile *m = &r->f[fi];
	unsigned char *buf;
	ssize_t rc;

	if (!live(m))
		return;
	buf = malloc(len);
	ck_assert_ptr_nonnull(buf);
	fill(buf, len, kind, off * 31 + len + (uint64_t)fi);
	rc = csdfs_fs_write(r->vol, m->ino, (const char *)buf, len, off, sync);
	if (rc >= 0 && (size_t)rc != len) {
		problem(r, "write of %zu bytes to %s returned %zd", len, m->label, rc);
	} else if (op_result(r, sync ? "O_SYNC write" : "write", rc)) {
		if (off + len > m->len)
			model_resize(m, off + len);
		memcpy(m->cur + off, buf, len);
		if (sync) {
			/* Acknowledged durable, like an fsync. */
			states_clear(m);
			m->durable = true;
			m->may_vanish = false;
		}
		state_push(m);
	} else if (sync) {
		/* Failed in its commit's sync, it may still be durable (see
		 * the top): a possible state, not the session's. */
		size_t n = off + len > m->len ? off + len : m->len;
		unsigned char *maybe = calloc(1, n);

		ck_assert_ptr_nonnull(maybe);
		if (m->len)
			memcpy(maybe, m->cur, m->len);
		memcpy(maybe + off, buf, len);
		state_push_data(m, maybe, n);
		free(maybe);
	}
	free(buf);
}

static void w_truncate(struct run *r, int fi, uint64_t size)
{
	struct mfile *m = &r->f[fi];
	struct stat in, st;
	int rc;

	if (!live(m))
		return;
	memset(&in, 0, sizeof(in));
	in.st_size = (off_t)size;
	rc = csdfs_fs_setattr(r->vol, m->ino, &in, CSDFS_SET_SIZE, &st);
	if (op_result(r, "truncate", rc)) {
		model_resize(m, size);
		state_push(m);
	}
}

static void w_fsync(struct run *r, int fi)
{
	struct mfile *m = &r->f[fi];
	int rc;

	if (!live(m))
		return;
	rc = csdfs_fs_fsync(r->vol, m->ino);
	if (op_result(r, "fsync", rc)) {
		states_clear(m);
		state_push(m);
		m->durable = true;
		m->may_vanish = false;
	}
}

static void w_rename(struct run *r, int fi, uint64_t newparent, const char *newname)
{
	struct mfile *m = &r->f[fi];
	int rc;

	if (!live(m))
		return;
	rc = csdfs_fs_rename(r->vol, m->parent, m->name, newparent, newname, 0);
	if (op_result(r, "rename", rc)) {
		m->parent = newparent;
		snprintf(m->name, sizeof(m->name), "%s", newname);
	}
}

static void w_unlink(struct run *r, int fi)
{
	struct mfile *m = &r->f[fi];
	int rc;

	if (!live(m))
		return;
	rc = csdfs_fs_unlink(r->vol, m->parent, m->name);
	if (op_result(r, "unlink", rc)) {
		m->gone = true;
		m->may_vanish = true;
	}
}

static void w_punch(struct run *r, int fi, uint64_t off, uint64_t len)
{
	struct mfile *m = &r->f[fi];
	int rc;

	if (!live(m))
		return;
	rc = csdfs_fs_fallocate(r->vol, m->ino, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				off, len);
	if (op_result(r, "punch hole", rc)) {
		if (off < m->len)
			memset(m->cur + off, 0, off + len < m->len ? len : m->len - off);
		state_push(m);
	}
}

/* The session's own view: a read fails cleanly or returns exactly what the
 * successful operations wrote. */
static void w_verify(struct run *r, int fi)
{
	struct mfile *m = &r->f[fi];
	size_t cap = m->len + 4096;
	char *buf;
	ssize_t rc;

	if (!live(m))
		return;
	buf = malloc(cap);
	ck_assert_ptr_nonnull(buf);
	rc = csdfs_fs_read(r->vol, m->ino, buf, cap, 0);
	if (op_result(r, "read", rc) &&
	    ((size_t)rc != m->len || (m->len && memcmp(buf, m->cur, m->len))))
		problem(r, "%s reads back %zd bytes%s, the session wrote %zu",
			m->label, rc, (size_t)rc == m->len ? " that differ" : "", m->len);
	free(buf);
}

/* Session 1, on the fresh volume. */
static void workload_a(struct run *r)
{
	struct stat st;
	int rc;

	rc = csdfs_fs_mknod(r->vol, &r->cred, CSDFS_ROOT_INO, "dir", S_IFDIR | 0755, 0, &st);
	r->dir = op_result(r, "mkdir", rc) ? st.st_ino : CSDFS_ROOT_INO;
	w_create(r, F_ALPHA, CSDFS_ROOT_INO, "alpha");
	w_create(r, F_BETA, r->dir, "beta");
	w_create(r, F_GAMMA, CSDFS_ROOT_INO, "gamma");
	w_create(r, F_DELTA, CSDFS_ROOT_INO, "delta");

	w_write(r, F_ALPHA, 0, 40000, D_TEXT, false);
	w_write(r, F_BETA, 0, 20000, D_RANDOM, false);
	w_write(r, F_GAMMA, 0, 33000, D_HALF, false);
	w_fsync(r, F_ALPHA);
	w_fsync(r, F_BETA);

	/* Partial-chunk overwrites: read-modify-write of stored chunks. */
	w_write(r, F_ALPHA, 5000, 3000, D_RANDOM, false);
	w_write(r, F_ALPHA, 30000, 1000, D_TEXT, false);
	w_fsync(r, F_ALPHA);

	w_rename(r, F_GAMMA, r->dir, "gamma2");
	w_write(r, F_DELTA, 0, 16384, D_RANDOM, true);
	w_unlink(r, F_DELTA);
	w_truncate(r, F_BETA, 7000);
	w_write(r, F_BETA, 10000, 2000, D_TEXT, false);
	w_fsync(r, F_BETA);

	w_truncate(r, F_GAMMA, 50000);
	w_write(r, F_GAMMA, 45000, 2000, D_RANDOM, false);
	w_write(r, F_ALPHA, 0, 16384, D_ZERO, false);   /* chunk 0 -> hole */
	w_fsync(r, F_GAMMA);

	w_create(r, F_EPS, CSDFS_ROOT_INO, "eps");
	w_write(r, F_EPS, 0, 8000, D_TEXT, false);
	w_write(r, F_EPS, 100, 50, D_RANDOM, false);
	if (r->dir != CSDFS_ROOT_INO)
		op_result(r, "fsync dir", csdfs_fs_fsync(r->vol, r->dir));
	w_write(r, F_ALPHA, 40000, 5000, D_HALF, false);
	w_write(r, F_BETA, 3000, 1000, D_HALF, false);
	w_fsync(r, F_EPS);
	w_truncate(r, F_GAMMA, 20000);
	w_punch(r, F_ALPHA, 20000, 10000);   /* partial chunks at both ends */

	/* More rounds: multi-chunk and unaligned writes, some fsynced. */
	for (int round = 0; round < 3; round++) {
		static const int order[] = { F_ALPHA, F_BETA, F_GAMMA, F_EPS };

		for (int k = 0; k < 4; k++) {
			int fi = order[k];
			uint64_t off = ((uint64_t)round * 7919 + (uint64_t)fi * 12347) % 60000;
			size_t len = 1000 + (size_t)round * 9000 + (size_t)k * 777;

			w_write(r, fi, off, len, (enum data_kind)((round + k) % 4), false);
			if ((round + k) % 2)
				w_fsync(r, fi);
		}
	}
	w_truncate(r, F_BETA, 0);
	w_write(r, F_BETA, 0, 5000, D_TEXT, true);

	for (int i = 0; i < NFILES; i++)
		w_verify(r, i);
}

/* Session 2, after a close and a reopen under the same fault: cold caches,
 * so the partial overwrites read their chunks from the container. */
static void workload_b(struct run *r)
{
	w_write(r, F_ALPHA, 17000, 500, D_RANDOM, false);
	w_write(r, F_GAMMA, 100, 100, D_TEXT, false);
	w_fsync(r, F_ALPHA);
	w_punch(r, F_BETA, 1000, 2000);
	w_write(r, F_EPS, 7000, 3000, D_HALF, false);
	w_fsync(r, F_EPS);
	w_fsync(r, F_BETA);
	w_rename(r, F_EPS, r->dir, "eps2");
	w_truncate(r, F_GAMMA, 5000);
	w_write(r, F_GAMMA, 40000, 20000, D_RANDOM, false);
	w_write(r, F_ALPHA, 3000, 100, D_TEXT, false);
	w_fsync(r, F_GAMMA);
	for (int i = 0; i < NFILES; i++)
		w_verify(r, i);
}

/* ---- after the faulted session ------------------------------------------- */

/*
 * After a reopen: every file the model knows must hold one of the states it
 * may be in (see struct mfile), and an acknowledged one must exist.
 * @session: the reopen is inside the faulted session, so reads may fail
 * cleanly (that file is then left alone), and what is found becomes the
 * model's current, and only possible, state: it is committed now.
 */
static void check_files(struct run *r, struct csdfs_vol *vol, bool session)
{
	for (int i = 0; i < NFILES; i++) {
		struct mfile *m = &r->f[i];
		struct stat st;
		size_t cap, k;
		char *buf;
		ssize_t n;
		int rc;

		if (!m->ino || m->lost_track)
			continue;
		rc = csdfs_fs_getattr(vol, m->ino, &st);
		if (rc == -ENOENT) {
			if (m->durable && !m->may_vanish)
				problem(r, "BUG: %s (inode %llu) was fsynced, but is gone after reopen",
					m->label, (unsigned long long)m->ino);
			m->gone = true;
			continue;
		}
		if (rc) {
			if (!session)
				problem(r, "getattr of %s after reopen: %d (%s)", m->label, rc,
					strerror(-rc));
			else if (!op_result(r, "getattr", rc))
				m->lost_track = true;
			continue;
		}
		if (!S_ISREG(st.st_mode)) {
			problem(r, "%s is not a regular file after reopen", m->label);
			m->lost_track = true;
			continue;
		}
		cap = (size_t)st.st_size + 4096;
		buf = malloc(cap);
		ck_assert_ptr_nonnull(buf);
		n = csdfs_fs_read(vol, m->ino, buf, cap, 0);
		if (session && n < 0) {
			op_result(r, "read", n);
			m->lost_track = true;
			free(buf);
			continue;
		}
		if (n < 0 || (uint64_t)n != (uint64_t)st.st_size) {
			problem(r, "reading %s after reopen: %zd (size %lld)", m->label, n,
				(long long)st.st_size);
			m->lost_track = true;
			free(buf);
			continue;
		}
		for (k = 0; k < m->nstates; k++)
			if (m->states[k].len == (size_t)n &&
			    !memcmp(m->states[k].data, buf, (size_t)n))
				break;
		if (k == m->nstates) {
			problem(r, "BUG: %s after reopen has %zd bytes that match neither its "
				"last acknowledged fsync (%zu bytes) nor any of the %zu later "
				"states", m->label, n, m->nstates ? m->states[0].len : 0,
				m->nstates ? m->nstates - 1 : 0);
			m->lost_track = true;
		} else if (session) {
			model_resize(m, (size_t)n);
			if (n)
				memcpy(m->cur, buf, (size_t)n);
			states_clear(m);
			state_push(m);
			m->durable = true;
			m->may_vanish = false;
		}
		free(buf);
	}
}

/* ---- one run ------------------------------------------------------------- */

/* One fault for all the volume's files; the metadata files' calls are
 * counted apart too (outside it: a failed call counts). */
static int install_fault(struct csdfs_io *io, void *arg)
{
	struct run *r = arg;
	int rc = csdfs_io_fault_install(io, &r->fault);

	if (!rc && io->role != CSDFS_IO_CONTAINER)
		rc = csdfs_io_fault_install(io, &r->meta_seen);
	return rc;
}

/* A hang names its case and aborts (check reports the signal). */
static char hang_msg[256];

static void on_alarm(int sig)
{
	ssize_t w = write(2, hang_msg, strlen(hang_msg));

	(void)w;
	(void)sig;
	abort();
}

/*
 * A fresh volume for every run: csdfs_vol_create makes a template once per
 * process, and each run gets a byte-identical copy of it, except that the
 * container is sparse instead of preallocated (only its first blocks hold
 * anything yet). Preallocating and deleting 64 MiB was two thirds of each
 * run's time; what the volume holds is the same.
 */
static void copy_file(const char *from, const char *to, size_t len, off_t size)
{
	char *buf = malloc(len ? len : 1);
	int in = open(from, O_RDONLY | O_CLOEXEC);
	int out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ssize_t n;

	ck_assert_ptr_nonnull(buf);
	ck_assert_msg(in >= 0 && out >= 0, "cannot copy '%s' to '%s': %s", from, to,
		      strerror(errno));
	n = read(in, buf, len);
	ck_assert_int_ge(n, 0);
	ck_assert_int_eq(write(out, buf, (size_t)n), n);
	ck_assert_int_eq(ftruncate(out, size), 0);
	close(in);
	close(out);
	free(buf);
}

/* @to gets a copy of the fresh volume @from, with a sparse container. */
static void clone_volume(const char *from, const char *to)
{
	char a[1300], b[1300];
	struct stat st;

	ck_assert_int_eq(mkdir(to, 0700), 0);
	snprintf(b, sizeof(b), "%s/meta", to);
	ck_assert_int_eq(mkdir(b, 0700), 0);
	snprintf(a, sizeof(a), "%s/container", from);
	snprintf(b, sizeof(b), "%s/container", to);
	copy_file(a, b, CSDFS_FIRST_DATA_BLOCK * CSDFS_BLOCK_SIZE, (off_t)VOL_SIZE);
	snprintf(a, sizeof(a), "%s/meta/data.mdb", from);
	snprintf(b, sizeof(b), "%s/meta/data.mdb", to);
	ck_assert_int_eq(stat(a, &st), 0);
	copy_file(a, b, (size_t)st.st_size, st.st_size);
}

static void fresh_volume(const char *vpath)
{
	char tpath[1100], mpath[1100];
	struct stat st;

	fixture_path(tpath, sizeof(tpath), "template");
	if (stat(tpath, &st)) {
		/* Kept sparse too: a test killed midway leaves little behind. */
		fixture_path(mpath, sizeof(mpath), "template.mkfs");
		fixture_vol_create(mpath, NULL);
		clone_volume(mpath, tpath);
		fixture_rm(mpath);
	}
	clone_volume(tpath, vpath);
}

struct outcome {
	unsigned long long calls;   /* fault-counted I/O calls seen */
	unsigned long long meta_calls;  /* of them on the metadata files */
	unsigned long long failed;  /* calls failed by the fault */
	bool open_failed, close_failed;
	unsigned ops, failed_ops;
};

/* @thread: run the commit thread with a 2 ms interval, so commits also
 * happen behind the workload's back (the Nth call then varies a little). */
static unsigned one_run(unsigned long long nth, int err, bool sticky, bool thread,
			struct outcome *out)
{
	struct csdfs_fsck_opts fo = { .verify_data = true };
	struct csdfs_mount_opts mo = { .no_commit_thread = !thread,
					.commit_ms = thread ? 2 : 0 };
	struct csdfs_vol *vol = NULL;
	struct run r;
	char vpath[1100], msg[512], tag[96];
	int rc;

	memset(&r, 0, sizeof(r));
	memset(out, 0, sizeof(*out));
	snprintf(tag, sizeof(tag), "N=%llu err=%s %s%s", nth,
		 err == EIO ? "EIO" : err == ENOSPC ? "ENOSPC" : "?",
		 sticky ? "sticky" : "once", thread ? " commit-thread" : "");
	r.tag = tag;
	for (int i = 0; i < NFILES; i++)
		r.f[i].label = file_labels[i];
	r.cred.uid = getuid();
	r.cred.gid = getgid();
	r.fault.kinds = CSDFS_IO_ALL;
	r.fault.nth = nth;
	r.fault.err = err;
	r.fault.sticky = sticky;
	r.meta_seen.kinds = CSDFS_IO_ALL;
	snprintf(hang_msg, sizeof(hang_msg),
		 "test_faults: %s: no return within %d s (hang)\n", tag, FAULT_RUN_SECONDS);

	fixture_path(vpath, sizeof(vpath), "vol");
	fixture_rm(vpath);
	csdfs_log_set_level(LOG_ERR);
	fresh_volume(vpath);

	alarm(FAULT_RUN_SECONDS);
	/* Faulted part: a failed commit logs at LOG_CRIT; expected here. */
	csdfs_log_set_level(-1);
	mo.io_hook = install_fault;
	mo.io_hook_arg = &r;
	msg[0] = '\0';
	rc = csdfs_vol_open(vpath, &mo, &vol, msg, sizeof(msg));
	if (rc) {
		out->open_failed = true;
		if (rc > 0 || rc < -4095)
			problem(&r, "open returned %d", rc);
		else if (!r.fault.failed)
			problem(&r, "open failed before any injected fault: %s", msg);
		else if (!msg[0])
			problem(&r, "open failed (%d) without a message", rc);
	} else {
		r.vol = vol;
		workload_a(&r);
		rc = csdfs_vol_close(vol);
		r.vol = NULL;
		if (rc) {
			out->close_failed = true;
			if (rc > 0 || rc < -4095)
				problem(&r, "close returned %d", rc);
			else if (!r.fault.failed)
				problem(&r, "close failed (%d) before any injected fault", rc);
		}
		/* The same fault struct: the count goes on across the reopen. */
		msg[0] = '\0';
		rc = csdfs_vol_open(vpath, &mo, &vol, msg, sizeof(msg));
		if (rc) {
			out->open_failed = true;
			if (rc > 0 || rc < -4095)
				problem(&r, "second open returned %d", rc);
			else if (!r.fault.failed)
				problem(&r, "second open failed before any injected fault: %s", msg);
			else if (!msg[0])
				problem(&r, "second open failed (%d) without a message", rc);
		} else {
			r.vol = vol;
			check_files(&r, vol, true);
			workload_b(&r);
			rc = csdfs_vol_close(vol);
			r.vol = NULL;
			if (rc) {
				out->close_failed = true;
				if (rc > 0 || rc < -4095)
					problem(&r, "second close returned %d", rc);
				else if (!r.fault.failed)
					problem(&r, "second close failed (%d) before any injected fault",
						rc);
			}
		}
	}
	out->calls = r.fault.calls;
	out->meta_calls = r.meta_seen.calls;
	out->failed = r.fault.failed;
	out->ops = r.ops;
	out->failed_ops = r.failed_ops;

	/* The oracle, without faults. */
	csdfs_log_set_level(LOG_ERR);
	rc = csdfs_fsck(vpath, &fo);
	if (rc)
		problem(&r, "BUG: fsck after the faulted session returned %d (problems logged above)",
			rc);
	mo.io_hook = NULL;
	mo.io_hook_arg = NULL;
	mo.no_commit_thread = true;
	msg[0] = '\0';
	rc = csdfs_vol_open(vpath, &mo, &vol, msg, sizeof(msg));
	if (rc) {
		problem(&r, "BUG: reopen without faults failed: %d (%s)", rc, msg);
	} else {
		check_files(&r, vol, false);
		rc = csdfs_vol_close(vol);
		if (rc)
			problem(&r, "close after the clean reopen: %d", rc);
		rc = csdfs_fsck(vpath, &fo);
		if (rc)
			problem(&r, "BUG: fsck after the clean reopen returned %d", rc);
	}
	alarm(0);
	model_free(&r);
	fixture_rm(vpath);
	return r.problems;
}

/* ---- the tests ----------------------------------------------------------- */

static unsigned long long count_calls(bool thread, unsigned long long *meta_calls)
{
	struct outcome o;
	unsigned p = one_run(0, EIO, false, thread, &o);

	ck_assert_msg(p == 0, "the workload has problems without any fault: %s",
		      first_total_problem);
	ck_assert_msg(o.failed_ops == 0 && !o.open_failed && !o.close_failed,
		      "operations failed without a fault");
	ck_assert_msg(o.calls > 10, "only %llu I/O calls: the workload does no I/O?",
		      o.calls);
	/* The sweeps must reach the metadata files too. */
	ck_assert_msg(o.meta_calls > 0 && o.meta_calls < o.calls,
		      "%llu of %llu I/O calls on the metadata files: the hook does not "
		      "reach them, or nothing else", o.meta_calls, o.calls);
	if (meta_calls)
		*meta_calls = o.meta_calls;
	return o.calls;
}

START_TEST(test_no_fault)
{
	unsigned long long meta;
	unsigned long long c = count_calls(false, &meta);

	fprintf(stderr, "test_faults: the workload makes %llu I/O calls: %llu on the "
		"container, %llu on the metadata files\n", c, c - meta, meta);
	fixture_clear();
}
END_TEST

static const struct {
	int err;
	bool sticky, thread;
} sweeps[] = {
	{ EIO, false, false }, { EIO, true, false },
	{ ENOSPC, false, false }, { ENOSPC, true, false },
	{ EIO, false, true }, { EIO, true, true },
};

START_TEST(test_fault_sweep)
{
	int err = sweeps[_i].err;
	bool sticky = sweeps[_i].sticky, thread = sweeps[_i].thread;
	unsigned long long c = count_calls(thread, NULL);
	unsigned long long open_failed = 0, close_failed = 0, ops_failed = 0;
	unsigned bad_runs = 0;

	signal(SIGALRM, on_alarm);
	total_problems = 0;
	other_errnos = 0;
	first_total_problem[0] = '\0';
	/* One past the end as well: a fault that never fires changes nothing. */
	for (unsigned long long n = 1; n <= c + 1; n++) {
		struct outcome o;

		if (one_run(n, err, sticky, thread, &o))
			bad_runs++;
		open_failed += o.open_failed;
		close_failed += o.close_failed;
		ops_failed += o.failed_ops;
		if (n <= c && !o.failed && !thread)
			fprintf(stderr, "test_faults: N=%llu never fired (%llu calls)\n", n,
				o.calls);
	}
	fprintf(stderr, "test_faults: %s %s%s: %llu runs, %llu open failures, %llu close "
		"failures, %llu failed operations (%u with another errno), %u runs with problems "
		"(%u problems)\n",
		err == EIO ? "EIO" : "ENOSPC", sticky ? "sticky" : "once",
		thread ? " commit-thread" : "", c + 1, open_failed, close_failed, ops_failed, other_errnos, bad_runs, total_problems);
	fixture_clear();
	ck_assert_msg(total_problems == 0, "%u problems in %u of %llu runs; first: %s",
		      total_problems, bad_runs, c + 1, first_total_problem);
}
END_TEST

/*
 * Regression test: the seam's fault wrapper must be thread-safe (io.h
 * promises thread-safe ops; the daemon has a commit thread and FUSE
 * workers). It used to set io->priv to the inner backend's priv around every
 * forwarded call, so a second thread calling in that window took the inner
 * priv (NULL for the POSIX backend) for its fault state: SIGSEGV in
 * should_fail, seen in fault_sync from the commit thread while the workload
 * thread was inside a forwarded pwrite; and an inner call could run with the
 * wrapper's priv. Fixed in bc4b5c2 (the wrapper forwards to a private copy
 * of the inner struct csdfs_io). Two threads hammer one faulted, count-only
 * csdfs_io; the inner backend checks it always gets its own priv.
 */
struct seam_inner {
	unsigned long long mismatches;
	void *unused[4];
};

static struct seam_inner seam_state;

static int seam_check(struct csdfs_io *io)
{
	if (io->priv != &seam_state)
		__atomic_add_fetch(&seam_state.mismatches, 1, __ATOMIC_SEQ_CST);
	return 0;
}

static int seam_pread(struct csdfs_io *io, void *buf, size_t len, uint64_t off)
{
	memset(buf, 0, len);
	return seam_check(io);
}

static int seam_pwrite(struct csdfs_io *io, const void *buf, size_t len,
		       uint64_t off)
{
	int rc = seam_check(io);

	/* Widen the window in which the wrapper has swapped io->priv, so the
	 * race shows on one loaded CPU too. */
	sched_yield();
	return rc ? rc : seam_check(io);
}

static int seam_sync(struct csdfs_io *io)
{
	return seam_check(io);
}

static int seam_punch(struct csdfs_io *io, uint64_t off, uint64_t len)
{
	return seam_check(io);
}

static void seam_close(struct csdfs_io *io)
{
}

static const struct csdfs_io_ops seam_ops = {
	.pread = seam_pread,
	.pwrite = seam_pwrite,
	.sync = seam_sync,
	.punch = seam_punch,
	.close = seam_close,
};

#define SEAM_SECONDS 1.0

static double seam_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool seam_go_on(double end)
{
	return !__atomic_load_n(&seam_state.mismatches, __ATOMIC_SEQ_CST) &&
	       seam_now() < end;
}

static void *seam_thread(void *arg)
{
	struct csdfs_io *io = arg;
	double end = seam_now() + SEAM_SECONDS;
	char buf[64] = "";

	while (seam_go_on(end))
		csdfs_io_pwrite(io, buf, sizeof(buf), 4096);
	return NULL;
}

START_TEST(test_fault_seam_threads)
{
	struct csdfs_io_fault f = { .kinds = CSDFS_IO_ALL, .nth = 0 };
	struct csdfs_io io = { .ops = &seam_ops, .fd = -1, .size = 1 << 20,
			       .priv = &seam_state };
	pthread_t t;
	double end;

	ck_assert_int_eq(csdfs_io_fault_install(&io, &f), 0);
	ck_assert_int_eq(pthread_create(&t, NULL, seam_thread, &io), 0);
	end = seam_now() + SEAM_SECONDS;
	while (seam_go_on(end))
		for (int i = 0; i < 100; i++)
			csdfs_io_sync(&io);
	pthread_join(t, NULL);
	csdfs_io_close(&io);
	ck_assert_msg(seam_state.mismatches == 0,
		      "csdfs_io_fault_install's wrapper is not thread-safe: an inner "
		      "backend call ran with a foreign io->priv (%llu times in %llu calls)",
		      seam_state.mismatches, f.calls);
}
END_TEST

/*
 * The POSIX backend's streaming reads (O_DIRECT where buffer, offset and
 * length are block-aligned, buffered otherwise) return what was written,
 * also while it is still dirty in the host's page cache; a read past the
 * end is -EIO; the fault wrapper counts and fails them as reads.
 */
START_TEST(test_posix_direct_reads)
{
	const size_t len = 1u << 20;
	struct csdfs_io_fault f = { .kinds = CSDFS_IO_PREAD, .nth = 1, .err = EIO };
	static const struct { size_t shift; uint64_t off; size_t len; } reads[] = {
		{ 0, 0, 1u << 20 },        /* all aligned: direct */
		{ 0, 8192, 65536 },
		{ 1, 4096, 65536 },        /* buffer not aligned */
		{ 0, 100, 65536 },         /* offset not aligned */
		{ 0, 4096, 5000 },         /* length not aligned */
	};
	char path[1100], *ref = malloc(len), *buf = NULL;
	struct csdfs_io io;
	int fd;

	ck_assert_ptr_nonnull(ref);
	ck_assert_int_eq(posix_memalign((void **)&buf, 4096, len + 4096), 0);
	fixture_path(path, sizeof(path), "direct");
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)len), 0);
	close(fd);
	ck_assert_int_eq(csdfs_io_open_posix(&io, path), 0);
	for (size_t i = 0; i < len; i++)
		ref[i] = (char)((i * 2654435761u) >> 13);
	ck_assert_int_eq(csdfs_io_pwrite(&io, ref, len, 0), 0);
	for (size_t i = 0; i < sizeof(reads) / sizeof(reads[0]); i++) {
		char *b = buf + reads[i].shift;

		memset(b, 0x5a, reads[i].len);
		ck_assert_int_eq(csdfs_io_pread_direct(&io, b, reads[i].len, reads[i].off), 0);
		ck_assert_msg(!memcmp(b, ref + reads[i].off, reads[i].len), "read %zu differs", i);
	}
	ck_assert_int_eq(csdfs_io_pread_direct(&io, buf, 8192, len - 4096), -EIO);
	/* Once the host has refused a direct read, reads are buffered. */
	io.dfd_refused = 1;
	memset(buf, 0x5a, 65536);
	ck_assert_int_eq(csdfs_io_pread_direct(&io, buf, 65536, 8192), 0);
	ck_assert(!memcmp(buf, ref + 8192, 65536));
	io.dfd_refused = 0;
	ck_assert_int_eq(csdfs_io_fault_install(&io, &f), 0);
	ck_assert_int_eq(csdfs_io_pread_direct(&io, buf, 65536, 0), -EIO);
	ck_assert_int_eq(csdfs_io_pread_direct(&io, buf, 65536, 0), 0);
	ck_assert_uint_eq(f.calls, 2);
	ck_assert(!memcmp(buf, ref, 65536));
	csdfs_io_close(&io);
	unlink(path);
	free(ref);
	free(buf);
}
END_TEST

/*
 * The metadata files' backends: a plain file is made on request and grows
 * by its writes (the container's never does); a read past its end is -EIO.
 * A wrapped descriptor stays its owner's: closing the csdfs_io leaves it
 * open. Each keeps the role it was opened with, under a fault wrapper too.
 */
START_TEST(test_posix_plain_files)
{
	struct csdfs_io_fault f = { .kinds = CSDFS_IO_SYNC };
	char path[1100], buf[600] = "", got[600];
	struct csdfs_io io, wrap;
	int fd;

	fixture_path(path, sizeof(path), "direct");
	unlink(path);
	ck_assert_int_eq(csdfs_io_open_file(&io, path, false, CSDFS_IO_META_RECORD), -ENOENT);
	ck_assert_int_eq(csdfs_io_open_file(&io, path, true, CSDFS_IO_META_RECORD), 0);
	ck_assert_int_eq(io.role, CSDFS_IO_META_RECORD);
	ck_assert_uint_eq(io.size, 0);
	memset(buf, 'r', sizeof(buf));
	ck_assert_int_eq(csdfs_io_pwrite(&io, buf, sizeof(buf), 512), 0);
	ck_assert_int_eq(csdfs_io_pread(&io, got, sizeof(got), 512), 0);
	ck_assert(!memcmp(got, buf, sizeof(buf)));
	ck_assert_int_eq(csdfs_io_pread(&io, got, sizeof(got), 1000), -EIO);
	ck_assert_int_eq(csdfs_io_fault_install(&io, &f), 0);
	ck_assert_int_eq(io.role, CSDFS_IO_META_RECORD);
	ck_assert_int_eq(csdfs_io_sync(&io), 0);
	ck_assert_uint_eq(f.calls, 1);
	csdfs_io_close(&io);

	fd = open(path, O_RDWR | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(csdfs_io_wrap_fd(&wrap, fd, CSDFS_IO_META_DATA), 0);
	ck_assert_int_eq(wrap.role, CSDFS_IO_META_DATA);
	ck_assert_uint_eq(wrap.size, 512 + sizeof(buf));
	ck_assert_int_eq(csdfs_io_pread(&wrap, got, sizeof(got), 512), 0);
	ck_assert(!memcmp(got, buf, sizeof(buf)));
	ck_assert_int_eq(csdfs_io_sync(&wrap), 0);
	csdfs_io_close(&wrap);
	ck_assert_int_eq(fcntl(fd, F_GETFD), FD_CLOEXEC);   /* still open */
	close(fd);
	unlink(path);
}
END_TEST

static Suite *faults_suite(void)
{
	Suite *s = suite_create("faults");
	TCase *base = tcase_create("base");
	TCase *sweep = tcase_create("sweep");

	tcase_set_timeout(base, 60);
	tcase_add_test(base, test_no_fault);
	tcase_add_test(base, test_fault_seam_threads);
	tcase_add_test(base, test_posix_direct_reads);
	tcase_add_test(base, test_posix_plain_files);
	suite_add_tcase(s, base);

	/* Generous: each sweep is a few hundred volume lifecycles, and the
	 * same binary may run under valgrind. */
	tcase_set_timeout(sweep, 600);
	tcase_add_loop_test(sweep, test_fault_sweep, 0,
			    (int)(sizeof(sweeps) / sizeof(sweeps[0])));
	suite_add_tcase(s, sweep);
	return s;
}

FIXTURE_MAIN(faults_suite, FIXTURE_SHM)
