/* SPDX-License-Identifier: MIT */
/* fdatasync(2) that fails on request for data.mdb and "synced" (sync_fault.h). */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "sync_fault.h"

int meta_syncs_left = -1;

/* Whether @target (@n bytes) ends in "/" @name. */
static int ends_with(const char *target, ssize_t n, const char *name)
{
	size_t len = strlen(name);

	return n > (ssize_t)len && target[n - len - 1] == '/' &&
	       !memcmp(target + n - len, name, len);
}

int fdatasync(int fd)
{
	static int (*real)(int);
	char link[64], target[PATH_MAX];
	ssize_t n;

	if (!real)
		real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
	if (meta_syncs_left >= 0) {
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, target, sizeof(target) - 1);
		if ((ends_with(target, n, "data.mdb") || ends_with(target, n, "synced")) &&
		    meta_syncs_left-- == 0) {
			errno = EIO;
			return -1;
		}
	}
	return real(fd);
}
