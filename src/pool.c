/* SPDX-License-Identifier: MIT */
/*
 * Worker pool (pool.h). Loops are queued as jobs; a worker takes the next
 * index of the oldest job that still has some, the caller takes indices of
 * its own job, and the caller waits for the calls workers are still in.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "csdfs/pool.h"

struct job {
	int (*fn)(void *ctx, size_t i);
	void *ctx;
	size_t n, next, done;
	int rc;
	struct job *qnext;
};

struct csdfs_pool {
	pthread_mutex_t lock;
	pthread_cond_t work;       /* workers: a job was queued */
	pthread_cond_t finished;   /* callers: a call of some job ended */
	struct job *queue;
	bool stop;
	unsigned nthreads;
	pthread_t *threads;
};

/* Take the next index of @j, or return false when none is left. */
static bool take(struct job *j, size_t *i)
{
	if (j->next >= j->n)
		return false;
	*i = j->next++;
	return true;
}

static void unqueue(struct csdfs_pool *p, struct job *j)
{
	struct job **pp = &p->queue;

	while (*pp && *pp != j)
		pp = &(*pp)->qnext;
	if (*pp)
		*pp = j->qnext;
}

static void run_one(struct csdfs_pool *p, struct job *j, size_t i)
{
	int rc;

	pthread_mutex_unlock(&p->lock);
	rc = j->fn(j->ctx, i);
	pthread_mutex_lock(&p->lock);
	if (rc && !j->rc)
		j->rc = rc;
	j->done++;
}

static void *worker(void *arg)
{
	struct csdfs_pool *p = arg;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct job *j = p->queue;
		size_t i;

		if (!j) {
			pthread_cond_wait(&p->work, &p->lock);
			continue;
		}
		if (!take(j, &i)) {
			unqueue(p, j);
			continue;
		}
		run_one(p, j, i);
		if (j->done == j->n)
			pthread_cond_broadcast(&p->finished);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

struct csdfs_pool *csdfs_pool_new(unsigned threads)
{
	struct csdfs_pool *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->finished, NULL);
	p->threads = calloc(threads ? threads : 1, sizeof(*p->threads));
	if (!p->threads) {
		free(p);
		return NULL;
	}
	for (unsigned t = 0; t < threads; t++) {
		if (pthread_create(&p->threads[t], NULL, worker, p))
			break;
		p->nthreads++;
	}
	return p;
}

void csdfs_pool_free(struct csdfs_pool *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	for (unsigned t = 0; t < p->nthreads; t++)
		pthread_join(p->threads[t], NULL);
	pthread_cond_destroy(&p->work);
	pthread_cond_destroy(&p->finished);
	pthread_mutex_destroy(&p->lock);
	free(p->threads);
	free(p);
}

int csdfs_pool_run(struct csdfs_pool *p, size_t n,
		   int (*fn)(void *ctx, size_t i), void *ctx)
{
	struct job j = { .fn = fn, .ctx = ctx, .n = n };
	size_t i;

	if (!p || !p->nthreads || n < 2) {
		int rc = 0;

		for (i = 0; i < n; i++) {
			int r = fn(ctx, i);

			rc = rc ? rc : r;
		}
		return rc;
	}
	pthread_mutex_lock(&p->lock);
	j.qnext = p->queue;
	p->queue = &j;
	pthread_cond_broadcast(&p->work);
	while (take(&j, &i))
		run_one(p, &j, i);
	unqueue(p, &j);
	while (j.done < j.n)
		pthread_cond_wait(&p->finished, &p->lock);
	pthread_mutex_unlock(&p->lock);
	return j.rc;
}
