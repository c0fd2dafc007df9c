/* SPDX-License-Identifier: MIT */
/*
 * Internal shared state of libcsdfs: the volume, the per-operation context
 * and the helpers the modules (dir.c, write.c, xattr.c, extent_map.c, ...)
 * call on each other; the data path's own internals are in data.h. Not installed; the tools and glue use csdfs.h.
 */
#ifndef CSDFS_VOL_H
#define CSDFS_VOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "csdfs/alloc.h"
#include "csdfs/cache.h"
#include "csdfs/csdfs.h"
#include "csdfs/format.h"
#include "csdfs/io.h"
#include "csdfs/meta.h"
#include "record.h"

#define CSDFS_STRIPES 256
#define CSDFS_ITABLE_SHIFT_MIN 12  /* 4096 buckets to start with */
#define CSDFS_BAD_SEEN 1024      /* corrupt chunks remembered for logging */
/* Largest file offset we accept: keeps chunk indices and byte offsets far
 * from overflow and matches what ext4 allows (16 TiB). */
#define CSDFS_MAX_FILE_SIZE (16ull << 40)

/* Compaction hints (compact_hint.c): one bit per region of this many
 * blocks (1 MiB), set where dead bytes may have appeared. */
#define CSDFS_HINT_REGION_BLOCKS 256u
struct csdfs_chint {
	uint64_t *bits;            /* region r: bit r % 64 of word r / 64 */
	uint64_t *sum;             /* bit w: word w of bits is non-zero */
	uint64_t *top;             /* bit s: word s of sum is non-zero */
	uint64_t *dirty;           /* stored pages changed since the last store */
	uint64_t nregions, nset, ndirty;
};

/* Decoded superblock. */
struct csdfs_super {
	uint8_t uuid[16];
	uint64_t total_blocks;
	uint64_t logical_bytes;
	uint32_t chunk_size;
	uint32_t atomic_unit;
	struct csdfs_codec_spec codec;
	uint64_t incompat;         /* as read; written: the supported set */
	uint64_t created_sec;      /* 0: now (a new volume) */
};

/* In-memory inode: exists while the kernel or an operation references it. */
struct csdfs_inode {
	uint64_t ino;
	uint64_t nlookup;          /* itable lock: kernel references */
	int refs;                  /* itable lock: operations in progress */
	uint64_t dirty_gen;        /* itable lock: last group that changed it */
	bool had_writer;           /* itable lock: opened for writing while
				    * the kernel referenced it */
	bool blocks_shown;         /* itable lock: shown_blocks is known */
	uint64_t shown_blocks;     /* itable lock: st_blocks in the kernel's
				    * last attribute reply */
	pthread_rwlock_t io_lock;  /* shared: read/write; exclusive: resize */
	uint64_t store_gen;        /* atomic: new whenever io_lock is taken
				    * exclusively, and for every new entry */
	uint32_t chunk_size;       /* atomic: the file's chunk size, 0 until
				    * known; changes only under io_lock held
				    * exclusively (an empty file's policy) */
	uint64_t codec_memo;       /* atomic: the file's effective codec as a
				    * write resolved it, and the volume's
				    * policy_gen then (write.c); 0: none */
	struct csdfs_inode *next;  /* itable lock */
};

struct csdfs_itable {
	pthread_mutex_t lock;
	/* Grows (doubles) when it holds twice as many inodes as buckets: the
	 * kernel may reference millions, and every request looks one up. */
	struct csdfs_inode **buckets;
	unsigned shift;            /* 1 << shift buckets */
	size_t count;              /* inodes in the table */
};

/* The metadata journal (journal.c): its region in the container and
 * where the next segment goes. commit_lock, and lock for @taken. */
struct csdfs_journal {
	uint64_t start, blocks;    /* region, in blocks; blocks 0: none */
	uint64_t base;             /* the LMDB commit the segments apply to */
	uint64_t seq;              /* the next segment's number */
	uint64_t pos;              /* its first block, in the region */
	size_t taken;              /* lock: redo bytes of the group written */
	uint64_t replayed;         /* segments the open replayed */
	uint64_t segments;         /* lock: segments written since open */
};

struct csdfs_vol {
	char *path;
	struct csdfs_io io;
	struct csdfs_super sb;
	struct csdfs_meta *meta;

	pthread_mutex_t commit_lock; /* one group commit at a time; before lock */
	pthread_mutex_t lock;      /* see lock order in csdfs.h */
	struct csdfs_txn *group;   /* lock: open group transaction */
	uint64_t gen;              /* lock: generation of the open group */
	uint64_t durable_gen;      /* lock: last generation made durable */
	bool dirty;                /* lock: group holds changes */
	uint64_t group_ops;        /* lock: operations in the open group */
	uint64_t group_chunks;     /* lock: chunk changes in the open group */
	int failed;                /* lock: -errno after a failed commit */
	bool closed_unsynced;      /* lock: a group commit is syncing, unlocked */
	struct csdfs_alloc alloc;  /* lock */
	struct csdfs_counters_disk counters; /* lock */
	uint64_t next_ino;         /* lock */

	pthread_mutex_t stripes[CSDFS_STRIPES]; /* chunk write serialisation */
	struct csdfs_itable itable;

	pthread_t commit_thread;
	bool commit_thread_running;
	pthread_cond_t commit_cv;  /* wakes the commit thread (lock) */
	bool stopping;             /* lock */
	unsigned commit_ms;
	bool read_only;
	bool punch;                /* punch freed ranges out of the container */
	bool no_atime;             /* -o noatime: reads leave atime alone */
	bool zero_runs;            /* lock: have the host zero each run the
				    * allocation head takes (until it says it
				    * cannot) */
	struct csdfs_cache *cache; /* decoded chunks (thread-safe itself) */
	uint64_t cache_size;       /* the configured memory budget */
	struct csdfs_pool *pool;   /* compression workers (thread-safe itself) */
	uint64_t bad_seen[CSDFS_BAD_SEEN]; /* lock: pa + 1 of reported bad chunks */
	uint64_t store_seq;        /* atomic: last csdfs_inode.store_gen given */
	uint64_t policy_gen;       /* atomic: bumped inside every operation that
				    * can change which codec policy a file
				    * inherits (csdfs_policy_moved) */
	struct csdfs_journal journal;
	uint64_t group_commits;    /* lock: made durable since open */
	unsigned compact_dead;     /* background compaction above this percent
				    * of used bytes dead; 0 = off */
	uint64_t compact_next;     /* lock: pa where the volume scan resumes */
	uint64_t compact_idle_dead;/* lock: dead bytes when a whole scan last
				    * found nothing to move (0: none yet) */
	struct csdfs_chint chint;  /* lock: regions compaction should look at */
	uint64_t compact_later;    /* lock: block + 1 a scan passed over while
				    * the head was in it (0: none) */
};

struct csdfs_mixdelta {
	uint64_t ino;
	uint8_t codec;
	int8_t level;
	int64_t delta;             /* logical bytes */
};

/* One filesystem operation: a nested transaction plus what to apply to the
 * in-memory state if, and only if, it commits. */
struct csdfs_op {
	struct csdfs_vol *vol;
	struct csdfs_txn *txn;
	bool writable;
	int inflight_slot;
	struct csdfs_counters_disk delta;   /* added (mod 2^64) on commit */
	struct csdfs_range *freed;          /* blocks to quarantine on commit */
	size_t nfreed, capfreed;
	uint64_t chunk_changes;             /* chunks mapped or unmapped */
	struct csdfs_mixdelta *mix;         /* codec-mix changes to roll up */
	size_t nmix, capmix;
};

/* LMDB's map size for a volume: ~100 bytes of metadata per 16 KiB chunk,
 * generously doubled (mkfs.c and volume.c). */
static inline uint64_t csdfs_meta_mapsize(uint64_t total_blocks,
					  uint64_t logical_bytes)
{
	return (1ull << 30) + logical_bytes / 64 + total_blocks * 16;
}

/* iometer.c: bytes this thread has passed to write-family calls (LMDB's
 * own writes happen in the committing thread); 0 if unknown. */
uint64_t csdfs_thread_wchar(void);

/* commit.c: operations and commits. op_begin takes vol->lock; op_end
 * commits (rc == 0) or aborts the nested transaction, then releases it.
 * A read op uses the group transaction directly and changes nothing. */
int csdfs_op_begin(struct csdfs_vol *vol, struct csdfs_op *op);
int csdfs_op_begin_read(struct csdfs_vol *vol, struct csdfs_op *op);
int csdfs_op_end(struct csdfs_op *op, int rc);
int csdfs_op_note_freed(struct csdfs_op *op, uint64_t start, uint64_t count);
/* Commit the open group now (vol->lock held). */
int csdfs_vol_commit_locked(struct csdfs_vol *vol);
/* Group commit without holding vol->lock through the syncs (takes it). */
int csdfs_vol_commit(struct csdfs_vol *vol);
/* Wait until every group up to generation @gen is durable (UINT64_MAX:
 * everything so far). */
int csdfs_vol_commit_upto(struct csdfs_vol *vol, uint64_t gen);
int64_t csdfs_now_ns(void);
/* The metadata layer's companion sync (@arg: the volume): a commit counts
 * only once the container data it maps is durable too. */
int csdfs_vol_sync_container(void *arg);
/* Stop and join the commit thread, if it runs (csdfs_vol_start starts it). */
void csdfs_vol_stop(struct csdfs_vol *vol);

/* inode.c: the in-memory inode table. */
struct csdfs_inode *csdfs_inode_get(struct csdfs_vol *vol, uint64_t ino);
/* Take @in's io_lock exclusively: the data may change, so what a read
 * returned before must no longer reach the kernel's cache (store_gen). */
void csdfs_inode_lock_exclusive(struct csdfs_vol *vol, struct csdfs_inode *in);
void csdfs_inode_put(struct csdfs_vol *vol, struct csdfs_inode *in);
/* Mark @ino changed by the open group (fsync needs a commit). */
void csdfs_op_touch(struct csdfs_op *op, uint64_t ino);
/* Wait until everything @ino changed is durable. */
int csdfs_vol_commit_for(struct csdfs_vol *vol, uint64_t ino);
/* inode.c: operations on one inode. Begin a write (@writable) or read operation and load @ino's record into
 * @rec. @return 0 with the operation begun, or -errno with nothing left to
 * end (a failed load ends it). */
int csdfs_op_begin_irec(struct csdfs_vol *vol, struct csdfs_op *op, bool writable,
			uint64_t ino, struct csdfs_inode_disk *rec);
/* The usual end of an operation on one inode: unless @rc, store @rec and
 * mark @ino changed; then csdfs_op_end(@op, rc). */
int csdfs_op_end_irec(struct csdfs_op *op, uint64_t ino,
		      const struct csdfs_inode_disk *rec, int rc);
/* Is the inode referenced by the kernel (lookup count > 0)? */
bool csdfs_inode_in_use(struct csdfs_vol *vol, uint64_t ino);
/* @return 0 or -ENOMEM. */
int csdfs_itable_init(struct csdfs_itable *t);
void csdfs_itable_release(struct csdfs_itable *t);

/* orphan.c */
/* Free an unlinked inode's data, xattrs, symlink and records in @op. */
int csdfs_inode_destroy(struct csdfs_op *op, uint64_t ino);
/* Destroy every orphan (unlinked while open, then crashed or unmounted). */
int csdfs_orphan_reclaim_all(struct csdfs_vol *vol);

/* journal.c: fsync's metadata journal in the container. load: at open,
 * in the open group: find the region (make one if @writable and there is
 * none) and apply the segments made on the durable snapshot. write: the
 * next segment holding @len redo bytes, unsynced; -ENOSPC when the region
 * has no room for it. restart: segments now apply to commit @base. */
int csdfs_journal_load(struct csdfs_vol *vol, bool writable, char *err, size_t errlen);
int csdfs_journal_write(struct csdfs_vol *vol, const void *redo, size_t len,
			uint64_t *blocks);
void csdfs_journal_restart(struct csdfs_journal *j, uint64_t base);
uint64_t csdfs_journal_seg_blocks(size_t len);
/* The region named in @txn's snapshot: 0, -ENOENT (none), -EUCLEAN. */
int csdfs_journal_region(struct csdfs_txn *txn, uint64_t *start, uint64_t *blocks);

/* freemap.c: the durable free map in LMDB (db "free"). */
/* One run as a cursor returned it: -EUCLEAN if malformed or empty. */
int csdfs_freemap_decode(const struct csdfs_val *k, const struct csdfs_val *v,
			 uint64_t *start, uint64_t *count);
/* Remove the free parts of [start, start + count); *taken = how many. */
int csdfs_freemap_take(struct csdfs_txn *txn, uint64_t start, uint64_t count,
		       uint64_t *taken);
/* The same for [first, last] in one pass, telling apart what it took of
 * the first block (*head), of the blocks between (*mid) and of the last
 * (*tail, 0 when first == last): a stored range's end blocks may be
 * shared with its neighbours, its interior never. */
int csdfs_freemap_take_ends(struct csdfs_txn *txn, uint64_t first, uint64_t last,
			    uint64_t *head, uint64_t *mid, uint64_t *tail);
/* Add [start, start + count), coalescing; -EUCLEAN if any is already free. */
int csdfs_freemap_give(struct csdfs_txn *txn, uint64_t start, uint64_t count);
/* Call @fn for every part of [start, start + count) that is free. */
int csdfs_freemap_intersect(struct csdfs_txn *txn, uint64_t start,
			    uint64_t count,
			    int (*fn)(void *ctx, uint64_t s, uint64_t n),
			    void *ctx);

/* extent_map.c: the chunk map. */
int csdfs_chunk_get(struct csdfs_txn *txn, uint64_t ino, uint64_t idx,
		    struct csdfs_chunk_disk *out);
/* Store a chunk record as is (no block accounting: callers that change
 * pa/plen must use csdfs_chunk_set). */
int csdfs_chunk_put(struct csdfs_txn *txn, uint64_t ino, uint64_t idx,
		    const struct csdfs_chunk_disk *c);
/* Replace chunk @idx of @ino (whose record the caller holds in @irec and
 * stores afterwards) by @nc, or make it a hole when @nc is NULL. Frees the
 * old chunk's blocks and charges the new chunk's blocks. */
int csdfs_chunk_set(struct csdfs_op *op, uint64_t ino,
		    struct csdfs_inode_disk *irec, uint64_t idx,
		    const struct csdfs_chunk_disk *nc);
/* Drop every chunk of @ino with index >= @from. */
int csdfs_chunk_drop_from(struct csdfs_op *op, uint64_t ino,
			  struct csdfs_inode_disk *irec, uint64_t from);
void csdfs_chunk_key(uint8_t key[16], uint64_t ino, uint64_t idx);

/* irec.c: inode records (db "inodes"), directory roll-ups and codec mix. */
/* Load / store @ino's record; a store carries its difference up the
 * roll-ups. @return 0, -ENOENT, -EUCLEAN (a record of the wrong size). */
int csdfs_irec_load(struct csdfs_txn *txn, uint64_t ino,
		    struct csdfs_inode_disk *rec);
int csdfs_irec_store(struct csdfs_txn *txn, uint64_t ino,
		     const struct csdfs_inode_disk *rec);
/* The same store when the caller holds the record as it is stored now
 * (@old, NULL for none: read in this operation, not changed since), which
 * spares the store reading it again. */
int csdfs_irec_replace(struct csdfs_txn *txn, uint64_t ino,
		       const struct csdfs_inode_disk *old,
		       const struct csdfs_inode_disk *rec);
void csdfs_irec_to_stat(uint64_t ino, const struct csdfs_inode_disk *rec,
			struct stat *st);
/* Apply the CSDFS_SET_* attributes of @mask from @in; ctime becomes @now
 * unless @mask sets it. */
void csdfs_irec_apply_attrs(struct csdfs_inode_disk *rec, const struct stat *in,
			    unsigned mask, int64_t now);

/*
 * Effective policy. An inode follows its own setting where it has one
 * (CSDFS_INODE_CODEC_SET / _CHUNK_SET), else that of the nearest directory
 * above it (through "parent": a file's primary parent) that has one, else
 * the volume's default. Resolved when used, never copied: a directory's new
 * setting, a cleared one or a rename apply at once to everything beneath,
 * for the price of walking the ancestors (which every store walks anyway for
 * the roll-ups, with the same bound). Writes remember a file's result until
 * any such change (csdfs_policy_moved). A regular file's chunk size is fixed
 * by its first data: p->chunk_size is what a new child of @ino would get.
 */
struct csdfs_policy {
	struct csdfs_codec_spec codec;
	uint64_t codec_from;       /* inode whose setting it is; 0 = volume default */
	uint32_t chunk_size;
	uint64_t chunk_from;       /* likewise */
};
/* Forget every file's remembered effective codec: called inside (under
 * vol->lock) an operation that sets or clears a policy or moves a file or
 * directory to another parent. */
void csdfs_policy_moved(struct csdfs_vol *vol);
/* @rec: @ino's record, as loaded in @txn. @return 0 or -errno. */
int csdfs_policy_resolve(struct csdfs_vol *vol, struct csdfs_txn *txn, uint64_t ino,
			 const struct csdfs_inode_disk *rec, struct csdfs_policy *p);

int csdfs_rollup_get(struct csdfs_txn *txn, uint64_t ino,
		     struct csdfs_rollup_disk *r);
/* What regular file @rec counts for in its directories' roll-ups. */
void csdfs_rollup_of_file(const struct csdfs_inode_disk *rec,
			  struct csdfs_rollup_disk *r);
/* Propagate the change from @old (NULL: new inode) to @rec up the tree. */
int csdfs_rollup_on_store(struct csdfs_txn *txn, uint64_t ino,
			  const struct csdfs_inode_disk *old,
			  const struct csdfs_inode_disk *rec);
int csdfs_op_note_mix(struct csdfs_op *op, uint64_t ino, uint8_t codec,
		      int8_t level, int64_t delta);
/* Apply the operation's codec-mix deltas (before it commits). */
int csdfs_rollup_flush(struct csdfs_op *op);
/* Remove @ino's roll-up and codec-mix records. */
int csdfs_rollup_drop(struct csdfs_txn *txn, uint64_t ino);
/* Call @fn for each codec-mix entry of @ino (after reading them all). */
int csdfs_mix_list(struct csdfs_txn *txn, uint64_t ino,
		   int (*fn)(void *ctx, uint8_t codec, int8_t level, uint64_t bytes),
		   void *ctx);

/* write.c: truncate with attribute changes (setattr with a size). */
int csdfs_file_truncate(struct csdfs_vol *vol, uint64_t ino, uint64_t size,
			const struct stat *in, unsigned mask, struct stat *st);

/* recompress.c (setxattr user.csdfs.recompress=N): rewrite up to N chunks
 * that do not match the file's policy. _left counts those remaining. */
int csdfs_file_recompress_xattr(struct csdfs_vol *vol, uint64_t ino,
				const char *value, size_t size);
int csdfs_file_recompress_left(struct csdfs_vol *vol, uint64_t ino);

/*
 * compact.c: moving the live chunks out of mostly dead blocks (the stored
 * bytes verbatim) to the allocation head, through the write planner and one
 * mapping operation per batch, so that the blocks they shared with dead
 * versions are freed (see compact.c for the criterion and the bounds).
 * Never waits for a writer: chunks whose inode or stripes are busy are
 * skipped. Call without vol->lock, io_lock or stripes held by the caller
 * for the chunks it may move (it only try-locks them).
 */
struct csdfs_compact_stats {
	uint64_t scanned;          /* chunks looked at */
	uint64_t candidates;       /* of those, in mostly dead blocks */
	uint64_t moved;            /* chunks moved */
	uint64_t bytes;            /* stored bytes moved */
	uint64_t skipped;          /* busy, changed meanwhile or unreadable */
	bool wrapped;              /* a volume pass reached the end of the map */
	bool goal;                 /* stopped: dead space under the goal (compact.c) */
};
/* One pass: the chunks of @ino (0: the whole volume, resuming where the last
 * volume pass stopped), moving at most @budget stored bytes. @use_reserve:
 * the low-space path may place into the reserve (a pass frees more than it
 * takes). @to_goal: stop once the target's dead space is under the goal
 * (compact.c). @return 0 or -errno (-ENOSPC: no room to move into). */
int csdfs_compact_pass(struct csdfs_vol *vol, uint64_t ino, uint64_t budget,
		       bool use_reserve, bool to_goal, struct csdfs_compact_stats *st);
/* Commit thread, between commits: one bounded pass if dead space is over
 * the compact_dead threshold. */
void csdfs_compact_background(struct csdfs_vol *vol);
/* Low-space path (wplan.c): one bounded pass using the reserve, then a
 * commit, so its freed blocks are usable. @return 0 if anything moved,
 * else -ENOSPC. */
int csdfs_compact_lowspace(struct csdfs_vol *vol);
/* setxattr user.csdfs.compact=N (on the root: the volume; on a file: its
 * chunks): move up to N MiB of stored bytes. getxattr: chunks left that
 * compaction would move. */
int csdfs_compact_xattr(struct csdfs_vol *vol, uint64_t ino, const char *value,
			size_t size);
int csdfs_compact_left(struct csdfs_vol *vol, uint64_t ino, uint64_t *left);

/* compact_hint.c (vol->lock held for all but init/release/load). */
int csdfs_chint_init(struct csdfs_chint *h, uint64_t total_blocks);
void csdfs_chint_release(struct csdfs_chint *h);
/* Read the stored hints (none stored: every region set). -EUCLEAN: a
 * page is damaged; every region is set then, to be stored anew. */
int csdfs_chint_load(struct csdfs_chint *h, struct csdfs_txn *txn);
/* Put the pages changed since the last store (@all: every page) into @txn. */
int csdfs_chint_store(struct csdfs_chint *h, struct csdfs_txn *txn, bool all);
void csdfs_chint_mark_block(struct csdfs_chint *h, uint64_t block);
/* The regions of the first and last block of [pa, pa + len). */
void csdfs_chint_mark_range(struct csdfs_chint *h, uint64_t pa, uint64_t len);
void csdfs_chint_set(struct csdfs_chint *h, uint64_t region);
void csdfs_chint_clear(struct csdfs_chint *h, uint64_t region);
bool csdfs_chint_test(const struct csdfs_chint *h, uint64_t region);
/* The first set region >= @from, if any. */
bool csdfs_chint_next(const struct csdfs_chint *h, uint64_t from, uint64_t *region);

/* container.c: superblock. */
int csdfs_super_write(struct csdfs_io *io, const struct csdfs_super *sb);
/* Rewrite @sb with every feature bit this csdfs knows, durably, before it
 * writes in a way an older csdfs would misread: that one refuses it then. */
int csdfs_super_upgrade(struct csdfs_io *io, struct csdfs_super *sb);
int csdfs_super_read(struct csdfs_io *io, struct csdfs_super *sb,
		     char *err, size_t errlen);

/*
 * Open a cursor on @db and seek to the first key >= the BE64 key @at.
 * @return the seek's 0 or -ENOENT with *@cur open (the caller closes it),
 * or the open's -errno with *@cur NULL.
 */
static inline int csdfs_cursor_at(struct csdfs_txn *txn, enum csdfs_db db,
				  uint64_t at, struct csdfs_cursor **cur,
				  struct csdfs_val *k, struct csdfs_val *v)
{
	uint8_t key[8];
	int rc = csdfs_cursor_open(txn, db, cur);

	if (rc) {
		*cur = NULL;
		return rc;
	}
	csdfs_be64_put(key, at);
	return csdfs_cursor_seek(*cur, key, 8, k, v);
}

/* @a += @sign * @d, u64 field by u64 field over @size bytes of two packed
 * structs made only of u64 fields (counters, roll-ups); wraps mod 2^64. */
static inline void csdfs_u64s_add(void *a, const void *d, size_t size, int sign)
{
	unsigned char *x = a;
	const unsigned char *y = d;

	/* Packed structs: go through memcpy, never a misaligned pointer. */
	for (size_t i = 0; i + 8 <= size; i += 8) {
		uint64_t u, v;

		memcpy(&u, x + i, 8);
		memcpy(&v, y + i, 8);
		u += sign > 0 ? v : (uint64_t)0 - v;
		memcpy(x + i, &u, 8);
	}
}

/* Counters arithmetic (deltas wrap mod 2^64). */
static inline void csdfs_counters_add(struct csdfs_counters_disk *a,
				      const struct csdfs_counters_disk *d)
{
	csdfs_u64s_add(a, d, sizeof(*a), 1);
}

#endif
