/* SPDX-License-Identifier: MIT */
/*
 * csdfs-stat's status page (-f) and interval figures, from samples made by
 * hand: the paths a live mount of today's daemon does not reach, or only
 * on a full volume. The free space a whole chunk fits in, with and without
 * a share in runs too short for one. The chunk cache line of a daemon that reports its budget, of one older than the
 * budget field, of one without user.csdfs.cache at all, and of a mount
 * without a cache; and the interval hit ratio across a remount, which
 * restarts the daemon's counters. Built from tools/stat's sources: no
 * libcsdfs, no mount.
 */
#include "stat.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_run.h"

/* main.c's, which this test replaces. */
struct opts opt;

/* The line print_volume_page writes for @v under @label, without "\n"
 * (malloc'd; NULL if there is none). */
static char *page_line_of(const struct volume *v, const char *label)
{
	FILE *tmp = tmpfile();
	char line[512], *found = NULL;
	int saved;

	ck_assert_ptr_nonnull(tmp);
	fflush(stdout);
	saved = dup(STDOUT_FILENO);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_ge(dup2(fileno(tmp), STDOUT_FILENO), 0);
	print_volume_page(v);
	fflush(stdout);
	ck_assert_int_ge(dup2(saved, STDOUT_FILENO), 0);
	close(saved);
	rewind(tmp);
	while (!found && fgets(line, sizeof(line), tmp)) {
		if (strncmp(line, "  ", 2) || strncmp(line + 2, label, strlen(label)) ||
		    line[2 + strlen(label)] != ' ')
			continue;
		line[strcspn(line, "\n")] = '\0';
		found = strdup(line);
	}
	fclose(tmp);
	return found;
}

/* A sampled volume with the chunk cache's three counters. */
static void sample(struct volume *v)
{
	memset(v, 0, sizeof(*v));
	v->arg = v->mount = "/mnt/csdfs";
	v->ok = true;
	v->v[V_CACHE_HITS] = 5;
	v->v[V_CACHE_MISSES] = 15;
	v->v[V_CACHE_BYTES] = 3u << 19;        /* 1.5M */
	v->have = vbit(V_CACHE_HITS) | vbit(V_CACHE_MISSES) | vbit(V_CACHE_BYTES);
}

static void expect_line(const struct volume *v, const char *rest)
{
	char want[256], *got = page_line_of(v, "Chunk cache");

	snprintf(want, sizeof(want), "  %-22s %s", "Chunk cache", rest);
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got, want);
	free(got);
}

START_TEST(test_cache_line_budget)
{
	struct volume v;

	sample(&v);
	v.v[V_CACHE_BUDGET] = 123u << 19;    /* 61.5M */
	v.have |= vbit(V_CACHE_BUDGET);
	expect_line(&v, "hits 5, misses 15, hit ratio 25.0%, 1.5M held of 61.5M");
}
END_TEST

/* A daemon older than the budget field: the line without "of". */
START_TEST(test_cache_line_no_budget)
{
	struct volume v;

	sample(&v);
	expect_line(&v, "hits 5, misses 15, hit ratio 25.0%, 1.5M held");
	/* no lookup yet: no ratio */
	v.v[V_CACHE_HITS] = v.v[V_CACHE_MISSES] = 0;
	expect_line(&v, "hits 0, misses 0, hit ratio -, 1.5M held");
}
END_TEST

/* A daemon without user.csdfs.cache, or one that answered only part. */
START_TEST(test_cache_line_absent)
{
	struct volume v;

	sample(&v);
	v.have = 0;
	expect_line(&v, "-");
	sample(&v);
	v.have &= ~vbit(V_CACHE_BYTES);
	expect_line(&v, "-");
}
END_TEST

/* -o cache_size=0: a budget of 0 names the state instead of zeros. */
START_TEST(test_cache_line_off)
{
	struct volume v;

	sample(&v);
	v.v[V_CACHE_HITS] = v.v[V_CACHE_MISSES] = v.v[V_CACHE_BYTES] = 0;
	v.v[V_CACHE_BUDGET] = 0;
	v.have |= vbit(V_CACHE_BUDGET);
	expect_line(&v, "off (mounted with cache_size=0)");
}
END_TEST

/* The page's line @label: value right-aligned in 12 columns, then the note
 * if there is one. */
static void expect_page_line(const struct volume *v, const char *label,
			     const char *value, const char *note)
{
	char want[256], *got = page_line_of(v, label);

	snprintf(want, sizeof(want), "  %-22s %12s%s%s", label, value, *note ? "   " : "", note);
	ck_assert_ptr_nonnull(got);
	ck_assert_str_eq(got, want);
	free(got);
}

/* Free space in runs too short for a chunk is named when it is news, and
 * the line keeps its share of the capacity otherwise. */
START_TEST(test_free_usable_line)
{
	const char *label = "Free for whole chunks";
	struct volume v;

	memset(&v, 0, sizeof(v));
	v.arg = v.mount = "/mnt/csdfs";
	v.ok = true;
	v.v[V_CAP_PHYSICAL] = 64u << 20;
	v.v[V_FREE_PHYSICAL] = 97u << 17;       /* 12.1M */
	v.v[V_FREE_USABLE] = 0;
	v.have = vbit(V_CAP_PHYSICAL) | vbit(V_FREE_PHYSICAL) | vbit(V_FREE_USABLE);
	expect_page_line(&v, label, "0", "(12.1M free in runs too short for a chunk, or reserved)");
	/* a roomy volume: the gap is the reserve, no news */
	v.v[V_FREE_PHYSICAL] = 60u << 20;
	v.v[V_FREE_USABLE] = (60u << 20) - (256u << 10);
	expect_page_line(&v, label, "59.8M", "(93.4% of physical capacity)");
	/* a daemon older than the field */
	v.have &= ~vbit(V_FREE_USABLE);
	expect_page_line(&v, label, "-", "");
}
END_TEST

/* Set the interval delta of @f in @v. */
static void set_delta(struct volume *v, enum vfield f, int64_t d)
{
	for (size_t i = 0; i < NR_VDELTA; i++) {
		if (vdelta_fields[i] == f) {
			v->delta[i] = d;
			v->have_dv |= 1u << i;
			return;
		}
	}
	ck_abort_msg("field %d has no delta", (int)f);
}

START_TEST(test_interval_hit_ratio)
{
	struct volume v;
	double r = -1;

	sample(&v);
	/* since mount */
	ck_assert(cache_hit_ratio(&v, false, &r));
	ck_assert_double_eq_tol(r, 0.25, 1e-9);
	/* no interval yet (the first --watch sample) */
	ck_assert(!cache_hit_ratio(&v, true, &r));
	v.have_delta = true;
	v.interval = 1;
	set_delta(&v, V_CACHE_HITS, 3);
	set_delta(&v, V_CACHE_MISSES, 1);
	ck_assert(cache_hit_ratio(&v, true, &r));
	ck_assert_double_eq_tol(r, 0.75, 1e-9);
	/* a remount between the samples restarted the counters */
	set_delta(&v, V_CACHE_HITS, -120);
	r = -1;
	ck_assert(!cache_hit_ratio(&v, true, &r));
	ck_assert(r == -1);   /* left as it was */
	set_delta(&v, V_CACHE_HITS, 4);
	set_delta(&v, V_CACHE_MISSES, -2);
	ck_assert(!cache_hit_ratio(&v, true, &r));
	/* an interval without lookups */
	set_delta(&v, V_CACHE_MISSES, 0);
	set_delta(&v, V_CACHE_HITS, 0);
	ck_assert(!cache_hit_ratio(&v, true, &r));
}
END_TEST

static Suite *stat_page_suite(void)
{
	Suite *s = suite_create("stat_page");
	TCase *tc = tcase_create("cache");

	tcase_add_test(tc, test_cache_line_budget);
	tcase_add_test(tc, test_cache_line_no_budget);
	tcase_add_test(tc, test_cache_line_absent);
	tcase_add_test(tc, test_cache_line_off);
	tcase_add_test(tc, test_interval_hit_ratio);
	suite_add_tcase(s, tc);
	tc = tcase_create("space");
	tcase_add_test(tc, test_free_usable_line);
	suite_add_tcase(s, tc);
	return s;
}

CHECK_RUN_MAIN(stat_page_suite)
