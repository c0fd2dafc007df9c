/* SPDX-License-Identifier: MIT */
/*
 * Inode records (db "inodes") and the roll-ups every store carries up.
 *
 * Directory roll-ups: every directory keeps the sums of the regular files
 * beneath it (db "rollup") and their codec mix (db "codecmix"), so a
 * directory's numbers are one read, never a tree walk.
 *
 * The single mechanism: every inode store compares the old and the new
 * record and sends the difference up the chain of parents to the root. A
 * file counts under its primary parent (its "parent" field); an unlinked
 * file is detached (parent 0) and counts nowhere; moving a file or a
 * directory subtracts its whole contribution along the old chain and adds
 * it along the new one. Chunk codec changes arrive as per-operation deltas
 * (csdfs_op.mix) and are flushed the same way before the operation commits.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vol.h"

/* ---- inode records ------------------------------------------------------ */

int csdfs_irec_load(struct csdfs_txn *txn, uint64_t ino,
		    struct csdfs_inode_disk *rec)
{
	uint8_t key[8];

	csdfs_be64_put(key, ino);
	return csdfs_rec_inode_get(txn, CSDFS_DB_INODES, key, 8, rec);
}

int csdfs_irec_store(struct csdfs_txn *txn, uint64_t ino,
		     const struct csdfs_inode_disk *rec)
{
	struct csdfs_inode_disk old;
	int rc;

	rc = csdfs_irec_load(txn, ino, &old);
	if (rc && rc != -ENOENT)
		return rc;
	return csdfs_irec_replace(txn, ino, rc ? NULL : &old, rec);
}

int csdfs_irec_replace(struct csdfs_txn *txn, uint64_t ino,
		       const struct csdfs_inode_disk *old,
		       const struct csdfs_inode_disk *rec)
{
	uint8_t key[8];
	int rc;

	/* Every store carries its difference up the directory roll-ups. */
	rc = csdfs_rollup_on_store(txn, ino, old, rec);
	if (rc)
		return rc;
	csdfs_be64_put(key, ino);
	return csdfs_rec_inode_put(txn, CSDFS_DB_INODES, key, 8, rec, 0);
}

static void ns_to_ts(int64_t ns, struct timespec *ts)
{
	ts->tv_sec = ns / 1000000000;
	ts->tv_nsec = ns % 1000000000;
	if (ts->tv_nsec < 0) {
		ts->tv_sec--;
		ts->tv_nsec += 1000000000;
	}
}

void csdfs_irec_to_stat(uint64_t ino, const struct csdfs_inode_disk *rec,
			struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = rec->mode;
	st->st_nlink = rec->nlink;
	st->st_uid = rec->uid;
	st->st_gid = rec->gid;
	st->st_rdev = rec->rdev;
	st->st_size = (off_t)rec->size;
	/* du shows physical use: 4 KiB container blocks in 512-byte units. */
	st->st_blocks = (blkcnt_t)(rec->phys_blocks * (CSDFS_BLOCK_SIZE / 512));
	/* Preferred I/O size: large writes pack best (stdio buffers use it). */
	st->st_blksize = rec->chunk_size > 131072 ? rec->chunk_size : 131072;
	ns_to_ts(rec->atime_ns, &st->st_atim);
	ns_to_ts(rec->mtime_ns, &st->st_mtim);
	ns_to_ts(rec->ctime_ns, &st->st_ctim);
}

void csdfs_irec_apply_attrs(struct csdfs_inode_disk *rec, const struct stat *in,
			    unsigned mask, int64_t now)
{
	if (mask & CSDFS_SET_MODE)
		rec->mode = (rec->mode & S_IFMT) | (in->st_mode & 07777);
	if (mask & CSDFS_SET_UID)
		rec->uid = in->st_uid;
	if (mask & CSDFS_SET_GID)
		rec->gid = in->st_gid;
	if (mask & CSDFS_SET_ATIME_NOW)
		rec->atime_ns = now;
	else if (mask & CSDFS_SET_ATIME)
		rec->atime_ns = (int64_t)in->st_atim.tv_sec * 1000000000 +
				in->st_atim.tv_nsec;
	if (mask & CSDFS_SET_MTIME_NOW)
		rec->mtime_ns = now;
	else if (mask & CSDFS_SET_MTIME)
		rec->mtime_ns = (int64_t)in->st_mtim.tv_sec * 1000000000 +
				in->st_mtim.tv_nsec;
	/* Any attribute change is an inode change. */
	if (mask & CSDFS_SET_CTIME)
		rec->ctime_ns = (int64_t)in->st_ctim.tv_sec * 1000000000 +
				in->st_ctim.tv_nsec;
	else
		rec->ctime_ns = now;
}


/* ---- roll-ups ------------------------------------------------------------ */

#define MAX_DEPTH 4096
#define MAX_MIX 64

struct mix_ent {
	uint8_t codec;
	int8_t level;
	uint64_t bytes;            /* signed delta, two's complement */
};

static bool attached(uint64_t ino, const struct csdfs_inode_disk *rec)
{
	return rec && ino != CSDFS_ROOT_INO && rec->parent && rec->nlink &&
	       (S_ISREG(rec->mode) || S_ISDIR(rec->mode));
}

void csdfs_rollup_of_file(const struct csdfs_inode_disk *rec,
			  struct csdfs_rollup_disk *r)
{
	memset(r, 0, sizeof(*r));
	r->logical = rec->size;
	r->phys_blocks = rec->phys_blocks;
	r->stored_bytes = rec->stored_bytes;
	r->mapped_bytes = rec->mapped_bytes;
	r->raw_bytes = rec->raw_bytes;
	r->stored_chunks = rec->stored_chunks;
	r->files = 1;
}

int csdfs_rollup_get(struct csdfs_txn *txn, uint64_t ino,
		     struct csdfs_rollup_disk *r)
{
	uint8_t key[8];
	int rc;

	csdfs_be64_put(key, ino);
	rc = csdfs_rec_rollup_get(txn, CSDFS_DB_ROLLUP, key, 8, r);
	if (rc == -ENOENT) {
		memset(r, 0, sizeof(*r));
		return 0;
	}
	return rc;
}

/* r += sign * d, field by field (mod 2^64). */
static void rollup_accumulate(struct csdfs_rollup_disk *r,
			      const struct csdfs_rollup_disk *d, int sign)
{
	csdfs_u64s_add(r, d, sizeof(*r), sign);
}

static bool rollup_is_zero(const struct csdfs_rollup_disk *r)
{
	static const struct csdfs_rollup_disk zero;

	return !memcmp(r, &zero, sizeof(*r));
}

static int rollup_add(struct csdfs_txn *txn, uint64_t dir,
		      const struct csdfs_rollup_disk *d, int sign)
{
	struct csdfs_rollup_disk r;
	uint8_t key[8];
	int rc;

	rc = csdfs_rollup_get(txn, dir, &r);
	if (rc)
		return rc;
	rollup_accumulate(&r, d, sign);
	csdfs_be64_put(key, dir);
	if (rollup_is_zero(&r)) {
		rc = csdfs_meta_del(txn, CSDFS_DB_ROLLUP, key, 8);
		return rc == -ENOENT ? 0 : rc;
	}
	return csdfs_rec_rollup_put(txn, CSDFS_DB_ROLLUP, key, 8, &r, 0);
}

static void mix_key(uint8_t key[10], uint64_t ino, uint8_t codec, int8_t level)
{
	csdfs_be64_put(key, ino);
	key[8] = codec;
	key[9] = (uint8_t)level;
}

static int mix_add(struct csdfs_txn *txn, uint64_t ino, uint8_t codec,
		   int8_t level, uint64_t delta)
{
	uint8_t key[10];
	uint64_t bytes = 0;
	int rc;

	if (!delta)
		return 0;
	mix_key(key, ino, codec, level);
	rc = csdfs_rec_le64_get(txn, CSDFS_DB_CODECMIX, key, 10, &bytes);
	if (rc == -ENOENT)
		bytes = 0;
	else if (rc)
		return rc;
	bytes += delta;
	if (!bytes) {
		rc = csdfs_meta_del(txn, CSDFS_DB_CODECMIX, key, 10);
		return rc == -ENOENT ? 0 : rc;
	}
	return csdfs_rec_le64_put(txn, CSDFS_DB_CODECMIX, key, 10, &bytes, 0);
}

int csdfs_mix_list(struct csdfs_txn *txn, uint64_t ino,
		   int (*fn)(void *ctx, uint8_t codec, int8_t level, uint64_t bytes),
		   void *ctx)
{
	struct mix_ent ents[MAX_MIX];
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	uint8_t key[8];
	int n = 0, rc;

	rc = csdfs_cursor_open(txn, CSDFS_DB_CODECMIX, &cur);
	if (rc)
		return rc;
	csdfs_be64_put(key, ino);
	for (rc = csdfs_cursor_seek(cur, key, 8, &k, &v); !rc && n < MAX_MIX;
	     rc = csdfs_cursor_next(cur, &k, &v)) {
		if (k.len != 10 || csdfs_be64_get(k.data) != ino)
			break;
		rc = csdfs_rec_le64_decode(&v, &ents[n].bytes);
		if (rc)
			break;
		ents[n].codec = ((const uint8_t *)k.data)[8];
		ents[n].level = (int8_t)((const uint8_t *)k.data)[9];
		n++;
	}
	csdfs_cursor_close(cur);
	if (rc && rc != -ENOENT)
		return rc;
	/* Call back after the cursor is gone: @fn may write. */
	for (int i = 0; i < n; i++) {
		rc = fn(ctx, ents[i].codec, ents[i].level, ents[i].bytes);
		if (rc)
			return rc;
	}
	return 0;
}

/* Walk from @dir up to the root applying @r (may be NULL) and @mix. */
static int chain_apply(struct csdfs_txn *txn, uint64_t dir,
		       const struct csdfs_rollup_disk *r,
		       const struct mix_ent *mix, int nmix, int sign)
{
	for (int depth = 0; dir && depth < MAX_DEPTH; depth++) {
		struct csdfs_inode_disk rec;
		int rc;

		if (r) {
			rc = rollup_add(txn, dir, r, sign);
			if (rc)
				return rc;
		}
		for (int i = 0; i < nmix; i++) {
			rc = mix_add(txn, dir, mix[i].codec, mix[i].level,
				     sign > 0 ? mix[i].bytes : (uint64_t)0 - mix[i].bytes);
			if (rc)
				return rc;
		}
		if (dir == CSDFS_ROOT_INO)
			return 0;
		rc = csdfs_irec_load(txn, dir, &rec);
		if (rc == -ENOENT)
			return 0;  /* a removed directory ends the chain */
		if (rc)
			return rc;
		if (rec.parent == dir)
			return 0;
		dir = rec.parent;
	}
	return 0;
}

struct mix_collect {
	struct mix_ent ents[MAX_MIX];
	int n;
};

static int collect_cb(void *ctx, uint8_t codec, int8_t level, uint64_t bytes)
{
	struct mix_collect *c = ctx;

	if (c->n < MAX_MIX) {
		c->ents[c->n].codec = codec;
		c->ents[c->n].level = level;
		c->ents[c->n].bytes = bytes;
		c->n++;
	}
	return 0;
}

/* Whole contribution of @ino (record @rec) to a parent chain. */
static int contribution(struct csdfs_txn *txn, uint64_t ino,
			const struct csdfs_inode_disk *rec,
			struct csdfs_rollup_disk *r, struct mix_collect *mc)
{
	mc->n = 0;
	if (S_ISREG(rec->mode))
		csdfs_rollup_of_file(rec, r);
	else {
		int rc = csdfs_rollup_get(txn, ino, r);

		if (rc)
			return rc;
	}
	return csdfs_mix_list(txn, ino, collect_cb, mc);
}

int csdfs_rollup_on_store(struct csdfs_txn *txn, uint64_t ino,
			  const struct csdfs_inode_disk *old,
			  const struct csdfs_inode_disk *rec)
{
	bool was = attached(ino, old), is = attached(ino, rec);
	struct csdfs_rollup_disk r_old, r_new;
	struct mix_collect mc;
	int rc;

	if (!was && !is)
		return 0;
	if (was && is && old->parent == rec->parent) {
		/* Same place: only a file's own numbers can have changed. */
		if (!S_ISREG(rec->mode))
			return 0;
		csdfs_rollup_of_file(old, &r_old);
		csdfs_rollup_of_file(rec, &r_new);
		rollup_accumulate(&r_new, &r_old, -1);
		if (rollup_is_zero(&r_new))
			return 0;
		return chain_apply(txn, rec->parent, &r_new, NULL, 0, 1);
	}
	if (was) {
		rc = contribution(txn, ino, old, &r_old, &mc);
		if (!rc)
			rc = chain_apply(txn, old->parent, &r_old, mc.ents, mc.n, -1);
		if (rc)
			return rc;
	}
	if (is) {
		rc = contribution(txn, ino, rec, &r_new, &mc);
		if (!rc)
			rc = chain_apply(txn, rec->parent, &r_new, mc.ents, mc.n, 1);
		if (rc)
			return rc;
	}
	return 0;
}

int csdfs_op_note_mix(struct csdfs_op *op, uint64_t ino, uint8_t codec,
		      int8_t level, int64_t delta)
{
	for (size_t i = 0; i < op->nmix; i++) {
		struct csdfs_mixdelta *m = &op->mix[i];

		if (m->ino == ino && m->codec == codec && m->level == level) {
			m->delta += delta;
			return 0;
		}
	}
	if (op->nmix == op->capmix) {
		size_t cap = op->capmix ? op->capmix * 2 : 8;
		struct csdfs_mixdelta *m = realloc(op->mix, cap * sizeof(*m));

		if (!m)
			return -ENOMEM;
		op->mix = m;
		op->capmix = cap;
	}
	op->mix[op->nmix++] = (struct csdfs_mixdelta){ ino, codec, level, delta };
	return 0;
}

int csdfs_rollup_flush(struct csdfs_op *op)
{
	for (size_t i = 0; i < op->nmix; i++) {
		struct csdfs_mixdelta *m = &op->mix[i];
		struct csdfs_inode_disk rec;
		struct mix_ent e;
		int rc;

		if (!m->delta)
			continue;
		rc = csdfs_irec_load(op->txn, m->ino, &rec);
		if (rc == -ENOENT)
			continue;  /* destroyed in this operation */
		if (rc)
			return rc;
		rc = mix_add(op->txn, m->ino, m->codec, m->level, (uint64_t)m->delta);
		if (rc)
			return rc;
		if (!attached(m->ino, &rec))
			continue;
		e.codec = m->codec;
		e.level = m->level;
		e.bytes = (uint64_t)m->delta;
		rc = chain_apply(op->txn, rec.parent, NULL, &e, 1, 1);
		if (rc)
			return rc;
	}
	op->nmix = 0;
	return 0;
}

int csdfs_rollup_drop(struct csdfs_txn *txn, uint64_t ino)
{
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	uint8_t key[8];
	int rc;

	csdfs_be64_put(key, ino);
	rc = csdfs_meta_del(txn, CSDFS_DB_ROLLUP, key, 8);
	if (rc && rc != -ENOENT)
		return rc;
	rc = csdfs_cursor_open(txn, CSDFS_DB_CODECMIX, &cur);
	if (rc)
		return rc;
	rc = csdfs_cursor_seek(cur, key, 8, &k, &v);
	while (!rc && k.len == 10 && csdfs_be64_get(k.data) == ino) {
		rc = csdfs_cursor_del(cur);
		if (!rc)
			rc = csdfs_cursor_seek(cur, key, 8, &k, &v);
	}
	csdfs_cursor_close(cur);
	return rc == -ENOENT ? 0 : rc;
}

/* ---- effective policy ---------------------------------------------------- */

void csdfs_policy_moved(struct csdfs_vol *vol)
{
	__atomic_add_fetch(&vol->policy_gen, 1, __ATOMIC_RELEASE);
}

int csdfs_policy_resolve(struct csdfs_vol *vol, struct csdfs_txn *txn, uint64_t ino,
			 const struct csdfs_inode_disk *rec, struct csdfs_policy *p)
{
	struct csdfs_inode_disk cur = *rec;
	bool codec_left = true, chunk_left = true;

	p->codec = vol->sb.codec;
	p->codec_from = 0;
	p->chunk_size = vol->sb.chunk_size;
	p->chunk_from = 0;
	/* Past MAX_DEPTH the volume default holds, as the roll-ups stop there. */
	for (int depth = 0; depth < MAX_DEPTH; depth++) {
		uint64_t up = cur.parent;
		int rc;

		if (codec_left && (cur.flags & CSDFS_INODE_CODEC_SET)) {
			p->codec.id = cur.codec;
			p->codec.level = cur.level;
			p->codec_from = ino;
			codec_left = false;
		}
		if (chunk_left && (cur.flags & CSDFS_INODE_CHUNK_SET) && cur.chunk_size) {
			p->chunk_size = cur.chunk_size;
			p->chunk_from = ino;
			chunk_left = false;
		}
		if ((!codec_left && !chunk_left) || ino == CSDFS_ROOT_INO || !up || up == ino)
			return 0;
		rc = csdfs_irec_load(txn, up, &cur);
		if (rc == -ENOENT)
			return 0;  /* a detached chain ends at the default */
		if (rc)
			return rc;
		ino = up;
	}
	return 0;
}
