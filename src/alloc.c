/* SPDX-License-Identifier: MIT */
/*
 * Bitmap allocator with a packing head and a quarantine (see alloc.h for
 * the invariants). The bitmap costs one bit per 4 KiB block: 32 KiB per GiB
 * of container, the only per-volume-size memory the daemon keeps.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "csdfs/alloc.h"
#include "csdfs/format.h"

#define BS CSDFS_BLOCK_SIZE

static inline int bit_get(const uint64_t *bits, uint64_t b)
{
	return (int)((bits[b >> 6] >> (b & 63)) & 1);
}

static void set_range(struct csdfs_alloc *a, uint64_t start, uint64_t count,
		      int on);

int csdfs_alloc_init(struct csdfs_alloc *a, uint64_t first, uint64_t total)
{
	memset(a, 0, sizeof(*a));
	a->first = first;
	a->total = total;
	a->hint = first;
	a->minrun = 1;
	a->bits = calloc((total + 63) / 64, sizeof(uint64_t));
	return a->bits ? 0 : -ENOMEM;
}

void csdfs_alloc_release(struct csdfs_alloc *a)
{
	free(a->bits);
	free(a->quar);
	a->bits = NULL;
	a->quar = NULL;
	a->nquar = a->capquar = a->nsorted = 0;
}

void csdfs_alloc_mark_free(struct csdfs_alloc *a, uint64_t start,
			   uint64_t count)
{
	if (start < a->first || start + count > a->total)
		return;
	set_range(a, start, count, 1);
}

/* Next block >= @b that is available, or a->total. Word-at-a-time scan. */
static uint64_t next_avail(const struct csdfs_alloc *a, uint64_t b)
{
	while (b < a->total) {
		uint64_t w = a->bits[b >> 6] >> (b & 63);

		if (w)
			return b + (uint64_t)__builtin_ctzll(w) < a->total ?
			       b + (uint64_t)__builtin_ctzll(w) : a->total;
		b = (b | 63) + 1;
	}
	return a->total;
}

/* Length of the available run starting at @b, capped at @max. */
static uint64_t run_len(const struct csdfs_alloc *a, uint64_t b, uint64_t max)
{
	uint64_t n = 0;

	while (n < max && b + n < a->total && bit_get(a->bits, b + n))
		n++;
	return n;
}

/*
 * Blocks in available runs shorter than a->minrun that touch [lo, hi): the
 * fragments statfs must not promise. Only runs shorter than minrun count,
 * so no run is measured further than minrun blocks beyond the window: the
 * cost is that of the window, never of the volume.
 */
static uint64_t short_near(const struct csdfs_alloc *a, uint64_t lo, uint64_t hi)
{
	uint64_t total = 0, b = lo < a->first ? a->first : lo;

	if (a->minrun <= 1)
		return 0;
	hi = hi > a->total ? a->total : hi;
	while (b < hi) {
		uint64_t s, len;

		b = next_avail(a, b);
		if (b >= hi)
			break;
		s = b;
		while (s > a->first && b - s < a->minrun && bit_get(a->bits, s - 1))
			s--;
		len = run_len(a, s, a->minrun);
		if (len < a->minrun)
			total += len;
		b += run_len(a, b, hi - b);
	}
	return total;
}

/* Is every block of raw-chunk group @g (blocks [g * minrun, (g + 1) *
 * minrun)) allocatable? */
static bool group_full(const struct csdfs_alloc *a, uint64_t g)
{
	uint64_t b = g * a->minrun;

	if (b + a->minrun > a->total)
		return false;
	if (64 % a->minrun == 0) {   /* the group lies inside one word */
		uint64_t mask = a->minrun == 64 ? ~0ull :
				((1ull << a->minrun) - 1) << (b & 63);

		return (a->bits[b >> 6] & mask) == mask;
	}
	return run_len(a, b, a->minrun) == a->minrun;
}

/* Full raw-chunk groups among those touching blocks [start, end). */
static uint64_t full_groups(const struct csdfs_alloc *a, uint64_t start,
			    uint64_t end)
{
	uint64_t n = 0;

	if (a->minrun <= 1)
		return 0;
	for (uint64_t g = start / a->minrun; g * a->minrun < end; g++)
		n += group_full(a, g);
	return n;
}

/* Raw-chunk groups that lie wholly inside blocks [start, start + count)
 * (with @minrun 1: each block). */
static uint64_t groups_inside(uint64_t start, uint64_t count, uint64_t minrun)
{
	uint64_t first = (start + minrun - 1) / minrun, end = (start + count) / minrun;

	return end > first ? end - first : 0;
}

static void set_range(struct csdfs_alloc *a, uint64_t start, uint64_t count,
		      int on)
{
	/* The runs that can change are those touching the range's ends; the
	 * groups, those touching the range. */
	uint64_t lo = start ? start - 1 : 0, hi = start + count + 1;
	uint64_t before = short_near(a, lo, hi);
	uint64_t groups_before = full_groups(a, start, start + count);

	for (uint64_t b = start; b < start + count; b++) {
		uint64_t m = 1ull << (b & 63);
		uint64_t *w = &a->bits[b >> 6];

		if (on && !(*w & m)) {
			*w |= m;
			a->navail++;
		} else if (!on && (*w & m)) {
			*w &= ~m;
			a->navail--;
		}
	}
	a->nshort += short_near(a, lo, hi) - before;
	a->ngroups += full_groups(a, start, start + count) - groups_before;
	/* Blocks made free may join a run long enough for the placement
	 * that found none: measure it, no further than that length. */
	if (on && a->nofit && count) {
		uint64_t s = start;

		while (s > a->first && start - s < a->nofit && bit_get(a->bits, s - 1))
			s--;
		if (run_len(a, s, a->nofit) >= a->nofit)
			a->nofit = 0;
	}
}

/* Find a run of >= need blocks, next-fit from the hint, wrapping once. */
static int find_run(struct csdfs_alloc *a, uint64_t need, uint64_t *start,
		    uint64_t *len)
{
	uint64_t want = need > CSDFS_ALLOC_RUN_BLOCKS ? need :
			CSDFS_ALLOC_RUN_BLOCKS;

	/* Fewer blocks in runs of minrun or more than one run would need:
	 * no such run exists, and a walk of the whole map (a second per
	 * placement at 4 TiB, when free space is all fragments) finds none. */
	if (need >= a->minrun && a->navail - a->nshort < need)
		return -ENOSPC;
	/* A walk already found no run this long, and none has grown since. */
	if (a->nofit && need >= a->nofit)
		return -ENOSPC;
	for (int pass = 0; pass < 2; pass++) {
		uint64_t b = pass ? a->first : a->hint;
		uint64_t end = pass ? a->hint : a->total;

		while (b < end) {
			uint64_t n;

			b = next_avail(a, b);
			if (b >= end)
				break;
			n = run_len(a, b, want);
			if (n >= need) {
				*start = b;
				*len = n;
				return 0;
			}
			b += n;
		}
	}
	if (!a->nofit || need < a->nofit)
		a->nofit = need;
	return -ENOSPC;
}

int csdfs_alloc_place(struct csdfs_alloc *a, uint64_t len, bool use_reserve,
		      uint64_t *pa)
{
	uint64_t need, start, n;

	if (!len)
		return -EINVAL;
	if (a->head + len <= a->head_end) {
		*pa = a->head;
		a->head += len;
		return 0;
	}
	need = (len + BS - 1) / BS;
	if (!use_reserve && a->navail < need + a->reserve)
		return -ENOSPC;
	if (find_run(a, need, &start, &n))
		return -ENOSPC;
	/* Never let the head hold the reserve hostage. */
	if (!use_reserve && n > need && n - need > a->navail - need - a->reserve)
		n = a->navail - a->reserve;
	if (a->head_end && a->head % BS && a->on_leave)
		a->on_leave(a->hook_ctx, a->head / BS);
	/* Give back the whole blocks the old run never touched. */
	if (a->head_end) {
		uint64_t from = (a->head + BS - 1) / BS;
		uint64_t to = a->head_end / BS;

		if (to > from)
			set_range(a, from, to - from, 1);
	}
	set_range(a, start, n, 0);
	if (a->on_enter)
		a->on_enter(a->hook_ctx, start, n);
	a->head = start * BS + len;
	a->head_end = (start + n) * BS;
	a->hint = start + n;
	*pa = start * BS;
	return 0;
}

void csdfs_alloc_align(struct csdfs_alloc *a)
{
	uint64_t up = (a->head + BS - 1) / BS * BS;

	if (a->head % BS && up <= a->head_end && a->on_leave)
		a->on_leave(a->hook_ctx, a->head / BS);
	a->head = up < a->head_end ? up : a->head_end;
}

void csdfs_alloc_unplace(struct csdfs_alloc *a, uint64_t pa, uint64_t len)
{
	uint64_t from = (pa + BS - 1) / BS, to = (pa + len) / BS;

	/* Placements within a plan are made under one lock hold, so the
	 * latest one ends exactly at the head of the current run. */
	if (a->head_end && pa + len == a->head) {
		a->head = pa;
		return;
	}
	if (to > from)
		csdfs_alloc_quarantine(a, from, to - from);
}

int csdfs_alloc_inflight_add(struct csdfs_alloc *a, uint64_t start,
			     uint64_t end)
{
	for (int i = 0; i < CSDFS_ALLOC_INFLIGHT_MAX; i++) {
		if (!a->inflight[i].count) {
			a->inflight[i].start = start;
			a->inflight[i].count = end - start;
			return i;
		}
	}
	return -EAGAIN;
}

void csdfs_alloc_inflight_del(struct csdfs_alloc *a, int slot)
{
	if (slot >= 0 && slot < CSDFS_ALLOC_INFLIGHT_MAX)
		a->inflight[slot].count = 0;
}

int csdfs_alloc_quarantine(struct csdfs_alloc *a, uint64_t start,
			   uint64_t count)
{
	if (!count)
		return 0;
	if (a->nquar && a->quar[a->nquar - 1].start +
	    a->quar[a->nquar - 1].count == start) {
		a->quar[a->nquar - 1].count += count;
		/* Still in order (it is the last), but the cached count no
		 * longer holds. */
		a->quar_minrun = 0;
		return 0;
	}
	if (a->nquar == a->capquar) {
		size_t cap = a->capquar ? a->capquar * 2 : 64;
		struct csdfs_range *q = realloc(a->quar, cap * sizeof(*q));

		if (!q)
			return -ENOMEM;
		a->quar = q;
		a->capquar = cap;
	}
	a->quar[a->nquar].start = start;
	a->quar[a->nquar].count = count;
	a->nquar++;
	return 0;
}

size_t csdfs_alloc_take_quarantine(struct csdfs_alloc *a,
				   struct csdfs_range **out)
{
	size_t n = a->nquar;

	*out = a->quar;
	a->quar = NULL;
	a->nquar = a->capquar = a->nsorted = 0;
	a->quar_minrun = 0;
	return n;
}

/* Is block @b overlapped by the head's run or an in-flight placement? */
static int block_busy(const struct csdfs_alloc *a, uint64_t b)
{
	uint64_t lo = b * BS, hi = lo + BS;

	if (a->head_end && lo < a->head_end && hi > (a->head / BS) * BS)
		return 1;
	for (int i = 0; i < CSDFS_ALLOC_INFLIGHT_MAX; i++) {
		const struct csdfs_range *r = &a->inflight[i];

		if (r->count && lo < r->start + r->count && hi > r->start)
			return 1;
	}
	return 0;
}

int csdfs_alloc_reuse(struct csdfs_alloc *a, uint64_t start, uint64_t count,
		      int (*before)(void *ctx, uint64_t start, uint64_t count),
		      void *ctx)
{
	uint64_t run = 0, run_start = 0;
	int rc = 0;

	for (uint64_t b = start; b <= start + count; b++) {
		bool usable = b < start + count && b >= a->first && b < a->total &&
			      !block_busy(a, b);

		if (usable) {
			if (!run)
				run_start = b;
			run++;
			continue;
		}
		if (run) {
			if (before)
				before(ctx, run_start, run);
			set_range(a, run_start, run, 1);
			run = 0;
		}
		if (b < start + count && b >= a->first && b < a->total && !rc)
			rc = csdfs_alloc_quarantine(a, b, 1);
	}
	return rc;
}

void csdfs_alloc_set_minrun(struct csdfs_alloc *a, uint64_t minrun)
{
	a->minrun = minrun ? minrun : 1;
	a->nshort = short_near(a, a->first, a->total);
	a->ngroups = full_groups(a, a->first, a->total);
}

/* Quarantined runs a write of @minrun blocks can use after the next commit. */
static uint64_t quarantine_usable(struct csdfs_alloc *a, uint64_t minrun)
{
	uint64_t total = 0;

	csdfs_alloc_quarantine_merge(a);
	if (a->quar_minrun == minrun)
		return a->quar_usable;
	for (size_t i = 0; i < a->nquar; i++)
		total += groups_inside(a->quar[i].start, a->quar[i].count, minrun) * minrun;
	a->quar_usable = total;
	a->quar_minrun = minrun;
	return total;
}

/* What a data write can still use of the head's run: its whole raw
 * chunks. A rest shorter than @minrun holds no raw chunk; the head gives
 * it back as a fragment when it moves on, so statfs must not count it
 * (a write of exactly f_bavail bytes failed by those blocks). */
static uint64_t head_usable(const struct csdfs_alloc *a, uint64_t minrun)
{
	uint64_t n = (a->head_end - a->head) / BS;

	return n - n % minrun;
}

uint64_t csdfs_alloc_usable(struct csdfs_alloc *a)
{
	uint64_t avail = a->minrun > 1 ? a->ngroups * a->minrun : a->navail;

	return head_usable(a, a->minrun) + avail + quarantine_usable(a, a->minrun);
}

uint64_t csdfs_alloc_usable_scan(struct csdfs_alloc *a, uint64_t minrun)
{
	uint64_t total, b = a->first;

	minrun = minrun ? minrun : 1;   /* as csdfs_alloc_set_minrun takes it */
	total = head_usable(a, minrun);

	while (b < a->total) {
		uint64_t n;

		b = next_avail(a, b);
		if (b >= a->total)
			break;
		n = run_len(a, b, a->total - b);
		total += groups_inside(b, n, minrun) * minrun;
		b += n;
	}
	return total + quarantine_usable(a, minrun);
}

static int range_cmp(const void *x, const void *y)
{
	const struct csdfs_range *a = x, *b = y;

	return a->start < b->start ? -1 : a->start > b->start;
}

void csdfs_alloc_quarantine_merge(struct csdfs_alloc *a)
{
	size_t p = a->nsorted, t = a->nquar - p, out = 0;
	struct csdfs_range *tail = NULL;

	if (!t)
		return;
	/* Without memory for the tail's copy, sort it all, as a first merge
	 * does. */
	if (p && !(tail = malloc(t * sizeof(*tail))))
		p = 0, t = a->nquar;
	qsort(a->quar + p, t, sizeof(*a->quar), range_cmp);
	if (p) {
		/* Merge the sorted tail into the prefix from the back, so only
		 * the tail needs a copy. */
		size_t i = p, j = t, k = a->nquar;

		memcpy(tail, a->quar + p, t * sizeof(*tail));
		while (j) {
			if (i && a->quar[i - 1].start > tail[j - 1].start)
				a->quar[--k] = a->quar[--i];
			else
				a->quar[--k] = tail[--j];
		}
		free(tail);
	}
	for (size_t i = 1; i < a->nquar; i++) {
		struct csdfs_range *last = &a->quar[out];

		if (a->quar[i].start <= last->start + last->count) {
			uint64_t end = a->quar[i].start + a->quar[i].count;

			if (end > last->start + last->count)
				last->count = end - last->start;
		} else {
			a->quar[++out] = a->quar[i];
		}
	}
	a->nquar = a->nsorted = out + 1;
	a->quar_minrun = 0;
}
