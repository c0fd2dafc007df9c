/* SPDX-License-Identifier: MIT */
/*
 * Codec table: turns one logical chunk into stored bytes and back. No ZSTD_*
 * or LZ4 error code leaves the codec_*.c backends; everything is -errno.
 * Stored bytes are hostile: decoders are bounded and the decoded length must
 * equal the recorded logical length, else -EUCLEAN.
 */
#ifndef CSDFS_CODEC_H
#define CSDFS_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "csdfs/format.h"

struct csdfs_codec_spec {
	uint8_t id;     /* enum csdfs_codec_id */
	/*
	 * zstd: -7..19 (0 means zstd's default, 3); lz4: its acceleration,
	 * 1..64 (0 means lz4's default, 1; higher is faster and larger);
	 * none: 0.
	 */
	int8_t  level;
};

/*
 * csdfs_codec_parse - parse "zstd", "zstd:N" (N may be negative), "lz4",
 * "lz4:N", "none" into @out.
 * @return 0, or -EINVAL for an unknown name or an out-of-range level.
 */
int csdfs_codec_parse(const char *text, struct csdfs_codec_spec *out);

/*
 * csdfs_codec_format - write "zstd:3", "lz4" or "none" into @buf.
 * @return the string length (as snprintf), or -EINVAL for an unknown id.
 */
int csdfs_codec_format(struct csdfs_codec_spec spec, char *buf, size_t len);

/* csdfs_codec_name - "none", "zstd", "lz4", or NULL for an unknown id. */
const char *csdfs_codec_name(uint8_t id);

/* csdfs_codec_valid - a known id with a level in its codec's range. */
bool csdfs_codec_valid(struct csdfs_codec_spec spec);

/* The valid specs in words, for the one line that refuses a bad one
 * (test_codec checks that it names the ranges of the constants below). */
#define CSDFS_CODEC_CHOICES \
	"zstd, zstd:N (N -7..19; 0 is zstd's default level), lz4, " \
	"lz4:N (N 1..64, lz4's acceleration: higher is faster and larger) or none"

/* Worst-case stored size of a @llen-byte chunk for any codec. */
size_t csdfs_codec_bound(size_t llen);

/*
 * csdfs_codec_compress - compress @llen bytes of @src with @spec into @dst
 * (capacity @cap >= csdfs_codec_bound(llen)).
 * The chunk is stored compressed only if that saves at least
 * CSDFS_CODEC_MIN_SAVING(llen) bytes; otherwise @src is copied raw and
 * *@used is set to {CSDFS_CODEC_NONE, 0}.
 * @used: receives the codec actually used.
 * @return stored length (> 0), or -ENOMEM / -EIO on codec failure, -EINVAL
 * for llen == 0, cap < llen, or a level out of range for the codec.
 * Thread-safe: compression contexts are per thread.
 */
#define CSDFS_CODEC_MIN_SAVING(llen) ((llen) / 16 > 64 ? (llen) / 16 : 64)
int csdfs_codec_compress(struct csdfs_codec_spec spec, const void *src,
			 size_t llen, void *dst, size_t cap,
			 struct csdfs_codec_spec *used);

/*
 * csdfs_codec_decompress - decode @plen stored bytes with codec @id into
 * @dst, which must receive exactly @llen bytes.
 * @return 0, -EUCLEAN if the stored bytes are malformed or decode to any
 * other length, -EINVAL for an unknown codec id, -ENOMEM.
 * Thread-safe.
 */
int csdfs_codec_decompress(uint8_t id, const void *src, size_t plen,
			   void *dst, size_t llen);

/* Backend entry points (codec_zstd.c, codec_lz4.c); same contracts, except
 * that compress returns -ENOSPC when the output does not fit @cap (the
 * caller then stores the chunk raw). */
#define CSDFS_CODEC_ZSTD_LEVEL_MIN (-7)
#define CSDFS_CODEC_ZSTD_LEVEL_MAX 19
#define CSDFS_CODEC_LZ4_LEVEL_MIN 1
#define CSDFS_CODEC_LZ4_LEVEL_MAX 64
int csdfs_zstd_compress(int level, const void *src, size_t llen, void *dst,
			size_t cap);
int csdfs_zstd_decompress(const void *src, size_t plen, void *dst,
			  size_t llen);
size_t csdfs_zstd_bound(size_t llen);
int csdfs_lz4_compress(int accel, const void *src, size_t llen, void *dst,
		       size_t cap);
int csdfs_lz4_decompress(const void *src, size_t plen, void *dst,
			 size_t llen);
size_t csdfs_lz4_bound(size_t llen);

#endif
