/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the stored-chunk decoder, csdfs_codec_decompress(), fed
 * arbitrary stored bytes under an arbitrary chunk record (STYLE.md habit 9).
 * It must return 0 or a documented -errno, never crash, never write outside
 * a destination of exactly llen bytes, never read outside the stored bytes
 * (both end at a guard page, see guarded_buf).
 *
 * Input format:
 *   byte 0      codec id = byte & 3 (3 is no codec: must give -EINVAL)
 *   bytes 1..3  llen = little-endian 24-bit value mod (CSDFS_CHUNK_MAX + 1)
 *   bytes 4..   the stored bytes (plen = size - 4)
 * Shorter inputs are ignored. A decode that succeeds is not compared with
 * anything (there is no original), except codec NONE, which must copy.
 *
 * Built two ways: with -DCSDFS_FUZZ_LIBFUZZER as a libFuzzer target
 * (tests/fuzz/run_fuzz.sh), and without it as a plain replay program:
 *   fuzz_chunk FILE|DIR...          run each input (a directory: each regular
 *                                   file in it, except README* and dotfiles)
 *   fuzz_chunk --codec-corpus DIR|FILE...
 *                                   files named <codec>-<llen>-<desc>.bin
 *                                   hold bare stored bytes (the must-fail
 *                                   corpus, tests/fuzz-corpus/codec/README):
 *                                   each must be refused with -EUCLEAN
 *   fuzz_chunk --to-input DIR FILE...  convert such files to the input format
 *   fuzz_chunk --write-seeds DIR    write valid chunks of every codec
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csdfs/codec.h"
#include "csdfs/format.h"

#define HDR 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_fail(const char *what, uint8_t id, size_t plen, size_t llen,
		      int rc)
{
	fprintf(stderr, "fuzz_chunk: %s (codec %u, plen %zu, llen %zu, rc %d)\n",
		what, id, plen, llen, rc);
	abort();
}

/*
 * Buffers that end exactly at an inaccessible page. libzstd and liblz4 are
 * not built with the sanitizers, so ASan cannot see them step outside a
 * heap buffer; a guard page makes any overrun (by them or by us) a SIGSEGV,
 * in the libFuzzer build and in the plain replay build alike.
 */
struct guarded {
	uint8_t *base;
	size_t cap;               /* usable bytes before the guard page */
};

static uint8_t *guarded_buf(struct guarded *g, size_t len)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	if (len > g->cap || !g->base) {
		size_t cap = (len + page - 1) / page * page;
		void *p;

		if (g->base)
			munmap(g->base, g->cap + page);
		g->base = NULL;
		p = mmap(NULL, cap + page, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
		if (mprotect((uint8_t *)p + cap, page, PROT_NONE)) {
			munmap(p, cap + page);
			return NULL;
		}
		g->base = p;
		g->cap = cap;
	}
	return g->base + g->cap - len;
}

static struct guarded src_area, dst_area;

/* Decode @plen bytes at @stored into exactly @llen bytes; check the result. */
static int decode_checked(uint8_t id, const uint8_t *stored, size_t plen,
			  size_t llen)
{
	uint8_t *src = guarded_buf(&src_area, plen), *dst = guarded_buf(&dst_area, llen);
	int rc;

	if (!src || !dst)
		return -ENOMEM;
	memcpy(src, stored, plen);
	/* Poison the output: nothing below may depend on stale bytes. */
	memset(dst, 0xa5, llen);
	rc = csdfs_codec_decompress(id, src, plen, dst, llen);
	if (id >= CSDFS_CODEC_COUNT) {
		if (rc != -EINVAL)
			fuzz_fail("unknown codec id not refused with -EINVAL", id, plen, llen, rc);
	} else if (rc != 0 && rc != -EUCLEAN && rc != -ENOMEM) {
		fuzz_fail("returned something other than 0, -EUCLEAN, -ENOMEM", id, plen,
			  llen, rc);
	}
	if (memcmp(src, stored, plen))
		fuzz_fail("decoder modified its input", id, plen, llen, rc);
	if (id == CSDFS_CODEC_NONE) {
		if ((rc == 0) != (plen == llen))
			fuzz_fail("codec none: accepted iff plen == llen violated", id, plen,
				  llen, rc);
		if (rc == 0 && llen && memcmp(dst, src, llen))
			fuzz_fail("codec none: output differs from the stored bytes", id, plen,
				  llen, rc);
	}
	return rc;
}

static int last_rc;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t id;
	size_t llen;

	if (size < HDR)
		return 0;
	id = data[0] & 3;
	llen = ((size_t)data[1] | (size_t)data[2] << 8 | (size_t)data[3] << 16) %
	       (CSDFS_CHUNK_MAX + 1);
	last_rc = decode_checked(id, data + HDR, size - HDR, llen);
	return 0;
}

#ifndef CSDFS_FUZZ_LIBFUZZER

/* ---- the replay program -------------------------------------------------- */

static int read_file(const char *path, uint8_t **data, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	size_t got = 0;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		close(fd);
		return -errno;
	}
	*len = (size_t)st.st_size;
	*data = malloc(*len ? *len : 1);
	if (!*data) {
		close(fd);
		return -ENOMEM;
	}
	while (got < *len) {
		ssize_t n = read(fd, *data + got, *len - got);

		if (n <= 0) {
			int rc = n < 0 ? -errno : -EIO;

			close(fd);
			free(*data);
			return rc;
		}
		got += (size_t)n;
	}
	close(fd);
	return 0;
}

static int write_file(const char *dir, const char *name, const uint8_t *hdr,
		      const void *buf, size_t len)
{
	char p[4096];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "wb");
	if (!f || fwrite(hdr, 1, HDR, f) != HDR ||
	    (len && fwrite(buf, 1, len, f) != len) || fclose(f)) {
		fprintf(stderr, "fuzz_chunk: cannot write '%s': %s\n", p, strerror(errno));
		return 1;
	}
	return 0;
}

static void make_hdr(uint8_t hdr[HDR], uint8_t id, size_t llen)
{
	hdr[0] = id;
	hdr[1] = (uint8_t)llen;
	hdr[2] = (uint8_t)(llen >> 8);
	hdr[3] = (uint8_t)(llen >> 16);
}

/* "<codec>-<llen>-<desc>.bin" -> codec id and llen; -EINVAL otherwise. */
static int corpus_parse_name(const char *path, uint8_t *id, size_t *llen)
{
	const char *name = strrchr(path, '/'), *dash;
	size_t nlen;
	char *end;
	unsigned long v;

	name = name ? name + 1 : path;
	nlen = strlen(name);
	dash = strchr(name, '-');
	if (!dash || nlen < 4 || strcmp(name + nlen - 4, ".bin"))
		return -EINVAL;
	for (unsigned i = 0; i < CSDFS_CODEC_COUNT; i++) {
		const char *cn = csdfs_codec_name((uint8_t)i);

		if (strlen(cn) != (size_t)(dash - name) || strncmp(name, cn, strlen(cn)))
			continue;
		errno = 0;
		v = strtoul(dash + 1, &end, 10);
		if (errno || end == dash + 1 || *end != '-' || v > CSDFS_CHUNK_MAX)
			return -EINVAL;
		*id = (uint8_t)i;
		*llen = v;
		return 0;
	}
	return -EINVAL;
}

enum mode { MODE_INPUT, MODE_CODEC_CORPUS, MODE_TO_INPUT };

struct replay {
	enum mode mode;
	const char *outdir;
	unsigned files, ok, refused, bad;
};

static void replay_one(struct replay *r, const char *path)
{
	uint8_t *data = NULL, id = 0, hdr[HDR];
	size_t len = 0, llen = 0;
	const char *base;
	int rc = read_file(path, &data, &len);

	if (rc) {
		fprintf(stderr, "fuzz_chunk: cannot read '%s': %s\n", path, strerror(-rc));
		r->bad++;
		return;
	}
	r->files++;
	switch (r->mode) {
	case MODE_INPUT:
		last_rc = 0;
		LLVMFuzzerTestOneInput(data, len);
		if (last_rc)
			r->refused++;
		else
			r->ok++;
		break;
	case MODE_CODEC_CORPUS:
		if (corpus_parse_name(path, &id, &llen)) {
			fprintf(stderr, "fuzz_chunk: '%s' is not named "
				"<codec>-<llen>-<desc>.bin\n", path);
			r->bad++;
			break;
		}
		rc = decode_checked(id, data, len, llen);
		if (rc == -EUCLEAN) {
			r->refused++;
			printf("ok: '%s' refused (-EUCLEAN)\n", path);
		} else {
			fprintf(stderr, "fuzz_chunk: '%s' (codec %s, llen %zu): decoded to %d, "
				"must be -EUCLEAN\n", path, csdfs_codec_name(id), llen, rc);
			r->bad++;
		}
		break;
	case MODE_TO_INPUT:
		if (corpus_parse_name(path, &id, &llen)) {
			fprintf(stderr, "fuzz_chunk: '%s' is not named "
				"<codec>-<llen>-<desc>.bin\n", path);
			r->bad++;
			break;
		}
		base = strrchr(path, '/');
		make_hdr(hdr, id, llen);
		r->bad += write_file(r->outdir, base ? base + 1 : path, hdr, data, len);
		break;
	}
	free(data);
}

static bool skip_name(const char *name)
{
	return name[0] == '.' || !strncmp(name, "README", 6);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void replay_path(struct replay *r, const char *path)
{
	struct stat st;
	struct dirent *e;
	char **names = NULL;
	size_t n = 0, cap = 0;
	DIR *dir;

	if (stat(path, &st)) {
		fprintf(stderr, "fuzz_chunk: cannot access '%s': %s\n", path, strerror(errno));
		r->bad++;
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		replay_one(r, path);
		return;
	}
	dir = opendir(path);
	if (!dir) {
		fprintf(stderr, "fuzz_chunk: cannot open '%s': %s\n", path, strerror(errno));
		r->bad++;
		return;
	}
	while ((e = readdir(dir))) {
		size_t nl = strlen(e->d_name);

		if (skip_name(e->d_name))
			continue;
		/* Corpus folders name their inputs *.bin; other files are notes. */
		if (r->mode != MODE_INPUT && (nl < 4 || strcmp(e->d_name + nl - 4, ".bin")))
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof(*nn));

			if (!nn)
				abort();
			names = nn;
		}
		names[n++] = strdup(e->d_name);
	}
	closedir(dir);
	qsort(names, n, sizeof(*names), cmp_names);
	for (size_t i = 0; i < n; i++) {
		char p[4096];

		snprintf(p, sizeof(p), "%s/%s", path, names[i]);
		if (!stat(p, &st) && S_ISREG(st.st_mode))
			replay_one(r, p);
		free(names[i]);
	}
	free(names);
}

/* Deterministic sample data: text-like, 2:1 and random. */
static void fill(uint8_t *p, size_t len, int kind, uint64_t seed)
{
	static const char words[] = "select the row from page where id = 42 and commit ";
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < len; i++) {
		s ^= s >> 12;
		s ^= s << 25;
		s ^= s >> 27;
		switch (kind) {
		case 0:
			p[i] = (uint8_t)words[(i + (s >> 60)) % (sizeof(words) - 1)];
			break;
		case 1:
			p[i] = (i / 64) % 2 ? 0 : (uint8_t)(s * 0x2545f4914f6cdd1dull >> 56);
			break;
		default:
			p[i] = (uint8_t)(s * 0x2545f4914f6cdd1dull >> 56);
			break;
		}
	}
}

/* Valid chunks as csdfs stores them, as seeds for the fuzzer. */
static int write_seeds(const char *dir)
{
	static const struct csdfs_codec_spec specs[] = {
		{ CSDFS_CODEC_ZSTD, 3 }, { CSDFS_CODEC_ZSTD, -5 }, { CSDFS_CODEC_ZSTD, 19 },
		{ CSDFS_CODEC_LZ4, 0 }, { CSDFS_CODEC_NONE, 0 },
	};
	static const size_t lens[] = { 1, 100, 4096, 16384, 131072 };
	int bad = 0;

	for (size_t s = 0; s < sizeof(specs) / sizeof(specs[0]); s++) {
		for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			for (int kind = 0; kind < 3; kind++) {
				size_t llen = lens[l], cap = csdfs_codec_bound(llen);
				uint8_t *src = malloc(llen), *dst = malloc(cap), hdr[HDR];
				struct csdfs_codec_spec used;
				char name[64];
				int plen;

				if (!src || !dst)
					abort();
				fill(src, llen, kind, s * 100 + l * 10 + (size_t)kind);
				plen = csdfs_codec_compress(specs[s], src, llen, dst, cap, &used);
				if (plen <= 0) {
					fprintf(stderr, "fuzz_chunk: cannot compress a seed: %d\n",
						plen);
					return 1;
				}
				/* Only what csdfs would store: skip duplicates of raw. */
				if (used.id == specs[s].id || specs[s].id == CSDFS_CODEC_NONE) {
					make_hdr(hdr, used.id, llen);
					snprintf(name, sizeof(name), "valid-%s%d-%zu-%d",
						 csdfs_codec_name(used.id), specs[s].level, llen,
						 kind);
					bad |= write_file(dir, name, hdr, dst, (size_t)plen);
				}
				free(src);
				free(dst);
			}
		}
	}
	return bad;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: fuzz_chunk FILE|DIR...\n"
		"       fuzz_chunk --codec-corpus FILE|DIR...\n"
		"       fuzz_chunk --to-input OUTDIR FILE|DIR...\n"
		"       fuzz_chunk --write-seeds OUTDIR\n"
		"Runs inputs through csdfs_codec_decompress (see the file's header for\n"
		"the input format). --codec-corpus: bare stored chunks named\n"
		"<codec>-<llen>-<desc>.bin must each be refused with -EUCLEAN.\n");
}

int main(int argc, char **argv)
{
	struct replay r = { .mode = MODE_INPUT };
	int i = 1;

	if (argc == 3 && !strcmp(argv[1], "--write-seeds"))
		return write_seeds(argv[2]) ? EXIT_FAILURE : EXIT_SUCCESS;
	if (i < argc && !strcmp(argv[i], "--codec-corpus")) {
		r.mode = MODE_CODEC_CORPUS;
		i++;
	} else if (i + 1 < argc && !strcmp(argv[i], "--to-input")) {
		r.mode = MODE_TO_INPUT;
		r.outdir = argv[i + 1];
		i += 2;
	}
	if (i >= argc || argv[i][0] == '-') {
		usage();
		return 2;
	}
	for (; i < argc; i++)
		replay_path(&r, argv[i]);
	printf("fuzz_chunk: %u inputs, %u decoded, %u refused, %u problems\n",
	       r.files, r.ok, r.refused, r.bad);
	if (!r.files) {
		fprintf(stderr, "fuzz_chunk: no inputs found\n");
		return EXIT_FAILURE;
	}
	return r.bad ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif /* !CSDFS_FUZZ_LIBFUZZER */
