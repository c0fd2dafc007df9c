/* SPDX-License-Identifier: MIT */
/*
 * csdfs-stat: the command line. Parses and validates the options (all of
 * them before any sampling: a usage error exits 2 with nothing reported),
 * then hands the PATH or MOUNT arguments to the sampling loop (watch.c).
 * The layout of the program is described in stat.h.
 */
#include "stat.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

struct opts opt;

static const char *const sort_names[] = {
	[SORT_NAME] = "name", [SORT_LOGICAL] = "logical",
	[SORT_PHYSICAL] = "physical", [SORT_STORED] = "stored",
	[SORT_ZERO] = "zero", [SORT_RATIO] = "ratio", [SORT_SAVINGS] = "savings",
};

static void usage(FILE *out)
{
	fprintf(out,
"usage: csdfs-stat [-r] [--json] [--sort=FIELD] [-H | --bytes] [--watch N [--count K]] PATH...\n"
"       csdfs-stat -f [--json | --prometheus] [-H | --bytes] [--watch N [--count K]] MOUNT...\n"
"       csdfs-stat --policy [-r] PATH...\n"
"       csdfs-stat --histogram [-r] [--json] PATH...\n"
"\n"
"Report logical and physical space of files, directory trees and csdfs\n"
"volumes, read from the user.csdfs.* attributes of a mounted csdfs.\n"
"\n"
"  (no -f)           one row per PATH; a directory shows its subtree roll-up\n"
"  -r, --recursive   one row per regular file beneath each directory PATH,\n"
"                    a TOTAL row, and each directory's own roll-up to compare\n"
"  -f, --filesystem  volume status page of the csdfs mounted at (or holding) MOUNT\n"
"      --json        machine-readable output (docs/stat-json.md, csdfs-stat(1))\n"
"      --prometheus  with -f: Prometheus text format (node_exporter textfile)\n"
"      --policy      effective codec and chunk size of each PATH (with -r, of\n"
"                    everything beneath) and where each comes from\n"
"      --histogram   stored chunks by compressed size (<=4K, <=8K, ...), raw\n"
"                    and zero (holes), per file; a directory sums its files\n"
"      --sort=FIELD  name (default), logical, physical, stored, zero, ratio,\n"
"                    savings; numbers sort largest first\n"
"  -H, --human       sizes in K/M/G/T (binary) with one decimal (default)\n"
"  -b, --bytes       sizes in exact bytes\n"
"      --watch N     sample every N seconds and print the changes since the\n"
"                    previous sample, until interrupted\n"
"      --count K     with --watch: stop after K samples\n"
"  -h, --help        this help\n"
"\n"
"ratio = logical / physical; savings = 1 - physical / logical.\n"
"Exit status: 0 success, 1 a PATH could not be reported, 2 usage error.\n");
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, PROG ": ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (try --help)\n");
	return EXIT_USAGE;
}

int main(int argc, char *argv[])
{
	enum { O_JSON = 256, O_SORT, O_WATCH, O_COUNT, O_PROM, O_POLICY, O_HIST };
	static const struct option longopts[] = {
		{ "recursive", no_argument, NULL, 'r' },
		{ "filesystem", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, O_JSON },
		{ "prometheus", no_argument, NULL, O_PROM },
		{ "policy", no_argument, NULL, O_POLICY },
		{ "histogram", no_argument, NULL, O_HIST },
		{ "sort", required_argument, NULL, O_SORT },
		{ "human", no_argument, NULL, 'H' },
		{ "bytes", no_argument, NULL, 'b' },
		{ "watch", required_argument, NULL, O_WATCH },
		{ "count", required_argument, NULL, O_COUNT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	static char *dot[] = { ".", NULL };
	bool sort_given = false;
	char **paths, *end;
	size_t k;
	int c, npaths;

	opt.sort = SORT_NAME;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":rfHbh", longopts, NULL)) != -1) {
		switch (c) {
		case 'r': opt.recursive = true; break;
		case 'f': opt.volume = true; break;
		case 'H': opt.bytes = false; break;
		case 'b': opt.bytes = true; break;
		case O_JSON: opt.json = true; break;
		case O_PROM: opt.prometheus = true; break;
		case O_POLICY: opt.policy = true; break;
		case O_HIST: opt.histogram = true; break;
		case O_SORT:
			for (k = 0; k < sizeof(sort_names) / sizeof(sort_names[0]); k++)
				if (!strcmp(optarg, sort_names[k]))
					break;
			if (k == sizeof(sort_names) / sizeof(sort_names[0]))
				return usage_error("bad --sort field '%s' (name, logical, physical, stored, zero, ratio or savings)",
						   optarg);
			opt.sort = (enum sort_key)k;
			sort_given = true;
			break;
		case O_WATCH:
			errno = 0;
			opt.watch = strtod(optarg, &end);
			if (errno || end == optarg || *end || !isfinite(opt.watch) ||
			    opt.watch <= 0 || opt.watch > 86400)
				return usage_error("bad --watch interval '%s' (seconds, more than 0)",
						   optarg);
			break;
		case O_COUNT:
			errno = 0;
			opt.count = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || opt.count < 1)
				return usage_error("bad --count '%s' (a number of samples, 1 or more)",
						   optarg);
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		case ':':
			return usage_error("option '%s' needs an argument", argv[optind - 1]);
		default:
			if (optopt && optopt < 256) {
				char o[3] = { '-', (char)optopt, '\0' };

				return usage_error("unknown option '%s'", o);
			}
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (opt.volume && opt.recursive)
		return usage_error("%s", "-f and -r do not go together");
	if (opt.volume && sort_given)
		return usage_error("%s", "--sort does not apply to -f");
	if (opt.prometheus && (!opt.volume || opt.json))
		return usage_error("%s", "--prometheus goes with -f, without --json");
	if (opt.policy && (opt.volume || opt.json || sort_given || opt.watch > 0))
		return usage_error("%s", "--policy goes with -r only (not -f, --json, --sort, --watch)");
	if (opt.histogram && (opt.volume || opt.policy || opt.watch > 0))
		return usage_error("%s", "--histogram goes with -r, --json and --sort only (not -f, --policy, --watch)");
	if (opt.count && opt.watch <= 0)
		return usage_error("%s", "--count needs --watch");
	paths = optind < argc ? &argv[optind] : dot;
	npaths = optind < argc ? argc - optind : 1;

	if (opt.watch > 0)
		install_signals();
	if (opt.policy)
		run_policy(paths, npaths);
	else if (opt.volume)
		run_volumes(paths, npaths);
	else
		run_paths(paths, npaths);
	problems_clear();
	free(problems);
	return exit_status;
}
