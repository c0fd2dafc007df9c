/* SPDX-License-Identifier: MIT */
/*
 * Ring entry <-> /dev/fuse message layout (see uring_msg.h). Whatever
 * the kernel wrote into an entry is checked before it is used: a length
 * that does not add up is refused, never followed.
 */
#include <errno.h>
#include <linux/fuse.h>
#include <string.h>

#include "uring_msg.h"

_Static_assert(sizeof(struct fuse_in_header) + sizeof(((struct uring_req_header *)0)->op_in) <=
		       CSDFS_URING_FRONT,
	       "the rebuilt header and fixed argument must fit in front of the payload");

char *csdfs_uring_rebuild(const struct uring_req_header *hdr, char *payload,
			  size_t cap)
{
	struct fuse_in_header in;
	size_t payload_sz = hdr->ent.payload_sz, oplen;
	char *start;

	memcpy(&in, hdr->in_out, sizeof(in));
	/* The fixed argument is what the request's length leaves over. */
	if (payload_sz > cap || in.len < sizeof(in) + payload_sz)
		return NULL;
	oplen = in.len - sizeof(in) - payload_sz;
	if (oplen > sizeof(hdr->op_in))
		return NULL;
	start = payload - oplen - sizeof(in);
	memcpy(start, &in, sizeof(in));
	memcpy(start + sizeof(in), hdr->op_in, oplen);
	return start;
}

ssize_t csdfs_uring_put_reply(struct uring_req_header *hdr, char *payload,
			      size_t cap, const struct iovec *iov, int count)
{
	struct fuse_out_header oh;
	size_t total = 0, at = 0;

	for (int i = 0; i < count; i++)
		total += iov[i].iov_len;
	if (total < sizeof(oh) || total - sizeof(oh) > cap)
		return -EMSGSIZE;
	/* The first sizeof(oh) bytes, wherever the pieces cut them, are the
	 * header; the rest is the body. */
	for (int i = 0; i < count; i++) {
		const char *p = iov[i].iov_base;
		size_t len = iov[i].iov_len;

		if (at < sizeof(oh)) {
			size_t h = sizeof(oh) - at < len ? sizeof(oh) - at : len;

			memcpy((char *)&oh + at, p, h);
			p += h;
			len -= h;
			at += h;
		}
		/* A body built in place (csdfs_uring_reply_room) stays. */
		if (len && p != payload + (at - sizeof(oh)))
			memcpy(payload + (at - sizeof(oh)), p, len);
		at += len;
	}
	memcpy(hdr->in_out, &oh, sizeof(oh));
	hdr->ent.payload_sz = (uint32_t)(total - sizeof(oh));
	return (ssize_t)total;
}

void csdfs_uring_put_error(struct uring_req_header *hdr, uint64_t unique, int err)
{
	struct fuse_out_header oh = {
		.len = sizeof(oh), .error = -err, .unique = unique,
	};

	memcpy(hdr->in_out, &oh, sizeof(oh));
	hdr->ent.payload_sz = 0;
}
