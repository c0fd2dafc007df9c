/* SPDX-License-Identifier: MIT */
/*
 * csdfs-recompress: rewrite, online, the chunks of files that do not match
 * their effective codec policy (after `setfattr -n user.csdfs.codec`). A
 * thin client of the mount's xattrs: reading user.csdfs.recompress gives
 * the chunks left, writing N asks the daemon to rewrite up to N of them in
 * bounded transactions. Progress is shown as it goes on a terminal; other
 * output gets one final line per file.
 *
 * --compact does the same with user.csdfs.compact: move the live chunks
 * out of mostly dead blocks (of files, or with the mount root as PATH and
 * no -r, of the whole volume), N MiB per request.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

static const char *attr = "user.csdfs.recompress", *step = "256", *done = "rewritten";
static int quiet, failures, tty;   /* tty: stdout is a terminal */

static long chunks_left(const char *path)
{
	char buf[32];
	ssize_t n = getxattr(path, attr, buf, sizeof(buf) - 1);

	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return strtol(buf, NULL, 10);
}

static int recompress_file(const char *path)
{
	long total = chunks_left(path), left = total, steps = 0, stored = 0;
	char sbuf[32];
	ssize_t n = getxattr(path, "user.csdfs.stored", sbuf, sizeof(sbuf) - 1);

	if (n > 0) {
		sbuf[n] = '\0';
		stored = atol(sbuf);
	}

	if (total < 0) {
		if (total == -EINVAL && *done == 'm')
			fprintf(stderr, "csdfs-recompress: '%s' is neither a file nor the mount root "
				"(use -r for a tree)\n", path);
		else
			fprintf(stderr, "csdfs-recompress: '%s': %s\n", path,
				total == -ENODATA || total == -ENOTSUP ?
				"not on a csdfs filesystem" : strerror((int)-total));
		failures++;
		return 0;
	}
	while (left > 0) {
		long before = left;

		if (setxattr(path, attr, step, strlen(step), 0)) {
			fprintf(stderr, "csdfs-recompress: '%s': %s\n", path, strerror(errno));
			failures++;
			return 0;
		}
		left = chunks_left(path);
		if (left < 0)
			break;
		/* A progress line rewritten in place on a terminal; a log or a
		 * pipe gets only the final line, not a \r-joined run of them. */
		if (!quiet && tty) {
			printf("\r%s: %ld of %ld chunks %s (%.0f%%)", path,
			       total - left, total, done,
			       total ? 100.0 * (double)(total - left) / (double)total : 100.0);
			fflush(stdout);
		}
		/* A compaction request goes over the whole file (volume) unless
		 * it moves step MiB first: what is left after it is busy, or
		 * chunks it just moved next to padding that looks dead. */
		if (left >= before || (*done == 'm' && ++steps * (atol(step) << 20) >= stored))
			break;
	}
	if (!quiet)
		printf("%s%s: %ld chunks %s%s\n", total && tty ? "\n" : "", path, total - (left > 0 ? left : 0),
		       done, left > 0 ? ", the rest busy or not worth moving" :
		       *done == 'r' ? ", policy matched" : ", compact");
	return 0;
}

static int walk_cb(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)f;
	if (type == FTW_F && S_ISREG(st->st_mode))
		return recompress_file(path);
	return 0;
}

int main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "recursive", no_argument, NULL, 'r' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "compact", no_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	int recursive = 0, compact = 0, c;

	tty = isatty(STDOUT_FILENO);

	while ((c = getopt_long(argc, argv, "rqch", longopts, NULL)) != -1) {
		switch (c) {
		case 'r': recursive = 1; break;
		case 'q': quiet = 1; break;
		case 'c':
			compact = 1;
			attr = "user.csdfs.compact";
			step = "64";
			done = "moved";
			break;
		case 'h':
			printf("usage: csdfs-recompress [-r] [-q] [-c] PATH...\n"
			       "Rewrite the chunks of files on a csdfs mount that do not match\n"
			       "their codec policy (user.csdfs.codec), online.\n"
			       "  -r, --recursive  descend into directories\n"
			       "  -c, --compact    instead, move live chunks out of mostly dead\n"
			       "                   blocks (the mount root without -r: the volume)\n"
			       "  -q, --quiet      no progress output\n");
			return 0;
		default:
			fprintf(stderr, "csdfs-recompress: bad option (try --help)\n");
			return 2;
		}
	}
	if (optind == argc) {
		fprintf(stderr, "csdfs-recompress: missing PATH (try --help)\n");
		return 2;
	}
	for (int i = optind; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st)) {
			fprintf(stderr, "csdfs-recompress: '%s': %s\n", argv[i], strerror(errno));
			failures++;
		} else if (S_ISDIR(st.st_mode) && recursive) {
			nftw(argv[i], walk_cb, 32, FTW_PHYS | FTW_MOUNT);
		} else if (S_ISDIR(st.st_mode) && compact) {
			recompress_file(argv[i]);   /* the mount root: the volume */
		} else if (S_ISREG(st.st_mode)) {
			recompress_file(argv[i]);
		} else {
			fprintf(stderr, "csdfs-recompress: '%s' is not a regular file%s\n",
				argv[i], S_ISDIR(st.st_mode) ? " (use -r)" : "");
			failures++;
		}
	}
	return failures ? 1 : 0;
}
