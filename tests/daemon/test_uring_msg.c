/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for uring_msg.c: how a FUSE-over-io_uring ring entry
 * becomes a /dev/fuse request and how a reply goes back into it. The
 * kernel never sends a malformed entry or asks for an oversized reply on
 * a healthy mount, so these paths are only reachable here: every length
 * that does not add up must be refused without touching memory outside
 * the buffers.
 */
#include <check.h>
#include <errno.h>
#include <linux/fuse.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "uring_msg.h"

#define CAP 8192u
#define GUARD 64u

/* The payload buffer with CSDFS_URING_FRONT bytes before it and a guard
 * zone after it, all filled with a pattern to notice stray writes. */
struct area {
	char *base;
	char *payload;
};

static void area_init(struct area *a)
{
	a->base = malloc(CSDFS_URING_FRONT + CAP + GUARD);
	ck_assert_ptr_nonnull(a->base);
	memset(a->base, 0xa5, CSDFS_URING_FRONT + CAP + GUARD);
	a->payload = a->base + CSDFS_URING_FRONT;
}

static void assert_guard_intact(const struct area *a)
{
	for (unsigned i = 0; i < GUARD; i++)
		ck_assert_int_eq((unsigned char)a->payload[CAP + i], 0xa5);
}

/* An entry as the kernel fills it: header, @oplen bytes of fixed
 * argument (0x40 + i) and @payload_sz bytes of payload. */
static void entry_fill(struct uring_req_header *h, struct area *a, uint32_t opcode,
		       size_t oplen, size_t payload_sz, uint32_t len_delta)
{
	struct fuse_in_header in = {
		.len = (uint32_t)(sizeof(in) + oplen + payload_sz) + len_delta,
		.opcode = opcode, .unique = 77, .nodeid = 5,
	};

	memset(h, 0, sizeof(*h));
	memcpy(h->in_out, &in, sizeof(in));
	for (size_t i = 0; i < sizeof(h->op_in); i++)
		h->op_in[i] = (char)(0x40 + i);
	h->ent.commit_id = 77;
	h->ent.payload_sz = (uint32_t)payload_sz;
	for (size_t i = 0; i < payload_sz && i < CAP; i++)
		a->payload[i] = (char)(i * 7);
}

START_TEST(rebuild_write_keeps_payload_in_place)
{
	struct uring_req_header h;
	struct area a;
	struct fuse_in_header in;
	char *start;

	area_init(&a);
	entry_fill(&h, &a, FUSE_WRITE, sizeof(struct fuse_write_in), 4096, 0);
	start = csdfs_uring_rebuild(&h, a.payload, CAP);
	ck_assert_ptr_eq(start, a.payload - sizeof(struct fuse_write_in) - sizeof(in));
	memcpy(&in, start, sizeof(in));
	ck_assert_uint_eq(in.opcode, FUSE_WRITE);
	ck_assert_uint_eq(in.unique, 77);
	ck_assert_uint_eq(in.len, sizeof(in) + sizeof(struct fuse_write_in) + 4096);
	ck_assert_mem_eq(start + sizeof(in), h.op_in, sizeof(struct fuse_write_in));
	for (size_t i = 0; i < 4096; i++)
		ck_assert_int_eq(a.payload[i], (char)(i * 7));
	assert_guard_intact(&a);
	free(a.base);
}
END_TEST

START_TEST(rebuild_without_argument_or_payload)
{
	struct uring_req_header h;
	struct area a;
	char *start;

	area_init(&a);
	entry_fill(&h, &a, FUSE_STATFS, 0, 0, 0);
	start = csdfs_uring_rebuild(&h, a.payload, CAP);
	ck_assert_ptr_eq(start, a.payload - sizeof(struct fuse_in_header));
	/* the largest fixed argument the entry can hold, and a full payload */
	entry_fill(&h, &a, FUSE_SETATTR, sizeof(h.op_in), CAP, 0);
	start = csdfs_uring_rebuild(&h, a.payload, CAP);
	ck_assert_ptr_eq(start, a.payload - sizeof(h.op_in) - sizeof(struct fuse_in_header));
	ck_assert_mem_eq(start + sizeof(struct fuse_in_header), h.op_in, sizeof(h.op_in));
	assert_guard_intact(&a);
	free(a.base);
}
END_TEST

START_TEST(rebuild_refuses_lengths_that_do_not_add_up)
{
	struct uring_req_header h;
	struct area a;
	char before[CSDFS_URING_FRONT];

	area_init(&a);
	memcpy(before, a.base, sizeof(before));
	/* length shorter than header + payload */
	entry_fill(&h, &a, FUSE_WRITE, 0, 4096, (uint32_t)-1);
	ck_assert_ptr_null(csdfs_uring_rebuild(&h, a.payload, CAP));
	/* length shorter than the header alone */
	entry_fill(&h, &a, FUSE_GETATTR, 0, 0, 0);
	((struct fuse_in_header *)(void *)h.in_out)->len = 8;
	ck_assert_ptr_null(csdfs_uring_rebuild(&h, a.payload, CAP));
	/* a fixed argument longer than the entry's argument buffer */
	entry_fill(&h, &a, FUSE_WRITE, sizeof(h.op_in) + 1, 16, 0);
	ck_assert_ptr_null(csdfs_uring_rebuild(&h, a.payload, CAP));
	/* a payload larger than the buffer the entry registered */
	entry_fill(&h, &a, FUSE_WRITE, sizeof(struct fuse_write_in), CAP + 1, 0);
	ck_assert_ptr_null(csdfs_uring_rebuild(&h, a.payload, CAP));
	/* a length near 2^32 with a small payload: the argument it implies
	 * is far larger than the entry's argument buffer */
	entry_fill(&h, &a, FUSE_WRITE, 0, 16, 0);
	((struct fuse_in_header *)(void *)h.in_out)->len = UINT32_MAX;
	ck_assert_ptr_null(csdfs_uring_rebuild(&h, a.payload, CAP));
	/* nothing in front of the payload was written by a refusal */
	ck_assert_mem_eq(before, a.base, sizeof(before));
	free(a.base);
}
END_TEST

static struct fuse_out_header out_header(uint32_t len, int error)
{
	struct fuse_out_header oh = { .len = len, .error = error, .unique = 77 };

	return oh;
}

START_TEST(reply_gathers_pieces)
{
	struct uring_req_header h;
	struct area a;
	struct fuse_out_header oh = out_header(sizeof(oh) + 300, 0), got;
	char body[300];
	struct iovec iov[3];
	ssize_t n;

	area_init(&a);
	memset(&h, 0, sizeof(h));
	for (size_t i = 0; i < sizeof(body); i++)
		body[i] = (char)(i ^ 0x5a);
	iov[0] = (struct iovec){ &oh, sizeof(oh) };
	iov[1] = (struct iovec){ body, 100 };
	iov[2] = (struct iovec){ body + 100, 200 };
	n = csdfs_uring_put_reply(&h, a.payload, CAP, iov, 3);
	ck_assert_int_eq(n, (ssize_t)(sizeof(oh) + 300));
	ck_assert_uint_eq(h.ent.payload_sz, 300);
	memcpy(&got, h.in_out, sizeof(got));
	ck_assert_uint_eq(got.unique, 77);
	ck_assert_uint_eq(got.len, sizeof(oh) + 300);
	ck_assert_mem_eq(a.payload, body, sizeof(body));
	assert_guard_intact(&a);
	free(a.base);
}
END_TEST

START_TEST(reply_header_split_over_pieces)
{
	struct uring_req_header h;
	struct area a;
	char msg[sizeof(struct fuse_out_header) + 10];
	struct fuse_out_header oh = out_header(sizeof(msg), 0), got;
	struct iovec iov[3];

	area_init(&a);
	memset(&h, 0, sizeof(h));
	memcpy(msg, &oh, sizeof(oh));
	memcpy(msg + sizeof(oh), "0123456789", 10);
	/* cut inside the header and again in the body */
	iov[0] = (struct iovec){ msg, 5 };
	iov[1] = (struct iovec){ msg + 5, sizeof(oh) - 5 + 4 };
	iov[2] = (struct iovec){ msg + sizeof(oh) + 4, 6 };
	ck_assert_int_eq(csdfs_uring_put_reply(&h, a.payload, CAP, iov, 3), (ssize_t)sizeof(msg));
	memcpy(&got, h.in_out, sizeof(got));
	ck_assert_mem_eq(&got, &oh, sizeof(oh));
	ck_assert_uint_eq(h.ent.payload_sz, 10);
	ck_assert_mem_eq(a.payload, "0123456789", 10);
	free(a.base);
}
END_TEST

START_TEST(reply_that_fills_the_buffer_exactly)
{
	struct uring_req_header h;
	struct area a;
	struct fuse_out_header oh = out_header(sizeof(oh) + CAP, 0);
	char *body = malloc(CAP);
	struct iovec iov[2];

	area_init(&a);
	memset(&h, 0, sizeof(h));
	memset(body, 0x3c, CAP);
	iov[0] = (struct iovec){ &oh, sizeof(oh) };
	iov[1] = (struct iovec){ body, CAP };
	ck_assert_int_eq(csdfs_uring_put_reply(&h, a.payload, CAP, iov, 2),
			 (ssize_t)(sizeof(oh) + CAP));
	ck_assert_uint_eq(h.ent.payload_sz, CAP);
	ck_assert_mem_eq(a.payload, body, CAP);
	assert_guard_intact(&a);
	free(body);
	free(a.base);
}
END_TEST

START_TEST(reply_built_in_place)
{
	struct uring_req_header h;
	struct area a;
	struct fuse_out_header oh = out_header(sizeof(oh) + 300, 0);
	char tail[100];
	struct iovec iov[3];

	area_init(&a);
	memset(&h, 0, sizeof(h));
	/* the first 200 body bytes were written straight into the buffer
	 * (csdfs_uring_reply_room), the last 100 come from elsewhere */
	for (int i = 0; i < 200; i++)
		a.payload[i] = (char)(i * 7);
	memset(tail, 0x42, sizeof(tail));
	iov[0] = (struct iovec){ &oh, sizeof(oh) };
	iov[1] = (struct iovec){ a.payload, 200 };
	iov[2] = (struct iovec){ tail, sizeof(tail) };
	ck_assert_int_eq(csdfs_uring_put_reply(&h, a.payload, CAP, iov, 3),
			 (ssize_t)(sizeof(oh) + 300));
	ck_assert_uint_eq(h.ent.payload_sz, 300);
	for (int i = 0; i < 200; i++)
		ck_assert_int_eq(a.payload[i], (char)(i * 7));
	ck_assert_mem_eq(a.payload + 200, tail, sizeof(tail));
	assert_guard_intact(&a);
	free(a.base);
}
END_TEST

START_TEST(reply_too_large_or_too_short_is_refused)
{
	struct uring_req_header h, before;
	struct area a;
	struct fuse_out_header oh = out_header(sizeof(oh) + CAP + 1, 0);
	char *body = malloc(CAP + 1);
	struct iovec iov[2];

	area_init(&a);
	memset(&h, 0x11, sizeof(h));
	before = h;
	memset(body, 0x3c, CAP + 1);
	iov[0] = (struct iovec){ &oh, sizeof(oh) };
	iov[1] = (struct iovec){ body, CAP + 1 };
	ck_assert_int_eq(csdfs_uring_put_reply(&h, a.payload, CAP, iov, 2), -EMSGSIZE);
	/* a header cut short */
	iov[0].iov_len = sizeof(oh) - 1;
	ck_assert_int_eq(csdfs_uring_put_reply(&h, a.payload, CAP, iov, 1), -EMSGSIZE);
	ck_assert_int_eq(csdfs_uring_put_reply(&h, a.payload, CAP, iov, 0), -EMSGSIZE);
	/* the entry and the payload buffer are untouched */
	ck_assert_mem_eq(&h, &before, sizeof(h));
	for (unsigned i = 0; i < CAP + GUARD; i++)
		ck_assert_int_eq((unsigned char)a.payload[i], 0xa5);
	free(body);
	free(a.base);
}
END_TEST

START_TEST(error_reply)
{
	struct uring_req_header h;
	struct fuse_out_header got;

	memset(&h, 0x11, sizeof(h));
	csdfs_uring_put_error(&h, 1234, EIO);
	memcpy(&got, h.in_out, sizeof(got));
	ck_assert_uint_eq(got.len, sizeof(got));
	ck_assert_int_eq(got.error, -EIO);
	ck_assert_uint_eq(got.unique, 1234);
	ck_assert_uint_eq(h.ent.payload_sz, 0);
}
END_TEST

static Suite *uring_msg_suite(void)
{
	Suite *s = suite_create("uring_msg");
	TCase *rebuild = tcase_create("rebuild"), *reply = tcase_create("reply");

	tcase_add_test(rebuild, rebuild_write_keeps_payload_in_place);
	tcase_add_test(rebuild, rebuild_without_argument_or_payload);
	tcase_add_test(rebuild, rebuild_refuses_lengths_that_do_not_add_up);
	suite_add_tcase(s, rebuild);
	tcase_add_test(reply, reply_gathers_pieces);
	tcase_add_test(reply, reply_header_split_over_pieces);
	tcase_add_test(reply, reply_that_fills_the_buffer_exactly);
	tcase_add_test(reply, reply_built_in_place);
	tcase_add_test(reply, reply_too_large_or_too_short_is_refused);
	tcase_add_test(reply, error_reply);
	suite_add_tcase(s, reply);
	return s;
}

CHECK_RUN_MAIN(uring_msg_suite)
