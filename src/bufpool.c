/* SPDX-License-Identifier: MIT */
/*
 * The large-buffer pool (bufpool.h): a LIFO list of idle buffers, linked
 * through their own first bytes, so keeping one costs no allocation and the
 * buffer given out next is the one most likely still in a CPU cache.
 */
#include <pthread.h>
#include <stdlib.h>

#include "csdfs/bufpool.h"

struct idle {
	struct idle *next;
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct idle *idle_list;
static unsigned idle_count;

static void *aligned(size_t size)
{
	void *p;

	return posix_memalign(&p, 4096, size ? size : 1) ? NULL : p;
}

void *csdfs_bufpool_get(size_t size)
{
	struct idle *b;

	if (size < CSDFS_BUFPOOL_MIN)
		return malloc(size ? size : 1);
	if (size > CSDFS_BUFPOOL_SIZE)
		return aligned(size);
	pthread_mutex_lock(&pool_lock);
	b = idle_list;
	if (b) {
		idle_list = b->next;
		idle_count--;
	}
	pthread_mutex_unlock(&pool_lock);
	return b ? (void *)b : aligned(CSDFS_BUFPOOL_SIZE);
}

void csdfs_bufpool_put(void *buf, size_t size)
{
	struct idle *b = buf;

	if (!buf)
		return;
	if (size >= CSDFS_BUFPOOL_MIN && size <= CSDFS_BUFPOOL_SIZE) {
		pthread_mutex_lock(&pool_lock);
		if (idle_count < CSDFS_BUFPOOL_IDLE_MAX) {
			b->next = idle_list;
			idle_list = b;
			idle_count++;
			b = NULL;
		}
		pthread_mutex_unlock(&pool_lock);
	}
	free(b);
}

unsigned csdfs_bufpool_idle(void)
{
	unsigned n;

	pthread_mutex_lock(&pool_lock);
	n = idle_count;
	pthread_mutex_unlock(&pool_lock);
	return n;
}
