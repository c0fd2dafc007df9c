/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for the container superblock (container.c): what
 * csdfs_super_write writes, csdfs_super_read reads back unchanged; every
 * corruption is refused with the right errno (-EUCLEAN for damage,
 * -EPROTONOSUPPORT for a newer format or an unknown incompat feature) and a
 * message that names the problem (SPEC G6); and csdfs_vol_open refuses a real
 * volume whose container was damaged, changing nothing.
 *
 * Most tests run on an in-memory container (the I/O seam of csdfs/io.h), so
 * io->size can be anything; the same corruptions are kept as files in
 * tests/fuzz-corpus/super/ for the fuzz target's must-fail replay.
 */
#include <check.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csdfs/csum.h"
#include "csdfs/format.h"
#include "fixture.h"
#include "vol.h"      /* and csdfs/io.h, for the fault seam */

/* ---- an in-memory container ---------------------------------------------- */

struct mem {
	unsigned char block[CSDFS_BLOCK_SIZE];  /* block 0; the rest reads 0 */
	int fail_read;                          /* -errno for every pread */
};

static int mem_pread(struct csdfs_io *io, void *buf, size_t len, uint64_t off)
{
	struct mem *m = io->priv;
	size_t have = 0;

	if (m->fail_read)
		return m->fail_read;
	if (off > io->size || len > io->size - off)
		return -EIO;
	if (off < sizeof(m->block)) {
		have = sizeof(m->block) - off < len ? sizeof(m->block) - (size_t)off : len;
		memcpy(buf, m->block + off, have);
	}
	memset((char *)buf + have, 0, len - have);
	return 0;
}

static int mem_pwrite(struct csdfs_io *io, const void *buf, size_t len,
		      uint64_t off)
{
	struct mem *m = io->priv;

	if (off > sizeof(m->block) || len > sizeof(m->block) - off ||
	    off + len > io->size)
		return -EIO;
	memcpy(m->block + off, buf, len);
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

#define MEM_SIZE (64ull << 20)   /* 16384 blocks, the smallest volume */

static void mem_io(struct csdfs_io *io, struct mem *m, uint64_t size)
{
	memset(io, 0, sizeof(*io));
	io->ops = &mem_ops;
	io->fd = -1;
	io->size = size;
	io->priv = m;
}

static void sample_super(struct csdfs_super *sb)
{
	memset(sb, 0, sizeof(*sb));
	for (int i = 0; i < 16; i++)
		sb->uuid[i] = (uint8_t)(0xc0 + i);
	sb->total_blocks = MEM_SIZE / CSDFS_BLOCK_SIZE;
	sb->logical_bytes = 2 * MEM_SIZE;
	sb->chunk_size = 16384;
	sb->atomic_unit = 16384;
	sb->codec.id = CSDFS_CODEC_ZSTD;
	sb->codec.level = 3;
}

static void assert_super_eq(const struct csdfs_super *a,
			    const struct csdfs_super *b)
{
	ck_assert_mem_eq(a->uuid, b->uuid, 16);
	ck_assert_uint_eq(a->total_blocks, b->total_blocks);
	ck_assert_uint_eq(a->logical_bytes, b->logical_bytes);
	ck_assert_uint_eq(a->chunk_size, b->chunk_size);
	ck_assert_uint_eq(a->atomic_unit, b->atomic_unit);
	ck_assert_uint_eq(a->codec.id, b->codec.id);
	ck_assert_int_eq(a->codec.level, b->codec.level);
}

static void disk_of(struct mem *m, struct csdfs_super_disk *d)
{
	memcpy(d, m->block, sizeof(*d));
}

static void disk_put(struct mem *m, const struct csdfs_super_disk *d,
		     bool reseal)
{
	struct csdfs_super_disk c = *d;

	if (reseal)
		c.csum = htole32(csdfs_crc32c(0, &c, offsetof(struct csdfs_super_disk, csum)));
	memcpy(m->block, &c, sizeof(c));
}

/* ---- round trips --------------------------------------------------------- */

static const struct {
	uint64_t total_blocks;
	uint32_t chunk, unit;
	uint8_t codec;
	int8_t level;
} shapes[] = {
	{ 16384, 16384, 16384, CSDFS_CODEC_ZSTD, 3 },
	{ 16384, 4096, 16384, CSDFS_CODEC_LZ4, 0 },          /* smallest chunk */
	{ 16384, 8192, 16384, CSDFS_CODEC_LZ4, 64 },
	{ 16384, 131072, 131072, CSDFS_CODEC_NONE, 0 },      /* largest chunk */
	{ 17, 65536, 65536, CSDFS_CODEC_ZSTD, -7 },          /* one data block */
	{ 1ull << 40, 32768, 32768, CSDFS_CODEC_ZSTD, 19 },  /* largest volume */
};
#define NSHAPES ((int)(sizeof(shapes) / sizeof(shapes[0])))

START_TEST(test_roundtrip)
{
	struct csdfs_super sb, back;
	struct csdfs_super_disk d;
	struct csdfs_io io;
	struct mem m;
	char err[256] = "";

	memset(&m, 0x5a, sizeof(m));
	m.fail_read = 0;
	sample_super(&sb);
	sb.total_blocks = shapes[_i].total_blocks;
	/* mkfs never makes a logical capacity below the physical one. */
	sb.logical_bytes = sb.total_blocks * CSDFS_BLOCK_SIZE * 2;
	sb.chunk_size = shapes[_i].chunk;
	sb.atomic_unit = shapes[_i].unit;
	sb.codec.id = shapes[_i].codec;
	sb.codec.level = shapes[_i].level;
	mem_io(&io, &m, sb.total_blocks * CSDFS_BLOCK_SIZE);
	ck_assert_int_eq(csdfs_super_write(&io, &sb), 0);

	/* The whole first block is written: no stale bytes after the struct. */
	for (size_t i = sizeof(d); i < sizeof(m.block); i++)
		ck_assert_msg(m.block[i] == 0, "byte %zu of block 0 not zeroed", i);
	disk_of(&m, &d);
	ck_assert_mem_eq(d.magic, CSDFS_MAGIC, CSDFS_MAGIC_LEN);
	ck_assert_uint_eq(le32toh(d.version), CSDFS_FORMAT_VERSION);
	ck_assert_uint_eq(le32toh(d.csum),
			  csdfs_crc32c(0, &d, offsetof(struct csdfs_super_disk, csum)));

	memset(&back, 0xee, sizeof(back));
	ck_assert_int_eq(csdfs_super_read(&io, &back, err, sizeof(err)), 0);
	assert_super_eq(&sb, &back);
	ck_assert_str_eq(err, "");
}
END_TEST

/* An atomic_unit of 0 (older writers) means "the chunk size". */
START_TEST(test_atomic_unit_default)
{
	struct csdfs_super sb, back;
	struct csdfs_io io;
	struct mem m = { .fail_read = 0 };
	char err[256] = "";

	sample_super(&sb);
	sb.chunk_size = 65536;
	sb.atomic_unit = 0;
	mem_io(&io, &m, MEM_SIZE);
	ck_assert_int_eq(csdfs_super_write(&io, &sb), 0);
	ck_assert_int_eq(csdfs_super_read(&io, &back, err, sizeof(err)), 0);
	ck_assert_uint_eq(back.atomic_unit, 65536);
}
END_TEST

/* A container larger than total_blocks says is fine (grown host file). */
START_TEST(test_larger_container)
{
	struct csdfs_super sb, back;
	struct csdfs_io io;
	struct mem m = { .fail_read = 0 };
	char err[256] = "";

	sample_super(&sb);
	mem_io(&io, &m, MEM_SIZE + 12345);
	ck_assert_int_eq(csdfs_super_write(&io, &sb), 0);
	ck_assert_int_eq(csdfs_super_read(&io, &back, err, sizeof(err)), 0);
	assert_super_eq(&sb, &back);
}
END_TEST

/* ---- corruptions --------------------------------------------------------- */

struct corruption {
	const char *name;
	void (*apply)(struct csdfs_super_disk *d, uint64_t *iosize);
	bool reseal;            /* recompute the checksum after the change */
	int err;                /* expected return */
	const char *says;       /* the message must contain this */
};

static void bad_magic(struct csdfs_super_disk *d, uint64_t *s) { d->magic[0] = 'X'; }
static void bad_magic_last(struct csdfs_super_disk *d, uint64_t *s) { d->magic[7] ^= 1; }
static void flip_logical(struct csdfs_super_disk *d, uint64_t *s)
{
	d->logical_bytes ^= htole64(0x100);
}
static void flip_reserved(struct csdfs_super_disk *d, uint64_t *s) { d->reserved[100] ^= 1; }
static void flip_uuid(struct csdfs_super_disk *d, uint64_t *s) { d->uuid[3] ^= 0x40; }
static void flip_csum(struct csdfs_super_disk *d, uint64_t *s)
{
	d->csum ^= htole32(0x80000000u);
}
static void version2(struct csdfs_super_disk *d, uint64_t *s) { d->version = htole32(2); }
static void version0(struct csdfs_super_disk *d, uint64_t *s) { d->version = 0; }
static void version_huge(struct csdfs_super_disk *d, uint64_t *s)
{
	d->version = htole32(0xffffffffu);
}
static void incompat1(struct csdfs_super_disk *d, uint64_t *s) { d->incompat = htole64(1); }
static void incompat63(struct csdfs_super_disk *d, uint64_t *s)
{
	d->incompat = htole64(1ull << 63);
}
static void ro_compat(struct csdfs_super_disk *d, uint64_t *s)
{
	d->ro_compat = htole64(1ull << 63);
}
static void block8192(struct csdfs_super_disk *d, uint64_t *s)
{
	d->block_size = htole32(8192);
}
static void block0(struct csdfs_super_disk *d, uint64_t *s) { d->block_size = 0; }
static void chunk3000(struct csdfs_super_disk *d, uint64_t *s)
{
	d->chunk_size = htole32(3000);
}
static void chunk256k(struct csdfs_super_disk *d, uint64_t *s)
{
	d->chunk_size = htole32(262144);
}
static void chunk2k(struct csdfs_super_disk *d, uint64_t *s)
{
	d->chunk_size = htole32(2048);
}
static void chunk0(struct csdfs_super_disk *d, uint64_t *s) { d->chunk_size = 0; }
static void total0(struct csdfs_super_disk *d, uint64_t *s) { d->total_blocks = 0; }
static void total16(struct csdfs_super_disk *d, uint64_t *s)
{
	d->total_blocks = htole64(CSDFS_FIRST_DATA_BLOCK);
}
static void total_past(struct csdfs_super_disk *d, uint64_t *s)
{
	d->total_blocks = htole64(*s / CSDFS_BLOCK_SIZE + 1);
}
static void total_2p41(struct csdfs_super_disk *d, uint64_t *s)
{
	d->total_blocks = htole64(1ull << 41);
}
static void total_max(struct csdfs_super_disk *d, uint64_t *s)
{
	d->total_blocks = htole64(UINT64_MAX);
}
static void codec7(struct csdfs_super_disk *d, uint64_t *s) { d->codec = 7; }
static void codec_count(struct csdfs_super_disk *d, uint64_t *s) { d->codec = CSDFS_CODEC_COUNT; }
static void zstd20(struct csdfs_super_disk *d, uint64_t *s) { d->codec = CSDFS_CODEC_ZSTD; d->level = 20; }
static void lz4_65(struct csdfs_super_disk *d, uint64_t *s) { d->codec = CSDFS_CODEC_LZ4; d->level = 65; }
static void none1(struct csdfs_super_disk *d, uint64_t *s) { d->codec = CSDFS_CODEC_NONE; d->level = 1; }
static void trunc100(struct csdfs_super_disk *d, uint64_t *s) { *s = 100; }
static void trunc287(struct csdfs_super_disk *d, uint64_t *s)
{
	*s = sizeof(*d) - 1;
}
static void trunc0(struct csdfs_super_disk *d, uint64_t *s) { *s = 0; }
static void half_container(struct csdfs_super_disk *d, uint64_t *s) { *s /= 2; }
static void all_zero(struct csdfs_super_disk *d, uint64_t *s) { memset(d, 0, sizeof(*d)); }

static const struct corruption corruptions[] = {
	{ "bad magic", bad_magic, true, -EUCLEAN, "magic" },
	{ "bad magic (last byte)", bad_magic_last, true, -EUCLEAN, "magic" },
	{ "checksum mismatch (logical_bytes)", flip_logical, false, -EUCLEAN, "checksum" },
	{ "checksum mismatch (reserved)", flip_reserved, false, -EUCLEAN, "checksum" },
	{ "checksum mismatch (uuid)", flip_uuid, false, -EUCLEAN, "checksum" },
	{ "checksum field flipped", flip_csum, false, -EUCLEAN, "checksum" },
	{ "version 2 (newer)", version2, true, -EPROTONOSUPPORT, "newer" },
	{ "version 2 (newer), bad checksum", version2, false, -EPROTONOSUPPORT, "newer" },
	{ "version 2^32-1", version_huge, true, -EPROTONOSUPPORT, "version" },
	{ "version 0", version0, true, -EUCLEAN, "version 0" },
	{ "unknown incompat bit 0", incompat1, true, -EPROTONOSUPPORT, "incompatible" },
	{ "unknown incompat bit 63", incompat63, true, -EPROTONOSUPPORT, "incompatible" },
	{ "unknown incompat bit, bad checksum", incompat1, false, -EUCLEAN, "checksum" },
	{ "unknown ro_compat bit", ro_compat, true, -EPROTONOSUPPORT, "read-only" },
	{ "block size 8192", block8192, true, -EUCLEAN, "block size 8192" },
	{ "block size 0", block0, true, -EUCLEAN, "block size" },
	{ "chunk size 3000", chunk3000, true, -EUCLEAN, "chunk size 3000" },
	{ "chunk size 256K", chunk256k, true, -EUCLEAN, "chunk size 262144" },
	{ "chunk size 2K", chunk2k, true, -EUCLEAN, "chunk size 2048" },
	{ "chunk size 0", chunk0, true, -EUCLEAN, "chunk size" },
	{ "total_blocks 0", total0, true, -EUCLEAN, "impossible size" },
	{ "total_blocks 16 (no data block)", total16, true, -EUCLEAN, "impossible size" },
	{ "total_blocks 2^41", total_2p41, true, -EUCLEAN, "impossible size" },
	{ "total_blocks 2^64-1", total_max, true, -EUCLEAN, "impossible size" },
	{ "total_blocks past the container", total_past, true, -EUCLEAN, "truncated" },
	{ "container cut in half", half_container, true, -EUCLEAN, "truncated" },
	{ "codec id 7", codec7, true, -EUCLEAN, "codec id 7" },
	{ "codec id CSDFS_CODEC_COUNT", codec_count, true, -EUCLEAN, "codec" },
	{ "zstd level 20", zstd20, true, -EUCLEAN, "level 20, out of range for codec zstd" },
	{ "lz4 level 65", lz4_65, true, -EUCLEAN, "level 65, out of range for codec lz4" },
	{ "none level 1", none1, true, -EUCLEAN, "level 1, out of range for codec none" },
	{ "truncated to 100 bytes", trunc100, true, -EUCLEAN, "truncated" },
	{ "truncated to 287 bytes", trunc287, true, -EUCLEAN, "truncated" },
	{ "empty container", trunc0, true, -EUCLEAN, "truncated" },
	{ "all zeros", all_zero, false, -EUCLEAN, "magic" },
};
#define NCORRUPTIONS ((int)(sizeof(corruptions) / sizeof(corruptions[0])))

START_TEST(test_corruption)
{
	const struct corruption *c = &corruptions[_i];
	struct csdfs_super sb, back, untouched;
	struct csdfs_super_disk d;
	struct csdfs_io io;
	struct mem m = { .fail_read = 0 };
	uint64_t size = MEM_SIZE;
	char err[256];
	int rc;

	sample_super(&sb);
	mem_io(&io, &m, size);
	ck_assert_int_eq(csdfs_super_write(&io, &sb), 0);
	disk_of(&m, &d);
	c->apply(&d, &size);
	disk_put(&m, &d, c->reseal);
	io.size = size;

	memset(err, 0, sizeof(err));
	memset(&back, 0x77, sizeof(back));
	memset(&untouched, 0x77, sizeof(untouched));
	rc = csdfs_super_read(&io, &back, err, sizeof(err));
	ck_assert_msg(rc == c->err, "%s: got %d (%s), expected %d (%s); message '%s'",
		      c->name, rc, strerror(-rc), c->err, strerror(-c->err), err);
	ck_assert_msg(err[0] != '\0', "%s: refused without a message", c->name);
	ck_assert_msg(strstr(err, c->says) != NULL,
		      "%s: message '%s' does not name the problem ('%s')",
		      c->name, err, c->says);
	ck_assert_msg(!strchr(err, '\n'), "%s: message has a newline", c->name);
	/* A refused superblock leaves the output alone. */
	ck_assert_msg(!memcmp(&back, &untouched, sizeof(back)),
		      "%s: refused, but wrote into the output", c->name);
}
END_TEST

/* A failing read is reported as that errno, with a message. */
START_TEST(test_read_error)
{
	struct csdfs_super sb, back;
	struct csdfs_io io;
	struct mem m = { .fail_read = 0 };
	char err[256] = "";

	sample_super(&sb);
	mem_io(&io, &m, MEM_SIZE);
	ck_assert_int_eq(csdfs_super_write(&io, &sb), 0);
	m.fail_read = -EIO;
	ck_assert_int_eq(csdfs_super_read(&io, &back, err, sizeof(err)), -EIO);
	ck_assert_msg(strstr(err, "superblock") != NULL, "message '%s'", err);
}
END_TEST

/* A short message buffer gets a terminated, truncated message. */
START_TEST(test_short_message_buffer)
{
	struct csdfs_super sb, back;
	struct csdfs_io io;
	struct mem m = { .fail_read = 0 };
	char err[8];

	sample_super(&sb);
	mem_io(&io, &m, MEM_SIZE);
	ck_assert_int_eq(csdfs_super_write(&io, &sb), 0);
	m.block[0] = 'X';
	memset(err, 'z', sizeof(err));
	ck_assert_int_eq(csdfs_super_read(&io, &back, err, sizeof(err)), -EUCLEAN);
	ck_assert_msg(memchr(err, '\0', sizeof(err)) != NULL, "message not terminated");
}
END_TEST

/* ---- a real volume ------------------------------------------------------- */

static void file_pwrite(const char *path, const void *buf, size_t len, off_t off)
{
	int fd = open(path, O_WRONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, buf, len, off), (ssize_t)len);
	close(fd);
}

static void file_pread(const char *path, void *buf, size_t len, off_t off)
{
	int fd = open(path, O_RDONLY);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, buf, len, off), (ssize_t)len);
	close(fd);
}

static int install_fault(struct csdfs_io *io, void *arg)
{
	return csdfs_io_fault_install(io, arg);
}

/* mkfs a 64 MiB volume (zstd level 3) at @name in the fixture's
 * directory; its path and its container's. */
static void make_test_volume(const char *name, char *vpath, size_t vlen,
			     char *cpath, size_t clen)
{
	struct csdfs_mkfs_opts mk;

	fixture_mkfs_opts(&mk);
	mk.codec.level = 3;
	fixture_path(vpath, vlen, name);
	snprintf(cpath, clen, "%s/container", vpath);
	fixture_vol_create(vpath, &mk);
}

/* csdfs_vol_open refuses a damaged container with the parser's errno and
 * message, and leaves the container as it was (no silent repair). */
START_TEST(test_vol_open_refuses)
{
	struct csdfs_mount_opts mo = { .no_commit_thread = true };
	unsigned char good[CSDFS_BLOCK_SIZE], now[CSDFS_BLOCK_SIZE];
	struct csdfs_super_disk d;
	struct csdfs_vol *vol = NULL;
	char vpath[1100], cpath[1200], err[512];
	int rc;

	make_test_volume("vol", vpath, sizeof(vpath), cpath, sizeof(cpath));
	file_pread(cpath, good, sizeof(good), 0);

	/* Newer format version, checksum valid. */
	memcpy(&d, good, sizeof(d));
	d.version = htole32(2);
	d.csum = htole32(csdfs_crc32c(0, &d, offsetof(struct csdfs_super_disk, csum)));
	file_pwrite(cpath, &d, sizeof(d), 0);
	err[0] = '\0';
	rc = csdfs_vol_open(vpath, &mo, &vol, err, sizeof(err));
	ck_assert_msg(rc == -EPROTONOSUPPORT, "version 2: rc %d, '%s'", rc, err);
	ck_assert_msg(strstr(err, "newer") != NULL, "version 2: message '%s'", err);
	file_pread(cpath, now, sizeof(now), 0);
	ck_assert_msg(!memcmp(now, &d, sizeof(d)), "a refused open changed block 0");

	/* One flipped byte. */
	memcpy(now, good, sizeof(now));
	now[offsetof(struct csdfs_super_disk, total_blocks)] ^= 0x01;
	file_pwrite(cpath, now, sizeof(now), 0);
	err[0] = '\0';
	rc = csdfs_vol_open(vpath, &mo, &vol, err, sizeof(err));
	ck_assert_msg(rc == -EUCLEAN, "bit flip: rc %d, '%s'", rc, err);
	ck_assert_msg(strstr(err, "checksum") != NULL, "bit flip: message '%s'", err);

	/* A container cut short of what the superblock says. */
	file_pwrite(cpath, good, sizeof(good), 0);
	ck_assert_int_eq(truncate(cpath, 32ll << 20), 0);
	err[0] = '\0';
	rc = csdfs_vol_open(vpath, &mo, &vol, err, sizeof(err));
	ck_assert_msg(rc == -EUCLEAN, "truncated: rc %d, '%s'", rc, err);
	ck_assert_msg(strstr(err, "truncated") != NULL, "truncated: message '%s'", err);

	/* Cut to 100 bytes. */
	ck_assert_int_eq(truncate(cpath, 100), 0);
	err[0] = '\0';
	rc = csdfs_vol_open(vpath, &mo, &vol, err, sizeof(err));
	ck_assert_msg(rc == -EUCLEAN, "100 bytes: rc %d, '%s'", rc, err);
	ck_assert_msg(strstr(err, "truncated") != NULL, "100 bytes: message '%s'", err);

	/* Restored, it opens again. */
	ck_assert_int_eq(truncate(cpath, 64ll << 20), 0);
	file_pwrite(cpath, good, sizeof(good), 0);
	err[0] = '\0';
	rc = csdfs_vol_open(vpath, &mo, &vol, err, sizeof(err));
	ck_assert_msg(rc == 0, "restored: rc %d, '%s'", rc, err);
	ck_assert_int_eq(csdfs_vol_close(vol), 0);

}
END_TEST

/* mkfs marks a volume SYNCED (format.h); one made before that gets the
 * bit at its first open, before anything commits the new way, and keeps
 * its identity and creation time. */
START_TEST(test_synced_feature)
{
	struct csdfs_mount_opts mo = { .no_commit_thread = true };
	struct csdfs_super_disk d, now;
	struct csdfs_vol *vol = NULL;
	char vpath[1100], cpath[1200], err[512];
	int rc;

	make_test_volume("vol2", vpath, sizeof(vpath), cpath, sizeof(cpath));
	file_pread(cpath, &d, sizeof(d), 0);
	ck_assert_uint_eq(le64toh(d.incompat), CSDFS_FEATURE_INCOMPAT_SUPP);

	d.incompat = 0;
	d.created_sec = htole64(1234567890);
	d.csum = htole32(csdfs_crc32c(0, &d, offsetof(struct csdfs_super_disk, csum)));
	file_pwrite(cpath, &d, sizeof(d), 0);

	/* The mark cannot be written, or not synced: the open fails naming
	 * it and commits nothing; an unwritten mark leaves the volume as it
	 * was (a written one is harmless: the next open finds it). */
	for (int i = 0; i < 2; i++) {
		struct csdfs_io_fault f = {
			.kinds = i ? CSDFS_IO_SYNC : CSDFS_IO_PWRITE, .nth = 1, .err = EIO,
		};

		mo.io_hook = install_fault;
		mo.io_hook_arg = &f;
		err[0] = '\0';
		rc = csdfs_vol_open(vpath, &mo, &vol, err, sizeof(err));
		ck_assert_msg(rc == -EIO, "mark fails (%d): rc %d, '%s'", i, rc, err);
		ck_assert_msg(strstr(err, "durability record") != NULL, "message '%s'", err);
		ck_assert_uint_eq(f.failed, 1);
		file_pread(cpath, &now, sizeof(now), 0);
		ck_assert_uint_eq(now.incompat, i ? htole64(CSDFS_FEATURE_INCOMPAT_SUPP) : 0);
	}
	file_pwrite(cpath, &d, sizeof(d), 0);   /* a sync failure may have written it */
	mo.io_hook = NULL;
	mo.io_hook_arg = NULL;
	rc = csdfs_vol_open(vpath, &mo, &vol, err, sizeof(err));
	ck_assert_msg(rc == 0, "older volume: rc %d, '%s'", rc, err);
	file_pread(cpath, &now, sizeof(now), 0);
	ck_assert_uint_eq(le64toh(now.incompat), CSDFS_FEATURE_INCOMPAT_SUPP);
	ck_assert_uint_eq(le64toh(now.created_sec), 1234567890);
	ck_assert_mem_eq(now.uuid, d.uuid, 16);
	ck_assert_uint_eq(now.csum, htole32(csdfs_crc32c(0, &now,
				offsetof(struct csdfs_super_disk, csum))));
	ck_assert_int_eq(csdfs_vol_close(vol), 0);
	fixture_rm(vpath);
}
END_TEST

static Suite *super_suite(void)
{
	Suite *s = suite_create("super");
	TCase *good = tcase_create("good");
	TCase *bad = tcase_create("bad");
	TCase *vol = tcase_create("volume");

	tcase_add_loop_test(good, test_roundtrip, 0, NSHAPES);
	tcase_add_test(good, test_atomic_unit_default);
	tcase_add_test(good, test_larger_container);
	suite_add_tcase(s, good);

	tcase_add_loop_test(bad, test_corruption, 0, NCORRUPTIONS);
	tcase_add_test(bad, test_read_error);
	tcase_add_test(bad, test_short_message_buffer);
	suite_add_tcase(s, bad);

	tcase_set_timeout(vol, 120);
	tcase_add_test(vol, test_vol_open_refuses);
	tcase_add_test(vol, test_synced_feature);
	suite_add_tcase(s, vol);
	return s;
}

FIXTURE_MAIN(super_suite, FIXTURE_SHM)
