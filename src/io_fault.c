/* SPDX-License-Identifier: MIT */
/*
 * Fault-injecting I/O backend for tests (SQLite test_syscall.c style): it
 * forwards to the real backend and fails the Nth call with a chosen errno,
 * once or from then on. Lives in libcsdfs so unit tests can drive a real
 * volume through it.
 */
#include <errno.h>
#include <stdlib.h>

#include "csdfs/io.h"

struct fault_state {
	struct csdfs_io inner;     /* the wrapped backend, called as is */
	struct csdfs_io_fault *f;
};

static int should_fail(struct csdfs_io *io, unsigned kind)
{
	struct fault_state *s = io->priv;
	struct csdfs_io_fault *f = s->f;
	unsigned long long n;

	if (!(f->kinds & kind))
		return 0;
	n = __atomic_add_fetch(&f->calls, 1, __ATOMIC_SEQ_CST);
	if (f->nth && (n == f->nth || (f->sticky && n > f->nth))) {
		__atomic_add_fetch(&f->failed, 1, __ATOMIC_SEQ_CST);
		return -f->err;
	}
	return 0;
}

static struct csdfs_io *inner_of(struct csdfs_io *io)
{
	return &((struct fault_state *)io->priv)->inner;
}

static int fault_pread(struct csdfs_io *io, void *buf, size_t len, uint64_t off)
{
	int rc = should_fail(io, CSDFS_IO_PREAD);

	return rc ? rc : csdfs_io_pread(inner_of(io), buf, len, off);
}

static int fault_pread_direct(struct csdfs_io *io, void *buf, size_t len,
			      uint64_t off)
{
	int rc = should_fail(io, CSDFS_IO_PREAD);

	return rc ? rc : csdfs_io_pread_direct(inner_of(io), buf, len, off);
}

static int fault_pwrite(struct csdfs_io *io, const void *buf, size_t len,
			uint64_t off)
{
	int rc = should_fail(io, CSDFS_IO_PWRITE);

	return rc ? rc : csdfs_io_pwrite(inner_of(io), buf, len, off);
}

static int fault_sync(struct csdfs_io *io)
{
	int rc = should_fail(io, CSDFS_IO_SYNC);

	return rc ? rc : csdfs_io_sync(inner_of(io));
}

static int fault_punch(struct csdfs_io *io, uint64_t off, uint64_t len)
{
	int rc = should_fail(io, CSDFS_IO_PUNCH);

	return rc ? rc : csdfs_io_punch(inner_of(io), off, len);
}

static int fault_zero(struct csdfs_io *io, uint64_t off, uint64_t len)
{
	int rc = should_fail(io, CSDFS_IO_ZERO);

	return rc ? rc : csdfs_io_zero(inner_of(io), off, len);
}

static void fault_close(struct csdfs_io *io)
{
	struct fault_state *s = io->priv;

	csdfs_io_close(&s->inner);
	free(s);
	io->ops = NULL;
	io->priv = NULL;
	io->fd = io->dfd = -1;
}

static const struct csdfs_io_ops fault_ops = {
	.pread = fault_pread,
	.pread_direct = fault_pread_direct,
	.pwrite = fault_pwrite,
	.sync = fault_sync,
	.punch = fault_punch,
	.zero = fault_zero,
	.close = fault_close,
};

int csdfs_io_fault_install(struct csdfs_io *io, struct csdfs_io_fault *f)
{
	struct fault_state *s = malloc(sizeof(*s));

	if (!s)
		return -ENOMEM;
	s->inner = *io;
	s->f = f;
	io->ops = &fault_ops;
	io->priv = s;
	return 0;
}
