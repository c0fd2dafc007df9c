/* SPDX-License-Identifier: MIT */
/*
 * zstd backend. The only file that sees ZSTD_* results: every one of them is
 * translated to -errno here. A stored chunk is exactly one zstd frame with
 * its content size and no checksum (csdfs checksums the stored bytes
 * itself) and no dictionary id.
 *
 * Contexts are per thread, created on first use and freed by a pthread key
 * destructor when the thread exits, so no lock is taken on the data path.
 * One-shot decoding writes straight into the caller's llen-byte buffer and
 * allocates nothing per frame, so a hostile frame header (huge window, huge
 * content size) costs no memory.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "csdfs/codec.h"

struct zstd_ctx {
	ZSTD_CCtx *cctx;   /* lazily: a read-only thread never pays for one */
	ZSTD_DCtx *dctx;
};

static pthread_once_t zstd_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t zstd_key;
static int zstd_key_err;
/* Mirrors the key's value for a lookup without a call. */
static __thread struct zstd_ctx *zstd_tls;

static void zstd_ctx_free(void *arg)
{
	struct zstd_ctx *ctx = arg;

	ZSTD_freeCCtx(ctx->cctx);
	ZSTD_freeDCtx(ctx->dctx);
	free(ctx);
	/* Destructors run on the exiting thread: a later use re-creates. */
	zstd_tls = NULL;
}

static void zstd_key_create(void)
{
	zstd_key_err = pthread_key_create(&zstd_key, zstd_ctx_free);
}

static struct zstd_ctx *zstd_ctx_get(void)
{
	struct zstd_ctx *ctx = zstd_tls;

	if (ctx)
		return ctx;
	pthread_once(&zstd_key_once, zstd_key_create);
	if (zstd_key_err)
		return NULL;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return NULL;
	if (pthread_setspecific(zstd_key, ctx)) {
		free(ctx);
		return NULL;
	}
	zstd_tls = ctx;
	return ctx;
}

static ZSTD_CCtx *zstd_cctx_get(void)
{
	struct zstd_ctx *ctx = zstd_ctx_get();
	ZSTD_CCtx *cctx;
	size_t e1, e2, e3;

	if (!ctx)
		return NULL;
	if (ctx->cctx)
		return ctx->cctx;
	cctx = ZSTD_createCCtx();
	if (!cctx)
		return NULL;
	/* Sticky across ZSTD_compress2 calls, so set once per context. */
	e1 = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 0);
	e2 = ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
	e3 = ZSTD_CCtx_setParameter(cctx, ZSTD_c_dictIDFlag, 0);
	if (ZSTD_isError(e1) || ZSTD_isError(e2) || ZSTD_isError(e3)) {
		ZSTD_freeCCtx(cctx);
		return NULL;
	}
	ctx->cctx = cctx;
	return cctx;
}

static ZSTD_DCtx *zstd_dctx_get(void)
{
	struct zstd_ctx *ctx = zstd_ctx_get();

	if (!ctx)
		return NULL;
	if (!ctx->dctx)
		ctx->dctx = ZSTD_createDCtx();
	return ctx->dctx;
}

size_t csdfs_zstd_bound(size_t llen)
{
	size_t bound = ZSTD_compressBound(llen);

	/* Too large for zstd at all: it cannot be stored compressed. */
	return ZSTD_isError(bound) ? 0 : bound;
}

/* @return stored length, -ENOSPC if it does not fit @cap, -EINVAL, -ENOMEM. */
int csdfs_zstd_compress(int level, const void *src, size_t llen, void *dst,
			size_t cap)
{
	ZSTD_CCtx *cctx;
	size_t r;

	if (llen > INT_MAX || level < ZSTD_minCLevel() ||
	    level > ZSTD_maxCLevel())
		return -EINVAL;
	cctx = zstd_cctx_get();
	if (!cctx)
		return -ENOMEM;
	r = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel,
				   level ? level : ZSTD_CLEVEL_DEFAULT);
	if (ZSTD_isError(r))
		return -EINVAL;

	/* ZSTD_compress2 resets the session first: errors leave cctx usable. */
	r = ZSTD_compress2(cctx, dst, cap, src, llen);
	if (ZSTD_isError(r)) {
		switch (ZSTD_getErrorCode(r)) {
		case ZSTD_error_dstSize_tooSmall:
			return -ENOSPC;
		case ZSTD_error_memory_allocation:
			return -ENOMEM;
		default:
			return -EIO;
		}
	}
	if (r == 0 || r > INT_MAX)
		return -EIO;
	return (int)r;
}

/* @return 0, -EUCLEAN unless @src is one frame of exactly @llen bytes. */
int csdfs_zstd_decompress(const void *src, size_t plen, void *dst,
			  size_t llen)
{
	ZSTD_DCtx *dctx = zstd_dctx_get();
	size_t r;

	if (!dctx)
		return -ENOMEM;

	/*
	 * One chunk is one frame. ZSTD_decompressDCtx would also accept
	 * concatenated or skippable frames; a record that points at more
	 * than one frame is wrong even if the lengths happen to add up.
	 */
	r = ZSTD_findFrameCompressedSize(src, plen);
	if (ZSTD_isError(r) || r != plen)
		return -EUCLEAN;

	/* Capacity llen: a frame that would decode to more fails in zstd. */
	r = ZSTD_decompressDCtx(dctx, dst, llen, src, plen);
	if (ZSTD_isError(r))
		return ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation ?
		       -ENOMEM : -EUCLEAN;
	return r == llen ? 0 : -EUCLEAN;
}
