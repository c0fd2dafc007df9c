/* SPDX-License-Identifier: MIT */
/*
 * Inodes: the LMDB record helpers and the in-memory table of inodes the
 * kernel (or an operation) holds references to. An inode whose link count
 * fell to zero is an orphan: it lives on while referenced and is destroyed
 * at its last forget, or at the next mount after a crash.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "csdfs/log.h"
#include "vol.h"

int csdfs_irec_load(struct csdfs_txn *txn, uint64_t ino,
		    struct csdfs_inode_disk *rec)
{
	struct csdfs_val v;
	uint8_t key[8];
	int rc;

	csdfs_be64_put(key, ino);
	rc = csdfs_meta_get(txn, CSDFS_DB_INODES, key, 8, &v);
	if (rc)
		return rc;
	if (v.len != sizeof(*rec))
		return -EUCLEAN;
	memcpy(rec, v.data, sizeof(*rec));
	return 0;
}

int csdfs_irec_store(struct csdfs_txn *txn, uint64_t ino,
		     const struct csdfs_inode_disk *rec)
{
	struct csdfs_inode_disk old;
	uint8_t key[8];
	int rc;

	/* Every store carries its difference up the directory roll-ups. */
	rc = csdfs_irec_load(txn, ino, &old);
	if (rc && rc != -ENOENT)
		return rc;
	rc = csdfs_rollup_on_store(txn, ino, rc ? NULL : &old, rec);
	if (rc)
		return rc;
	csdfs_be64_put(key, ino);
	return csdfs_meta_put(txn, CSDFS_DB_INODES, key, 8, rec, sizeof(*rec), 0);
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

void csdfs_itable_init(struct csdfs_itable *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
}

void csdfs_itable_release(struct csdfs_itable *t)
{
	for (size_t i = 0; i < CSDFS_ITABLE_BUCKETS; i++) {
		struct csdfs_inode *in = t->buckets[i], *next;

		for (; in; in = next) {
			next = in->next;
			pthread_rwlock_destroy(&in->io_lock);
			free(in);
		}
		t->buckets[i] = NULL;
	}
	pthread_mutex_destroy(&t->lock);
}

static size_t bucket_of(uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) >> 52) % CSDFS_ITABLE_BUCKETS;
}

static struct csdfs_inode *find_locked(struct csdfs_itable *t, uint64_t ino)
{
	struct csdfs_inode *in = t->buckets[bucket_of(ino)];

	while (in && in->ino != ino)
		in = in->next;
	return in;
}

/* Get (creating if needed) the in-memory inode with one operation ref. */
struct csdfs_inode *csdfs_inode_get(struct csdfs_vol *vol, uint64_t ino)
{
	struct csdfs_itable *t = &vol->itable;
	struct csdfs_inode *in;

	pthread_mutex_lock(&t->lock);
	in = find_locked(t, ino);
	if (!in) {
		in = calloc(1, sizeof(*in));
		if (!in) {
			pthread_mutex_unlock(&t->lock);
			return NULL;
		}
		in->ino = ino;
		in->store_gen = __atomic_add_fetch(&vol->store_seq, 1, __ATOMIC_RELAXED);
		/* Unknown history: assume it changed in the open group, so a
		 * first fsync commits rather than miss a change. */
		in->dirty_gen = __atomic_load_n(&vol->gen, __ATOMIC_RELAXED);
		pthread_rwlock_init(&in->io_lock, NULL);
		in->next = t->buckets[bucket_of(ino)];
		t->buckets[bucket_of(ino)] = in;
	}
	in->refs++;
	pthread_mutex_unlock(&t->lock);
	return in;
}

/* Remove @in from the table if nothing references it; @return true if the
 * entry was removed. Called with the table lock held. */
static bool unlink_if_unused(struct csdfs_itable *t, struct csdfs_inode *in)
{
	struct csdfs_inode **pp = &t->buckets[bucket_of(in->ino)];

	if (in->refs || in->nlookup)
		return false;
	while (*pp != in)
		pp = &(*pp)->next;
	*pp = in->next;
	return true;
}

/* Destroy @ino if it is an orphan and nothing references it any more. */
static void maybe_destroy(struct csdfs_vol *vol, uint64_t ino)
{
	struct csdfs_inode_disk rec;
	struct csdfs_op op;
	int rc;

	rc = csdfs_op_begin(vol, &op);
	if (rc)
		return;
	rc = csdfs_irec_load(op.txn, ino, &rec);
	if (!rc && rec.nlink == 0 && !csdfs_inode_in_use(vol, ino))
		rc = csdfs_inode_destroy(&op, ino);
	else if (rc == -ENOENT)
		rc = 0;
	rc = csdfs_op_end(&op, rc);
	if (rc)
		csdfs_log(LOG_ERR, "cannot free unlinked inode %llu: %s",
			  (unsigned long long)ino, strerror(-rc));
}

static void drop(struct csdfs_vol *vol, struct csdfs_inode *in, uint64_t nlookup,
		 int refs)
{
	struct csdfs_itable *t = &vol->itable;
	uint64_t ino = in->ino;
	bool gone;

	pthread_mutex_lock(&t->lock);
	in->nlookup -= nlookup < in->nlookup ? nlookup : in->nlookup;
	in->refs -= refs;
	gone = unlink_if_unused(t, in);
	pthread_mutex_unlock(&t->lock);
	if (!gone)
		return;
	pthread_rwlock_destroy(&in->io_lock);
	free(in);
	if (ino != CSDFS_ROOT_INO && !vol->read_only)
		maybe_destroy(vol, ino);
}

void csdfs_inode_put(struct csdfs_vol *vol, struct csdfs_inode *in)
{
	if (in)
		drop(vol, in, 0, 1);
}

void csdfs_fs_ref(struct csdfs_vol *vol, uint64_t ino)
{
	struct csdfs_itable *t = &vol->itable;
	struct csdfs_inode *in = csdfs_inode_get(vol, ino);

	if (!in)
		return;
	pthread_mutex_lock(&t->lock);
	in->nlookup++;
	in->refs--;
	pthread_mutex_unlock(&t->lock);
}

void csdfs_fs_forget(struct csdfs_vol *vol, uint64_t ino, uint64_t n)
{
	struct csdfs_itable *t = &vol->itable;
	struct csdfs_inode *in;

	pthread_mutex_lock(&t->lock);
	in = find_locked(t, ino);
	if (in)
		in->refs++;
	pthread_mutex_unlock(&t->lock);
	if (in)
		drop(vol, in, n, 1);
}

void csdfs_fs_note_writer(struct csdfs_vol *vol, uint64_t ino)
{
	struct csdfs_inode *in = csdfs_inode_get(vol, ino);

	if (!in)
		return;
	/* Exclusive: waits for reads and for page-cache stores of this file
	 * (csdfs_fs_if_unchanged), and renews its store generation, so a
	 * store of bytes read before cannot reach the kernel after. */
	csdfs_inode_lock_exclusive(vol, in);
	pthread_mutex_lock(&vol->itable.lock);
	in->had_writer = true;
	pthread_mutex_unlock(&vol->itable.lock);
	pthread_rwlock_unlock(&in->io_lock);
	csdfs_inode_put(vol, in);
}

void csdfs_inode_lock_exclusive(struct csdfs_vol *vol, struct csdfs_inode *in)
{
	pthread_rwlock_wrlock(&in->io_lock);
	__atomic_store_n(&in->store_gen,
			 __atomic_add_fetch(&vol->store_seq, 1, __ATOMIC_RELAXED),
			 __ATOMIC_RELAXED);
}

int csdfs_fs_if_unchanged(struct csdfs_vol *vol, uint64_t ino, uint64_t gen,
			  int (*fn)(void *arg), void *arg)
{
	struct csdfs_inode *in;
	bool writer;
	int rc = -ESTALE;

	pthread_mutex_lock(&vol->itable.lock);
	in = find_locked(&vol->itable, ino);
	if (in)
		in->refs++;
	pthread_mutex_unlock(&vol->itable.lock);
	if (!in)
		return -ESTALE;     /* forgotten: its pages went with it */
	pthread_rwlock_rdlock(&in->io_lock);
	pthread_mutex_lock(&vol->itable.lock);
	writer = in->had_writer;
	pthread_mutex_unlock(&vol->itable.lock);
	if (!writer && __atomic_load_n(&in->store_gen, __ATOMIC_RELAXED) == gen)
		rc = fn(arg);
	pthread_rwlock_unlock(&in->io_lock);
	csdfs_inode_put(vol, in);
	return rc;
}

bool csdfs_fs_had_writer(struct csdfs_vol *vol, uint64_t ino)
{
	struct csdfs_inode *in;
	bool r;

	pthread_mutex_lock(&vol->itable.lock);
	in = find_locked(&vol->itable, ino);
	r = !in || in->had_writer;   /* unknown: assume the worst */
	pthread_mutex_unlock(&vol->itable.lock);
	return r;
}

void csdfs_fs_note_shown_blocks(struct csdfs_vol *vol, uint64_t ino, uint64_t blocks)
{
	struct csdfs_inode *in;

	pthread_mutex_lock(&vol->itable.lock);
	in = find_locked(&vol->itable, ino);
	if (in) {
		in->shown_blocks = blocks;
		in->blocks_shown = true;
	}
	pthread_mutex_unlock(&vol->itable.lock);
}

void csdfs_fs_forget_shown_blocks(struct csdfs_vol *vol, uint64_t ino, uint64_t blocks)
{
	struct csdfs_inode *in;

	pthread_mutex_lock(&vol->itable.lock);
	in = find_locked(&vol->itable, ino);
	if (in && in->shown_blocks != blocks)
		in->blocks_shown = false;
	pthread_mutex_unlock(&vol->itable.lock);
}

bool csdfs_fs_blocks_changed(struct csdfs_vol *vol, uint64_t ino)
{
	struct csdfs_inode *in;
	struct stat st;
	bool known = false;
	uint64_t shown = 0;

	pthread_mutex_lock(&vol->itable.lock);
	in = find_locked(&vol->itable, ino);
	if (in && in->blocks_shown) {
		known = true;
		shown = in->shown_blocks;
	}
	pthread_mutex_unlock(&vol->itable.lock);
	if (!known || csdfs_fs_getattr(vol, ino, &st))
		return true;
	return (uint64_t)st.st_blocks != shown;
}

void csdfs_inode_touch(struct csdfs_vol *vol, uint64_t ino, uint64_t gen)
{
	struct csdfs_inode *in;

	pthread_mutex_lock(&vol->itable.lock);
	in = find_locked(&vol->itable, ino);
	if (in)
		in->dirty_gen = gen;
	pthread_mutex_unlock(&vol->itable.lock);
}

uint64_t csdfs_inode_dirty_gen(struct csdfs_vol *vol, uint64_t ino)
{
	struct csdfs_inode *in;
	uint64_t gen = UINT64_MAX;

	pthread_mutex_lock(&vol->itable.lock);
	in = find_locked(&vol->itable, ino);
	if (in)
		gen = in->dirty_gen;
	pthread_mutex_unlock(&vol->itable.lock);
	return gen;
}

bool csdfs_inode_in_use(struct csdfs_vol *vol, uint64_t ino)
{
	struct csdfs_itable *t = &vol->itable;
	struct csdfs_inode *in;
	bool used;

	pthread_mutex_lock(&t->lock);
	in = find_locked(t, ino);
	used = in && (in->nlookup || in->refs);
	pthread_mutex_unlock(&t->lock);
	return used;
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
		rc = csdfs_xattr_drop_all(op, ino);
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
