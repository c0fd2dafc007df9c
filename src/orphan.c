/* SPDX-License-Identifier: MIT */
/*
 * Orphans: inodes whose link count fell to zero while something still
 * referenced them. unlink/rmdir record them in db "orphans"; the last
 * forget destroys them (inode.c), and so does every open and close for
 * those a crash or an unmount left behind. Destroying frees an
 * inode's data, xattrs, symlink, roll-ups and records in one operation.
 */
#include <errno.h>
#include <string.h>

#include "csdfs/log.h"
#include "vol.h"

static int drop_xattrs(struct csdfs_op *op, uint64_t ino)
{
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	uint8_t key[8];
	int rc;

	rc = csdfs_cursor_open(op->txn, CSDFS_DB_XATTRS, &cur);
	if (rc)
		return rc;
	csdfs_be64_put(key, ino);
	rc = csdfs_cursor_seek(cur, key, 8, &k, &v);
	while (!rc && k.len > 8 && csdfs_be64_get(k.data) == ino) {
		rc = csdfs_cursor_del(cur);
		if (!rc)
			rc = csdfs_cursor_seek(cur, key, 8, &k, &v);
	}
	csdfs_cursor_close(cur);
	return rc == -ENOENT ? 0 : rc;
}

int csdfs_inode_destroy(struct csdfs_op *op, uint64_t ino)
{
	struct csdfs_inode_disk rec;
	uint8_t key[8];
	int rc;

	rc = csdfs_irec_load(op->txn, ino, &rec);
	if (rc)
		return rc;
	rc = csdfs_chunk_drop_from(op, ino, &rec, 0);
	if (!rc)
		rc = drop_xattrs(op, ino);
	csdfs_be64_put(key, ino);
	if (!rc && S_ISLNK(rec.mode)) {
		rc = csdfs_meta_del(op->txn, CSDFS_DB_SYMLINKS, key, 8);
		rc = rc == -ENOENT ? 0 : rc;
	}
	if (!rc) {
		rc = csdfs_meta_del(op->txn, CSDFS_DB_ORPHANS, key, 8);
		rc = rc == -ENOENT ? 0 : rc;
	}
	if (!rc)
		rc = csdfs_rollup_drop(op->txn, ino);
	if (!rc)
		rc = csdfs_meta_del(op->txn, CSDFS_DB_INODES, key, 8);
	if (!rc)
		op->delta.inodes--;
	return rc;
}

/* The lowest orphan recorded in @txn: 0, or -ENOENT when there is none. */
static int first_orphan(struct csdfs_txn *txn, uint64_t *ino)
{
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	int rc = csdfs_cursor_at(txn, CSDFS_DB_ORPHANS, 0, &cur, &k, &v);

	if (!cur)
		return rc;
	*ino = !rc && k.len == 8 ? csdfs_be64_get(k.data) : 0;
	csdfs_cursor_close(cur);
	return rc;
}

/* Free orphan @ino in @op. Only an inode that is really unlinked is freed;
 * a stray record for a linked (or missing) one is just dropped. */
static int reclaim_one(struct csdfs_op *op, uint64_t ino)
{
	struct csdfs_inode_disk rec;
	uint8_t key[8];
	int rc = csdfs_irec_load(op->txn, ino, &rec);

	if (!rc && rec.nlink == 0)
		return csdfs_inode_destroy(op, ino);
	if (rc && rc != -ENOENT)
		return rc;
	csdfs_log(LOG_WARNING, "dropping stray orphan record for inode %llu",
		  (unsigned long long)ino);
	csdfs_be64_put(key, ino);
	return csdfs_meta_del(op->txn, CSDFS_DB_ORPHANS, key, 8);
}

/* Reclaim the lowest orphan in one operation: 0 (its number in *@ino),
 * 1 when there is none left, or -errno. */
static int reclaim_next(struct csdfs_vol *vol, uint64_t *ino)
{
	struct csdfs_op op;
	int rc = csdfs_op_begin(vol, &op);

	if (rc)
		return rc;
	rc = first_orphan(op.txn, ino);
	if (rc == -ENOENT) {
		rc = csdfs_op_end(&op, 0);
		return rc ? rc : 1;
	}
	if (!rc)
		rc = reclaim_one(&op, *ino);
	return csdfs_op_end(&op, rc);
}

int csdfs_orphan_reclaim_all(struct csdfs_vol *vol)
{
	uint64_t ino = 0;
	int rc;

	while (!(rc = reclaim_next(vol, &ino)))
		csdfs_log(LOG_INFO, "reclaimed unlinked inode %llu", (unsigned long long)ino);
	return rc == 1 ? 0 : rc;
}
