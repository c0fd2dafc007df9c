/* SPDX-License-Identifier: MIT */
/*
 * Per-thread write metering for write amplification figures: the bytes a
 * thread has passed to write-family calls, read from /proc/thread-self/io.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vol.h"

/*
 * Bytes this thread has passed to write-family calls (LMDB's own writes
 * happen in the committing thread), for write amplification; 0 if unknown.
 * Read twice per commit under vol->lock, so each thread keeps its
 * /proc/thread-self/io open (closed when it exits; reopened in a forked
 * child, where the inherited one names the parent's thread).
 */
static pthread_once_t wchar_once = PTHREAD_ONCE_INIT;
static pthread_key_t wchar_key;    /* this thread's fd + 1; 0: none */
static bool wchar_ok;              /* the key exists */
static unsigned wchar_fork_gen;
static _Thread_local unsigned wchar_gen;

static void wchar_close(void *p)
{
	close((int)(intptr_t)p - 1);
}

static void wchar_forked(void)
{
	wchar_fork_gen++;
}

static void wchar_init(void)
{
	wchar_ok = pthread_key_create(&wchar_key, wchar_close) == 0 &&
		   pthread_atfork(NULL, NULL, wchar_forked) == 0;
}

uint64_t csdfs_thread_wchar(void)
{
	char buf[512];
	const char *p;
	ssize_t n;
	int fd;

	pthread_once(&wchar_once, wchar_init);
	if (!wchar_ok)
		return 0;
	fd = (int)(intptr_t)pthread_getspecific(wchar_key) - 1;
	if (fd >= 0 && wchar_gen != wchar_fork_gen) {
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		fd = open("/proc/thread-self/io", O_RDONLY | O_CLOEXEC);
		wchar_gen = wchar_fork_gen;
		if (pthread_setspecific(wchar_key, (void *)(intptr_t)(fd + 1))) {
			if (fd >= 0)
				close(fd);
			return 0;
		}
		if (fd < 0)
			return 0;
	}
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	p = strstr(buf, "wchar: ");
	return p ? strtoull(p + 7, NULL, 10) : 0;
}

