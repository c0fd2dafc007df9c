/* SPDX-License-Identifier: MIT */
/*
 * A pool of large buffers kept from one request to the next, for the hot
 * paths that need up to a megabyte for the length of one request: a
 * streaming read's scratch (a run of stored chunks), a 1 MiB write's
 * compressed chunks, and the daemon's reply to a read.
 *
 * glibc serves blocks that large with mmap and returns them with munmap;
 * an munmap shoots down the TLB of every CPU the process ran on (an
 * interrupt to each, costly in a VM), and the next request faults the
 * pages in and zeroes them again. On a cold 1 GiB sequential read of
 * incompressible data that was up to a third of the daemon's CPU.
 *
 * All pool buffers are CSDFS_BUFPOOL_SIZE bytes, 4096-aligned, and
 * interchangeable: any thread may give back what another took. At most
 * CSDFS_BUFPOOL_IDLE_MAX idle ones are kept (resident only as far as they
 * were ever touched); more in use at once are allocated and freed as
 * before.
 *
 * Smaller requests (a partial chunk's read-modify-write, a database page's
 * compressed bytes) take a CSDFS_BUFPOOL_MIN buffer from a list the calling
 * thread keeps (at most four idle), with no lock: from malloc's heap, a
 * 4 KiB random write's three such buffers and their frees were about 4 %
 * of the daemon's CPU, and malloc's arena locks 7 % of its futex calls.
 * A thread's idle buffers are freed when it exits.
 */
#ifndef CSDFS_BUFPOOL_H
#define CSDFS_BUFPOOL_H

#include <stddef.h>

/* A 1 MiB run or plan, with room to round it out to whole host blocks or
 * for the codec's bound. */
#define CSDFS_BUFPOOL_SIZE ((size_t)(1u << 20) + 32768u)
#define CSDFS_BUFPOOL_IDLE_MAX 8u
/* Smaller requests never take a shared 1 MiB buffer: a miss, when more
 * than IDLE_MAX requests are in flight, would cost a megabyte's mapping.
 * They take a buffer of this size from their thread's list instead. */
#define CSDFS_BUFPOOL_MIN ((size_t)64 << 10)

/*
 * csdfs_bufpool_get - @size bytes: an idle pool buffer when @size is from
 * CSDFS_BUFPOOL_MIN to CSDFS_BUFPOOL_SIZE (a new one if none is idle), one
 * of this thread's idle small buffers (CSDFS_BUFPOOL_MIN bytes) below, an
 * allocation of exactly @size above. From CSDFS_BUFPOOL_MIN bytes on the
 * buffer is 4096-aligned (a direct read's target); below, it is malloc's.
 * @return NULL when memory is short.
 */
void *csdfs_bufpool_get(size_t size);

/* csdfs_bufpool_put - give back @buf, got for @size (the same @size): kept
 * idle while fewer than CSDFS_BUFPOOL_IDLE_MAX are, else freed. NULL is
 * ignored. */
void csdfs_bufpool_put(void *buf, size_t size);

/* Idle buffers kept now (tests, diagnostics): shared large ones, and the
 * calling thread's small ones. */
unsigned csdfs_bufpool_idle(void);
unsigned csdfs_bufpool_small_idle(void);

#endif
