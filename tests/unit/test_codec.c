/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the codec table and its zstd/lz4 backends: spec parsing and
 * formatting, round trips for every codec and several levels on zero,
 * random, 2:1 and text data, the store-raw policy, and hostile stored bytes
 * (wrong llen, truncation, garbage, bit flips, the must-fail corpus). Every
 * decode goes into a heap buffer of exactly llen bytes and every hostile
 * input sits in a buffer of exactly its length, so valgrind and ASan see any
 * out-of-bounds access.
 *
 * Corpus: the folder named by $CSDFS_CORPUS_DIR holds files
 * <codec>-<llen>-<desc>.bin (codec as csdfs_codec_name() spells it, llen in
 * decimal) that csdfs_codec_decompress(codec, file, size, dst, llen) must
 * reject with -EUCLEAN. Other files in the folder are ignored.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixture.h"
#include "csdfs/codec.h"

/* ---- deterministic data -------------------------------------------------- */

struct rng {
	uint64_t s;
};

static uint64_t rng_next(struct rng *r)
{
	/* xorshift64*: fixed seeds, so any failure reproduces exactly. */
	r->s ^= r->s >> 12;
	r->s ^= r->s << 25;
	r->s ^= r->s >> 27;
	return r->s * 0x2545f4914f6cdd1dull;
}

static void rng_fill(struct rng *r, unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (unsigned char)(rng_next(r) >> 56);
}

enum data_kind { DATA_ZERO, DATA_RANDOM, DATA_HALF, DATA_TEXT, DATA_KINDS };

static const char *const kind_names[DATA_KINDS] = {
	"zero", "random", "half", "text",
};

static void fill_text(struct rng *r, unsigned char *p, size_t len)
{
	static const char *const words[] = {
		"the", "chunk", "is", "stored", "compressed", "only", "if",
		"that", "saves", "space", "extent", "container", "block",
		"mysql", "page", "row", "index", "commit", "of", "and",
		"select", "from", "where", "id", "=", "42", "\n",
	};
	size_t nwords = sizeof(words) / sizeof(words[0]);
	size_t i = 0;

	while (i < len) {
		const char *w = words[rng_next(r) % nwords];

		while (*w && i < len)
			p[i++] = (unsigned char)*w++;
		if (i < len)
			p[i++] = ' ';
	}
}

static void fill_data(enum data_kind kind, uint64_t seed, unsigned char *p,
		      size_t len)
{
	struct rng r = { seed | 1 };

	switch (kind) {
	case DATA_ZERO:
		memset(p, 0, len);
		break;
	case DATA_RANDOM:
		rng_fill(&r, p, len);
		break;
	case DATA_HALF:
		/*
		 * fio buffer_compress_percentage=50: each 4 KiB is half random,
		 * half zeros, so a good codec lands near 2:1.
		 */
		for (size_t i = 0; i < len; i++)
			p[i] = (i % 4096) < 2048 ?
			       (unsigned char)(rng_next(&r) >> 56) : 0;
		break;
	case DATA_TEXT:
		fill_text(&r, p, len);
		break;
	default:
		abort();
	}
}

/* Exactly @len bytes on the heap (at least one, so malloc(0) never bites). */
static void *xmalloc(size_t len)
{
	void *p = malloc(len ? len : 1);

	ck_assert_ptr_nonnull(p);
	return p;
}

/* A copy in a buffer of exactly @len bytes: over-reads hit the redzone. */
static void *xdup(const void *src, size_t len)
{
	void *p = xmalloc(len);

	if (len)
		memcpy(p, src, len);
	return p;
}

/* Decode @src[0..plen) as @id into a fresh exact-size buffer. */
static int decode(uint8_t id, const void *src, size_t plen, size_t llen,
		  unsigned char **out)
{
	void *in = xdup(src, plen);
	unsigned char *dst = xmalloc(llen);
	int rc = csdfs_codec_decompress(id, in, plen, dst, llen);

	free(in);
	if (out)
		*out = dst;
	else
		free(dst);
	return rc;
}

static const struct csdfs_codec_spec specs[] = {
	{ CSDFS_CODEC_NONE, 0 },
	{ CSDFS_CODEC_LZ4, 0 },
	{ CSDFS_CODEC_LZ4, 2 },
	{ CSDFS_CODEC_LZ4, 8 },
	{ CSDFS_CODEC_ZSTD, -7 },
	{ CSDFS_CODEC_ZSTD, -1 },
	{ CSDFS_CODEC_ZSTD, 0 },
	{ CSDFS_CODEC_ZSTD, 1 },
	{ CSDFS_CODEC_ZSTD, 3 },
	{ CSDFS_CODEC_ZSTD, 9 },
	{ CSDFS_CODEC_ZSTD, 19 },
};
#define NSPECS (int)(sizeof(specs) / sizeof(specs[0]))

static const size_t sizes[] = { 1, 100, 4096, 16384, 65536, 131072 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Compress with the backend directly, no store-raw policy, full bound. */
static int backend_size(struct csdfs_codec_spec spec, const void *src,
			size_t llen)
{
	size_t cap = csdfs_codec_bound(llen);
	void *dst = xmalloc(cap);
	int rc;

	if (spec.id == CSDFS_CODEC_ZSTD)
		rc = csdfs_zstd_compress(spec.level, src, llen, dst, cap);
	else
		rc = csdfs_lz4_compress(spec.level, src, llen, dst, cap);
	free(dst);
	return rc;
}

/* ---- parse / format / name / bound --------------------------------------- */

START_TEST(test_parse_good)
{
	static const struct {
		const char *text;
		struct csdfs_codec_spec spec;
		const char *canon;   /* what csdfs_codec_format prints */
	} cases[] = {
		{ "zstd", { CSDFS_CODEC_ZSTD, 0 }, "zstd" },
		{ "zstd:0", { CSDFS_CODEC_ZSTD, 0 }, "zstd" },
		{ "zstd:1", { CSDFS_CODEC_ZSTD, 1 }, "zstd:1" },
		{ "zstd:3", { CSDFS_CODEC_ZSTD, 3 }, "zstd:3" },
		{ "zstd:19", { CSDFS_CODEC_ZSTD, 19 }, "zstd:19" },
		{ "zstd:-1", { CSDFS_CODEC_ZSTD, -1 }, "zstd:-1" },
		{ "zstd:-7", { CSDFS_CODEC_ZSTD, -7 }, "zstd:-7" },
		{ "zstd:007", { CSDFS_CODEC_ZSTD, 7 }, "zstd:7" },
		{ "lz4", { CSDFS_CODEC_LZ4, 0 }, "lz4" },
		{ "lz4:0", { CSDFS_CODEC_LZ4, 0 }, "lz4" },
		{ "lz4:1", { CSDFS_CODEC_LZ4, 1 }, "lz4:1" },
		{ "lz4:2", { CSDFS_CODEC_LZ4, 2 }, "lz4:2" },
		{ "lz4:64", { CSDFS_CODEC_LZ4, 64 }, "lz4:64" },
		{ "lz4:008", { CSDFS_CODEC_LZ4, 8 }, "lz4:8" },
		{ "none", { CSDFS_CODEC_NONE, 0 }, "none" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct csdfs_codec_spec s = { 0xff, 0x55 }, again;
		char buf[32];

		ck_assert_msg(csdfs_codec_parse(cases[i].text, &s) == 0,
			      "parse '%s'", cases[i].text);
		ck_assert_uint_eq(s.id, cases[i].spec.id);
		ck_assert_int_eq(s.level, cases[i].spec.level);
		ck_assert_int_eq(csdfs_codec_format(s, buf, sizeof(buf)),
				 (int)strlen(cases[i].canon));
		ck_assert_str_eq(buf, cases[i].canon);
		ck_assert_int_eq(csdfs_codec_parse(buf, &again), 0);
		ck_assert_uint_eq(again.id, s.id);
		ck_assert_int_eq(again.level, s.level);
	}

	/* Every level in range survives format -> parse. */
	for (int level = -7; level <= 64; level++) {
		struct csdfs_codec_spec s = { CSDFS_CODEC_LZ4, (int8_t)level };
		struct csdfs_codec_spec back;
		char buf[32];

		if (level <= 19) {
			s.id = CSDFS_CODEC_ZSTD;
			ck_assert_int_gt(csdfs_codec_format(s, buf, sizeof(buf)), 0);
			ck_assert_int_eq(csdfs_codec_parse(buf, &back), 0);
			ck_assert_int_eq(back.level, level);
			s.id = CSDFS_CODEC_LZ4;
		}
		if (level < 0)
			continue;
		ck_assert_int_gt(csdfs_codec_format(s, buf, sizeof(buf)), 0);
		ck_assert_int_eq(csdfs_codec_parse(buf, &back), 0);
		ck_assert_uint_eq(back.id, CSDFS_CODEC_LZ4);
		ck_assert_int_eq(back.level, level);
	}
}
END_TEST

START_TEST(test_parse_bad)
{
	static const char *const bad[] = {
		"", "zstd:", "zstd:abc", "zstd:99", "zstd:20", "zstd:-8",
		"zstd:127", "zstd:-128", "zstd:1000000000000", "zstd:1x",
		"zstd: 3", "zstd:+3", "zstd:-", "zstd::3", "zstd:3 ", " zstd",
		"zstd ", "zstd3", "zstdx", "zst", "ZSTD", "Zstd:3", "lz4:65",
		"lz4:", "lz4:-1", "lz4:+2", "lz4:127", "lz4:2 ", "lz4x", "lz",
		"none:0", "none:", "nonex",
		"gzip", "zlib:6", ":3", "-", "zstd:3\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct csdfs_codec_spec s;

		ck_assert_msg(csdfs_codec_parse(bad[i], &s) == -EINVAL,
			      "'%s' parsed", bad[i]);
	}
	{
		struct csdfs_codec_spec s;

		ck_assert_int_eq(csdfs_codec_parse(NULL, &s), -EINVAL);
	}
}
END_TEST

START_TEST(test_format)
{
	static const struct csdfs_codec_spec bad[] = {
		{ CSDFS_CODEC_COUNT, 0 }, { 0xff, 0 }, { CSDFS_CODEC_ZSTD, 20 },
		{ CSDFS_CODEC_ZSTD, -8 }, { CSDFS_CODEC_LZ4, 65 },
		{ CSDFS_CODEC_LZ4, -1 },
		{ CSDFS_CODEC_NONE, 5 },
	};
	struct csdfs_codec_spec s = { CSDFS_CODEC_ZSTD, -7 };
	char buf[32];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_int_eq(csdfs_codec_format(bad[i], buf, sizeof(buf)),
				 -EINVAL);

	/* snprintf semantics: truncate, terminate, return the full length. */
	memset(buf, 'x', sizeof(buf));
	ck_assert_int_eq(csdfs_codec_format(s, buf, 3), 7);
	ck_assert_str_eq(buf, "zs");
	ck_assert_int_eq(csdfs_codec_format(s, NULL, 0), 7);
}
END_TEST

/* The words of the refusals name exactly the ranges parse accepts. */
START_TEST(test_choices)
{
	char zstd[32], lz4[32];

	snprintf(zstd, sizeof(zstd), "zstd:N (N %d..%d;", CSDFS_CODEC_ZSTD_LEVEL_MIN,
		 CSDFS_CODEC_ZSTD_LEVEL_MAX);
	snprintf(lz4, sizeof(lz4), "lz4:N (N %d..%d,", CSDFS_CODEC_LZ4_LEVEL_MIN,
		 CSDFS_CODEC_LZ4_LEVEL_MAX);
	ck_assert_ptr_nonnull(strstr(CSDFS_CODEC_CHOICES, zstd));
	ck_assert_ptr_nonnull(strstr(CSDFS_CODEC_CHOICES, lz4));
	for (int l = -128; l <= 127; l++) {
		struct csdfs_codec_spec z = { CSDFS_CODEC_ZSTD, (int8_t)l };
		struct csdfs_codec_spec x = { CSDFS_CODEC_LZ4, (int8_t)l };

		ck_assert_int_eq(csdfs_codec_valid(z),
				 l >= CSDFS_CODEC_ZSTD_LEVEL_MIN && l <= CSDFS_CODEC_ZSTD_LEVEL_MAX);
		ck_assert_int_eq(csdfs_codec_valid(x),
				 l == 0 || (l >= CSDFS_CODEC_LZ4_LEVEL_MIN &&
					    l <= CSDFS_CODEC_LZ4_LEVEL_MAX));
	}
	/* The backend refuses what the table never passes it. */
	{
		unsigned char src[64] = { 0 }, dst[256];

		ck_assert_int_eq(csdfs_lz4_compress(-1, src, sizeof(src), dst, sizeof(dst)),
				 -EINVAL);
	}
}
END_TEST

START_TEST(test_name)
{
	ck_assert_str_eq(csdfs_codec_name(CSDFS_CODEC_NONE), "none");
	ck_assert_str_eq(csdfs_codec_name(CSDFS_CODEC_ZSTD), "zstd");
	ck_assert_str_eq(csdfs_codec_name(CSDFS_CODEC_LZ4), "lz4");
	ck_assert_ptr_null(csdfs_codec_name(CSDFS_CODEC_COUNT));
	ck_assert_ptr_null(csdfs_codec_name(0xff));
}
END_TEST

START_TEST(test_bound)
{
	static const size_t lens[] = { 0, 1, 100, 4096, 16384, 131072,
				       1u << 20 };

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		size_t b = csdfs_codec_bound(lens[i]);

		ck_assert_uint_ge(b, lens[i]);
		ck_assert_uint_ge(b, csdfs_zstd_bound(lens[i]));
		ck_assert_uint_ge(b, csdfs_lz4_bound(lens[i]));
	}
}
END_TEST

START_TEST(test_bad_args)
{
	unsigned char src[256] = { 0 }, dst[1024];
	struct csdfs_codec_spec used;
	struct csdfs_codec_spec zstd = { CSDFS_CODEC_ZSTD, 3 };
	struct csdfs_codec_spec bad_id = { CSDFS_CODEC_COUNT, 0 };
	struct csdfs_codec_spec bad_level = { CSDFS_CODEC_ZSTD, 20 };
	struct csdfs_codec_spec lz4_level = { CSDFS_CODEC_LZ4, 65 };

	ck_assert_int_eq(csdfs_codec_compress(zstd, src, 0, dst, sizeof(dst),
					      &used), -EINVAL);
	ck_assert_int_eq(csdfs_codec_compress(zstd, src, sizeof(src), dst,
					      sizeof(src) - 1, &used), -EINVAL);
	ck_assert_int_eq(csdfs_codec_compress(bad_id, src, sizeof(src), dst,
					      sizeof(dst), &used), -EINVAL);
	ck_assert_int_eq(csdfs_codec_compress(bad_level, src, sizeof(src),
					      dst, sizeof(dst), &used),
			 -EINVAL);
	ck_assert_int_eq(csdfs_codec_compress(lz4_level, src, sizeof(src),
					      dst, sizeof(dst), &used),
			 -EINVAL);
	ck_assert_int_eq(csdfs_codec_decompress(CSDFS_CODEC_COUNT, src,
						sizeof(src), dst, sizeof(src)),
			 -EINVAL);
	ck_assert_int_eq(csdfs_codec_decompress(0xff, src, sizeof(src), dst,
						sizeof(src)), -EINVAL);
}
END_TEST

/*
 * lz4's level is its acceleration and must reach the backend: level 0 and 1
 * are the same (lz4's default), and a high one trades size for speed, so on
 * text a 16 KiB chunk comes out strictly larger at 64 than at 1, and still
 * decodes.
 */
START_TEST(test_lz4_accel)
{
	size_t llen = 16384, cap = csdfs_codec_bound(llen);
	unsigned char *src = xmalloc(llen), *dst = xmalloc(cap), *out;
	struct csdfs_codec_spec l0 = { CSDFS_CODEC_LZ4, 0 };
	struct csdfs_codec_spec l1 = { CSDFS_CODEC_LZ4, 1 };
	struct csdfs_codec_spec l64 = { CSDFS_CODEC_LZ4, 64 };
	struct csdfs_codec_spec used;
	int p0, p64;

	fill_data(DATA_TEXT, 7, src, llen);
	p0 = backend_size(l0, src, llen);
	ck_assert_int_gt(p0, 0);
	ck_assert_int_eq(backend_size(l1, src, llen), p0);
	p64 = backend_size(l64, src, llen);
	ck_assert_msg(p64 > p0, "lz4:64 %d bytes, lz4 %d", p64, p0);

	p64 = csdfs_codec_compress(l64, src, llen, dst, cap, &used);
	ck_assert_uint_eq(used.id, CSDFS_CODEC_LZ4);
	ck_assert_int_eq(used.level, 64);
	ck_assert_int_eq(decode(used.id, dst, (size_t)p64, llen, &out), 0);
	ck_assert_mem_eq(out, src, llen);
	free(out);
	free(dst);
	free(src);
}
END_TEST

/* ---- round trips --------------------------------------------------------- */

static void check_roundtrip(struct csdfs_codec_spec spec, enum data_kind kind,
			    size_t llen, uint64_t seed)
{
	unsigned char *src = xmalloc(llen), *dst, *out, *stored;
	size_t cap = csdfs_codec_bound(llen);
	size_t saving = CSDFS_CODEC_MIN_SAVING(llen);
	struct csdfs_codec_spec used = { 0xff, 0x55 };
	int plen;

	fill_data(kind, seed, src, llen);
	dst = xmalloc(cap);
	plen = csdfs_codec_compress(spec, src, llen, dst, cap, &used);
	ck_assert_msg(plen > 0, "compress id %u level %d %s %zu: %d",
		      spec.id, spec.level, kind_names[kind], llen, plen);
	ck_assert_uint_le((size_t)plen, cap);
	stored = xdup(dst, (size_t)plen);
	free(dst);

	if (used.id == CSDFS_CODEC_NONE) {
		ck_assert_int_eq(used.level, 0);
		ck_assert_uint_eq((size_t)plen, llen);
		ck_assert_mem_eq(stored, src, llen);
		/* Raw must have been the right call: the codec did not save. */
		if (spec.id != CSDFS_CODEC_NONE && llen > saving) {
			int full = backend_size(spec, src, llen);

			ck_assert_int_gt(full, 0);
			ck_assert_uint_gt((size_t)full + saving, llen);
		}
	} else {
		ck_assert_uint_eq(used.id, spec.id);
		ck_assert_int_eq(used.level, spec.level);
		ck_assert_uint_le((size_t)plen + saving, llen);
		/* The capped run must equal an uncapped one. */
		ck_assert_int_eq(backend_size(spec, src, llen), plen);
	}

	/* What must be stored raw, and what must not. */
	if (spec.id == CSDFS_CODEC_NONE || kind == DATA_RANDOM || llen <= 64)
		ck_assert_uint_eq(used.id, CSDFS_CODEC_NONE);
	else if (llen >= 4096)
		ck_assert_msg(used.id == spec.id, "%s %zu stored raw",
			      kind_names[kind], llen);

	/* Exact llen: round trip. */
	ck_assert_int_eq(decode(used.id, stored, (size_t)plen, llen, &out), 0);
	ck_assert_mem_eq(out, src, llen);
	free(out);

	/* Any other llen is corruption, in both directions. */
	ck_assert_int_eq(decode(used.id, stored, (size_t)plen, llen + 1, NULL),
			 -EUCLEAN);
	ck_assert_int_eq(decode(used.id, stored, (size_t)plen, llen - 1, NULL),
			 -EUCLEAN);
	if (llen >= 2)
		ck_assert_int_eq(decode(used.id, stored, (size_t)plen,
					llen / 2, NULL), -EUCLEAN);
	ck_assert_int_eq(decode(used.id, stored, (size_t)plen, llen * 2, NULL),
			 -EUCLEAN);

	/* Truncated stored bytes. */
	ck_assert_int_eq(decode(used.id, stored, (size_t)plen - 1, llen, NULL),
			 -EUCLEAN);
	ck_assert_int_eq(decode(used.id, stored, (size_t)plen / 2, llen, NULL),
			 -EUCLEAN);
	ck_assert_int_eq(decode(used.id, stored, 0, llen, NULL), -EUCLEAN);

	/* Compressed bytes read as another codec. */
	if (used.id != CSDFS_CODEC_NONE) {
		ck_assert_int_eq(decode(CSDFS_CODEC_NONE, stored, (size_t)plen,
					llen, NULL), -EUCLEAN);
		if (used.id == CSDFS_CODEC_LZ4)
			ck_assert_int_eq(decode(CSDFS_CODEC_ZSTD, stored,
						(size_t)plen, llen, NULL),
					 -EUCLEAN);
	}

	free(stored);
	free(src);
}

/* Loop test: _i indexes specs[]. */
START_TEST(test_roundtrip)
{
	struct csdfs_codec_spec spec = specs[_i];

	for (int kind = 0; kind < DATA_KINDS; kind++)
		for (size_t s = 0; s < NSIZES; s++)
			check_roundtrip(spec, (enum data_kind)kind, sizes[s],
					(uint64_t)(_i * 131 + kind * 17 + s));
}
END_TEST

/*
 * Sweep the compressed size across the MIN_SAVING threshold: a random
 * prefix of r bytes and zeros after it compresses to about r plus framing.
 * The store-raw decision must match the backend's uncapped result at every
 * step, which is where the capped (-ENOSPC) shortcut could go wrong.
 */
START_TEST(test_min_saving_threshold)
{
	static const struct csdfs_codec_spec sweep[] = {
		{ CSDFS_CODEC_LZ4, 0 }, { CSDFS_CODEC_ZSTD, 1 },
		{ CSDFS_CODEC_ZSTD, -7 },
	};
	size_t llen = 4096, saving = CSDFS_CODEC_MIN_SAVING(llen);
	size_t cap = csdfs_codec_bound(llen);
	unsigned char *src = xmalloc(llen), *dst = xmalloc(cap);
	struct rng r = { 12345 };

	rng_fill(&r, src, llen);
	for (size_t i = 0; i < sizeof(sweep) / sizeof(sweep[0]); i++) {
		int seen_raw = 0, seen_packed = 0;

		for (size_t rnd = llen - saving - 80; rnd <= llen; rnd++) {
			unsigned char *data = xdup(src, llen);
			struct csdfs_codec_spec used;
			int full, plen;

			memset(data + rnd, 0, llen - rnd);
			full = backend_size(sweep[i], data, llen);
			plen = csdfs_codec_compress(sweep[i], data, llen, dst,
						    cap, &used);
			ck_assert_int_gt(full, 0);
			if ((size_t)full + saving <= llen) {
				ck_assert_uint_eq(used.id, sweep[i].id);
				ck_assert_int_eq(plen, full);
				seen_packed++;
			} else {
				ck_assert_uint_eq(used.id, CSDFS_CODEC_NONE);
				ck_assert_uint_eq((size_t)plen, llen);
				seen_raw++;
			}
			free(data);
		}
		/* The sweep really crossed the threshold. */
		ck_assert_int_gt(seen_raw, 0);
		ck_assert_int_gt(seen_packed, 0);
	}
	free(dst);
	free(src);
}
END_TEST

/* ---- hostile stored bytes ------------------------------------------------ */

static const size_t garbage_llens[] = { 1, 100, 4096, 16384, 131072 };

/* Random bytes, some dressed up to get past the first checks. */
START_TEST(test_garbage)
{
	static const unsigned char zstd_magic[4] = { 0x28, 0xb5, 0x2f, 0xfd };
	struct rng r = { 0xc0dec0de };
	unsigned char frame_head[32];
	size_t head_len;

	/* The head of a real frame (magic, descriptor, content size). */
	{
		size_t llen = 16384, cap = csdfs_codec_bound(llen);
		unsigned char *src = xmalloc(llen), *dst = xmalloc(cap);

		fill_data(DATA_TEXT, 7, src, llen);
		ck_assert_int_gt(csdfs_zstd_compress(3, src, llen, dst, cap),
				 0);
		head_len = 7;
		memcpy(frame_head, dst, head_len);
		free(dst);
		free(src);
	}

	for (int i = 0; i < 8000; i++) {
		uint8_t id = i % 2 ? CSDFS_CODEC_ZSTD : CSDFS_CODEC_LZ4;
		size_t plen = rng_next(&r) % 1500;
		size_t llen = garbage_llens[rng_next(&r) % 5];
		unsigned char *buf = xmalloc(plen);
		int style = (int)(rng_next(&r) % 4);
		int rc;

		rng_fill(&r, buf, plen);
		if (id == CSDFS_CODEC_ZSTD && style == 1 && plen >= 4)
			memcpy(buf, zstd_magic, 4);
		if (id == CSDFS_CODEC_ZSTD && style >= 2 && plen >= head_len)
			memcpy(buf, frame_head, head_len);
		if (id == CSDFS_CODEC_ZSTD && style == 3 &&
		    plen >= head_len + 3) {
			/*
			 * One last compressed block spanning the rest: passes
			 * the one-frame check, so the block decoder itself
			 * (literals, FSE/Huffman tables, sequences) gets the
			 * random bytes.
			 */
			uint32_t bh = 1u | 2u << 1 |
				      (uint32_t)(plen - head_len - 3) << 3;

			buf[head_len] = (unsigned char)bh;
			buf[head_len + 1] = (unsigned char)(bh >> 8);
			buf[head_len + 2] = (unsigned char)(bh >> 16);
		}
		if (id == CSDFS_CODEC_LZ4 && style == 1)
			/* Short literal runs keep the decoder going longer. */
			for (size_t j = 0; j < plen; j += 7)
				buf[j] &= 0x37;
		rc = decode(id, buf, plen, llen, NULL);
		ck_assert_msg(rc == -EUCLEAN,
			      "garbage %d (codec %u, plen %zu, llen %zu): %d",
			      i, id, plen, llen, rc);
		free(buf);
	}
}
END_TEST

static void flip_frame(struct csdfs_codec_spec spec, enum data_kind kind,
		       size_t llen)
{
	size_t cap = csdfs_codec_bound(llen);
	unsigned char *src = xmalloc(llen), *dst = xmalloc(cap);
	struct csdfs_codec_spec used;
	struct rng r = { llen * 31 + spec.id };
	size_t nbits;
	int plen, caught = 0;

	fill_data(kind, 99, src, llen);
	plen = csdfs_codec_compress(spec, src, llen, dst, cap, &used);
	ck_assert_int_gt(plen, 0);
	ck_assert_uint_eq(used.id, spec.id);
	nbits = (size_t)plen * 8;

	for (size_t n = 0; n < 12000; n++) {
		/* Every bit when the frame is small enough, else a sample. */
		size_t bit = nbits <= 12000 ? n : rng_next(&r) % nbits;
		unsigned char *out;
		int rc;

		if (bit >= nbits)
			break;
		dst[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		rc = decode(used.id, dst, (size_t)plen, llen, &out);
		dst[bit / 8] ^= (unsigned char)(1u << (bit % 8));
		/* 0 is fine (a literal changed): then out is llen bytes. */
		ck_assert_msg(rc == 0 || rc == -EUCLEAN, "bit %zu: %d", bit,
			      rc);
		if (rc)
			caught++;
		free(out);
	}

	/* Burst damage: a few random bytes overwritten at once. */
	for (int n = 0; n < 3000; n++) {
		unsigned char *copy = xdup(dst, (size_t)plen);
		int nbytes = 1 + (int)(rng_next(&r) % 8), rc;

		for (int k = 0; k < nbytes; k++)
			copy[rng_next(&r) % (size_t)plen] =
				(unsigned char)rng_next(&r);
		rc = decode(used.id, copy, (size_t)plen, llen, NULL);
		ck_assert_msg(rc == 0 || rc == -EUCLEAN, "burst %d: %d", n, rc);
		free(copy);
	}
	/* Some flips must be caught, or this loop tests nothing. */
	ck_assert_int_gt(caught, 0);
	free(dst);
	free(src);
}

START_TEST(test_bitflips)
{
	static const struct csdfs_codec_spec flip_specs[] = {
		{ CSDFS_CODEC_ZSTD, 3 }, { CSDFS_CODEC_ZSTD, -5 },
		{ CSDFS_CODEC_ZSTD, 19 }, { CSDFS_CODEC_LZ4, 0 },
	};

	for (size_t i = 0; i < sizeof(flip_specs) / sizeof(flip_specs[0]);
	     i++) {
		flip_frame(flip_specs[i], DATA_TEXT, 4096);
		flip_frame(flip_specs[i], DATA_HALF, 16384);
	}
}
END_TEST

/* ---- the must-fail corpus ------------------------------------------------ */

static int corpus_read(const char *path, unsigned char **data, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	size_t got = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return -errno;
	}
	*len = (size_t)st.st_size;
	*data = xmalloc(*len);
	while (got < *len) {
		ssize_t n = read(fd, *data + got, *len - got);

		if (n <= 0) {
			close(fd);
			free(*data);
			return n < 0 ? -errno : -EIO;
		}
		got += (size_t)n;
	}
	close(fd);
	return 0;
}

/* "<codec>-<llen>-<desc>.bin" -> codec id and llen; -EINVAL otherwise. */
static int corpus_parse_name(const char *name, uint8_t *id, size_t *llen)
{
	const char *dash = strchr(name, '-');
	char *end;
	unsigned long v;

	if (!dash)
		return -EINVAL;
	for (unsigned int i = 0; i < CSDFS_CODEC_COUNT; i++) {
		const char *cn = csdfs_codec_name((uint8_t)i);

		if (strlen(cn) == (size_t)(dash - name) &&
		    !strncmp(name, cn, strlen(cn))) {
			errno = 0;
			v = strtoul(dash + 1, &end, 10);
			if (errno || end == dash + 1 || *end != '-' ||
			    v > 16u << 20)
				return -EINVAL;
			*id = (uint8_t)i;
			*llen = v;
			return 0;
		}
	}
	return -EINVAL;
}

START_TEST(test_corpus)
{
	const char *dir = getenv("CSDFS_CORPUS_DIR");
	DIR *d = opendir(dir);
	struct dirent *de;
	int files = 0;

	ck_assert_msg(d != NULL, "cannot open corpus '%s'", dir);
	while ((de = readdir(d)) != NULL) {
		size_t nlen = strlen(de->d_name), llen = 0, plen = 0;
		unsigned char *data = NULL;
		char path[4096];
		uint8_t id = 0;
		int rc;

		if (nlen < 4 || strcmp(de->d_name + nlen - 4, ".bin"))
			continue;
		ck_assert_msg(corpus_parse_name(de->d_name, &id, &llen) == 0,
			      "corpus file '%s' is not "
			      "<codec>-<llen>-<desc>.bin",
			      de->d_name);
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		ck_assert_msg(corpus_read(path, &data, &plen) == 0,
			      "cannot read '%s'", path);
		rc = decode(id, data, plen, llen, NULL);
		ck_assert_msg(rc == -EUCLEAN,
			      "'%s' decoded to %d, not -EUCLEAN", de->d_name,
			      rc);
		free(data);
		files++;
	}
	closedir(d);
	ck_assert_msg(files > 0, "corpus '%s' has no .bin files", dir);
}
END_TEST

/* ---- threads ------------------------------------------------------------- */

#define THREADS 8
#define THREAD_ROUNDS 150

struct thread_arg {
	int idx;
	int failures;
};

/*
 * Per-thread contexts: concurrent use must not interfere, and contexts of
 * exited threads must be freed (valgrind's leak check sees it).
 */
static void *thread_main(void *p)
{
	struct thread_arg *arg = p;
	struct rng r = { (uint64_t)arg->idx * 7919 + 1 };

	for (int i = 0; i < THREAD_ROUNDS; i++) {
		struct csdfs_codec_spec spec = specs[rng_next(&r) % NSPECS];
		enum data_kind kind =
			(enum data_kind)(rng_next(&r) % DATA_KINDS);
		size_t llen = i % 2 ? 16384 : 4096;
		size_t cap = csdfs_codec_bound(llen);
		unsigned char *src = malloc(llen), *dst = malloc(cap);
		unsigned char *out = malloc(llen);
		struct csdfs_codec_spec used;
		int plen;

		if (!src || !dst || !out) {
			arg->failures++;
		} else {
			fill_data(kind, rng_next(&r), src, llen);
			plen = csdfs_codec_compress(spec, src, llen, dst, cap,
						    &used);
			if (plen <= 0 ||
			    csdfs_codec_decompress(used.id, dst, (size_t)plen,
						   out, llen) != 0 ||
			    memcmp(out, src, llen) != 0)
				arg->failures++;
		}
		free(out);
		free(dst);
		free(src);
	}
	return NULL;
}

START_TEST(test_threads)
{
	pthread_t tid[THREADS];
	struct thread_arg args[THREADS];

	for (int i = 0; i < THREADS; i++) {
		args[i].idx = i;
		args[i].failures = 0;
		ck_assert_int_eq(pthread_create(&tid[i], NULL, thread_main,
						&args[i]), 0);
	}
	for (int i = 0; i < THREADS; i++) {
		ck_assert_int_eq(pthread_join(tid[i], NULL), 0);
		ck_assert_int_eq(args[i].failures, 0);
	}
}
END_TEST

static Suite *codec_suite(void)
{
	Suite *s = suite_create("codec");
	TCase *names = tcase_create("names");
	TCase *data = tcase_create("data");
	TCase *hostile = tcase_create("hostile");

	tcase_add_test(names, test_parse_good);
	tcase_add_test(names, test_parse_bad);
	tcase_add_test(names, test_format);
	tcase_add_test(names, test_choices);
	tcase_add_test(names, test_name);
	tcase_add_test(names, test_bound);
	tcase_add_test(names, test_bad_args);
	suite_add_tcase(s, names);

	/* Generous timeouts: the same binary runs under valgrind. */
	tcase_set_timeout(data, 300);
	tcase_add_loop_test(data, test_roundtrip, 0, NSPECS);
	tcase_add_test(data, test_min_saving_threshold);
	tcase_add_test(data, test_lz4_accel);
	tcase_add_test(data, test_threads);
	suite_add_tcase(s, data);

	tcase_set_timeout(hostile, 300);
	tcase_add_test(hostile, test_garbage);
	tcase_add_test(hostile, test_bitflips);
	if (getenv("CSDFS_CORPUS_DIR"))
		tcase_add_test(hostile, test_corpus);
	else
		fprintf(stderr, "test_codec: CSDFS_CORPUS_DIR unset, "
			"skipping the must-fail corpus\n");
	suite_add_tcase(s, hostile);
	return s;
}

FIXTURE_MAIN(codec_suite, FIXTURE_NO_TMP)
