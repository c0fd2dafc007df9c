/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for alloc.c, the in-memory allocator: pure, no volume. Covers
 * marking free space, byte-exact packing at the head, moving the head to a
 * new run (and giving back what the old run never used), -ENOSPC on a
 * fragmented bitmap, next-fit with wrap-around, the quarantine/reuse cycle
 * around the head's run and in-flight placements, in-flight slot
 * exhaustion, and a randomized model check: placements never overlap a live
 * placement and a new run is only ever cut from blocks marked allocatable.
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	ck_assert_int_eq(csdfs_alloc_place(&a, 1, &pa), -ENOSPC);
	ck_assert_int_eq(csdfs_alloc_place(&a, 0, &pa), -EINVAL);

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
		ck_assert_int_eq(csdfs_alloc_place(&a, lens[i], &pa), 0);
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

	ck_assert_int_eq(csdfs_alloc_place(&a, 4096, &pa), 0);
	ck_assert_uint_eq(pa, 16 * BS);
	ck_assert_uint_eq(a.head_end, 18 * BS);
	ck_assert_uint_eq(a.navail, 1000);

	/* 8 KiB does not fit in the 4 KiB left: move to the next run and
	 * give back block 17, which the old run never touched. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 8192, &pa), 0);
	ck_assert_uint_eq(pa, 100 * BS);
	ck_assert_int_eq(avail(&a, 16), 0);
	ck_assert_int_eq(avail(&a, 17), 1);
	ck_assert_uint_eq(a.navail, 1);
	check_navail(&a);

	/* A partly used block is never given back. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 100, &pa), 0);
	ck_assert_uint_eq(pa, 102 * BS);
	/* Head now at 102*BS+100: the run's rest is 997 blocks + 3996 B.
	 * Ask for more than that: only block 17 is free, too short. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 998 * BS, &pa), -ENOSPC);
	/* A failed placement changes nothing. */
	ck_assert_uint_eq(a.navail, 1);
	ck_assert_uint_eq(a.head, 102 * BS + 100);
	ck_assert_uint_eq(a.head_end, 1100 * BS);
	check_navail(&a);
	/* Fill the run, then one more byte moves the head to block 17. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 1100 * BS - a.head, &pa), 0);
	ck_assert_uint_eq(a.head, 1100 * BS);
	ck_assert_int_eq(csdfs_alloc_place(&a, 1, &pa), 0);
	ck_assert_uint_eq(pa, 17 * BS);
	ck_assert_uint_eq(a.navail, 0);
	/* A placement that ended exactly at a run's end gives back nothing. */
	for (uint64_t b = 100; b < 1100; b++)
		ck_assert_int_eq(avail(&a, b), 0);
	check_navail(&a);
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
	ck_assert_int_eq(csdfs_alloc_place(&a, BS + 1, &pa), -ENOSPC);
	ck_assert_uint_eq(a.navail, before);
	/* One block is fine, and so is packing into its rest. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 4000, &pa), 0);
	ck_assert_uint_eq(pa, FIRST * BS);
	ck_assert_int_eq(csdfs_alloc_place(&a, 96, &pa), 0);
	ck_assert_uint_eq(pa, FIRST * BS + 4000);
	ck_assert_int_eq(csdfs_alloc_place(&a, 2 * BS, &pa), -ENOSPC);
	ck_assert_int_eq(csdfs_alloc_place(&a, BS, &pa), 0);
	ck_assert_uint_eq(pa, (FIRST + 2) * BS);
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
	ck_assert_int_eq(csdfs_alloc_place(&a, R * BS, &pa), 0);
	ck_assert_uint_eq(pa, FIRST * BS);
	ck_assert_int_eq(csdfs_alloc_place(&a, R * BS, &pa), 0);
	ck_assert_uint_eq(pa, (FIRST + R) * BS);
	ck_assert_uint_eq(a.hint, FIRST + 2 * R);

	/* The first run becomes free again (as after a durable commit). */
	csdfs_alloc_mark_free(&a, FIRST, R);
	/* Next fit: the search continues at the hint, not at the start. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 900 * BS, &pa), 0);
	ck_assert_uint_eq(pa, (FIRST + 2 * R) * BS);
	ck_assert_uint_eq(a.head_end, 3000 * BS);  /* short run: 936 blocks */
	ck_assert_uint_eq(a.hint, 3000);

	/* Nothing left past the hint: wrap around to the first run, and
	 * give back the 36 blocks the old run never touched. */
	ck_assert_int_eq(csdfs_alloc_place(&a, 100 * BS, &pa), 0);
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
	ck_assert_int_eq(csdfs_alloc_place(&a, 6000, &pa), 0);
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
		ck_assert_int_eq(csdfs_alloc_reuse(&a, q[i].start, q[i].count), 0);
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
	ck_assert_int_eq(csdfs_alloc_place(&a, 1040 * BS - a.head, &pa), 0);
	ck_assert_int_eq(csdfs_alloc_place(&a, 10, &pa), 0);
	ck_assert_uint_ge(pa, 1040 * BS);
	for (size_t i = 0; i < n; i++)
		ck_assert_int_eq(csdfs_alloc_reuse(&a, q[i].start, q[i].count), 0);
	free(q);
	ck_assert_int_eq(avail(&a, 17), 1);
	ck_assert_int_eq(avail(&a, 2500), 1);
	ck_assert_int_eq(avail(&a, 2501), 1);
	ck_assert_uint_eq(a.nquar, 0);

	/* Reuse ignores blocks outside the data area. */
	ck_assert_int_eq(csdfs_alloc_reuse(&a, 0, FIRST), 0);
	ck_assert_int_eq(csdfs_alloc_reuse(&a, 3999, 10), 0);
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
	ck_assert_int_eq(csdfs_alloc_place(&a, 100, &pa), 0);
	ck_assert_int_eq(csdfs_alloc_quarantine(&a, 500, 3), 0);
	n = csdfs_alloc_take_quarantine(&a, &q);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(csdfs_alloc_reuse(&a, q[0].start, q[0].count), 0);
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
 */
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
	unsigned placed = 0, enospc = 0;

	rng_state = 0x5eed0a110c8ull + (uint64_t)_i;
	memset(refs, 0, sizeof(refs));
	setup_alloc(&a, RT_TOTAL);
	csdfs_alloc_mark_free(&a, FIRST, RT_TOTAL - FIRST);

	for (int step = 0; step < 60000; step++) {
		uint64_t r = rng_next() % 100;

		if (r < 55 && nlive < RT_LIVE_MAX) {
			uint64_t len, pa, old_head = a.head, old_end = a.head_end;
			int rc;

			switch (rng_next() % 4) {
			case 0: len = 1 + rng_next() % 200; break;
			case 1: len = 1 + rng_next() % 16384; break;
			case 2: len = 16384 + 64; break;
			default: len = 1 + rng_next() % (CSDFS_CHUNK_MAX + 512); break;
			}
			for (uint64_t b = 0; b < RT_TOTAL; b++)
				before[b] = (uint8_t)avail(&a, b);
			rc = csdfs_alloc_place(&a, len, &pa);
			if (rc) {
				ck_assert_int_eq(rc, -ENOSPC);
				enospc++;
				ck_assert_uint_eq(a.head, old_head);
				ck_assert_uint_eq(a.head_end, old_end);
				continue;
			}
			placed++;
			ck_assert_uint_ge(pa, FIRST * BS);
			ck_assert_uint_le(pa + len, RT_TOTAL * BS);
			/* No overlap with any live placement. */
			for (size_t i = 0; i < nlive; i++)
				ck_assert_msg(pa + len <= live[i].pa ||
					      live[i].pa + live[i].len <= pa,
					      "step %d: [%llu,+%llu) overlaps live [%llu,+%llu)",
					      step, (unsigned long long)pa,
					      (unsigned long long)len,
					      (unsigned long long)live[i].pa,
					      (unsigned long long)live[i].len);
			if (pa == old_head && pa + len <= old_end) {
				/* Packed into the head's reserved run. */
			} else {
				ck_assert_uint_eq(pa % BS, 0);
				for (uint64_t b = pa / BS; b <= (pa + len - 1) / BS; b++) {
					ck_assert_msg(before[b], "step %d: block %llu handed out but not free",
						      step, (unsigned long long)b);
					ck_assert_int_eq(avail(&a, b), 0);
				}
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
			for (uint64_t b = d.pa / BS; b <= (d.pa + d.len - 1) / BS; b++) {
				ck_assert_uint_gt(refs[b], 0);
				if (!--refs[b])
					ck_assert_int_eq(csdfs_alloc_quarantine(&a, b, 1), 0);
			}
		} else {
			struct csdfs_range *q;
			size_t n = csdfs_alloc_take_quarantine(&a, &q);

			for (size_t i = 0; i < n; i++)
				for (uint64_t b = q[i].start; b < q[i].start + q[i].count; b++)
					if (!refs[b])  /* the durable map's filter */
						ck_assert_int_eq(csdfs_alloc_reuse(&a, b, 1), 0);
			free(q);
		}
		if (!(step % 997))
			check_navail(&a);
	}
	check_navail(&a);
	/* The test must really have exercised both outcomes. */
	ck_assert_uint_gt(placed, 10000);
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
	tcase_add_test(basic, test_enospc_fragmented);
	tcase_add_test(basic, test_next_fit_wraps);
	suite_add_tcase(s, basic);

	tcase_add_test(quar, test_quarantine_reuse);
	tcase_add_test(quar, test_reuse_ahead_of_head_stays_quarantined);
	tcase_add_test(quar, test_inflight_exhaust);
	suite_add_tcase(s, quar);

	/* Generous timeout: the same binary runs under valgrind. */
	tcase_set_timeout(rnd, 300);
	tcase_add_loop_test(rnd, test_random_model, 0, 3);
	suite_add_tcase(s, rnd);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(alloc_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
