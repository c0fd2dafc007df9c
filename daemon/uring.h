/* SPDX-License-Identifier: MIT */
/* FUSE requests over io_uring (uring.c): per-CPU queues of threads
 * that take requests from and answer through io_uring commands on
 * /dev/fuse instead of read(2)/writev(2), kernel >= 6.14 with the fuse
 * module's enable_uring parameter set. */
#ifndef CSDFS_DAEMON_URING_H
#define CSDFS_DAEMON_URING_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "ops.h"

struct csdfs_uring;

/* Before the session's loop: create the threads, each with its own
 * io_uring, idle until csdfs_uring_go(): a queue for every possible CPU,
 * @threads shared out over the queues of the CPUs we may run on (at least
 * 4 each), one thread for any other CPU's queue. NULL, with the reason in
 * @why, when this kernel or process cannot (then the mount must not offer
 * FUSE_OVER_IO_URING at INIT). */
struct csdfs_uring *csdfs_uring_prepare(struct fuse_session *se, unsigned threads,
					char *why, size_t whylen);

/* Once the kernel has applied an INIT reply that accepted io_uring: every
 * thread registers a buffer of @payload bytes (at least the connection's
 * largest request or reply body) and starts serving. */
void csdfs_uring_go(struct csdfs_uring *u, size_t payload);

/* Called with every reply the session sends: when the calling thread is a
 * ring thread answering its current request, the reply is kept for the
 * commit instead of being written to /dev/fuse, *@n is set to its length
 * and the result is true. */
bool csdfs_uring_take_reply(const struct iovec *iov, int count, ssize_t *n);

/* Room to build a reply body in place: when the calling thread is a ring
 * thread with an unanswered request and @size bytes fit, its registered
 * payload buffer (page-aligned); a reply whose body starts there is then
 * committed without a copy. NULL otherwise (build the reply elsewhere).
 * Valid until the thread answers. */
char *csdfs_uring_reply_room(size_t size);

/* How many requests came over the rings so far. */
unsigned long csdfs_uring_served(const struct csdfs_uring *u);

/* Stop and join the threads (waits at most ~2 s for a thread busy in a
 * request) and free everything. NULL is ignored. */
void csdfs_uring_stop(struct csdfs_uring *u);

#endif
