/* SPDX-License-Identifier: MIT */
/*
 * Fuzz target: the container superblock parser, csdfs_super_read(), fed
 * arbitrary bytes as the start of a container through an in-memory I/O
 * backend (STYLE.md habit 9: stored bytes are hostile). It must never crash,
 * must refuse with -errno and a message, and whatever it accepts must be
 * within the bounds the parser promises and equal to what the bytes say.
 *
 * Input -> container (the size rule; tests/fuzz-corpus/super/README too):
 *   len < 4096          the container is exactly the input (io->size = len),
 *                       so the "truncated" checks run;
 *   4096 <= len < 4104  block 0 is the input's first 4096 bytes and the
 *                       container is 64 MiB (the smallest csdfs-mkfs makes);
 *   len >= 4104         as above, but io->size is the little-endian u64 at
 *                       input[4096..4104) (any value, also less than 4096).
 * Bytes of the container past the input read as zeros; a read past io->size
 * fails with -EIO, as the POSIX backend's short read does.
 *
 * Built two ways: with -DCSDFS_FUZZ_LIBFUZZER as a libFuzzer target
 * (tests/fuzz/run_fuzz.sh), and without it as a plain replay program:
 *   fuzz_super [--must-fail] FILE|DIR...   run each input (a directory: each
 *                          regular file in it, except README* and dotfiles);
 *                          --must-fail: every input must be refused
 *   fuzz_super --write-seeds DIR           write valid superblock images
 */
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csdfs/codec.h"
#include "csdfs/csum.h"
#include "csdfs/format.h"
/* vol.h brings csdfs/io.h: io.h's fault-injection part sits outside its
 * include guard, so it must not be included a second time. */
#include "vol.h"

#define FUZZ_DEFAULT_SIZE (64ull << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- the in-memory container --------------------------------------------- */

struct membuf {
	uint8_t *data;      /* the stored prefix of the container */
	size_t len;
};

static int mem_pread(struct csdfs_io *io, void *buf, size_t len, uint64_t off)
{
	struct membuf *m = io->priv;
	size_t have = 0;

	if (off > io->size || len > io->size - off)
		return -EIO;
	if (off < m->len) {
		have = m->len - off < len ? m->len - (size_t)off : len;
		memcpy(buf, m->data + off, have);
	}
	memset((char *)buf + have, 0, len - have);
	return 0;
}

static int mem_pwrite(struct csdfs_io *io, const void *buf, size_t len,
		      uint64_t off)
{
	struct membuf *m = io->priv;

	if (off > io->size || len > io->size - off || off > m->len ||
	    len > m->len - off)
		return -EIO;
	memcpy(m->data + off, buf, len);
	return 0;
}

static int mem_sync(struct csdfs_io *io)
{
	return 0;
}

static int mem_punch(struct csdfs_io *io, uint64_t off, uint64_t len)
{
	return 0;
}

static void mem_close(struct csdfs_io *io)
{
}

static const struct csdfs_io_ops mem_ops = {
	.pread = mem_pread,
	.pwrite = mem_pwrite,
	.sync = mem_sync,
	.punch = mem_punch,
	.close = mem_close,
};

/* ---- the target ---------------------------------------------------------- */

static void fuzz_fail(const char *what)
{
	fprintf(stderr, "fuzz_super: %s\n", what);
	abort();
}

/* Everything csdfs_super_read promises about a superblock it accepted. */
static void check_accepted(const struct csdfs_super_disk *d, uint64_t iosize,
			   const struct csdfs_super *sb, const char *err)
{
	uint64_t total = le64toh(d->total_blocks);
	uint32_t chunk = le32toh(d->chunk_size), unit = le32toh(d->atomic_unit);

	if (err[0])
		fuzz_fail("accepted, but an error message was set");
	if (memcmp(d->magic, CSDFS_MAGIC, CSDFS_MAGIC_LEN))
		fuzz_fail("accepted a bad magic");
	if (le32toh(d->version) != CSDFS_FORMAT_VERSION)
		fuzz_fail("accepted another format version");
	if (le32toh(d->csum) != csdfs_crc32c(0, d, offsetof(struct csdfs_super_disk, csum)))
		fuzz_fail("accepted a bad checksum");
	if (le64toh(d->incompat) & ~CSDFS_FEATURE_INCOMPAT_SUPP)
		fuzz_fail("accepted an unknown incompat feature");
	if (le64toh(d->ro_compat) & ~CSDFS_FEATURE_RO_COMPAT_SUPP)
		fuzz_fail("accepted an unknown ro_compat feature");
	if (le32toh(d->block_size) != CSDFS_BLOCK_SIZE)
		fuzz_fail("accepted a foreign block size");

	if (sb->total_blocks != total)
		fuzz_fail("total_blocks decoded wrongly");
	if (sb->total_blocks <= CSDFS_FIRST_DATA_BLOCK || sb->total_blocks > (1ull << 40))
		fuzz_fail("accepted an impossible total_blocks");
	if (sb->total_blocks * CSDFS_BLOCK_SIZE > iosize)
		fuzz_fail("accepted a superblock larger than its container");
	if (sb->chunk_size != chunk || sb->chunk_size < CSDFS_CHUNK_MIN ||
	    sb->chunk_size > CSDFS_CHUNK_MAX || (sb->chunk_size & (sb->chunk_size - 1)))
		fuzz_fail("accepted a bad chunk size");
	if (sb->codec.id != d->codec || sb->codec.id >= CSDFS_CODEC_COUNT)
		fuzz_fail("accepted an unknown codec");
	if (sb->codec.level != d->level ||
	    !csdfs_codec_valid(sb->codec))
		fuzz_fail("codec level decoded wrongly or out of range");
	if (sb->atomic_unit != (unit ? unit : chunk))
		fuzz_fail("atomic_unit decoded wrongly");
	if (sb->logical_bytes != le64toh(d->logical_bytes))
		fuzz_fail("logical_bytes decoded wrongly");
	if (memcmp(sb->uuid, d->uuid, 16))
		fuzz_fail("uuid decoded wrongly");
}

/* Refused: a negative errno and a message that names the problem. */
static void check_refused(int rc, const char *err, size_t errlen)
{
	if (rc >= 0 || rc < -4095)
		fuzz_fail("returned something that is not 0 or -errno");
	if (!err[0])
		fuzz_fail("refused without a message");
	if (!memchr(err, '\0', errlen))
		fuzz_fail("message is not terminated");
}

static int last_rc;
static char last_err[256];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct csdfs_super_disk d;
	struct csdfs_super sb;
	struct csdfs_io io;
	struct membuf m;
	uint64_t iosize;
	char err[256];
	int rc;

	if (size < CSDFS_BLOCK_SIZE) {
		iosize = size;
	} else if (size < CSDFS_BLOCK_SIZE + 8) {
		iosize = FUZZ_DEFAULT_SIZE;
	} else {
		memcpy(&iosize, data + CSDFS_BLOCK_SIZE, 8);
		iosize = le64toh(iosize);
	}
	/* A heap copy of exactly the stored prefix: ASan sees any overrun. */
	m.len = size < CSDFS_BLOCK_SIZE ? size : CSDFS_BLOCK_SIZE;
	if (m.len > iosize)
		m.len = (size_t)iosize;
	m.data = malloc(m.len ? m.len : 1);
	if (!m.data)
		return 0;
	memcpy(m.data, data, m.len);
	memset(&io, 0, sizeof(io));
	io.ops = &mem_ops;
	io.fd = -1;
	io.size = iosize;
	io.priv = &m;

	memset(&sb, 0xa5, sizeof(sb));
	memset(err, 0, sizeof(err));
	rc = csdfs_super_read(&io, &sb, err, sizeof(err));
	last_rc = rc;
	memcpy(last_err, err, sizeof(last_err));
	if (rc == 0) {
		/* What the parser saw: the container's first bytes. */
		if (mem_pread(&io, &d, sizeof(d), 0))
			fuzz_fail("accepted a container too small for a superblock");
		check_accepted(&d, iosize, &sb, err);
	} else {
		check_refused(rc, err, sizeof(err));
	}
	free(m.data);
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

struct replay {
	bool must_fail;
	unsigned files, refused, accepted, bad;
};

static void replay_one(struct replay *r, const char *path)
{
	uint8_t *data = NULL;
	size_t len = 0;
	int rc = read_file(path, &data, &len);

	if (rc) {
		fprintf(stderr, "fuzz_super: cannot read '%s': %s\n", path, strerror(-rc));
		r->bad++;
		return;
	}
	LLVMFuzzerTestOneInput(data, len);
	free(data);
	r->files++;
	if (last_rc) {
		r->refused++;
	} else {
		r->accepted++;
		if (r->must_fail) {
			fprintf(stderr, "fuzz_super: '%s': csdfs_super_read must fail, "
				"but accepted it\n", path);
			r->bad++;
		}
	}
	if (r->must_fail && last_rc)
		printf("ok: '%s' refused: %s (%s)\n", path, last_err, strerror(-last_rc));
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
		fprintf(stderr, "fuzz_super: cannot access '%s': %s\n", path, strerror(errno));
		r->bad++;
		return;
	}
	if (!S_ISDIR(st.st_mode)) {
		replay_one(r, path);
		return;
	}
	dir = opendir(path);
	if (!dir) {
		fprintf(stderr, "fuzz_super: cannot open '%s': %s\n", path, strerror(errno));
		r->bad++;
		return;
	}
	while ((e = readdir(dir))) {
		if (skip_name(e->d_name))
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

static int write_bytes(const char *dir, const char *name, const void *buf,
		       size_t len)
{
	char p[4096];
	FILE *f;

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	f = fopen(p, "wb");
	if (!f || fwrite(buf, 1, len, f) != len || fclose(f)) {
		fprintf(stderr, "fuzz_super: cannot write '%s': %s\n", p, strerror(errno));
		return 1;
	}
	return 0;
}

/* Valid images in the input format above, as seeds for the fuzzer. */
static int write_seeds(const char *dir)
{
	static const struct {
		const char *name;
		uint64_t total_blocks, iosize;
		uint32_t chunk;
		uint8_t codec;
		int8_t level;
	} seeds[] = {
		{ "valid-64M", 16384, 0, 16384, CSDFS_CODEC_ZSTD, 3 },
		{ "valid-1G-4k-lz4", 262144, 1ull << 30, 4096, CSDFS_CODEC_LZ4, 0 },
		{ "valid-17-blocks-128k-none", 17, 17 * 4096, 131072, CSDFS_CODEC_NONE, 0 },
		{ "valid-max", 1ull << 40, 1ull << 52, 65536, CSDFS_CODEC_ZSTD, -7 },
	};
	uint8_t img[CSDFS_BLOCK_SIZE + 8];
	int bad = 0;

	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		struct membuf m = { img, CSDFS_BLOCK_SIZE };
		struct csdfs_io io = { .ops = &mem_ops, .fd = -1, .dfd = -1,
				       .size = FUZZ_DEFAULT_SIZE, .priv = &m };
		struct csdfs_super sb, back;
		uint64_t le = htole64(seeds[i].iosize);
		char err[256] = "";

		memset(img, 0, sizeof(img));
		memset(&sb, 0, sizeof(sb));
		for (int k = 0; k < 16; k++)
			sb.uuid[k] = (uint8_t)(0x11 * (k + 1) + i);
		sb.total_blocks = seeds[i].total_blocks;
		sb.logical_bytes = seeds[i].total_blocks * CSDFS_BLOCK_SIZE * 2;
		sb.chunk_size = seeds[i].chunk;
		sb.atomic_unit = seeds[i].chunk > 16384 ? seeds[i].chunk : 16384;
		sb.codec.id = seeds[i].codec;
		sb.codec.level = seeds[i].level;
		if (csdfs_super_write(&io, &sb)) {
			fprintf(stderr, "fuzz_super: csdfs_super_write failed\n");
			return 1;
		}
		memcpy(img + CSDFS_BLOCK_SIZE, &le, 8);
		if (seeds[i].iosize)
			io.size = seeds[i].iosize;
		if (csdfs_super_read(&io, &back, err, sizeof(err))) {
			fprintf(stderr, "fuzz_super: seed '%s' does not verify: %s\n",
				seeds[i].name, err);
			return 1;
		}
		bad |= write_bytes(dir, seeds[i].name, img,
				   seeds[i].iosize ? sizeof(img) : CSDFS_BLOCK_SIZE);
	}
	return bad;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: fuzz_super [--must-fail] FILE|DIR...\n"
		"       fuzz_super --write-seeds DIR\n"
		"Runs each input through the csdfs superblock parser (see the file's\n"
		"header for the input format). --must-fail: each input must be refused.\n");
}

int main(int argc, char **argv)
{
	struct replay r = { 0 };
	int i = 1;

	if (argc == 3 && !strcmp(argv[1], "--write-seeds"))
		return write_seeds(argv[2]) ? EXIT_FAILURE : EXIT_SUCCESS;
	if (i < argc && !strcmp(argv[i], "--must-fail")) {
		r.must_fail = true;
		i++;
	}
	if (i >= argc || argv[i][0] == '-') {
		usage();
		return 2;
	}
	for (; i < argc; i++)
		replay_path(&r, argv[i]);
	printf("fuzz_super: %u inputs, %u refused, %u accepted, %u problems\n",
	       r.files, r.refused, r.accepted, r.bad);
	if (!r.files) {
		fprintf(stderr, "fuzz_super: no inputs found\n");
		return EXIT_FAILURE;
	}
	return r.bad ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif /* !CSDFS_FUZZ_LIBFUZZER */
