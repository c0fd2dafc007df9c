/* SPDX-License-Identifier: MIT */
/*
 * One printf-style logger for the whole project, with syslog levels. The
 * daemon sends it to stderr in the foreground and to syslog once daemonised;
 * libfuse's own log is bridged into it by the glue.
 */
#ifndef CSDFS_LOG_H
#define CSDFS_LOG_H

#include <stdbool.h>
#include <syslog.h>

/* csdfs_log - log one message (no trailing newline needed). Thread-safe. */
void csdfs_log(int level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* Messages above @level (numerically) are dropped. Default LOG_INFO. */
void csdfs_log_set_level(int level);

/* Route messages to syslog (true) or stderr (false, the default). */
void csdfs_log_use_syslog(bool on, const char *ident);

#endif
