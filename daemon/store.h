/* SPDX-License-Identifier: MIT */
/* Handing decoded pages to the kernel's page cache (store.c). */
#ifndef CSDFS_DAEMON_STORE_H
#define CSDFS_DAEMON_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "ops.h"

struct csdfs_stores;

/* What csdfs_store_queue() needs to know about one read. */
struct csdfs_store_ctx {
	struct csdfs_stores *q;
	fuse_ino_t ino;
};

/* Start the thread that stores pages for @se's files of @vol; NULL if it
 * cannot start (then nothing is stored: reads still work). */
struct csdfs_stores *csdfs_stores_start(struct fuse_session *se, struct csdfs_vol *vol);

/* A csdfs_around_fn (@arg: a struct csdfs_store_ctx): queue a copy of the
 * pages for the thread; non-zero when the queue is full or stopping. */
int csdfs_store_queue(void *arg, uint64_t gen, uint64_t off, const char *buf, size_t n);

/* Stop and join the thread, before the session is unmounted. */
void csdfs_stores_stop(struct csdfs_stores *q);

#endif
