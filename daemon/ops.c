/* SPDX-License-Identifier: MIT */
/*
 * FUSE glue: translate each low-level request into one libcsdfs call and
 * exactly one reply. No decisions here (STYLE: translate, never decide) and
 * no lock is held across a reply: libcsdfs has released its locks by the
 * time it returns.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "csdfs/bufpool.h"
#include "csdfs/log.h"
#include "devio.h"
#include "ops.h"
#include "store.h"
#include "uring.h"

#define MAX_WRITE (1u << 20)
/* In a file handle besides its O_SYNC/O_DSYNC bits: the handle writes
 * through the kernel's writeback cache (store.c: csdfs_writers_*). */
#define FH_CACHED_WRITER (1ull << 62)

static struct csdfs_fuse *ctx(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static struct csdfs_vol *vol_of(fuse_req_t req)
{
	return ctx(req)->vol;
}

static void cred_of(fuse_req_t req, struct csdfs_cred *cred)
{
	const struct fuse_ctx *c = fuse_req_ctx(req);

	cred->uid = c->uid;
	cred->gid = c->gid;
}

/* Before a write, truncate or open(O_TRUNC) the kernel marked KILL_SUIDGID
 * (FUSE_HANDLE_KILLPRIV_V2): drop the privileges, and make the kernel
 * forget the mode it caches, as its reply carries no attributes. */
static int kill_privs(fuse_req_t req, fuse_ino_t ino)
{
	int rc;

	if (!csdfs_fuse_io_req_kills_privs())
		return 0;
	rc = csdfs_fs_kill_privs(vol_of(req), ino);
	if (rc == 1 && ctx(req)->se)
		fuse_lowlevel_notify_inval_inode(ctx(req)->se, ino, -1, 0);
	return rc < 0 ? rc : 0;
}

/* How long the kernel may keep @ino's attributes from the reply about to
 * go out, or -ENOSPC for a cached writer's GETATTR while the volume is
 * short of space: its write(2) then fails (store.c). Where it must, the
 * reply goes out after an invalidation, which keeps the kernel from
 * caching it: attributes only, no page is waited for (as refresh_blocks). */
static int attr_valid(fuse_req_t req, fuse_ino_t ino, enum csdfs_attr_reply kind,
		      double *timeout)
{
	int rc;

	*timeout = ctx(req)->attr_timeout;
	rc = csdfs_writers_attr(ctx(req)->stores, ino, kind, timeout);
	if (rc == 1 && ctx(req)->se)
		fuse_lowlevel_notify_inval_inode(ctx(req)->se, ino, -1, 0);
	return rc < 0 ? rc : 0;
}

/* Reply with attributes, remembering the st_blocks the kernel caches. */
static void reply_attr(fuse_req_t req, fuse_ino_t ino, int rc, const struct stat *st,
		       enum csdfs_attr_reply kind)
{
	double timeout;

	if (!rc)
		rc = attr_valid(req, ino, kind, &timeout);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	csdfs_fs_note_shown_blocks(vol_of(req), ino, (uint64_t)st->st_blocks);
	fuse_reply_attr(req, st, timeout);
}

/* Reply with a new entry and count the kernel's reference. */
static void reply_entry(fuse_req_t req, int rc, const struct stat *st)
{
	struct fuse_entry_param e;

	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = st->st_ino;
	e.attr = *st;
	attr_valid(req, st->st_ino, CSDFS_REPLY_VERSIONED, &e.attr_timeout);
	e.entry_timeout = ctx(req)->attr_timeout;
	csdfs_fs_ref(vol_of(req), st->st_ino);
	csdfs_fs_note_shown_blocks(vol_of(req), st->st_ino, (uint64_t)st->st_blocks);
	if (fuse_reply_entry(req, &e) == -ENOENT)
		csdfs_fs_forget(vol_of(req), st->st_ino, 1);  /* interrupted */
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct csdfs_fuse *f = userdata;

	conn->max_write = MAX_WRITE;
	/* Writeback and readahead requests the kernel keeps in flight: the
	 * default 12 leaves worker threads idle while one waits on the disk. */
	conn->max_background = 64;
	conn->congestion_threshold = 48;
	/* We are the only writer: the page cache never goes stale behind
	 * the kernel's back, so mtime changes need not invalidate it. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	if (conn->capable & FUSE_CAP_ASYNC_DIO)
		conn->want |= FUSE_CAP_ASYNC_DIO;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	if (f->writeback_cache && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct stat st;

	reply_entry(req, csdfs_fs_lookup(vol_of(req), parent, name, &st), &st);
}

static void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	csdfs_fs_forget(vol_of(req), ino, nlookup);
	fuse_reply_none(req);
}

static void op_forget_multi(fuse_req_t req, size_t count,
			    struct fuse_forget_data *forgets)
{
	for (size_t i = 0; i < count; i++)
		csdfs_fs_forget(vol_of(req), forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int rc = csdfs_fs_getattr(vol_of(req), ino, &st);

	/* fi: the kernel asked with a handle (FUSE_GETATTR_FH), as it does
	 * before a cached write(2); stat() and fstat() ask without. */
	reply_attr(req, ino, rc, &st, fi && (fi->fh & FH_CACHED_WRITER) ?
		   CSDFS_REPLY_WRITER : CSDFS_REPLY_VERSIONED);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr,
		       int to_set, struct fuse_file_info *fi)
{
	static const struct { int fuse; unsigned ours; } map[] = {
		{ FUSE_SET_ATTR_MODE, CSDFS_SET_MODE },
		{ FUSE_SET_ATTR_UID, CSDFS_SET_UID },
		{ FUSE_SET_ATTR_GID, CSDFS_SET_GID },
		{ FUSE_SET_ATTR_SIZE, CSDFS_SET_SIZE },
		{ FUSE_SET_ATTR_ATIME, CSDFS_SET_ATIME },
		{ FUSE_SET_ATTR_MTIME, CSDFS_SET_MTIME },
		{ FUSE_SET_ATTR_ATIME_NOW, CSDFS_SET_ATIME_NOW },
		{ FUSE_SET_ATTR_MTIME_NOW, CSDFS_SET_MTIME_NOW },
		{ FUSE_SET_ATTR_CTIME, CSDFS_SET_CTIME },
	};
	unsigned mask = 0;
	double timeout;
	struct stat st;
	int rc;

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (to_set & map[i].fuse)
			mask |= map[i].ours;
	/* A truncate by an unprivileged caller, or a chown (KILLPRIV_V2). */
	rc = kill_privs(req, ino);
	if (!rc)
		rc = csdfs_fs_setattr(vol_of(req), ino, attr, mask, &st);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	/* The kernel discards the reply to the times-only SETATTR it sends
	 * itself (writeback cache: flushing its mtime before fsync) and keeps
	 * the reply to any other: only a reply it surely keeps, or one that
	 * agrees with what it had anyway, tells what it caches. */
	if (mask & ~(CSDFS_SET_MTIME | CSDFS_SET_CTIME))
		csdfs_fs_note_shown_blocks(vol_of(req), ino, (uint64_t)st.st_blocks);
	else
		csdfs_fs_forget_shown_blocks(vol_of(req), ino, (uint64_t)st.st_blocks);
	attr_valid(req, ino, CSDFS_REPLY_APPLIED, &timeout);
	fuse_reply_attr(req, &st, timeout);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[4097];
	int rc = csdfs_fs_readlink(vol_of(req), ino, buf, sizeof(buf) - 1);

	if (rc < 0) {
		fuse_reply_err(req, -rc);
		return;
	}
	buf[rc] = '\0';
	fuse_reply_readlink(req, buf);
}

static void op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode, dev_t rdev)
{
	struct csdfs_cred cred;
	struct stat st;

	cred_of(req, &cred);
	reply_entry(req, csdfs_fs_mknod(vol_of(req), &cred, parent, name, mode,
					rdev, &st), &st);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name,
		     mode_t mode)
{
	op_mknod(req, parent, name, S_IFDIR | (mode & 07777), 0);
}

static void op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
		       const char *name)
{
	struct csdfs_cred cred;
	struct stat st;

	cred_of(req, &cred);
	reply_entry(req, csdfs_fs_symlink(vol_of(req), &cred, parent, name, link,
					  &st), &st);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
		    const char *newname)
{
	struct stat st;

	reply_entry(req, csdfs_fs_link(vol_of(req), ino, newparent, newname, &st),
		    &st);
}

static void op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -csdfs_fs_unlink(vol_of(req), parent, name));
}

static void op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_reply_err(req, -csdfs_fs_rmdir(vol_of(req), parent, name));
}

static void op_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		      fuse_ino_t newparent, const char *newname,
		      unsigned int flags)
{
	struct csdfs_cred cred;
	unsigned ours = 0;

	if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (flags & RENAME_NOREPLACE)
		ours |= CSDFS_RENAME_NOREPLACE;
	if (flags & RENAME_EXCHANGE)
		ours |= CSDFS_RENAME_EXCHANGE;
	/* The whiteout is owned by the caller, as its mknod would be. */
	if (flags & RENAME_WHITEOUT)
		ours |= CSDFS_RENAME_WHITEOUT;
	cred_of(req, &cred);
	fuse_reply_err(req, -csdfs_fs_rename_as(vol_of(req), &cred, parent, name,
						 newparent, newname, ours));
}

/* Under this much writable space (f_bavail), new writable opens bypass the
 * writeback cache: a write(2) then learns of ENOSPC itself, instead of a
 * later fsync or close. An eighth of the capacity, within 256 MiB..1 GiB,
 * and never less than the dirty data the kernel may hold for the mount
 * (bdi.c). */
static bool space_low(fuse_req_t req)
{
	struct statvfs sv;
	uint64_t cap, avail, low;

	if (csdfs_fs_statfs(vol_of(req), &sv))
		return true;
	cap = (uint64_t)sv.f_blocks * sv.f_frsize;
	avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	low = cap / 8;
	low = low < (256ull << 20) ? 256ull << 20 : low > (1ull << 30) ? 1ull << 30 : low;
	if (low < ctx(req)->max_dirty)
		low = ctx(req)->max_dirty;
	return avail < low;
}

/* File handles carry only the open flags that change write semantics. */
static void set_open_flags(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	bool writable = (fi->flags & O_ACCMODE) != O_RDONLY;

	fi->fh = (uint64_t)(fi->flags & (O_SYNC | O_DSYNC));
	fi->keep_cache = 1;
	if (writable)
		csdfs_fs_note_writer(vol_of(req), ino);
	/* With the writeback cache, a buffered write reaches us whenever the
	 * kernel flushes its pages, in its own pieces: O_SYNC/O_DSYNC opens
	 * bypass it, so that each of their write(2)s is one request, atomic
	 * (G3) and durable (G2) when it returns, as without the cache. Only
	 * when the kernel keeps other opens' cached pages coherent with it. */
	if (ctx(req)->writeback_cache && writable && csdfs_fuse_io_direct_coherent() &&
	    ((fi->flags & O_DSYNC) || space_low(req)))
		fi->direct_io = 1;
	/* An O_DIRECT open bypasses the page cache anyway; as a direct-I/O
	 * open its writers of one file may be in flight together (the
	 * kernel otherwise runs each O_DIRECT write under the inode's
	 * exclusive lock, round trip included). Only where the kernel keeps
	 * other opens' cached pages coherent with direct writes. */
	if ((fi->flags & O_DIRECT) && csdfs_fuse_io_direct_coherent())
		fi->direct_io = 1;
	if (fi->direct_io)
		csdfs_fuse_io_parallel_direct_writes();
	/* The kernel takes this handle's write(2)s into its page cache:
	 * ENOSPC can only reach them through a GETATTR (store.c). */
	if (ctx(req)->writeback_cache && writable && !fi->direct_io) {
		fi->fh |= FH_CACHED_WRITER;
		csdfs_writers_open(ctx(req)->stores, ino);
	}
}

/* The kernel never got the handle, or is done with it. */
static void drop_handle(fuse_req_t req, fuse_ino_t ino, const struct fuse_file_info *fi)
{
	if (fi->fh & FH_CACHED_WRITER)
		csdfs_writers_close(ctx(req)->stores, ino);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name,
		      mode_t mode, struct fuse_file_info *fi)
{
	struct csdfs_cred cred;
	struct fuse_entry_param e;
	struct stat st;
	int rc;

	cred_of(req, &cred);
	rc = csdfs_fs_mknod(vol_of(req), &cred, parent, name,
			    S_IFREG | (mode & 07777), 0, &st);
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = st.st_ino;
	e.attr = st;
	e.entry_timeout = ctx(req)->attr_timeout;
	csdfs_fs_ref(vol_of(req), st.st_ino);
	csdfs_fs_note_shown_blocks(vol_of(req), st.st_ino, (uint64_t)st.st_blocks);
	set_open_flags(req, st.st_ino, fi);
	attr_valid(req, st.st_ino, CSDFS_REPLY_APPLIED, &e.attr_timeout);
	if (fuse_reply_create(req, &e, fi) == -ENOENT) {
		drop_handle(req, st.st_ino, fi);
		csdfs_fs_forget(vol_of(req), st.st_ino, 1);
	}
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int rc = csdfs_fs_getattr(vol_of(req), ino, &st);

	if (!rc && S_ISDIR(st.st_mode))
		rc = -EISDIR;
	/* libfuse asks for atomic O_TRUNC: the kernel leaves it to open. */
	if (!rc && (fi->flags & O_TRUNC) && S_ISREG(st.st_mode)) {
		struct stat in;

		memset(&in, 0, sizeof(in));
		rc = kill_privs(req, ino);
		if (!rc)
			rc = csdfs_fs_setattr(vol_of(req), ino, &in,
				      CSDFS_SET_SIZE | CSDFS_SET_MTIME_NOW, &st);
	}
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	set_open_flags(req, ino, fi);
	if (fuse_reply_open(req, fi) == -ENOENT)
		drop_handle(req, ino, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct csdfs_store_ctx s = { ctx(req)->stores, ino };
	/* Over io_uring the data is read straight into the buffer the reply
	 * is committed from: no copy of it in the daemon; else into a buffer
	 * of the pool (csdfs/bufpool.h). Either is page-aligned for a large
	 * read, so it can go past the host's page cache. */
	char *room = csdfs_uring_reply_room(size);
	char *buf = room ? room : csdfs_bufpool_get(size);
	ssize_t n;

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* A cached read of part of a chunk (a random reader: no readahead)
	 * also gives the kernel the rest of the chunk, decoded anyway. */
	n = csdfs_fs_read_with(vol_of(req), ino, buf, size, (uint64_t)off,
			       s.q && !fi->direct_io && !(fi->flags & O_DIRECT) ?
			       csdfs_store_queue : NULL, &s);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	if (!room)
		csdfs_bufpool_put(buf, size);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf,
		     size_t size, off_t off, struct fuse_file_info *fi)
{
	ssize_t n = 0;

	/* Written by a caller without CAP_FSETID (KILLPRIV_V2). */
	n = kill_privs(req, ino);
	if (!n)
		n = csdfs_fs_write(vol_of(req), ino, buf, size, (uint64_t)off,
				   ((fi->fh & (O_SYNC | O_DSYNC)) ? CSDFS_WRITE_SYNC : 0) |
				   (fi->writepage ? CSDFS_WRITE_KEEP_TIMES : 0));

	/* Writeback the kernel will drop, or a direct writer: from now on
	 * cached writers too are refused until space comes back. */
	if (n == -ENOSPC)
		csdfs_writers_enospc(ctx(req)->stores);
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else
		fuse_reply_write(req, (size_t)n);
}

/* With the writeback cache the kernel keeps size and times itself but
 * caches st_blocks from us: once its dirty pages reached us (flush on
 * close, fsync), have it ask again if they moved the file's blocks, so
 * `du` is exact after close/fsync. Only then: a fresh GETATTR also makes
 * the kernel look up security.capability again before the next write,
 * two round trips per fsync for a database that fsyncs every commit. */
static void refresh_blocks(fuse_req_t req, fuse_ino_t ino)
{
	if (ctx(req)->writeback_cache && ctx(req)->se &&
	    csdfs_fs_blocks_changed(vol_of(req), ino))
		fuse_lowlevel_notify_inval_inode(ctx(req)->se, ino, -1, 0);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	refresh_blocks(req, ino);
	fuse_reply_err(req, 0);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	drop_handle(req, ino, fi);
	fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		     struct fuse_file_info *fi)
{
	int rc = csdfs_fs_fsync(vol_of(req), ino);

	refresh_blocks(req, ino);
	fuse_reply_err(req, -rc);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct csdfs_dirsnap *snap;
	struct stat st;
	int rc = csdfs_fs_getattr(vol_of(req), ino, &st);

	if (!rc && !S_ISDIR(st.st_mode))
		rc = -ENOTDIR;
	if (rc) {
		fuse_reply_err(req, -rc);
		return;
	}
	snap = calloc(1, sizeof(*snap));
	if (!snap) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	fi->fh = (uint64_t)(uintptr_t)snap;
	if (fuse_reply_open(req, fi) == -ENOENT)
		free(snap);
}

/* The listing is a snapshot taken at offset 0 (the first read, or a
 * rewinddir), so offsets stay stable while entries come and go. */
static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct csdfs_dirsnap *snap = (struct csdfs_dirsnap *)(uintptr_t)fi->fh;
	char *buf;
	size_t used = 0;

	if (off == 0) {
		struct csdfs_dirsnap fresh;
		int rc = csdfs_fs_readdir_snapshot(vol_of(req), ino, &fresh);

		if (rc) {
			fuse_reply_err(req, -rc);
			return;
		}
		csdfs_dirsnap_free(snap);
		*snap = fresh;
	}
	buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	for (size_t i = (size_t)off; i < snap->n; i++) {
		struct stat st;
		size_t n;

		memset(&st, 0, sizeof(st));
		st.st_ino = snap->ents[i].ino;
		st.st_mode = snap->ents[i].type;
		n = fuse_add_direntry(req, buf + used, size - used,
				      snap->ents[i].name, &st, (off_t)(i + 1));
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_releasedir(fuse_req_t req, fuse_ino_t ino,
			  struct fuse_file_info *fi)
{
	struct csdfs_dirsnap *snap = (struct csdfs_dirsnap *)(uintptr_t)fi->fh;

	csdfs_dirsnap_free(snap);
	free(snap);
	fuse_reply_err(req, 0);
}

/* A directory's changes are made durable like a file's. */
static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
			struct fuse_file_info *fi)
{
	op_fsync(req, ino, datasync, fi);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;
	int rc = csdfs_fs_statfs(vol_of(req), &sv);

	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_statfs(req, &sv);
}

static void op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			const char *value, size_t size, int flags)
{
	fuse_reply_err(req, -csdfs_fs_setxattr(vol_of(req), ino, name, value,
						size, flags));
}

/* getxattr and listxattr share the size-probe protocol. */
static void reply_sized(fuse_req_t req, int rc, const char *buf, size_t size)
{
	if (rc < 0)
		fuse_reply_err(req, -rc);
	else if (!size)
		fuse_reply_xattr(req, (size_t)rc);
	else
		fuse_reply_buf(req, buf, (size_t)rc);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	char *buf;

	/* The one attribute the daemon answers: libcsdfs sees no requests. */
	if (ino == FUSE_ROOT_ID && !strcmp(name, "user.csdfs.requests")) {
		char text[2048];
		int rc = csdfs_fuse_io_requests(text, sizeof(text));

		reply_sized(req, rc >= 0 && size && (size_t)rc > size ? -ERANGE : rc, text, size);
		return;
	}
	buf = size ? malloc(size) : NULL;
	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	reply_sized(req, csdfs_fs_getxattr(vol_of(req), ino, name, buf, size),
		    buf, size);
	free(buf);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char *buf = size ? malloc(size) : NULL;

	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	reply_sized(req, csdfs_fs_listxattr(vol_of(req), ino, buf, size), buf,
		    size);
	free(buf);
}

static void op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	fuse_reply_err(req, -csdfs_fs_removexattr(vol_of(req), ino, name));
}

static void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode,
			 off_t offset, off_t length, struct fuse_file_info *fi)
{
	if (offset < 0 || length <= 0) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	fuse_reply_err(req, -csdfs_fs_fallocate(vol_of(req), ino, mode,
						 (uint64_t)offset,
						 (uint64_t)length));
}

static void op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
		     struct fuse_file_info *fi)
{
	uint64_t res;
	int rc;

	if (off < 0) {
		fuse_reply_err(req, ENXIO);
		return;
	}
	/* The kernel does not flush its writeback cache before asking: dirty
	 * pages we have not seen would read as a hole (and `cp` would copy
	 * zeros). Have it write them back first: invalidating its pages
	 * launders the dirty ones to us (served by other worker threads). */
	if (ctx(req)->writeback_cache && ctx(req)->se &&
	    csdfs_fs_had_writer(vol_of(req), ino))
		fuse_lowlevel_notify_inval_inode(ctx(req)->se, ino, 0, 0);
	rc = csdfs_fs_lseek(vol_of(req), ino, (uint64_t)off, whence, &res);
	if (rc)
		fuse_reply_err(req, -rc);
	else
		fuse_reply_lseek(req, (off_t)res);
}

const struct fuse_lowlevel_ops csdfs_fuse_ops = {
	.init = op_init,
	.lookup = op_lookup,
	.forget = op_forget,
	.forget_multi = op_forget_multi,
	.getattr = op_getattr,
	.setattr = op_setattr,
	.readlink = op_readlink,
	.mknod = op_mknod,
	.mkdir = op_mkdir,
	.symlink = op_symlink,
	.link = op_link,
	.unlink = op_unlink,
	.rmdir = op_rmdir,
	.rename = op_rename,
	.create = op_create,
	.open = op_open,
	.read = op_read,
	.write = op_write,
	.flush = op_flush,
	.release = op_release,
	.fsync = op_fsync,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.releasedir = op_releasedir,
	.fsyncdir = op_fsyncdir,
	.statfs = op_statfs,
	.setxattr = op_setxattr,
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.removexattr = op_removexattr,
	.fallocate = op_fallocate,
	.lseek = op_lseek,
};
