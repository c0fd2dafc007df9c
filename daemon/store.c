/* SPDX-License-Identifier: MIT */
/*
 * The rest of a chunk a read decoded anyway goes to the kernel's page
 * cache (FUSE notify_store), so a random reader's next access to the same
 * chunk needs no round trip: btrfs's extent trick at a chunk's grain.
 *
 * A store waits for the lock of every page it fills, and the kernel keeps
 * a page locked while a READ of it is in flight. That READ may be queued
 * behind, or be served by, the very worker that would store: two workers
 * storing into each other's pages deadlock, and so do workers all blocked
 * on READs no free worker is left to serve. So stores run on one thread of
 * their own, which no READ ever waits for, from a bounded queue: what does
 * not fit is dropped (the kernel then asks for it when it needs it).
 *
 * The bytes are checked still current when stored (csdfs_fs_if_unchanged:
 * no writer opened the file, nothing resized it since the read), under the
 * inode's io_lock, so a store never overwrites newer data or dirty pages.
 *
 * The same module watches the space left for writers that go through the
 * kernel's writeback cache (see "writers" below): the kernel accepts their
 * write(2)s into its page cache, so the only point where one can still be
 * refused is the GETATTR the kernel sends before a cached write when the
 * inode's attributes are invalid. A thread of its own invalidates them
 * (attributes only: it never waits for a page) when the volume runs short.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "csdfs/log.h"
#include "store.h"

#define STORE_QUEUE_BYTES (4u << 20)  /* copies waiting, at most */
#define STORE_STOP_WAIT_S 2           /* then end the connection (see stop) */

#define WRITERS_BUCKETS 256
#define WATCH_TICK_MS 50        /* space re-checked this often while writers are open */
#define WATCH_SETTLE_MS 2       /* an attribute reply is applied before we undo it */
#define WATCH_EXACT_MS 1000     /* the exact (free-map walking) check, at most this often */
#define WATCH_BLOCKS_MS 1000    /* writers' st_blocks refreshed this often */
/* Attribute timeout of inodes with cached writers: their attributes never
 * expire, so that only an invalidation makes the kernel ask (and then
 * only a write asks with a writer's handle, see csdfs_writers_attr). */
#define ATTR_LONG_S 1e6
/* Bytes that must stay writable for cached writers to go on: the dirty
 * budget, at least what one failed WRITE can leave unused. */
#define MARGIN_MIN (2ull << 20)
#define MARGIN_UNKNOWN (64ull << 20)  /* budget not set: bdi.c's smallest */

/* An inode open for writing through the writeback cache. */
struct writer {
	struct writer *next;
	fuse_ino_t ino;
	unsigned opens;             /* cached-writer handles */
	bool stale;                 /* the kernel may hold valid attributes: invalidate */
	bool long_attrs;            /* it was given ATTR_LONG_S ones */
};

struct writers {
	pthread_mutex_t lock;
	pthread_cond_t cv;          /* CLOCK_MONOTONIC */
	struct writer *bucket[WRITERS_BUCKETS];  /* lock */
	size_t n;                   /* lock: entries */
	bool short_;                /* lock: refuse cached writes */
	bool failed;                /* lock: a WRITE got ENOSPC, not yet re-checked exactly */
	bool kicked, stop;          /* lock */
	struct timespec pass_at;    /* lock: when kicked, pass no later than this */
	struct timespec exact_at;   /* thread: next exact check allowed */
	struct timespec blocks_at;  /* thread: next st_blocks refresh */
	pthread_t thread;
	bool running;
};

struct store_item {
	struct store_item *next;
	fuse_ino_t ino;
	uint64_t gen, off;
	size_t n;
	char data[];
};

struct csdfs_stores {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct store_item *head, *tail;  /* lock */
	size_t bytes;                    /* lock: queued data */
	bool stop;                       /* lock */
	pthread_t thread;
	struct fuse_session *se;
	struct csdfs_vol *vol;
	const struct csdfs_fuse *f;
	struct writers w;
};

int csdfs_store_queue(void *arg, uint64_t gen, uint64_t off, const char *buf, size_t n)
{
	struct csdfs_store_ctx *s = arg;
	struct csdfs_stores *q = s->q;
	struct store_item *it;

	pthread_mutex_lock(&q->lock);
	if (q->stop || q->bytes + n > STORE_QUEUE_BYTES) {
		pthread_mutex_unlock(&q->lock);
		return 1;
	}
	q->bytes += n;
	pthread_mutex_unlock(&q->lock);
	it = malloc(sizeof(*it) + n);
	pthread_mutex_lock(&q->lock);
	if (!it) {
		q->bytes -= n;
		pthread_mutex_unlock(&q->lock);
		return 1;
	}
	it->next = NULL;
	it->ino = s->ino;
	it->gen = gen;
	it->off = off;
	it->n = n;
	memcpy(it->data, buf, n);
	if (q->tail)
		q->tail->next = it;
	else
		q->head = it;
	q->tail = it;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->lock);
	return 0;
}

struct store_run {
	struct fuse_session *se;
	const struct store_item *it;
};

static int store_now(void *arg)
{
	const struct store_run *r = arg;
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(r->it->n);

	bv.buf[0].mem = (void *)r->it->data;
	return fuse_lowlevel_notify_store(r->se, r->it->ino, (off_t)r->it->off, &bv, 0);
}

static void *store_main(void *arg)
{
	struct csdfs_stores *q = arg;
	struct store_item *it;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		while (!q->head && !q->stop)
			pthread_cond_wait(&q->cv, &q->lock);
		if (q->stop)
			break;
		it = q->head;
		q->head = it->next;
		if (!q->head)
			q->tail = NULL;
		pthread_mutex_unlock(&q->lock);
		/* Errors only cost the kernel a READ later (the inode may
		 * be forgotten, the file changed, the connection gone). */
		csdfs_fs_if_unchanged(q->vol, it->ino, it->gen, store_now,
				      &(struct store_run){ q->se, it });
		pthread_mutex_lock(&q->lock);
		q->bytes -= it->n;
		free(it);
	}
	while ((it = q->head)) {
		q->head = it->next;
		free(it);
	}
	q->tail = NULL;
	q->bytes = 0;
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

/* ---- writers: ENOSPC at write(2) through the writeback cache ------------ */

static struct timespec now_plus_ms(double ms)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += (time_t)(ms / 1000);
	t.tv_nsec += (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6);
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

static bool ts_before(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec < b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec < b->tv_nsec);
}

static struct writer **writer_slot(struct writers *w, fuse_ino_t ino)
{
	struct writer **p = &w->bucket[ino % WRITERS_BUCKETS];

	while (*p && (*p)->ino != ino)
		p = &(*p)->next;
	return p;
}

/* Have the thread pass within @ms. Called with w->lock held. */
static void kick_locked(struct writers *w, double ms)
{
	struct timespec at = now_plus_ms(ms);

	if (!w->kicked || ts_before(&at, &w->pass_at))
		w->pass_at = at;
	w->kicked = true;
	pthread_cond_signal(&w->cv);
}

/* One more (@open) or one fewer cached-writer handle of @ino. */
static void writers_count(struct csdfs_stores *q, fuse_ino_t ino, bool open)
{
	struct writers *w = q ? &q->w : NULL;
	struct writer **p, *e;

	if (!w)
		return;
	pthread_mutex_lock(&w->lock);
	p = writer_slot(w, ino);
	e = *p;
	if (open && !e && (e = calloc(1, sizeof(*e)))) {
		/* Not long_attrs: the kernel may hold expiring attributes. */
		e->ino = ino;
		*p = e;
		w->n++;
		pthread_cond_signal(&w->cv);
	}
	if (e && open && !e->opens++ && w->short_) {
		e->stale = true;
		kick_locked(w, 0);
	} else if (e && !open && e->opens && !--e->opens) {
		if (e->long_attrs) {
			/* The thread invalidates what it gave, then drops it. */
			e->stale = true;
			kick_locked(w, 0);
		} else {
			*p = e->next;
			w->n--;
			free(e);
		}
	}
	pthread_mutex_unlock(&w->lock);
}

void csdfs_writers_open(struct csdfs_stores *q, fuse_ino_t ino)
{
	writers_count(q, ino, true);
}

void csdfs_writers_close(struct csdfs_stores *q, fuse_ino_t ino)
{
	writers_count(q, ino, false);
}

int csdfs_writers_attr(struct csdfs_stores *q, fuse_ino_t ino,
		       enum csdfs_attr_reply kind, double *timeout)
{
	struct writers *w = q ? &q->w : NULL;
	struct writer *e;
	int rc = 0;

	if (!w)
		return 0;
	pthread_mutex_lock(&w->lock);
	e = *writer_slot(w, ino);
	if (!e || !e->opens) {
		pthread_mutex_unlock(&w->lock);
		return 0;
	}
	if (!w->short_) {
		*timeout = ATTR_LONG_S;
		e->long_attrs = true;
	} else if (kind == CSDFS_REPLY_VERSIONED) {
		/* Invalidated first, the kernel uses the reply but does not
		 * cache it: the writers' next write still asks. */
		rc = 1;
	} else if (kind == CSDFS_REPLY_WRITER && e->long_attrs) {
		/* The attributes it holds never expire: only a write asks
		 * with a writer's handle. */
		rc = -ENOSPC;
	} else {
		/* A reply the kernel applies whatever we do (setattr), or a
		 * first GETATTR since the open, which may come from a read
		 * past EOF or an lseek(SEEK_END) of attributes that expired:
		 * answer, and take the answer back once it is applied. */
		*timeout = ATTR_LONG_S;
		e->long_attrs = true;
		e->stale = true;
		kick_locked(w, WATCH_SETTLE_MS);
	}
	pthread_mutex_unlock(&w->lock);
	return rc;
}

void csdfs_writers_enospc(struct csdfs_stores *q)
{
	if (!q)
		return;
	pthread_mutex_lock(&q->w.lock);
	q->w.failed = true;
	kick_locked(&q->w, 0);
	pthread_mutex_unlock(&q->w.lock);
}

/*
 * One pass: decide whether the volume is short (libcsdfs decides, on the
 * mount's dirty budget), and invalidate the attributes of every writer
 * that may hold valid ones: all of them when the state changes, else those
 * an attribute reply went to since. After a failed WRITE the exact check
 * decides, at most every WATCH_EXACT_MS, until it finds space again.
 */
static void writers_pass(struct csdfs_stores *q)
{
	struct writers *w = &q->w;
	uint64_t margin = __atomic_load_n(&q->f->max_dirty, __ATOMIC_RELAXED);
	struct timespec now = now_plus_ms(0);
	bool failed, exact, is_short;
	fuse_ino_t *inos = NULL;
	size_t n = 0;

	if (!margin)
		margin = MARGIN_UNKNOWN;
	if (margin < MARGIN_MIN)
		margin = MARGIN_MIN;
	pthread_mutex_lock(&w->lock);
	failed = w->failed;
	pthread_mutex_unlock(&w->lock);
	exact = failed && !ts_before(&now, &w->exact_at);
	is_short = csdfs_fs_space_short(q->vol, margin, exact);
	if (exact)
		w->exact_at = now_plus_ms(WATCH_EXACT_MS);

	pthread_mutex_lock(&w->lock);
	if (exact && !is_short)
		w->failed = false;
	else if (w->failed)
		is_short = true;
	if (is_short != w->short_) {
		csdfs_log(LOG_NOTICE, is_short ?
			  "less than %llu MiB left to write: cached writers get ENOSPC" :
			  "space to write again: cached writers resume",
			  (unsigned long long)(margin >> 20));
		w->short_ = is_short;
		for (size_t b = 0; b < WRITERS_BUCKETS; b++)
			for (struct writer *e = w->bucket[b]; e; e = e->next)
				e->stale = true;
	}
	/* The kernel no longer asks by itself, so st_blocks (du) of files
	 * being written goes stale unless we have it ask (as the usual
	 * attribute timeout would). */
	if (!ts_before(&now, &w->blocks_at)) {
		w->blocks_at = now_plus_ms(WATCH_BLOCKS_MS);
		for (size_t b = 0; b < WRITERS_BUCKETS; b++)
			for (struct writer *e = w->bucket[b]; e; e = e->next)
				if (e->opens && csdfs_fs_blocks_changed(q->vol, e->ino))
					e->stale = true;
	}
	inos = w->n ? malloc(w->n * sizeof(*inos)) : NULL;
	for (size_t b = 0; b < WRITERS_BUCKETS; b++) {
		struct writer **p = &w->bucket[b];

		while (*p) {
			struct writer *e = *p;

			if (e->stale && inos) {
				inos[n++] = e->ino;
				e->stale = false;
			}
			if (!e->opens && !e->stale) {
				*p = e->next;
				w->n--;
				free(e);
			} else {
				p = &e->next;
			}
		}
	}
	pthread_mutex_unlock(&w->lock);
	/* Attributes only (offset -1): the kernel takes no page lock. An
	 * inode it has forgotten meanwhile just fails with ENOENT. */
	for (size_t i = 0; i < n; i++)
		fuse_lowlevel_notify_inval_inode(q->se, inos[i], -1, 0);
	free(inos);
}

static void *writers_main(void *arg)
{
	struct csdfs_stores *q = arg;
	struct writers *w = &q->w;
	struct timespec last = now_plus_ms(0);

	pthread_mutex_lock(&w->lock);
	while (!w->stop) {
		struct timespec due, now = now_plus_ms(0);

		if (!w->n && !w->kicked) {
			pthread_cond_wait(&w->cv, &w->lock);
			continue;
		}
		due = last;
		due.tv_nsec += WATCH_TICK_MS * 1000000L;
		if (due.tv_nsec >= 1000000000L) {
			due.tv_sec++;
			due.tv_nsec -= 1000000000L;
		}
		if (w->kicked && ts_before(&w->pass_at, &due))
			due = w->pass_at;
		if (ts_before(&now, &due)) {
			pthread_cond_timedwait(&w->cv, &w->lock, &due);
			continue;
		}
		w->kicked = false;
		last = now;
		pthread_mutex_unlock(&w->lock);
		writers_pass(q);
		pthread_mutex_lock(&w->lock);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

static int writers_start(struct csdfs_stores *q)
{
	struct writers *w = &q->w;
	pthread_condattr_t ca;

	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	w->running = !pthread_create(&w->thread, NULL, writers_main, q);
	if (!w->running)
		csdfs_log(LOG_WARNING, "cannot start the space watch: cached writers learn of ENOSPC only at fsync or close");
	return 0;
}

static void writers_stop(struct csdfs_stores *q)
{
	struct writers *w = &q->w;

	pthread_mutex_lock(&w->lock);
	w->stop = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->lock);
	if (w->running)
		pthread_join(w->thread, NULL);
	for (size_t b = 0; b < WRITERS_BUCKETS; b++)
		while (w->bucket[b]) {
			struct writer *e = w->bucket[b];

			w->bucket[b] = e->next;
			free(e);
		}
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->lock);
}

struct csdfs_stores *csdfs_stores_start(struct fuse_session *se, const struct csdfs_fuse *f)
{
	struct csdfs_stores *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cv, NULL);
	q->se = se;
	q->vol = f->vol;
	q->f = f;
	if (pthread_create(&q->thread, NULL, store_main, q)) {
		pthread_cond_destroy(&q->cv);
		pthread_mutex_destroy(&q->lock);
		free(q);
		return NULL;
	}
	writers_start(q);
	return q;
}

void csdfs_stores_stop(struct csdfs_stores *q)
{
	struct timespec until;

	if (!q)
		return;
	writers_stop(q);
	pthread_mutex_lock(&q->lock);
	q->stop = true;
	pthread_cond_signal(&q->cv);
	pthread_mutex_unlock(&q->lock);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += STORE_STOP_WAIT_S;
	if (pthread_timedjoin_np(q->thread, NULL, &until)) {
		/* Stopped by a signal while the mount is busy: the store waits
		 * for a page whose READ no worker will serve now. Closing our
		 * /dev/fuse descriptor ends the connection, which fails that
		 * READ and frees the page; the number stays open (on
		 * /dev/null) for the session's own close later. */
		int nul = open("/dev/null", O_RDWR | O_CLOEXEC);

		csdfs_log(LOG_NOTICE, "page-cache store still waiting at exit: ending the connection");
		if (nul >= 0) {
			dup2(nul, fuse_session_fd(q->se));
			close(nul);
		}
		pthread_join(q->thread, NULL);
	}
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->lock);
	free(q);
}
