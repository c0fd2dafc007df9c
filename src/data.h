/* SPDX-License-Identifier: MIT */
/*
 * The data path's shared internals: reading one stored chunk (read.c), the
 * chunk stripes and the write planner (wplan.c). write.c, recompress.c and
 * read.c build on them; nothing outside the data path includes this.
 *
 * A write plan holds the new contents of some chunks of one file. Its life:
 * init, add each chunk, write (compress, place at the allocator's head,
 * pwrite), then map them all inside ONE operation (commit), then abandon
 * (releases what the allocator still holds for it) and free. Until the
 * operation commits, readers see the old chunks; after it, the new ones: a
 * request never becomes visible, or durable, in parts (G3).
 */
#ifndef CSDFS_DATA_H
#define CSDFS_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vol.h"

/* ---- wplan.c: chunk stripes ---------------------------------------------- */

/*
 * Chunk writes of one (inode, chunk) serialise on one of CSDFS_STRIPES
 * mutexes. A writer locks every stripe it needs at once, in ascending
 * stripe order (so two writers never deadlock), after the inode's io_lock
 * and never while holding vol->lock. @mask is the caller's set.
 */
/* Lock the stripes of chunks [first, last]. */
void csdfs_stripes_lock_range(struct csdfs_vol *vol, uint64_t ino, uint64_t first,
			      uint64_t last, uint64_t mask[CSDFS_STRIPES / 64]);
/* Lock the stripes of chunks @idxs[0..n). */
void csdfs_stripes_lock_chunks(struct csdfs_vol *vol, uint64_t ino,
			       const uint64_t *idxs, size_t n,
			       uint64_t mask[CSDFS_STRIPES / 64]);
/* The same, never waiting (compaction): @return 0 with every stripe of
 * @idxs[0..n) locked, or -EBUSY with none. */
int csdfs_stripes_trylock_chunks(struct csdfs_vol *vol, uint64_t ino,
				 const uint64_t *idxs, size_t n,
				 uint64_t mask[CSDFS_STRIPES / 64]);
void csdfs_stripes_unlock(struct csdfs_vol *vol,
			  const uint64_t mask[CSDFS_STRIPES / 64]);

/* ---- wplan.c: the write planner ------------------------------------------ */

/* One chunk of a pending write. llen == 0 means "becomes a hole". */
struct wchunk {
	uint64_t idx;
	uint32_t llen;
	uint32_t plen;
	size_t packoff;
	uint64_t pa;
	uint32_t csum;
	struct csdfs_codec_spec used;
	bool placed;               /* pa reserved at the allocator's head */
	const char *src;           /* logical bytes (valid until the write ends) */
	size_t slot;               /* compression slot in the pack buffer */
	bool partial;              /* read-modify-write: likely written again */
};

struct wplan {
	struct csdfs_vol *vol;
	uint64_t ino;
	uint32_t cs;
	struct csdfs_codec_spec spec;
	struct wchunk *c;
	size_t n;
	char *pack;
	size_t packlen, packcap;
	size_t nslots;             /* chunks to compress */
	int slot;
	bool compressed;
	bool stored;               /* holds stored chunks (compaction) */
	bool committed;            /* the mapping operation succeeded */
};

/* A plan for @n chunks of @ino (policy and chunk size from @rec), of which
 * at most @nstored are stored (need pack space). @return 0 or -ENOMEM. */
int csdfs_wplan_init(struct wplan *p, struct csdfs_vol *vol, uint64_t ino,
		     const struct csdfs_inode_disk *rec, size_t n, size_t nstored);
/* Add chunk @idx with logical content @src[0..llen) (@src must stay valid
 * until the plan is freed): trailing zeros are not stored, an all-zero
 * chunk becomes a hole. @return 0. */
int csdfs_wplan_add(struct wplan *p, uint64_t idx, const char *src,
		    uint32_t llen);
/* Add chunk @idx as it is already stored (@c, its bytes at @bytes):
 * compaction moves it verbatim, never recompressing. A plan holds either
 * such chunks or new contents, never both. @return 0, -EINVAL (full). */
int csdfs_wplan_add_stored(struct wplan *p, uint64_t idx,
			   const struct csdfs_chunk_disk *c, const char *bytes);
/* Compress, place and write every stored chunk. Data writes (@use_reserve
 * false) may not eat into the reserve kept for truncate, punch and unlink,
 * nor go past the logical capacity. Takes vol->lock for the placement.
 * Short of blocks, it commits the open group, then compacts (not a plan of
 * stored chunks) and commits, placing again after each.
 * @return 0, -ENOSPC, -EBUSY, or the I/O's -errno. */
int csdfs_wplan_write(struct wplan *p, bool use_reserve);
/* Map every chunk of the written plan inside @op (@rec: the file's record,
 * which the caller stores afterwards). */
int csdfs_wplan_commit(struct wplan *p, struct csdfs_op *op,
		       struct csdfs_inode_disk *rec);
/* Change the record of a plan's file in the mapping operation (size,
 * times, counters in op->delta); a non-zero return fails the operation. */
typedef int (*csdfs_wplan_edit_fn)(struct csdfs_op *op,
				   struct csdfs_inode_disk *rec, void *arg);
/* Map the written plan into its file in ONE operation: load the record,
 * csdfs_wplan_commit, @edit (NULL: none), store the record, mark the inode
 * changed. Sets p->committed. @return 0 or -errno. */
int csdfs_wplan_apply(struct wplan *p, csdfs_wplan_edit_fn edit, void *arg);
/* After a committed plan: keep its partly written chunks in the cache. */
void csdfs_wplan_cache(struct wplan *p);
/* Release the allocator's hold for the plan (its in-flight registration,
 * and the bytes it placed unless its mapping committed). Always call it
 * before csdfs_wplan_free once csdfs_wplan_write ran. */
void csdfs_wplan_abandon(struct wplan *p);
void csdfs_wplan_free(struct wplan *p);

/* Load @ino's record in a read operation: -EISDIR for a directory, -EINVAL
 * for anything else that is not a regular file. */
int csdfs_reg_load(struct csdfs_vol *vol, uint64_t ino,
		   struct csdfs_inode_disk *rec);

/* csdfs_reg_load, and in the same read operation put @ino's effective
 * codec into @rec (a copy about to plan a write; its codec fields mean
 * nothing unless CODEC_SET). */
int csdfs_reg_load_codec(struct csdfs_vol *vol, uint64_t ino,
			 struct csdfs_inode_disk *rec);

/* A chunk a write covers only in part, looked up with the file's record
 * (csdfs_reg_load_write). */
struct wpart {
	uint64_t idx;
	bool mapped;                 /* false: a hole */
	struct csdfs_chunk_disk c;   /* when mapped */
};

/* csdfs_reg_load (@codec: csdfs_reg_load_codec), and in the same read
 * operation the mappings of the @n chunks in @parts (at most two: a
 * write's first and last), whose stripes the caller holds. One round on
 * vol->lock instead of 1 + @n. */
int csdfs_reg_load_write(struct csdfs_vol *vol, uint64_t ino,
			 struct csdfs_inode_disk *rec, struct wpart *parts,
			 size_t n, bool codec);

/* ---- read.c: one stored chunk -------------------------------------------- */

/* Look chunk @idx of @ino up afresh. @return 0, -ENOENT for a hole. */
int csdfs_read_mapping(struct csdfs_vol *vol, uint64_t ino, uint64_t idx,
		       struct csdfs_chunk_disk *c);
/*
 * Read chunk @idx into @dst (@cs bytes; a hole reads as zeros), starting
 * from mapping @c (NULL: look it up). @scratch holds csdfs_codec_bound(cs)
 * bytes. A checksum mismatch is retried once against a fresh mapping (the
 * chunk may have been replaced meanwhile) before it is reported (-EIO).
 * @keep: cache the decoded chunk (not for a version about to be replaced).
 */
int csdfs_read_chunk(struct csdfs_vol *vol, uint64_t ino, uint64_t idx,
		     uint32_t cs, const struct csdfs_chunk_disk *c, char *dst,
		     char *scratch, bool keep);

#endif
