/* SPDX-License-Identifier: MIT */
/*
 * libcsdfs public API: everything the FUSE glue, the tools and the tests
 * need, with no FUSE type in sight. Every function returns 0 (or a byte
 * count) on success and -errno on failure; on-disk corruption is -EUCLEAN.
 *
 * Threads: every csdfs_fs_* function may be called from any thread,
 * concurrently. Lock order inside the library (written once, here):
 *   inode io_lock  ->  chunk stripe locks  ->  csdfs_vol.lock
 * Leaves, which may be taken under any of these and never hold another:
 * the inode table's lock (inode.c) and the chunk cache's shard locks
 * (cache.c; under csdfs_vol.lock when the cache is resized or counted).
 * csdfs_vol.lock guards the LMDB group transaction, the allocator, the
 * volume counters and the commit state; it is never held across container
 * data I/O except during a group commit's fdatasync.
 */
#ifndef CSDFS_CSDFS_H
#define CSDFS_CSDFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include "csdfs/codec.h"
#include "csdfs/format.h"

struct csdfs_vol;
struct csdfs_io;

/* Volume creation parameters (csdfs-mkfs). */
struct csdfs_mkfs_opts {
	uint64_t size;             /* container bytes */
	uint64_t logical_size;     /* logical capacity; 0 = size * multiplier */
	double multiplier;         /* used when logical_size == 0 */
	struct csdfs_codec_spec codec;
	uint32_t chunk_size;
	bool force;
};

/* The largest container csdfs-mkfs makes: 4 PiB (2^40 blocks). */
#define CSDFS_VOL_SIZE_MAX (1ull << 52)

/*
 * csdfs_vol_create - create a volume directory at @path.
 * @err: receives a one-line reason on failure (no newline).
 * @return 0, -EEXIST (a volume is there and !force, or a non-volume,
 * non-empty directory), -EINVAL (bad option), -ENOSPC (host too small),
 * -errno. On failure nothing it made is left: a directory it created is
 * removed, an existing one is left empty.
 */
int csdfs_vol_create(const char *path, const struct csdfs_mkfs_opts *opts,
		     char *err, size_t errlen);

/*
 * csdfs_vol_wait_closed - wait up to @timeout_ms (polling every 100 ms) for
 * the volume at @path to be free of its lock, as when a daemon is still
 * closing it after fusermount3 -u returned. A volume that is still mounted
 * (a mount's source names it) is not waited for. @waiting, if not NULL, is
 * called once, before the first wait, with @path.
 * For the offline tools, before they open the volume; the lock is not kept.
 * @return 0 (free, or no container there: the tool's open reports that),
 * -EBUSY (mounted, or still locked at the deadline).
 */
int csdfs_vol_wait_closed(const char *path, unsigned timeout_ms,
			  void (*waiting)(const char *path));

struct csdfs_mount_opts {
	unsigned commit_ms;        /* group-commit interval; 0 = default */
	bool read_only;            /* fsck: no writes, no commit thread */
	bool no_commit_thread;     /* offline tools */
	bool no_journal;           /* fsync commits LMDB in full (no journal
	                            * made; an existing one is still replayed) */
	bool no_punch;             /* keep freed ranges allocated in the host */
	bool no_atime;             /* reads never update access times */
	/* Background compaction starts once this percent of the used blocks'
	 * bytes is dead: 0 = CSDFS_COMPACT_DEAD_DEFAULT, -1 = off. */
	int compact_dead;
	uint64_t cache_size;       /* decoded-chunk cache bytes; 0 = default */
	bool no_cache;             /* no decoded-chunk cache at all */
	/* Tests: called on each file's I/O right after it is opened, from
	 * the opening thread: the container's (io->role CSDFS_IO_CONTAINER),
	 * then the metadata files' (CSDFS_IO_META_*, see csdfs_meta_open).
	 * A hook meant for the container alone checks io->role. E.g.
	 * csdfs_io_fault_install, with one fault for all of them: the Nth
	 * call then counts across the volume's files. A non-zero return
	 * fails the open. */
	int (*io_hook)(struct csdfs_io *io, void *arg);
	void *io_hook_arg;
	/* Tests only: the container's I/O goes through the tearing backend
	 * (csdfs_io_torn_install), so the crash checkers can prove they see
	 * torn writes. Never for real data. */
	bool test_torn;
};

#define CSDFS_COMPACT_DEAD_DEFAULT 25

/*
 * csdfs_vol_open - open a volume for exclusive use (flock), verify its
 * superblock and LMDB environment, rebuild the allocator, reclaim orphans
 * left by a crash, start the commit thread.
 * @err: receives a one-line reason naming the problem on failure.
 * @return 0, -ENOENT (missing), -EBUSY (in use/mounted), -EUCLEAN (foreign,
 * corrupt, truncated), -EPROTONOSUPPORT (newer format / unknown incompat
 * feature), -errno.
 */
int csdfs_vol_open(const char *path, const struct csdfs_mount_opts *opts,
		   struct csdfs_vol **out, char *err, size_t errlen);

/* Start the background commit thread of a volume opened with
 * no_commit_thread (the daemon does this after it has forked). */
int csdfs_vol_start(struct csdfs_vol *vol);

/* Commit everything, stop threads, release the volume. Returns the first
 * error of the final commit, if any. */
int csdfs_vol_close(struct csdfs_vol *vol);

/* Credentials of the calling process, for owners of new inodes. */
struct csdfs_cred {
	uid_t uid;
	gid_t gid;
};

/* Attribute-set mask for csdfs_fs_setattr (mirrors, but is not, FUSE's). */
#define CSDFS_SET_MODE      0x01u
#define CSDFS_SET_UID       0x02u
#define CSDFS_SET_GID       0x04u
#define CSDFS_SET_SIZE      0x08u
#define CSDFS_SET_ATIME     0x10u
#define CSDFS_SET_MTIME     0x20u
#define CSDFS_SET_ATIME_NOW 0x40u
#define CSDFS_SET_MTIME_NOW 0x80u
#define CSDFS_SET_CTIME     0x100u

/* The kernel opened @ino for writing. With a writeback cache it may then
 * hold dirty pages of it (mmap: even after close) until it forgets the
 * inode; csdfs_fs_had_writer() says whether that can be the case. */
void csdfs_fs_note_writer(struct csdfs_vol *vol, uint64_t ino);
bool csdfs_fs_had_writer(struct csdfs_vol *vol, uint64_t ino);

/* Run @fn(@arg) while @ino's data is still what a csdfs_fs_read_with()
 * that reported @gen read: no writer opened it and nothing resized or
 * punched it since; writers and truncate wait until @fn returns. Returns
 * what @fn returned, or -ESTALE without calling it. */
int csdfs_fs_if_unchanged(struct csdfs_vol *vol, uint64_t ino, uint64_t gen,
			  int (*fn)(void *arg), void *arg);

/* The kernel caches st_blocks from attribute replies. Record what a reply
 * gave it; csdfs_fs_blocks_changed() then says whether the file's physical
 * blocks have moved since (true when nothing was recorded), so that the
 * cached value is dropped only when it is stale. */
void csdfs_fs_note_shown_blocks(struct csdfs_vol *vol, uint64_t ino, uint64_t blocks);
/* A reply the kernel may or may not keep gave it @blocks: forget what was
 * recorded unless that is the same. */
void csdfs_fs_forget_shown_blocks(struct csdfs_vol *vol, uint64_t ino, uint64_t blocks);
bool csdfs_fs_blocks_changed(struct csdfs_vol *vol, uint64_t ino);

/* Drop set-user-ID, set-group-ID and security.capability from anything
 * but a directory, as an unprivileged write or truncate, or a chown, does:
 * 1 if it dropped any, 0 if there was nothing to drop, or -errno. */
int csdfs_fs_kill_privs(struct csdfs_vol *vol, uint64_t ino);

/* Rename flags (same values as the kernel's RENAME_*). */
#define CSDFS_RENAME_NOREPLACE 0x1u
#define CSDFS_RENAME_EXCHANGE  0x2u
#define CSDFS_RENAME_WHITEOUT  0x4u

/* Namespace and attributes. @st receives the resulting attributes. */
int csdfs_fs_getattr(struct csdfs_vol *vol, uint64_t ino, struct stat *st);
int csdfs_fs_lookup(struct csdfs_vol *vol, uint64_t parent, const char *name,
		    struct stat *st);
int csdfs_fs_setattr(struct csdfs_vol *vol, uint64_t ino,
		     const struct stat *in, unsigned mask, struct stat *st);
/* Creates a regular file, directory, fifo, socket or device (by @mode). */
int csdfs_fs_mknod(struct csdfs_vol *vol, const struct csdfs_cred *cred,
		   uint64_t parent, const char *name, mode_t mode, dev_t rdev,
		   struct stat *st);
int csdfs_fs_symlink(struct csdfs_vol *vol, const struct csdfs_cred *cred,
		     uint64_t parent, const char *name, const char *target,
		     struct stat *st);
/* @return target length copied into @buf (not NUL-terminated). */
int csdfs_fs_readlink(struct csdfs_vol *vol, uint64_t ino, char *buf,
		      size_t len);
int csdfs_fs_link(struct csdfs_vol *vol, uint64_t ino, uint64_t parent,
		  const char *name, struct stat *st);
int csdfs_fs_unlink(struct csdfs_vol *vol, uint64_t parent, const char *name);
int csdfs_fs_rmdir(struct csdfs_vol *vol, uint64_t parent, const char *name);
/*
 * csdfs_fs_rename_as - rename @name in @parent to @newname in @newparent,
 * as renameat2(2) with @flags (CSDFS_RENAME_*). With CSDFS_RENAME_WHITEOUT
 * the same operation also leaves a whiteout at the old name (a character
 * device 0/0, mode 0, owned by @cred as csdfs_fs_mknod would make it; what
 * overlayfs needs of its upper layer): after a crash the old name is the
 * source or the whiteout, never both nor neither. Renaming a name onto
 * another link of the same inode does nothing, and makes no whiteout.
 * @return 0, -ENOENT, -EEXIST (NOREPLACE), -ENOTDIR, -EISDIR, -ENOTEMPTY,
 * -EINVAL (bad flags: EXCHANGE with NOREPLACE or WHITEOUT, WHITEOUT
 * without @cred; or a directory moved below itself), -ENOSPC, -errno.
 * csdfs_fs_rename is the same without credentials (no WHITEOUT).
 */
int csdfs_fs_rename_as(struct csdfs_vol *vol, const struct csdfs_cred *cred,
		       uint64_t parent, const char *name, uint64_t newparent,
		       const char *newname, unsigned flags);
int csdfs_fs_rename(struct csdfs_vol *vol, uint64_t parent, const char *name,
		    uint64_t newparent, const char *newname, unsigned flags);

/* Kernel reference counting: lookup/create replies add one; forget drops
 * @n. An unlinked inode is destroyed when its count reaches zero. */
void csdfs_fs_ref(struct csdfs_vol *vol, uint64_t ino);
void csdfs_fs_forget(struct csdfs_vol *vol, uint64_t ino, uint64_t n);

/* Directory listing: a snapshot taken at the first read (offset 0). */
struct csdfs_dirent {
	uint64_t ino;
	mode_t type;
	char *name;
};
struct csdfs_dirsnap {
	struct csdfs_dirent *ents;
	size_t n;
};
int csdfs_fs_readdir_snapshot(struct csdfs_vol *vol, uint64_t ino,
			      struct csdfs_dirsnap *snap);
void csdfs_dirsnap_free(struct csdfs_dirsnap *snap);

/* Data. */
ssize_t csdfs_fs_read(struct csdfs_vol *vol, uint64_t ino, char *buf,
		      size_t size, uint64_t off);
/* The same, also handing @around the decoded rest of a chunk the read
 * covers in part, for the kernel's page cache (see file.c). @around
 * returns non-zero to stop being called. */
typedef int (*csdfs_around_fn)(void *arg, uint64_t gen, uint64_t off,
			       const char *buf, size_t n);
ssize_t csdfs_fs_read_with(struct csdfs_vol *vol, uint64_t ino, char *buf,
			   size_t size, uint64_t off, csdfs_around_fn around,
			   void *arg);
/* csdfs_fs_write flags. */
#define CSDFS_WRITE_SYNC       0x1u /* durable on return (O_SYNC / O_DSYNC) */
#define CSDFS_WRITE_KEEP_TIMES 0x2u /* leave mtime/ctime alone: the kernel's
				     * writeback cache stamped them and sends
				     * them with a setattr of its own */
ssize_t csdfs_fs_write(struct csdfs_vol *vol, uint64_t ino, const char *buf,
		       size_t size, uint64_t off, unsigned flags);
int csdfs_fs_fsync(struct csdfs_vol *vol, uint64_t ino);
int csdfs_fs_fallocate(struct csdfs_vol *vol, uint64_t ino, int mode,
		       uint64_t off, uint64_t len);
/* @whence: SEEK_DATA or SEEK_HOLE. @return 0 with *@res, -ENXIO. */
int csdfs_fs_lseek(struct csdfs_vol *vol, uint64_t ino, uint64_t off,
		   int whence, uint64_t *res);
int csdfs_fs_statfs(struct csdfs_vol *vol, struct statvfs *sv);

/*
 * A regular file's stored chunks by compressed size, for the question a
 * CSD user asks of 16 KiB InnoDB pages ("how many fit in 4K, 8K, 12K?").
 * stored[i] counts the chunks stored compressed in more than i * 4 KiB and
 * at most (i + 1) * 4 KiB (byte-exact stored length, before any packing or
 * rounding); raw the chunks stored uncompressed (codec none, whether the
 * policy said so or compression saved nothing); zero the chunks within
 * st_size that are not stored (holes, all-zero chunks). A partial last
 * chunk counts as a chunk. Sum of all = ceil(st_size / chunk_size).
 */
#define CSDFS_HIST_BUCKETS (CSDFS_CHUNK_MAX / CSDFS_BLOCK_SIZE)
struct csdfs_histogram {
	uint32_t chunk_size;       /* the file's chunk size */
	uint64_t stored[CSDFS_HIST_BUCKETS];
	uint64_t raw;
	uint64_t zero;
};

/*
 * csdfs_fs_histogram - fill @h for @ino: one read operation that walks the
 * file's chunk records once, O(chunks) in time and O(1) in memory; a file
 * of 10^6 chunks is a scan of 10^6 records (24 bytes each) in that one
 * call. Like every read operation it holds the volume lock throughout, so
 * other operations wait for the scan. Any thread.
 * @return 0, -ENOENT (no such inode), -ENODATA (not a regular file), or
 * -EUCLEAN (a chunk record that is not one).
 */
int csdfs_fs_histogram(struct csdfs_vol *vol, uint64_t ino,
		       struct csdfs_histogram *h);


/*
 * csdfs_fs_space_short - whether writes that reach the volume only later
 * (a writeback cache's dirty pages) must be refused now: nothing, or less
 * than @margin bytes, is left to write (statfs's f_bavail estimate, which
 * counts both the physical space beyond the reserve and the logical
 * capacity). The daemon passes the dirty data the kernel may hold for the
 * mount: refusing more once less than that is free keeps what was already
 * accepted storable (a delayed allocation's reservation, at the mount's
 * grain). Not @exact, it is O(1) in the volume's size but also counts
 * free fragments too small for a chunk; @exact counts as statfs does
 * (walking the free map), for when a data write has just failed.
 */
bool csdfs_fs_space_short(struct csdfs_vol *vol, uint64_t margin, bool exact);

/* Extended attributes. get/list return the value length (or the needed
 * length when @size is 0), -ERANGE if @size is too small. */
int csdfs_fs_setxattr(struct csdfs_vol *vol, uint64_t ino, const char *name,
		      const void *value, size_t size, int flags);
int csdfs_fs_getxattr(struct csdfs_vol *vol, uint64_t ino, const char *name,
		      void *value, size_t size);
int csdfs_fs_listxattr(struct csdfs_vol *vol, uint64_t ino, char *list,
		       size_t size);
int csdfs_fs_removexattr(struct csdfs_vol *vol, uint64_t ino,
			 const char *name);

/* Volume-level: commit everything now and wait until it is durable. */
int csdfs_vol_sync(struct csdfs_vol *vol);

/* fsck: check every invariant of the volume at @path (not mounted).
 * @repair: fix what is safe. Reports each problem through csdfs_log.
 * @return fsck(8) exit code bits: 0 clean, 1 corrected, 4 uncorrected,
 * 8 operational error. */
struct csdfs_fsck_opts {
	bool repair;
	bool verify_data;
	bool verbose;
};
int csdfs_fsck(const char *path, const struct csdfs_fsck_opts *opts);

/* Parse a size: decimal digits with an optional binary suffix K, M, G, T,
 * P or E (either case, optionally followed by "i" and/or "B": 4K, 16MiB,
 * 1PB). No sign, blank or fraction.
 * @return 0, -EINVAL (not a size), -ERANGE (more than 2^64 - 1 bytes). */
int csdfs_parse_size(const char *text, uint64_t *out);

/* Parse a whole decimal number, digits only.
 * @return 0, -EINVAL (not a number), -ERANGE (more than 2^64 - 1). */
int csdfs_parse_u64(const char *text, uint64_t *out);

#endif
