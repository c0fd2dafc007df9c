/* SPDX-License-Identifier: MIT */
/*
 * The message half of FUSE over io_uring (uring_msg.c): the layout of
 * a ring entry as the kernel fills it, and the checks and copies that turn
 * it into a classic /dev/fuse request and a reply back into the entry. No
 * system calls here, so every malformed case can be unit-tested.
 *
 * The kernel ABI (fuse.h 7.42) is not in Debian 12's headers; the few
 * structures are declared here.
 */
#ifndef CSDFS_DAEMON_URING_MSG_H
#define CSDFS_DAEMON_URING_MSG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

struct uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id;	/* the request's unique id, echoed at commit */
	uint32_t payload_sz;	/* bytes used in the payload buffer */
	uint32_t padding;
	uint64_t reserved;
};

/* The header buffer of a ring entry (the first of its two iovecs). */
struct uring_req_header {
	char in_out[128];	/* fuse_in_header, then fuse_out_header */
	char op_in[128];	/* the opcode's fixed argument, if any */
	struct uring_ent_in_out ent;
};

/* Room a caller keeps in front of the payload buffer for the rebuilt
 * fuse_in_header and fixed argument. */
#define CSDFS_URING_FRONT 4096u

/*
 * csdfs_uring_rebuild - lay the request in @hdr out as /dev/fuse would have
 * delivered it: its fuse_in_header and fixed argument written just in front
 * of @payload (which has CSDFS_URING_FRONT bytes of room before it and
 * @cap bytes after), so the payload itself is not moved.
 * @return the start of the request, whose length is the header's len; NULL
 * when the lengths in the header disagree with each other or with @cap.
 */
char *csdfs_uring_rebuild(const struct uring_req_header *hdr, char *payload,
			  size_t cap);

/*
 * csdfs_uring_put_reply - store a reply gathered from @iov (@count pieces,
 * beginning with a whole fuse_out_header) in the entry: the header into
 * @hdr->in_out, the body into @payload (@cap bytes) and its length into
 * @hdr->ent.payload_sz. A piece that already lies where its bytes belong
 * in @payload (a body built in place) is not copied.
 * @return the reply's total length (what writev would have returned), or
 * -EMSGSIZE when the body is larger than @cap or the header is cut short
 * (the entry is then untouched).
 */
ssize_t csdfs_uring_put_reply(struct uring_req_header *hdr, char *payload,
			      size_t cap, const struct iovec *iov, int count);

/* Answer request @unique in the entry with error @err (a positive errno). */
void csdfs_uring_put_error(struct uring_req_header *hdr, uint64_t unique, int err);

#endif
