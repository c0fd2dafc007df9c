/* SPDX-License-Identifier: MIT */
/*
 * The I/O seam: every byte csdfs itself reads, writes or syncs on disk goes
 * through one ops table: the container, and the metadata layer's own files
 * (its durability record, the meta-page rollback of data.mdb, and the sync
 * of data.mdb that LMDB would otherwise make). So tests can inject faults
 * (fail the Nth call with an errno) or drop unsynced writes without
 * touching the code that issues them. Not through it: the pages LMDB
 * itself writes into data.mdb (its own pwrite calls; only their sync
 * passes here), and directory syncs after a file is created.
 */
#ifndef CSDFS_IO_H
#define CSDFS_IO_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct csdfs_io;

/*
 * Which file a csdfs_io is, so that a hook (struct csdfs_mount_opts.io_hook,
 * csdfs_meta_open) can choose the ones it wraps. Set by whoever opens it;
 * a wrapper keeps it.
 */
enum csdfs_io_role {
	CSDFS_IO_CONTAINER,       /* the volume's container */
	CSDFS_IO_META_DATA,       /* the metadata environment's data.mdb */
	CSDFS_IO_META_RECORD,     /* the metadata durability record (meta/synced) */
	CSDFS_IO_NR_ROLES
};

/*
 * Every op may be called from any thread, concurrently with the others,
 * except close.
 */
struct csdfs_io_ops {
	/* Each returns 0 (all bytes transferred) or -errno; a read past the
	 * end of the file is -EIO, and so is a container write past the
	 * container's size (other files grow). */
	int (*pread)(struct csdfs_io *io, void *buf, size_t len, uint64_t off);
	/* Optional: the same for a large streaming read whose bytes the
	 * caller's consumer caches itself (the FUSE mount's page cache), so
	 * the host's page cache need not hold them too. The backend may read
	 * around it (O_DIRECT) where @buf, @len and @off allow. */
	int (*pread_direct)(struct csdfs_io *io, void *buf, size_t len,
			    uint64_t off);
	int (*pwrite)(struct csdfs_io *io, const void *buf, size_t len,
		      uint64_t off);
	/* Make the file's completed writes durable, whoever made them
	 * (fdatasync). */
	int (*sync)(struct csdfs_io *io);
	/* Give [off, off + len) back to the host (punch a hole). */
	int (*punch)(struct csdfs_io *io, uint64_t off, uint64_t len);
	/* Optional: make [off, off + len) (whole 4 KiB blocks) read as zeros
	 * while keeping its space (FALLOC_FL_ZERO_RANGE), so that a later
	 * write of part of one of its blocks needs no read of the rest.
	 * -EOPNOTSUPP where the host cannot. */
	int (*zero)(struct csdfs_io *io, uint64_t off, uint64_t len);
	/* Release the backend (closing the descriptors it owns); once, with
	 * no other call in flight. */
	void (*close)(struct csdfs_io *io);
};

struct csdfs_io {
	const struct csdfs_io_ops *ops;
	int fd;
	int dfd;                  /* posix: the container opened O_DIRECT for
	                           * reading, or -1 where the host refuses it
	                           * (and for plain files) */
	int dfd_refused;          /* posix: its reads failed with EINVAL, so
	                           * they are no longer tried (atomic) */
	uint64_t size;            /* file size in bytes when opened (the
	                           * container's never changes) */
	enum csdfs_io_role role;
	void *priv;               /* backend state (fault injection) */
};

/*
 * csdfs_io_open_posix - open the container file at @path read-write and
 * take an exclusive, non-blocking flock on it (one mount per volume).
 * @return 0, -EBUSY if another process holds the volume, -errno otherwise.
 */
int csdfs_io_open_posix(struct csdfs_io *io, const char *path);

/*
 * csdfs_io_open_file - open the plain file at @path read-write as @role:
 * one buffered descriptor, no lock, no O_DIRECT; writes may grow it. With
 * @create it is made (mode 0600) if missing.
 * @return 0 or -errno from open(2) (-ENOENT: missing, without @create).
 */
int csdfs_io_open_file(struct csdfs_io *io, const char *path, bool create,
		       enum csdfs_io_role role);

/*
 * csdfs_io_wrap_fd - the seam over a descriptor someone else owns (LMDB's
 * on data.mdb): the ops use @fd as csdfs_io_open_file's do, and close
 * leaves it open. @fd must stay open until csdfs_io_close(@io).
 * @return 0 or -errno from fstat(2).
 */
int csdfs_io_wrap_fd(struct csdfs_io *io, int fd, enum csdfs_io_role role);

/*
 * csdfs_io_syncs - the host syncs (fdatasync(2) calls, failed ones too) the
 * POSIX backend has made on files of @role since the process started,
 * whichever volume they belong to (a daemon serves one). Any thread; the
 * count is read without a lock (relaxed atomic).
 */
uint64_t csdfs_io_syncs(enum csdfs_io_role role);

static inline int csdfs_io_pread(struct csdfs_io *io, void *buf, size_t len,
				 uint64_t off)
{
	return io->ops->pread(io, buf, len, off);
}

/*
 * csdfs_io_pread_direct - csdfs_io_pread for a large read whose bytes will be
 * cached by the caller's consumer. Reads past the host's page cache when the
 * backend can and @buf, @len and @off are all multiples of
 * CSDFS_IO_DIRECT_ALIGN; otherwise it is a plain csdfs_io_pread. Coherent
 * with earlier buffered writes (the host writes dirty pages back first).
 */
#define CSDFS_IO_DIRECT_ALIGN 4096u
static inline int csdfs_io_pread_direct(struct csdfs_io *io, void *buf,
					size_t len, uint64_t off)
{
	if (io->ops->pread_direct)
		return io->ops->pread_direct(io, buf, len, off);
	return io->ops->pread(io, buf, len, off);
}

static inline int csdfs_io_pwrite(struct csdfs_io *io, const void *buf,
				  size_t len, uint64_t off)
{
	return io->ops->pwrite(io, buf, len, off);
}

static inline int csdfs_io_sync(struct csdfs_io *io)
{
	return io->ops->sync(io);
}

static inline int csdfs_io_punch(struct csdfs_io *io, uint64_t off,
				 uint64_t len)
{
	return io->ops->punch(io, off, len);
}

static inline int csdfs_io_zero(struct csdfs_io *io, uint64_t off,
				uint64_t len)
{
	return io->ops->zero ? io->ops->zero(io, off, len) : -EOPNOTSUPP;
}

static inline void csdfs_io_close(struct csdfs_io *io)
{
	if (io->ops)
		io->ops->close(io);
	io->ops = NULL;
}

/*
 * Fault injection (tests): wraps an open csdfs_io so that the @nth call
 * (1-based, counting pread (direct ones too), pwrite, sync, punch and
 * zero together, or only the kinds in @kinds) fails with -@err; with @sticky
 * every later call of those kinds fails too. The wrapped backend keeps
 * working otherwise.
 */
#define CSDFS_IO_PREAD  0x1u
#define CSDFS_IO_PWRITE 0x2u
#define CSDFS_IO_SYNC   0x4u
#define CSDFS_IO_PUNCH  0x8u
#define CSDFS_IO_ZERO   0x10u
#define CSDFS_IO_ALL    0x1fu

struct csdfs_io_fault {
	unsigned kinds;           /* which calls count and can fail */
	unsigned long long nth;   /* 0 = never fail, just count */
	int err;                  /* positive errno to inject */
	int sticky;               /* keep failing after the nth call */
	unsigned long long calls; /* out: calls of @kinds seen so far */
	unsigned long long failed;/* out: calls failed */
};

/* Interpose @f on @io. @f must outlive @io. One @f may be installed on
 * several csdfs_io (a volume's container and its metadata files): the Nth
 * call then counts across all of them. @return 0 or -ENOMEM. */
int csdfs_io_fault_install(struct csdfs_io *io, struct csdfs_io_fault *f);

/*
 * Tearing backend (crash counter-checks only; io_torn.c): wraps an open
 * csdfs_io so that a pwrite longer than 4 KiB lands only its first 4 KiB
 * before it returns, the rest later from a worker thread, and sync does not
 * wait for that rest. A running volume never sees the difference (reads,
 * writes and punches that overlap queued bytes wait for them); a kill -9
 * leaves chunks torn under durable mappings. @return 0 or -errno.
 */
int csdfs_io_torn_install(struct csdfs_io *io);

#endif
