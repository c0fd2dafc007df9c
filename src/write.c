/* SPDX-License-Identifier: MIT */
/*
 * The write path: write(2), truncate and fallocate. Each builds the new
 * contents of the chunks it touches (read-modify-write for partial chunks)
 * into one write plan (wplan.c), which writes them out of place and maps
 * them in one operation together with the file's new size and times. A
 * write holds the inode's io_lock shared and the stripes of its chunks; a
 * resize holds io_lock exclusively.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/falloc.h>

#include "csdfs/bufpool.h"
#include "csdfs/log.h"
#include "data.h"

/* What a write changes in its file's record besides the chunks. */
struct write_edit {
	uint64_t end;
	size_t size;
	unsigned flags;
};

/*
 * A file's effective codec, remembered from the last write that resolved it
 * for as long as the volume's policy_gen stays as it was then. A write of
 * whole chunks (a database page) then reads nothing before the operation
 * that maps them; a partial write reads the record and its chunks' old
 * mappings but not the directories above. One word: (policy_gen + 1) << 16,
 * the codec id, the level.
 */
static uint64_t memo_of(uint64_t gen, const struct csdfs_inode_disk *rec)
{
	return (gen + 1) << 16 | (uint64_t)rec->codec << 8 | (uint8_t)rec->level;
}

static bool codec_recall(uint64_t memo, uint64_t gen, struct csdfs_codec_spec *spec)
{
	if (memo >> 16 != gen + 1)
		return false;
	spec->id = (uint8_t)(memo >> 8);
	spec->level = (int8_t)(uint8_t)memo;
	return true;
}

/* The looked-up mapping of chunk @idx, NULL if it was not looked up. */
static const struct wpart *part_of(const struct wpart *parts, size_t n,
				   uint64_t idx)
{
	for (size_t i = 0; i < n; i++)
		if (parts[i].idx == idx)
			return &parts[i];
	return NULL;
}

static int write_edit(struct csdfs_op *op, struct csdfs_inode_disk *rec, void *arg)
{
	const struct write_edit *we = arg;

	if (we->end > rec->size)
		rec->size = we->end;
	if (!(we->flags & CSDFS_WRITE_KEEP_TIMES))
		rec->mtime_ns = rec->ctime_ns = csdfs_now_ns();
	op->delta.app_bytes_written += we->size;
	return 0;
}

ssize_t csdfs_fs_write(struct csdfs_vol *vol, uint64_t ino, const char *buf,
		       size_t size, uint64_t off, unsigned flags)
{
	uint64_t mask[CSDFS_STRIPES / 64], first, last, end = off + size, gen;
	struct csdfs_inode_disk rec;
	struct csdfs_inode *in;
	struct wplan plan;
	struct wpart parts[2];
	struct csdfs_codec_spec known;
	size_t nparts = 0;
	bool recalled;
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
		rc = csdfs_reg_load(vol, ino, &rec);
		if (rc)
			goto out_unlock_io;
		cs = rec.chunk_size ? rec.chunk_size : vol->sb.chunk_size;
		__atomic_store_n(&in->chunk_size, cs, __ATOMIC_RELAXED);
	}
	first = off / cs;
	last = (end - 1) / cs;
	/* Only the first and the last chunk can be covered in part: their
	 * mappings come with the record, in the same round on vol->lock (a
	 * chunk that turns out whole, up to EOF, was looked up for nothing). */
	if (off % cs || (first == last && end % cs))
		parts[nparts++].idx = first;
	if (last != first && end % cs)
		parts[nparts++].idx = last;
	csdfs_stripes_lock_range(vol, ino, first, last, mask);
	/* Policy changes bump policy_gen under vol->lock: read it before the
	 * record, so that a codec resolved from an older state is never
	 * remembered as current. */
	gen = __atomic_load_n(&vol->policy_gen, __ATOMIC_ACQUIRE);
	recalled = codec_recall(__atomic_load_n(&in->codec_memo, __ATOMIC_RELAXED),
				gen, &known);
	if (!nparts && recalled) {
		/* Whole chunks: neither the size nor the old mappings matter
		 * (the record is read where the plan is applied). */
		memset(&rec, 0, sizeof(rec));
		rec.chunk_size = cs;
		rec.codec = known.id;
		rec.level = known.level;
		rc = 0;
		goto plan;
	}
	/* The size that matters is the one after we own our chunks; their
	 * mappings stay as read while we hold their stripes. */
	rc = csdfs_reg_load_write(vol, ino, &rec, parts, nparts, !recalled);
	if (!rc && recalled) {
		rec.codec = known.id;
		rec.level = known.level;
	} else if (!rc) {
		__atomic_store_n(&in->codec_memo, memo_of(gen, &rec), __ATOMIC_RELAXED);
	}
	if (!rc && (rec.chunk_size ? rec.chunk_size : vol->sb.chunk_size) != cs) {
		csdfs_log(LOG_ERR, "inode %llu: chunk size changed under a write",
			  (unsigned long long)ino);
		__atomic_store_n(&in->chunk_size, 0, __ATOMIC_RELAXED);
		rc = -EIO;
	}
plan:
	if (!rc)
		rc = csdfs_wplan_init(&plan, vol, ino, &rec, last - first + 1,
			       last - first + 1);
	if (rc)
		goto out_unlock_stripes;
	for (uint64_t idx = first; idx <= last && !rc; idx++) {
		uint64_t cstart = idx * cs;
		uint32_t ws = (uint32_t)((off > cstart ? off : cstart) - cstart);
		uint32_t we = (uint32_t)((end < cstart + cs ? end : cstart + cs) - cstart);

		if (ws == 0 && (we == cs || cstart + we >= rec.size)) {
			/* Whole chunk (or all of it that lies before EOF). */
			rc = csdfs_wplan_add(&plan, idx, buf + (cstart - off), we);
			continue;
		}
		/* Only the first and the last chunk can be partial; each gets
		 * its own buffer (the plan keeps pointing at it). */
		if (!tmp) {
			tmp = csdfs_bufpool_get(2 * (size_t)cs);
			scratch = csdfs_bufpool_get(csdfs_codec_bound(cs));
			if (!tmp || !scratch) {
				rc = -ENOMEM;
				break;
			}
		}
		{
			char *cb = tmp + (idx == first ? 0 : cs);
			uint64_t keep = rec.size > cstart ? rec.size - cstart : 0;
			uint32_t llen = keep < cs ? (uint32_t)keep : cs;
			const struct wpart *wp = part_of(parts, nparts, idx);

			if (wp && !wp->mapped)
				memset(cb, 0, cs);
			else
				rc = csdfs_read_chunk(vol, ino, idx, cs, wp ? &wp->c : NULL,
						      cb, scratch, false);
			if (rc)
				break;
			memcpy(cb + ws, buf + (cstart + ws - off), we - ws);
			/* Bytes past EOF inside the chunk must stay zero. */
			if (llen < we)
				llen = we;
			memset(cb + llen, 0, cs - llen);
			rc = csdfs_wplan_add(&plan, idx, cb, llen);
			plan.c[plan.n - 1].partial = true;
		}
	}
	if (!rc)
		rc = csdfs_wplan_write(&plan, false);
	if (!rc) {
		struct write_edit we = { end, size, flags };

		rc = csdfs_wplan_apply(&plan, write_edit, &we);
	}
	if (plan.committed)
		csdfs_wplan_cache(&plan);
	csdfs_wplan_abandon(&plan);
	csdfs_wplan_free(&plan);
out_unlock_stripes:
	csdfs_stripes_unlock(vol, mask);
out_unlock_io:
	pthread_rwlock_unlock(&in->io_lock);
	csdfs_bufpool_put(tmp, 2 * (size_t)cs);
	csdfs_bufpool_put(scratch, csdfs_codec_bound(cs));
	if (!rc && (flags & CSDFS_WRITE_SYNC))
		rc = csdfs_vol_commit_for(vol, ino);
	csdfs_inode_put(vol, in);
	return rc ? rc : (ssize_t)size;
}

/* ---- resize, zeroing, fallocate ----------------------------------------- */

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
	rc = csdfs_wplan_init(plan, vol, ino, rec, last - first + 1, 2);
	if (rc)
		return rc;
	/* The plan points into these until it is written: one buffer for
	 * each of the two chunks that can be partial. */
	tmp = csdfs_bufpool_get(2 * (size_t)cs);
	scratch = csdfs_bufpool_get(csdfs_codec_bound(cs));
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
			rc = csdfs_wplan_add(plan, idx, cb, 0);
			continue;
		}
		rc = csdfs_read_chunk(vol, ino, idx, cs, NULL, cb, scratch, false);
		if (!rc) {
			memset(cb + (s - cstart), 0, e - s);
			rc = csdfs_wplan_add(plan, idx, cb, cs);
		}
	}
	if (!rc)
		rc = csdfs_wplan_write(plan, true);
out:
	csdfs_bufpool_put(tmp, 2 * (size_t)cs);
	csdfs_bufpool_put(scratch, csdfs_codec_bound(cs));
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

	rc = csdfs_op_begin_irec(vol, &op, true, ino, &rec);
	if (rc)
		return rc;
	if (plan)
		rc = csdfs_wplan_commit(plan, &op, &rec);
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

/* Take @ino exclusively for a resize and load its record; NULL (and *@rc)
 * on failure, with nothing held. */
static struct csdfs_inode *resize_lock(struct csdfs_vol *vol, uint64_t ino,
				       struct csdfs_inode_disk *rec, int *rc)
{
	struct csdfs_inode *in = csdfs_inode_get(vol, ino);

	if (!in) {
		*rc = -ENOMEM;
		return NULL;
	}
	csdfs_inode_lock_exclusive(vol, in);
	*rc = csdfs_reg_load_codec(vol, ino, rec);  /* codec: for partial chunks */
	if (*rc) {
		pthread_rwlock_unlock(&in->io_lock);
		csdfs_inode_put(vol, in);
		return NULL;
	}
	return in;
}

static void resize_unlock(struct csdfs_vol *vol, struct csdfs_inode *in)
{
	pthread_rwlock_unlock(&in->io_lock);
	csdfs_inode_put(vol, in);
}

/* Zero [zfrom, zto) (nothing when empty), then resize_commit. */
static int zero_and_commit(struct csdfs_vol *vol, uint64_t ino,
			   const struct csdfs_inode_disk *rec, uint64_t zfrom,
			   uint64_t zto, uint64_t drop_from, bool set_size,
			   uint64_t new_size, const struct stat *attrs,
			   unsigned mask, struct stat *st)
{
	struct wplan plan;
	int rc = 0;

	memset(&plan, 0, sizeof(plan));
	plan.slot = -1;
	plan.vol = vol;
	if (zfrom < zto)
		rc = zero_range_plan(vol, ino, rec, zfrom, zto, &plan);
	if (!rc)
		rc = resize_commit(vol, ino, zfrom < zto ? &plan : NULL, drop_from,
				   set_size, new_size, attrs, mask, st);
	csdfs_wplan_abandon(&plan);
	csdfs_wplan_free(&plan);
	return rc;
}

int csdfs_file_truncate(struct csdfs_vol *vol, uint64_t ino, uint64_t size,
			const struct stat *attrs, unsigned mask, struct stat *st)
{
	struct csdfs_inode_disk rec;
	struct csdfs_inode *in;
	uint64_t drop = UINT64_MAX, zfrom = 0, zto = 0;
	uint32_t cs;
	int rc;

	if (size > CSDFS_MAX_FILE_SIZE)
		return -EFBIG;
	in = resize_lock(vol, ino, &rec, &rc);
	if (!in)
		return rc;
	cs = rec.chunk_size ? rec.chunk_size : vol->sb.chunk_size;
	if (size < rec.size) {
		drop = (size + cs - 1) / cs;
		/* A partial last chunk keeps only the bytes before EOF. */
		if (size % cs) {
			zfrom = size;
			zto = (size / cs + 1) * cs;
		}
	}
	rc = zero_and_commit(vol, ino, &rec, zfrom, zto, drop, true, size, attrs,
			     mask, st);
	resize_unlock(vol, in);
	return rc;
}

int csdfs_fs_fallocate(struct csdfs_vol *vol, uint64_t ino, int mode,
		       uint64_t off, uint64_t len)
{
	struct csdfs_inode_disk rec;
	struct csdfs_inode *in;
	bool keep = mode & FALLOC_FL_KEEP_SIZE, grow;
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
	in = resize_lock(vol, ino, &rec, &rc);
	if (!in)
		return rc;
	/*
	 * Mode 0 reserves nothing physical: space is only known once data is
	 * compressed, and allocated-but-unwritten ranges read as zeros and are
	 * compressed like any other data when written (never stored raw).
	 */
	zend = op != 0 && end < rec.size ? end : op != 0 ? rec.size : 0;
	grow = !keep && end > rec.size;
	if ((op != 0 && off < zend) || grow)
		rc = zero_and_commit(vol, ino, &rec, op != 0 ? off : 0, zend,
				     UINT64_MAX, grow, end, NULL, 0, NULL);
	resize_unlock(vol, in);
	return rc;
}
