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

struct csdfs_stores *csdfs_stores_start(struct fuse_session *se, struct csdfs_vol *vol)
{
	struct csdfs_stores *q = calloc(1, sizeof(*q));

	if (!q)
		return NULL;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cv, NULL);
	q->se = se;
	q->vol = vol;
	if (pthread_create(&q->thread, NULL, store_main, q)) {
		pthread_cond_destroy(&q->cv);
		pthread_mutex_destroy(&q->lock);
		free(q);
		return NULL;
	}
	return q;
}

void csdfs_stores_stop(struct csdfs_stores *q)
{
	struct timespec until;

	if (!q)
		return;
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
