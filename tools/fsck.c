/* SPDX-License-Identifier: MIT */
/* csdfs-fsck: offline check of a volume, fsck(8) exit codes. */
#include <getopt.h>
#include <stdio.h>

#include "csdfs/csdfs.h"
#include "csdfs/log.h"

static void usage(FILE *out)
{
	fprintf(out,
"usage: csdfs-fsck [--repair] [--verify-data] [-v] VOLUME\n"
"\n"
"Check every metadata invariant of an unmounted csdfs volume.\n"
"  -r, --repair       fix what is safe: leaked blocks, unrecorded orphans,\n"
"                     volume counters\n"
"  -d, --verify-data  also read and verify every stored chunk\n"
"  -v, --verbose      print a summary\n"
"Exit status: 0 clean, 1 errors corrected, 4 errors left, 8 operational\n"
"error, 16 usage error.\n");
}

static void say_waiting(const char *path)
{
	fprintf(stderr, "csdfs-fsck: waiting for the daemon of '%s' to finish closing\n", path);
}

int main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "repair", no_argument, NULL, 'r' },
		{ "verify-data", no_argument, NULL, 'd' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct csdfs_fsck_opts o = { 0 };
	int c, rc;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "rdvh", longopts, NULL)) != -1) {
		switch (c) {
		case 'r': o.repair = true; break;
		case 'd': o.verify_data = true; break;
		case 'v': o.verbose = true; break;
		case 'h': usage(stdout); return 0;
		default:
			fprintf(stderr, "csdfs-fsck: unknown option '%s' (try --help)\n",
				argv[optind - 1]);
			return 16;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "csdfs-fsck: %s (try --help)\n",
			optind == argc ? "missing VOLUME" : "too many arguments");
		return 16;
	}
	/* Right after fusermount3 -u the daemon may still be closing the
	 * volume (bounded; a mounted one is refused at once). */
	csdfs_vol_wait_closed(argv[optind], 10000, say_waiting);
	rc = csdfs_fsck(argv[optind], &o);
	if (rc == 0 && o.verbose)
		printf("csdfs-fsck: '%s' is clean\n", argv[optind]);
	else if (rc & 4)
		fprintf(stderr, "csdfs-fsck: '%s' has errors\n", argv[optind]);
	return rc;
}
