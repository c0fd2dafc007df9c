/* SPDX-License-Identifier: MIT */
/*
 * The daemon's side of /dev/fuse, for one kernel feature libfuse 3.14
 * cannot negotiate: FUSE_HANDLE_KILLPRIV_V2.
 *
 * Without it the kernel asks for security.capability (a GETXATTR round trip)
 * before every write(2), to learn whether the write must drop privileges:
 * half of the round trips of a 4 KiB writer, and the one that keeps the
 * writeback cache from absorbing small writes. With it the filesystem drops
 * set-user-ID, set-group-ID and capabilities itself, when the kernel marks
 * a write, truncate or open(O_TRUNC) with a KILL_SUIDGID flag.
 *
 * The same way it negotiates FUSE_DIRECT_IO_ALLOW_MMAP (kernel >= 6.6),
 * under which the kernel flushes and drops cached pages before a write on
 * a direct-I/O file (and allows shared mmap of it): what makes it safe to
 * serve O_SYNC/O_DSYNC opens with direct I/O beside cached opens.
 *
 * And one open flag libfuse 3.14 has no field for:
 * FOPEN_PARALLEL_DIRECT_WRITES. Without it the kernel takes the inode's
 * lock exclusively around every direct write, so threads that pwrite one
 * file wait for each other's whole round trip (asynchronous writers, like
 * InnoDB's, only for the submission); with it they share the lock unless
 * a write extends the file. csdfs serialises what must be (chunk stripes).
 *
 * libfuse (>= 3.14) lets a daemon supply the read and writev calls on the
 * device: read notes each request's kill flag for the worker thread that
 * is about to dispatch it, and writev adds the flags to the INIT reply
 * when the kernel offered them, and to the reply of an open or create
 * whose handler asked (csdfs_fuse_io_parallel_direct_writes). Everything else
 * passes through. The note of each request is also where requests are
 * counted by opcode, for user.csdfs.requests (both transports pass it).
 */
#include <errno.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "devio.h"
#include "uring.h"

/* Not in Debian 12's <linux/fuse.h> (6.1): bit 36 = flags2 bit 4. */
#ifndef FUSE_DIRECT_IO_ALLOW_MMAP
#define FUSE_DIRECT_IO_ALLOW_MMAP (1ULL << 36)
#endif
/* Kernel >= 6.14 with fuse.enable_uring=Y (fuse.h 7.42): flags2 bit 9. */
#ifndef FUSE_OVER_IO_URING
#define FUSE_OVER_IO_URING (1ULL << 41)
#endif
/* The kernel never asks for less room than this (FUSE_MIN_READ_BUFFER). */
#define MIN_PAYLOAD 8192u

/* Set by the read of the request this worker thread dispatches next. */
static _Thread_local bool req_kill;
static _Thread_local uint64_t req_unique;
static _Thread_local uint32_t req_opcode;
/* FOPEN_* flags to add to the reply of that request (an open or create). */
static _Thread_local uint32_t req_open_flags;
/* INIT is the first request: its unique id and the flags the kernel
 * offered (written before any other request is read). */
static uint64_t init_unique;
static uint64_t init_offered;
static uint64_t init_added;
static void (*after_init)(void *);
static void *after_init_arg;
static bool offer_uring;
/* The largest request or reply body the connection allows (INIT reply). */
static size_t max_payload;

/*
 * Requests by opcode, counted where every request of either transport is
 * noted (csdfs_fuse_io_note_request): what user.csdfs.requests reports.
 * Relaxed atomics: a count may lag a request in flight, never lose one.
 */
#define OPCODES 64u
static uint64_t req_count[OPCODES + 1];      /* [OPCODES]: any other opcode */
static const char *const opcode_name[OPCODES] = {
	[FUSE_LOOKUP] = "lookup", [FUSE_FORGET] = "forget", [FUSE_GETATTR] = "getattr",
	[FUSE_SETATTR] = "setattr", [FUSE_READLINK] = "readlink", [FUSE_SYMLINK] = "symlink",
	[FUSE_MKNOD] = "mknod", [FUSE_MKDIR] = "mkdir", [FUSE_UNLINK] = "unlink",
	[FUSE_RMDIR] = "rmdir", [FUSE_RENAME] = "rename", [FUSE_LINK] = "link",
	[FUSE_OPEN] = "open", [FUSE_READ] = "read", [FUSE_WRITE] = "write",
	[FUSE_STATFS] = "statfs", [FUSE_RELEASE] = "release", [FUSE_FSYNC] = "fsync",
	[FUSE_SETXATTR] = "setxattr", [FUSE_GETXATTR] = "getxattr",
	[FUSE_LISTXATTR] = "listxattr", [FUSE_REMOVEXATTR] = "removexattr",
	[FUSE_FLUSH] = "flush", [FUSE_INIT] = "init", [FUSE_OPENDIR] = "opendir",
	[FUSE_READDIR] = "readdir", [FUSE_RELEASEDIR] = "releasedir",
	[FUSE_FSYNCDIR] = "fsyncdir", [FUSE_GETLK] = "getlk", [FUSE_SETLK] = "setlk",
	[FUSE_SETLKW] = "setlkw", [FUSE_ACCESS] = "access", [FUSE_CREATE] = "create",
	[FUSE_INTERRUPT] = "interrupt", [FUSE_BMAP] = "bmap", [FUSE_DESTROY] = "destroy",
	[FUSE_IOCTL] = "ioctl", [FUSE_POLL] = "poll", [FUSE_NOTIFY_REPLY] = "notify_reply",
	[FUSE_BATCH_FORGET] = "batch_forget", [FUSE_FALLOCATE] = "fallocate",
	[FUSE_READDIRPLUS] = "readdirplus", [FUSE_RENAME2] = "rename2",
	[FUSE_LSEEK] = "lseek", [FUSE_COPY_FILE_RANGE] = "copy_file_range",
	[FUSE_SETUPMAPPING] = "setupmapping", [FUSE_REMOVEMAPPING] = "removemapping",
	[FUSE_SYNCFS] = "syncfs", [FUSE_TMPFILE] = "tmpfile",
};

int csdfs_fuse_io_requests(char *buf, size_t len)
{
	uint64_t n[OPCODES + 1], total = 0;
	size_t used;
	int w;

	for (unsigned i = 0; i <= OPCODES; i++)
		total += n[i] = __atomic_load_n(&req_count[i], __ATOMIC_RELAXED);
	w = snprintf(buf, len, "total=%llu", (unsigned long long)total);
	for (unsigned i = 0; w >= 0 && (size_t)w < len && i <= OPCODES; i++) {
		used = (size_t)w;
		if (n[i])
			w += snprintf(buf + used, len - used, " %s=%llu",
				      i < OPCODES && opcode_name[i] ? opcode_name[i] : "other",
				      (unsigned long long)n[i]);
	}
	return w >= 0 && (size_t)w < len ? w : -ERANGE;
}

static bool kill_flag_of(const struct fuse_in_header *h, const char *arg, size_t len)
{
	switch (h->opcode) {
	case FUSE_WRITE:
		if (len >= offsetof(struct fuse_write_in, lock_owner)) {
			const struct fuse_write_in *w = (const void *)arg;

			return w->write_flags & FUSE_WRITE_KILL_SUIDGID;
		}
		return false;
	case FUSE_SETATTR:
		if (len >= offsetof(struct fuse_setattr_in, padding)) {
			const struct fuse_setattr_in *s = (const void *)arg;

			return s->valid & FATTR_KILL_SUIDGID;
		}
		return false;
	case FUSE_OPEN:
		if (len >= sizeof(struct fuse_open_in)) {
			const struct fuse_open_in *o = (const void *)arg;

			return o->open_flags & FUSE_OPEN_KILL_SUIDGID;
		}
		return false;
	default:
		return false;
	}
}

void csdfs_fuse_io_note_request(const void *buf, size_t n)
{
	struct fuse_in_header h;
	const char *arg = (const char *)buf + sizeof(h);

	req_kill = false;
	req_unique = 0;
	req_open_flags = 0;
	if (n < sizeof(h))
		return;
	memcpy(&h, buf, sizeof(h));
	req_unique = h.unique;
	req_opcode = h.opcode;
	__atomic_add_fetch(&req_count[h.opcode < OPCODES && opcode_name[h.opcode] ?
				      h.opcode : OPCODES], 1, __ATOMIC_RELAXED);
	if (h.opcode == FUSE_INIT && n >= sizeof(h) + offsetof(struct fuse_init_in, flags2)) {
		struct fuse_init_in in = { 0 };
		size_t alen = n - sizeof(h);

		memcpy(&in, arg, alen < sizeof(in) ? alen : sizeof(in));
		init_unique = h.unique;
		init_offered = in.flags;
		if ((in.flags & FUSE_INIT_EXT) && alen >= offsetof(struct fuse_init_in, unused))
			init_offered |= (uint64_t)in.flags2 << 32;
	} else {
		req_kill = kill_flag_of(&h, arg, n - sizeof(h));
	}
}

static ssize_t io_read(int fd, void *buf, size_t len, void *userdata)
{
	ssize_t n = read(fd, buf, len);

	(void)userdata;
	csdfs_fuse_io_note_request(buf, n > 0 ? (size_t)n : 0);
	return n;
}

/* Add the open flags the handler asked for to this thread's reply to its
 * open or create, laid out as libfuse 3.14 sends it: the fuse_open_out
 * alone, or after a whole fuse_entry_out. Anything else is left as is. */
static void add_open_flags(struct iovec *iov, int count)
{
	struct fuse_out_header h;
	struct fuse_open_out o;
	size_t at;

	if (count != 2 || iov[0].iov_len != sizeof(h))
		return;
	memcpy(&h, iov[0].iov_base, sizeof(h));
	if (h.unique != req_unique || h.error)
		return;
	at = req_opcode == FUSE_CREATE ? sizeof(struct fuse_entry_out) : 0;
	if ((req_opcode != FUSE_OPEN && req_opcode != FUSE_CREATE) ||
	    iov[1].iov_len != at + sizeof(o))
		return;
	memcpy(&o, (char *)iov[1].iov_base + at, sizeof(o));
	o.open_flags |= req_open_flags;
	memcpy((char *)iov[1].iov_base + at, &o, sizeof(o));
	req_open_flags = 0;
}

static ssize_t io_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	struct fuse_out_header h;
	struct fuse_init_out out;
	bool init_reply = false;
	ssize_t n;

	(void)userdata;
	if (req_open_flags)
		add_open_flags(iov, count);
	if (csdfs_uring_take_reply(iov, count, &n))
		return n;
	if (init_unique && count == 2 && iov[0].iov_len == sizeof(h)) {
		memcpy(&h, iov[0].iov_base, sizeof(h));
		/* The reply carries at least the flags word (minor >= 5). */
		if (h.unique == init_unique && !h.error &&
		    iov[1].iov_len >= offsetof(struct fuse_init_out, max_background) &&
		    iov[1].iov_len <= sizeof(out)) {
			memcpy(&out, iov[1].iov_base, iov[1].iov_len);
			init_added = init_offered & FUSE_HANDLE_KILLPRIV_V2;
			out.flags |= (uint32_t)init_added;
			/* flags2 exists when both sides speak FUSE_INIT_EXT. */
			if ((out.flags & FUSE_INIT_EXT) &&
			    iov[1].iov_len >= offsetof(struct fuse_init_out, unused)) {
				init_added |= init_offered & FUSE_DIRECT_IO_ALLOW_MMAP;
				if (offer_uring)
					init_added |= init_offered & FUSE_OVER_IO_URING;
				out.flags2 |= (uint32_t)(init_added >> 32);
			}
			size_t page = (size_t)sysconf(_SC_PAGESIZE);

			max_payload = out.max_write > MIN_PAYLOAD ? out.max_write : MIN_PAYLOAD;
			if ((out.flags & FUSE_MAX_PAGES) &&
			    iov[1].iov_len >= offsetof(struct fuse_init_out, map_alignment) &&
			    (size_t)out.max_pages * page > max_payload)
				max_payload = (size_t)out.max_pages * page;
			memcpy(iov[1].iov_base, &out, iov[1].iov_len);
			init_unique = 0;
			init_reply = true;
		}
	}
	n = writev(fd, iov, count);
	/* The kernel applied the INIT reply within that writev. */
	if (init_reply && n > 0 && after_init)
		after_init(after_init_arg);
	return n;
}

int csdfs_fuse_io_install(struct fuse_session *se, void (*fn)(void *), void *arg)
{
	static const struct fuse_custom_io io = {
		.read = io_read,
		.writev = io_writev,
	};

	after_init = fn;
	after_init_arg = arg;
	/* The session keeps the mounted fd; only the calls on it change. */
	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}

bool csdfs_fuse_io_req_kills_privs(void)
{
	return req_kill;
}

bool csdfs_fuse_io_killpriv_v2(void)
{
	return init_added & FUSE_HANDLE_KILLPRIV_V2;
}

bool csdfs_fuse_io_direct_coherent(void)
{
	return init_added & FUSE_DIRECT_IO_ALLOW_MMAP;
}

void csdfs_fuse_io_parallel_direct_writes(void)
{
	req_open_flags |= FOPEN_PARALLEL_DIRECT_WRITES;
}

void csdfs_fuse_io_offer_uring(bool on)
{
	offer_uring = on;
}

size_t csdfs_fuse_io_uring_payload(void)
{
	return init_added & FUSE_OVER_IO_URING ? max_payload : 0;
}
