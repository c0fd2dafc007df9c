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
 */
#ifndef CSDFS_BUFPOOL_H
#define CSDFS_BUFPOOL_H

#include <stddef.h>

/* A 1 MiB run or plan, with room to round it out to whole host blocks or
 * for the codec's bound. */
#define CSDFS_BUFPOOL_SIZE ((size_t)(1u << 20) + 32768u)
#define CSDFS_BUFPOOL_IDLE_MAX 8u
/* Smaller requests (a database page's read or write) stay with malloc's
 * heap, where they cost no mmap anyway: a pool buffer each would only
 * make a miss, when more than IDLE_MAX requests are in flight, cost a
 * megabyte's mapping. */
#define CSDFS_BUFPOOL_MIN ((size_t)64 << 10)

/*
 * csdfs_bufpool_get - @size bytes: an idle pool buffer when @size is from
 * CSDFS_BUFPOOL_MIN to CSDFS_BUFPOOL_SIZE (a new one if none is idle),
 * else an allocation of exactly @size. From CSDFS_BUFPOOL_MIN bytes on the
 * buffer is 4096-aligned (a direct read's target); below, it is malloc's.
 * @return NULL when memory is short.
 */
void *csdfs_bufpool_get(size_t size);

/* csdfs_bufpool_put - give back @buf, got for @size (the same @size): kept
 * idle while fewer than CSDFS_BUFPOOL_IDLE_MAX are, else freed. NULL is
 * ignored. */
void csdfs_bufpool_put(void *buf, size_t size);

/* Idle buffers kept now (tests, diagnostics). */
unsigned csdfs_bufpool_idle(void);

#endif
