/* SPDX-License-Identifier: MIT */
/*
 * The durable free map (LMDB db "free"): disjoint, coalesced runs of free
 * container blocks, key = first block BE64, value = LE64 count. It changes
 * only inside operation transactions, so it always agrees with the chunk
 * map in the same commit (fsck's "free vs used" invariant).
 */
#include <errno.h>
#include <string.h>

#include "vol.h"

struct run {
	uint64_t start, count;
};

int csdfs_freemap_decode(const struct csdfs_val *k, const struct csdfs_val *v,
			 uint64_t *start, uint64_t *count)
{
	int rc;

	if (k->len != 8)
		return -EUCLEAN;
	rc = csdfs_rec_le64_decode(v, count);
	if (rc)
		return rc;
	*start = csdfs_be64_get(k->data);
	return *count ? 0 : -EUCLEAN;
}

static int decode_run(const struct csdfs_val *k, const struct csdfs_val *v,
		      struct run *r)
{
	return csdfs_freemap_decode(k, v, &r->start, &r->count);
}

static int put_run(struct csdfs_txn *txn, uint64_t start, uint64_t count)
{
	uint8_t key[8];

	csdfs_be64_put(key, start);
	return csdfs_rec_le64_put(txn, CSDFS_DB_FREE, key, 8, &count, 0);
}

static int del_run(struct csdfs_txn *txn, uint64_t start)
{
	uint8_t key[8];

	csdfs_be64_put(key, start);
	return csdfs_meta_del(txn, CSDFS_DB_FREE, key, 8);
}

/*
 * Collect up to @max runs overlapping [start, end) into @out, in order.
 * @return the number found (a full array means: call again from the end of
 * the last one), or -errno.
 */
static int overlapping(struct csdfs_txn *txn, uint64_t start, uint64_t end,
		       struct run *out, int max)
{
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	uint8_t key[8];
	struct run r;
	int n = 0, rc;

	rc = csdfs_cursor_open(txn, CSDFS_DB_FREE, &cur);
	if (rc)
		return rc;
	csdfs_be64_put(key, start);
	rc = csdfs_cursor_seek(cur, key, 8, &k, &v);
	if (rc == -ENOENT)
		rc = csdfs_cursor_last(cur, &k, &v);
	else if (!rc && csdfs_be64_get(k.data) > start)
		rc = csdfs_cursor_prev(cur, &k, &v);
	if (rc == -ENOENT) {
		/* Nothing before start: restart from the first key >= start. */
		rc = csdfs_cursor_seek(cur, key, 8, &k, &v);
	}
	while (!rc && n < max) {
		rc = decode_run(&k, &v, &r);
		if (rc)
			break;
		if (r.start >= end)
			break;
		if (r.start + r.count > start)
			out[n++] = r;
		rc = csdfs_cursor_next(cur, &k, &v);
	}
	csdfs_cursor_close(cur);
	if (rc && rc != -ENOENT)
		return rc;
	return n;
}

#define BATCH 64

/* Call @fn for every free run overlapping [start, end), with the part of
 * it inside the range, [lo, hi). Runs are read a batch at a time before
 * @fn sees them, so @fn may change the free map. */
static int each_overlap(struct csdfs_txn *txn, uint64_t start, uint64_t end,
			int (*fn)(struct csdfs_txn *txn, const struct run *r,
				  uint64_t lo, uint64_t hi, void *ctx),
			void *ctx)
{
	struct run runs[BATCH];
	int n, rc;

	do {
		n = overlapping(txn, start, end, runs, BATCH);
		if (n < 0)
			return n;
		for (int i = 0; i < n; i++) {
			uint64_t re = runs[i].start + runs[i].count;

			rc = fn(txn, &runs[i], runs[i].start > start ? runs[i].start : start,
				re < end ? re : end, ctx);
			if (rc)
				return rc;
		}
		if (n == BATCH)
			start = runs[n - 1].start + runs[n - 1].count;
	} while (n == BATCH && start < end);
	return 0;
}

/* What a take removed from [first, last]: the first block, the blocks
 * strictly between, the last block (counted once when first == last). */
struct take_ctx {
	uint64_t first, last;
	uint64_t head, mid, tail;
};

/* Take [lo, hi) out of run @r, keeping what lies outside it. */
static int take_cb(struct csdfs_txn *txn, const struct run *r, uint64_t lo,
		   uint64_t hi, void *ctx)
{
	struct take_ctx *t = ctx;
	uint64_t ms = t->first + 1, me = t->last;
	int rc = del_run(txn, r->start);

	if (!rc && r->start < lo)
		rc = put_run(txn, r->start, lo - r->start);
	if (!rc && r->start + r->count > hi)
		rc = put_run(txn, hi, r->start + r->count - hi);
	if (rc)
		return rc;
	t->head += lo <= t->first && t->first < hi;
	t->tail += t->last != t->first && lo <= t->last && t->last < hi;
	if (lo > ms)
		ms = lo;
	if (hi < me)
		me = hi;
	t->mid += me > ms ? me - ms : 0;
	return 0;
}

int csdfs_freemap_take_ends(struct csdfs_txn *txn, uint64_t first, uint64_t last,
			    uint64_t *head, uint64_t *mid, uint64_t *tail)
{
	struct take_ctx t = { first, last, 0, 0, 0 };
	int rc;

	rc = each_overlap(txn, first, last + 1, take_cb, &t);
	*head = t.head;
	*mid = t.mid;
	*tail = t.tail;
	return rc;
}

int csdfs_freemap_take(struct csdfs_txn *txn, uint64_t start, uint64_t count,
		       uint64_t *taken)
{
	uint64_t head, mid, tail;
	int rc;

	*taken = 0;
	if (!count)
		return 0;
	rc = csdfs_freemap_take_ends(txn, start, start + count - 1, &head, &mid, &tail);
	*taken = head + mid + tail;
	return rc;
}

int csdfs_freemap_give(struct csdfs_txn *txn, uint64_t start, uint64_t count)
{
	struct run around[2];
	uint64_t s = start, e = start + count;
	int n, rc;

	if (!count)
		return 0;
	/* Runs touching [start-1, end+1) are the only merge candidates. */
	n = overlapping(txn, start ? start - 1 : 0, e + 1, around, 2);
	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		struct run r = around[i];

		if (r.start < e && r.start + r.count > start)
			return -EUCLEAN;  /* double free */
		if (r.start + r.count == start) {
			s = r.start;
			rc = del_run(txn, r.start);
			if (rc)
				return rc;
		} else if (r.start == e) {
			e = r.start + r.count;
			rc = del_run(txn, r.start);
			if (rc)
				return rc;
		}
	}
	return put_run(txn, s, e - s);
}

struct intersect_ctx {
	int (*fn)(void *ctx, uint64_t s, uint64_t n);
	void *ctx;
};

static int intersect_cb(struct csdfs_txn *txn, const struct run *r, uint64_t lo,
			uint64_t hi, void *ctx)
{
	struct intersect_ctx *ic = ctx;

	return ic->fn(ic->ctx, lo, hi - lo);
}

int csdfs_freemap_intersect(struct csdfs_txn *txn, uint64_t start,
			    uint64_t count,
			    int (*fn)(void *ctx, uint64_t s, uint64_t n),
			    void *ctx)
{
	struct intersect_ctx ic = { fn, ctx };

	return each_overlap(txn, start, start + count, intersect_cb, &ic);
}
