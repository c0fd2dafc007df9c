/* SPDX-License-Identifier: MIT */
/*
 * The mount's backing device ("bdi") settings that decide how many round
 * trips the kernel makes to the daemon. Root only; the kernel resets them
 * at FUSE INIT, so they are written after it (see devio.c).
 *
 * - read_ahead_kb: a sequential reader costs one round trip per readahead
 *   window, and a FUSE mount starts with 128 KiB.
 * - max_bytes: the kernel lets a FUSE mount hold only about 1% of the
 *   dirty-page budget (some 48 MiB here); a random writer is then
 *   throttled to the daemon's pace before its writes could merge in the
 *   page cache. A larger budget lets neighbouring dirty pages reach the
 *   daemon as one write (one chunk rewritten instead of several), as a
 *   local filesystem's writeback does. Sized from the volume (an eighth of
 *   the capacity, 64 MiB to 1 GiB): writable opens switch to direct I/O
 *   before less than that is free (ops.c), so ENOSPC still reaches
 *   write(2) rather than a late flush.
 *
 * The mount's device number comes from /proc/self/mountinfo: stat() on
 * the mount point would wait for the FUSE loop we are running in.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "csdfs/log.h"
#include "bdi.h"

static int bdi_of(const char *mountpoint, char *dev, size_t len)
{
	char line[4096];
	FILE *f = fopen("/proc/self/mountinfo", "r");

	dev[0] = '\0';
	while (f && fgets(line, sizeof(line), f)) {
		char mdev[32], mpoint[4096];

		/* id parent major:minor root mountpoint ... (the last match
		 * is the newest mount; paths with spaces come octal-escaped
		 * and simply do not match: then nothing is tuned) */
		if (sscanf(line, "%*s %*s %31s %*s %4095s", mdev, mpoint) == 2 &&
		    !strcmp(mpoint, mountpoint))
			snprintf(dev, len, "%s", mdev);
	}
	if (f)
		fclose(f);
	return dev[0] ? 0 : -ENOENT;
}

static int bdi_set(const char *dev, const char *knob, unsigned long long v)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/bdi/%s/%s", dev, knob);
	f = fopen(path, "w");
	if (!f || fprintf(f, "%llu\n", v) < 0 || fclose(f)) {
		int e = errno;

		csdfs_log(LOG_DEBUG, "cannot set %s: %s", path, strerror(e));
		return -e;
	}
	return 0;
}

static uint64_t auto_dirty(struct csdfs_fuse *f)
{
	struct statvfs sv;
	uint64_t v;

	if (!f->vol || csdfs_fs_statfs(f->vol, &sv))
		return 0;
	v = (uint64_t)sv.f_blocks * sv.f_frsize / 8;
	return v < (64ull << 20) ? 64ull << 20 : v > (1ull << 30) ? 1ull << 30 : v;
}

void csdfs_bdi_tune(void *arg)
{
	struct csdfs_bdi_tuning *t = arg;
	uint64_t dirty = t->max_dirty;
	char dev[32];

	if (!t->mountpoint || bdi_of(t->mountpoint, dev, sizeof(dev)))
		return;
	if (t->readahead)
		bdi_set(dev, "read_ahead_kb", (unsigned long long)(t->readahead / 1024));
	if (dirty == CSDFS_BDI_AUTO)
		dirty = auto_dirty(t->f);
	/* max_bytes is kernel 6.2+; without it the kernel's 1% stays. */
	if (dirty && !bdi_set(dev, "max_bytes", (unsigned long long)dirty))
		t->f->max_dirty = dirty;
}
