/* SPDX-License-Identifier: MIT */
/*
 * In-memory free-space allocator for container blocks. The free map in LMDB
 * is the durable truth; this is the fast view the write path allocates from:
 * a bitmap of blocks that may be handed out *now*, a byte-granular packing
 * head, and a quarantine of blocks freed since the last durable commit.
 *
 * Packing: chunks are placed back to back from the head, so chunks written
 * together (or close in time) share 4 KiB blocks and only a run's end is
 * padded. The head reserves a run of whole free blocks; what it leaves
 * behind unused is returned when it moves to the next run.
 *
 * Deferred reuse: a block freed by an operation is quarantined and becomes
 * allocatable only after the group commit that freed it is durable, and
 * only if no in-flight placement or the head's reserved run overlaps it.
 *
 * Locking: every function must be called with csdfs_vol.lock held.
 */
#ifndef CSDFS_ALLOC_H
#define CSDFS_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CSDFS_ALLOC_INFLIGHT_MAX 256
#define CSDFS_ALLOC_RUN_BLOCKS   1024u  /* head reserves up to 4 MiB */

struct csdfs_range {
	uint64_t start;
	uint64_t count;
};

struct csdfs_alloc {
	uint64_t first;          /* first data block */
	uint64_t total;          /* blocks in the container */
	uint64_t *bits;          /* 1 = allocatable now */
	uint64_t navail;         /* set bits */
	uint64_t minrun;         /* blocks of the smallest run statfs counts */
	uint64_t nshort;         /* set bits in runs shorter than minrun */
	uint64_t ngroups;        /* raw-chunk groups (blocks [g * minrun,
				  * (g + 1) * minrun)) wholly allocatable */
	uint64_t hint;           /* next-fit search start */
	uint64_t nofit;          /* no free run this long exists (a walk found
				  * none, no block freed since joined one);
				  * 0 = unknown */
	uint64_t reserve;        /* blocks only reserve-allowed placements use */
	uint64_t head;           /* byte offset of the next placement */
	uint64_t head_end;       /* byte end of the reserved run */
	struct csdfs_range *quar;
	size_t nquar, capquar;
	/* quar[0, nsorted) is sorted and merged; what was appended since is
	 * not. quar_usable caches the blocks in that prefix's runs of at
	 * least quar_minrun, so statfs and open need not walk it again. */
	size_t nsorted;
	uint64_t quar_usable, quar_minrun;
	struct csdfs_range inflight[CSDFS_ALLOC_INFLIGHT_MAX]; /* bytes; count 0 = unused */
	/* Called when the head leaves @block partly filled (the rest of it
	 * stays padding, dead bytes compaction may win back); may be NULL. */
	void (*on_leave)(void *ctx, uint64_t block);
	/* Called when the head takes the run [start, start + count), before
	 * anything is placed in it: its blocks hold nothing live; may be
	 * NULL. */
	void (*on_enter)(void *ctx, uint64_t start, uint64_t count);
	void *hook_ctx;            /* @ctx of both */
};

/* @return 0 or -ENOMEM. All blocks start unavailable. */
int csdfs_alloc_init(struct csdfs_alloc *a, uint64_t first, uint64_t total);
void csdfs_alloc_release(struct csdfs_alloc *a);

/* Make [start, start + count) allocatable (mount: from the free map). */
void csdfs_alloc_mark_free(struct csdfs_alloc *a, uint64_t start,
			   uint64_t count);

/*
 * csdfs_alloc_place - reserve @len bytes (1..CSDFS_CHUNK_MAX + slack) right
 * after the previous placement, moving the head to a new run of free blocks
 * when the current one is too short.
 * A new run may not dip into the reserve unless @use_reserve.
 * @return 0 with *@pa set, or -ENOSPC when no run of ceil(len/4K) free
 * blocks is available.
 */
int csdfs_alloc_place(struct csdfs_alloc *a, uint64_t len, bool use_reserve,
		      uint64_t *pa);

/* Move the head to the next block boundary (the rest of the current block
 * stays padding): chunks that fill whole blocks are then not split over
 * one extra block, and free whole blocks when they die. */
void csdfs_alloc_align(struct csdfs_alloc *a);

/*
 * csdfs_alloc_unplace - give back a placement that will never be mapped:
 * the latest one rewinds the head; an older one quarantines the blocks it
 * covers entirely (reuse re-checks them against the durable free map).
 */
void csdfs_alloc_unplace(struct csdfs_alloc *a, uint64_t pa, uint64_t len);

/* Register bytes [start, end) written by an unfinished operation.
 * @return a slot for csdfs_alloc_inflight_del, or -EAGAIN if all are used. */
int csdfs_alloc_inflight_add(struct csdfs_alloc *a, uint64_t start,
			     uint64_t end);
void csdfs_alloc_inflight_del(struct csdfs_alloc *a, int slot);

/* Quarantine blocks freed by a committed operation. @return 0, -ENOMEM. */
int csdfs_alloc_quarantine(struct csdfs_alloc *a, uint64_t start,
			   uint64_t count);

/*
 * csdfs_alloc_take_quarantine - hand the quarantine list to the caller
 * (after a durable commit); the caller frees *@out with free(). The caller
 * then passes the parts still free in the durable map to
 * csdfs_alloc_reuse.
 */
size_t csdfs_alloc_take_quarantine(struct csdfs_alloc *a,
				   struct csdfs_range **out);

/*
 * csdfs_alloc_reuse - make durably free blocks allocatable again, except
 * those the head's run or an in-flight placement overlaps: those go back to
 * the quarantine for the next commit. @before (may be NULL) is called for
 * each run about to become allocatable (to punch it out of the container);
 * its failure is reported but the blocks are reused anyway.
 * @return 0, -ENOMEM.
 */
int csdfs_alloc_reuse(struct csdfs_alloc *a, uint64_t start, uint64_t count,
		      int (*before)(void *ctx, uint64_t start, uint64_t count),
		      void *ctx);

/* Count runs of fewer than @minrun blocks as fragments, and keep the
 * count of raw-chunk groups, from now on (@minrun: the blocks of a whole
 * raw chunk). O(volume) once, at mount. */
void csdfs_alloc_set_minrun(struct csdfs_alloc *a, uint64_t minrun);

/*
 * csdfs_alloc_usable - blocks a data write can surely still use, however
 * incompressible: the rest of the head's run in multiples of minrun (the
 * head places from where it stands), and, of the allocatable and the
 * quarantined blocks (usable after the next commit), those in raw-chunk
 * groups: minrun-aligned groups of minrun blocks wholly free. A free run
 * of L blocks holds floor(L / minrun) raw chunks and at least that many
 * groups less one, never more: the count may fall short of a run's
 * capacity by up to minrun - 1 blocks (at most one chunk per run) but
 * never promises a block a raw chunk cannot use, as counting each run's
 * L mod minrun tail would (an 11-block run holds 8 blocks of raw chunks).
 * Groups are a local property of minrun bits, so every change keeps the
 * count in the cost of the blocks it changes, and this costs the same on
 * any volume size (the quarantine's merge aside, bounded by a commit
 * group). Merges the quarantine first.
 */
uint64_t csdfs_alloc_usable(struct csdfs_alloc *a);
/* The same by a walk of the whole bitmap, for any @minrun: the reference
 * the unit tests hold csdfs_alloc_usable to. */
uint64_t csdfs_alloc_usable_scan(struct csdfs_alloc *a, uint64_t minrun);

/* Sort the quarantine and merge adjacent ranges: sorts only what was
 * appended since the last merge and merges it into the sorted prefix, so
 * a merge with nothing new costs nothing. */
void csdfs_alloc_quarantine_merge(struct csdfs_alloc *a);

#endif
