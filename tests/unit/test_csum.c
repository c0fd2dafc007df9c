/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for csum.c: CRC32C known vectors, the "continue from crc"
 * convention, and agreement of the SSE4.2 path, the slice-by-8 table and a
 * bitwise reference on every length and alignment we can think of. A
 * mismatch between the two paths would make a volume written on one CPU
 * unreadable on another, so this is checked exhaustively for small sizes.
 */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture.h"
#include "csdfs/csum.h"
#include "csum_internal.h"

/* Bit-at-a-time CRC32C straight from the definition: the oracle. */
static uint32_t ref_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		for (int i = 0; i < 8; i++)
			crc = (crc & 1) ? (crc >> 1) ^ 0x82f63b78u : crc >> 1;
	}
	return ~crc;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_next(void)
{
	/* xorshift64*: deterministic, so a failure reproduces. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

static void rng_fill(unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(rng_next() >> 56);
}

START_TEST(test_check_value)
{
	ck_assert_uint_eq(csdfs_crc32c(0, "123456789", 9), 0xe3069283u);
	ck_assert_uint_eq(csdfs_crc32c_sw(0, "123456789", 9), 0xe3069283u);
	ck_assert_uint_eq(ref_crc32c(0, "123456789", 9), 0xe3069283u);
	if (csdfs_crc32c_hw_usable())
		ck_assert_uint_eq(csdfs_crc32c_hw(0, "123456789", 9),
				  0xe3069283u);
}
END_TEST

/* RFC 3720 (iSCSI) appendix B.4 vectors, 32 bytes each. */
START_TEST(test_rfc3720_vectors)
{
	unsigned char buf[32];

	memset(buf, 0, sizeof(buf));
	ck_assert_uint_eq(csdfs_crc32c(0, buf, sizeof(buf)), 0x8a9136aau);
	memset(buf, 0xff, sizeof(buf));
	ck_assert_uint_eq(csdfs_crc32c(0, buf, sizeof(buf)), 0x62a8ab43u);
	for (int i = 0; i < 32; i++)
		buf[i] = (unsigned char)i;
	ck_assert_uint_eq(csdfs_crc32c(0, buf, sizeof(buf)), 0x46dd794eu);
	for (int i = 0; i < 32; i++)
		buf[i] = (unsigned char)(31 - i);
	ck_assert_uint_eq(csdfs_crc32c(0, buf, sizeof(buf)), 0x113fdb5cu);
}
END_TEST

START_TEST(test_empty)
{
	ck_assert_uint_eq(csdfs_crc32c(0, NULL, 0), 0);
	ck_assert_uint_eq(csdfs_crc32c(0xdeadbeefu, NULL, 0), 0xdeadbeefu);
	ck_assert_uint_eq(csdfs_crc32c_sw(0x12345678u, "", 0), 0x12345678u);
	if (csdfs_crc32c_hw_usable())
		ck_assert_uint_eq(csdfs_crc32c_hw(0x12345678u, "", 0),
				  0x12345678u);
}
END_TEST

/* crc(crc(0, a), b) == crc(0, a || b) for every split point. */
START_TEST(test_compose)
{
	static unsigned char buf[4096];
	uint32_t whole;

	rng_fill(buf, sizeof(buf));
	whole = ref_crc32c(0, buf, sizeof(buf));
	ck_assert_uint_eq(csdfs_crc32c(0, buf, sizeof(buf)), whole);
	for (size_t split = 0; split <= sizeof(buf); split++) {
		uint32_t a = csdfs_crc32c(0, buf, split);

		ck_assert_uint_eq(csdfs_crc32c(a, buf + split,
					       sizeof(buf) - split), whole);
		/* The paths must also compose with each other. */
		a = csdfs_crc32c_sw(0, buf, split);
		ck_assert_uint_eq(csdfs_crc32c(a, buf + split,
					       sizeof(buf) - split), whole);
	}
	/* Three pieces, the middle one tiny and unaligned. */
	ck_assert_uint_eq(csdfs_crc32c(csdfs_crc32c(csdfs_crc32c(0, buf, 13),
						    buf + 13, 3),
				       buf + 16, sizeof(buf) - 16), whole);
}
END_TEST

/* Every length 0..600 at every offset 0..15: covers head/body/tail paths. */
START_TEST(test_hw_sw_small)
{
	static unsigned char buf[640];

	rng_fill(buf, sizeof(buf));
	for (size_t off = 0; off < 16; off++)
		for (size_t len = 0; len + off <= 616; len++) {
			uint32_t seed = (uint32_t)rng_next();
			uint32_t want = ref_crc32c(seed, buf + off, len);

			ck_assert_uint_eq(csdfs_crc32c_sw(seed, buf + off, len),
					  want);
			ck_assert_uint_eq(csdfs_crc32c(seed, buf + off, len),
					  want);
			if (!csdfs_crc32c_hw_usable())
				continue;
			ck_assert_uint_eq(csdfs_crc32c_hw(seed, buf + off, len),
					  want);
		}
}
END_TEST

/* Random large lengths and alignments, up to a 128 KiB chunk and beyond. */
START_TEST(test_hw_sw_large)
{
	size_t cap = 256 * 1024 + 64;
	unsigned char *buf = malloc(cap);

	ck_assert_ptr_nonnull(buf);
	rng_fill(buf, cap);
	for (int i = 0; i < 200; i++) {
		size_t off = rng_next() % 64;
		size_t len = rng_next() % (cap - off + 1);
		uint32_t seed = i % 2 ? (uint32_t)rng_next() : 0;
		uint32_t sw = csdfs_crc32c_sw(seed, buf + off, len);

		if (i < 20)
			ck_assert_uint_eq(ref_crc32c(seed, buf + off, len), sw);
		ck_assert_uint_eq(csdfs_crc32c(seed, buf + off, len), sw);
		if (csdfs_crc32c_hw_usable())
			ck_assert_uint_eq(csdfs_crc32c_hw(seed, buf + off, len),
					  sw);
	}
	free(buf);
}
END_TEST

/* Lengths on either side of 1, 2 and 4 blocks of the hardware path's three
 * lanes (3 KiB, 6 KiB, 12 KiB), at every 8-byte misalignment. */
START_TEST(test_hw_sw_lane_blocks)
{
	static unsigned char buf[12 * 1024 + 64];
	static const size_t around[] = { 3072, 6144, 12288 };

	rng_fill(buf, sizeof(buf));
	for (size_t a = 0; a < sizeof(around) / sizeof(around[0]); a++)
		for (size_t len = around[a] - 40; len <= around[a] + 40; len++)
			for (size_t off = 0; off < 8; off++) {
				uint32_t seed = (uint32_t)rng_next();
				uint32_t sw = csdfs_crc32c_sw(seed, buf + off, len);

				ck_assert_uint_eq(csdfs_crc32c(seed, buf + off, len), sw);
				if (csdfs_crc32c_hw_usable())
					ck_assert_uint_eq(csdfs_crc32c_hw(seed, buf + off,
									  len), sw);
			}
	ck_assert_uint_eq(csdfs_crc32c_sw(0, buf, 3072),
			  ref_crc32c(0, buf, 3072));
}
END_TEST

/* A flipped bit anywhere must change the CRC (CRCs detect all 1-bit errors). */
START_TEST(test_single_bit_errors)
{
	static unsigned char buf[1024];
	uint32_t good;

	rng_fill(buf, sizeof(buf));
	good = csdfs_crc32c(0, buf, sizeof(buf));
	for (size_t bit = 0; bit < sizeof(buf) * 8; bit++) {
		buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		ck_assert_uint_ne(csdfs_crc32c(0, buf, sizeof(buf)), good);
		buf[bit / 8] ^= (unsigned char)(1u << (bit % 8));
	}
}
END_TEST

static Suite *csum_suite(void)
{
	Suite *s = suite_create("csum");
	TCase *tc = tcase_create("crc32c");

	if (!csdfs_crc32c_hw_usable())
		fprintf(stderr, "test_csum: no SSE4.2, hw path not compared\n");
	/* Generous: valgrind runs this too. */
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_check_value);
	tcase_add_test(tc, test_rfc3720_vectors);
	tcase_add_test(tc, test_empty);
	tcase_add_test(tc, test_compose);
	tcase_add_test(tc, test_hw_sw_small);
	tcase_add_test(tc, test_hw_sw_large);
	tcase_add_test(tc, test_hw_sw_lane_blocks);
	tcase_add_test(tc, test_single_bit_errors);
	suite_add_tcase(s, tc);
	return s;
}

FIXTURE_MAIN(csum_suite, FIXTURE_NO_TMP)
