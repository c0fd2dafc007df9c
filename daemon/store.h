/* SPDX-License-Identifier: MIT */
/* Handing decoded pages to the kernel's page cache (store.c). */
#ifndef CSDFS_DAEMON_STORE_H
#define CSDFS_DAEMON_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ops.h"

struct csdfs_stores;

/* What csdfs_store_queue() needs to know about one read. */
struct csdfs_store_ctx {
	struct csdfs_stores *q;
	fuse_ino_t ino;
};

/* Start the thread that stores pages for @se's files of @f's volume, and
 * the one that watches its space for cached writers; NULL if they cannot
 * start (then nothing is stored: reads still work; cached writers learn
 * of ENOSPC at fsync or close only). */
struct csdfs_stores *csdfs_stores_start(struct fuse_session *se, const struct csdfs_fuse *f);

/* A csdfs_around_fn (@arg: a struct csdfs_store_ctx): queue a copy of the
 * pages for the thread; non-zero when the queue is full or stopping. */
int csdfs_store_queue(void *arg, uint64_t gen, uint64_t off, const char *buf, size_t n);

/*
 * Writers through the kernel's writeback cache (handles opened for writing
 * that are not direct I/O). While the volume is short of space (libcsdfs:
 * csdfs_fs_space_short on the mount's dirty budget), their inodes'
 * attributes are kept invalid in the kernel, so that each cached write(2)
 * first asks for them with its handle, and that GETATTR is refused with
 * ENOSPC (csdfs_writers_attr); stat() asks without a handle and is
 * answered. When space comes back they are invalidated once more and
 * writes go on.
 */
void csdfs_writers_open(struct csdfs_stores *q, fuse_ino_t ino);
void csdfs_writers_close(struct csdfs_stores *q, fuse_ino_t ino);
/* What an attribute reply is to the kernel. */
enum csdfs_attr_reply {
	CSDFS_REPLY_APPLIED,    /* cached whatever happens meanwhile (setattr, create) */
	CSDFS_REPLY_VERSIONED,  /* not cached if the inode is invalidated first
				 * (GETATTR without a handle, LOOKUP) */
	CSDFS_REPLY_WRITER,     /* a GETATTR with a cached writer's handle */
};
/* An attribute reply for @ino is about to go out. @return 0 with *@timeout
 * (in: the usual one) set to the attribute timeout to give; 1: the same,
 * but invalidate @ino's attributes before replying; -ENOSPC: refuse it. */
int csdfs_writers_attr(struct csdfs_stores *q, fuse_ino_t ino,
		       enum csdfs_attr_reply kind, double *timeout);
/* A WRITE failed with ENOSPC: re-check at once, exactly. */
void csdfs_writers_enospc(struct csdfs_stores *q);

/* Stop and join the threads, before the session is unmounted. */
void csdfs_stores_stop(struct csdfs_stores *q);

#endif
