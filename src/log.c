/* SPDX-License-Identifier: MIT */
/* csdfs_log: the single log sink (stderr or syslog). */
#include <stdarg.h>
#include <stdio.h>
#include <pthread.h>

#include "csdfs/log.h"

static int log_level = LOG_INFO;
static bool log_syslog;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void csdfs_log_set_level(int level)
{
	log_level = level;
}

void csdfs_log_use_syslog(bool on, const char *ident)
{
	if (on)
		openlog(ident, LOG_PID, LOG_DAEMON);
	log_syslog = on;
}

void csdfs_log(int level, const char *fmt, ...)
{
	va_list ap;

	if (level > log_level)
		return;
	va_start(ap, fmt);
	if (log_syslog) {
		vsyslog(level, fmt, ap);
	} else {
		/* One locked write per message so threads never interleave. */
		pthread_mutex_lock(&log_lock);
		fputs("csdfs: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
		pthread_mutex_unlock(&log_lock);
	}
	va_end(ap);
}
