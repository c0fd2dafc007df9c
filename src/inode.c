/* SPDX-License-Identifier: MIT */
/*
 * The in-memory inode table: the inodes the kernel (or an operation) holds
 * references to, with their I/O locks, the group that last changed each
 * (for fsync) and what the kernel was last told of them. An inode whose
 * link count fell to zero is an orphan: it lives on while referenced and
 * is destroyed at its last forget (orphan.c does the freeing), or at the next mount after a
 * crash. The records themselves are irec.c's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "csdfs/log.h"
#include "vol.h"





int csdfs_itable_init(struct csdfs_itable *t)
{
	memset(t, 0, sizeof(*t));
	t->shift = CSDFS_ITABLE_SHIFT_MIN;
	t->buckets = calloc((size_t)1 << t->shift, sizeof(*t->buckets));
	if (!t->buckets)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	return 0;
}

void csdfs_itable_release(struct csdfs_itable *t)
{
	if (!t->buckets)
		return;
	for (size_t i = 0; i < (size_t)1 << t->shift; i++) {
		struct csdfs_inode *in = t->buckets[i], *next;

		for (; in; in = next) {
			next = in->next;
			pthread_rwlock_destroy(&in->io_lock);
			free(in);
		}
	}
	free(t->buckets);
	t->buckets = NULL;
	pthread_mutex_destroy(&t->lock);
}

static size_t bucket_of(const struct csdfs_itable *t, uint64_t ino)
{
	return (size_t)((ino * 0x9e3779b97f4a7c15ull) >> (64 - t->shift));
}

/* Double the buckets (table lock held): chains stay about two long however
 * many inodes the kernel holds. One rehash of n inodes per n inserted;
 * without memory for it the table keeps working with longer chains. */
static void grow_locked(struct csdfs_itable *t)
{
	size_t old = (size_t)1 << t->shift;
	struct csdfs_inode **nb = calloc(old * 2, sizeof(*nb));

	if (!nb)
		return;
	t->shift++;
	for (size_t i = 0; i < old; i++) {
		struct csdfs_inode *in = t->buckets[i], *next;

		for (; in; in = next) {
			size_t b = bucket_of(t, in->ino);

			next = in->next;
			in->next = nb[b];
			nb[b] = in;
		}
	}
	free(t->buckets);
	t->buckets = nb;
}

static struct csdfs_inode *find_locked(struct csdfs_itable *t, uint64_t ino)
{
	struct csdfs_inode *in = t->buckets[bucket_of(t, ino)];

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
		in->next = t->buckets[bucket_of(t, ino)];
		t->buckets[bucket_of(t, ino)] = in;
		if (++t->count > (size_t)2 << t->shift)
			grow_locked(t);
	}
	in->refs++;
	pthread_mutex_unlock(&t->lock);
	return in;
}

/* Remove @in from the table if nothing references it; @return true if the
 * entry was removed. Called with the table lock held. */
static bool unlink_if_unused(struct csdfs_itable *t, struct csdfs_inode *in)
{
	struct csdfs_inode **pp = &t->buckets[bucket_of(t, in->ino)];

	if (in->refs || in->nlookup)
		return false;
	while (*pp != in)
		pp = &(*pp)->next;
	*pp = in->next;
	t->count--;
	return true;
}


/* Destroy @ino if it is an orphan and nothing references it any more. */
static void orphan_reap(struct csdfs_vol *vol, uint64_t ino)
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
		orphan_reap(vol, ino);
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

void csdfs_op_touch(struct csdfs_op *op, uint64_t ino)
{
	struct csdfs_vol *vol = op->vol;
	struct csdfs_inode *in;

	/* An inode nobody references yet starts with dirty_gen = the open
	 * generation (see csdfs_inode_get), so skipping it here is safe. */
	pthread_mutex_lock(&vol->itable.lock);
	in = find_locked(&vol->itable, ino);
	if (in)
		in->dirty_gen = vol->gen;
	pthread_mutex_unlock(&vol->itable.lock);
}

/* The group that last changed @ino; UINT64_MAX when the inode is not in
 * memory: unknown, so assume not yet durable. */
static uint64_t dirty_gen(struct csdfs_vol *vol, uint64_t ino)
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

int csdfs_vol_commit_for(struct csdfs_vol *vol, uint64_t ino)
{
	return csdfs_vol_commit_upto(vol, dirty_gen(vol, ino));
}

int csdfs_fs_fsync(struct csdfs_vol *vol, uint64_t ino)
{
	return csdfs_vol_commit_for(vol, ino);
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

/* ---- operations on one inode -------------------------------------------- */

int csdfs_op_begin_irec(struct csdfs_vol *vol, struct csdfs_op *op, bool writable,
			uint64_t ino, struct csdfs_inode_disk *rec)
{
	int rc = writable ? csdfs_op_begin(vol, op) : csdfs_op_begin_read(vol, op);

	if (rc)
		return rc;
	rc = csdfs_irec_load(op->txn, ino, rec);
	return rc ? csdfs_op_end(op, rc) : 0;
}

int csdfs_op_end_irec(struct csdfs_op *op, uint64_t ino,
		      const struct csdfs_inode_disk *rec, int rc)
{
	if (!rc)
		rc = csdfs_irec_store(op->txn, ino, rec);
	if (!rc)
		csdfs_op_touch(op, ino);
	return csdfs_op_end(op, rc);
}

/* The attributes the kernel is told (a read operation of its own). */
int csdfs_fs_getattr(struct csdfs_vol *vol, uint64_t ino, struct stat *st)
{
	struct csdfs_inode_disk rec;
	struct csdfs_op op;
	int rc;

	rc = csdfs_op_begin_irec(vol, &op, false, ino, &rec);
	if (rc)
		return rc;
	csdfs_irec_to_stat(ino, &rec, st);
	return csdfs_op_end(&op, 0);
}
