/* SPDX-License-Identifier: MIT */
/*
 * A volume's life: open (superblock, metadata environment, in-memory state
 * loaded and checked, orphans reclaimed), close (a last commit), and
 * statfs. Operations and commits are in commit.c, creation in mkfs.c.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csdfs/log.h"
#include "csdfs/pool.h"
#include "vol.h"

/* Fill the caller's message buffer and return @rc. */
#define ERR(rc, ...) do { snprintf(err, errlen, __VA_ARGS__); return rc; } while (0)

#define COMMIT_MS_DEFAULT 1000u
#define CACHE_SIZE_DEFAULT (64ull << 20)

/* ---- open / close -------------------------------------------------------- */

/* The allocation head left a block partly filled: its padding is dead. */
static void leave_cb(void *ctx, uint64_t block)
{
	struct csdfs_vol *vol = ctx;

	csdfs_chint_mark_block(&vol->chint, block);
}

/*
 * The allocation head took a run of free blocks: have the host forget what
 * they held. Chunks are packed at byte offsets, so the first write into a
 * block covers only part of it; over a block that still holds old data the
 * host reads it back first, synchronously and under the container's inode
 * lock, which every other write then waits for. Over a block it knows to be
 * zero it reads nothing. A volume whose freed space is reused (any volume
 * that has aged) otherwise pays one such read per block it fills.
 */
static void enter_cb(void *ctx, uint64_t start, uint64_t count)
{
	struct csdfs_vol *vol = ctx;
	int rc;

	if (!vol->zero_runs)
		return;
	rc = csdfs_io_zero(&vol->io, start * CSDFS_BLOCK_SIZE,
			   count * CSDFS_BLOCK_SIZE);
	if (!rc)
		return;
	/* Only speed is lost, so once is enough to hear of it. */
	vol->zero_runs = false;
	if (rc != -EOPNOTSUPP)
		csdfs_log(LOG_WARNING, "cannot zero free blocks %llu+%llu in the container: %s; "
			  "partial-block writes into reused space may read first",
			  (unsigned long long)start, (unsigned long long)count,
			  strerror(-rc));
}

static int load_state(struct csdfs_vol *vol, char *err, size_t errlen)
{
	struct csdfs_inode_disk root;
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	uint64_t free_blocks = 0, data_blocks;
	int rc;

	rc = csdfs_meta_get(vol->group, CSDFS_DB_META, "uuid", 4, &v);
	if (rc || v.len != 16)
		ERR(-EUCLEAN, "metadata has no volume uuid: not a csdfs metadata environment");
	if (memcmp(v.data, vol->sb.uuid, 16))
		ERR(-EUCLEAN, "metadata belongs to another volume (uuid mismatch with the container)");
	rc = csdfs_rec_le64_get(vol->group, CSDFS_DB_META, "next_ino", 8, &vol->next_ino);
	if (rc)
		ERR(-EUCLEAN, "metadata is corrupt: next inode number missing");
	rc = csdfs_rec_counters_get(vol->group, CSDFS_DB_META, "counters", 8,
				    &vol->counters);
	if (rc)
		ERR(-EUCLEAN, "metadata is corrupt: volume counters missing");
	rc = csdfs_irec_load(vol->group, CSDFS_ROOT_INO, &root);
	if (rc || !S_ISDIR(root.mode))
		ERR(-EUCLEAN, "metadata is corrupt: root directory missing");

	rc = csdfs_alloc_init(&vol->alloc, CSDFS_FIRST_DATA_BLOCK,
			      vol->sb.total_blocks);
	if (rc)
		ERR(rc, "out of memory for the allocator");
	rc = csdfs_chint_init(&vol->chint, vol->sb.total_blocks);
	if (rc)
		ERR(rc, "out of memory for the compaction hints");
	rc = csdfs_chint_load(&vol->chint, vol->group);
	if (rc == -EUCLEAN)   /* only where to look for dead bytes: no data */
		csdfs_log(LOG_WARNING, "compaction hints are damaged: compaction looks at every region again");
	else if (rc)
		ERR(rc, "cannot read the compaction hints: %s", strerror(-rc));
	vol->alloc.on_leave = leave_cb;
	vol->alloc.on_enter = enter_cb;
	vol->alloc.hook_ctx = vol;
	/* statfs counts only runs a whole raw chunk fits in. */
	csdfs_alloc_set_minrun(&vol->alloc, (vol->sb.chunk_size + CSDFS_BLOCK_SIZE - 1) /
					    CSDFS_BLOCK_SIZE);
	rc = csdfs_cursor_open(vol->group, CSDFS_DB_FREE, &cur);
	if (rc)
		ERR(rc, "cannot read the free map: %s", strerror(-rc));
	for (rc = csdfs_cursor_first(cur, &k, &v); !rc;
	     rc = csdfs_cursor_next(cur, &k, &v)) {
		uint64_t s, n;

		rc = csdfs_freemap_decode(&k, &v, &s, &n);
		if (rc)
			break;
		if (s < CSDFS_FIRST_DATA_BLOCK || s + n > vol->sb.total_blocks) {
			rc = -EUCLEAN;
			break;
		}
		csdfs_alloc_mark_free(&vol->alloc, s, n);
		free_blocks += n;
	}
	csdfs_cursor_close(cur);
	if (rc != -ENOENT)
		ERR(-EUCLEAN, "metadata is corrupt: bad free map");
	/* The journal's region is the volume's own, like the superblock's. */
	data_blocks = vol->sb.total_blocks - CSDFS_FIRST_DATA_BLOCK - vol->journal.blocks;
	if (free_blocks > data_blocks)
		ERR(-EUCLEAN, "metadata is corrupt: free map larger than the volume");
	/* The free map is the truth for the used-block counter. */
	vol->counters.used_blocks = data_blocks - free_blocks;
	/* Keep 0.5% (64 blocks to 64 MiB) for truncate, punch and unlink on a
	 * full volume (G5). */
	vol->alloc.reserve = data_blocks / 200;
	if (vol->alloc.reserve < 64)
		vol->alloc.reserve = 64;
	if (vol->alloc.reserve > 16384)
		vol->alloc.reserve = 16384;
	return 0;
}

static void vol_free(struct csdfs_vol *vol)
{
	if (vol->group)
		csdfs_meta_abort(vol->group);
	csdfs_meta_close(vol->meta);
	csdfs_io_close(&vol->io);
	csdfs_alloc_release(&vol->alloc);
	csdfs_chint_release(&vol->chint);
	csdfs_itable_release(&vol->itable);
	csdfs_cache_free(vol->cache);
	csdfs_pool_free(vol->pool);
	for (int i = 0; i < CSDFS_STRIPES; i++)
		pthread_mutex_destroy(&vol->stripes[i]);
	pthread_mutex_destroy(&vol->lock);
	pthread_mutex_destroy(&vol->commit_lock);
	pthread_cond_destroy(&vol->commit_cv);
	free(vol->path);
	free(vol);
}

int csdfs_vol_open(const char *path, const struct csdfs_mount_opts *opts,
		   struct csdfs_vol **out, char *err, size_t errlen)
{
	char cpath[4096], mpath[4096];
	struct csdfs_vol *vol;
	struct stat st;
	int rc;

	if (stat(path, &st))
		ERR(-errno, "volume '%s' not found: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		ERR(-EUCLEAN, "'%s' is not a csdfs volume (not a directory)", path);
	snprintf(cpath, sizeof(cpath), "%s/%s", path, CSDFS_CONTAINER_NAME);
	snprintf(mpath, sizeof(mpath), "%s/%s", path, CSDFS_META_DIR_NAME);

	vol = calloc(1, sizeof(*vol));
	if (!vol)
		ERR(-ENOMEM, "out of memory");
	vol->path = strdup(path);
	vol->io.fd = vol->io.dfd = -1;
	pthread_mutex_init(&vol->lock, NULL);
	pthread_mutex_init(&vol->commit_lock, NULL);
	pthread_cond_init(&vol->commit_cv, NULL);
	for (int i = 0; i < CSDFS_STRIPES; i++)
		pthread_mutex_init(&vol->stripes[i], NULL);
	vol->commit_ms = opts && opts->commit_ms ? opts->commit_ms : COMMIT_MS_DEFAULT;
	vol->gen = 1;

	rc = csdfs_itable_init(&vol->itable);
	if (rc) {
		snprintf(err, errlen, "out of memory for the inode table");
		goto out_free;
	}
	rc = csdfs_io_open_posix(&vol->io, cpath);
	if (rc == -ENOENT) {
		snprintf(err, errlen, "'%s' is not a csdfs volume (no container file)", path);
		goto out_free;
	}
	if (rc == -EBUSY) {
		snprintf(err, errlen, "volume '%s' is already mounted or in use by another process",
			 path);
		goto out_free;
	}
	if (rc) {
		snprintf(err, errlen, "cannot open '%s': %s", cpath, strerror(-rc));
		goto out_free;
	}
	if (opts && opts->io_hook) {
		rc = opts->io_hook(&vol->io, opts->io_hook_arg);
		if (rc) {
			snprintf(err, errlen, "I/O hook failed: %s", strerror(-rc));
			goto out_free;
		}
	}
	if (opts && opts->test_torn) {
		rc = csdfs_io_torn_install(&vol->io);
		if (rc) {
			snprintf(err, errlen, "cannot start the tearing test backend: %s",
				 strerror(-rc));
			goto out_free;
		}
	}
	vol->punch = !(opts && opts->no_punch);
	vol->no_atime = opts && opts->no_atime;
	vol->zero_runs = true;
	vol->compact_dead = !opts || !opts->compact_dead ? CSDFS_COMPACT_DEAD_DEFAULT :
			    opts->compact_dead < 0 ? 0 : (unsigned)opts->compact_dead;
	vol->cache_size = opts && opts->no_cache ? 0 :
			  opts && opts->cache_size ? opts->cache_size : CACHE_SIZE_DEFAULT;
	vol->cache = csdfs_cache_new(vol->cache_size);
	if (!vol->cache) {
		rc = -ENOMEM;
		snprintf(err, errlen, "out of memory for the chunk cache");
		goto out_free;
	}

	rc = csdfs_super_read(&vol->io, &vol->sb, err, errlen);
	if (rc)
		goto out_free;
	rc = csdfs_rec_order_check(vol->sb.incompat, csdfs_rec_host_le());
	if (rc) {
		snprintf(err, errlen, "volume '%s' holds metadata records in this big-endian host's byte order (made by a csdfs before little-endian records); this csdfs reads little-endian records only",
			 path);
		goto out_free;
	}
	/* A cache too small for one chunk per shard counts misses and keeps
	 * nothing; LMDB's mapped pages may take up to three quarters of
	 * cache_size from it (fit_cache_locked). Say so once, at mount: the
	 * chunk size is the volume's. */
	if (vol->cache_size && vol->cache_size / 4 < csdfs_cache_min_bytes(vol->sb.chunk_size))
		csdfs_log(LOG_WARNING, "cache_size %llu bytes is too small for %u-byte chunks: the chunk cache may keep nothing once the metadata takes its share; use at least %llu, or 0 to turn the cache off",
			  (unsigned long long)vol->cache_size, vol->sb.chunk_size,
			  (unsigned long long)csdfs_cache_min_bytes(vol->sb.chunk_size) * 4);
	if (!(vol->sb.incompat & CSDFS_FEATURE_INCOMPAT_SYNCED)) {
		/* Before the metadata layer commits the way an older csdfs
		 * would misread (format.h), make that csdfs refuse the volume. */
		rc = csdfs_super_upgrade(&vol->io, &vol->sb);
		if (rc) {
			snprintf(err, errlen, "cannot mark volume '%s' as using the metadata durability record: %s",
				 path, strerror(-rc));
			goto out_free;
		}
		csdfs_log(LOG_NOTICE, "volume '%s' now records metadata durability in meta/synced; csdfs versions before that refuse it",
			  path);
	}
	rc = csdfs_meta_open(mpath, false,
			     csdfs_meta_mapsize(vol->sb.total_blocks, vol->sb.logical_bytes),
			     opts ? opts->io_hook : NULL, opts ? opts->io_hook_arg : NULL,
			     &vol->meta);
	if (rc == -ENOENT) {
		snprintf(err, errlen, "volume '%s' has no metadata environment (%s/data.mdb missing)",
			 path, mpath);
		goto out_free;
	}
	if (rc == -EUCLEAN) {
		snprintf(err, errlen, "metadata environment of '%s' is corrupt or foreign: %s",
			 path, strerror(-rc));
		goto out_free;
	}
	if (rc) {
		snprintf(err, errlen, "cannot open the metadata environment of '%s': %s",
			 path, strerror(-rc));
		goto out_free;
	}
	csdfs_meta_set_companion(vol->meta, csdfs_vol_sync_container, vol);
	rc = csdfs_meta_begin(vol->meta, NULL, &vol->group);
	if (rc) {
		snprintf(err, errlen, "cannot read the metadata of '%s': %s", path, strerror(-rc));
		goto out_free;
	}
	vol->read_only = opts && opts->read_only;
	rc = csdfs_journal_load(vol, !vol->read_only && !(opts && opts->no_journal),
				err, errlen);
	if (rc)
		goto out_free;
	/* Segments hold at most the region less one block of headers. */
	if (vol->journal.blocks && !vol->read_only && !(opts && opts->no_journal))
		csdfs_meta_set_redo(vol->meta, (vol->journal.blocks - 1) * CSDFS_BLOCK_SIZE);
	rc = load_state(vol, err, errlen);
	if (rc)
		goto out_free;
	if (!vol->read_only) {
		rc = csdfs_orphan_reclaim_all(vol);
		if (!rc) {
			pthread_mutex_lock(&vol->lock);
			rc = csdfs_vol_commit_locked(vol);
			pthread_mutex_unlock(&vol->lock);
		}
		if (rc) {
			snprintf(err, errlen, "cannot reclaim unlinked files: %s", strerror(-rc));
			goto out_free;
		}
	}
	if (!(opts && opts->no_commit_thread)) {
		rc = csdfs_vol_start(vol);
		if (rc) {
			snprintf(err, errlen, "cannot start the commit thread: %s", strerror(-rc));
			goto out_free;
		}
	}
	*out = vol;
	return 0;

out_free:
	vol_free(vol);
	return rc;
}

int csdfs_vol_close(struct csdfs_vol *vol)
{
	int rc = 0;

	if (!vol)
		return 0;
	csdfs_vol_stop(vol);
	if (!vol->read_only && !vol->failed) {
		/* The kernel may not forget every inode at unmount: anything
		 * still orphaned now is unreferenced, free it before the last
		 * commit. */
		rc = csdfs_orphan_reclaim_all(vol);
		pthread_mutex_lock(&vol->lock);
		if (!rc)
			rc = csdfs_vol_commit_locked(vol);
		pthread_mutex_unlock(&vol->lock);
	}
	vol_free(vol);
	return rc;
}

/* ---- statfs and the space left for writers ------------------------------ */

/*
 * The space left, in blocks of logical data (vol->lock held): *@logical_free
 * is the logical capacity not taken by stored chunks; the return value is
 * what a writer can still fill: the free container blocks beyond the
 * reserve at the ratio achieved so far (never better than 1:1 for data not
 * yet seen), and never past *@logical_free. @exact counts only free runs a
 * whole raw chunk fits in (statfs must not promise fragments); otherwise
 * every free block counts. Both cost the same on any volume size.
 */
static uint64_t writable_blocks_locked(struct csdfs_vol *vol, bool exact,
				       uint64_t *logical_free)
{
	struct csdfs_alloc *a = &vol->alloc;
	uint64_t cap_blocks = vol->sb.logical_bytes / CSDFS_BLOCK_SIZE;
	uint64_t used_phys = vol->counters.used_blocks;
	uint64_t mapped = vol->counters.logical_used;
	uint64_t free_phys, est;
	double ratio;

	if (exact) {
		free_phys = csdfs_alloc_usable(a);
	} else {
		free_phys = a->navail + (a->head_end - a->head) / CSDFS_BLOCK_SIZE;
		for (size_t i = 0; i < a->nquar; i++)
			free_phys += a->quar[i].count;
	}
	free_phys = free_phys > a->reserve ? free_phys - a->reserve : 0;
	ratio = used_phys ? (double)mapped / ((double)used_phys * CSDFS_BLOCK_SIZE) : 1.0;
	if (ratio < 1.0)
		ratio = 1.0;
	*logical_free = cap_blocks > mapped / CSDFS_BLOCK_SIZE ?
			cap_blocks - mapped / CSDFS_BLOCK_SIZE : 0;
	est = (uint64_t)((double)free_phys * ratio);
	return est < *logical_free ? est : *logical_free;
}

/*
 * Size (f_blocks) is the logical capacity. Used (f_blocks - f_bfree) is the
 * logical capacity taken by stored chunks, a whole chunk each
 * (counters.logical_used: what the logical limit is enforced on; it moves
 * only when chunks are stored or dropped, never with the ratio). Avail
 * (f_bavail) is what still fits (writable_blocks_locked). Size - Used -
 * Avail is logical capacity the physical space cannot back at that ratio.
 */
int csdfs_fs_statfs(struct csdfs_vol *vol, struct statvfs *sv)
{
	uint64_t logical_free;

	memset(sv, 0, sizeof(*sv));
	pthread_mutex_lock(&vol->lock);
	sv->f_bavail = writable_blocks_locked(vol, true, &logical_free);
	sv->f_files = 1ull << 32;
	sv->f_ffree = sv->f_files - vol->counters.inodes;
	pthread_mutex_unlock(&vol->lock);

	sv->f_bsize = CSDFS_BLOCK_SIZE;
	sv->f_frsize = CSDFS_BLOCK_SIZE;
	sv->f_blocks = vol->sb.logical_bytes / CSDFS_BLOCK_SIZE;
	sv->f_bfree = logical_free;
	sv->f_favail = sv->f_ffree;
	sv->f_namemax = 255;
	return 0;
}

bool csdfs_fs_space_short(struct csdfs_vol *vol, uint64_t margin, bool exact)
{
	uint64_t avail, logical_free;

	pthread_mutex_lock(&vol->lock);
	avail = writable_blocks_locked(vol, exact, &logical_free);
	pthread_mutex_unlock(&vol->lock);
	return !avail || avail < (margin + CSDFS_BLOCK_SIZE - 1) / CSDFS_BLOCK_SIZE;
}
