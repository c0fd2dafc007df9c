/* SPDX-License-Identifier: MIT */
/*
 * The metadata store: a thin, typed-agnostic layer over LMDB. Callers see
 * byte keys and values, -errno results and nothing of <lmdb.h>. The schema
 * (what each sub-database holds) is documented once, in meta_lmdb.c.
 *
 * Transactions: the daemon keeps one long-lived top-level write transaction
 * (the "group"); each filesystem operation runs in a nested transaction of it
 * so a failing operation is rolled back alone, and a group commit makes all
 * operations since the previous one durable at once. The environment is
 * opened with MDB_NOLOCK: the caller serialises every use of a transaction
 * with its own lock (csdfs_vol.lock), and a flock on the container keeps
 * other processes out.
 *
 * Values returned by get/cursor calls point into the map and stay valid only
 * until the next write in the same transaction or its end: copy them.
 */
#ifndef CSDFS_META_H
#define CSDFS_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum csdfs_db {
	CSDFS_DB_META,
	CSDFS_DB_INODES,
	CSDFS_DB_DIRENTS,
	CSDFS_DB_CHUNKS,
	CSDFS_DB_PHYS,
	CSDFS_DB_FREE,
	CSDFS_DB_XATTRS,
	CSDFS_DB_SYMLINKS,
	CSDFS_DB_ORPHANS,
	CSDFS_DB_ROLLUP,
	CSDFS_DB_CODECMIX,
	CSDFS_DB_COUNT
};

struct csdfs_io;
struct csdfs_meta;
struct csdfs_pool;
struct csdfs_txn;
struct csdfs_cursor;

struct csdfs_val {
	const void *data;
	size_t len;
};

#define CSDFS_PUT_NOOVERWRITE 0x1u

/*
 * csdfs_meta_open - open (or with @create, create) the environment in the
 * directory @dir, reserving @mapsize bytes of address space. Every file
 * I/O the layer makes itself goes through a struct csdfs_io (io.h): the
 * durability record's (role CSDFS_IO_META_RECORD, open as long as @out),
 * the rollback's reads and writes of data.mdb at open and data.mdb's sync
 * (both CSDFS_IO_META_DATA, the latter on LMDB's own descriptor, open as
 * long as @out). @io_hook, if not NULL, is called as @io_hook(io,
 * @io_hook_arg) on each right after it is opened (the same contract as
 * struct csdfs_mount_opts.io_hook: e.g. csdfs_io_fault_install), from this
 * thread, before any I/O through it; a non-zero return fails the open
 * with it. The pages LMDB writes itself do not pass the seam.
 * @return 0, -ENOENT if it does not exist, -EUCLEAN if it is not a valid
 * LMDB environment or lacks csdfs's sub-databases, the hook's error,
 * -errno otherwise (-EIO and the like from a failed read, write or sync).
 */
int csdfs_meta_open(const char *dir, bool create, uint64_t mapsize,
		    int (*io_hook)(struct csdfs_io *io, void *arg), void *io_hook_arg,
		    struct csdfs_meta **out);
void csdfs_meta_close(struct csdfs_meta *meta);

/* Stop counting the environment's mapped file pages in this process's
 * resident memory (they stay in the page cache). Not beside a write to
 * the environment's map: call with the volume lock held. */
void csdfs_meta_release_pages(struct csdfs_meta *meta);

/* Bytes used by the environment's data file (for the volume status). */
uint64_t csdfs_meta_file_bytes(struct csdfs_meta *meta);

/*
 * csdfs_meta_begin - begin a write transaction, nested in @parent if given.
 * A nested one's abort (or a commit after LMDB failed one of its changes)
 * may rebuild its ancestors' state from their redo: hold no cursor of an
 * ancestor across it. If that rebuild fails, the top-level transaction is
 * broken (csdfs_meta_broken): it can only be aborted, and every begin
 * nested in it fails.
 * @return 0, -ENOMEM, -EUCLEAN, the broken transaction's error.
 */
int csdfs_meta_begin(struct csdfs_meta *meta, struct csdfs_txn *parent,
		     struct csdfs_txn **out);
/* 0, or the error that broke the top-level transaction of @txn. */
int csdfs_meta_broken(struct csdfs_txn *txn);
/* How many times a top-level transaction was rebuilt (for tests). */
uint64_t csdfs_meta_rebuilds(struct csdfs_meta *meta);

/*
 * csdfs_meta_commit - commit @txn (always ends it). A top-level commit is
 * synchronous: data pages and meta page are on stable storage on return.
 * @return 0, -ENOSPC (map full), -EIO.
 */
int csdfs_meta_commit(struct csdfs_txn *txn);
/*
 * csdfs_meta_commit_group - commit a top-level @txn (always ends it),
 * writing its pages without syncing them: the commit is durable once
 * csdfs_meta_sync() returned 0, and a crash before that undoes it whole
 * (the next open rolls it back). Lets the caller sync without holding its
 * locks. If the commit before is not yet durable, it is made so first.
 * @return 0, -ENOSPC (map full), -EIO.
 */
int csdfs_meta_commit_group(struct csdfs_txn *txn);
/* Make every commit so far durable and record it so. Safe beside an open
 * transaction and from another thread than the one committing. */
int csdfs_meta_sync(struct csdfs_meta *meta);
/* The same, with the companion's sync and data.mdb's side by side on
 * @pool (NULL: one after the other). */
int csdfs_meta_sync_on(struct csdfs_meta *meta, struct csdfs_pool *pool);
/*
 * csdfs_meta_set_companion - what else a commit needs durable before the
 * durability record may name it (the volume: its container, holding the
 * data the commit maps). Every sync that is to record a commit runs
 * @fn(@arg) beside data.mdb's sync, and records nothing if it fails. So a
 * commit may map data whose write is not yet durable, as long as the
 * write completed before the commit. Called with no transaction of this
 * thread open; @fn must not call into @meta.
 */
void csdfs_meta_set_companion(struct csdfs_meta *meta, int (*fn)(void *arg), void *arg);
void csdfs_meta_abort(struct csdfs_txn *txn);

/*
 * Redo (the volume's journal): with a limit set, every top-level
 * transaction begun after it keeps its committed changes, in order, as
 * bytes csdfs_meta_replay() applies to the snapshot the transaction began
 * on. csdfs_meta_redo() gives them (valid until the next change in @top);
 * -EOVERFLOW when they outgrew @limit bytes (or no limit is set).
 */
void csdfs_meta_set_redo(struct csdfs_meta *meta, size_t limit);
int csdfs_meta_redo(struct csdfs_txn *top, const void **buf, size_t *len);
/* @return 0, -EUCLEAN (malformed, or a change that does not apply). */
int csdfs_meta_replay(struct csdfs_txn *txn, const void *buf, size_t len);
/* Call @fn for each change of @buf in order (a delete's @v is empty);
 * stops at its first non-zero return. @return that, 0, -EUCLEAN. */
int csdfs_meta_redo_each(const void *buf, size_t len,
			 int (*fn)(void *arg, bool put, enum csdfs_db db,
				   const struct csdfs_val *k, const struct csdfs_val *v),
			 void *arg);
/* The id of the last commit recorded durable. */
uint64_t csdfs_meta_durable_id(struct csdfs_meta *meta);

/* @return 0, -ENOENT if absent. */
int csdfs_meta_get(struct csdfs_txn *txn, enum csdfs_db db, const void *key,
		   size_t klen, struct csdfs_val *val);
/* @return 0, -EEXIST (with CSDFS_PUT_NOOVERWRITE), -ENOSPC. */
int csdfs_meta_put(struct csdfs_txn *txn, enum csdfs_db db, const void *key,
		   size_t klen, const void *val, size_t vlen, unsigned flags);
/* @return 0, -ENOENT if absent. */
int csdfs_meta_del(struct csdfs_txn *txn, enum csdfs_db db, const void *key,
		   size_t klen);

/* Cursors live inside their transaction; close before it ends. */
int csdfs_cursor_open(struct csdfs_txn *txn, enum csdfs_db db,
		      struct csdfs_cursor **out);
void csdfs_cursor_close(struct csdfs_cursor *cur);
/* Position at the first key >= @key. @return 0 or -ENOENT (none). */
int csdfs_cursor_seek(struct csdfs_cursor *cur, const void *key, size_t klen,
		      struct csdfs_val *k, struct csdfs_val *v);
/* Step / jump: one call, four moves. @return 0 or -ENOENT at the end. */
enum csdfs_cursor_move {
	CSDFS_CURSOR_NEXT,
	CSDFS_CURSOR_PREV,
	CSDFS_CURSOR_FIRST,
	CSDFS_CURSOR_LAST,
};
int csdfs_cursor_step(struct csdfs_cursor *cur, enum csdfs_cursor_move how,
		      struct csdfs_val *k, struct csdfs_val *v);
#define csdfs_cursor_next(cur, k, v)  csdfs_cursor_step(cur, CSDFS_CURSOR_NEXT, k, v)
#define csdfs_cursor_prev(cur, k, v)  csdfs_cursor_step(cur, CSDFS_CURSOR_PREV, k, v)
#define csdfs_cursor_first(cur, k, v) csdfs_cursor_step(cur, CSDFS_CURSOR_FIRST, k, v)
#define csdfs_cursor_last(cur, k, v)  csdfs_cursor_step(cur, CSDFS_CURSOR_LAST, k, v)
/* Delete the current item; a following cursor_next yields the item after it. */
int csdfs_cursor_del(struct csdfs_cursor *cur);

/* Big-endian key helpers (byte order = numeric order). */
static inline void csdfs_be64_put(void *p, uint64_t v)
{
	unsigned char *b = p;

	for (int i = 7; i >= 0; i--, v >>= 8)
		b[i] = (unsigned char)v;
}

static inline uint64_t csdfs_be64_get(const void *p)
{
	const unsigned char *b = p;
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = (v << 8) | b[i];
	return v;
}

#endif
