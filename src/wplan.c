/* SPDX-License-Identifier: MIT */
/*
 * The write planner (data.h): a write is cut into chunks; each chunk is
 * built whole by its caller (read-modify-write when the request covers only
 * part of it), trimmed of trailing zeros (an all-zero chunk becomes a
 * hole), compressed, and all chunks of the plan are packed back to back at
 * the allocator's head, written with as few pwrites as the placement
 * allows, and finally mapped in ONE operation transaction. Writes, zeroing
 * (truncate, fallocate) and recompression all go through it, so every one
 * of them is out of place and atomic (G3).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "csdfs/bufpool.h"
#include "csdfs/csum.h"
#include "csdfs/pool.h"
#include "data.h"

/* A write compresses on the worker pool only from this many input bytes
 * (four 16 KiB chunks). Below it, waking a worker and waiting for it cost
 * more than it saves: under MariaDB (16 KiB chunks, 2 vCPUs, both busy)
 * about one write in two transactions spans two or three chunks, and
 * compressing those inline took the daemon's futex calls from 13.4-13.9
 * to 10.6-11.7 per transaction, its CPU from 1.57-1.74 to 1.50-1.70 ms. */
#define POOL_MIN_BYTES (64u << 10)

/* ---- chunk stripes ------------------------------------------------------- */

static unsigned stripe_of(uint64_t ino, uint64_t idx)
{
	return (unsigned)((ino * 0x9e3779b97f4a7c15ull + idx) % CSDFS_STRIPES);
}

static void mask_add(uint64_t mask[CSDFS_STRIPES / 64], uint64_t ino, uint64_t idx)
{
	unsigned s = stripe_of(ino, idx);

	mask[s / 64] |= 1ull << (s % 64);
}

/* In ascending stripe order, whatever order the chunks came in. */
static void lock_mask(struct csdfs_vol *vol, const uint64_t mask[CSDFS_STRIPES / 64])
{
	for (unsigned s = 0; s < CSDFS_STRIPES; s++)
		if (mask[s / 64] & (1ull << (s % 64)))
			pthread_mutex_lock(&vol->stripes[s]);
}

void csdfs_stripes_lock_range(struct csdfs_vol *vol, uint64_t ino, uint64_t first,
			      uint64_t last, uint64_t mask[CSDFS_STRIPES / 64])
{
	memset(mask, 0, CSDFS_STRIPES / 8);
	for (uint64_t i = first; i <= last && i - first < CSDFS_STRIPES; i++)
		mask_add(mask, ino, i);
	lock_mask(vol, mask);
}

void csdfs_stripes_lock_chunks(struct csdfs_vol *vol, uint64_t ino,
			       const uint64_t *idxs, size_t n,
			       uint64_t mask[CSDFS_STRIPES / 64])
{
	memset(mask, 0, CSDFS_STRIPES / 8);
	for (size_t i = 0; i < n; i++)
		mask_add(mask, ino, idxs[i]);
	lock_mask(vol, mask);
}

int csdfs_stripes_trylock_chunks(struct csdfs_vol *vol, uint64_t ino,
				 const uint64_t *idxs, size_t n,
				 uint64_t mask[CSDFS_STRIPES / 64])
{
	memset(mask, 0, CSDFS_STRIPES / 8);
	for (size_t i = 0; i < n; i++)
		mask_add(mask, ino, idxs[i]);
	for (unsigned s = 0; s < CSDFS_STRIPES; s++) {
		if (!(mask[s / 64] & (1ull << (s % 64))))
			continue;
		if (pthread_mutex_trylock(&vol->stripes[s])) {
			while (s-- > 0)
				if (mask[s / 64] & (1ull << (s % 64)))
					pthread_mutex_unlock(&vol->stripes[s]);
			memset(mask, 0, CSDFS_STRIPES / 8);
			return -EBUSY;
		}
	}
	return 0;
}

void csdfs_stripes_unlock(struct csdfs_vol *vol,
			  const uint64_t mask[CSDFS_STRIPES / 64])
{
	for (unsigned s = 0; s < CSDFS_STRIPES; s++)
		if (mask[s / 64] & (1ull << (s % 64)))
			pthread_mutex_unlock(&vol->stripes[s]);
}

/* ---- writing chunks ------------------------------------------------------ */

void csdfs_wplan_free(struct wplan *p)
{
	free(p->c);
	csdfs_bufpool_put(p->pack, p->packcap);
	p->c = NULL;
	p->pack = NULL;
	p->n = 0;
}

int csdfs_wplan_init(struct wplan *p, struct csdfs_vol *vol, uint64_t ino,
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
	/* From the pool (bufpool.h): not an mmap and munmap per 1 MiB write. */
	p->pack = csdfs_bufpool_get(p->packcap);
	if (!p->c || !p->pack) {
		csdfs_wplan_free(p);
		return -ENOMEM;
	}
	return 0;
}

/* @len less the zero bytes @src ends with, looked at eight at a time.
 * fio's 2:1 data ends every 4 KiB in 2 KiB of zeros: byte by byte, this
 * scan was 1.9 % of the daemon's CPU under its 4 KiB random writes. */
static uint32_t trim_zeros(const char *src, uint32_t len)
{
	uint64_t w;

	while (len % 8 && !src[len - 1])
		len--;
	if (len % 8)
		return len;
	while (len >= 8) {
		memcpy(&w, src + len - 8, 8);
		if (w)
			break;
		len -= 8;
	}
	while (len && !src[len - 1])
		len--;
	return len;
}

/* Add chunk @idx with logical content @src[0..llen): trailing zeros are not
 * stored, an all-zero chunk becomes a hole. Compression happens for the
 * whole plan at once (plan_compress). */
int csdfs_wplan_add(struct wplan *p, uint64_t idx, const char *src,
		    uint32_t llen)
{
	struct wchunk *c = &p->c[p->n++];

	llen = trim_zeros(src, llen);
	c->idx = idx;
	c->llen = llen;
	c->src = src;
	if (llen)
		c->slot = p->nslots++;
	return 0;
}

int csdfs_wplan_add_stored(struct wplan *p, uint64_t idx,
			   const struct csdfs_chunk_disk *c, const char *bytes)
{
	struct wchunk *w = &p->c[p->n];

	if (!c->plen || p->packlen + c->plen > p->packcap)
		return -EINVAL;
	p->n++;
	w->idx = idx;
	w->llen = c->llen;
	w->plen = c->plen;
	w->csum = c->csum;
	w->used.id = c->codec;
	w->used.level = c->level;
	w->packoff = p->packlen;
	memcpy(p->pack + p->packlen, bytes, c->plen);
	p->packlen += c->plen;
	p->compressed = true;
	p->stored = true;
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

/* Compress every chunk (on several cores when the write is large, see
 * POOL_MIN_BYTES), then pack the results back to back. */
static int plan_compress(struct wplan *p)
{
	size_t bound = csdfs_codec_bound(p->cs);
	int rc;

	if (p->compressed)
		return 0;
	if (p->nslots * bound > p->packcap)
		return -EINVAL;
	rc = csdfs_pool_run(p->nslots * p->cs >= POOL_MIN_BYTES ? p->vol->pool : NULL,
			    p->n, compress_one, p);
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

		if (!c->llen || c->placed)
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

/* Take back what the plan placed (vol->lock held): a commit recycles freed
 * blocks and must see the head where no unregistered placement lies
 * beyond it. */
static void unplace_locked(struct wplan *p)
{
	for (size_t i = p->n; i-- > 0; ) {
		if (p->c[i].placed)
			csdfs_alloc_unplace(&p->vol->alloc, p->c[i].pa, p->c[i].plen);
		p->c[i].placed = false;
	}
}

/* Place the plan (vol->lock held). *@short_blocks: the -ENOSPC was a
 * shortage of blocks (not of logical capacity), which a commit or a
 * compaction may cure. */
static int check_place_locked(struct wplan *p, bool use_reserve, bool *short_blocks)
{
	int rc = p->vol->failed;

	*short_blocks = false;
	if (!rc && !use_reserve)
		rc = check_logical_locked(p);
	if (!rc) {
		rc = place_locked(p, use_reserve);
		*short_blocks = rc == -ENOSPC;
	}
	return rc;
}

/*
 * Place every stored chunk at the head and write them out. Data writes
 * (@use_reserve false) may not eat into the reserve kept for truncate, hole
 * punching and unlink. Space freed by the open group only becomes usable
 * at its commit, so a full volume commits once, then compacts once,
 * before giving up.
 */
int csdfs_wplan_write(struct wplan *p, bool use_reserve)
{
	struct csdfs_vol *vol = p->vol;
	uint64_t lo = UINT64_MAX, hi = 0;
	bool short_blocks;
	int rc;

	rc = plan_compress(p);
	if (rc)
		return rc;
	pthread_mutex_lock(&vol->lock);
	rc = check_place_locked(p, use_reserve, &short_blocks);
	/* Only a shortage of blocks can be cured by a commit: blocks freed by
	 * the open group, or by a group whose commit is syncing right now (it
	 * alone holds them until it is durable). */
	if (short_blocks && (vol->alloc.nquar || vol->dirty || vol->closed_unsynced)) {
		unplace_locked(p);
		/* Behind any commit in flight (commit_lock), then this group's;
		 * the volume lock is free through their syncs. */
		pthread_mutex_unlock(&vol->lock);
		rc = csdfs_vol_commit(vol);
		pthread_mutex_lock(&vol->lock);
		short_blocks = false;
		if (!rc)
			rc = check_place_locked(p, use_reserve, &short_blocks);
	}
	/* Then blocks pinned by dead chunk versions: compaction frees them (a
	 * bounded pass and its commit; never for compaction's own plans). */
	if (short_blocks && !p->stored) {
		unplace_locked(p);
		pthread_mutex_unlock(&vol->lock);
		rc = csdfs_compact_lowspace(vol);
		pthread_mutex_lock(&vol->lock);
		short_blocks = false;
		if (!rc)
			rc = check_place_locked(p, use_reserve, &short_blocks);
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
	/* One pwrite per physically contiguous run of chunks. */
	for (size_t i = 0; i < p->n && !rc; ) {
		struct wchunk *c = &p->c[i];
		size_t j = i + 1, len;

		if (!c->llen) {
			i++;
			continue;
		}
		len = c->plen;
		while (j < p->n && p->c[j].llen &&
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
int csdfs_wplan_commit(struct wplan *p, struct csdfs_op *op,
		       struct csdfs_inode_disk *rec)
{
	op->inflight_slot = p->slot;
	p->slot = -1;
	for (size_t i = 0; i < p->n; i++) {
		struct wchunk *c = &p->c[i];
		struct csdfs_chunk_disk d;
		int rc;

		if (!c->llen) {
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
void csdfs_wplan_cache(struct wplan *p)
{
	for (size_t i = 0; i < p->n; i++) {
		struct wchunk *c = &p->c[i];
		struct csdfs_cache_key key = { p->ino, c->idx, c->pa, c->csum };

		if (c->llen && c->partial)
			csdfs_cache_put(p->vol->cache, &key, c->src, c->llen, p->cs);
	}
}

/* Release what a plan holds at the allocator: its in-flight registration
 * and, unless its mapping committed, the bytes it placed. */
void csdfs_wplan_abandon(struct wplan *p)
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

int csdfs_wplan_apply(struct wplan *p, csdfs_wplan_edit_fn edit, void *arg)
{
	struct csdfs_inode_disk rec, stored;
	struct csdfs_op op;
	int rc;

	rc = csdfs_op_begin_irec(p->vol, &op, true, p->ino, &rec);
	if (rc)
		return rc;
	/* The mapping changes this file's numbers in @rec alone (a block
	 * charge moved onto it included, see charge_inode): its stored
	 * record stays as read until the store below. */
	stored = rec;
	rc = csdfs_wplan_commit(p, &op, &rec);
	if (!rc && edit)
		rc = edit(&op, &rec, arg);
	if (!rc)
		rc = csdfs_irec_replace(op.txn, p->ino, &stored, &rec);
	if (!rc)
		csdfs_op_touch(&op, p->ino);
	rc = csdfs_op_end(&op, rc);
	p->committed = !rc;
	return rc;
}

static int reg_check(const struct csdfs_inode_disk *rec)
{
	if (S_ISDIR(rec->mode))
		return -EISDIR;
	return S_ISREG(rec->mode) ? 0 : -EINVAL;
}

int csdfs_reg_load(struct csdfs_vol *vol, uint64_t ino,
		   struct csdfs_inode_disk *rec)
{
	struct csdfs_op op;
	int rc;

	rc = csdfs_op_begin_irec(vol, &op, false, ino, rec);
	if (rc)
		return rc;
	return csdfs_op_end(&op, reg_check(rec));
}

/* One read operation, not two: a write takes it once per request, and
 * each operation is a round on vol->lock. */
int csdfs_reg_load_codec(struct csdfs_vol *vol, uint64_t ino,
			 struct csdfs_inode_disk *rec)
{
	return csdfs_reg_load_write(vol, ino, rec, NULL, 0, true);
}

int csdfs_reg_load_write(struct csdfs_vol *vol, uint64_t ino,
			 struct csdfs_inode_disk *rec, struct wpart *parts,
			 size_t n, bool codec)
{
	struct csdfs_policy p;
	struct csdfs_op op;
	int rc;

	rc = csdfs_op_begin_irec(vol, &op, false, ino, rec);
	if (rc)
		return rc;
	rc = reg_check(rec);
	if (!rc && codec)
		rc = csdfs_policy_resolve(vol, op.txn, ino, rec, &p);
	for (size_t i = 0; i < n && !rc; i++) {
		rc = csdfs_chunk_get(op.txn, ino, parts[i].idx, &parts[i].c);
		parts[i].mapped = !rc;
		if (rc == -ENOENT)
			rc = 0;
	}
	rc = csdfs_op_end(&op, rc);
	if (!rc && codec) {
		rec->codec = p.codec.id;
		rec->level = p.codec.level;
	}
	return rc;
}
