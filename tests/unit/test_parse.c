/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for parse.c: sizes and whole numbers as users type them for
 * csdfs-mkfs and the daemon's -o options. Every size up to 2^64 - 1 must be
 * expressible (csdfs-mkfs goes to 4P); nothing with a sign, a blank, a
 * fraction or an unknown suffix is a number, and nothing wraps around
 * ("-1" was once 2^64 - 1, a commit interval of 49 days).
 */
#include <check.h>
#include <errno.h>
#include <stdint.h>

#include "fixture.h"

struct good { const char *text; uint64_t want; };
struct bad { const char *text; int err; };

static void sizes_good(const struct good *g, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t v = 12345;
		int rc = csdfs_parse_size(g[i].text, &v);

		ck_assert_msg(rc == 0, "'%s' refused (%d)", g[i].text, rc);
		ck_assert_msg(v == g[i].want, "'%s' gave %llu", g[i].text, (unsigned long long)v);
	}
}

static void sizes_bad(const struct bad *b, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t v = 12345;
		int rc = csdfs_parse_size(b[i].text, &v);

		ck_assert_msg(rc == b[i].err, "'%s': %d, expected %d", b[i].text, rc, b[i].err);
		ck_assert_msg(v == 12345, "'%s' wrote its result", b[i].text);
	}
}

#define N(a) (sizeof(a) / sizeof((a)[0]))

START_TEST(test_size_suffixes)
{
	static const struct good g[] = {
		{ "0", 0 }, { "123", 123 }, { "4K", 4096 }, { "4k", 4096 },
		{ "16M", 16ull << 20 }, { "16MiB", 16ull << 20 }, { "16MB", 16ull << 20 },
		{ "16mb", 16ull << 20 }, { "8G", 8ull << 30 }, { "1T", 1ull << 40 },
		{ "1P", 1ull << 50 }, { "4P", 4ull << 50 }, { "4PiB", 4ull << 50 },
		{ "1p", 1ull << 50 }, { "1E", 1ull << 60 }, { "15E", 15ull << 60 },
		{ "0G", 0 },
	};

	sizes_good(g, N(g));
}
END_TEST

/* The largest value of each suffix, and one more */
START_TEST(test_size_limits)
{
	static const struct good g[] = {
		{ "18446744073709551615", UINT64_MAX },
		{ "16383P", 16383ull << 50 },
		{ "16777215T", 16777215ull << 40 },
		{ "17179869183G", 17179869183ull << 30 },
		{ "18014398509481983K", 18014398509481983ull << 10 },
	};
	static const struct bad b[] = {
		{ "18446744073709551616", -ERANGE }, { "99999999999999999999999", -ERANGE },
		{ "16384P", -ERANGE }, { "16E", -ERANGE }, { "16777216T", -ERANGE },
		{ "17179869184G", -ERANGE }, { "18014398509481984K", -ERANGE },
	};

	sizes_good(g, N(g));
	sizes_bad(b, N(b));
}
END_TEST

START_TEST(test_size_refused)
{
	static const struct bad b[] = {
		{ "", -EINVAL }, { "-1", -EINVAL }, { "-5G", -EINVAL },
		{ " -1", -EINVAL },     /* strtoull would skip the blank and negate */
		{ " 5", -EINVAL }, { "+5", -EINVAL }, { "5 ", -EINVAL }, { "abc", -EINVAL },
		{ "G", -EINVAL }, { "1.5G", -EINVAL }, { "0x10", -EINVAL }, { "10Q", -EINVAL },
		{ "1Z", -EINVAL }, { "1KK", -EINVAL }, { "1GiBs", -EINVAL }, { "1iB", -EINVAL },
		{ "1B", -EINVAL },      /* a bare B is not a suffix of ours */
	};
	uint64_t v = 12345;

	ck_assert_int_eq(csdfs_parse_size(NULL, &v), -EINVAL);
	ck_assert(v == 12345);
	sizes_bad(b, N(b));
}
END_TEST

START_TEST(test_u64)
{
	uint64_t v = 7;

	ck_assert_int_eq(csdfs_parse_u64("0", &v), 0);
	ck_assert_uint_eq(v, 0);
	ck_assert_int_eq(csdfs_parse_u64("1000", &v), 0);
	ck_assert_uint_eq(v, 1000);
	ck_assert_int_eq(csdfs_parse_u64("18446744073709551615", &v), 0);
	ck_assert(v == UINT64_MAX);
	v = 7;
	ck_assert_int_eq(csdfs_parse_u64("18446744073709551616", &v), -ERANGE);
	ck_assert_int_eq(csdfs_parse_u64("-1", &v), -EINVAL);
	ck_assert_int_eq(csdfs_parse_u64("-3", &v), -EINVAL);
	ck_assert_int_eq(csdfs_parse_u64(" 3", &v), -EINVAL);
	ck_assert_int_eq(csdfs_parse_u64("3 ", &v), -EINVAL);
	ck_assert_int_eq(csdfs_parse_u64("+3", &v), -EINVAL);
	ck_assert_int_eq(csdfs_parse_u64("abc", &v), -EINVAL);
	ck_assert_int_eq(csdfs_parse_u64("4K", &v), -EINVAL);
	ck_assert_int_eq(csdfs_parse_u64("1e3", &v), -EINVAL);
	ck_assert_int_eq(csdfs_parse_u64("", &v), -EINVAL);
	ck_assert_int_eq(csdfs_parse_u64(NULL, &v), -EINVAL);
	ck_assert_uint_eq(v, 7);
}
END_TEST

static Suite *parse_suite(void)
{
	Suite *s = suite_create("parse");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, test_size_suffixes);
	tcase_add_test(tc, test_size_limits);
	tcase_add_test(tc, test_size_refused);
	tcase_add_test(tc, test_u64);
	suite_add_tcase(s, tc);
	return s;
}

FIXTURE_MAIN(parse_suite, FIXTURE_NO_TMP)
