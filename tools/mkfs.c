/* SPDX-License-Identifier: MIT */
/* csdfs-mkfs: create a volume. A thin main over csdfs_vol_create(). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csdfs/csdfs.h"

static void usage(FILE *out)
{
	fprintf(out,
"usage: csdfs-mkfs [--size SIZE] [--logical-size SIZE | --multiplier X]\n"
"                  [--codec SPEC] [--chunk SIZE] [--force] VOLUME\n"
"\n"
"Create a csdfs volume: the directory VOLUME holding a fully preallocated\n"
"container file and the LMDB metadata environment.\n"
"\n"
"  -s, --size SIZE          physical container size, 64M to 4P (default 8G;\n"
"                           suffixes K/M/G/T/P, powers of 1024)\n"
"  -l, --logical-size SIZE  logical capacity shown by df (default = size)\n"
"  -m, --multiplier X       logical capacity = size * X (1.0 to 16.0)\n"
"  -c, --codec SPEC         default codec: zstd[:LEVEL] (-7..19), lz4[:ACCEL]\n"
"                           (1..64), none (default zstd:1)\n"
"  -k, --chunk SIZE         chunk size, power of two 4K..128K (default 16K)\n"
"  -f, --force              overwrite an existing volume\n"
"  -h, --help               this help\n");
}

static void say_waiting(const char *path)
{
	fprintf(stderr, "csdfs-mkfs: waiting for the daemon of '%s' to finish closing\n", path);
}

static int die(const char *fmt, const char *arg)
{
	fprintf(stderr, "csdfs-mkfs: ");
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	return 1;
}

int main(int argc, char *argv[])
{
	static const struct option longopts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "logical-size", required_argument, NULL, 'l' },
		{ "multiplier", required_argument, NULL, 'm' },
		{ "codec", required_argument, NULL, 'c' },
		{ "chunk", required_argument, NULL, 'k' },
		{ "force", no_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct csdfs_mkfs_opts o = {
		.size = 8ull << 30,
		.multiplier = 1.0,
		.codec = { CSDFS_CODEC_ZSTD, 1 },
		.chunk_size = CSDFS_CHUNK_DEFAULT,
	};
	bool have_logical = false, have_mult = false;
	char err[512], *end;
	uint64_t v;
	int c, rc;

	opterr = 0;
	while ((c = getopt_long(argc, argv, "s:l:m:c:k:fh", longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (csdfs_parse_size(optarg, &o.size))
				return die("bad size '%s' (64M to 4P, e.g. 512M, 8G)", optarg);
			break;
		case 'l':
			if (csdfs_parse_size(optarg, &o.logical_size))
				return die("bad logical size '%s' (expected e.g. 16G)", optarg);
			have_logical = true;
			break;
		case 'm':
			errno = 0;
			o.multiplier = strtod(optarg, &end);
			if (errno || end == optarg || *end)
				return die("bad multiplier '%s' (expected e.g. 2.0)", optarg);
			have_mult = true;
			break;
		case 'c':
			if (csdfs_codec_parse(optarg, &o.codec))
				return die("unknown codec '%s' (use " CSDFS_CODEC_CHOICES ")",
					   optarg);
			break;
		case 'k':
			if (csdfs_parse_size(optarg, &v) || v > (1u << 31))
				return die("bad chunk size '%s' (a power of two from 4K to 128K)",
					   optarg);
			o.chunk_size = (uint32_t)v;
			break;
		case 'f':
			o.force = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			if (optopt)
				fprintf(stderr, "csdfs-mkfs: option '-%c' is unknown or lacks its value (try --help)\n",
					optopt);
			else
				fprintf(stderr, "csdfs-mkfs: option '%s' is unknown or lacks its value (try --help)\n",
					argv[optind - 1]);
			return 1;
		}
	}
	if (have_logical && have_mult)
		return die("%s", "give --logical-size or --multiplier, not both");
	if (optind != argc - 1)
		return die("%s", optind == argc ? "missing VOLUME (try --help)" :
			   "too many arguments (try --help)");
	/* Right after fusermount3 -u the daemon may still be closing the old
	 * volume --force replaces (bounded; a mounted one is refused at once). */
	if (o.force)
		csdfs_vol_wait_closed(argv[optind], 10000, say_waiting);
	rc = csdfs_vol_create(argv[optind], &o, err, sizeof(err));
	if (rc)
		return die("%s", err);
	{
		char spec[32];

		csdfs_codec_format(o.codec, spec, sizeof(spec));
		printf("created csdfs volume '%s': %llu MiB physical, %llu MiB logical, codec %s, chunk %u KiB\n",
		       argv[optind], (unsigned long long)(o.size >> 20),
		       (unsigned long long)((o.logical_size ? o.logical_size :
					     (uint64_t)((double)o.size * o.multiplier)) >> 20),
		       spec, o.chunk_size >> 10);
	}
	return 0;
}
