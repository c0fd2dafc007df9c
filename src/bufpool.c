/* SPDX-License-Identifier: MIT */
/*
 * The buffer pool (bufpool.h). Large buffers: one LIFO list of idle
 * buffers shared by all threads, linked through their own first bytes, so
 * keeping one costs no allocation and the buffer given out next is the one
 * most likely still in a CPU cache. Small buffers: the same, one list per
 * thread, so taking one needs no lock at all.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "csdfs/bufpool.h"

struct idle {
	struct idle *next;
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct idle *idle_list;
static unsigned idle_count;

/* The small tier: each thread keeps up to SMALL_KEEP idle buffers of
 * CSDFS_BUFPOOL_MIN bytes; a thread's list is freed when it exits. */
#define SMALL_KEEP 4u

struct small_list {
	struct idle *head;
	unsigned n;
};

static __thread struct small_list small;
static __thread bool small_registered;
static pthread_key_t small_key;
static pthread_once_t small_once = PTHREAD_ONCE_INIT;
static bool small_keyed;

static void small_drop(void *arg)
{
	struct small_list *l = arg;

	while (l->head) {
		struct idle *b = l->head;

		l->head = b->next;
		free(b);
	}
	l->n = 0;
	small_registered = false;
}

static void small_key_init(void)
{
	small_keyed = !pthread_key_create(&small_key, small_drop);
}

static void *small_get(void)
{
	struct idle *b = small.head;

	if (!b)
		return malloc(CSDFS_BUFPOOL_MIN);
	small.head = b->next;
	small.n--;
	return b;
}

/* A thread's first kept buffer registers its list to be freed when the
 * thread exits; without that, it keeps nothing. */
static bool small_register(void)
{
	if (small_registered)
		return true;
	if (pthread_once(&small_once, small_key_init) || !small_keyed ||
	    pthread_setspecific(small_key, &small))
		return false;
	small_registered = true;
	return true;
}

static void small_put(void *buf)
{
	struct idle *b = buf;

	if (small.n >= SMALL_KEEP || !small_register()) {
		free(b);
		return;
	}
	b->next = small.head;
	small.head = b;
	small.n++;
}

unsigned csdfs_bufpool_small_idle(void)
{
	return small.n;
}

static void *aligned(size_t size)
{
	void *p;

	return posix_memalign(&p, 4096, size ? size : 1) ? NULL : p;
}

void *csdfs_bufpool_get(size_t size)
{
	struct idle *b;

	if (size < CSDFS_BUFPOOL_MIN)
		return small_get();
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
	if (size < CSDFS_BUFPOOL_MIN) {
		small_put(buf);
		return;
	}
	if (size <= CSDFS_BUFPOOL_SIZE) {
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
