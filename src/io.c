/* SPDX-License-Identifier: MIT */
/*
 * The POSIX backend of the I/O seam. The container is opened without
 * O_DIRECT: chunks are packed at byte granularity, and durability comes from
 * fdatasync at group commit, not from the write path.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csdfs/io.h"

static int posix_pread(struct csdfs_io *io, void *buf, size_t len,
		       uint64_t off)
{
	char *p = buf;

	while (len) {
		ssize_t n = pread(io->fd, p, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static int posix_pwrite(struct csdfs_io *io, const void *buf, size_t len,
			uint64_t off)
{
	const char *p = buf;

	if (off + len > io->size)
		return -EIO;
	while (len) {
		ssize_t n = pwrite(io->fd, p, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

static int posix_sync(struct csdfs_io *io)
{
	return fdatasync(io->fd) ? -errno : 0;
}

static int posix_punch(struct csdfs_io *io, uint64_t off, uint64_t len)
{
	if (fallocate(io->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
		      (off_t)off, (off_t)len))
		return -errno;
	return 0;
}

static void posix_close(struct csdfs_io *io)
{
	if (io->fd >= 0)
		close(io->fd);
	io->fd = -1;
}

static const struct csdfs_io_ops posix_ops = {
	.pread = posix_pread,
	.pwrite = posix_pwrite,
	.sync = posix_sync,
	.punch = posix_punch,
	.close = posix_close,
};

int csdfs_io_open_posix(struct csdfs_io *io, const char *path)
{
	struct stat st;
	int fd, rc;

	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB)) {
		rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
		close(fd);
		return rc;
	}
	if (fstat(fd, &st)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	io->ops = &posix_ops;
	io->fd = fd;
	io->size = (uint64_t)st.st_size;
	io->priv = NULL;
	return 0;
}
