/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for alloc.c, the in-memory allocator: pure, no volume. Covers
 * marking free space, byte-exact packing at the head, moving the head to a
 * new run (giving back what the old run never used, telling the volume
 * which run it took), -ENOSPC on a fragmented bitmap, next-fit with
 * wrap-around, the quarantine/reuse cycle around the head's run and
 * in-flight placements, in-flight slot exhaustion, and a randomized model
 * check: placements never overlap a live placement and a new run is only
 * ever cut from blocks marked allocatable.
 */
#include <check.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "csdfs/alloc.h"
#include "csdfs/format.h"

#define BS ((uint64_t)CSDFS_BLOCK_SIZE)
#define FIRST ((uint64_t)CSDFS_FIRST_DATA_BLOCK)

static uint64_t rng_state;

static uint64_t rng_next(void)
{
	/* xorshift64*: fixed seed, so a failure reproduces exactly. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static int avail(const struct csdfs_alloc *a, uint64_t b)
{
	return (int)((a->bits[b >> 6] >> (b & 63)) & 1);
}

static uint64_t popcount_bits(const struct csdfs_alloc *a)
{
	uint64_t n = 0;

	for (uint64_t w = 0; w < (a->total + 63) / 64; w++)
		n += (uint64_t)__builtin_popcountll(a->bits[w]);
	return n;
}

static void check_navail(const struct csdfs_alloc *a)
{
	ck_assert_uint_eq(popcount_bits(a), a->navail);
}

static void setup_alloc(struct csdfs_alloc *a, uint64_t total)
{
	ck_assert_int_eq(csdfs_alloc_init(a, FIRST, total), 0);
	ck_assert_uint_eq(a->navail, 0);
	ck_assert_uint_eq(a->first, FIRST);
	ck_assert_uint_eq(a->total, total);
}

START_TEST(test_init_mark_free)
{
	struct csdfs_alloc a;
	uint64_t pa = 0;

	setup_alloc(&a, 1000);
	/* Nothing is allocatable until marked free. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 1, false, &pa), -ENOSPC);
	ck_assert_int_eq(csdfs_alloc_place(&a, 0, false, &pa), -EINVAL);

	csdfs_alloc_mark_free(&a, FIRST, 1000 - FIRST);
	ck_assert_uint_eq(a.navail, 1000 - FIRST);
	check_navail(&a);
	/* Marking twice does not count twice. */
	csdfs_alloc_mark_free(&a, 100, 10);
	ck_assert_uint_eq(a.navail, 1000 - FIRST);
	/* Out-of-range requests are ignored entirely. */
	csdfs_alloc_mark_free(&a, 0, 20);
	csdfs_alloc_mark_free(&a, 990, 20);
	ck_assert_uint_eq(a.navail, 1000 - FIRST);
	for (uint64_t b = 0; b < FIRST; b++)
		ck_assert_int_eq(avail(&a, b), 0);
	check_navail(&a);
	csdfs_alloc_release(&a);
	ck_assert_ptr_null(a.bits);
	csdfs_alloc_release(&a);  /* idempotent */
}
END_TEST

START_TEST(test_pack_back_to_back)
{
	struct csdfs_alloc a;
	uint64_t pa, expect;
	static const uint64_t lens[] = { 1000, 5000, 3000, 1, 4096, 12345, 77 };

	setup_alloc(&a, 4096);
	csdfs_alloc_mark_free(&a, FIRST, 4096 - FIRST);
	expect = FIRST * BS;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		ck_assert_int_eq(csdfs_alloc_place(&a, lens[i], false, &pa), 0);
		ck_assert_uint_eq(pa, expect);
		expect += lens[i];
	}
	/* The head reserved one full run, capped at CSDFS_ALLOC_RUN_BLOCKS. */
	ck_assert_uint_eq(a.navail, 4096 - FIRST - CSDFS_ALLOC_RUN_BLOCKS);
	ck_assert_uint_eq(a.head, expect);
	ck_assert_uint_eq(a.head_end, (FIRST + CSDFS_ALLOC_RUN_BLOCKS) * BS);
	for (uint64_t b = FIRST; b < FIRST + CSDFS_ALLOC_RUN_BLOCKS; b++)
		ck_assert_int_eq(avail(&a, b), 0);
	ck_assert_int_eq(avail(&a, FIRST + CSDFS_ALLOC_RUN_BLOCKS), 1);
	check_navail(&a);
	csdfs_alloc_release(&a);
}
END_TEST

START_TEST(test_new_run_returns_untouched)
{
	struct csdfs_alloc a;
	uint64_t pa;

	setup_alloc(&a, 2000);
	csdfs_alloc_mark_free(&a, 16, 2);      /* a short run: blocks 16, 17 */
	csdfs_alloc_mark_free(&a, 100, 1000);  /* a long one: 100..1099 */
	ck_assert_uint_eq(a.navail, 1002);

	ck_assert_int_eq(csdfs_alloc_place(&a, 4096, false, &pa), 0);
	ck_assert_uint_eq(pa, 16 * BS);
	ck_assert_uint_eq(a.head_end, 18 * BS);
	ck_assert_uint_eq(a.navail, 1000);

	/* 8 KiB does not fit in the 4 KiB left: move to the next run and
	 * give back block 17, which the old run never touched. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 8192, false, &pa), 0);
	ck_assert_uint_eq(pa, 100 * BS);
	ck_assert_int_eq(avail(&a, 16), 0);
	ck_assert_int_eq(avail(&a, 17), 1);
	ck_assert_uint_eq(a.navail, 1);
	check_navail(&a);

	/* A partly used block is never given back. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 100, false, &pa), 0);
	ck_assert_uint_eq(pa, 102 * BS);
	/* Head now at 102*BS+100: the run's rest is 997 blocks + 3996 B.
	 * Ask for more than that: only block 17 is free, too short. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 998 * BS, false, &pa), -ENOSPC);
	/* A failed placement changes nothing. */
	ck_assert_uint_eq(a.navail, 1);
	ck_assert_uint_eq(a.head, 102 * BS + 100);
	ck_assert_uint_eq(a.head_end, 1100 * BS);
	check_navail(&a);
	/* Fill the run, then one more byte moves the head to block 17. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 1100 * BS - a.head, false, &pa), 0);
	ck_assert_uint_eq(a.head, 1100 * BS);
	ck_assert_int_eq(csdfs_alloc_place(&a, 1, false, &pa), 0);
	ck_assert_uint_eq(pa, 17 * BS);
	ck_assert_uint_eq(a.navail, 0);
	/* A placement that ended exactly at a run's end gives back nothing. */
	for (uint64_t b = 100; b < 1100; b++)
		ck_assert_int_eq(avail(&a, b), 0);
	check_navail(&a);
	csdfs_alloc_release(&a);
}
END_TEST

/* on_enter: once per run the head takes, with that run, before anything
 * is placed in it and while no one else can be handed its blocks. */
struct enter_log {
	struct csdfs_alloc *a;
	int n;
	struct { uint64_t start, count, head_end; int taken; } call[8];
};

static void log_enter(void *ctx, uint64_t start, uint64_t count)
{
	struct enter_log *l = ctx;
	int taken = 1;

	ck_assert_int_lt(l->n, 8);
	for (uint64_t b = start; b < start + count; b++)
		taken &= !avail(l->a, b);
	l->call[l->n].start = start;
	l->call[l->n].count = count;
	l->call[l->n].head_end = l->a->head_end;
	l->call[l->n].taken = taken;
	l->n++;
}

/* The @n-th call so far was the last, for run [start, start + count). */
static void expect_enter(const struct enter_log *l, int n, uint64_t start,
			 uint64_t count)
{
	ck_assert_int_eq(l->n, n);
	ck_assert_uint_eq(l->call[n - 1].start, start);
	ck_assert_uint_eq(l->call[n - 1].count, count);
	ck_assert_int_eq(l->call[n - 1].taken, 1);
	/* Before the placement: the head had not yet moved there. */
	ck_assert_uint_ne(l->call[n - 1].head_end, (start + count) * BS);
}

START_TEST(test_enter_hook)
{
	struct csdfs_alloc a;
	struct enter_log l = { .a = &a };
	uint64_t pa, pa2;

	setup_alloc(&a, 2000);
	a.on_enter = log_enter;
	a.hook_ctx = &l;
	csdfs_alloc_mark_free(&a, 16, 2);
	csdfs_alloc_mark_free(&a, 100, 1000);

	ck_assert_int_eq(csdfs_alloc_place(&a, 4096, false, &pa), 0);
	expect_enter(&l, 1, 16, 2);

	/* A failed placement: no call. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 2000 * BS, false, &pa), -ENOSPC);
	ck_assert_int_eq(l.n, 1);

	/* The next run, as long as the head reserves. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 8192, false, &pa), 0);
	ck_assert_uint_eq(pa, 100 * BS);
	expect_enter(&l, 2, 100, 1000);

	/* A placement inside the run: no call. Taking it back rewinds
	 * within the same run: placing again there calls nothing either. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 300, false, &pa2), 0);
	ck_assert_int_eq(l.n, 2);
	csdfs_alloc_unplace(&a, pa2, 300);
	ck_assert_int_eq(csdfs_alloc_place(&a, 300, false, &pa2), 0);
	ck_assert_uint_eq(pa2, 102 * BS);
	ck_assert_int_eq(l.n, 2);

	/* Fill the run; one more byte moves the head to block 17. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 1100 * BS - a.head, false, &pa), 0);
	ck_assert_int_eq(l.n, 2);
	ck_assert_int_eq(csdfs_alloc_place(&a, 1, false, &pa), 0);
	ck_assert_uint_eq(pa, 17 * BS);
	expect_enter(&l, 3, 17, 1);
	csdfs_alloc_release(&a);
}
END_TEST

START_TEST(test_enospc_fragmented)
{
	struct csdfs_alloc a;
	uint64_t pa, before;

	setup_alloc(&a, 400);
	for (uint64_t b = FIRST; b < 400; b += 2)
		csdfs_alloc_mark_free(&a, b, 1);
	before = a.navail;
	ck_assert_uint_eq(before, (400 - FIRST) / 2);

	/* Plenty of free blocks, but never two in a row. */
	ck_assert_int_eq(csdfs_alloc_place(&a, BS + 1, false, &pa), -ENOSPC);
	ck_assert_uint_eq(a.navail, before);
	/* One block is fine, and so is packing into its rest. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 4000, false, &pa), 0);
	ck_assert_uint_eq(pa, FIRST * BS);
	ck_assert_int_eq(csdfs_alloc_place(&a, 96, false, &pa), 0);
	ck_assert_uint_eq(pa, FIRST * BS + 4000);
	ck_assert_int_eq(csdfs_alloc_place(&a, 2 * BS, false, &pa), -ENOSPC);
	ck_assert_int_eq(csdfs_alloc_place(&a, BS, false, &pa), 0);
	ck_assert_uint_eq(pa, (FIRST + 2) * BS);
	check_navail(&a);
	csdfs_alloc_release(&a);
}
END_TEST

/* The head's rest counts in whole raw chunks: what statfs promises from
 * it, a data write can fill (t_space once saw a write of exactly f_bavail
 * bytes fail by a 3-block rest). Counter-check: the placement the count
 * refuses to promise does fail. */
START_TEST(test_usable_head_rest)
{
	struct csdfs_alloc a;
	uint64_t pa;

	setup_alloc(&a, FIRST + 11);
	csdfs_alloc_mark_free(&a, FIRST, 11);
	csdfs_alloc_set_minrun(&a, 4);
	/* The first raw chunk takes the whole run as the head's. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 4 * BS, false, &pa), 0);
	ck_assert_uint_eq(a.navail, 0);
	ck_assert_uint_eq(a.head_end - a.head, 7 * BS);
	ck_assert_uint_eq(csdfs_alloc_usable(&a), 4);
	ck_assert_uint_eq(csdfs_alloc_usable_scan(&a, 4), 4);
	ck_assert_int_eq(csdfs_alloc_place(&a, 4 * BS, false, &pa), 0);
	/* A 3-block rest: nothing a raw chunk can use, and none fits. */
	ck_assert_uint_eq(a.head_end - a.head, 3 * BS);
	ck_assert_uint_eq(csdfs_alloc_usable(&a), 0);
	ck_assert_uint_eq(csdfs_alloc_usable_scan(&a, 4), 0);
	ck_assert_int_eq(csdfs_alloc_place(&a, 4 * BS, false, &pa), -ENOSPC);
	/* Smaller (compressed) chunks still fill it. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 3 * BS, false, &pa), 0);
	check_navail(&a);
	csdfs_alloc_release(&a);
}
END_TEST

/* Free runs that are not the head's count in raw-chunk groups: what
 * statfs promises, raw (incompressible) chunks fill, whatever the runs'
 * lengths and places. Counter-check: counted whole (the old rule), the
 * three runs below would promise 11 + 7 + 12 = 30 blocks where raw chunks
 * take 2 + 1 + 3 = 6 chunks, 24 blocks. */
START_TEST(test_usable_run_tails)
{
	static const struct csdfs_range runs[] = {
		{ FIRST, 11 },           /* aligned: 2 groups, 2 chunks */
		{ FIRST + 13, 7 },       /* 1 group (FIRST + 16), 1 chunk */
		{ FIRST + 41, 12 },      /* 2 groups, 3 chunks: one short */
	};
	struct csdfs_alloc a;
	uint64_t pa, promised, placed = 0;

	setup_alloc(&a, FIRST + 64);
	for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++)
		csdfs_alloc_mark_free(&a, runs[i].start, runs[i].count);
	csdfs_alloc_set_minrun(&a, 4);
	promised = csdfs_alloc_usable(&a);
	ck_assert_uint_eq(promised, 20);
	ck_assert_uint_eq(csdfs_alloc_usable_scan(&a, 4), 20);
	/* Never more than raw chunks take (here 24 blocks, 6 chunks). */
	while (csdfs_alloc_place(&a, 4 * BS, false, &pa) == 0)
		placed += 4;
	ck_assert_uint_eq(placed, 24);
	ck_assert_uint_le(promised, placed);
	/* The count followed every change the placements made. */
	ck_assert_uint_eq(csdfs_alloc_usable(&a), csdfs_alloc_usable_scan(&a, 4));
	check_navail(&a);
	csdfs_alloc_release(&a);
}
END_TEST

/* A placement that found no run remembers it, and forgets it as soon as
 * a freed block joins a run that long. */
START_TEST(test_enospc_remembered)
{
	struct csdfs_alloc a;
	uint64_t pa;

	setup_alloc(&a, 400);
	csdfs_alloc_set_minrun(&a, 4);
	for (uint64_t b = FIRST; b < 400; b += 4)
		csdfs_alloc_mark_free(&a, b, 1);
	/* No run of minrun blocks at all: refused without a walk. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 4 * BS, false, &pa), -ENOSPC);
	ck_assert_uint_eq(a.nofit, 0);
	/* Two blocks: a walk finds none, and says so. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 2 * BS, false, &pa), -ENOSPC);
	ck_assert_uint_eq(a.nofit, 2);
	ck_assert_int_eq(csdfs_alloc_place(&a, 3 * BS, false, &pa), -ENOSPC);
	ck_assert_uint_eq(a.nofit, 2);
	/* Freeing a block far from any other free one changes nothing... */
	csdfs_alloc_mark_free(&a, FIRST + 2, 1);
	ck_assert_uint_eq(a.nofit, 2);
	/* ...one between two free ones makes a run of three. */
	csdfs_alloc_mark_free(&a, FIRST + 1, 1);
	ck_assert_uint_eq(a.nofit, 0);
	ck_assert_int_eq(csdfs_alloc_place(&a, 3 * BS, false, &pa), 0);
	ck_assert_uint_eq(pa, FIRST * BS);
	check_navail(&a);
	csdfs_alloc_release(&a);
}
END_TEST

START_TEST(test_next_fit_wraps)
{
	struct csdfs_alloc a;
	uint64_t pa, R = CSDFS_ALLOC_RUN_BLOCKS;

	setup_alloc(&a, 3000);
	csdfs_alloc_mark_free(&a, FIRST, 3000 - FIRST);
	ck_assert_int_eq(csdfs_alloc_place(&a, R * BS, false, &pa), 0);
	ck_assert_uint_eq(pa, FIRST * BS);
	ck_assert_int_eq(csdfs_alloc_place(&a, R * BS, false, &pa), 0);
	ck_assert_uint_eq(pa, (FIRST + R) * BS);
	ck_assert_uint_eq(a.hint, FIRST + 2 * R);

	/* The first run becomes free again (as after a durable commit). */
	csdfs_alloc_mark_free(&a, FIRST, R);
	/* Next fit: the search continues at the hint, not at the start. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 900 * BS, false, &pa), 0);
	ck_assert_uint_eq(pa, (FIRST + 2 * R) * BS);
	ck_assert_uint_eq(a.head_end, 3000 * BS);  /* short run: 936 blocks */
	ck_assert_uint_eq(a.hint, 3000);

	/* Nothing left past the hint: wrap around to the first run, and
	 * give back the 36 blocks the old run never touched. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 100 * BS, false, &pa), 0);
	ck_assert_uint_eq(pa, FIRST * BS);
	for (uint64_t b = FIRST + 2 * R + 900; b < 3000; b++)
		ck_assert_int_eq(avail(&a, b), 1);
	ck_assert_uint_eq(a.navail, 3000 - (FIRST + 2 * R + 900));
	ck_assert_uint_eq(a.hint, FIRST + R);
	check_navail(&a);
	csdfs_alloc_release(&a);
}
END_TEST

START_TEST(test_quarantine_reuse)
{
	struct csdfs_alloc a;
	struct csdfs_range *q;
	uint64_t pa;
	size_t n;
	int slot;

	setup_alloc(&a, 4000);
	csdfs_alloc_mark_free(&a, FIRST, 2000 - FIRST);
	/* Head reserves [16, 1040) and sits in block 17 afterwards. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 6000, false, &pa), 0);
	ck_assert_uint_eq(pa, 16 * BS);
	ck_assert_uint_eq(a.head / BS, 17);

	/* An unfinished write covers blocks 2500 and 2501 (in bytes). */
	slot = csdfs_alloc_inflight_add(&a, 2500 * BS + 100, 2502 * BS);
	ck_assert_int_ge(slot, 0);

	ck_assert_int_eq(csdfs_alloc_quarantine(&a, 16, 1), 0);
	ck_assert_int_eq(csdfs_alloc_quarantine(&a, 17, 1), 0);  /* coalesces */
	ck_assert_int_eq(csdfs_alloc_quarantine(&a, 2499, 4), 0);
	ck_assert_int_eq(csdfs_alloc_quarantine(&a, 3000, 0), 0); /* no-op */
	ck_assert_int_eq(csdfs_alloc_quarantine(&a, 3000, 2), 0);
	/* Quarantined blocks are not allocatable. */
	ck_assert_int_eq(avail(&a, 3000), 0);

	n = csdfs_alloc_take_quarantine(&a, &q);
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(q[0].start, 16);
	ck_assert_uint_eq(q[0].count, 2);
	ck_assert_uint_eq(q[1].start, 2499);
	ck_assert_uint_eq(q[1].count, 4);
	ck_assert_uint_eq(q[2].start, 3000);
	ck_assert_uint_eq(q[2].count, 2);
	ck_assert_uint_eq(a.nquar, 0);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(csdfs_alloc_reuse(&a, q[i].start, q[i].count,
						   NULL, NULL), 0);
	free(q);

	/* Block 16 lies behind the head: reusable. Block 17 is the head's
	 * block, 2500/2501 are in flight: back into quarantine. */
	ck_assert_int_eq(avail(&a, 16), 1);
	ck_assert_int_eq(avail(&a, 17), 0);
	ck_assert_int_eq(avail(&a, 2499), 1);
	ck_assert_int_eq(avail(&a, 2500), 0);
	ck_assert_int_eq(avail(&a, 2501), 0);
	ck_assert_int_eq(avail(&a, 2502), 1);
	ck_assert_int_eq(avail(&a, 3000), 1);
	ck_assert_int_eq(avail(&a, 3001), 1);
	check_navail(&a);

	n = csdfs_alloc_take_quarantine(&a, &q);
	ck_assert_uint_eq(n, 2);
	ck_assert_uint_eq(q[0].start, 17);
	ck_assert_uint_eq(q[0].count, 1);
	ck_assert_uint_eq(q[1].start, 2500);
	ck_assert_uint_eq(q[1].count, 2);

	/* Once the write finished and the head moved on, they are free. */
	csdfs_alloc_inflight_del(&a, slot);
	ck_assert_int_eq(csdfs_alloc_place(&a, 1040 * BS - a.head, false, &pa), 0);
	ck_assert_int_eq(csdfs_alloc_place(&a, 10, false, &pa), 0);
	ck_assert_uint_ge(pa, 1040 * BS);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(csdfs_alloc_reuse(&a, q[i].start, q[i].count,
						   NULL, NULL), 0);
	free(q);
	ck_assert_int_eq(avail(&a, 17), 1);
	ck_assert_int_eq(avail(&a, 2500), 1);
	ck_assert_int_eq(avail(&a, 2501), 1);
	ck_assert_uint_eq(a.nquar, 0);

	/* Reuse ignores blocks outside the data area. */
	ck_assert_int_eq(csdfs_alloc_reuse(&a, 0, FIRST, NULL, NULL), 0);
	ck_assert_int_eq(csdfs_alloc_reuse(&a, 3999, 10, NULL, NULL), 0);
	for (uint64_t b = 0; b < FIRST; b++)
		ck_assert_int_eq(avail(&a, b), 0);
	check_navail(&a);

	/* An empty quarantine hands out nothing. */
	n = csdfs_alloc_take_quarantine(&a, &q);
	ck_assert_uint_eq(n, 0);
	free(q);
	csdfs_alloc_release(&a);
}
END_TEST

START_TEST(test_reuse_ahead_of_head_stays_quarantined)
{
	struct csdfs_alloc a;
	struct csdfs_range *q;
	uint64_t pa;
	size_t n;

	/* A block of the head's reserved run ahead of the head must never be
	 * made allocatable: the head will write there next. */
	setup_alloc(&a, 2000);
	csdfs_alloc_mark_free(&a, FIRST, 2000 - FIRST);
	ck_assert_int_eq(csdfs_alloc_place(&a, 100, false, &pa), 0);
	ck_assert_int_eq(csdfs_alloc_quarantine(&a, 500, 3), 0);
	n = csdfs_alloc_take_quarantine(&a, &q);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(csdfs_alloc_reuse(&a, q[0].start, q[0].count, NULL, NULL), 0);
	free(q);
	for (uint64_t b = 500; b < 503; b++)
		ck_assert_int_eq(avail(&a, b), 0);
	ck_assert_uint_eq(a.nquar, 1);
	ck_assert_uint_eq(a.quar[0].start, 500);
	ck_assert_uint_eq(a.quar[0].count, 3);
	check_navail(&a);
	csdfs_alloc_release(&a);
}
END_TEST

/* Quarantine pieces arrive in batches, out of order, some touching or
 * overlapping what an earlier merge already holds: merging only each new
 * batch into the sorted prefix must give what one merge of everything
 * gives (a bitmap of the blocks, runs maximal and in order), and the
 * cached count must follow every append. */
START_TEST(test_quarantine_merge_incremental)
{
	enum { SPAN = 4000 };
	static uint8_t model[SPAN];
	struct csdfs_alloc a;
	unsigned seed = 7;

	setup_alloc(&a, SPAN + FIRST);
	memset(model, 0, sizeof(model));
	for (int batch = 0; batch < 200; batch++) {
		int pieces = 1 + rand_r(&seed) % 8;

		for (int k = 0; k < pieces; k++) {
			uint64_t start = rand_r(&seed) % (SPAN - 1000);
			uint64_t count = 1 + rand_r(&seed) % 12;

			/* Half of the time, extend the last piece in place by a
			 * block or two (the last is the highest after a merge:
			 * the space above SPAN - 1000 is left for this). */
			if (a.nquar && rand_r(&seed) % 2) {
				start = a.quar[a.nquar - 1].start +
					a.quar[a.nquar - 1].count;
				count = 1 + count % 2;
				if (start + count > SPAN)
					continue;
			}
			ck_assert_int_eq(csdfs_alloc_quarantine(&a, start, count), 0);
			memset(model + start, 1, count);
		}
		csdfs_alloc_quarantine_merge(&a);
		ck_assert_uint_eq(a.nsorted, a.nquar);

		/* Runs are in order, disjoint, not touching, and cover exactly
		 * the model's blocks; the usable count for minrun 4 is their
		 * raw-chunk groups (4-aligned, 4 blocks, wholly in a run). */
		uint64_t covered = 0, want4 = 0, run = 0;

		for (size_t i = 0; i < a.nquar; i++) {
			if (i)
				ck_assert_uint_gt(a.quar[i].start,
						  a.quar[i - 1].start + a.quar[i - 1].count);
			for (uint64_t b = 0; b < a.quar[i].count; b++)
				ck_assert_uint_eq(model[a.quar[i].start + b], 1);
			covered += a.quar[i].count;
		}
		for (size_t b = 0; b <= SPAN; b++) {
			if (b < SPAN && model[b]) {
				run++;
				continue;
			}
			if (run) {
				uint64_t g0 = (b - run + 3) / 4, g1 = b / 4;

				want4 += g1 > g0 ? (g1 - g0) * 4 : 0;
			}
			covered -= run;
			run = 0;
		}
		ck_assert_uint_eq(covered, 0);
		a.minrun = 4;
		ck_assert_uint_eq(csdfs_alloc_usable_scan(&a, 4), want4);
		/* Cached the second time. */
		ck_assert_uint_eq(csdfs_alloc_usable_scan(&a, 4), want4);
	}
	csdfs_alloc_release(&a);
}
END_TEST

START_TEST(test_inflight_exhaust)
{
	struct csdfs_alloc a;
	int slots[CSDFS_ALLOC_INFLIGHT_MAX], s;

	setup_alloc(&a, 100);
	for (int i = 0; i < CSDFS_ALLOC_INFLIGHT_MAX; i++) {
		slots[i] = csdfs_alloc_inflight_add(&a, (uint64_t)i * BS + 16 * BS,
						    (uint64_t)i * BS + 17 * BS);
		ck_assert_int_ge(slots[i], 0);
		ck_assert_int_lt(slots[i], CSDFS_ALLOC_INFLIGHT_MAX);
		for (int j = 0; j < i; j++)
			ck_assert_int_ne(slots[i], slots[j]);
	}
	ck_assert_int_eq(csdfs_alloc_inflight_add(&a, 0, 10), -EAGAIN);
	csdfs_alloc_inflight_del(&a, slots[77]);
	s = csdfs_alloc_inflight_add(&a, 5, 10);
	ck_assert_int_eq(s, slots[77]);
	ck_assert_int_eq(csdfs_alloc_inflight_add(&a, 0, 10), -EAGAIN);
	/* Bad slot numbers are ignored. */
	csdfs_alloc_inflight_del(&a, -1);
	csdfs_alloc_inflight_del(&a, CSDFS_ALLOC_INFLIGHT_MAX);
	ck_assert_int_eq(csdfs_alloc_inflight_add(&a, 0, 10), -EAGAIN);
	for (int i = 0; i < CSDFS_ALLOC_INFLIGHT_MAX; i++)
		csdfs_alloc_inflight_del(&a, slots[i]);
	ck_assert_int_ge(csdfs_alloc_inflight_add(&a, 0, 10), 0);
	csdfs_alloc_release(&a);
}
END_TEST

START_TEST(test_reserve)
{
	struct csdfs_alloc a;
	uint64_t pa;

	setup_alloc(&a, 2000);
	csdfs_alloc_mark_free(&a, FIRST, 100);   /* blocks 16..115 */
	a.reserve = 30;

	/* A data placement may not leave fewer than 30 blocks allocatable:
	 * its run is cut short so the head does not hold the reserve. */
	ck_assert_int_eq(csdfs_alloc_place(&a, BS, false, &pa), 0);
	ck_assert_uint_eq(pa, FIRST * BS);
	ck_assert_uint_eq(a.navail, 30);
	ck_assert_uint_eq(a.head_end, (FIRST + 70) * BS);
	check_navail(&a);
	/* The run it got is usable to its end... */
	ck_assert_int_eq(csdfs_alloc_place(&a, 69 * BS, false, &pa), 0);
	ck_assert_uint_eq(pa, (FIRST + 1) * BS);
	/* ...but no further without the reserve. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 1, false, &pa), -ENOSPC);
	ck_assert_uint_eq(a.navail, 30);
	/* Truncate, punch and unlink may use it, to the last block. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 10 * BS, true, &pa), 0);
	ck_assert_uint_eq(pa, (FIRST + 70) * BS);
	ck_assert_uint_eq(a.navail, 0);
	ck_assert_int_eq(csdfs_alloc_place(&a, 20 * BS + 1, true, &pa), -ENOSPC);
	ck_assert_int_eq(csdfs_alloc_place(&a, 20 * BS, true, &pa), 0);
	ck_assert_int_eq(csdfs_alloc_place(&a, 1, true, &pa), -ENOSPC);
	check_navail(&a);
	csdfs_alloc_release(&a);
}
END_TEST

START_TEST(test_reserve_need_exceeds)
{
	struct csdfs_alloc a;
	uint64_t pa;

	setup_alloc(&a, 2000);
	csdfs_alloc_mark_free(&a, FIRST, 100);
	a.reserve = 30;
	/* 71 blocks would leave 29: refused; 70 leave exactly 30. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 71 * BS, false, &pa), -ENOSPC);
	ck_assert_uint_eq(a.navail, 100);
	ck_assert_int_eq(csdfs_alloc_place(&a, 70 * BS, false, &pa), 0);
	ck_assert_uint_eq(a.navail, 30);
	ck_assert_uint_eq(a.head_end, (FIRST + 70) * BS);
	check_navail(&a);
	csdfs_alloc_release(&a);
}
END_TEST

START_TEST(test_unplace)
{
	struct csdfs_alloc a;
	struct csdfs_range *q;
	uint64_t p1, p2, p3, pa;
	size_t n;

	setup_alloc(&a, 4000);
	csdfs_alloc_mark_free(&a, FIRST, 4000 - FIRST);
	ck_assert_int_eq(csdfs_alloc_place(&a, 1000, false, &p1), 0);
	ck_assert_int_eq(csdfs_alloc_place(&a, 3 * BS, false, &p2), 0);
	ck_assert_int_eq(csdfs_alloc_place(&a, 500, false, &p3), 0);
	ck_assert_uint_eq(p2, p1 + 1000);
	ck_assert_uint_eq(p3, p2 + 3 * BS);

	/* The latest placement rewinds the head, nothing is quarantined. */
	csdfs_alloc_unplace(&a, p3, 500);
	ck_assert_uint_eq(a.head, p3);
	ck_assert_uint_eq(a.nquar, 0);
	/* So does the one before it, now the latest. */
	csdfs_alloc_unplace(&a, p2, 3 * BS);
	ck_assert_uint_eq(a.head, p2);
	ck_assert_uint_eq(a.nquar, 0);
	ck_assert_int_eq(csdfs_alloc_place(&a, 3 * BS, false, &pa), 0);
	ck_assert_uint_eq(pa, p2);
	ck_assert_int_eq(csdfs_alloc_place(&a, 10, false, &p3), 0);

	/* An older placement quarantines only the blocks it covers whole:
	 * p2 = [16*BS+1000, 19*BS+1000) covers blocks 17 and 18. */
	csdfs_alloc_unplace(&a, p2, 3 * BS);
	ck_assert_uint_eq(a.head, p3 + 10);
	n = csdfs_alloc_take_quarantine(&a, &q);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(q[0].start, 17);
	ck_assert_uint_eq(q[0].count, 2);
	free(q);
	/* An older placement inside one block quarantines nothing. */
	csdfs_alloc_unplace(&a, p1, 1000);
	ck_assert_uint_eq(a.nquar, 0);
	ck_assert_uint_eq(a.head, p3 + 10);
	csdfs_alloc_release(&a);
}
END_TEST

START_TEST(test_unplace_new_run)
{
	struct csdfs_alloc a;
	uint64_t pa, p2;

	/* The latest placement opened a new run: unplacing it rewinds the
	 * head to that run's start, the run stays reserved, and the old
	 * run's untouched blocks stay given back. */
	setup_alloc(&a, 2000);
	csdfs_alloc_mark_free(&a, 16, 4);
	csdfs_alloc_mark_free(&a, 100, 50);
	ck_assert_int_eq(csdfs_alloc_place(&a, 100, false, &pa), 0);
	ck_assert_uint_eq(pa, 16 * BS);
	ck_assert_int_eq(csdfs_alloc_place(&a, 5 * BS, false, &p2), 0);
	ck_assert_uint_eq(p2, 100 * BS);
	ck_assert_uint_eq(a.navail, 3);  /* blocks 17..19 given back */
	csdfs_alloc_unplace(&a, p2, 5 * BS);
	ck_assert_uint_eq(a.head, 100 * BS);
	ck_assert_uint_eq(a.head_end, 150 * BS);
	ck_assert_uint_eq(a.navail, 3);
	ck_assert_int_eq(csdfs_alloc_place(&a, 7, false, &pa), 0);
	ck_assert_uint_eq(pa, 100 * BS);
	check_navail(&a);
	csdfs_alloc_release(&a);
}
END_TEST

/* The reuse callback (punching freed ranges out of the container) sees
 * each run about to become allocatable, coalesced, before it does. */
struct cb_log {
	struct csdfs_alloc *a;
	struct csdfs_range runs[8];
	int n;
	int fail;
};

static int record_cb(void *ctx, uint64_t start, uint64_t count)
{
	struct cb_log *l = ctx;

	ck_assert_int_lt(l->n, 8);
	/* Not allocatable yet while the callback runs. */
	for (uint64_t b = start; b < start + count; b++)
		ck_assert_int_eq(avail(l->a, b), 0);
	l->runs[l->n].start = start;
	l->runs[l->n].count = count;
	l->n++;
	return l->fail;
}

START_TEST(test_reuse_callback)
{
	struct csdfs_alloc a;
	struct cb_log log = { .a = &a };
	uint64_t pa;
	int slot;

	setup_alloc(&a, 4000);
	csdfs_alloc_mark_free(&a, FIRST, 2000 - FIRST);
	ck_assert_int_eq(csdfs_alloc_place(&a, 6000, false, &pa), 0);
	slot = csdfs_alloc_inflight_add(&a, 2500 * BS + 100, 2502 * BS);
	ck_assert_int_ge(slot, 0);

	ck_assert_int_eq(csdfs_alloc_reuse(&a, 2495, 10, record_cb, &log), 0);
	ck_assert_int_eq(log.n, 2);
	ck_assert_uint_eq(log.runs[0].start, 2495);
	ck_assert_uint_eq(log.runs[0].count, 5);
	ck_assert_uint_eq(log.runs[1].start, 2502);
	ck_assert_uint_eq(log.runs[1].count, 3);
	ck_assert_uint_eq(a.nquar, 1);
	ck_assert_uint_eq(a.quar[0].start, 2500);
	ck_assert_uint_eq(a.quar[0].count, 2);
	for (uint64_t b = 2495; b < 2505; b++)
		ck_assert_int_eq(avail(&a, b), b < 2500 || b >= 2502);

	/* Busy blocks never reach the callback: the head's block 17 and
	 * the run ahead of it. Block 16 behind the head does. */
	log.n = 0;
	ck_assert_int_eq(csdfs_alloc_reuse(&a, 16, 4, record_cb, &log), 0);
	ck_assert_int_eq(log.n, 1);
	ck_assert_uint_eq(log.runs[0].start, 16);
	ck_assert_uint_eq(log.runs[0].count, 1);

	/* A failing callback does not keep the blocks from being reused. */
	log.n = 0;
	log.fail = -EIO;
	ck_assert_int_eq(csdfs_alloc_reuse(&a, 3000, 3, record_cb, &log), 0);
	ck_assert_int_eq(log.n, 1);
	for (uint64_t b = 3000; b < 3003; b++)
		ck_assert_int_eq(avail(&a, b), 1);
	/* Nothing outside the data area reaches it either. */
	log.n = 0;
	ck_assert_int_eq(csdfs_alloc_reuse(&a, 0, FIRST, record_cb, &log), 0);
	ck_assert_int_eq(log.n, 0);
	check_navail(&a);
	csdfs_alloc_release(&a);
}
END_TEST

START_TEST(test_align)
{
	struct csdfs_alloc a;
	uint64_t pa;

	setup_alloc(&a, 2000);
	/* No run yet: nothing to align. */
	csdfs_alloc_align(&a);
	ck_assert_uint_eq(a.head, 0);
	csdfs_alloc_mark_free(&a, FIRST, 1);      /* a one-block run */
	csdfs_alloc_mark_free(&a, 100, 100);
	ck_assert_int_eq(csdfs_alloc_place(&a, 1000, false, &pa), 0);
	ck_assert_uint_eq(pa, 16 * BS);
	/* The rest of block 16 becomes padding; the run ends there. */
	csdfs_alloc_align(&a);
	ck_assert_uint_eq(a.head, 17 * BS);
	ck_assert_int_eq(csdfs_alloc_place(&a, 10, false, &pa), 0);
	ck_assert_uint_eq(pa, 100 * BS);
	csdfs_alloc_align(&a);
	ck_assert_uint_eq(a.head, 101 * BS);
	/* Aligned already: no change. */
	csdfs_alloc_align(&a);
	ck_assert_uint_eq(a.head, 101 * BS);
	ck_assert_int_eq(csdfs_alloc_place(&a, 2 * BS, false, &pa), 0);
	ck_assert_uint_eq(pa, 101 * BS);
	ck_assert_int_eq(csdfs_alloc_place(&a, 1, false, &pa), 0);
	ck_assert_uint_eq(pa, 103 * BS);
	check_navail(&a);
	csdfs_alloc_release(&a);
}
END_TEST

/*
 * Randomized model check. The model keeps every live placement and a
 * per-block count of live placements overlapping it. Random placements die;
 * a block whose count drops to zero is quarantined; every so often a
 * "commit" hands the quarantine to reuse, filtered (as the durable free map
 * would be) to blocks still unused. Invariants checked after every call:
 *  - a placement never overlaps a live placement;
 *  - a placement outside the previous head run only uses blocks that were
 *    allocatable just before the call, and they are no longer allocatable;
 *  - navail equals the number of set bits.
 * Some placements are given back with csdfs_alloc_unplace, as a write that
 * failed before its mapping does: the latest right away (the head must
 * rewind), older ones later.
 */
/* ck_assert costs a syscall per call in fork mode: check hot loops with
 * a plain branch and fail through ck_abort_msg only when it trips. */
#define CHECK(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

#define RT_TOTAL 6000u
#define RT_LIVE_MAX 4096

struct live {
	uint64_t pa, len;
};

START_TEST(test_random_model)
{
	static uint32_t refs[RT_TOTAL];
	static uint8_t before[RT_TOTAL];
	static struct live live[RT_LIVE_MAX];
	struct csdfs_alloc a;
	size_t nlive = 0;
	unsigned placed = 0, enospc = 0, unplaced = 0, fragmented = 0;

	rng_state = 0x5eed0a110c8ull + (uint64_t)_i;
	memset(refs, 0, sizeof(refs));
	setup_alloc(&a, RT_TOTAL);
	/* statfs's minimum run: a 16 KiB chunk, or a 128 KiB one. */
	csdfs_alloc_set_minrun(&a, _i == 1 ? 32 : 4);
	csdfs_alloc_mark_free(&a, FIRST, RT_TOTAL - FIRST);
	/* The last run keeps a reserve that only some placements may use. */
	if (_i == 2)
		a.reserve = 200;

	for (int step = 0; step < 60000; step++) {
		uint64_t r = rng_next() % 100;

		if (r < 55 && nlive < RT_LIVE_MAX) {
			uint64_t len, pa, old_head = a.head, old_end = a.head_end;
			bool use_reserve;
			int rc;

			switch (rng_next() % 4) {
			case 0: len = 1 + rng_next() % 200; break;
			case 1: len = 1 + rng_next() % 16384; break;
			case 2: len = 16384 + 64; break;
			default: len = 1 + rng_next() % (CSDFS_CHUNK_MAX + 512); break;
			}
			for (uint64_t b = 0; b < RT_TOTAL; b++)
				before[b] = (uint8_t)avail(&a, b);
			use_reserve = a.reserve && rng_next() % 5 == 0;
			rc = csdfs_alloc_place(&a, len, use_reserve, &pa);
			if (rc) {
				CHECK(rc == -ENOSPC && a.head == old_head &&
				      a.head_end == old_end,
				      "step %d: place(%llu) = %d", step,
				      (unsigned long long)len, rc);
				/* Without a reserve in the way, ENOSPC means no
				 * free run was long enough (nofit never goes stale). */
				if (!a.reserve || use_reserve) {
					uint64_t need = (len + BS - 1) / BS, run = 0;

					for (uint64_t b = FIRST; b < RT_TOTAL && run < need; b++)
						run = before[b] ? run + 1 : 0;
					CHECK(run < need, "step %d: place(%llu) = ENOSPC but a run of %llu blocks is free",
					      step, (unsigned long long)len,
					      (unsigned long long)need);
				}
				enospc++;
				continue;
			}
			placed++;
			CHECK(pa >= FIRST * BS && pa + len <= RT_TOTAL * BS,
			      "step %d: pa %llu outside the data area", step,
			      (unsigned long long)pa);
			/* No overlap with any live placement. */
			for (size_t i = 0; i < nlive; i++)
				CHECK(pa + len <= live[i].pa ||
					      live[i].pa + live[i].len <= pa,
					      "step %d: [%llu,+%llu) overlaps live [%llu,+%llu)",
					      step, (unsigned long long)pa,
					      (unsigned long long)len,
					      (unsigned long long)live[i].pa,
					      (unsigned long long)live[i].len);
			if (pa == old_head && pa + len <= old_end) {
				/* Packed into the head's reserved run. */
			} else {
				/* A new run: data never eats into the reserve. */
				CHECK(use_reserve || a.navail >= a.reserve,
				      "step %d: %llu blocks left, reserve %llu", step,
				      (unsigned long long)a.navail,
				      (unsigned long long)a.reserve);
				CHECK(pa % BS == 0, "step %d: new run not aligned", step);
				for (uint64_t b = pa / BS; b <= (pa + len - 1) / BS; b++)
					CHECK(before[b] && !avail(&a, b),
					      "step %d: block %llu handed out but not free",
					      step, (unsigned long long)b);
			}
			if (rng_next() % 100 < 8) {
				/* The write failed before its mapping: give the
				 * latest placement back, which rewinds the head. */
				csdfs_alloc_unplace(&a, pa, len);
				CHECK(a.head == pa, "step %d: unplace did not rewind", step);
				unplaced++;
				continue;
			}
			for (uint64_t b = pa / BS; b <= (pa + len - 1) / BS; b++)
				refs[b]++;
			live[nlive].pa = pa;
			live[nlive].len = len;
			nlive++;
		} else if (r < 95 && nlive) {
			size_t i = rng_next() % nlive;
			struct live d = live[i];

			live[i] = live[--nlive];
			/* 92..94: an older placement whose write failed. */
			if (r >= 92) {
				csdfs_alloc_unplace(&a, d.pa, d.len);
				unplaced++;
			}
			for (uint64_t b = d.pa / BS; b <= (d.pa + d.len - 1) / BS; b++) {
				CHECK(refs[b] > 0, "step %d: model broken", step);
				if (!--refs[b])
					CHECK(!csdfs_alloc_quarantine(&a, b, 1),
					      "step %d: quarantine failed", step);
			}
		} else {
			struct csdfs_range *q;
			size_t n = csdfs_alloc_take_quarantine(&a, &q);

			for (size_t i = 0; i < n; i++)
				for (uint64_t b = q[i].start; b < q[i].start + q[i].count; b++)
					if (!refs[b])  /* the durable map's filter */
						CHECK(!csdfs_alloc_reuse(&a, b, 1, NULL, NULL),
						      "step %d: reuse failed", step);
			free(q);
		}
		if (!(step % 997))
			CHECK(popcount_bits(&a) == a.navail, "step %d: navail off", step);
		/* The kept count of usable blocks is the walk's, whatever the
		 * fragmentation (csdfs_alloc_usable must not walk). */
		if (!(step % 97)) {
			uint64_t kept = csdfs_alloc_usable(&a);
			uint64_t walked = csdfs_alloc_usable_scan(&a, a.minrun);

			CHECK(kept == walked, "step %d: usable %llu, a walk finds %llu",
			      step, (unsigned long long)kept, (unsigned long long)walked);
			fragmented += a.nshort > 0;
		}
	}
	check_navail(&a);
	/* The check above must have met fragments too short to count. */
	ck_assert_uint_gt(fragmented, 10);
	fprintf(stderr, "random model %d: %u placed, %u ENOSPC, %u unplaced\n",
		_i, placed, enospc, unplaced);
	/* The test must really have exercised both outcomes. */
	ck_assert_uint_gt(placed, 10000);
	ck_assert_uint_gt(enospc, 100);
	csdfs_alloc_release(&a);
}
END_TEST

static Suite *alloc_suite(void)
{
	Suite *s = suite_create("alloc");
	TCase *basic = tcase_create("basic");
	TCase *quar = tcase_create("quarantine");
	TCase *rnd = tcase_create("random");

	tcase_add_test(basic, test_init_mark_free);
	tcase_add_test(basic, test_pack_back_to_back);
	tcase_add_test(basic, test_new_run_returns_untouched);
	tcase_add_test(basic, test_enter_hook);
	tcase_add_test(basic, test_enospc_fragmented);
	tcase_add_test(basic, test_usable_head_rest);
	tcase_add_test(basic, test_usable_run_tails);
	tcase_add_test(basic, test_enospc_remembered);
	tcase_add_test(basic, test_next_fit_wraps);
	tcase_add_test(basic, test_reserve);
	tcase_add_test(basic, test_reserve_need_exceeds);
	tcase_add_test(basic, test_align);
	suite_add_tcase(s, basic);

	tcase_add_test(quar, test_quarantine_reuse);
	tcase_add_test(quar, test_reuse_ahead_of_head_stays_quarantined);
	tcase_add_test(quar, test_inflight_exhaust);
	tcase_add_test(quar, test_unplace);
	tcase_add_test(quar, test_unplace_new_run);
	tcase_add_test(quar, test_reuse_callback);
	tcase_add_test(quar, test_quarantine_merge_incremental);
	suite_add_tcase(s, quar);

	/* Generous timeout: the same binary runs under valgrind. */
	tcase_set_timeout(rnd, 300);
	tcase_add_loop_test(rnd, test_random_model, 0, 3);
	suite_add_tcase(s, rnd);
	return s;
}

FIXTURE_MAIN(alloc_suite, FIXTURE_NO_TMP)
