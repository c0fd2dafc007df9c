/* SPDX-License-Identifier: MIT */
/* The FUSE low-level operation table (ops.c) and its settings. */
#ifndef CSDFS_DAEMON_OPS_H
#define CSDFS_DAEMON_OPS_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include "csdfs/csdfs.h"

struct csdfs_fuse {
	struct csdfs_vol *vol;
	struct fuse_session *se;
	struct csdfs_stores *stores;  /* page-cache stores (store.c) */
	int writeback_cache;
	double attr_timeout;
	uint64_t max_dirty;        /* the mount's dirty-page budget, if set */
};

extern const struct fuse_lowlevel_ops csdfs_fuse_ops;

#endif
