/* SPDX-License-Identifier: MIT */
/*
 * The chunk map: logical chunk -> stored bytes in the container, plus the
 * reverse map (db "phys") that makes block ownership decidable.
 *
 * Invariants (checked by fsck):
 *  - every stored chunk has exactly one phys entry at its pa and vice versa;
 *  - stored ranges never overlap;
 *  - a block is in use (absent from the free map) iff some live chunk's
 *    stored range overlaps it;
 *  - each used block is charged to exactly one live chunk that overlaps it:
 *    the blocks strictly inside a chunk's span always to that chunk, a
 *    boundary block to whichever neighbour the flags say. When the charged
 *    chunk dies and a neighbour still overlaps the block, the charge moves
 *    to that neighbour, so sum(st_blocks) == used blocks at all times.
 */
#include <errno.h>
#include <string.h>

#include "vol.h"

#define BS CSDFS_BLOCK_SIZE

void csdfs_chunk_key(uint8_t key[16], uint64_t ino, uint64_t idx)
{
	csdfs_be64_put(key, ino);
	csdfs_be64_put(key + 8, idx);
}

int csdfs_chunk_get(struct csdfs_txn *txn, uint64_t ino, uint64_t idx,
		    struct csdfs_chunk_disk *out)
{
	uint8_t key[16];

	csdfs_chunk_key(key, ino, idx);
	return csdfs_rec_chunk_get(txn, CSDFS_DB_CHUNKS, key, 16, out);
}

int csdfs_chunk_put(struct csdfs_txn *txn, uint64_t ino, uint64_t idx,
		    const struct csdfs_chunk_disk *c)
{
	uint8_t key[16];

	csdfs_chunk_key(key, ino, idx);
	return csdfs_rec_chunk_put(txn, CSDFS_DB_CHUNKS, key, 16, c, 0);
}

static inline uint64_t first_block(uint64_t pa)
{
	return pa / BS;
}

static inline uint64_t last_block(uint64_t pa, uint32_t plen)
{
	return (pa + plen - 1) / BS;
}

/* The live stored range just before (@next false) or after @pa. */
static int phys_neighbour(struct csdfs_txn *txn, uint64_t pa, bool next,
			  uint64_t *npa, struct csdfs_phys_disk *out)
{
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	int rc;

	rc = csdfs_cursor_at(txn, CSDFS_DB_PHYS, next ? pa + 1 : pa, &cur, &k, &v);
	if (!cur)
		return rc;
	if (!next) {
		if (rc == -ENOENT)
			rc = csdfs_cursor_last(cur, &k, &v);
		else if (!rc)
			rc = csdfs_cursor_prev(cur, &k, &v);
	}
	if (!rc) {
		if (k.len != 8)
			rc = -EUCLEAN;
		else
			rc = csdfs_rec_phys_decode(&v, out);
		if (!rc)
			*npa = csdfs_be64_get(k.data);
	}
	csdfs_cursor_close(cur);
	return rc;
}

/* Adjust the block charge of inode @ino, which may be the one the caller
 * holds in memory (@cur_ino/@irec) or another one stored in LMDB. */
static int charge_inode(struct csdfs_op *op, uint64_t cur_ino,
			struct csdfs_inode_disk *irec, uint64_t ino,
			int64_t blocks)
{
	struct csdfs_inode_disk other;
	int rc;

	if (ino == cur_ino) {
		irec->phys_blocks += (uint64_t)blocks;
		return 0;
	}
	rc = csdfs_irec_load(op->txn, ino, &other);
	if (rc)
		return rc == -ENOENT ? -EUCLEAN : rc;
	other.phys_blocks += (uint64_t)blocks;
	return csdfs_irec_store(op->txn, ino, &other);
}

/* Charge @block to the live chunk described by the phys entry @p at @ppa. */
static int charge_move(struct csdfs_op *op, uint64_t cur_ino,
		       struct csdfs_inode_disk *irec, uint64_t ppa,
		       const struct csdfs_phys_disk *p, uint64_t block)
{
	struct csdfs_chunk_disk c;
	int rc;

	rc = csdfs_chunk_get(op->txn, p->ino, p->chunk, &c);
	if (rc)
		return rc == -ENOENT ? -EUCLEAN : rc;
	if (c.pa != ppa)
		return -EUCLEAN;
	if (block == first_block(c.pa))
		c.flags |= CSDFS_CHUNK_CHARGE_FIRST;
	else if (block == last_block(c.pa, c.plen))
		c.flags |= CSDFS_CHUNK_CHARGE_LAST;
	else
		return -EUCLEAN;
	rc = csdfs_chunk_put(op->txn, p->ino, p->chunk, &c);
	if (rc)
		return rc;
	return charge_inode(op, cur_ino, irec, p->ino, 1);
}

static int free_blocks(struct csdfs_op *op, uint64_t start, uint64_t count)
{
	int rc;

	if (!count)
		return 0;
	rc = csdfs_freemap_give(op->txn, start, count);
	if (rc)
		return rc;
	op->delta.used_blocks -= count;
	return csdfs_op_note_freed(op, start, count);
}

/*
 * Release a boundary block the dying chunk was charged for: hand it to a
 * live neighbour that overlaps it, else set *@freed (the caller frees it
 * together with the chunk's interior, in one change of the free map).
 */
static int release_boundary(struct csdfs_op *op, uint64_t cur_ino,
			    struct csdfs_inode_disk *irec, uint64_t pa,
			    uint64_t block, bool try_prev, bool *freed)
{
	struct csdfs_phys_disk p;
	uint64_t npa = 0;   /* set when phys_neighbour returns 0 */
	int rc;

	*freed = false;
	if (try_prev) {
		rc = phys_neighbour(op->txn, pa, false, &npa, &p);
		if (rc && rc != -ENOENT)
			return rc;
		if (!rc && npa + p.plen > block * BS)
			return charge_move(op, cur_ino, irec, npa, &p, block);
	}
	rc = phys_neighbour(op->txn, pa, true, &npa, &p);
	if (rc && rc != -ENOENT)
		return rc;
	if (!rc && npa < (block + 1) * BS)
		return charge_move(op, cur_ino, irec, npa, &p, block);
	*freed = true;
	return 0;
}

static int account(struct csdfs_op *op, uint64_t ino,
		   struct csdfs_inode_disk *irec,
		   const struct csdfs_chunk_disk *c, int sign)
{
	uint64_t s = (uint64_t)(int64_t)sign;

	op->chunk_changes++;
	irec->stored_bytes += s * c->plen;
	irec->mapped_bytes += s * c->llen;
	irec->stored_chunks += s;
	op->delta.stored_bytes += s * c->plen;
	op->delta.mapped_bytes += s * c->llen;
	op->delta.stored_chunks += s;
	/* A stored chunk takes its whole chunk of logical capacity, however
	 * many of its bytes are trailing zeros. */
	op->delta.logical_used += s * (irec->chunk_size ? irec->chunk_size :
				       CSDFS_CHUNK_DEFAULT);
	if (c->codec == CSDFS_CODEC_NONE) {
		irec->raw_chunks += s;
		irec->raw_bytes += s * c->llen;
		op->delta.raw_chunks += s;
	}
	return csdfs_op_note_mix(op, ino, c->codec, c->level,
				 sign * (int64_t)c->llen);
}

static int chunk_kill(struct csdfs_op *op, uint64_t ino,
		      struct csdfs_inode_disk *irec,
		      const struct csdfs_chunk_disk *old)
{
	uint64_t bs = first_block(old->pa), be = last_block(old->pa, old->plen);
	uint64_t charged = be > bs + 1 ? be - bs - 1 : 0, from, to;
	bool first_freed = false, last_freed = false;
	uint8_t key[8];
	int rc;

	csdfs_be64_put(key, old->pa);
	rc = csdfs_meta_del(op->txn, CSDFS_DB_PHYS, key, 8);
	if (rc)
		return rc == -ENOENT ? -EUCLEAN : rc;
	if (old->flags & CSDFS_CHUNK_CHARGE_FIRST)
		charged++;
	if (be != bs && (old->flags & CSDFS_CHUNK_CHARGE_LAST))
		charged++;
	irec->phys_blocks -= charged;
	/* Its blocks that stay in use now hold dead bytes. */
	csdfs_chint_mark_range(&op->vol->chint, old->pa, old->plen);
	rc = account(op, ino, irec, old, -1);
	if (rc)
		return rc;
	if (old->flags & CSDFS_CHUNK_CHARGE_FIRST) {
		rc = release_boundary(op, ino, irec, old->pa, bs, true, &first_freed);
		if (rc)
			return rc;
	}
	if (be != bs && (old->flags & CSDFS_CHUNK_CHARGE_LAST)) {
		rc = release_boundary(op, ino, irec, old->pa, be, false, &last_freed);
		if (rc)
			return rc;
	}
	/* The interior [bs + 1, be) (empty for one or two blocks) and the
	 * boundary blocks that no neighbour took are one run: free it in one
	 * change. */
	from = bs + 1;
	to = be > bs ? be : from;
	if (first_freed)
		from = bs;
	if (last_freed)
		to = be + 1;
	return to > from ? free_blocks(op, from, to - from) : 0;
}

static int chunk_insert(struct csdfs_op *op, uint64_t ino,
			struct csdfs_inode_disk *irec, uint64_t idx,
			const struct csdfs_chunk_disk *nc)
{
	uint64_t bs = first_block(nc->pa), be = last_block(nc->pa, nc->plen);
	struct csdfs_chunk_disk c = *nc;
	struct csdfs_phys_disk p;
	uint64_t t_first, t_mid, t_last;
	uint8_t key[8];
	int rc;

	if (!nc->plen || bs < CSDFS_FIRST_DATA_BLOCK ||
	    be >= op->vol->sb.total_blocks)
		return -EUCLEAN;
	rc = csdfs_freemap_take_ends(op->txn, bs, be, &t_first, &t_mid, &t_last);
	if (rc)
		return rc;
	if (t_mid != (be > bs + 1 ? be - bs - 1 : 0))
		return -EUCLEAN;  /* interior blocks must be fresh */
	c.flags &= (uint8_t)~(CSDFS_CHUNK_CHARGE_FIRST | CSDFS_CHUNK_CHARGE_LAST);
	if (t_first)
		c.flags |= CSDFS_CHUNK_CHARGE_FIRST;
	if (t_last)
		c.flags |= CSDFS_CHUNK_CHARGE_LAST;
	irec->phys_blocks += t_first + t_mid + t_last;
	op->delta.used_blocks += t_first + t_mid + t_last;
	rc = account(op, ino, irec, &c, 1);
	if (rc)
		return rc;

	memset(&p, 0, sizeof(p));
	p.ino = ino;
	p.chunk = idx;
	p.plen = c.plen;
	csdfs_be64_put(key, c.pa);
	rc = csdfs_rec_phys_put(op->txn, CSDFS_DB_PHYS, key, 8, &p,
				CSDFS_PUT_NOOVERWRITE);
	if (rc)
		return rc == -EEXIST ? -EUCLEAN : rc;
	return csdfs_chunk_put(op->txn, ino, idx, &c);
}

int csdfs_chunk_set(struct csdfs_op *op, uint64_t ino,
		    struct csdfs_inode_disk *irec, uint64_t idx,
		    const struct csdfs_chunk_disk *nc)
{
	struct csdfs_chunk_disk old;
	uint8_t key[16];
	int rc;

	rc = csdfs_chunk_get(op->txn, ino, idx, &old);
	if (rc && rc != -ENOENT)
		return rc;
	if (!rc) {
		rc = chunk_kill(op, ino, irec, &old);
		if (rc)
			return rc;
		if (!nc) {
			csdfs_chunk_key(key, ino, idx);
			return csdfs_meta_del(op->txn, CSDFS_DB_CHUNKS, key, 16);
		}
	}
	return nc ? chunk_insert(op, ino, irec, idx, nc) : 0;
}

int csdfs_chunk_drop_from(struct csdfs_op *op, uint64_t ino,
			  struct csdfs_inode_disk *irec, uint64_t from)
{
	enum { BATCH = 128 };
	struct csdfs_chunk_disk recs[BATCH];
	uint64_t idxs[BATCH];
	uint8_t key[16];
	int n, rc;

	do {
		struct csdfs_cursor *cur;
		struct csdfs_val k, v;

		rc = csdfs_cursor_open(op->txn, CSDFS_DB_CHUNKS, &cur);
		if (rc)
			return rc;
		csdfs_chunk_key(key, ino, from);
		n = 0;
		rc = csdfs_cursor_seek(cur, key, 16, &k, &v);
		while (!rc && n < BATCH) {
			if (k.len != 16 || csdfs_be64_get(k.data) != ino)
				break;
			rc = csdfs_rec_chunk_decode(&v, &recs[n]);
			if (rc)
				break;
			idxs[n] = csdfs_be64_get((const uint8_t *)k.data + 8);
			n++;
			rc = csdfs_cursor_next(cur, &k, &v);
		}
		csdfs_cursor_close(cur);
		if (rc && rc != -ENOENT)
			return rc;
		for (int i = 0; i < n; i++) {
			/* Killing a neighbour may have moved a block charge onto
			 * this chunk since the batch was read: use its record
			 * as it is now. */
			rc = csdfs_chunk_get(op->txn, ino, idxs[i], &recs[i]);
			if (!rc)
				rc = chunk_kill(op, ino, irec, &recs[i]);
			if (!rc) {
				csdfs_chunk_key(key, ino, idxs[i]);
				rc = csdfs_meta_del(op->txn, CSDFS_DB_CHUNKS, key, 16);
			}
			if (rc)
				return rc;
		}
		if (n)
			from = idxs[n - 1] + 1;
	} while (n == BATCH);
	return 0;
}
