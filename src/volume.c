/* SPDX-License-Identifier: MIT */
/*
 * The volume: creation, open/verify/close, operations (nested LMDB
 * transactions) and group commit.
 *
 * Group commit: all operations since the last commit live in one top-level
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
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "csdfs/csum.h"
#include "csdfs/log.h"
#include "csdfs/pool.h"
#include "vol.h"

#define COMMIT_MS_DEFAULT 1000u
#define GROUP_OPS_MAX 8192u
/* LMDB keeps every page a group dirties in memory until it commits (about
 * 140 bytes per chunk changed): commit after this many chunk changes so
 * the daemon's memory stays bounded whatever the write rate. */
#define GROUP_CHUNKS_MAX 2048u
#define PUNCH_MIN_BLOCKS 256u   /* 1 MiB */
#define CACHE_SIZE_DEFAULT (64ull << 20)

int64_t csdfs_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int csdfs_parse_size(const char *text, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!text || !*text || *text == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno || end == text)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	case '\0': break;
	default: return -EINVAL;
	}
	if (*end == 'i' && shift)
		end++;
	if ((*end == 'B' || *end == 'b') && shift)
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (~0ull >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

static uint64_t meta_mapsize(uint64_t total_blocks, uint64_t logical_bytes)
{
	/* ~100 bytes of metadata per 16 KiB chunk, generously doubled. */
	return (1ull << 30) + logical_bytes / 64 + total_blocks * 16;
}

/* ---- creation ---------------------------------------------------------- */

static bool dir_is_empty(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	bool empty = true;

	if (!d)
		return false;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			empty = false;
			break;
		}
	}
	closedir(d);
	return empty;
}

static bool looks_like_volume(const char *path)
{
	char p[4096];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", path, CSDFS_CONTAINER_NAME);
	if (!stat(p, &st))
		return true;
	snprintf(p, sizeof(p), "%s/%s", path, CSDFS_META_DIR_NAME);
	return !stat(p, &st);
}

static int init_meta(const char *metadir, const struct csdfs_super *sb)
{
	struct csdfs_counters_disk ctr;
	struct csdfs_inode_disk root;
	struct csdfs_meta *meta;
	struct csdfs_txn *txn;
	uint8_t key[8];
	uint64_t v, first = CSDFS_FIRST_DATA_BLOCK;
	uint32_t ver = htole32(CSDFS_FORMAT_VERSION);
	int64_t now = csdfs_now_ns();
	int rc;

	rc = csdfs_meta_open(metadir, true,
			     meta_mapsize(sb->total_blocks, sb->logical_bytes), &meta);
	if (rc)
		return rc;
	rc = csdfs_meta_begin(meta, NULL, &txn);
	if (rc)
		goto out_close;
	memset(&root, 0, sizeof(root));
	root.mode = S_IFDIR | 0755;
	root.uid = getuid();
	root.gid = getgid();
	root.nlink = 2;
	root.atime_ns = root.mtime_ns = root.ctime_ns = root.btime_ns = now;
	root.parent = CSDFS_ROOT_INO;
	root.chunk_size = sb->chunk_size;
	root.codec = sb->codec.id;
	root.level = sb->codec.level;
	memset(&ctr, 0, sizeof(ctr));
	ctr.inodes = 1;
	rc = csdfs_meta_put(txn, CSDFS_DB_META, "uuid", 4, sb->uuid, 16, 0);
	if (!rc)
		rc = csdfs_meta_put(txn, CSDFS_DB_META, "version", 7, &ver, 4, 0);
	v = htole64(CSDFS_ROOT_INO + 1);
	if (!rc)
		rc = csdfs_meta_put(txn, CSDFS_DB_META, "next_ino", 8, &v, 8, 0);
	if (!rc)
		rc = csdfs_meta_put(txn, CSDFS_DB_META, "counters", 8, &ctr,
				    sizeof(ctr), 0);
	if (!rc)
		rc = csdfs_irec_store(txn, CSDFS_ROOT_INO, &root);
	v = htole64(sb->total_blocks - first);
	csdfs_be64_put(key, first);
	if (!rc)
		rc = csdfs_meta_put(txn, CSDFS_DB_FREE, key, 8, &v, 8, 0);
	if (rc) {
		csdfs_meta_abort(txn);
		goto out_close;
	}
	rc = csdfs_meta_commit(txn);
out_close:
	csdfs_meta_close(meta);
	return rc;
}

#define ERR(rc, ...) do { snprintf(err, errlen, __VA_ARGS__); return rc; } while (0)

int csdfs_vol_create(const char *path, const struct csdfs_mkfs_opts *o,
		     char *err, size_t errlen)
{
	char cpath[4096], mpath[4096], f[4200];
	struct csdfs_super sb;
	struct csdfs_io io;
	struct stat st;
	uint64_t logical;
	int fd, rc;

	if (strlen(path) > 3000)
		ERR(-ENAMETOOLONG, "volume path is too long");
	if (o->size < (64ull << 20))
		ERR(-EINVAL, "size %llu is too small (minimum 64M)",
		    (unsigned long long)o->size);
	if (o->size > (1ull << 52))
		ERR(-EINVAL, "size %llu is too large (maximum 4P)",
		    (unsigned long long)o->size);
	if (o->chunk_size < CSDFS_CHUNK_MIN || o->chunk_size > CSDFS_CHUNK_MAX ||
	    (o->chunk_size & (o->chunk_size - 1)))
		ERR(-EINVAL, "chunk size %u is invalid (a power of two from 4K to 128K)",
		    o->chunk_size);
	if (o->codec.id >= CSDFS_CODEC_COUNT)
		ERR(-EINVAL, "unknown codec");
	if (o->logical_size) {
		logical = o->logical_size;
	} else {
		if (!(o->multiplier >= 1.0 && o->multiplier <= 16.0))
			ERR(-EINVAL, "multiplier %g is invalid (1.0 to 16.0)",
			    o->multiplier);
		logical = (uint64_t)((double)o->size * o->multiplier);
	}
	if (logical < o->size)
		ERR(-EINVAL, "logical size %llu is below the physical size %llu",
		    (unsigned long long)logical, (unsigned long long)o->size);
	if (logical > 16 * o->size)
		ERR(-EINVAL, "logical size is more than 16x the physical size");

	snprintf(cpath, sizeof(cpath), "%s/%s", path, CSDFS_CONTAINER_NAME);
	snprintf(mpath, sizeof(mpath), "%s/%s", path, CSDFS_META_DIR_NAME);
	if (!stat(path, &st)) {
		if (!S_ISDIR(st.st_mode))
			ERR(-EEXIST, "'%s' exists and is not a directory", path);
		if (looks_like_volume(path)) {
			if (!o->force)
				ERR(-EEXIST, "'%s' already holds a volume (use --force to overwrite)",
				    path);
			/* Refuse to clobber a volume someone has mounted. */
			rc = csdfs_io_open_posix(&io, cpath);
			if (rc == -EBUSY)
				ERR(-EBUSY, "'%s' is mounted or in use; unmount it first", path);
			if (!rc)
				csdfs_io_close(&io);
			unlink(cpath);
			snprintf(f, sizeof(f), "%s/data.mdb", mpath);
			unlink(f);
			snprintf(f, sizeof(f), "%s/lock.mdb", mpath);
			unlink(f);
			snprintf(f, sizeof(f), "%s/synced", mpath);
			unlink(f);
		} else if (!dir_is_empty(path)) {
			ERR(-EEXIST, "'%s' is a non-empty directory that is not a csdfs volume",
			    path);
		}
		chmod(path, 0700);
	} else if (errno != ENOENT) {
		ERR(-errno, "cannot access '%s': %s", path, strerror(errno));
	} else if (mkdir(path, 0700)) {
		ERR(-errno, "cannot create '%s': %s", path, strerror(errno));
	}
	if (mkdir(mpath, 0700) && errno != EEXIST)
		ERR(-errno, "cannot create '%s': %s", mpath, strerror(errno));

	fd = open(cpath, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		ERR(-errno, "cannot create '%s': %s", cpath, strerror(errno));
	/* Preallocate all of it: physical space is promised up front. */
	rc = posix_fallocate(fd, 0, (off_t)o->size);
	if (rc) {
		close(fd);
		unlink(cpath);
		if (rc == ENOSPC)
			ERR(-ENOSPC, "the host filesystem has no room for %llu bytes",
			    (unsigned long long)o->size);
		ERR(-rc, "cannot preallocate '%s': %s", cpath, strerror(rc));
	}
	close(fd);

	memset(&sb, 0, sizeof(sb));
	if (getrandom(sb.uuid, sizeof(sb.uuid), 0) != sizeof(sb.uuid))
		ERR(-EIO, "cannot get random bytes for the volume uuid");
	sb.total_blocks = o->size / CSDFS_BLOCK_SIZE;
	sb.logical_bytes = logical / CSDFS_BLOCK_SIZE * CSDFS_BLOCK_SIZE;
	sb.chunk_size = o->chunk_size;
	sb.atomic_unit = o->chunk_size > 16384 ? o->chunk_size : 16384;
	sb.codec = o->codec;

	rc = csdfs_io_open_posix(&io, cpath);
	if (rc)
		ERR(rc, "cannot open '%s': %s", cpath, strerror(-rc));
	rc = csdfs_super_write(&io, &sb);
	if (!rc)
		rc = csdfs_io_sync(&io);
	csdfs_io_close(&io);
	if (rc)
		ERR(rc, "cannot write the superblock: %s", strerror(-rc));
	rc = init_meta(mpath, &sb);
	if (rc)
		ERR(rc, "cannot create the metadata environment: %s", strerror(-rc));
	fd = open(path, O_RDONLY | O_DIRECTORY);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	return 0;
}

/* ---- operations ---------------------------------------------------------- */

static int group_commit(struct csdfs_vol *vol, uint64_t min_chunks);

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

void csdfs_op_touch(struct csdfs_op *op, uint64_t ino)
{
	/* An inode nobody references yet starts with dirty_gen = the open
	 * generation (see csdfs_inode_get), so skipping it there is safe. */
	csdfs_inode_touch(op->vol, ino, op->vol->gen);
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

/*
 * Bytes this thread has passed to write-family calls (LMDB's own writes
 * happen in the committing thread), for write amplification; 0 if unknown.
 * Read twice per commit under vol->lock, so each thread keeps its
 * /proc/thread-self/io open (closed when it exits; reopened in a forked
 * child, where the inherited one names the parent's thread).
 */
static pthread_once_t wchar_once = PTHREAD_ONCE_INIT;
static pthread_key_t wchar_key;    /* this thread's fd + 1; 0: none */
static bool wchar_ok;              /* the key exists */
static unsigned wchar_fork_gen;
static _Thread_local unsigned wchar_gen;

static void wchar_close(void *p)
{
	close((int)(intptr_t)p - 1);
}

static void wchar_forked(void)
{
	wchar_fork_gen++;
}

static void wchar_init(void)
{
	wchar_ok = pthread_key_create(&wchar_key, wchar_close) == 0 &&
		   pthread_atfork(NULL, NULL, wchar_forked) == 0;
}

static uint64_t thread_wchar(void)
{
	char buf[512];
	const char *p;
	ssize_t n;
	int fd;

	pthread_once(&wchar_once, wchar_init);
	if (!wchar_ok)
		return 0;
	fd = (int)(intptr_t)pthread_getspecific(wchar_key) - 1;
	if (fd >= 0 && wchar_gen != wchar_fork_gen) {
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		fd = open("/proc/thread-self/io", O_RDONLY | O_CLOEXEC);
		wchar_gen = wchar_fork_gen;
		if (pthread_setspecific(wchar_key, (void *)(intptr_t)(fd + 1))) {
			if (fd >= 0)
				close(fd);
			return 0;
		}
		if (fd < 0)
			return 0;
	}
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strstr(buf, "wchar: ");
	return p ? strtoull(p + 7, NULL, 10) : 0;
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
	csdfs_log(LOG_CRIT, "group commit failed (%s): volume '%s' is now failed; "
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
static int sync_container(void *arg)
{
	struct csdfs_vol *vol = arg;

	return csdfs_io_sync(&vol->io);
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
	rc = csdfs_meta_put(vol->group, CSDFS_DB_META, "counters", 8,
			    &vol->counters, sizeof(vol->counters), 0);
	if (!rc) {
		uint64_t before = thread_wchar(), after;

		/* Counted into the next commit's counters. */
		rc = csdfs_meta_commit_group(vol->group);
		vol->group = NULL;
		after = thread_wchar();
		if (before && after > before)
			vol->counters.meta_bytes_written += after - before;
	}
	if (!rc)
		rc = csdfs_meta_begin(vol->meta, NULL, &vol->group);
	if (rc)
		return fail_locked(vol, rc);
	cg->gen = vol->gen;
	__atomic_add_fetch(&vol->gen, 1, __ATOMIC_RELAXED);  /* read unlocked */
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
	pthread_mutex_unlock(&vol->lock);
	if (rc || !cg.gen)
		return rc;

	rc = csdfs_meta_sync_on(vol->meta, vol->pool);
	pthread_mutex_lock(&vol->lock);
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

int csdfs_vol_commit_for(struct csdfs_vol *vol, uint64_t ino)
{
	uint64_t gen = ino ? csdfs_inode_dirty_gen(vol, ino) : UINT64_MAX;
	bool need;
	int rc;

	/* Behind a running commit: it may already cover @ino's change. */
	pthread_mutex_lock(&vol->commit_lock);
	pthread_mutex_lock(&vol->lock);
	need = gen > vol->durable_gen;
	rc = vol->failed;
	pthread_mutex_unlock(&vol->lock);
	if (need && !rc)
		rc = group_commit(vol, 0);
	pthread_mutex_unlock(&vol->commit_lock);
	return rc;
}

int csdfs_vol_sync(struct csdfs_vol *vol)
{
	return csdfs_vol_commit_for(vol, 0);
}

/*
 * cache_size is the daemon's memory for caching, and LMDB's metadata is a
 * cache too: its file is mapped, and a random reader touches all of it
 * between two csdfs_meta_release_pages() calls. So the decoded chunks get
 * what the metadata leaves, and never less than a quarter.
 */
static void fit_cache_locked(struct csdfs_vol *vol)
{
	uint64_t meta = csdfs_meta_file_bytes(vol->meta);
	uint64_t cap = vol->cache_size - vol->cache_size / 4;

	csdfs_cache_set_budget(vol->cache, vol->cache_size - (meta < cap ? meta : cap));
}

static void *commit_main(void *arg)
{
	struct csdfs_vol *vol = arg;
	unsigned rounds = 0;

	pthread_mutex_lock(&vol->lock);
	while (!vol->stopping) {
		struct timespec ts;
		bool due;

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
		/* Buffers freed by one worker thread stay in its malloc arena:
		 * hand free pages back now and then so the daemon's memory is
		 * its cache plus a bounded overhead; and LMDB's mapped pages,
		 * which grow with the metadata, are the page cache's to keep. */
		if (++rounds % 2 == 0)
			malloc_trim(0);
		pthread_mutex_lock(&vol->lock);
		csdfs_meta_release_pages(vol->meta);
		fit_cache_locked(vol);
	}
	pthread_mutex_unlock(&vol->lock);
	return NULL;
}

/* ---- open / close -------------------------------------------------------- */

static int load_state(struct csdfs_vol *vol, char *err, size_t errlen)
{
	struct csdfs_inode_disk root;
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	uint64_t next, free_blocks = 0, data_blocks;
	int rc;

	rc = csdfs_meta_get(vol->group, CSDFS_DB_META, "uuid", 4, &v);
	if (rc || v.len != 16)
		ERR(-EUCLEAN, "metadata has no volume uuid: not a csdfs metadata environment");
	if (memcmp(v.data, vol->sb.uuid, 16))
		ERR(-EUCLEAN, "metadata belongs to another volume (uuid mismatch with the container)");
	rc = csdfs_meta_get(vol->group, CSDFS_DB_META, "next_ino", 8, &v);
	if (rc || v.len != 8)
		ERR(-EUCLEAN, "metadata is corrupt: next inode number missing");
	memcpy(&next, v.data, 8);
	vol->next_ino = le64toh(next);
	rc = csdfs_meta_get(vol->group, CSDFS_DB_META, "counters", 8, &v);
	if (rc || v.len != sizeof(vol->counters))
		ERR(-EUCLEAN, "metadata is corrupt: volume counters missing");
	memcpy(&vol->counters, v.data, sizeof(vol->counters));
	rc = csdfs_irec_load(vol->group, CSDFS_ROOT_INO, &root);
	if (rc || !S_ISDIR(root.mode))
		ERR(-EUCLEAN, "metadata is corrupt: root directory missing");

	rc = csdfs_alloc_init(&vol->alloc, CSDFS_FIRST_DATA_BLOCK,
			      vol->sb.total_blocks);
	if (rc)
		ERR(rc, "out of memory for the allocator");
	rc = csdfs_cursor_open(vol->group, CSDFS_DB_FREE, &cur);
	if (rc)
		ERR(rc, "cannot read the free map: %s", strerror(-rc));
	for (rc = csdfs_cursor_first(cur, &k, &v); !rc;
	     rc = csdfs_cursor_next(cur, &k, &v)) {
		uint64_t s, n;

		if (k.len != 8 || v.len != 8) {
			rc = -EUCLEAN;
			break;
		}
		s = csdfs_be64_get(k.data);
		memcpy(&n, v.data, 8);
		n = le64toh(n);
		if (s < CSDFS_FIRST_DATA_BLOCK || !n || s + n > vol->sb.total_blocks) {
			rc = -EUCLEAN;
			break;
		}
		csdfs_alloc_mark_free(&vol->alloc, s, n);
		free_blocks += n;
	}
	csdfs_cursor_close(cur);
	if (rc != -ENOENT)
		ERR(-EUCLEAN, "metadata is corrupt: bad free map");
	data_blocks = vol->sb.total_blocks - CSDFS_FIRST_DATA_BLOCK;
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

/* Destroy every orphan (unlinked while open, then crashed or unmounted). */
static int reclaim_orphans(struct csdfs_vol *vol)
{
	for (;;) {
		struct csdfs_cursor *cur;
		struct csdfs_val k, v;
		struct csdfs_op op;
		uint64_t ino = 0;
		int rc;

		rc = csdfs_op_begin(vol, &op);
		if (rc)
			return rc;
		rc = csdfs_cursor_open(op.txn, CSDFS_DB_ORPHANS, &cur);
		if (!rc) {
			rc = csdfs_cursor_first(cur, &k, &v);
			ino = !rc && k.len == 8 ? csdfs_be64_get(k.data) : 0;
			csdfs_cursor_close(cur);
		}
		if (rc == -ENOENT) {
			csdfs_op_end(&op, 0);
			return 0;
		}
		if (!rc) {
			struct csdfs_inode_disk rec;
			uint8_t key[8];

			/* Only an inode that is really unlinked is freed; a stray
			 * record for a linked (or missing) one is just dropped. */
			rc = csdfs_irec_load(op.txn, ino, &rec);
			if (!rc && rec.nlink == 0) {
				rc = csdfs_inode_destroy(&op, ino);
			} else if (!rc || rc == -ENOENT) {
				csdfs_log(LOG_WARNING, "dropping stray orphan record for inode %llu",
					  (unsigned long long)ino);
				csdfs_be64_put(key, ino);
				rc = csdfs_meta_del(op.txn, CSDFS_DB_ORPHANS, key, 8);
			}
		}
		rc = csdfs_op_end(&op, rc);
		if (rc)
			return rc;
		csdfs_log(LOG_INFO, "reclaimed unlinked inode %llu", (unsigned long long)ino);
	}
}

static void vol_free(struct csdfs_vol *vol)
{
	if (vol->group)
		csdfs_meta_abort(vol->group);
	csdfs_meta_close(vol->meta);
	csdfs_io_close(&vol->io);
	csdfs_alloc_release(&vol->alloc);
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
	csdfs_itable_init(&vol->itable);
	vol->commit_ms = opts && opts->commit_ms ? opts->commit_ms : COMMIT_MS_DEFAULT;
	vol->gen = 1;

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
	vol->test_inplace = opts && opts->test_inplace;
	vol->punch = !(opts && opts->no_punch);
	/* In-place test writes change bytes under an unchanged key. */
	vol->cache_size = vol->test_inplace || (opts && opts->no_cache) ? 0 :
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
	if (!(vol->sb.incompat & CSDFS_FEATURE_INCOMPAT_SYNCED)) {
		/* Before the metadata layer commits the way an older csdfs
		 * would misread (format.h), make that csdfs refuse the volume. */
		rc = csdfs_super_write(&vol->io, &vol->sb);
		if (!rc)
			rc = csdfs_io_sync(&vol->io);
		if (rc) {
			snprintf(err, errlen, "cannot mark volume '%s' as using the metadata durability record: %s",
				 path, strerror(-rc));
			goto out_free;
		}
		vol->sb.incompat = CSDFS_FEATURE_INCOMPAT_SUPP;
		csdfs_log(LOG_NOTICE, "volume '%s' now records metadata durability in meta/synced; csdfs versions before that refuse it",
			  path);
	}
	rc = csdfs_meta_open(mpath, false,
			     meta_mapsize(vol->sb.total_blocks, vol->sb.logical_bytes),
			     &vol->meta);
	if (rc == -ENOENT) {
		snprintf(err, errlen, "volume '%s' has no metadata environment (%s/data.mdb missing)",
			 path, mpath);
		goto out_free;
	}
	if (rc) {
		snprintf(err, errlen, "metadata environment of '%s' is corrupt or foreign: %s",
			 path, strerror(-rc));
		goto out_free;
	}
	csdfs_meta_set_companion(vol->meta, sync_container, vol);
	rc = csdfs_meta_begin(vol->meta, NULL, &vol->group);
	if (rc) {
		snprintf(err, errlen, "cannot read the metadata of '%s': %s", path, strerror(-rc));
		goto out_free;
	}
	rc = load_state(vol, err, errlen);
	if (rc)
		goto out_free;
	vol->read_only = opts && opts->read_only;
	if (!vol->read_only) {
		rc = reclaim_orphans(vol);
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

int csdfs_vol_close(struct csdfs_vol *vol)
{
	int rc = 0;

	if (!vol)
		return 0;
	if (vol->commit_thread_running) {
		pthread_mutex_lock(&vol->lock);
		vol->stopping = true;
		pthread_cond_signal(&vol->commit_cv);
		pthread_mutex_unlock(&vol->lock);
		pthread_join(vol->commit_thread, NULL);
	}
	if (!vol->read_only && !vol->failed) {
		/* The kernel may not forget every inode at unmount: anything
		 * still orphaned now is unreferenced, free it before the last
		 * commit. */
		rc = reclaim_orphans(vol);
		pthread_mutex_lock(&vol->lock);
		if (!rc)
			rc = csdfs_vol_commit_locked(vol);
		pthread_mutex_unlock(&vol->lock);
	}
	vol_free(vol);
	return rc;
}

/* ---- statfs ---------------------------------------------------------- */

int csdfs_fs_statfs(struct csdfs_vol *vol, struct statvfs *sv)
{
	uint64_t cap_blocks, used_phys, free_phys, mapped, logical_free, est;
	double ratio;

	pthread_mutex_lock(&vol->lock);
	cap_blocks = vol->sb.logical_bytes / CSDFS_BLOCK_SIZE;
	used_phys = vol->counters.used_blocks;
	mapped = vol->counters.logical_used;
	/* Only space a whole raw chunk fits in counts as writable. */
	free_phys = csdfs_alloc_usable(&vol->alloc,
				       (vol->sb.chunk_size + CSDFS_BLOCK_SIZE - 1) /
				       CSDFS_BLOCK_SIZE);
	free_phys = free_phys > vol->alloc.reserve ? free_phys - vol->alloc.reserve : 0;
	memset(sv, 0, sizeof(*sv));
	sv->f_files = 1ull << 32;
	sv->f_ffree = sv->f_files - vol->counters.inodes;
	pthread_mutex_unlock(&vol->lock);

	/* Never promise more than fits at the ratio achieved so far (and
	 * never assume better than 1:1 for data not yet seen). */
	ratio = used_phys ? (double)mapped / ((double)used_phys * CSDFS_BLOCK_SIZE) : 1.0;
	if (ratio < 1.0)
		ratio = 1.0;
	logical_free = cap_blocks > mapped / CSDFS_BLOCK_SIZE ?
		       cap_blocks - mapped / CSDFS_BLOCK_SIZE : 0;
	est = (uint64_t)((double)free_phys * ratio);
	sv->f_bsize = CSDFS_BLOCK_SIZE;
	sv->f_frsize = CSDFS_BLOCK_SIZE;
	sv->f_blocks = cap_blocks;
	sv->f_bfree = est < logical_free ? est : logical_free;
	sv->f_bavail = sv->f_bfree;
	sv->f_favail = sv->f_ffree;
	sv->f_namemax = 255;
	return 0;
}
