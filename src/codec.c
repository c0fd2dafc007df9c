/* SPDX-License-Identifier: MIT */
/*
 * The codec table: codec names and levels, and the one policy every backend
 * shares: a chunk that does not shrink by CSDFS_CODEC_MIN_SAVING is stored
 * raw (codec NONE), decided per chunk. Backends (codec_zstd.c, codec_lz4.c)
 * only translate their library's results into -errno.
 *
 * Invariant: a compressed result is always strictly smaller than llen, so
 * plen == llen with a codec other than NONE never comes out of here.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "csdfs/codec.h"

struct codec_ops {
	const char *name;
	/*
	 * The level range promised by codec.h, user-facing like the ids; a
	 * codec without levels has 0..0. Level 0 is always the library's
	 * default and may be written without ":N".
	 */
	int level_min, level_max;
	/* NULL for NONE. -ENOSPC means "does not fit in cap", nothing worse. */
	int (*compress)(int level, const void *src, size_t llen, void *dst,
			size_t cap);
	int (*decompress)(const void *src, size_t plen, void *dst,
			  size_t llen);
};

/* Indexed by enum csdfs_codec_id, which is pinned in format.h. */
static const struct codec_ops codec_table[CSDFS_CODEC_COUNT] = {
	[CSDFS_CODEC_NONE] = { .name = "none" },
	[CSDFS_CODEC_ZSTD] = {
		.name = "zstd",
		.level_min = CSDFS_CODEC_ZSTD_LEVEL_MIN,
		.level_max = CSDFS_CODEC_ZSTD_LEVEL_MAX,
		.compress = csdfs_zstd_compress,
		.decompress = csdfs_zstd_decompress,
	},
	[CSDFS_CODEC_LZ4] = {
		.name = "lz4",
		.level_min = CSDFS_CODEC_LZ4_LEVEL_MIN,
		.level_max = CSDFS_CODEC_LZ4_LEVEL_MAX,
		.compress = csdfs_lz4_compress,
		.decompress = csdfs_lz4_decompress,
	},
};

static bool codec_has_level(const struct codec_ops *ops)
{
	return ops->level_max != 0;
}

static bool codec_level_valid(const struct codec_ops *ops, int level)
{
	return level == 0 ||
	       (level >= ops->level_min && level <= ops->level_max);
}

bool csdfs_codec_valid(struct csdfs_codec_spec spec)
{
	return spec.id < CSDFS_CODEC_COUNT &&
	       codec_level_valid(&codec_table[spec.id], spec.level);
}

/*
 * Strict decimal: an optional '-' and 1..3 digits, nothing else. strtol
 * would also take leading blanks and '+', which a policy xattr written by
 * hand should not silently accept.
 */
static int codec_parse_level(const char *s, int *level)
{
	bool neg = false;
	int v = 0, digits = 0;

	if (*s == '-') {
		neg = true;
		s++;
	}
	for (; *s >= '0' && *s <= '9'; s++) {
		if (++digits > 3)
			return -EINVAL;
		v = v * 10 + (*s - '0');
	}
	if (digits == 0 || *s != '\0')
		return -EINVAL;
	*level = neg ? -v : v;
	return 0;
}

int csdfs_codec_parse(const char *text, struct csdfs_codec_spec *out)
{
	if (!text)
		return -EINVAL;

	for (unsigned int id = 0; id < CSDFS_CODEC_COUNT; id++) {
		const struct codec_ops *ops = &codec_table[id];
		size_t n = strlen(ops->name);
		int level = 0;

		if (strncmp(text, ops->name, n) != 0)
			continue;
		if (text[n] == ':') {
			if (!codec_has_level(ops) ||
			    codec_parse_level(text + n + 1, &level) ||
			    !codec_level_valid(ops, level))
				return -EINVAL;
		} else if (text[n] != '\0') {
			continue;
		}
		out->id = (uint8_t)id;
		out->level = (int8_t)level;
		return 0;
	}
	return -EINVAL;
}

int csdfs_codec_format(struct csdfs_codec_spec spec, char *buf, size_t len)
{
	const char *name;

	if (!csdfs_codec_valid(spec))
		return -EINVAL;
	name = codec_table[spec.id].name;
	/* Level 0 is "the library default": print it the way it is typed. */
	if (spec.level != 0)
		return snprintf(buf, len, "%s:%d", name, spec.level);
	return snprintf(buf, len, "%s", name);
}

const char *csdfs_codec_name(uint8_t id)
{
	return id < CSDFS_CODEC_COUNT ? codec_table[id].name : NULL;
}

size_t csdfs_codec_bound(size_t llen)
{
	size_t bound = llen;   /* storing raw needs exactly llen */

	if (csdfs_zstd_bound(llen) > bound)
		bound = csdfs_zstd_bound(llen);
	if (csdfs_lz4_bound(llen) > bound)
		bound = csdfs_lz4_bound(llen);
	return bound;
}

int csdfs_codec_compress(struct csdfs_codec_spec spec, const void *src,
			 size_t llen, void *dst, size_t cap,
			 struct csdfs_codec_spec *used)
{
	const struct codec_ops *ops;
	size_t saving = CSDFS_CODEC_MIN_SAVING(llen);

	/* The int return must hold llen; an empty chunk is a hole, not data. */
	if (!csdfs_codec_valid(spec) || llen == 0 || llen > INT_MAX ||
	    cap < llen)
		return -EINVAL;

	ops = &codec_table[spec.id];
	if (ops->compress && llen > saving) {
		/*
		 * Full capacity, not llen - saving: zstd needs slack beyond its
		 * final size while it works, so a tight cap would turn results
		 * that just qualify into -ENOSPC and the decision would depend
		 * on the cap instead of on the data.
		 */
		int rc = ops->compress(spec.level, src, llen, dst, cap);

		if (rc > 0 && (size_t)rc + saving <= llen) {
			used->id = spec.id;
			used->level = spec.level;
			return rc;
		}
		/* -ENOSPC: a caller's cap below the bound; raw still fits. */
		if (rc < 0 && rc != -ENOSPC)
			return rc;
	}

	memcpy(dst, src, llen);
	used->id = CSDFS_CODEC_NONE;
	used->level = 0;
	return (int)llen;
}

int csdfs_codec_decompress(uint8_t id, const void *src, size_t plen,
			   void *dst, size_t llen)
{
	if (id >= CSDFS_CODEC_COUNT)
		return -EINVAL;
	if (codec_table[id].decompress)
		return codec_table[id].decompress(src, plen, dst, llen);

	/* NONE: the stored bytes are the data, so the lengths must agree. */
	if (plen != llen)
		return -EUCLEAN;
	if (llen)
		memcpy(dst, src, llen);
	return 0;
}
