/* SPDX-License-Identifier: MIT */
/*
 * The only file that includes <lmdb.h>. It maps LMDB's error space onto
 * -errno and holds the canonical schema of the metadata store.
 *
 * SCHEMA (format version 1). Integers in keys are big-endian (BE64) so that
 * LMDB's byte order is numeric order; values are the little-endian packed
 * records of include/csdfs/format.h.
 *
 *  db        key                      value                       fsck check
 *  --------  -----------------------  --------------------------  -----------------
 *  meta      ASCII name               "uuid": 16 bytes, equal to  superblock binding
 *                                     the superblock's;
 *                                     "version": LE32;
 *                                     "next_ino": LE64 next free
 *                                     inode number (never reused);
 *                                     "counters": csdfs_counters_disk
 *                                                                 counters match sums
 *  inodes    ino BE64                 csdfs_inode_disk            nlink = dirents,
 *                                                                 sizes, block sums
 *  dirents   parent BE64 + name       csdfs_dirent_disk           target inode live,
 *            (name 1..255 bytes, no                               type matches
 *            NUL, not "." / "..")
 *  chunks    ino BE64 + index BE64    csdfs_chunk_disk            inode live, index <
 *                                                                 ceil(size/chunk),
 *                                                                 phys entry agrees
 *  phys      pa BE64 (byte offset)    csdfs_phys_disk: the chunk  ranges disjoint, in
 *                                     stored at [pa, pa + plen)   data area, not free
 *  free      block BE64 (first)       LE64 block count; runs are  no overlap with
 *                                     disjoint and never adjacent phys, union = all
 *                                     (always coalesced)          unused blocks
 *  xattrs    ino BE64 + name          raw value                   inode live
 *  symlinks  ino BE64                 target bytes (no NUL)       inode is S_IFLNK
 *  orphans   ino BE64                 empty: nlink is 0 but the   inode live, nlink 0
 *                                     inode was still open; freed
 *                                     at the next mount
 *  rollup    dir ino BE64             csdfs_rollup_disk: sums of  equals the sum of
 *                                     attached files beneath it   its children
 *  codecmix  ino BE64 + codec u8 +    LE64 logical bytes of that  file: equals its
 *            level i8                 codec (dirs: subtree sum)   chunks
 *
 * Sentinels: inode 1 is the root directory (its "parent" is itself); no
 * inode 0 exists; block numbers below CSDFS_FIRST_DATA_BLOCK never appear.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <lmdb.h>

#include "csdfs/meta.h"

static const char *const db_names[CSDFS_DB_COUNT] = {
	[CSDFS_DB_META] = "meta",
	[CSDFS_DB_INODES] = "inodes",
	[CSDFS_DB_DIRENTS] = "dirents",
	[CSDFS_DB_CHUNKS] = "chunks",
	[CSDFS_DB_PHYS] = "phys",
	[CSDFS_DB_FREE] = "free",
	[CSDFS_DB_XATTRS] = "xattrs",
	[CSDFS_DB_SYMLINKS] = "symlinks",
	[CSDFS_DB_ORPHANS] = "orphans",
	[CSDFS_DB_ROLLUP] = "rollup",
	[CSDFS_DB_CODECMIX] = "codecmix",
};

struct csdfs_meta {
	MDB_env *env;
	MDB_dbi dbi[CSDFS_DB_COUNT];
	char *path;
};

struct csdfs_txn {
	struct csdfs_meta *meta;
	MDB_txn *txn;
	bool top;                  /* not nested */
};

struct csdfs_cursor {
	MDB_cursor *cur;
};

/* LMDB's error space -> -errno (STYLE: translate at the adapter). */
static int mdb_err(int rc)
{
	switch (rc) {
	case MDB_SUCCESS:
		return 0;
	case MDB_NOTFOUND:
		return -ENOENT;
	case MDB_KEYEXIST:
		return -EEXIST;
	case MDB_MAP_FULL:
	case MDB_TXN_FULL:
	case MDB_CURSOR_FULL:
	case MDB_PAGE_FULL:
		return -ENOSPC;
	case MDB_CORRUPTED:
	case MDB_PAGE_NOTFOUND:
	case MDB_INVALID:
	case MDB_VERSION_MISMATCH:
	case MDB_INCOMPATIBLE:
	case MDB_BAD_DBI:
		return -EUCLEAN;
	case MDB_MAP_RESIZED:
	case MDB_BAD_TXN:
	case MDB_BAD_VALSIZE:
		return -EINVAL;
	case MDB_READERS_FULL:
	case MDB_TLS_FULL:
	case MDB_DBS_FULL:
		return -EAGAIN;
	default:
		return rc > 0 ? -rc : -EIO;
	}
}

static int open_dbis(struct csdfs_meta *meta, bool create)
{
	MDB_txn *txn;
	int rc;

	rc = mdb_txn_begin(meta->env, NULL, 0, &txn);
	if (rc)
		return mdb_err(rc);
	for (int i = 0; i < CSDFS_DB_COUNT; i++) {
		rc = mdb_dbi_open(txn, db_names[i], create ? MDB_CREATE : 0,
				  &meta->dbi[i]);
		if (rc) {
			mdb_txn_abort(txn);
			/* A readable env without our sub-databases is foreign. */
			return rc == MDB_NOTFOUND ? -EUCLEAN : mdb_err(rc);
		}
	}
	return mdb_err(mdb_txn_commit(txn));
}

int csdfs_meta_open(const char *dir, bool create, uint64_t mapsize,
		    struct csdfs_meta **out)
{
	struct csdfs_meta *meta;
	struct stat st;
	char datafile[4096];
	int rc;

	snprintf(datafile, sizeof(datafile), "%s/data.mdb", dir);
	if (!create && stat(datafile, &st))
		return -errno;
	meta = calloc(1, sizeof(*meta));
	if (!meta)
		return -ENOMEM;
	rc = mdb_err(mdb_env_create(&meta->env));
	if (rc)
		goto out_free;
	mdb_env_set_maxdbs(meta->env, CSDFS_DB_COUNT + 2);
	rc = mdb_err(mdb_env_set_mapsize(meta->env, (size_t)mapsize));
	if (rc)
		goto out_close;
	/*
	 * NOLOCK: one process owns the volume (flock on the container) and
	 * the daemon serialises all transaction use itself; this also lets
	 * any thread commit the group transaction.
	 * NOMETASYNC: a commit syncs its data pages before it writes the meta
	 * page, but leaves the meta page to csdfs_meta_sync(), which the
	 * volume calls after releasing its lock (csdfs_meta_commit_group).
	 * Until then a crash undoes the commit, whole: LMDB stays consistent.
	 */
	rc = mdb_env_open(meta->env, dir,
			  MDB_NOLOCK | MDB_NOTLS | MDB_NORDAHEAD | MDB_NOMETASYNC,
			  0600);
	if (rc) {
		rc = mdb_err(rc);
		goto out_close;
	}
	/* A data file shorter than the pages LMDB says it holds would fault
	 * (SIGBUS) on first access: refuse it as corrupt instead. */
	if (!create) {
		MDB_envinfo info;
		MDB_stat mst;

		if (mdb_env_info(meta->env, &info) || mdb_env_stat(meta->env, &mst) ||
		    stat(datafile, &st) ||
		    (uint64_t)st.st_size < (uint64_t)(info.me_last_pgno + 1) * mst.ms_psize) {
			rc = -EUCLEAN;
			goto out_close;
		}
	}
	rc = open_dbis(meta, create);
	if (rc)
		goto out_close;
	*out = meta;
	return 0;

out_close:
	mdb_env_close(meta->env);
out_free:
	free(meta);
	return rc;
}

void csdfs_meta_close(struct csdfs_meta *meta)
{
	if (!meta)
		return;
	mdb_env_close(meta->env);
	free(meta);
}

void csdfs_meta_release_pages(struct csdfs_meta *meta)
{
	MDB_envinfo info;

	/* LMDB maps its file read-only and shared: dropping our page-table
	 * entries frees nothing the file does not hold, and the next access
	 * maps the page again from the page cache (a minor fault). */
	if (!mdb_env_info(meta->env, &info) && info.me_mapaddr)
		madvise(info.me_mapaddr, info.me_mapsize, MADV_DONTNEED);
}

uint64_t csdfs_meta_file_bytes(struct csdfs_meta *meta)
{
	MDB_envinfo info;
	MDB_stat st;

	if (mdb_env_info(meta->env, &info) || mdb_env_stat(meta->env, &st))
		return 0;
	return (uint64_t)(info.me_last_pgno + 1) * st.ms_psize;
}

int csdfs_meta_begin(struct csdfs_meta *meta, struct csdfs_txn *parent,
		     struct csdfs_txn **out)
{
	struct csdfs_txn *t = malloc(sizeof(*t));
	int rc;

	if (!t)
		return -ENOMEM;
	t->meta = meta;
	t->top = !parent;
	rc = mdb_txn_begin(meta->env, parent ? parent->txn : NULL, 0, &t->txn);
	if (rc) {
		free(t);
		return mdb_err(rc);
	}
	*out = t;
	return 0;
}

int csdfs_meta_commit_group(struct csdfs_txn *txn)
{
	int rc = mdb_txn_commit(txn->txn);

	free(txn);
	return mdb_err(rc);
}

int csdfs_meta_sync(struct csdfs_meta *meta)
{
	return mdb_err(mdb_env_sync(meta->env, 1));
}

int csdfs_meta_commit(struct csdfs_txn *txn)
{
	struct csdfs_meta *meta = txn->meta;
	bool top = txn->top;
	int rc = csdfs_meta_commit_group(txn);

	return !rc && top ? csdfs_meta_sync(meta) : rc;
}

void csdfs_meta_abort(struct csdfs_txn *txn)
{
	if (!txn)
		return;
	mdb_txn_abort(txn->txn);
	free(txn);
}

int csdfs_meta_get(struct csdfs_txn *txn, enum csdfs_db db, const void *key,
		   size_t klen, struct csdfs_val *val)
{
	MDB_val k = { klen, (void *)key }, v;
	int rc = mdb_get(txn->txn, txn->meta->dbi[db], &k, &v);

	if (rc)
		return mdb_err(rc);
	val->data = v.mv_data;
	val->len = v.mv_size;
	return 0;
}

int csdfs_meta_put(struct csdfs_txn *txn, enum csdfs_db db, const void *key,
		   size_t klen, const void *val, size_t vlen, unsigned flags)
{
	MDB_val k = { klen, (void *)key }, v = { vlen, (void *)val };

	return mdb_err(mdb_put(txn->txn, txn->meta->dbi[db], &k, &v,
			       (flags & CSDFS_PUT_NOOVERWRITE) ?
			       MDB_NOOVERWRITE : 0));
}

int csdfs_meta_del(struct csdfs_txn *txn, enum csdfs_db db, const void *key,
		   size_t klen)
{
	MDB_val k = { klen, (void *)key };

	return mdb_err(mdb_del(txn->txn, txn->meta->dbi[db], &k, NULL));
}

int csdfs_cursor_open(struct csdfs_txn *txn, enum csdfs_db db,
		      struct csdfs_cursor **out)
{
	struct csdfs_cursor *c = malloc(sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	rc = mdb_cursor_open(txn->txn, txn->meta->dbi[db], &c->cur);
	if (rc) {
		free(c);
		return mdb_err(rc);
	}
	*out = c;
	return 0;
}

void csdfs_cursor_close(struct csdfs_cursor *cur)
{
	if (!cur)
		return;
	mdb_cursor_close(cur->cur);
	free(cur);
}

static int cursor_op(struct csdfs_cursor *cur, MDB_val *k, struct csdfs_val *ko,
		     struct csdfs_val *vo, MDB_cursor_op op)
{
	MDB_val v;
	int rc = mdb_cursor_get(cur->cur, k, &v, op);

	if (rc)
		return mdb_err(rc);
	if (ko) {
		ko->data = k->mv_data;
		ko->len = k->mv_size;
	}
	if (vo) {
		vo->data = v.mv_data;
		vo->len = v.mv_size;
	}
	return 0;
}

int csdfs_cursor_seek(struct csdfs_cursor *cur, const void *key, size_t klen,
		      struct csdfs_val *k, struct csdfs_val *v)
{
	MDB_val mk = { klen, (void *)key };

	return cursor_op(cur, &mk, k, v, MDB_SET_RANGE);
}

int csdfs_cursor_next(struct csdfs_cursor *cur, struct csdfs_val *k,
		      struct csdfs_val *v)
{
	MDB_val mk;

	return cursor_op(cur, &mk, k, v, MDB_NEXT);
}

int csdfs_cursor_prev(struct csdfs_cursor *cur, struct csdfs_val *k,
		      struct csdfs_val *v)
{
	MDB_val mk;

	return cursor_op(cur, &mk, k, v, MDB_PREV);
}

int csdfs_cursor_first(struct csdfs_cursor *cur, struct csdfs_val *k,
		       struct csdfs_val *v)
{
	MDB_val mk;

	return cursor_op(cur, &mk, k, v, MDB_FIRST);
}

int csdfs_cursor_last(struct csdfs_cursor *cur, struct csdfs_val *k,
		      struct csdfs_val *v)
{
	MDB_val mk;

	return cursor_op(cur, &mk, k, v, MDB_LAST);
}

int csdfs_cursor_del(struct csdfs_cursor *cur)
{
	return mdb_err(mdb_cursor_del(cur->cur, 0));
}
