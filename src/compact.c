/* SPDX-License-Identifier: MIT */
/*
 * Compaction: chunks are packed back to back, so a 4 KiB block often holds
 * parts of several chunks, and a dead chunk version keeps pinning a block as
 * long as one live neighbour overlaps it. Data that arrives in small
 * synchronous pieces (each rewriting its chunk) thus leaves most blocks
 * partly dead. Compaction finds the live chunks whose blocks are mostly dead
 * and moves their stored bytes, verbatim (no recompression, checksum
 * unchanged), to the allocation head.
 *
 * A move is an ordinary out-of-place write: the write planner places the
 * bytes at the head and writes them, then ONE operation re-maps each chunk
 * to its new pa (csdfs_chunk_set: the old blocks are freed through the
 * quarantine, reusable only once that commit is durable). So a crash at any
 * point leaves either the old mapping, whose bytes are untouched, or the new
 * one, whose bytes were written before it (G1-G5 as for any write).
 *
 * Criterion: a chunk's footprint is the blocks its stored range touches;
 * the live bytes of those blocks (from the reverse map "phys", summing the
 * overlap of every live chunk) against their size say how dead they are. A
 * chunk moves when at least COMPACT_DEAD_PCT of its footprint is dead:
 * its neighbours in those blocks then qualify too, so the blocks empty.
 * Chunks that touch the head's current block are left alone (that block is
 * still filling: its free tail is not dead).
 *
 * Goal: a pass over a file or the volume stops once its dead bytes are at
 * most COMPACT_GOAL_PCT of its used blocks, and then nothing is "left". Data
 * written in small pieces leaves every block about equally dead, so going to
 * the floor would move every live chunk (compaction writing the whole
 * compressed size again, 0.503x the workload for 2:1 data) to win back the
 * last few percent; stopping there writes about a tenth less for a ratio a
 * few hundredths above the floor. Only a pass asked for (the xattr, so
 * csdfs-recompress --compact) goes by the goal: the background one goes by
 * the compact_dead threshold, the low-space one takes what it can.
 *
 * Where: a volume scan visits only the regions the compaction hints
 * (compact_hint.c) mark, except the pass asked for on the whole volume,
 * which sweeps them all; a file's pass goes over the file's chunks.
 *
 * Bounds: a background or low-space pass looks at COMPACT_SCAN_ROUND
 * chunks at most (about 0.2 s at worst here), the next one going on from
 * there; a scan step holds vol->lock for at most COMPACT_SCAN chunks (each
 * a few cursor steps), a move operation for at most COMPACT_BATCH chunk
 * re-maps; between them the lock is released, so a foreground request
 * waits behind at most one of them. A move never waits for a writer: the
 * inode's io_lock and the chunks' stripes are only try-locked, busy chunks
 * are skipped (a later pass finds them again), and the re-map re-checks
 * each chunk's mapping (a chunk rewritten or dropped meanwhile is skipped).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "csdfs/csum.h"
#include "csdfs/log.h"
#include "data.h"

#define BS CSDFS_BLOCK_SIZE
#define COMPACT_DEAD_PCT 25u          /* of a footprint, to move its chunk */
#define COMPACT_SCAN 1024u            /* chunks per scan step (lock hold) */
#define COMPACT_BATCH 32u             /* chunks per move operation */
#define COMPACT_ROUND_BYTES (4ull << 20)   /* background, per commit round */
#define COMPACT_LOW_BYTES (256ull << 10)   /* low-space pass */
#define COMPACT_MIN_DEAD (256ull << 10) /* background: dead bytes to bother */
#define COMPACT_GOAL_PCT 5u           /* of used blocks' bytes: compact enough */
#define COMPACT_SCAN_ROUND 65536u     /* chunks a background or low-space
				       * pass looks at, at most */

struct cand {
	uint64_t ino;
	uint64_t idx;
	uint64_t pa;
	uint32_t plen;
};

/* Dead bytes of the volume: used blocks' bytes no live chunk stores
 * (vol->lock held). */
static uint64_t dead_locked(const struct csdfs_vol *vol)
{
	uint64_t used = vol->counters.used_blocks * BS;

	return used > vol->counters.stored_bytes ? used - vol->counters.stored_bytes : 0;
}

/* Is file @ino (0: the volume) compact enough: its dead bytes at most
 * COMPACT_GOAL_PCT of its used blocks' bytes? */
static int goal_met(struct csdfs_vol *vol, uint64_t ino, bool *yes)
{
	struct csdfs_inode_disk rec;
	uint64_t used, stored;
	int rc;

	if (ino && ino != CSDFS_ROOT_INO) {
		rc = csdfs_reg_load(vol, ino, &rec);
		if (rc)
			return rc;
		used = rec.phys_blocks * BS;
		stored = rec.stored_bytes;
	} else {
		pthread_mutex_lock(&vol->lock);
		used = vol->counters.used_blocks * BS;
		stored = vol->counters.stored_bytes;
		pthread_mutex_unlock(&vol->lock);
	}
	*yes = (used > stored ? used - stored : 0) * 100 <= used * COMPACT_GOAL_PCT;
	return 0;
}

/* Live bytes in the blocks [pa, pa + plen) touches, and their size. */
static int footprint(struct csdfs_txn *txn, uint64_t pa, uint32_t plen,
		     uint64_t *live, uint64_t *span)
{
	uint64_t lo = pa / BS * BS, hi = (pa + plen + BS - 1) / BS * BS;
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	uint8_t key[8];
	int rc;

	*live = 0;
	*span = hi - lo;
	rc = csdfs_cursor_at(txn, CSDFS_DB_PHYS, lo, &cur, &k, &v);
	if (!cur)
		return rc;
	/* The range just before lo may reach into the first block. */
	rc = rc == -ENOENT ? csdfs_cursor_last(cur, &k, &v) :
	     rc ? rc : csdfs_cursor_prev(cur, &k, &v);
	if (rc == -ENOENT) {
		csdfs_be64_put(key, lo);
		rc = csdfs_cursor_seek(cur, key, 8, &k, &v);
	}
	for (; !rc; rc = csdfs_cursor_next(cur, &k, &v)) {
		struct csdfs_phys_disk p;
		uint64_t s, e;

		if (k.len != 8) {
			rc = -EUCLEAN;
			break;
		}
		s = csdfs_be64_get(k.data);
		if (s >= hi)
			break;
		rc = csdfs_rec_phys_decode(&v, &p);
		if (rc)
			break;
		e = s + p.plen;
		if (e > lo)
			*live += (e < hi ? e : hi) - (s > lo ? s : lo);
	}
	csdfs_cursor_close(cur);
	return rc == -ENOENT ? 0 : rc;
}

/* Should the chunk stored at [pa, pa + plen) move? *@yes; *@later: not now,
 * but maybe once the head has left its block (vol->lock held). */
static int worth_moving(struct csdfs_vol *vol, struct csdfs_txn *txn,
			uint64_t pa, uint32_t plen, bool *yes, bool *later)
{
	const struct csdfs_alloc *a = &vol->alloc;
	uint64_t live, span;
	int rc;

	*yes = *later = false;
	if (a->head_end && pa < a->head_end && pa + plen > a->head / BS * BS) {
		*later = true;
		return 0;
	}
	rc = footprint(txn, pa, plen, &live, &span);
	if (!rc)
		*yes = live < span && (span - live) * 100 >= span * COMPACT_DEAD_PCT;
	return rc;
}

/* A chunk was passed over for touching the head's block: hint that block
 * once the head has left it (vol->lock held). */
static void later_check(struct csdfs_vol *vol)
{
	const struct csdfs_alloc *a = &vol->alloc;

	if (vol->compact_later && (!a->head_end || a->head / BS + 1 != vol->compact_later)) {
		csdfs_chint_mark_block(&vol->chint, vol->compact_later - 1);
		vol->compact_later = 0;
	}
}

/*
 * Where a volume scan goes (compact_hint.c): region by region in pa order,
 * visiting only hinted regions unless @sweep. Entering a region clears its
 * hint; a chunk found worth moving sets it again, so does a kill meanwhile,
 * and so does a pass that stops inside it.
 */
#define REGION_BYTES ((uint64_t)CSDFS_HINT_REGION_BLOCKS * BS)
#define NO_REGION UINT64_MAX
#define CLEAR_MAX 65536u        /* hints cleared per scan step, at most */

struct vscan {
	bool sweep;                /* every region, not only hinted ones */
	uint64_t region;           /* being scanned; NO_REGION before the first */
	uint64_t lo;               /* hinted regions below the next visited
				    * one, from here, hold no chunk's start */
};

static void vscan_init(struct vscan *vs, bool sweep, uint64_t from)
{
	vs->sweep = sweep;
	vs->region = NO_REGION;
	vs->lo = (from + REGION_BYTES - 1) / REGION_BYTES;
}

/* Clear the hints of regions in [vs->lo, @below): none holds a chunk's
 * start. @return false if CLEAR_MAX were cleared first (vol->lock held). */
static bool clear_below(struct csdfs_vol *vol, struct vscan *vs, uint64_t below,
			unsigned *cleared)
{
	uint64_t r;

	while (csdfs_chint_next(&vol->chint, vs->lo, &r) && r < below) {
		if (++*cleared > CLEAR_MAX)
			return false;
		csdfs_chint_clear(&vol->chint, r);
		vs->lo = r + 1;
	}
	if (vs->lo < below)
		vs->lo = below;
	return true;
}

/*
 * The next chunk starts at @pa, in a region the scan is not in yet: enter
 * that region (0), or go on from *@to first (1: a later hinted region, or
 * the same place after CLEAR_MAX clears), or stop (-ENOENT: no hinted
 * region left). (vol->lock held)
 */
static int vscan_enter(struct csdfs_vol *vol, struct vscan *vs, uint64_t pa,
		       uint64_t *to, unsigned *cleared)
{
	uint64_t r = pa / REGION_BYTES, next;

	if (!clear_below(vol, vs, r, cleared)) {
		*to = pa;
		return 1;
	}
	if (vs->sweep || csdfs_chint_test(&vol->chint, r)) {
		vs->region = r;
		vs->lo = r + 1;
		csdfs_chint_clear(&vol->chint, r);
		return 0;
	}
	if (!csdfs_chint_next(&vol->chint, r + 1, &next))
		return -ENOENT;
	vs->lo = next;
	*to = next * REGION_BYTES;
	return 1;
}

/* The candidate a cursor entry describes: of file @ino's chunks map, or
 * (@ino 0) of the reverse map. -ENOENT past the file's chunks. */
static int entry_decode(uint64_t ino, const struct csdfs_val *k,
			const struct csdfs_val *v, struct cand *c)
{
	if (ino) {
		struct csdfs_chunk_disk d;
		int rc;

		if (k->len != 16 || csdfs_be64_get(k->data) != ino)
			return -ENOENT;
		rc = csdfs_rec_chunk_decode(v, &d);
		if (rc)
			return rc;
		c->ino = ino;
		c->idx = csdfs_be64_get((const uint8_t *)k->data + 8);
		c->pa = d.pa;
		c->plen = d.plen;
	} else {
		struct csdfs_phys_disk p = { 0 };
		int rc = k->len == 8 ? csdfs_rec_phys_decode(v, &p) : -EUCLEAN;

		if (rc)
			return rc;
		c->ino = p.ino;
		c->idx = p.chunk;
		c->pa = csdfs_be64_get(k->data);
		c->plen = p.plen;
	}
	return 0;
}

/*
 * One scan step (one lock hold): from @*from, the next COMPACT_SCAN chunks,
 * in pa order over the volume (@ino 0) or in chunk order over file @ino;
 * candidates go to @out (at most @max). @*from becomes where the next step
 * starts. @return 1 at the end of the map, 0, or -errno.
 */
static int scan_step(struct csdfs_vol *vol, uint64_t ino, uint64_t *from,
		     struct vscan *vs, struct cand *out, size_t max, size_t *n,
		     struct csdfs_compact_stats *st)
{
	enum csdfs_db db = ino ? CSDFS_DB_CHUNKS : CSDFS_DB_PHYS;
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	struct csdfs_op op;
	uint8_t key[16];
	unsigned seen = 0, cleared = 0;
	int rc;

	*n = 0;
	rc = csdfs_op_begin_read(vol, &op);
	if (rc)
		return rc;
	rc = csdfs_cursor_open(op.txn, db, &cur);
	if (rc)
		return csdfs_op_end(&op, rc);
	if (ino)
		csdfs_chunk_key(key, ino, *from);
	else
		csdfs_be64_put(key, *from);
	rc = csdfs_cursor_seek(cur, key, ino ? 16 : 8, &k, &v);
	while (!rc && seen < COMPACT_SCAN && *n < max) {
		struct cand c;
		bool yes, later;
		uint64_t to;

		rc = entry_decode(ino, &k, &v, &c);
		if (rc)
			break;
		if (!ino && c.pa / REGION_BYTES != vs->region) {
			rc = vscan_enter(vol, vs, c.pa, &to, &cleared);
			if (rc == 1) {
				*from = to;
				if (to == c.pa) {   /* CLEAR_MAX reached */
					rc = 0;
					break;
				}
				csdfs_be64_put(key, to);
				rc = csdfs_cursor_seek(cur, key, 8, &k, &v);
				continue;
			}
			if (rc)
				break;
		}
		*from = ino ? c.idx + 1 : c.pa + 1;
		rc = worth_moving(vol, op.txn, c.pa, c.plen, &yes, &later);
		if (rc)
			break;
		st->scanned++;
		if (yes) {
			out[(*n)++] = c;
			st->candidates++;
		}
		if (!ino && yes)
			csdfs_chint_set(&vol->chint, vs->region);
		/* Not the whole region again for the head's block: that
		 * block, once the head has left it (later_check). */
		if (later)
			vol->compact_later = vol->alloc.head / BS + 1;
		rc = csdfs_cursor_next(cur, &k, &v);
		seen++;
	}
	csdfs_cursor_close(cur);
	if (rc == -ENOENT) {
		/* The end of the map: no chunk starts in any region after. */
		if (!ino && !clear_below(vol, vs, vol->chint.nregions, &cleared)) {
			*from = vs->lo * REGION_BYTES;
			csdfs_op_end(&op, 0);
			return 0;
		}
		csdfs_op_end(&op, 0);
		return 1;
	}
	return csdfs_op_end(&op, rc);
}

static int cand_cmp(const void *x, const void *y)
{
	const struct cand *a = x, *b = y;

	if (a->ino != b->ino)
		return a->ino < b->ino ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/*
 * Re-map the written plan's chunks in ONE operation, each only if it is
 * still stored where it was read (@old). @skip[i]: left alone.
 */
static int remap(struct wplan *p, const struct csdfs_chunk_disk *old, bool *skip,
		 struct csdfs_compact_stats *st)
{
	struct csdfs_inode_disk rec;
	struct csdfs_op op;
	int rc;

	rc = csdfs_op_begin_irec(p->vol, &op, true, p->ino, &rec);
	if (rc)
		return rc;
	op.inflight_slot = p->slot;
	p->slot = -1;
	for (size_t i = 0; i < p->n && !rc; i++) {
		struct csdfs_chunk_disk now, nc;

		rc = csdfs_chunk_get(op.txn, p->ino, p->c[i].idx, &now);
		if (rc == -ENOENT || (!rc && (now.pa != old[i].pa || now.plen != old[i].plen ||
					      now.csum != old[i].csum))) {
			skip[i] = true;
			rc = 0;
			continue;
		}
		if (rc)
			break;
		nc = now;
		nc.pa = p->c[i].pa;
		rc = csdfs_chunk_set(&op, p->ino, &rec, p->c[i].idx, &nc);
		op.delta.compact_bytes_written += nc.plen;
		op.delta.compact_chunks++;
	}
	/* Not csdfs_op_end_irec: the data did not change, so nothing an fsync
	 * of the file waits for (a lost re-map leaves the old, intact copy). */
	if (!rc)
		rc = csdfs_irec_store(op.txn, p->ino, &rec);
	rc = csdfs_op_end(&op, rc);
	p->committed = !rc;
	return rc;
}

/* Move @c[0..n) (all of inode @ino, n <= COMPACT_BATCH) if nobody is
 * writing them. */
static int move_batch(struct csdfs_vol *vol, uint64_t ino, const struct cand *c,
		      size_t n, bool use_reserve, struct csdfs_compact_stats *st)
{
	struct csdfs_chunk_disk old[COMPACT_BATCH];
	bool skip[COMPACT_BATCH] = { false };
	uint64_t idxs[COMPACT_BATCH], mask[CSDFS_STRIPES / 64];
	struct csdfs_inode_disk rec;
	struct csdfs_inode *in;
	struct wplan plan;
	char *buf = NULL;
	int rc;

	in = csdfs_inode_get(vol, ino);
	if (!in)
		return -ENOMEM;
	if (pthread_rwlock_tryrdlock(&in->io_lock)) {
		st->skipped += n;
		csdfs_inode_put(vol, in);
		return 0;
	}
	for (size_t i = 0; i < n; i++)
		idxs[i] = c[i].idx;
	rc = csdfs_stripes_trylock_chunks(vol, ino, idxs, n, mask);
	if (rc) {
		st->skipped += n;
		rc = 0;
		goto out_unlock_io;
	}
	rc = csdfs_reg_load(vol, ino, &rec);
	if (rc == -ENOENT) {   /* unlinked and destroyed meanwhile */
		st->skipped += n;
		rc = 0;
	}
	if (!rc)
		rc = csdfs_wplan_init(&plan, vol, ino, &rec, n, n);
	if (rc)
		goto out_unlock_stripes;
	buf = malloc(csdfs_codec_bound(plan.cs));
	if (!buf)
		rc = -ENOMEM;
	for (size_t i = 0; i < n && !rc; i++) {
		struct csdfs_chunk_disk d;

		rc = csdfs_read_mapping(vol, ino, c[i].idx, &d);
		if (rc == -ENOENT || (!rc && (d.pa != c[i].pa || d.plen != c[i].plen ||
					      d.plen > csdfs_codec_bound(plan.cs)))) {
			st->skipped++;
			rc = 0;
			continue;
		}
		if (!rc)
			rc = csdfs_io_pread(&vol->io, buf, d.plen, d.pa);
		if (rc)
			break;
		/* Never move a corrupt chunk: it stays where the read path
		 * reports it. */
		if (csdfs_crc32c(0, buf, d.plen) != d.csum) {
			st->skipped++;
			continue;
		}
		old[plan.n] = d;
		rc = csdfs_wplan_add_stored(&plan, c[i].idx, &d, buf);
	}
	if (!rc && plan.n)
		rc = csdfs_wplan_write(&plan, use_reserve);
	if (!rc && plan.n) {
		rc = remap(&plan, old, skip, st);
		if (rc == -ENOENT) {   /* the inode went meanwhile */
			st->skipped += plan.n;
			rc = 0;
		}
	}
	if (!rc && plan.committed) {
		pthread_mutex_lock(&vol->lock);
		for (size_t i = plan.n; i-- > 0; ) {
			if (!skip[i]) {
				st->moved++;
				st->bytes += plan.c[i].plen;
			} else if (plan.c[i].placed) {
				csdfs_alloc_unplace(&vol->alloc, plan.c[i].pa, plan.c[i].plen);
				st->skipped++;
			}
		}
		pthread_mutex_unlock(&vol->lock);
	}
	csdfs_wplan_abandon(&plan);
	csdfs_wplan_free(&plan);
	free(buf);
out_unlock_stripes:
	csdfs_stripes_unlock(vol, mask);
out_unlock_io:
	pthread_rwlock_unlock(&in->io_lock);
	csdfs_inode_put(vol, in);
	return rc;
}

/* Move the candidates of one scan step, inode by inode, in batches; with
 * @to_goal, only until @ino (0: the volume) meets the goal (st->goal). */
static int move_all(struct csdfs_vol *vol, uint64_t ino, struct cand *c, size_t n,
		    bool use_reserve, bool to_goal, struct csdfs_compact_stats *st)
{
	int rc = 0;

	qsort(c, n, sizeof(*c), cand_cmp);
	for (size_t i = 0; i < n && !rc; ) {
		size_t j = i + 1;

		if (to_goal && (rc = goal_met(vol, ino, &st->goal)) == 0 && st->goal)
			break;
		while (j < n && j - i < COMPACT_BATCH && c[j].ino == c[i].ino)
			j++;
		if (!rc)
			rc = move_batch(vol, c[i].ino, c + i, j - i, use_reserve, st);
		i = j;
	}
	return rc;
}

int csdfs_compact_pass(struct csdfs_vol *vol, uint64_t ino, uint64_t budget,
		       bool use_reserve, bool to_goal, struct csdfs_compact_stats *st)
{
	enum { MAXC = 256 };
	struct cand *c = malloc(MAXC * sizeof(*c));
	uint64_t from = 0, start;
	struct vscan vs;
	bool wrapped = false, whole = false;   /* whole: the map looked at */
	int rc = 0, end = 0;

	memset(st, 0, sizeof(*st));
	if (!c)
		return -ENOMEM;
	if (!ino) {
		pthread_mutex_lock(&vol->lock);
		later_check(vol);
		from = vol->compact_next;
		pthread_mutex_unlock(&vol->lock);
	}
	start = from;
	/* The pass asked for on the volume sweeps every region. */
	vscan_init(&vs, to_goal, from);
	while (st->bytes < budget && !rc) {
		/* Candidates for about what is left of the budget (chunks are
		 * mostly small where blocks are mostly dead). */
		uint64_t want = (budget - st->bytes) / 4096 + 1;
		size_t n;

		if (to_goal && ((rc = goal_met(vol, ino, &st->goal)) || st->goal))
			break;
		/* Unasked passes look at a bounded number of chunks (the
		 * next one resumes here): a writer in the low-space path, or
		 * the commit thread, waits for at most that. */
		if (!to_goal && st->scanned >= COMPACT_SCAN_ROUND)
			break;
		end = scan_step(vol, ino, &from, &vs, c, want < MAXC ? want : MAXC, &n, st);
		if (end < 0) {
			rc = end;
			break;
		}
		rc = move_all(vol, ino, c, n, use_reserve, to_goal, st);
		if (st->goal)
			break;
		if (end) {
			if (ino || wrapped || !start) {
				whole = true;
				break;
			}
			from = 0;    /* the volume's map again from its start */
			wrapped = true;
			vscan_init(&vs, to_goal, 0);
			end = 0;
		}
		if (wrapped && from >= start) {
			whole = true;
			break;
		}
	}
	st->wrapped = !ino && (st->goal || (whole && !rc && st->bytes < budget));
	if (!ino) {
		pthread_mutex_lock(&vol->lock);
		/* A region left part way keeps its hint for the next pass. */
		if (end != 1 && vs.region != NO_REGION)
			csdfs_chint_set(&vol->chint, vs.region);
		vol->compact_next = st->wrapped ? 0 : from;
		if (st->moved)
			vol->compact_idle_dead = 0;
		else if (st->wrapped)
			vol->compact_idle_dead = dead_locked(vol) + 1;
		pthread_mutex_unlock(&vol->lock);
	}
	free(c);
	return rc;
}

/* Is a volume pass worth it? A pass over the whole map that found nothing
 * is not repeated until @grow more bytes are dead. (vol->lock held) */
static bool worth_pass_locked(const struct csdfs_vol *vol, uint64_t grow)
{
	uint64_t dead = dead_locked(vol);

	return !vol->failed && !vol->read_only && vol->chint.nset &&
	       (!vol->compact_idle_dead || dead >= vol->compact_idle_dead + grow);
}

void csdfs_compact_background(struct csdfs_vol *vol)
{
	struct csdfs_compact_stats st;
	uint64_t used, dead;
	bool due;
	int rc;

	pthread_mutex_lock(&vol->lock);
	used = vol->counters.used_blocks * BS;
	dead = dead_locked(vol);
	due = vol->compact_dead && !vol->stopping && dead >= COMPACT_MIN_DEAD &&
	      dead * 100 >= used * vol->compact_dead &&
	      worth_pass_locked(vol, COMPACT_MIN_DEAD);
	pthread_mutex_unlock(&vol->lock);
	if (!due)
		return;
	rc = csdfs_compact_pass(vol, 0, COMPACT_ROUND_BYTES, false, false, &st);
	if (rc && rc != -ENOSPC)
		csdfs_log(LOG_WARNING, "compaction stopped: %s", strerror(-rc));
}

int csdfs_compact_lowspace(struct csdfs_vol *vol)
{
	struct csdfs_compact_stats st;
	bool due;
	int rc;

	pthread_mutex_lock(&vol->lock);
	due = dead_locked(vol) >= 16 * BS && worth_pass_locked(vol, COMPACT_LOW_BYTES);
	pthread_mutex_unlock(&vol->lock);
	if (!due)
		return -ENOSPC;
	rc = csdfs_compact_pass(vol, 0, COMPACT_LOW_BYTES, true, false, &st);
	if (!rc && st.moved)
		rc = csdfs_vol_commit(vol);
	return rc ? rc : st.moved ? 0 : -ENOSPC;
}

/* Parse a positive decimal "N" (an optional newline after it). */
static int parse_count(const char *value, size_t size, uint64_t max, uint64_t *out)
{
	char text[32], *end;

	if (!value || !size || size >= sizeof(text))
		return -EINVAL;
	memcpy(text, value, size);
	text[size] = '\0';
	*out = strtoull(text, &end, 10);
	if (end == text || text[0] == '-' || (*end && strcmp(end, "\n")) || !*out || *out > max)
		return -EINVAL;
	return 0;
}

static int target_check(struct csdfs_vol *vol, uint64_t ino)
{
	struct csdfs_inode_disk rec;
	int rc;

	if (ino == CSDFS_ROOT_INO)
		return 0;
	rc = csdfs_reg_load(vol, ino, &rec);
	return rc == -EISDIR ? -EINVAL : rc;
}

int csdfs_compact_xattr(struct csdfs_vol *vol, uint64_t ino, const char *value,
			size_t size)
{
	struct csdfs_compact_stats st;
	uint64_t mib;
	int rc;

	rc = parse_count(value, size, 1u << 20, &mib);
	if (!rc)
		rc = target_check(vol, ino);
	if (rc)
		return rc;
	if (ino == CSDFS_ROOT_INO) {
		/* The whole volume, from its start. */
		pthread_mutex_lock(&vol->lock);
		vol->compact_next = 0;
		vol->compact_idle_dead = 0;
		pthread_mutex_unlock(&vol->lock);
	}
	rc = csdfs_compact_pass(vol, ino == CSDFS_ROOT_INO ? 0 : ino, mib << 20,
				false, true, &st);
	if (!rc && st.moved)
		csdfs_log(LOG_INFO, "compaction of inode %llu: %llu chunks (%llu bytes) moved, %llu skipped",
			  (unsigned long long)ino, (unsigned long long)st.moved,
			  (unsigned long long)st.bytes, (unsigned long long)st.skipped);
	return rc;
}

int csdfs_compact_left(struct csdfs_vol *vol, uint64_t ino, uint64_t *left)
{
	enum { MAXC = 256 };
	struct csdfs_compact_stats st = { 0 };
	struct cand *c;
	struct vscan vs;
	uint64_t from = 0;
	bool enough = false;
	int rc, end = 0;

	*left = 0;
	rc = target_check(vol, ino);
	if (!rc)
		rc = goal_met(vol, ino, &enough);
	if (rc || enough)
		return rc;
	c = malloc(MAXC * sizeof(*c));
	if (!c)
		return -ENOMEM;
	/* On the volume, only where hints say dead bytes appeared since the
	 * last look: what this costs follows what was written since. */
	vscan_init(&vs, false, 0);
	pthread_mutex_lock(&vol->lock);
	later_check(vol);
	pthread_mutex_unlock(&vol->lock);
	while (!end) {
		size_t n;

		end = scan_step(vol, ino == CSDFS_ROOT_INO ? 0 : ino, &from, &vs, c, MAXC, &n, &st);
		if (end < 0) {
			rc = end;
			break;
		}
		*left += n;
	}
	free(c);
	return rc;
}
