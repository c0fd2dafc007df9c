/* SPDX-License-Identifier: MIT */
/*
 * A tearing I/O backend, for the crash suites' counter-checks only (mount
 * option test_torn): it behaves like a device that acknowledges a write
 * before all of it has landed and does not wait for the rest at a flush.
 * Of a pwrite longer than one 4 KiB piece it writes the first piece at
 * once and queues the rest; sync does not wait for the queue. A worker
 * thread writes the queue out a piece at a time with a pause between
 * pieces, but only the tails of writes HOLD_SYNCS syncs old: the first
 * sync after a write is the one its mapping's commit (a journal segment or
 * LMDB's) follows, so for several fsyncs after it a commit maps a chunk
 * whose tail has not landed, however fast or slow the host runs (a time
 * bound let a slow sanitizer build land every tail first). A kill -9 loses the
 * tail: the page is torn on disk, which the checkers must notice (csdfs
 * reports it as a checksum mismatch). Past QUEUED_MAX the worker drains
 * regardless, so a writer that never syncs cannot grow the queue without
 * bound. Everything else is honest: a read, write or punch that
 * overlaps queued bytes first lands those writes whole, so the running
 * volume never sees the tear, and close drains it.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "csdfs/io.h"

#define PIECE 4096u
#define PAUSE_US 2000
/* Writers wait (a bounded while) once this much is queued. */
#define QUEUED_MAX (8u << 20)
/* A tail lands once this many syncs followed its write (see above). */
#define HOLD_SYNCS 8

struct torn_write {
	struct torn_write *next;
	uint64_t off;
	uint64_t gen;              /* syncs before this write */
	size_t len, done;          /* bytes of buf[] written so far */
	char buf[];
};

struct torn_state {
	struct csdfs_io inner;
	pthread_mutex_t lock;
	pthread_cond_t cv;         /* queue changed */
	struct torn_write *head, *tail;  /* lock */
	size_t queued;             /* lock: bytes not yet written */
	uint64_t syncs;            /* lock: syncs so far */
	bool stopping;             /* lock */
	int err;                   /* lock: first failed queued write */
	pthread_t worker;
};

static struct torn_state *state_of(struct csdfs_io *io)
{
	return io->priv;
}

/* Write @n more bytes of @w, which *@link points to and which follows
 * @prev (NULL: the head); once all of it has landed, drop it (s->lock
 * held). */
static void write_part_locked(struct torn_state *s, struct torn_write **link,
			      struct torn_write *prev, size_t n)
{
	struct torn_write *w = *link;
	int rc = csdfs_io_pwrite(&s->inner, w->buf + w->done, n, w->off + w->done);

	if (rc && !s->err)
		s->err = rc;
	w->done += n;
	s->queued -= n;
	if (w->done == w->len) {
		*link = w->next;
		if (s->tail == w)
			s->tail = prev;
		free(w);
	}
	pthread_cond_broadcast(&s->cv);
}

static void drain_locked(struct torn_state *s)
{
	while (s->head)
		write_part_locked(s, &s->head, NULL, s->head->len - s->head->done);
}

/* Make [off, off + len) honest before it is read, rewritten or punched:
 * the queued writes it overlaps land whole, the others stay torn (a read
 * of one chunk must not settle every chunk in flight). */
static int settle(struct torn_state *s, uint64_t off, size_t len)
{
	struct torn_write **link = &s->head, *prev = NULL;
	int rc;

	pthread_mutex_lock(&s->lock);
	while (*link) {
		struct torn_write *w = *link;

		if (off < w->off + w->len && w->off < off + len) {
			write_part_locked(s, link, prev, w->len - w->done);
		} else {
			prev = w;
			link = &w->next;
		}
	}
	rc = s->err;
	pthread_mutex_unlock(&s->lock);
	return rc;
}

/* The worker may write the head's next piece (s->lock held). */
static bool due_locked(const struct torn_state *s)
{
	return s->head && (s->syncs >= s->head->gen + HOLD_SYNCS || s->queued > QUEUED_MAX);
}

static void *torn_worker(void *arg)
{
	struct torn_state *s = arg;

	pthread_mutex_lock(&s->lock);
	while (!s->stopping) {
		if (!due_locked(s)) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += 1;
			pthread_cond_timedwait(&s->cv, &s->lock, &ts);
			continue;
		}
		write_part_locked(s, &s->head, NULL,
				  s->head->len - s->head->done < PIECE ?
					  s->head->len - s->head->done : PIECE);
		pthread_mutex_unlock(&s->lock);
		usleep(PAUSE_US);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static int torn_pread(struct csdfs_io *io, void *buf, size_t len, uint64_t off)
{
	struct torn_state *s = state_of(io);
	int rc = settle(s, off, len);

	return rc ? rc : csdfs_io_pread(&s->inner, buf, len, off);
}

static int torn_pread_direct(struct csdfs_io *io, void *buf, size_t len,
			     uint64_t off)
{
	struct torn_state *s = state_of(io);
	int rc = settle(s, off, len);

	return rc ? rc : csdfs_io_pread_direct(&s->inner, buf, len, off);
}

static int torn_pwrite(struct csdfs_io *io, const void *buf, size_t len,
		       uint64_t off)
{
	struct torn_state *s = state_of(io);
	struct torn_write *w;
	int rc = settle(s, off, len);

	if (rc || len <= PIECE)
		return rc ? rc : csdfs_io_pwrite(&s->inner, buf, len, off);
	rc = csdfs_io_pwrite(&s->inner, buf, PIECE, off);
	if (rc)
		return rc;
	w = malloc(sizeof(*w) + len - PIECE);
	if (!w)
		return csdfs_io_pwrite(&s->inner, (const char *)buf + PIECE,
				       len - PIECE, off + PIECE);
	w->next = NULL;
	w->off = off + PIECE;
	w->len = len - PIECE;
	w->done = 0;
	memcpy(w->buf, (const char *)buf + PIECE, w->len);
	pthread_mutex_lock(&s->lock);
	w->gen = s->syncs;
	/* A bounded wait for room; past it the queue just grows. */
	for (int i = 0; i < 100 && s->queued > QUEUED_MAX; i++) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&s->cv, &s->lock, &ts);
	}
	if (s->tail)
		s->tail->next = w;
	else
		s->head = w;
	s->tail = w;
	s->queued += w->len;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* The lie: the queue is not waited for. */
static int torn_sync(struct csdfs_io *io)
{
	struct torn_state *s = state_of(io);
	int rc = csdfs_io_sync(&s->inner);

	pthread_mutex_lock(&s->lock);
	s->syncs++;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->lock);
	return rc;
}

static int torn_punch(struct csdfs_io *io, uint64_t off, uint64_t len)
{
	struct torn_state *s = state_of(io);
	int rc = settle(s, off, len);

	return rc ? rc : csdfs_io_punch(&s->inner, off, len);
}

static int torn_zero(struct csdfs_io *io, uint64_t off, uint64_t len)
{
	struct torn_state *s = state_of(io);
	int rc = settle(s, off, len);

	return rc ? rc : csdfs_io_zero(&s->inner, off, len);
}

static void torn_close(struct csdfs_io *io)
{
	struct torn_state *s = state_of(io);

	pthread_mutex_lock(&s->lock);
	s->stopping = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->worker, NULL);
	drain_locked(s);
	csdfs_io_close(&s->inner);
	pthread_cond_destroy(&s->cv);
	pthread_mutex_destroy(&s->lock);
	free(s);
	io->ops = NULL;
	io->priv = NULL;
	io->fd = io->dfd = -1;
}

static const struct csdfs_io_ops torn_ops = {
	.pread = torn_pread,
	.pread_direct = torn_pread_direct,
	.pwrite = torn_pwrite,
	.sync = torn_sync,
	.punch = torn_punch,
	.zero = torn_zero,
	.close = torn_close,
};

int csdfs_io_torn_install(struct csdfs_io *io)
{
	struct torn_state *s = calloc(1, sizeof(*s));
	int rc;

	if (!s)
		return -ENOMEM;
	s->inner = *io;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cv, NULL);
	rc = -pthread_create(&s->worker, NULL, torn_worker, s);
	if (rc) {
		pthread_cond_destroy(&s->cv);
		pthread_mutex_destroy(&s->lock);
		free(s);
		return rc;
	}
	io->ops = &torn_ops;
	io->priv = s;
	return 0;
}
