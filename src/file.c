/* SPDX-License-Identifier: MIT */
/*
 * The data path. A write is cut into chunks; each chunk is built whole
 * (read-modify-write when the request covers only part of it), trimmed of
 * trailing zeros (an all-zero chunk becomes a hole), compressed, and all
 * chunks of the request are packed back to back at the allocator's head,
 * written with as few pwrites as the placement allows, and finally mapped
 * in ONE operation transaction. Until that transaction commits, readers see
 * the old chunks; after it, the new ones: a request never becomes visible,
 * or durable, in parts (G3).
 *
 * Reads look the mappings up under vol->lock, then read, verify and decode
 * outside it. A checksum mismatch is re-checked against a fresh mapping
 * (the chunk may have been replaced and its blocks recycled meanwhile)
 * before it is reported as corruption.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <linux/falloc.h>

#include "csdfs/csum.h"
#include "csdfs/log.h"
#include "csdfs/pool.h"
#include "vol.h"

#define NS_PER_DAY (86400ll * 1000000000ll)

/* One chunk of a pending write. llen == 0 means "becomes a hole". */
struct wchunk {
	uint64_t idx;
	uint32_t llen;
	uint32_t plen;
	size_t packoff;
	uint64_t pa;
	uint32_t csum;
	struct csdfs_codec_spec used;
	bool inplace;              /* test_inplace: overwrite at pa */
	bool placed;               /* pa reserved at the allocator's head */
	const char *src;           /* logical bytes (valid until the write ends) */
	size_t slot;               /* compression slot in the pack buffer */
	bool inplace_ok;           /* test_inplace: may overwrite where it lies */
	bool partial;              /* read-modify-write: likely written again */
};

struct wplan {
	struct csdfs_vol *vol;
	uint64_t ino;
	uint32_t cs;
	struct csdfs_codec_spec spec;
	struct wchunk *c;
	size_t n;
	char *pack;
	size_t packlen, packcap;
	size_t nslots;             /* chunks to compress */
	int slot;
	bool compressed;
	bool committed;            /* the mapping operation succeeded */
};

/* ---- chunk stripes ------------------------------------------------------- */

static unsigned stripe_of(uint64_t ino, uint64_t idx)
{
	return (unsigned)((ino * 0x9e3779b97f4a7c15ull + idx) % CSDFS_STRIPES);
}

/* Lock the stripes of chunks [first, last] in ascending stripe order. */
static void stripes_lock(struct csdfs_vol *vol, uint64_t ino, uint64_t first,
			 uint64_t last, uint64_t mask[CSDFS_STRIPES / 64])
{
	memset(mask, 0, CSDFS_STRIPES / 8);
	for (uint64_t i = first; i <= last && i - first < CSDFS_STRIPES; i++) {
		unsigned s = stripe_of(ino, i);

		mask[s / 64] |= 1ull << (s % 64);
	}
	for (unsigned s = 0; s < CSDFS_STRIPES; s++)
		if (mask[s / 64] & (1ull << (s % 64)))
			pthread_mutex_lock(&vol->stripes[s]);
}

static void stripes_unlock(struct csdfs_vol *vol,
			   const uint64_t mask[CSDFS_STRIPES / 64])
{
	for (unsigned s = 0; s < CSDFS_STRIPES; s++)
		if (mask[s / 64] & (1ull << (s % 64)))
			pthread_mutex_unlock(&vol->stripes[s]);
}

/* ---- reading chunks ------------------------------------------------------ */

/* Report a corrupt stored chunk once (log line and volume counter), however
 * often it is read: the set remembers the container offsets reported. */
static void count_csum_error(struct csdfs_vol *vol, uint64_t ino, uint64_t idx,
			     uint32_t cs, uint64_t pa)
{
	bool first = true;
	size_t h;

	pthread_mutex_lock(&vol->lock);
	h = (size_t)((pa * 0x9e3779b97f4a7c15ull) >> 54) % CSDFS_BAD_SEEN;
	for (size_t n = 0; n < CSDFS_BAD_SEEN; n++, h = (h + 1) % CSDFS_BAD_SEEN) {
		if (vol->bad_seen[h] == pa + 1) {
			first = false;
			break;
		}
		if (!vol->bad_seen[h]) {
			vol->bad_seen[h] = pa + 1;
			break;
		}
	}
	if (first)
		vol->counters.csum_errors++;
	pthread_mutex_unlock(&vol->lock);
	if (first)
		csdfs_log(LOG_ERR, "checksum mismatch: inode %llu offset %llu..%llu (container byte %llu): reads of that range return EIO",
			  (unsigned long long)ino, (unsigned long long)(idx * cs),
			  (unsigned long long)((idx + 1) * cs - 1),
			  (unsigned long long)pa);
}

/* Verify and decode stored bytes @stored of @c into @dst (cs bytes: the
 * tail past llen is zeroed). */
static int decode_chunk(const struct csdfs_chunk_disk *c, const char *stored,
			char *dst, uint32_t cs, bool check)
{
	int rc;

	if (c->llen > cs || !c->llen)
		return -EUCLEAN;
	if (check && csdfs_crc32c(0, stored, c->plen) != c->csum)
		return -EUCLEAN;
	rc = csdfs_codec_decompress(c->codec, stored, c->plen, dst, c->llen);
	if (rc)
		return rc == -EINVAL ? -EUCLEAN : rc;
	memset(dst + c->llen, 0, cs - c->llen);
	return 0;
}

/* Look up chunk @idx afresh. @return 0, -ENOENT for a hole. */
static int lookup_chunk(struct csdfs_vol *vol, uint64_t ino, uint64_t idx,
			struct csdfs_chunk_disk *c)
{
	struct csdfs_op op;
	int rc;

	rc = csdfs_op_begin_read(vol, &op);
	if (rc)
		return rc;
	rc = csdfs_chunk_get(op.txn, ino, idx, c);
	return csdfs_op_end(&op, rc);
}

/*
 * Read chunk @idx into @dst (cs bytes), starting from mapping @c (NULL:
 * look it up). Retries once with a fresh mapping after a mismatch. @keep:
 * cache the decoded chunk (not for a version about to be replaced).
 */
static int load_chunk(struct csdfs_vol *vol, uint64_t ino, uint64_t idx,
		      uint32_t cs, const struct csdfs_chunk_disk *c, char *dst,
		      char *scratch, bool keep)
{
	struct csdfs_chunk_disk cur;
	int rc;

	if (!c) {
		rc = lookup_chunk(vol, ino, idx, &cur);
		if (rc == -ENOENT) {
			memset(dst, 0, cs);
			return 0;
		}
		if (rc)
			return rc;
		c = &cur;
	}
	for (int attempt = 0; ; attempt++) {
		struct csdfs_cache_key key = { ino, idx, c->pa, c->csum };

		if (!csdfs_cache_get(vol->cache, &key, dst, cs))
			return 0;
		if (c->plen > csdfs_codec_bound(cs))
			return -EUCLEAN;
		rc = csdfs_io_pread(&vol->io, scratch, c->plen, c->pa);
		if (!rc)
			rc = decode_chunk(c, scratch, dst, cs, !vol->test_inplace);
		if (!rc && keep)
			csdfs_cache_put(vol->cache, &key, dst, cs, cs);
		if (rc != -EUCLEAN || attempt)
			break;
		{
			struct csdfs_chunk_disk fresh;
			int lrc = lookup_chunk(vol, ino, idx, &fresh);

			if (lrc == -ENOENT) {
				memset(dst, 0, cs);
				return 0;
			}
			if (lrc || !memcmp(&fresh, c, sizeof(fresh)))
				break;
			cur = fresh;
			c = &cur;
		}
	}
	if (rc == -EUCLEAN) {
		count_csum_error(vol, ino, idx, cs, c->pa);
		return -EIO;
	}
	return rc;
}

/* Largest run of stored chunks one read fetches (and the read scratch). */
#define READ_SPAN_MAX (1u << 20)
/* Runs from this many logical bytes on are streaming reads (readahead, large
 * reads): they are read past the host's page cache (csdfs_io_pread_direct),
 * since the kernel caches what we return. Smaller reads, such as a
 * database's page reads, keep the host's cache as a second level. */
#define READ_DIRECT_MIN (128u << 10)
/* The read scratch has room to round a run out to whole host blocks. */
#define SPAN_SLACK (2 * CSDFS_IO_DIRECT_ALIGN)

/* All @k chunks stored uncompressed and whole: their bytes are the data. */
static bool run_is_raw(const struct csdfs_chunk_disk *recs, uint64_t k, uint32_t cs)
{
	for (uint64_t j = 0; j < k; j++)
		if (recs[j].codec != CSDFS_CODEC_NONE || recs[j].plen != cs ||
		    recs[j].llen != cs)
			return false;
	return true;
}

/*
 * Read whole chunks recs[0..] (have[] mapped, @n of them, @room bytes of
 * @dst) that lie back to back in the container, as sequentially written
 * chunks do, with one pread into @span (@span_cap bytes, at most
 * READ_SPAN_MAX; for a caller whose @n chunks can make a streaming run,
 * plus SPAN_SLACK and aligned to CSDFS_IO_DIRECT_ALIGN), and
 * decode each into @dst. Not cached: the kernel's page cache holds whole
 * chunks it read. @return how many chunks were delivered (0: let load_chunk
 * do the first one, e.g. after a checksum mismatch, which it retries and
 * reports).
 */
static uint64_t read_whole_run(struct csdfs_vol *vol, uint32_t cs,
			       const struct csdfs_chunk_disk *recs,
			       const bool *have, uint64_t n, char *dst,
			       uint64_t room, char *span, size_t span_cap)
{
	uint64_t k = 0, len = 0, done = 0;
	bool streaming;

	while (k < n && have[k] && (k + 1) * cs <= room &&
	       recs[k].plen <= csdfs_codec_bound(cs) &&
	       len + recs[k].plen <= span_cap &&
	       (k == 0 || recs[k].pa == recs[0].pa + len)) {
		len += recs[k].plen;
		k++;
	}
	if (k < 2)
		return 0;
	streaming = k * cs >= READ_DIRECT_MIN;
	/* Incompressible data is stored as it is: read it straight into the
	 * reply and check it there, no copy. */
	if (run_is_raw(recs, k, cs)) {
		int rc = streaming ? csdfs_io_pread_direct(&vol->io, dst, len, recs[0].pa)
				   : csdfs_io_pread(&vol->io, dst, len, recs[0].pa);

		if (rc)
			return 0;
		for (uint64_t j = 0; j < k; j++) {
			if (!vol->test_inplace &&
			    csdfs_crc32c(0, dst + j * cs, cs) != recs[j].csum)
				return done;
			done++;
		}
		return done;
	}
	if (streaming) {
		/* Whole host blocks around the run, so it can be read direct:
		 * packed chunks start and end anywhere in a block. */
		uint64_t head = recs[0].pa % CSDFS_IO_DIRECT_ALIGN;
		uint64_t whole = (head + len + CSDFS_IO_DIRECT_ALIGN - 1) /
				 CSDFS_IO_DIRECT_ALIGN * CSDFS_IO_DIRECT_ALIGN;

		if (recs[0].pa - head + whole > vol->io.size ||
		    csdfs_io_pread_direct(&vol->io, span, whole, recs[0].pa - head))
			return 0;
		span += head;
	} else if (csdfs_io_pread(&vol->io, span, len, recs[0].pa)) {
		return 0;
	}
	for (uint64_t j = 0, at = 0; j < k; at += recs[j].plen, j++) {
		if (decode_chunk(&recs[j], span + at, dst + j * cs, cs,
				 !vol->test_inplace))
			break;
		done++;
	}
	return done;
}

/* ---- writing chunks ------------------------------------------------------ */

static void plan_free(struct wplan *p)
{
	free(p->c);
	free(p->pack);
}

/* @n chunks, of which at most @nstored are stored (need pack space). */
static int plan_init(struct wplan *p, struct csdfs_vol *vol, uint64_t ino,
		     const struct csdfs_inode_disk *rec, size_t n, size_t nstored)
{
	memset(p, 0, sizeof(*p));
	p->vol = vol;
	p->ino = ino;
	p->cs = rec->chunk_size ? rec->chunk_size : vol->sb.chunk_size;
	p->spec.id = rec->codec;
	p->spec.level = rec->level;
	p->slot = -1;
	p->c = calloc(n, sizeof(*p->c));
	p->packcap = nstored * csdfs_codec_bound(p->cs);
	p->pack = malloc(p->packcap ? p->packcap : 1);
	if (!p->c || !p->pack) {
		plan_free(p);
		return -ENOMEM;
	}
	return 0;
}

/* Add chunk @idx with logical content @src[0..llen): trailing zeros are not
 * stored, an all-zero chunk becomes a hole. Compression happens for the
 * whole plan at once (plan_compress). */
static int plan_add(struct wplan *p, uint64_t idx, const char *src,
		    uint32_t llen)
{
	struct wchunk *c = &p->c[p->n++];

	while (llen && !src[llen - 1])
		llen--;
	c->idx = idx;
	c->llen = llen;
	c->src = src;
	if (llen)
		c->slot = p->nslots++;
	return 0;
}

static int compress_one(void *ctx, size_t i)
{
	struct wplan *p = ctx;
	struct wchunk *c = &p->c[i];
	size_t bound = csdfs_codec_bound(p->cs);
	char *out = p->pack + c->slot * bound;
	int rc;

	if (!c->llen)
		return 0;
	rc = csdfs_codec_compress(p->spec, c->src, c->llen, out, bound, &c->used);
	if (rc < 0)
		return rc;
	c->plen = (uint32_t)rc;
	c->csum = csdfs_crc32c(0, out, c->plen);
	return 0;
}

/* Compress every chunk (on several cores when there are several), then
 * pack the results back to back. */
static int plan_compress(struct wplan *p)
{
	size_t bound = csdfs_codec_bound(p->cs);
	int rc;

	if (p->compressed)
		return 0;
	if (p->nslots * bound > p->packcap)
		return -EINVAL;
	rc = csdfs_pool_run(p->nslots > 1 ? p->vol->pool : NULL, p->n,
			    compress_one, p);
	if (rc)
		return rc;
	p->packlen = 0;
	for (size_t i = 0; i < p->n; i++) {
		struct wchunk *c = &p->c[i];

		if (!c->llen)
			continue;
		memmove(p->pack + p->packlen, p->pack + c->slot * bound, c->plen);
		c->packoff = p->packlen;
		p->packlen += c->plen;
	}
	p->compressed = true;
	return 0;
}

/* Would the plan push the mapped bytes past the logical capacity? Exact:
 * counts what the chunks it replaces already map. Called under vol->lock. */
static int check_logical_locked(struct wplan *p)
{
	struct csdfs_vol *vol = p->vol;
	uint64_t add = 0, sub = 0, used = vol->counters.logical_used;

	for (size_t i = 0; i < p->n; i++)
		add += p->c[i].llen ? p->cs : 0;
	if (used + add <= vol->sb.logical_bytes)
		return 0;
	for (size_t i = 0; i < p->n; i++) {
		struct csdfs_chunk_disk old;

		if (!csdfs_chunk_get(vol->group, p->ino, p->c[i].idx, &old))
			sub += p->cs;
	}
	return used - sub + add <= vol->sb.logical_bytes ? 0 : -ENOSPC;
}

static int place_locked(struct wplan *p, bool use_reserve)
{
	for (size_t i = 0; i < p->n; i++) {
		struct wchunk *c = &p->c[i];
		int rc;

		if (!c->llen || c->inplace || c->placed)
			continue;
		if (c->plen % CSDFS_BLOCK_SIZE == 0)
			csdfs_alloc_align(&p->vol->alloc);
		rc = csdfs_alloc_place(&p->vol->alloc, c->plen, use_reserve, &c->pa);
		if (rc)
			return rc;
		c->placed = true;
	}
	return 0;
}

/*
 * Place every stored chunk at the head and write them out. Data writes
 * (@use_reserve false) may not eat into the reserve kept for truncate, hole
 * punching and unlink. Space freed by the open group only becomes usable
 * at its commit, so a full volume commits once before giving up.
 */
static int mark_inplace(struct csdfs_vol *vol, struct wplan *p,
			struct wchunk *c);

static int plan_write(struct wplan *p, bool use_reserve)
{
	struct csdfs_vol *vol = p->vol;
	uint64_t lo = UINT64_MAX, hi = 0;
	bool retry = false;
	int rc;

	rc = plan_compress(p);
	for (size_t i = 0; i < p->n && !rc; i++)
		if (p->c[i].inplace_ok)
			rc = mark_inplace(vol, p, &p->c[i]);
	if (rc)
		return rc;
	pthread_mutex_lock(&vol->lock);
	rc = vol->failed;
	if (!rc && !use_reserve)
		rc = check_logical_locked(p);
	if (!rc) {
		rc = place_locked(p, use_reserve);
		/* Only a shortage of blocks can be cured by a commit. */
		retry = rc == -ENOSPC && (vol->alloc.nquar || vol->dirty);
	}
	if (retry) {
		/* Take back what this plan placed first: the commit recycles
		 * freed blocks, and must see the head where no unregistered
		 * placement lies beyond it. */
		for (size_t i = p->n; i-- > 0; ) {
			if (p->c[i].placed)
				csdfs_alloc_unplace(&vol->alloc, p->c[i].pa, p->c[i].plen);
			p->c[i].placed = false;
		}
		rc = csdfs_vol_commit_locked(vol);
		if (!rc)
			rc = place_locked(p, use_reserve);
	}
	for (size_t i = 0; i < p->n && !rc; i++) {
		struct wchunk *c = &p->c[i];

		if (c->placed) {
			lo = c->pa < lo ? c->pa : lo;
			hi = c->pa + c->plen > hi ? c->pa + c->plen : hi;
		}
	}
	if (!rc && hi) {
		rc = csdfs_alloc_inflight_add(&vol->alloc, lo, hi);
		if (rc >= 0) {
			p->slot = rc;
			rc = 0;
		} else {
			rc = -EBUSY;
		}
	}
	pthread_mutex_unlock(&vol->lock);
	if (rc)
		return rc;
	/* Test-only in-place overwrite, in 4 KiB pieces with a pause between
	 * them so that a kill lands mid-chunk (see csdfs_mount_opts). */
	for (size_t i = 0; i < p->n && !rc; i++) {
		struct wchunk *c = &p->c[i];

		for (uint32_t o = 0; c->inplace && o < c->plen && !rc; o += 4096) {
			rc = csdfs_io_pwrite(&vol->io, p->pack + c->packoff + o,
					     c->plen - o < 4096 ? c->plen - o : 4096,
					     c->pa + o);
			usleep(2000);
		}
	}
	/* One pwrite per physically contiguous run of chunks. */
	for (size_t i = 0; i < p->n && !rc; ) {
		struct wchunk *c = &p->c[i];
		size_t j = i + 1, len;

		if (!c->llen || c->inplace) {
			i++;
			continue;
		}
		len = c->plen;
		while (j < p->n && p->c[j].llen && !p->c[j].inplace &&
		       p->c[j].pa == c->pa + len &&
		       p->c[j].packoff == c->packoff + len) {
			len += p->c[j].plen;
			j++;
		}
		rc = csdfs_io_pwrite(&vol->io, p->pack + c->packoff, len, c->pa);
		i = j;
	}
	return rc;
}

/* Map every chunk of the plan inside @op. */
static int plan_commit(struct wplan *p, struct csdfs_op *op,
		       struct csdfs_inode_disk *rec)
{
	op->inflight_slot = p->slot;
	p->slot = -1;
	for (size_t i = 0; i < p->n; i++) {
		struct wchunk *c = &p->c[i];
		struct csdfs_chunk_disk d;
		int rc;

		if (c->inplace) {
			rc = csdfs_chunk_get(op->txn, p->ino, c->idx, &d);
			if (!rc) {
				d.csum = c->csum;
				rc = csdfs_chunk_put(op->txn, p->ino, c->idx, &d);
			}
		} else if (!c->llen) {
			rc = csdfs_chunk_set(op, p->ino, rec, c->idx, NULL);
		} else {
			memset(&d, 0, sizeof(d));
			d.pa = c->pa;
			d.plen = c->plen;
			d.llen = c->llen;
			d.csum = c->csum;
			d.codec = c->used.id;
			d.level = c->used.level;
			if (c->used.id == CSDFS_CODEC_NONE && p->spec.id != CSDFS_CODEC_NONE)
				d.flags |= CSDFS_CHUNK_INCOMPRESSIBLE;
			rc = csdfs_chunk_set(op, p->ino, rec, c->idx, &d);
			op->delta.dev_bytes_written += c->plen;
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* Remember the partially written chunks of a committed plan: the next
 * partial write of the same chunk (a sequential writer in small steps)
 * then needs no decode. Whole chunks are not cached: large writes would
 * only churn the cache (and cost a copy each). */
static void plan_cache(struct wplan *p)
{
	for (size_t i = 0; i < p->n; i++) {
		struct wchunk *c = &p->c[i];
		struct csdfs_cache_key key = { p->ino, c->idx, c->pa, c->csum };

		if (c->llen && c->partial && !c->inplace)
			csdfs_cache_put(p->vol->cache, &key, c->src, c->llen, p->cs);
	}
}

/* Release what a plan holds at the allocator: its in-flight registration
 * and, unless its mapping committed, the bytes it placed. */
static void plan_abandon(struct wplan *p)
{
	struct csdfs_alloc *a = &p->vol->alloc;
	bool placed = false;

	for (size_t i = 0; i < p->n; i++)
		placed = placed || p->c[i].placed;
	/* Committed, its slot handed to the operation: nothing to release. */
	if (p->slot < 0 && (p->committed || !placed))
		return;
	pthread_mutex_lock(&p->vol->lock);
	if (p->slot >= 0)
		csdfs_alloc_inflight_del(a, p->slot);
	p->slot = -1;
	for (size_t i = p->n; i-- > 0 && !p->committed; ) {
		if (p->c[i].placed)
			csdfs_alloc_unplace(a, p->c[i].pa, p->c[i].plen);
		p->c[i].placed = false;
	}
	pthread_mutex_unlock(&p->vol->lock);
}

/* test_inplace: a raw chunk replacing a raw chunk of the same length is
 * overwritten where it lies. */
static int mark_inplace(struct csdfs_vol *vol, struct wplan *p,
			struct wchunk *c)
{
	struct csdfs_chunk_disk old;
	int rc;

	if (!c->llen || c->used.id != CSDFS_CODEC_NONE)
		return 0;
	rc = lookup_chunk(vol, p->ino, c->idx, &old);
	if (rc == -ENOENT)
		return 0;
	if (!rc && old.codec == CSDFS_CODEC_NONE && old.plen == c->plen &&
	    old.llen == c->llen) {
		c->inplace = true;
		c->pa = old.pa;
	}
	return rc;
}

static int load_reg(struct csdfs_vol *vol, uint64_t ino,
		    struct csdfs_inode_disk *rec)
{
	struct csdfs_op op;
	int rc;

	rc = csdfs_op_begin_read(vol, &op);
	if (rc)
		return rc;
	rc = csdfs_irec_load(op.txn, ino, rec);
	if (!rc && S_ISDIR(rec->mode))
		rc = -EISDIR;
	else if (!rc && !S_ISREG(rec->mode))
		rc = -EINVAL;
	return csdfs_op_end(&op, rc);
}

ssize_t csdfs_fs_write(struct csdfs_vol *vol, uint64_t ino, const char *buf,
		       size_t size, uint64_t off, unsigned flags)
{
	uint64_t mask[CSDFS_STRIPES / 64], first, last, end = off + size;
	struct csdfs_inode_disk rec;
	struct csdfs_inode *in;
	struct wplan plan;
	struct csdfs_op op;
	char *tmp = NULL, *scratch = NULL;
	uint32_t cs;
	int rc;

	if (!size)
		return 0;
	if (end > CSDFS_MAX_FILE_SIZE || end < off)
		return -EFBIG;
	in = csdfs_inode_get(vol, ino);
	if (!in)
		return -ENOMEM;
	pthread_rwlock_rdlock(&in->io_lock);
	/* The chunk size picks the stripes; the held io_lock keeps it. */
	cs = __atomic_load_n(&in->chunk_size, __ATOMIC_RELAXED);
	if (!cs) {
		rc = load_reg(vol, ino, &rec);
		if (rc)
			goto out_unlock_io;
		cs = rec.chunk_size ? rec.chunk_size : vol->sb.chunk_size;
		__atomic_store_n(&in->chunk_size, cs, __ATOMIC_RELAXED);
	}
	first = off / cs;
	last = (end - 1) / cs;
	stripes_lock(vol, ino, first, last, mask);
	/* The size that matters is the one after we own our chunks. */
	rc = load_reg(vol, ino, &rec);
	if (!rc && (rec.chunk_size ? rec.chunk_size : vol->sb.chunk_size) != cs) {
		csdfs_log(LOG_ERR, "inode %llu: chunk size changed under a write",
			  (unsigned long long)ino);
		__atomic_store_n(&in->chunk_size, 0, __ATOMIC_RELAXED);
		rc = -EIO;
	}
	if (!rc)
		rc = plan_init(&plan, vol, ino, &rec, last - first + 1,
			       last - first + 1);
	if (rc)
		goto out_unlock_stripes;
	for (uint64_t idx = first; idx <= last && !rc; idx++) {
		uint64_t cstart = idx * cs;
		uint32_t ws = (uint32_t)((off > cstart ? off : cstart) - cstart);
		uint32_t we = (uint32_t)((end < cstart + cs ? end : cstart + cs) - cstart);

		if (ws == 0 && (we == cs || cstart + we >= rec.size)) {
			/* Whole chunk (or all of it that lies before EOF). */
			rc = plan_add(&plan, idx, buf + (cstart - off), we);
			plan.c[plan.n - 1].inplace_ok = vol->test_inplace;
			continue;
		}
		/* Only the first and the last chunk can be partial; each gets
		 * its own buffer (the plan keeps pointing at it). */
		if (!tmp) {
			tmp = malloc(2 * (size_t)cs);
			scratch = malloc(csdfs_codec_bound(cs));
			if (!tmp || !scratch) {
				rc = -ENOMEM;
				break;
			}
		}
		{
			char *cb = tmp + (idx == first ? 0 : cs);
			uint64_t keep = rec.size > cstart ? rec.size - cstart : 0;
			uint32_t llen = keep < cs ? (uint32_t)keep : cs;

			rc = load_chunk(vol, ino, idx, cs, NULL, cb, scratch, false);
			if (rc)
				break;
			memcpy(cb + ws, buf + (cstart + ws - off), we - ws);
			/* Bytes past EOF inside the chunk must stay zero. */
			if (llen < we)
				llen = we;
			memset(cb + llen, 0, cs - llen);
			rc = plan_add(&plan, idx, cb, llen);
			plan.c[plan.n - 1].partial = true;
		}
	}
	if (!rc)
		rc = plan_write(&plan, false);
	if (!rc) {
		rc = csdfs_op_begin(vol, &op);
		if (!rc) {
			rc = csdfs_irec_load(op.txn, ino, &rec);
			if (!rc)
				rc = plan_commit(&plan, &op, &rec);
			if (!rc) {
				int64_t now = csdfs_now_ns();

				if (end > rec.size)
					rec.size = end;
				if (!(flags & CSDFS_WRITE_KEEP_TIMES))
					rec.mtime_ns = rec.ctime_ns = now;
				op.delta.app_bytes_written += size;
				rc = csdfs_irec_store(op.txn, ino, &rec);
			}
			if (!rc)
				csdfs_op_touch(&op, ino);
			rc = csdfs_op_end(&op, rc);
			plan.committed = !rc;
		}
	}
	if (plan.committed)
		plan_cache(&plan);
	plan_abandon(&plan);
	plan_free(&plan);
out_unlock_stripes:
	stripes_unlock(vol, mask);
out_unlock_io:
	pthread_rwlock_unlock(&in->io_lock);
	free(tmp);
	free(scratch);
	if (!rc && (flags & CSDFS_WRITE_SYNC))
		rc = csdfs_vol_commit_for(vol, ino);
	csdfs_inode_put(vol, in);
	return rc ? rc : (ssize_t)size;
}

/* ---- read ---------------------------------------------------------------- */

/* relatime: update atime only when it is older than m/ctime or a day old. */
static void touch_atime(struct csdfs_vol *vol, uint64_t ino)
{
	struct csdfs_inode_disk rec;
	struct csdfs_op op;
	int64_t now = csdfs_now_ns();
	int rc;

	if (csdfs_op_begin(vol, &op))
		return;
	rc = csdfs_irec_load(op.txn, ino, &rec);
	if (!rc && (rec.atime_ns <= rec.mtime_ns || rec.atime_ns <= rec.ctime_ns ||
		    now - rec.atime_ns > NS_PER_DAY)) {
		rec.atime_ns = now;
		rc = csdfs_irec_store(op.txn, ino, &rec);
	} else if (!rc) {
		rc = -EALREADY;  /* nothing to change: abort quietly */
	}
	csdfs_op_end(&op, rc);
}

ssize_t csdfs_fs_read(struct csdfs_vol *vol, uint64_t ino, char *buf,
		      size_t size, uint64_t off)
{
	return csdfs_fs_read_with(vol, ino, buf, size, off, NULL, NULL);
}

/*
 * @around, if given, also gets the rest of a partly read chunk (up to EOF),
 * decoded anyway, so the kernel can cache it as btrfs caches the rest of a
 * compressed extent, and a random reader's next access to the same chunk
 * needs no round trip. Only while the inode never had a writer: the kernel
 * then holds no dirty page of it that stale bytes could overwrite. It gets
 * the file's store generation too: whoever hands the bytes to the kernel
 * later does so through csdfs_fs_if_unchanged().
 */
ssize_t csdfs_fs_read_with(struct csdfs_vol *vol, uint64_t ino, char *buf,
			   size_t size, uint64_t off, csdfs_around_fn around,
			   void *arg)
{
	struct csdfs_chunk_disk *recs = NULL;
	struct csdfs_inode_disk rec;
	struct csdfs_inode *in;
	struct csdfs_op op;
	char *tmp = NULL, *scratch = NULL;
	uint64_t first, last, n, end;
	bool *have = NULL, need_atime = false;
	size_t span_cap;
	uint64_t gen;
	uint32_t cs;
	int rc;

	in = csdfs_inode_get(vol, ino);
	if (!in)
		return -ENOMEM;
	pthread_rwlock_rdlock(&in->io_lock);
	gen = __atomic_load_n(&in->store_gen, __ATOMIC_RELAXED);
	if (around) {
		pthread_mutex_lock(&vol->itable.lock);
		if (in->had_writer)
			around = NULL;
		pthread_mutex_unlock(&vol->itable.lock);
	}
	rc = csdfs_op_begin_read(vol, &op);
	if (rc)
		goto out;
	rc = csdfs_irec_load(op.txn, ino, &rec);
	if (!rc && S_ISDIR(rec.mode))
		rc = -EISDIR;
	if (rc || off >= rec.size || !size) {
		csdfs_op_end(&op, 0);
		size = 0;
		goto out;
	}
	if (size > rec.size - off)
		size = (size_t)(rec.size - off);
	end = off + size;
	need_atime = rec.atime_ns <= rec.mtime_ns || rec.atime_ns <= rec.ctime_ns ||
		     csdfs_now_ns() - rec.atime_ns > NS_PER_DAY;
	cs = rec.chunk_size ? rec.chunk_size : vol->sb.chunk_size;
	first = off / cs;
	last = (end - 1) / cs;
	n = last - first + 1;
	recs = malloc(n * sizeof(*recs));
	have = calloc(n, sizeof(*have));
	if (!recs || !have) {
		csdfs_op_end(&op, 0);
		rc = -ENOMEM;
		goto out;
	}
	{
		struct csdfs_cursor *cur;
		struct csdfs_val k, v;
		uint8_t key[16];

		rc = csdfs_cursor_open(op.txn, CSDFS_DB_CHUNKS, &cur);
		if (!rc) {
			csdfs_chunk_key(key, ino, first);
			for (rc = csdfs_cursor_seek(cur, key, 16, &k, &v); !rc;
			     rc = csdfs_cursor_next(cur, &k, &v)) {
				uint64_t idx;

				if (k.len != 16 || csdfs_be64_get(k.data) != ino)
					break;
				idx = csdfs_be64_get((const uint8_t *)k.data + 8);
				if (idx > last)
					break;
				if (v.len != sizeof(*recs)) {
					rc = -EUCLEAN;
					break;
				}
				memcpy(&recs[idx - first], v.data, sizeof(*recs));
				have[idx - first] = true;
			}
			if (rc == -ENOENT)
				rc = 0;
			csdfs_cursor_close(cur);
		}
	}
	csdfs_op_end(&op, 0);
	if (rc)
		goto out;
	/* Room for the stored bytes of every chunk asked for, up to one span:
	 * a page-sized read does not allocate (and fault in) a whole span. */
	span_cap = n * csdfs_codec_bound(cs) < READ_SPAN_MAX ?
		   n * csdfs_codec_bound(cs) : READ_SPAN_MAX;
	if (span_cap < csdfs_codec_bound(cs))
		span_cap = csdfs_codec_bound(cs);
	tmp = malloc(cs);
	/* Only a read long enough for a streaming run reads direct: it alone
	 * needs the scratch aligned, with room to round the run out (a
	 * database's page read keeps a plain malloc). */
	if (n * cs < READ_DIRECT_MIN)
		scratch = malloc(span_cap);
	else if (posix_memalign((void **)&scratch, CSDFS_IO_DIRECT_ALIGN, span_cap + SPAN_SLACK))
		scratch = NULL;
	if (!tmp || !scratch) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint64_t i = 0; i < n && !rc; i++) {
		uint64_t cstart = (first + i) * cs;
		uint64_t s = off > cstart ? off : cstart;
		uint64_t e = end < cstart + cs ? end : cstart + cs;
		char *out = buf + (s - off);

		if (!have[i]) {
			memset(out, 0, e - s);
			continue;
		}
		if (s == cstart && e == cstart + cs) {
			/* Whole chunks wanted: decode straight into the reply,
			 * with one read for a run of chunks stored back to back. */
			uint64_t got = read_whole_run(vol, cs, recs + i, have + i, n - i,
						      buf + (cstart - off), end - cstart,
						      scratch, span_cap);

			if (got) {
				i += got - 1;
				continue;
			}
			rc = load_chunk(vol, ino, first + i, cs, &recs[i], out, scratch, false);
		} else {
			uint64_t cend = cstart + cs < rec.size ? cstart + cs : rec.size;

			rc = load_chunk(vol, ino, first + i, cs, &recs[i], tmp, scratch, true);
			if (!rc)
				memcpy(out, tmp + (s - cstart), e - s);
			if (!rc && around && cstart < s &&
			    around(arg, gen, cstart, tmp, s - cstart))
				around = NULL;
			if (!rc && around && e < cend &&
			    around(arg, gen, e, tmp + (e - cstart), cend - e))
				around = NULL;
		}
	}
out:
	pthread_rwlock_unlock(&in->io_lock);
	free(recs);
	free(have);
	free(tmp);
	free(scratch);
	if (!rc && size && need_atime)
		touch_atime(vol, ino);
	csdfs_inode_put(vol, in);
	return rc ? rc : (ssize_t)size;
}

/* ---- resize, zeroing, fallocate, seek ------------------------------------ */

/*
 * Rewrite the chunks overlapping [from, to) of a file whose io_lock is held
 * exclusively: bytes in the range become zero (whole chunks become holes).
 * The caller's @rec is updated in @op, which the caller has begun.
 */
static int zero_range_plan(struct csdfs_vol *vol, uint64_t ino,
			   const struct csdfs_inode_disk *rec, uint64_t from,
			   uint64_t to, struct wplan *plan)
{
	uint32_t cs = rec->chunk_size ? rec->chunk_size : vol->sb.chunk_size;
	uint64_t first = from / cs, last = (to - 1) / cs;
	char *tmp, *scratch;
	int rc = 0;

	/* Whole chunks in the middle are dropped without reading them. */
	rc = plan_init(plan, vol, ino, rec, last - first + 1, 2);
	if (rc)
		return rc;
	/* The plan points into these until it is written: one buffer for
	 * each of the two chunks that can be partial. */
	tmp = malloc(2 * (size_t)cs);
	scratch = malloc(csdfs_codec_bound(cs));
	if (!tmp || !scratch) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint64_t idx = first; idx <= last && !rc; idx++) {
		uint64_t cstart = idx * cs;
		uint64_t s = from > cstart ? from : cstart;
		uint64_t e = to < cstart + cs ? to : cstart + cs;
		char *cb = tmp + (idx == first ? 0 : cs);

		if (s == cstart && e == cstart + cs) {
			rc = plan_add(plan, idx, cb, 0);
			continue;
		}
		rc = load_chunk(vol, ino, idx, cs, NULL, cb, scratch, false);
		if (!rc) {
			memset(cb + (s - cstart), 0, e - s);
			rc = plan_add(plan, idx, cb, cs);
		}
	}
	if (!rc)
		rc = plan_write(plan, true);
out:
	free(tmp);
	free(scratch);
	return rc;
}

/* Apply a plan made by zero_range_plan plus size/time changes. */
static int resize_commit(struct csdfs_vol *vol, uint64_t ino, struct wplan *plan,
			 uint64_t drop_from, bool set_size, uint64_t new_size,
			 const struct stat *attrs, unsigned mask, struct stat *st)
{
	struct csdfs_inode_disk rec;
	struct csdfs_op op;
	int64_t now = csdfs_now_ns();
	int rc;

	rc = csdfs_op_begin(vol, &op);
	if (rc)
		return rc;
	rc = csdfs_irec_load(op.txn, ino, &rec);
	if (!rc && plan)
		rc = plan_commit(plan, &op, &rec);
	if (!rc && drop_from != UINT64_MAX)
		rc = csdfs_chunk_drop_from(&op, ino, &rec, drop_from);
	if (!rc) {
		if (set_size && new_size != rec.size) {
			rec.size = new_size;
			rec.mtime_ns = now;
		}
		if (plan)
			rec.mtime_ns = now;
		if (attrs)
			csdfs_irec_apply_attrs(&rec, attrs, mask & ~CSDFS_SET_SIZE, now);
		else
			rec.ctime_ns = now;
		rc = csdfs_irec_store(op.txn, ino, &rec);
	}
	if (!rc) {
		csdfs_op_touch(&op, ino);
		if (st)
			csdfs_irec_to_stat(ino, &rec, st);
	}
	rc = csdfs_op_end(&op, rc);
	if (plan)
		plan->committed = !rc;
	return rc;
}

int csdfs_file_truncate(struct csdfs_vol *vol, uint64_t ino, uint64_t size,
			const struct stat *attrs, unsigned mask, struct stat *st)
{
	struct csdfs_inode_disk rec;
	struct csdfs_inode *in;
	struct wplan plan, *pp = NULL;
	uint64_t drop = UINT64_MAX;
	uint32_t cs;
	int rc;

	if (size > CSDFS_MAX_FILE_SIZE)
		return -EFBIG;
	in = csdfs_inode_get(vol, ino);
	if (!in)
		return -ENOMEM;
	csdfs_inode_lock_exclusive(vol, in);
	rc = load_reg(vol, ino, &rec);
	if (rc)
		goto out;
	cs = rec.chunk_size ? rec.chunk_size : vol->sb.chunk_size;
	if (size < rec.size) {
		drop = (size + cs - 1) / cs;
		/* A partial last chunk keeps only the bytes before EOF. */
		if (size % cs) {
			uint64_t tail_end = (size / cs + 1) * cs;

			rc = zero_range_plan(vol, ino, &rec, size, tail_end, &plan);
			if (rc) {
				plan_abandon(&plan);
				plan_free(&plan);
				goto out;
			}
			pp = &plan;
		}
	}
	rc = resize_commit(vol, ino, pp, drop, true, size, attrs, mask, st);
	if (pp) {
		plan_abandon(pp);
		plan_free(pp);
	}
out:
	pthread_rwlock_unlock(&in->io_lock);
	csdfs_inode_put(vol, in);
	return rc;
}

int csdfs_fs_fallocate(struct csdfs_vol *vol, uint64_t ino, int mode,
		       uint64_t off, uint64_t len)
{
	struct csdfs_inode_disk rec;
	struct csdfs_inode *in;
	struct wplan plan, *pp = NULL;
	bool keep = mode & FALLOC_FL_KEEP_SIZE;
	int op = mode & ~FALLOC_FL_KEEP_SIZE;
	uint64_t end = off + len, zend;
	int rc;

	if (!len || end < off)
		return -EINVAL;
	if (end > CSDFS_MAX_FILE_SIZE)
		return -EFBIG;
	if (op != 0 && op != FALLOC_FL_PUNCH_HOLE && op != FALLOC_FL_ZERO_RANGE)
		return -EOPNOTSUPP;
	if (op == FALLOC_FL_PUNCH_HOLE && !keep)
		return -EOPNOTSUPP;
	in = csdfs_inode_get(vol, ino);
	if (!in)
		return -ENOMEM;
	csdfs_inode_lock_exclusive(vol, in);
	rc = load_reg(vol, ino, &rec);
	if (rc)
		goto out;
	/*
	 * Mode 0 reserves nothing physical: space is only known once data is
	 * compressed, and allocated-but-unwritten ranges read as zeros and are
	 * compressed like any other data when written (never stored raw).
	 */
	zend = end < rec.size ? end : rec.size;
	if (op != 0 && off < zend) {
		rc = zero_range_plan(vol, ino, &rec, off, zend, &plan);
		if (rc) {
			plan_abandon(&plan);
			plan_free(&plan);
			goto out;
		}
		pp = &plan;
	}
	if (pp || (!keep && end > rec.size))
		rc = resize_commit(vol, ino, pp, UINT64_MAX,
				   !keep && end > rec.size, end, NULL, 0, NULL);
	if (pp) {
		plan_abandon(pp);
		plan_free(pp);
	}
out:
	pthread_rwlock_unlock(&in->io_lock);
	csdfs_inode_put(vol, in);
	return rc;
}

int csdfs_fs_lseek(struct csdfs_vol *vol, uint64_t ino, uint64_t off,
		   int whence, uint64_t *res)
{
	struct csdfs_inode_disk rec;
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	struct csdfs_op op;
	uint8_t key[16];
	uint64_t idx, want;
	uint32_t cs;
	int rc;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	rc = csdfs_op_begin_read(vol, &op);
	if (rc)
		return rc;
	rc = csdfs_irec_load(op.txn, ino, &rec);
	if (rc)
		return csdfs_op_end(&op, rc);
	if (off >= rec.size)
		return csdfs_op_end(&op, -ENXIO);
	cs = rec.chunk_size ? rec.chunk_size : vol->sb.chunk_size;
	want = off / cs;
	rc = csdfs_cursor_open(op.txn, CSDFS_DB_CHUNKS, &cur);
	if (rc)
		return csdfs_op_end(&op, rc);
	csdfs_chunk_key(key, ino, want);
	rc = csdfs_cursor_seek(cur, key, 16, &k, &v);
	if (whence == SEEK_DATA) {
		if (rc == -ENOENT || (!rc && csdfs_be64_get(k.data) != ino)) {
			rc = -ENXIO;
		} else if (!rc) {
			idx = csdfs_be64_get((const uint8_t *)k.data + 8);
			*res = idx * cs > off ? idx * cs : off;
			if (*res >= rec.size)
				rc = -ENXIO;
		}
	} else {
		/* First chunk index >= want that is not mapped. */
		idx = want;
		while (!rc && csdfs_be64_get(k.data) == ino &&
		       csdfs_be64_get((const uint8_t *)k.data + 8) == idx) {
			idx++;
			rc = csdfs_cursor_next(cur, &k, &v);
		}
		if (rc == -ENOENT)
			rc = 0;
		if (!rc) {
			*res = idx * cs > off ? idx * cs : off;
			if (*res > rec.size)
				*res = rec.size;
		}
	}
	csdfs_cursor_close(cur);
	return csdfs_op_end(&op, rc);
}

int csdfs_fs_fsync(struct csdfs_vol *vol, uint64_t ino)
{
	return csdfs_vol_commit_for(vol, ino);
}

/* ---- recompress ---------------------------------------------------------- */

/* Does a stored chunk already follow policy @p? Raw chunks that the policy
 * codec could not shrink count as following it. */
static bool chunk_matches(const struct csdfs_chunk_disk *c,
			  struct csdfs_codec_spec p)
{
	if (c->codec == CSDFS_CODEC_NONE)
		return p.id == CSDFS_CODEC_NONE || (c->flags & CSDFS_CHUNK_INCOMPRESSIBLE);
	return c->codec == p.id && c->level == p.level;
}

/* Collect up to @max chunk indices >= @from that do not match the policy.
 * @return how many, or -errno. */
static int mismatched(struct csdfs_vol *vol, uint64_t ino, uint64_t from,
		      uint64_t *idxs, int max, struct csdfs_inode_disk *rec)
{
	struct csdfs_codec_spec p;
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	struct csdfs_op op;
	uint8_t key[16];
	int n = 0, rc;

	rc = csdfs_op_begin_read(vol, &op);
	if (rc)
		return rc;
	rc = csdfs_irec_load(op.txn, ino, rec);
	if (!rc && !S_ISREG(rec->mode))
		rc = -EINVAL;
	if (!rc)
		rc = csdfs_cursor_open(op.txn, CSDFS_DB_CHUNKS, &cur);
	if (rc)
		return csdfs_op_end(&op, rc);
	p.id = rec->codec;
	p.level = rec->level;
	csdfs_chunk_key(key, ino, from);
	for (rc = csdfs_cursor_seek(cur, key, 16, &k, &v); !rc && n < max;
	     rc = csdfs_cursor_next(cur, &k, &v)) {
		struct csdfs_chunk_disk c;

		if (k.len != 16 || csdfs_be64_get(k.data) != ino)
			break;
		if (v.len != sizeof(c)) {
			rc = -EUCLEAN;
			break;
		}
		memcpy(&c, v.data, sizeof(c));
		if (!chunk_matches(&c, p))
			idxs[n++] = csdfs_be64_get((const uint8_t *)k.data + 8);
	}
	csdfs_cursor_close(cur);
	if (rc == -ENOENT)
		rc = 0;
	rc = csdfs_op_end(&op, rc);
	return rc ? rc : n;
}

int csdfs_file_recompress_left(struct csdfs_vol *vol, uint64_t ino)
{
	struct csdfs_inode_disk rec;
	uint64_t idxs[256], from = 0;
	int total = 0, n;

	do {
		n = mismatched(vol, ino, from, idxs, 256, &rec);
		if (n < 0)
			return n;
		total += n;
		if (n)
			from = idxs[n - 1] + 1;
	} while (n == 256 && total < (1 << 30));
	return total;
}

/* Rewrite the chunks @idxs[0..n) with the file's current policy; same
 * bytes, new encoding, mtime untouched. */
static int recompress_batch(struct csdfs_vol *vol, uint64_t ino,
			    const uint64_t *idxs, int n)
{
	uint64_t mask[CSDFS_STRIPES / 64];
	struct csdfs_inode_disk rec;
	struct wplan plan;
	struct csdfs_op op;
	char *tmp = NULL, *scratch = NULL;
	uint32_t cs;
	int rc;

	memset(mask, 0, sizeof(mask));
	for (int i = 0; i < n; i++) {
		unsigned st = stripe_of(ino, idxs[i]);

		mask[st / 64] |= 1ull << (st % 64);
	}
	for (unsigned st = 0; st < CSDFS_STRIPES; st++)
		if (mask[st / 64] & (1ull << (st % 64)))
			pthread_mutex_lock(&vol->stripes[st]);
	rc = load_reg(vol, ino, &rec);
	if (!rc)
		rc = plan_init(&plan, vol, ino, &rec, (size_t)n, (size_t)n);
	if (rc)
		goto out_unlock;
	cs = plan.cs;
	tmp = malloc((size_t)n * cs);  /* the plan points into it */
	scratch = malloc(csdfs_codec_bound(cs));
	if (!tmp || !scratch)
		rc = -ENOMEM;
	for (int i = 0; i < n && !rc; i++) {
		struct csdfs_chunk_disk c;

		rc = lookup_chunk(vol, ino, idxs[i], &c);
		if (rc == -ENOENT) {
			rc = 0;  /* became a hole meanwhile */
			continue;
		}
		if (!rc)
			rc = load_chunk(vol, ino, idxs[i], cs, &c, tmp + (size_t)i * cs,
					scratch, false);
		if (!rc)
			rc = plan_add(&plan, idxs[i], tmp + (size_t)i * cs, c.llen);
	}
	if (!rc)
		rc = plan_write(&plan, false);
	if (!rc) {
		rc = csdfs_op_begin(vol, &op);
		if (!rc) {
			rc = csdfs_irec_load(op.txn, ino, &rec);
			if (!rc)
				rc = plan_commit(&plan, &op, &rec);
			if (!rc)
				rc = csdfs_irec_store(op.txn, ino, &rec);
			rc = csdfs_op_end(&op, rc);
			plan.committed = !rc;
		}
	}
	plan_abandon(&plan);
	plan_free(&plan);
out_unlock:
	for (unsigned st = 0; st < CSDFS_STRIPES; st++)
		if (mask[st / 64] & (1ull << (st % 64)))
			pthread_mutex_unlock(&vol->stripes[st]);
	free(tmp);
	free(scratch);
	return rc;
}

int csdfs_file_recompress_xattr(struct csdfs_vol *vol, uint64_t ino,
				const char *value, size_t size)
{
	struct csdfs_inode_disk rec;
	struct csdfs_inode *in;
	uint64_t idxs[16], from = 0, budget;
	char text[32], *end;
	long long done = 0;
	int n, rc = 0;

	if (!size || size >= sizeof(text))
		return -EINVAL;
	memcpy(text, value, size);
	text[size] = '\0';
	budget = strtoull(text, &end, 10);
	if (end == text || (*end && *end != '\n') || !budget || budget > (1u << 20))
		return -EINVAL;
	in = csdfs_inode_get(vol, ino);
	if (!in)
		return -ENOMEM;
	pthread_rwlock_rdlock(&in->io_lock);
	/* Bounded transactions: one operation per batch of 16 chunks. */
	while ((uint64_t)done < budget) {
		int want = budget - (uint64_t)done < 16 ? (int)(budget - (uint64_t)done) : 16;

		n = mismatched(vol, ino, from, idxs, want, &rec);
		if (n <= 0) {
			rc = n;
			break;
		}
		rc = recompress_batch(vol, ino, idxs, n);
		if (rc)
			break;
		from = idxs[n - 1] + 1;
		done += n;
	}
	pthread_rwlock_unlock(&in->io_lock);
	csdfs_inode_put(vol, in);
	return rc;
}
