/* SPDX-License-Identifier: MIT */
/*
 * lz4 backend: raw lz4 blocks, no frame. A block records neither its stored
 * nor its decoded length, so both come from the chunk record; decoding is
 * bounded by LZ4_decompress_safe and must produce exactly llen bytes. lz4
 * reports failure only as a non-positive int, translated to -errno here.
 */
#include <errno.h>
#include <limits.h>
#include <lz4.h>

#include "csdfs/codec.h"

size_t csdfs_lz4_bound(size_t llen)
{
	if (llen > LZ4_MAX_INPUT_SIZE)
		return 0;   /* lz4 cannot take it: never stored as lz4 */
	return (size_t)LZ4_compressBound((int)llen);
}

/*
 * @accel: lz4's acceleration; 0 is its default (1). Each step up skips more
 * of the input while matching: faster, larger output, the same decoder.
 * @return stored length, -ENOSPC if it does not fit @cap, -EINVAL.
 */
int csdfs_lz4_compress(int accel, const void *src, size_t llen, void *dst,
		       size_t cap)
{
	int r;

	if (llen > LZ4_MAX_INPUT_SIZE || accel < 0)
		return -EINVAL;
	/* With a valid size, 0 can only mean "output did not fit in cap". */
	r = LZ4_compress_fast(src, dst, (int)llen,
			      cap > INT_MAX ? INT_MAX : (int)cap,
			      accel ? accel : 1);
	return r > 0 ? r : -ENOSPC;
}

/* @return 0, -EUCLEAN unless @src decodes to exactly @llen bytes. */
int csdfs_lz4_decompress(const void *src, size_t plen, void *dst,
			 size_t llen)
{
	int r;

	if (plen > INT_MAX || llen > INT_MAX)
		return -EUCLEAN;
	r = LZ4_decompress_safe(src, dst, (int)plen, (int)llen);
	return r >= 0 && (size_t)r == llen ? 0 : -EUCLEAN;
}
