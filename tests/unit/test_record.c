/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for record.c, the one place LMDB records are encoded and
 * decoded: every layout covers its struct exactly, the bytes it writes are
 * little-endian whatever the host (checked against bytes written out by
 * hand), a value of the wrong length is refused, and a volume made before
 * little-endian records opens here only because this host is little-endian.
 */
#include <check.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "fixture.h"
#include "record.h"

/* Each layout's widths add up to its size, and every width is 1, 2, 4, 8. */
START_TEST(test_layouts_cover_structs)
{
	static const struct {
		const struct csdfs_rec_type *t;
		size_t size;
	} want[] = {
		{ &csdfs_rec_inode_type, sizeof(struct csdfs_inode_disk) },
		{ &csdfs_rec_chunk_type, sizeof(struct csdfs_chunk_disk) },
		{ &csdfs_rec_phys_type, sizeof(struct csdfs_phys_disk) },
		{ &csdfs_rec_dirent_type, sizeof(struct csdfs_dirent_disk) },
		{ &csdfs_rec_counters_type, sizeof(struct csdfs_counters_disk) },
		{ &csdfs_rec_rollup_type, sizeof(struct csdfs_rollup_disk) },
		{ &csdfs_rec_le64_type, 8 },
		{ &csdfs_rec_le32_type, 4 },
	};
	size_t n = 0;

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		size_t sum = 0;

		ck_assert_uint_eq(want[i].t->size, want[i].size);
		for (const char *f = want[i].t->fields; *f; f++) {
			ck_assert_msg(*f == '1' || *f == '2' || *f == '4' || *f == '8',
				      "%s: width '%c'", want[i].t->name, *f);
			sum += (size_t)(*f - '0');
		}
		ck_assert_msg(sum == want[i].size, "%s: fields cover %zu of %zu bytes",
			      want[i].t->name, sum, want[i].size);
	}
	while (csdfs_rec_types[n])
		n++;
	ck_assert_uint_eq(n, sizeof(want) / sizeof(want[0]));
}
END_TEST

/* Little-endian bytes of @v in @w bytes at @p. */
static void le_put(unsigned char *p, uint64_t v, unsigned w)
{
	for (unsigned i = 0; i < w; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* A chunk record's bytes are its fields, little-endian, in order. */
START_TEST(test_chunk_bytes)
{
	struct csdfs_chunk_disk c = {
		.pa = 0x0102030405060708ull, .plen = 0x11223344u, .llen = 0x4000u,
		.csum = 0xdeadbeefu, .codec = 2, .level = -3, .flags = 0x5,
	}, back;
	unsigned char want[24] = { 0 }, got[24];
	struct csdfs_val v = { got, sizeof(got) };

	le_put(want, c.pa, 8);
	le_put(want + 8, c.plen, 4);
	le_put(want + 12, c.llen, 4);
	le_put(want + 16, c.csum, 4);
	want[20] = 2;
	want[21] = (unsigned char)-3;
	want[22] = 0x5;
	csdfs_rec_encode(&csdfs_rec_chunk_type, &c, got);
	ck_assert_mem_eq(got, want, sizeof(want));
	ck_assert_int_eq(csdfs_rec_chunk_decode(&v, &back), 0);
	ck_assert_mem_eq(&back, &c, sizeof(c));
}
END_TEST

/* The inode record, the one with every width: fields at the offsets
 * format.h gives them, little-endian. */
START_TEST(test_inode_bytes)
{
	struct csdfs_inode_disk r, back;
	unsigned char got[160];
	struct csdfs_val v = { got, sizeof(got) };
	uint64_t x;

	memset(&r, 0, sizeof(r));
	r.mode = 0100644;
	r.nlink = 3;
	r.size = 0x123456789aull;
	r.mtime_ns = -2;
	r.parent = 7;
	r.chunk_size = 16384;
	r.codec = 1;
	r.level = 19;
	r.flags = 0x1234;
	r.raw_bytes = 0x0807060504030201ull;
	csdfs_rec_encode(&csdfs_rec_inode_type, &r, got);
	/* The offsets format.h's layout gives, written out. */
	ck_assert_uint_eq(offsetof(struct csdfs_inode_disk, mtime_ns), 40);
	ck_assert_uint_eq(offsetof(struct csdfs_inode_disk, parent), 64);
	ck_assert_uint_eq(offsetof(struct csdfs_inode_disk, chunk_size), 112);
	ck_assert_uint_eq(offsetof(struct csdfs_inode_disk, raw_bytes), 120);
	ck_assert_uint_eq(got[0] | got[1] << 8 | got[2] << 16, 0100644);
	ck_assert_uint_eq(got[12], 3);
	for (unsigned i = 0; i < 8; i++)
		ck_assert_uint_eq(got[16 + i], (r.size >> (8 * i)) & 0xff);
	for (unsigned i = 0; i < 8; i++)             /* mtime_ns = -2 */
		ck_assert_uint_eq(got[40 + i], i ? 0xff : 0xfe);
	ck_assert_uint_eq(got[64], 7);               /* parent */
	ck_assert_uint_eq(got[112] | got[113] << 8, 16384);
	ck_assert_uint_eq(got[116], 1);
	ck_assert_uint_eq(got[117], 19);
	ck_assert_uint_eq(got[118], 0x34);           /* flags, low byte first */
	ck_assert_uint_eq(got[119], 0x12);
	x = 0;
	for (unsigned i = 0; i < 8; i++)
		x |= (uint64_t)got[120 + i] << (8 * i);
	ck_assert_uint_eq(x, r.raw_bytes);
	ck_assert_int_eq(csdfs_rec_inode_decode(&v, &back), 0);
	ck_assert_mem_eq(&back, &r, sizeof(r));
}
END_TEST

/* Stored bytes are hostile: any other length is corruption. */
START_TEST(test_wrong_length_refused)
{
	unsigned char buf[200] = { 0 };

	for (const struct csdfs_rec_type *const *t = csdfs_rec_types; *t; t++) {
		unsigned char out[160];
		size_t lens[] = { 0, (*t)->size - 1, (*t)->size + 1, sizeof(buf) };

		for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
			struct csdfs_val v = { buf, lens[i] };

			ck_assert_msg(csdfs_rec_decode(*t, &v, out) == -EUCLEAN,
				      "%s: %zu bytes accepted", (*t)->name, lens[i]);
		}
	}
}
END_TEST

/* Without LE_RECORDS a volume's records are in its host's order: fine on
 * a little-endian host, refused on a big-endian one; with it, fine on both. */
START_TEST(test_record_order_check)
{
	ck_assert_int_eq(csdfs_rec_order_check(0, true), 0);
	ck_assert_int_eq(csdfs_rec_order_check(CSDFS_FEATURE_INCOMPAT_SYNCED, false),
			 -EPROTONOSUPPORT);
	ck_assert_int_eq(csdfs_rec_order_check(CSDFS_FEATURE_INCOMPAT_SUPP, false), 0);
	ck_assert_int_eq(csdfs_rec_order_check(CSDFS_FEATURE_INCOMPAT_SUPP, true), 0);
	/* This suite runs where csdfs volumes have been made so far. */
	ck_assert(csdfs_rec_host_le());
}
END_TEST

static Suite *record_suite(void)
{
	Suite *s = suite_create("record");
	TCase *tc = tcase_create("record");

	tcase_add_test(tc, test_layouts_cover_structs);
	tcase_add_test(tc, test_chunk_bytes);
	tcase_add_test(tc, test_inode_bytes);
	tcase_add_test(tc, test_wrong_length_refused);
	tcase_add_test(tc, test_record_order_check);
	suite_add_tcase(s, tc);
	return s;
}

FIXTURE_MAIN(record_suite, FIXTURE_NO_TMP)
