/* SPDX-License-Identifier: MIT */
/*
 * Operations and group commit.
 *
 * An operation is a nested transaction inside the open group (a savepoint
 * in the group's LMDB transaction, see meta_lmdb.c SAVEPOINTS); what it
 * changes in memory (counters, freed blocks, codec mix) is applied only if
 * it commits. All operations since the last commit live in one top-level
 * LMDB write transaction. A commit writes LMDB's pages into the page cache
 * (every chunk they map was written to the container before its operation
 * ended), then fdatasyncs the container and data.mdb side by side, and only
 * then records the commit as durable (csdfs_meta_sync_on, the container
 * being the metadata layer's companion): a commit not recorded is rolled
 * back by the next open, so a durable mapping never points at unwritten
 * bytes. Blocks freed by the group become allocatable only after that
 * commit is durable. fsync waits for the group holding the inode's last
 * change; callers that queue behind a running commit find their change
 * already durable. The volume lock is held through none of the syncs (see
 * group_commit): only LMDB's commit into the page cache runs under it.
 *
 * The commit thread commits every commit_ms (or sooner, when a group grows
 * large), and between commits trims malloc's arenas, fits the chunk
 * cache's budget to what the metadata's mapped pages leave of cache_size,
 * and runs a bounded compaction pass when enough space is dead.
 */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "csdfs/log.h"
#include "csdfs/pool.h"
#include "vol.h"

#define GROUP_OPS_MAX 8192u
/* LMDB keeps every page a group dirties in memory until it commits:
 * commit after this many chunk changes (writers commit themselves at
 * twice as many, when the commit thread falls behind) so the daemon's
 * memory stays bounded whatever the write rate. A smaller group writes
 * the same hot pages (inode records, the roll-ups, upper B-tree levels)
 * more often: under 16 KiB random page writes with a redo log's fsyncs
 * beside them, 2048 took 0.95 data.mdb writes per page write, 3072 0.71,
 * 4096 0.54 and 8192 0.19. tools/bench-memory (64 MiB cache, bound 128
 * MiB) peaked at 109-111 MiB with 2048, 119-124 with 3072 and 4096; 8192
 * went to 132 MiB under random 4 KiB overwrites. */
#define GROUP_CHUNKS_MAX 4096u
#define PUNCH_MIN_BLOCKS 256u   /* 1 MiB */

int64_t csdfs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- operations ---------------------------------------------------------- */

static int group_commit(struct csdfs_vol *vol, uint64_t min_chunks);
static int fail_locked(struct csdfs_vol *vol, int rc);

int csdfs_op_begin(struct csdfs_vol *vol, struct csdfs_op *op)
{
	int rc;

	memset(op, 0, sizeof(*op));
	op->vol = vol;
	op->writable = true;
	op->inflight_slot = -1;
	pthread_mutex_lock(&vol->lock);
	if (vol->failed || vol->read_only) {
		rc = vol->failed ? vol->failed : -EROFS;
		pthread_mutex_unlock(&vol->lock);
		return rc;
	}
	rc = csdfs_meta_begin(vol->meta, vol->group, &op->txn);
	if (rc) {
		pthread_mutex_unlock(&vol->lock);
		return rc;
	}
	return 0;
}

int csdfs_op_begin_read(struct csdfs_vol *vol, struct csdfs_op *op)
{
	memset(op, 0, sizeof(*op));
	op->vol = vol;
	op->inflight_slot = -1;
	pthread_mutex_lock(&vol->lock);
	if (vol->failed) {
		int rc = vol->failed;

		pthread_mutex_unlock(&vol->lock);
		return rc;
	}
	op->txn = vol->group;
	return 0;
}



int csdfs_op_note_freed(struct csdfs_op *op, uint64_t start, uint64_t count)
{
	if (op->nfreed && op->freed[op->nfreed - 1].start +
	    op->freed[op->nfreed - 1].count == start) {
		op->freed[op->nfreed - 1].count += count;
		return 0;
	}
	if (op->nfreed == op->capfreed) {
		size_t cap = op->capfreed ? op->capfreed * 2 : 16;
		struct csdfs_range *r = realloc(op->freed, cap * sizeof(*r));

		if (!r)
			return -ENOMEM;
		op->freed = r;
		op->capfreed = cap;
	}
	op->freed[op->nfreed].start = start;
	op->freed[op->nfreed].count = count;
	op->nfreed++;
	return 0;
}

int csdfs_op_end(struct csdfs_op *op, int rc)
{
	struct csdfs_vol *vol = op->vol;
	bool backpressure = false;

	if (op->writable) {
		if (!rc)
			rc = csdfs_rollup_flush(op);
		if (!rc) {
			rc = csdfs_meta_commit(op->txn);
		} else {
			csdfs_meta_abort(op->txn);
		}
		/* The operation's changes could not be undone: the group
		 * cannot commit, so the volume fails as if its commit had. */
		if (vol->group && csdfs_meta_broken(vol->group))
			fail_locked(vol, csdfs_meta_broken(vol->group));
		if (!rc) {
			csdfs_counters_add(&vol->counters, &op->delta);
			for (size_t i = 0; i < op->nfreed && !rc; i++)
				rc = csdfs_alloc_quarantine(&vol->alloc,
							    op->freed[i].start,
							    op->freed[i].count);
			vol->dirty = true;
			vol->group_chunks += op->chunk_changes;
			if (++vol->group_ops >= GROUP_OPS_MAX ||
			    vol->group_chunks >= GROUP_CHUNKS_MAX)
				pthread_cond_signal(&vol->commit_cv);
			/* Backpressure when writers outrun the commit thread. */
			backpressure = vol->group_chunks >= 2 * GROUP_CHUNKS_MAX && !rc;
		}
		if (op->inflight_slot >= 0)
			csdfs_alloc_inflight_del(&vol->alloc, op->inflight_slot);
	}
	pthread_mutex_unlock(&vol->lock);
	free(op->freed);
	op->freed = NULL;
	free(op->mix);
	op->mix = NULL;
	op->txn = NULL;
	if (backpressure) {
		pthread_mutex_lock(&vol->commit_lock);
		group_commit(vol, 2 * GROUP_CHUNKS_MAX);
		pthread_mutex_unlock(&vol->commit_lock);
	}
	return rc;
}

/* ---- group commit -------------------------------------------------------- */

/* Give freed container ranges back to the host filesystem. */
static int punch_cb(void *ctx, uint64_t start, uint64_t count)
{
	struct csdfs_vol *vol = ctx;
	int rc;

	/* Small runs are reused soon anyway (overwrite churn), and a punch
	 * can cost a synchronous discard on the host: only return runs of
	 * PUNCH_MIN_BLOCKS or more. */
	if (count < PUNCH_MIN_BLOCKS)
		return 0;
	rc = csdfs_io_punch(&vol->io, start * CSDFS_BLOCK_SIZE,
			    count * CSDFS_BLOCK_SIZE);

	if (rc && rc != -EOPNOTSUPP)
		csdfs_log(LOG_WARNING, "cannot punch freed blocks %llu+%llu: %s",
			  (unsigned long long)start, (unsigned long long)count,
			  strerror(-rc));
	return rc;
}

static int reuse_cb(void *ctx, uint64_t start, uint64_t count)
{
	struct csdfs_vol *vol = ctx;

	return csdfs_alloc_reuse(&vol->alloc, start, count,
				 vol->punch ? punch_cb : NULL, vol);
}

/* The in-memory state no longer matches any durable state: refuse
 * everything from now on rather than guess. */
static int fail_locked(struct csdfs_vol *vol, int rc)
{
	if (vol->failed)
		return vol->failed;
	if (vol->group) {
		csdfs_meta_abort(vol->group);
		vol->group = NULL;
	}
	vol->failed = rc == -ENOSPC ? -ENOSPC : -EIO;
	csdfs_log(LOG_CRIT, "metadata commit failed (%s): volume '%s' is now failed; "
		  "remount to recover the last durable state",
		  strerror(-rc), vol->path);
	return vol->failed;
}

/* What a closed group still owes: its generation, durable once LMDB is
 * synced, and the blocks it freed, reusable only then. */
struct closed_group {
	uint64_t gen;              /* 0: nothing was closed */
	struct csdfs_range *freed;
	size_t nfreed;
};

/* The metadata layer's companion: a commit counts only once the data it
 * maps is durable too. */
int csdfs_vol_sync_container(void *arg)
{
	struct csdfs_vol *vol = arg;

	return csdfs_io_sync(&vol->io);
}

/* The in-memory state a commit carries: the counters and the compaction
 * hints changed since the last one (vol->lock held). */
static int store_state_locked(struct csdfs_vol *vol)
{
	int rc = csdfs_chint_store(&vol->chint, vol->group, false);

	return rc ? rc : csdfs_rec_counters_put(vol->group, CSDFS_DB_META, "counters", 8,
						 &vol->counters, 0);
}

/* Close the open group (vol->lock held): LMDB commits with its pages
 * written (not synced; the container neither), and the next group opens.
 * A group closed before and not yet durable is made durable first (by
 * csdfs_meta_commit_group, container included). */
static int close_group_locked(struct csdfs_vol *vol, struct closed_group *cg)
{
	int rc;

	memset(cg, 0, sizeof(*cg));
	if (vol->failed)
		return vol->failed;
	if (!vol->dirty)
		return 0;
	rc = store_state_locked(vol);
	if (!rc) {
		uint64_t before = csdfs_thread_wchar(), after;

		/* Counted into the next commit's counters. */
		rc = csdfs_meta_commit_group(vol->group);
		vol->group = NULL;
		after = csdfs_thread_wchar();
		if (before && after > before)
			vol->counters.meta_bytes_written += after - before;
	}
	if (!rc)
		rc = csdfs_meta_begin(vol->meta, NULL, &vol->group);
	if (rc)
		return fail_locked(vol, rc);
	cg->gen = vol->gen;
	__atomic_add_fetch(&vol->gen, 1, __ATOMIC_RELAXED);  /* read unlocked */
	vol->journal.taken = 0;    /* the new group's redo starts empty */
	vol->dirty = false;
	vol->group_ops = 0;
	vol->group_chunks = 0;
	/* Freed pieces arrive out of order (a chunk's interior, then its
	 * boundary blocks): merge them so whole runs are punched and reused. */
	csdfs_alloc_quarantine_merge(&vol->alloc);
	cg->nfreed = csdfs_alloc_take_quarantine(&vol->alloc, &cg->freed);
	return 0;
}

/* The closed group's LMDB commit is synced (vol->lock held): it is durable,
 * and the blocks it freed can be reused and punched. */
static void group_durable_locked(struct csdfs_vol *vol, struct closed_group *cg)
{
	int rc = 0;

	if (cg->gen > vol->durable_gen)
		vol->durable_gen = cg->gen;
	vol->group_commits++;
	/* Segments of the closed group are void now: they applied to the
	 * commit before it. */
	csdfs_journal_restart(&vol->journal, csdfs_meta_durable_id(vol->meta));
	for (size_t i = 0; i < cg->nfreed && !rc; i++)
		rc = csdfs_freemap_intersect(vol->group, cg->freed[i].start,
					     cg->freed[i].count, reuse_cb, vol);
	free(cg->freed);
	cg->freed = NULL;
	if (rc)
		csdfs_log(LOG_WARNING, "cannot recycle freed blocks: %s", strerror(-rc));
}

int csdfs_vol_commit_locked(struct csdfs_vol *vol)
{
	struct closed_group cg;
	int rc = close_group_locked(vol, &cg);

	if (rc || !cg.gen)
		return rc;
	rc = csdfs_meta_sync(vol->meta);
	if (rc) {
		free(cg.freed);
		return fail_locked(vol, rc);
	}
	group_durable_locked(vol, &cg);
	return 0;
}

/*
 * A group commit that leaves vol->lock free through the slow parts, so
 * reads and writes go on while the disk syncs: LMDB commits under it into
 * the page cache; the container and data.mdb are synced after it is
 * released, side by side on the compression pool, then the record (LMDB's
 * fdatasync under the lock stalled every read and write for about 0.9 ms
 * per commit: 20-26 % of MariaDB's TPS; the container's sync used to come
 * first, alone). Commits are serialised by commit_lock. @min_chunks > 0:
 * commit only if the open group still holds that many chunk changes
 * (backpressure).
 */
static int group_commit(struct csdfs_vol *vol, uint64_t min_chunks)
{
	struct closed_group cg = { 0 };
	int rc = 0;

	pthread_mutex_lock(&vol->lock);
	if (vol->failed || !vol->dirty || vol->group_chunks < min_chunks) {
		rc = vol->failed;
		pthread_mutex_unlock(&vol->lock);
		return rc;
	}
	rc = close_group_locked(vol, &cg);
	/* Until it is durable, the blocks the group freed are in cg alone. */
	vol->closed_unsynced = !rc && cg.gen;
	pthread_mutex_unlock(&vol->lock);
	if (rc || !cg.gen)
		return rc;

	rc = csdfs_meta_sync_on(vol->meta, vol->pool);
	pthread_mutex_lock(&vol->lock);
	vol->closed_unsynced = false;
	if (rc) {
		free(cg.freed);
		rc = fail_locked(vol, rc);
	} else {
		group_durable_locked(vol, &cg);
	}
	pthread_mutex_unlock(&vol->lock);
	return rc;
}

int csdfs_vol_commit(struct csdfs_vol *vol)
{
	int rc;

	pthread_mutex_lock(&vol->commit_lock);
	rc = group_commit(vol, 0);
	pthread_mutex_unlock(&vol->commit_lock);
	return rc;
}

/*
 * Make the open group's changes so far durable with one host sync (see
 * journal.c): its redo bytes not yet written go into the next journal
 * segment, and one fdatasync of the container covers them and the data
 * they map. The group stays open; its generation ends here, so what
 * changes next waits for the next segment or commit. Under commit_lock.
 * @return 0, -EAGAIN (no journal, or no room: commit the group instead),
 * or the volume's failure.
 */
static int journal_commit(struct csdfs_vol *vol)
{
	struct csdfs_journal *j = &vol->journal;
	const void *redo;
	unsigned char *copy = NULL;
	size_t len = 0, from;
	uint64_t gen, n = 0;
	int rc;

	pthread_mutex_lock(&vol->lock);
	rc = vol->failed;
	if (!rc && (!j->blocks || !vol->dirty))
		rc = -EAGAIN;
	if (!rc)
		rc = store_state_locked(vol);
	if (!rc && csdfs_meta_redo(vol->group, &redo, &len))
		rc = -EAGAIN;
	from = j->taken;
	if (!rc && j->pos + csdfs_journal_seg_blocks(len - from) > j->blocks)
		rc = -EAGAIN;
	if (!rc && !(copy = malloc(len - from + 1)))
		rc = -EAGAIN;
	if (rc) {
		pthread_mutex_unlock(&vol->lock);
		return rc;
	}
	memcpy(copy, (const unsigned char *)redo + from, len - from);
	j->taken = len;
	gen = vol->gen;
	__atomic_add_fetch(&vol->gen, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&vol->lock);

	rc = csdfs_journal_write(vol, copy, len - from, &n);
	if (!rc)
		rc = csdfs_io_sync(&vol->io);
	free(copy);
	pthread_mutex_lock(&vol->lock);
	if (rc) {
		rc = fail_locked(vol, rc);
	} else {
		j->pos += n;
		j->seq++;
		if (gen > vol->durable_gen)
			vol->durable_gen = gen;
		j->segments++;
	}
	pthread_mutex_unlock(&vol->lock);
	return rc;
}

int csdfs_vol_commit_upto(struct csdfs_vol *vol, uint64_t gen)
{
	bool need;
	int rc;

	/* Behind a running commit: it may already cover generation @gen. */
	pthread_mutex_lock(&vol->commit_lock);
	pthread_mutex_lock(&vol->lock);
	need = gen > vol->durable_gen;
	rc = vol->failed;
	pthread_mutex_unlock(&vol->lock);
	if (need && !rc)
		rc = journal_commit(vol);
	if (need && rc == -EAGAIN)
		rc = group_commit(vol, 0);
	pthread_mutex_unlock(&vol->commit_lock);
	return rc;
}

int csdfs_vol_sync(struct csdfs_vol *vol)
{
	return csdfs_vol_commit_upto(vol, UINT64_MAX);
}

/*
 * cache_size is the daemon's memory for caching, and LMDB's metadata is a
 * cache too: its file is mapped, and a random reader touches all of it
 * between two csdfs_meta_release_pages() calls. So the decoded chunks get
 * what the metadata leaves, and never less than a quarter.
 */
static uint64_t meta_share(const struct csdfs_vol *vol)
{
	return vol->cache_size - vol->cache_size / 4;
}

static void fit_cache_locked(struct csdfs_vol *vol)
{
	uint64_t meta = csdfs_meta_file_bytes(vol->meta);
	uint64_t cap = meta_share(vol);

	csdfs_cache_set_budget(vol->cache, vol->cache_size - (meta < cap ? meta : cap));
}

/* malloc's free memory the daemon keeps rather than hands back: a group's
 * redo buffer grows to megabytes, and an operation in a group whose redo
 * outgrew its keep limit is an LMDB nested transaction that takes and
 * frees about 3 MiB, so a hand-back below this only makes the next
 * operations fault the same pages in again. */
#define HEAP_KEEP_FREE (32u << 20)

/*
 * Hand memory back (hand_back_heap, hand_back_meta_locked: about once a
 * second) only where it could otherwise
 * outgrow cache_size plus a bounded overhead. malloc's free pages: when
 * more than HEAP_KEEP_FREE lie free. LMDB's mapped pages: only when the
 * metadata outgrew its share of cache_size (fit_cache_locked gives the
 * decoded chunks what is left); a mapping can hold no more resident pages
 * than its file has, so below that share it stays within the budget.
 * Dropping them costs every page touched after it a fault, and the
 * madvise a TLB shootdown on every CPU the daemon runs on (measured under
 * MariaDB: 3.5 % of the daemon's samples in madvise, 5 faults per
 * transaction, with a 23 MiB metadata file inside a 48 MiB share).
 */
static void hand_back_heap(void)
{
	struct mallinfo2 mi = mallinfo2();

	if (mi.fordblks > HEAP_KEEP_FREE)
		malloc_trim(0);
}

static void hand_back_meta_locked(struct csdfs_vol *vol)
{
	if (csdfs_meta_file_bytes(vol->meta) > meta_share(vol))
		csdfs_meta_release_pages(vol->meta);
}

static int64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void *commit_main(void *arg)
{
	struct csdfs_vol *vol = arg;
	int64_t last_trim = mono_ns();

	pthread_mutex_lock(&vol->lock);
	while (!vol->stopping) {
		struct timespec ts;
		int64_t now;
		bool due, trim;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += vol->commit_ms / 1000;
		ts.tv_nsec += (long)(vol->commit_ms % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		if (vol->group_ops < GROUP_OPS_MAX && vol->group_chunks < GROUP_CHUNKS_MAX)
			pthread_cond_timedwait(&vol->commit_cv, &vol->lock, &ts);
		due = !vol->stopping && vol->dirty;
		pthread_mutex_unlock(&vol->lock);
		if (due)
			csdfs_vol_commit(vol);
		/* One bounded compaction pass per round (compact.c): its moves
		 * join the open group, committed by the next round. */
		csdfs_compact_background(vol);
		/* Buffers freed by one worker thread stay in its malloc arena,
		 * and LMDB's mapped pages grow with the metadata: see
		 * hand_back_heap. Once a second, not once a round: under a
		 * write load a round ends every GROUP_CHUNKS_MAX chunk
		 * changes, several times a second. */
		now = mono_ns();
		trim = now - last_trim >= 1000000000;
		if (trim) {
			last_trim = now;
			hand_back_heap();
		}
		pthread_mutex_lock(&vol->lock);
		if (trim)
			hand_back_meta_locked(vol);
		fit_cache_locked(vol);
	}
	pthread_mutex_unlock(&vol->lock);
	return NULL;
}

int csdfs_vol_start(struct csdfs_vol *vol)
{
	int rc;

	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	if (vol->read_only || vol->commit_thread_running)
		return 0;
	/* Compression workers: the caller works too, so cpus - 1. Without
	 * them (allocation failure) compression simply runs inline. */
	if (!vol->pool)
		vol->pool = csdfs_pool_new(cpus > 8 ? 7 : cpus > 1 ? (unsigned)cpus - 1 : 0);
	rc = -pthread_create(&vol->commit_thread, NULL, commit_main, vol);
	if (!rc)
		vol->commit_thread_running = true;
	return rc;
}


void csdfs_vol_stop(struct csdfs_vol *vol)
{
	if (!vol->commit_thread_running)
		return;
	pthread_mutex_lock(&vol->lock);
	vol->stopping = true;
	pthread_cond_signal(&vol->commit_cv);
	pthread_mutex_unlock(&vol->lock);
	pthread_join(vol->commit_thread, NULL);
	vol->commit_thread_running = false;
}
