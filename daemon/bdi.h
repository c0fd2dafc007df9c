/* SPDX-License-Identifier: MIT */
/* Tuning of the mount's backing device (bdi.c). */
#ifndef CSDFS_DAEMON_BDI_H
#define CSDFS_DAEMON_BDI_H

#include <stdint.h>

#include "ops.h"

#define CSDFS_BDI_AUTO UINT64_MAX

struct csdfs_bdi_tuning {
	char *mountpoint;          /* absolute; NULL: tune nothing */
	uint64_t readahead;        /* bytes; 0: keep the kernel's */
	uint64_t max_dirty;        /* bytes; CSDFS_BDI_AUTO; 0: keep */
	struct csdfs_fuse *f;      /* gets the dirty limit in effect */
};

/* Apply @arg (a struct csdfs_bdi_tuning) once the kernel has taken the
 * INIT reply (csdfs_fuse_io_install's callback). */
void csdfs_bdi_tune(void *arg);

#endif
