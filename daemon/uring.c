/* SPDX-License-Identifier: MIT */
/*
 * FUSE over io_uring (Linux >= 6.14, fuse.enable_uring=Y).
 *
 * With read(2)/writev(2) on /dev/fuse every request costs two system
 * calls and, worse on a small machine, a wake-up of whichever daemon
 * thread waits first, usually on another CPU: the requesting thread sleeps
 * while an idle vCPU is brought back. Over io_uring the kernel keeps one
 * queue per CPU and hands a request to a buffer registered for the CPU the
 * requester runs on; answering it and asking for the next one is one
 * io_uring_enter. Our threads of queue q are pinned to CPU q, so the
 * request is served where it was made.
 *
 * Each thread owns a small io_uring (one SQE128 slot for its FUSE command,
 * one for a poll on the stop eventfd) and one ring entry: a header buffer
 * (fuse_in_header / fuse_out_header, the opcode's fixed argument, and
 * the entry's in/out word) and a payload buffer. One entry per thread
 * means a thread blocked in a request (an fsync waiting for the group
 * commit) never holds back another request: the kernel only gives
 * requests to entries whose thread is waiting for one.
 *
 * A request is rebuilt in the classic /dev/fuse layout just in front of
 * its payload (no copy of write data) and handed to libfuse's
 * fuse_session_process_buf(); libfuse answers through the session's
 * writev hook (devio.c), which passes the answer here when it is the
 * current thread's request (csdfs_uring_take_reply). Notifications,
 * FORGET and INTERRUPT keep using /dev/fuse, served by libfuse's loop.
 *
 * The kernel ABI (fuse.h 7.42) is not in Debian 12's headers; the few
 * structures are declared below and in uring_msg.h, which also holds
 * the checks of what the kernel puts in an entry.
 */
#include <errno.h>
#include <linux/fuse.h>
#include <linux/io_uring.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "csdfs/log.h"
/* devio.c and this file call each other, on purpose: libfuse has one reply
 * path, devio.c's writev hook, which hands ring requests' replies back here
 * (csdfs_uring_take_reply), and a request taken from a ring must be noted
 * exactly as devio.c notes one read from /dev/fuse (its per-thread flags
 * live there). */
#include "devio.h"
#include "uring.h"
#include "uring_msg.h"

/* --- the kernel's FUSE-over-io_uring ABI (include/uapi/linux/fuse.h);
 * the entry's layout is in uring_msg.h --- */
#define URING_CMD_REGISTER 1
#define URING_CMD_COMMIT_AND_FETCH 2

struct uring_cmd_req {		/* in the 80-byte command area of an SQE128 */
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

/* Space in front of the payload where a request is rebuilt as the
 * fuse_in_header and fixed argument that /dev/fuse would have sent. */
#define FRONT CSDFS_URING_FRONT
#define SQE_SIZE 128u
#define TAG_ENTRY 1u
#define TAG_STOP 2u
/* Reads and writes from this size on are served by any CPU. */
#define LARGE (128u << 10)

struct ring {
	int fd;
	void *sq_map, *cq_map, *sqes;
	size_t sq_len, cq_len, sqes_len;
	_Atomic unsigned *sq_head, *sq_tail, *cq_head, *cq_tail;
	unsigned *sq_array, sq_mask, cq_mask;
	struct io_uring_cqe *cqes;
};

struct ring_thread {
	struct csdfs_uring *u;
	unsigned qid;
	pthread_t tid;
	bool started;
	struct ring r;
	struct uring_req_header *hdr;	/* page-aligned, its own page */
	char *area;			/* FRONT bytes, then the payload */
	size_t area_len;
	struct iovec iov[2];
	unsigned last_cmd;
	bool pinned;			/* to CPU qid (set_pinned) */
	uint64_t unique;		/* of the request being served */
	bool replied;
};

struct csdfs_uring {
	struct fuse_session *se;
	unsigned nqueues, per_queue, nthreads;
	int stop_fd;			/* eventfd: written once to stop */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned exited;		/* threads done, under lock */
	size_t payload;			/* set by go, under lock */
	bool go, stop;
	atomic_ulong served;
	atomic_uint *busy;		/* per queue: threads in a request */
	cpu_set_t all_cpus;		/* the process's own affinity */
	struct ring_thread t[];
};

static _Thread_local struct ring_thread *current;

static int sys_setup(unsigned entries, struct io_uring_params *p)
{
	return (int)syscall(__NR_io_uring_setup, entries, p);
}

static int sys_enter(int fd, unsigned submit, unsigned wait)
{
	return (int)syscall(__NR_io_uring_enter, fd, submit, wait,
			    wait ? IORING_ENTER_GETEVENTS : 0, NULL, 0);
}

static void ring_close(struct ring *r)
{
	if (r->sqes)
		munmap(r->sqes, r->sqes_len);
	if (r->cq_map && r->cq_map != r->sq_map)
		munmap(r->cq_map, r->cq_len);
	if (r->sq_map)
		munmap(r->sq_map, r->sq_len);
	if (r->fd >= 0)
		close(r->fd);
	memset(r, 0, sizeof(*r));
	r->fd = -1;
}

/* A ring of two 128-byte SQEs: the FUSE command and the stop poll. */
static int ring_open(struct ring *r)
{
	struct io_uring_params p = { .flags = IORING_SETUP_SQE128 };
	char *sq, *cq;

	memset(r, 0, sizeof(*r));
	r->fd = sys_setup(2, &p);
	if (r->fd < 0) {
		r->fd = -1;
		return -errno;
	}
	r->sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	r->cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	if ((p.features & IORING_FEAT_SINGLE_MMAP) && r->cq_len > r->sq_len)
		r->sq_len = r->cq_len;
	r->sq_map = mmap(NULL, r->sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
			 r->fd, IORING_OFF_SQ_RING);
	if (r->sq_map == MAP_FAILED)
		goto fail;
	if (p.features & IORING_FEAT_SINGLE_MMAP) {
		r->cq_map = r->sq_map;
	} else {
		r->cq_map = mmap(NULL, r->cq_len, PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
		if (r->cq_map == MAP_FAILED) {
			r->cq_map = NULL;
			goto fail;
		}
	}
	r->sqes_len = p.sq_entries * SQE_SIZE;
	r->sqes = mmap(NULL, r->sqes_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
		       r->fd, IORING_OFF_SQES);
	if (r->sqes == MAP_FAILED) {
		r->sqes = NULL;
		goto fail;
	}
	sq = r->sq_map;
	cq = r->cq_map;
	r->sq_head = (_Atomic unsigned *)(sq + p.sq_off.head);
	r->sq_tail = (_Atomic unsigned *)(sq + p.sq_off.tail);
	r->sq_mask = *(unsigned *)(sq + p.sq_off.ring_mask);
	r->sq_array = (unsigned *)(sq + p.sq_off.array);
	r->cq_head = (_Atomic unsigned *)(cq + p.cq_off.head);
	r->cq_tail = (_Atomic unsigned *)(cq + p.cq_off.tail);
	r->cq_mask = *(unsigned *)(cq + p.cq_off.ring_mask);
	r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
	return 0;
fail: {
		int rc = -errno;

		if (r->sq_map == MAP_FAILED)
			r->sq_map = NULL;
		ring_close(r);
		return rc;
	}
}

/* The next free SQE, zeroed and queued for the next enter. */
static struct io_uring_sqe *ring_sqe(struct ring *r, uint64_t tag)
{
	unsigned tail = atomic_load_explicit(r->sq_tail, memory_order_relaxed);
	unsigned idx = tail & r->sq_mask;
	struct io_uring_sqe *sqe = (void *)((char *)r->sqes + (size_t)idx * SQE_SIZE);

	memset(sqe, 0, SQE_SIZE);
	sqe->user_data = tag;
	r->sq_array[idx] = idx;
	atomic_store_explicit(r->sq_tail, tail + 1, memory_order_release);
	return sqe;
}

/* Submit what is queued and wait for at least one completion. */
static int ring_submit_wait(struct ring *r)
{
	for (;;) {
		unsigned pending = atomic_load_explicit(r->sq_tail, memory_order_relaxed) -
				   atomic_load_explicit(r->sq_head, memory_order_acquire);

		if (atomic_load_explicit(r->cq_head, memory_order_relaxed) !=
		    atomic_load_explicit(r->cq_tail, memory_order_acquire) && !pending)
			return 0;
		if (sys_enter(r->fd, pending, 1) >= 0)
			return 0;
		if (errno != EINTR && errno != EAGAIN && errno != EBUSY)
			return -errno;
	}
}

static void fuse_cmd(struct ring_thread *t, unsigned op)
{
	struct io_uring_sqe *sqe = ring_sqe(&t->r, TAG_ENTRY);
	struct uring_cmd_req *cmd = (void *)sqe->cmd;

	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = fuse_session_fd(t->u->se);
	sqe->cmd_op = op;
	cmd->qid = (uint16_t)t->qid;
	if (op == URING_CMD_REGISTER) {
		sqe->addr = (uint64_t)(uintptr_t)t->iov;
		sqe->len = 2;
	} else {
		cmd->commit_id = t->unique;
	}
	t->last_cmd = op;
}

/* Answer the current request with an error (it was not answered). */
static void reply_error(struct ring_thread *t, int err)
{
	csdfs_uring_put_error(t->hdr, t->unique, err);
	t->replied = true;
}

bool csdfs_uring_take_reply(const struct iovec *iov, int count, ssize_t *n)
{
	struct ring_thread *t = current;
	struct fuse_out_header oh;
	ssize_t len;

	if (!t || t->replied || count < 1 || iov[0].iov_len < sizeof(oh))
		return false;
	memcpy(&oh, iov[0].iov_base, sizeof(oh));
	if (oh.unique != t->unique)
		return false;	/* a notification, sent on /dev/fuse */
	len = csdfs_uring_put_reply(t->hdr, t->area + FRONT, t->area_len - FRONT, iov, count);
	if (len < 0) {
		len = 0;
		for (int i = 0; i < count; i++)
			len += (ssize_t)iov[i].iov_len;
		csdfs_log(LOG_ERR, "io_uring: a %zd-byte reply does not fit the %zu-byte buffer",
			  len, t->area_len - FRONT);
		reply_error(t, EIO);
	}
	t->replied = true;
	*n = len;
	return true;
}

char *csdfs_uring_reply_room(size_t size)
{
	struct ring_thread *t = current;

	if (!t || t->replied || size > t->area_len - FRONT)
		return NULL;
	return t->area + FRONT;
}

/*
 * Where a thread may run. Pinned to its queue's CPU, a request is served
 * where it was made: for one synchronous request at a time that cuts
 * its latency by ~40 % (no wake-up of another, possibly halted, vCPU). But
 * one CPU's requests then never use the others: a thread with 16 reads in
 * flight, or readahead of 1 MiB, would be served by one CPU while the
 * rest idle. So a thread lets go of its CPU while its queue has other
 * requests in service, or for a large transfer, and comes back after.
 */
static void set_pinned(struct ring_thread *t, bool pin)
{
	cpu_set_t set;

	if (pin == t->pinned)
		return;
	if (pin) {
		CPU_ZERO(&set);
		CPU_SET(t->qid, &set);
	} else {
		set = t->u->all_cpus;
	}
	/* Not fatal: an offline or forbidden CPU only costs the locality. */
	if (!sched_setaffinity(0, sizeof(set), &set))
		t->pinned = pin;
}

/* A transfer large enough to be worth spreading over CPUs. */
static bool is_large(const struct fuse_in_header *in, const char *op_in, size_t payload_sz)
{
	if (payload_sz >= LARGE)
		return true;
	if (in->opcode == FUSE_READ) {
		struct fuse_read_in r;

		memcpy(&r, op_in, sizeof(r));
		return r.size >= LARGE;
	}
	return false;
}

/* Serve the request the kernel put in the entry's buffers. */
static void serve(struct ring_thread *t)
{
	struct fuse_in_header in;
	size_t payload_sz = t->hdr->ent.payload_sz;
	char *payload = t->area + FRONT, *start;
	struct fuse_buf buf = { 0 };
	unsigned others;

	memcpy(&in, t->hdr->in_out, sizeof(in));
	t->unique = t->hdr->ent.commit_id;
	t->replied = false;
	start = csdfs_uring_rebuild(t->hdr, payload, t->area_len - FRONT);
	if (!start) {
		csdfs_log(LOG_ERR, "io_uring: malformed request (opcode %u, length %u, payload %zu)",
			  in.opcode, in.len, payload_sz);
		reply_error(t, EIO);
		return;
	}
	buf.mem = start;
	buf.size = in.len;
	others = atomic_fetch_add_explicit(&t->u->busy[t->qid], 1, memory_order_relaxed);
	set_pinned(t, !others && !is_large(&in, t->hdr->op_in, payload_sz));
	csdfs_fuse_io_note_request(start, in.len);
	current = t;
	fuse_session_process_buf(t->u->se, &buf);
	current = NULL;
	atomic_fetch_sub_explicit(&t->u->busy[t->qid], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&t->u->served, 1, memory_order_relaxed);
	if (!t->replied)	/* a request without an answer: end it anyway */
		reply_error(t, ENOSYS);
}

/* The thread's buffers, sized once INIT told the largest payload. */
static int alloc_buffers(struct ring_thread *t, size_t payload)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	t->hdr = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t->hdr == MAP_FAILED) {
		t->hdr = NULL;
		return -errno;
	}
	/* Untouched pages cost nothing: RSS grows only with large requests. */
	t->area_len = FRONT + ((payload + page - 1) / page) * page;
	t->area = mmap(NULL, t->area_len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (t->area == MAP_FAILED) {
		t->area = NULL;
		return -errno;
	}
	t->iov[0].iov_base = t->hdr;
	t->iov[0].iov_len = sizeof(*t->hdr);
	t->iov[1].iov_base = t->area + FRONT;
	t->iov[1].iov_len = t->area_len - FRONT;
	return 0;
}

/* Handle one completion; false when the thread should end. */
static bool complete(struct ring_thread *t, const struct io_uring_cqe *cqe)
{
	if (cqe->user_data == TAG_STOP)
		return false;
	if (cqe->res == 0) {
		serve(t);
		fuse_cmd(t, URING_CMD_COMMIT_AND_FETCH);
		return true;
	}
	switch (-cqe->res) {
	case EINTR:
	case EAGAIN:		/* try the same command again */
		if (t->last_cmd == URING_CMD_REGISTER)
			fuse_cmd(t, URING_CMD_REGISTER);
		else
			fuse_cmd(t, URING_CMD_COMMIT_AND_FETCH);
		return true;
	case ENOTCONN:		/* unmounted, or the connection ended */
	case ECONNABORTED:
	case ECANCELED:
		return false;
	default:
		/* A refused registration switches the connection back to
		 * /dev/fuse (the kernel does that itself). A refused commit
		 * loses the entry; register a fresh one. */
		csdfs_log(LOG_WARNING, "io_uring: %s failed: %s",
			  t->last_cmd == URING_CMD_REGISTER ? "registering a buffer" :
							      "answering a request",
			  strerror(-cqe->res));
		if (t->last_cmd == URING_CMD_REGISTER)
			return false;
		fuse_cmd(t, URING_CMD_REGISTER);
		return true;
	}
}

static void *thread_main(void *arg)
{
	struct ring_thread *t = arg;
	struct csdfs_uring *u = t->u;
	struct io_uring_sqe *sqe;
	char name[16];
	size_t payload;
	bool run = true;

	snprintf(name, sizeof(name), "csdfs-ring%u", t->qid);
	pthread_setname_np(pthread_self(), name);
	set_pinned(t, true);
	pthread_mutex_lock(&u->lock);
	while (!u->go && !u->stop)
		pthread_cond_wait(&u->cond, &u->lock);
	run = !u->stop;
	payload = u->payload;
	pthread_mutex_unlock(&u->lock);
	if (run && alloc_buffers(t, payload)) {
		csdfs_log(LOG_ERR, "io_uring: no memory for a %zu-byte request buffer", payload);
		run = false;
	}
	if (run) {
		sqe = ring_sqe(&t->r, TAG_STOP);
		sqe->opcode = IORING_OP_POLL_ADD;
		sqe->fd = u->stop_fd;
		sqe->poll32_events = POLLIN;
		fuse_cmd(t, URING_CMD_REGISTER);
	}
	while (run) {
		unsigned head, tail;
		int rc = ring_submit_wait(&t->r);

		if (rc) {
			csdfs_log(LOG_ERR, "io_uring: io_uring_enter: %s", strerror(-rc));
			break;
		}
		head = atomic_load_explicit(t->r.cq_head, memory_order_relaxed);
		tail = atomic_load_explicit(t->r.cq_tail, memory_order_acquire);
		/* Serve the whole batch even when told to stop: a request
		 * already handed to us is answered rather than left waiting
		 * for the connection to end. */
		for (; head != tail; head++) {
			struct io_uring_cqe cqe = t->r.cqes[head & t->r.cq_mask];

			atomic_store_explicit(t->r.cq_head, head + 1, memory_order_release);
			if (!complete(t, &cqe))
				run = false;
		}
	}
	/* Send the last answer, if one is queued. */
	if (atomic_load_explicit(t->r.sq_tail, memory_order_relaxed) !=
	    atomic_load_explicit(t->r.sq_head, memory_order_acquire))
		(void)sys_enter(t->r.fd, atomic_load_explicit(t->r.sq_tail, memory_order_relaxed) -
					 atomic_load_explicit(t->r.sq_head, memory_order_acquire), 0);
	pthread_mutex_lock(&u->lock);
	u->exited++;
	pthread_cond_broadcast(&u->cond);
	pthread_mutex_unlock(&u->lock);
	return NULL;
}

/* The kernel keeps a queue for every possible CPU (num_possible_cpus(),
 * which counts hot-pluggable ones too) and serves nothing over io_uring
 * until each has a buffer: count them as it does. */
static unsigned possible_cpus(void)
{
	FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
	unsigned lo, hi, max = 0;
	bool any = false;
	int sep;

	/* "0-63" or "0,2-5,8" */
	while (f && fscanf(f, "%u", &lo) == 1) {
		hi = lo;
		sep = fgetc(f);
		if (sep == '-' && fscanf(f, "%u", &hi) == 1)
			sep = fgetc(f);
		if (hi >= max)
			max = hi;
		any = true;
		if (sep != ',')
			break;
	}
	if (f)
		fclose(f);
	return any ? max + 1 : (unsigned)get_nprocs_conf();
}

struct csdfs_uring *csdfs_uring_prepare(struct fuse_session *se, unsigned threads,
					char *why, size_t whylen)
{
	unsigned nq = possible_cpus(), per_queue, online;
	struct csdfs_uring *u;
	cpu_set_t mine;
	int rc = 0;

	if (nq == 0 || nq > CPU_SETSIZE) {
		snprintf(why, whylen, "cannot size the queues (%u possible CPUs)", nq);
		return NULL;
	}
	if (sched_getaffinity(0, sizeof(mine), &mine)) {
		snprintf(why, whylen, "sched_getaffinity: %s", strerror(errno));
		return NULL;
	}
	/* Enough threads per queue that a few requests blocked in fsync do
	 * not hold up their CPU's other requests. */
	online = (unsigned)CPU_COUNT(&mine);
	per_queue = online && threads / online > 4 ? threads / online : 4;
	u = calloc(1, sizeof(*u) + (size_t)nq * per_queue * sizeof(u->t[0]));
	if (u)
		u->busy = calloc(nq, sizeof(*u->busy));
	if (!u || !u->busy) {
		snprintf(why, whylen, "out of memory");
		free(u);
		return NULL;
	}
	u->all_cpus = mine;
	u->se = se;
	u->nqueues = nq;
	u->per_queue = per_queue;
	u->stop_fd = eventfd(0, EFD_CLOEXEC);
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->cond, NULL);
	if (u->stop_fd < 0) {
		snprintf(why, whylen, "eventfd: %s", strerror(errno));
		csdfs_uring_stop(u);
		return NULL;
	}
	/* Every ring exists before INIT offers io_uring: once the kernel
	 * accepted it, requests wait until each queue has a buffer. */
	for (unsigned i = 0; i < nq * per_queue; i++) {
		struct ring_thread *t = &u->t[i];

		t->u = u;
		t->qid = i / per_queue;
		/* A CPU we may not run on (offline, or outside our affinity)
		 * gets one thread: its queue must exist, it is rarely used. */
		if (i % per_queue && !CPU_ISSET(t->qid, &u->all_cpus))
			continue;
		rc = ring_open(&t->r);
		if (rc) {
			snprintf(why, whylen, "io_uring_setup: %s", strerror(-rc));
			break;
		}
		rc = -pthread_create(&t->tid, NULL, thread_main, t);
		if (rc) {
			snprintf(why, whylen, "cannot start a thread: %s", strerror(-rc));
			break;
		}
		t->started = true;
		u->nthreads++;
	}
	if (rc) {
		csdfs_uring_stop(u);
		return NULL;
	}
	return u;
}

void csdfs_uring_go(struct csdfs_uring *u, size_t payload)
{
	pthread_mutex_lock(&u->lock);
	u->payload = payload;
	u->go = true;
	pthread_cond_broadcast(&u->cond);
	pthread_mutex_unlock(&u->lock);
}

unsigned long csdfs_uring_served(const struct csdfs_uring *u)
{
	return u ? atomic_load_explicit(&u->served, memory_order_relaxed) : 0;
}

void csdfs_uring_stop(struct csdfs_uring *u)
{
	struct timespec until;
	uint64_t one = 1;
	bool all;

	if (!u)
		return;
	pthread_mutex_lock(&u->lock);
	u->stop = true;
	pthread_cond_broadcast(&u->cond);
	pthread_mutex_unlock(&u->lock);
	if (u->stop_fd >= 0 && write(u->stop_fd, &one, sizeof(one)) != sizeof(one))
		csdfs_log(LOG_WARNING, "io_uring: cannot signal the ring threads: %s",
			  strerror(errno));
	/* A thread inside a request (an fsync) finishes it first. */
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2;
	pthread_mutex_lock(&u->lock);
	while (u->exited < u->nthreads &&
	       pthread_cond_timedwait(&u->cond, &u->lock, &until) == 0)
		;
	all = u->exited == u->nthreads;
	pthread_mutex_unlock(&u->lock);
	if (!all) {
		/* Leave them: the process is about to exit; freeing their
		 * buffers under them would be worse. */
		csdfs_log(LOG_WARNING, "io_uring: %u ring threads still busy at exit",
			  u->nthreads - u->exited);
		return;
	}
	for (unsigned i = 0; i < u->nqueues * u->per_queue; i++) {
		struct ring_thread *t = &u->t[i];

		if (t->started)
			pthread_join(t->tid, NULL);
		/* Closing the ring cancels a registration still pending. */
		if (t->r.sq_map)
			ring_close(&t->r);
		if (t->hdr)
			munmap(t->hdr, (size_t)sysconf(_SC_PAGESIZE));
		if (t->area)
			munmap(t->area, t->area_len);
	}
	if (u->stop_fd >= 0)
		close(u->stop_fd);
	pthread_cond_destroy(&u->cond);
	pthread_mutex_destroy(&u->lock);
	free(u->busy);
	free(u);
}
