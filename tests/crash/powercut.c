/* SPDX-License-Identifier: MIT */
/*
 * powercut: the replay half of the power-cut simulator. Run it on the files
 * of a crashed process that ran with powercut_preload.so; it turns them into
 * one state the disk may hold after a power cut at the moment of the crash.
 *
 *   powercut [--log DIR] [--seed N] [--keep-prob P] [--keep-log] FILE...
 *
 * For each FILE it reads DIR/<basename>.undo (DIR defaults to $POWERCUT_LOG),
 * drops the records its SYNC/RANGE markers declare durable, and then, for
 * every 4 KiB page that still has pre-images, independently: keeps the
 * current content with probability P (default 0.5), else writes back one of
 * the page's logged pre-images chosen uniformly (the last synced content or
 * an intermediate version a writeback may have caught). The file size is
 * likewise kept or put back to its last durable value. Pages past the chosen
 * size disappear; bytes of a pre-image that lay past EOF read as zeros.
 * The undo logs are removed afterwards (unless --keep-log). --ignore-sync
 * simulates a disk that lies about flushes, to show the checks notice.
 *
 * The record layout is shared with powercut_preload.c: keep them in step.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PC_PAGE 4096u
#define PC_REC_MAGIC 0x52554350u /* "PCUR" */
enum { PC_REC_PAGE = 1, PC_REC_SYNC = 2, PC_REC_RANGE = 3, PC_REC_SIZE = 4 };

struct pc_rec {
	uint32_t magic;
	uint32_t type;
	uint64_t off;
	uint64_t len;
	uint64_t size;
	uint64_t mark;
};
_Static_assert(sizeof(struct pc_rec) == 40, "undo record layout");

/* a PAGE record: where it sits in the log, and its pre-image */
struct pre {
	uint64_t logoff;
	uint64_t page;       /* page index */
	uint32_t len;
	const char *data;
};

struct range {
	uint64_t mark, first, last;  /* pages [first, last] */
};

static uint64_t rng_state;

static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double rng_unit(void)
{
	return (double)(rng_next() >> 11) / 9007199254740992.0;
}

static int cmp_pre(const void *a, const void *b)
{
	const struct pre *x = a, *y = b;

	if (x->page != y->page)
		return x->page < y->page ? -1 : 1;
	return x->logoff < y->logoff ? -1 : x->logoff > y->logoff;
}

static char *read_all(const char *path, size_t *len)
{
	struct stat st;
	char *buf;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st)) {
		close(fd);
		return NULL;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		close(fd);
		errno = ENOMEM;
		return NULL;
	}
	while (got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	*len = got;
	return buf;
}

static int pwrite_all(int fd, const char *buf, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, buf, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return 0;
}

struct opts {
	const char *log_dir;
	double keep;
	int keep_log;
	int verbose;
	int ignore_sync;   /* testing the tester: treat durable writes as not */
};

/* Apply one file's undo log. Returns 0, or 1 on an error (printed). */
static int cut_file(const struct opts *o, const char *path)
{
	const char *base = strrchr(path, '/');
	char logpath[4200], *log;
	struct pre *pre = NULL;
	struct range *rg = NULL;
	size_t loglen = 0, npre = 0, nrg = 0, npages = 0, nrev = 0, off;
	uint64_t max_sync = 0, dmark = 0, dsize = 0, first_size = 0, cur, final;
	int have_dsize = 0, have_first = 0, fd, rc = 1;
	struct stat st;
	char zero[PC_PAGE];

	base = base ? base + 1 : path;
	snprintf(logpath, sizeof(logpath), "%s/%s.undo", o->log_dir, base);
	log = read_all(logpath, &loglen);
	if (!log) {
		if (errno != ENOENT) {
			fprintf(stderr, "powercut: cannot read '%s': %s\n", logpath,
				strerror(errno));
			return 1;
		}
		printf("powercut: %s: no undo log, 0 pages reverted\n", path);
		return 0;
	}
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		fprintf(stderr, "powercut: cannot open '%s': %s\n", path, strerror(errno));
		goto out_close;
	}
	cur = (uint64_t)st.st_size;
	pre = malloc((loglen / sizeof(struct pc_rec) + 1) * sizeof(*pre));
	rg = malloc((loglen / sizeof(struct pc_rec) + 1) * sizeof(*rg));
	if (!pre || !rg) {
		fprintf(stderr, "powercut: out of memory\n");
		goto out_close;
	}
	/* Pass 1: collect. A record cut short by the kill is ignored: it was
	 * appended before its real write, which therefore never happened. */
	for (off = 0; off + sizeof(struct pc_rec) <= loglen; ) {
		struct pc_rec r;

		memcpy(&r, log + off, sizeof(r));
		if (r.magic != PC_REC_MAGIC) {
			fprintf(stderr, "powercut: '%s': bad record at offset %zu\n",
				logpath, off);
			goto out_close;
		}
		if (r.type == PC_REC_PAGE) {
			if (r.len > PC_PAGE || off + sizeof(r) + r.len > loglen)
				break;
			pre[npre++] = (struct pre){ off, r.off / PC_PAGE, (uint32_t)r.len,
						    log + off + sizeof(r) };
		} else if (r.type == PC_REC_RANGE && r.len) {
			rg[nrg++] = (struct range){ r.mark, r.off / PC_PAGE,
						    (r.off + r.len - 1) / PC_PAGE };
		} else if (r.type == PC_REC_SYNC) {
			if (r.mark > max_sync)
				max_sync = r.mark;
		} else if (r.type != PC_REC_SIZE && r.type != PC_REC_RANGE) {
			fprintf(stderr, "powercut: '%s': unknown record type %u\n",
				logpath, r.type);
			goto out_close;
		}
		if ((r.type == PC_REC_PAGE || r.type == PC_REC_SIZE) && !have_first) {
			first_size = r.size;
			have_first = 1;
		}
		/* the newest durability point carries the durable size */
		if ((r.type == PC_REC_SYNC || r.type == PC_REC_RANGE) &&
		    (!have_dsize || r.mark >= dmark)) {
			dmark = r.mark;
			dsize = r.size;
			have_dsize = 1;
		}
		off += sizeof(r) + (r.type == PC_REC_PAGE ? r.len : 0);
	}
	if (!have_dsize || o->ignore_sync)
		dsize = have_first ? first_size : cur;
	/* Pass 2: drop durable pre-images. */
	{
		size_t k = 0;

		for (size_t i = 0; i < npre; i++) {
			int durable = !o->ignore_sync && pre[i].logoff < max_sync;

			for (size_t j = 0; j < nrg && !durable && !o->ignore_sync; j++)
				durable = pre[i].logoff < rg[j].mark &&
					  pre[i].page >= rg[j].first &&
					  pre[i].page <= rg[j].last;
			if (!durable)
				pre[k++] = pre[i];
		}
		npre = k;
	}
	qsort(pre, npre, sizeof(*pre), cmp_pre);
	/* The size first: pages past it vanish whatever we choose for them. */
	final = cur;
	if (dsize != cur && rng_unit() >= o->keep)
		final = dsize;
	if (final != cur && ftruncate(fd, (off_t)final)) {
		fprintf(stderr, "powercut: ftruncate '%s': %s\n", path, strerror(errno));
		goto out_close;
	}
	memset(zero, 0, sizeof(zero));
	for (size_t i = 0; i < npre; ) {
		uint64_t page = pre[i].page, poff = page * PC_PAGE;
		size_t j = i, nv;

		while (j < npre && pre[j].page == page)
			j++;
		nv = j - i;
		npages++;
		/* a page the size change brings back (an undone truncation)
		 * gets old content, never the zeros the truncation left */
		if ((rng_unit() >= o->keep || (final > cur && poff + PC_PAGE > cur)) &&
		    poff < final) {
			const struct pre *v = &pre[i + rng_next() % nv];
			uint64_t room = final - poff < PC_PAGE ? final - poff : PC_PAGE;
			uint64_t dlen = v->len < room ? v->len : room;

			if (pwrite_all(fd, v->data, dlen, poff) ||
			    (room > dlen && pwrite_all(fd, zero, room - dlen, poff + dlen))) {
				fprintf(stderr, "powercut: write '%s': %s\n", path,
					strerror(errno));
				goto out_close;
			}
			if (o->verbose)
				printf("powercut: %s: page %" PRIu64 " <- version %zu of %zu\n",
				       path, page, (size_t)(v - &pre[i]) + 1, nv);
			nrev++;
		}
		i = j;
	}
	if (fsync(fd)) {
		fprintf(stderr, "powercut: fsync '%s': %s\n", path, strerror(errno));
		goto out_close;
	}
	printf("powercut: %s: %zu of %zu dirty pages reverted, size %" PRIu64
	       " -> %" PRIu64 " (durable %" PRIu64 ")\n",
	       path, nrev, npages, cur, final, dsize);
	if (!o->keep_log && unlink(logpath)) {
		fprintf(stderr, "powercut: cannot remove '%s': %s\n", logpath,
			strerror(errno));
		goto out_close;
	}
	rc = 0;
out_close:
	if (fd >= 0)
		close(fd);
	free(pre);
	free(rg);
	free(log);
	return rc;
}

static void usage(FILE *out)
{
	fprintf(out,
"usage: powercut [--log DIR] [--seed N] [--keep-prob P] [--keep-log] [-v]\n"
"                [--ignore-sync] FILE...\n"
"\n"
"Simulate a power cut on FILEs written by a process that ran with\n"
"powercut_preload.so: every page written since its last durable point is\n"
"independently kept (probability P, default 0.5) or put back to one of its\n"
"logged earlier versions; the size likewise.\n"
"\n"
"  --log DIR        directory of the undo logs (default $POWERCUT_LOG)\n"
"  --seed N         random seed (default: from the clock; printed)\n"
"  --keep-prob P    probability that an un-synced page survives, 0..1\n"
"  --keep-log       do not remove the undo logs afterwards\n"
"  -v, --verbose    print every reverted page\n"
"  --ignore-sync    also drop writes that WERE made durable (a broken disk):\n"
"                   only to prove that the checks notice lost durable data\n");
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "log", required_argument, NULL, 'l' },
		{ "seed", required_argument, NULL, 's' },
		{ "keep-prob", required_argument, NULL, 'k' },
		{ "keep-log", no_argument, NULL, 'K' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "ignore-sync", no_argument, NULL, 'I' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct opts o = { getenv("POWERCUT_LOG"), 0.5, 0, 0, 0 };
	uint64_t seed = 0;
	int have_seed = 0, c, rc = 0;
	char *end;

	while ((c = getopt_long(argc, argv, "v", lopts, NULL)) != -1) {
		switch (c) {
		case 'l':
			o.log_dir = optarg;
			break;
		case 's':
			errno = 0;
			seed = strtoull(optarg, &end, 0);
			if (errno || *end || end == optarg) {
				fprintf(stderr, "powercut: bad --seed '%s'\n", optarg);
				return 2;
			}
			have_seed = 1;
			break;
		case 'k':
			o.keep = strtod(optarg, &end);
			if (*end || end == optarg || !(o.keep >= 0 && o.keep <= 1)) {
				fprintf(stderr, "powercut: bad --keep-prob '%s' (0..1)\n", optarg);
				return 2;
			}
			break;
		case 'K':
			o.keep_log = 1;
			break;
		case 'v':
			o.verbose = 1;
			break;
		case 'I':
			o.ignore_sync = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc || !o.log_dir || !*o.log_dir) {
		fprintf(stderr, "powercut: %s\n", optind >= argc ?
			"no FILE given" : "no undo-log directory (--log or POWERCUT_LOG)");
		return 2;
	}
	if (!have_seed)
		seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	printf("powercut: seed %" PRIu64 ", keep probability %.2f\n", seed, o.keep);
	for (int i = optind; i < argc; i++) {
		/* per-file stream: the same seed gives the same cut per file,
		 * whatever the order of the arguments */
		const char *b = strrchr(argv[i], '/');

		rng_state = seed;
		for (b = b ? b + 1 : argv[i]; *b; b++)
			rng_state = (rng_state ^ (uint8_t)*b) * 0x100000001b3ull;
		rc |= cut_file(&o, argv[i]);
	}
	return rc;
}
