/* SPDX-License-Identifier: MIT */
/*
 * A failing fdatasync(2) for the metadata layer's files. LMDB syncs
 * data.mdb itself, and the metadata layer syncs data.mdb (when it rolls an
 * unsynced commit back) and its durability record ("synced"): all out of
 * reach of the container's I/O seam. sync_fault.c interposes libc's
 * fdatasync for the unit tests linked with it; armed, once meta_syncs_left
 * further syncs of either file succeeded, the next one fails with EIO and
 * the count ends at -1. Tests run forked, so arming reaches only the test
 * that sets it.
 */
#ifndef CSDFS_TEST_SYNC_FAULT_H
#define CSDFS_TEST_SYNC_FAULT_H

extern int meta_syncs_left;     /* < 0: not armed */

#endif
