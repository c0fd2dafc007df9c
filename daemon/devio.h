/* SPDX-License-Identifier: MIT */
/* The daemon's reads and writes on /dev/fuse (devio.c): negotiates
 * FUSE_HANDLE_KILLPRIV_V2, FUSE_DIRECT_IO_ALLOW_MMAP and io_uring, reports
 * each request's kill-privileges flag, and adds open flags libfuse 3.14
 * cannot express. */
#ifndef CSDFS_DAEMON_DEVIO_H
#define CSDFS_DAEMON_DEVIO_H

#include <stdbool.h>
#include <stddef.h>

#include "ops.h"

/* Call after fuse_session_mount(), before the loop. @fn(@arg), if given,
 * runs once the kernel has applied the INIT reply (mount settings the
 * kernel resets at INIT can be changed from then on). 0 or -errno. */
int csdfs_fuse_io_install(struct fuse_session *se, void (*fn)(void *), void *arg);
/* Before the loop: accept FUSE_OVER_IO_URING if the kernel offers it at
 * INIT. Only once uring.c's threads exist: from the INIT reply on,
 * the kernel holds every request until each CPU queue has a buffer. */
void csdfs_fuse_io_offer_uring(bool on);
/* Note a request about to be dispatched by this thread (what io_read does
 * for requests read from /dev/fuse): its kill-privileges flag, or INIT. */
void csdfs_fuse_io_note_request(const void *buf, size_t n);
/* The requests noted so far by opcode, for user.csdfs.requests on the
 * root: "total=N lookup=N getattr=N ..." (opcodes never seen left out,
 * unnamed ones summed as "other"). Any thread. @return the length, or
 * -ERANGE when @len is too short. */
int csdfs_fuse_io_requests(char *buf, size_t len);
/* Once INIT accepted io_uring: the payload buffer size each ring entry
 * needs; 0 when requests stay on /dev/fuse. */
size_t csdfs_fuse_io_uring_payload(void);
/* True while handling a write, setattr or open the kernel marked
 * KILL_SUIDGID (the caller lacks CAP_FSETID, or a chown). */
bool csdfs_fuse_io_req_kills_privs(void);
/* True once INIT negotiated FUSE_HANDLE_KILLPRIV_V2. */
bool csdfs_fuse_io_killpriv_v2(void);
/* True once INIT negotiated FUSE_DIRECT_IO_ALLOW_MMAP: a write through a
 * direct-I/O open flushes and drops the kernel's cached pages first. */
bool csdfs_fuse_io_direct_coherent(void);
/* From an open or create handler, before its reply: let the kernel send
 * this open's direct writes to one file in parallel
 * (FOPEN_PARALLEL_DIRECT_WRITES, which libfuse 3.14 has no field for). */
void csdfs_fuse_io_parallel_direct_writes(void);

#endif
