/* SPDX-License-Identifier: MIT */
/*
 * The container superblock: encode, checksum, verify. Reading treats the
 * bytes as hostile and names exactly what is wrong, so mount can refuse a
 * foreign, truncated, newer or corrupted volume with a useful message.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "csdfs/codec.h"
#include "csdfs/csum.h"
#include "vol.h"

int csdfs_super_write(struct csdfs_io *io, const struct csdfs_super *sb)
{
	unsigned char block[CSDFS_BLOCK_SIZE];
	struct csdfs_super_disk d;

	memset(&d, 0, sizeof(d));
	memcpy(d.magic, CSDFS_MAGIC, CSDFS_MAGIC_LEN);
	d.version = htole32(CSDFS_FORMAT_VERSION);
	d.block_size = htole32(CSDFS_BLOCK_SIZE);
	memcpy(d.uuid, sb->uuid, 16);
	d.compat = htole64(CSDFS_FEATURE_COMPAT_SUPP);
	d.incompat = htole64(CSDFS_FEATURE_INCOMPAT_SUPP);
	d.ro_compat = htole64(CSDFS_FEATURE_RO_COMPAT_SUPP);
	d.total_blocks = htole64(sb->total_blocks);
	d.logical_bytes = htole64(sb->logical_bytes);
	d.chunk_size = htole32(sb->chunk_size);
	d.atomic_unit = htole32(sb->atomic_unit);
	d.codec = sb->codec.id;
	d.level = sb->codec.level;
	d.created_sec = htole64(sb->created_sec ? sb->created_sec : (uint64_t)time(NULL));
	d.csum = htole32(csdfs_crc32c(0, &d, offsetof(struct csdfs_super_disk,
						      csum)));
	memset(block, 0, sizeof(block));
	memcpy(block, &d, sizeof(d));
	return csdfs_io_pwrite(io, block, sizeof(block), CSDFS_SUPER_OFFSET);
}

int csdfs_super_upgrade(struct csdfs_io *io, struct csdfs_super *sb)
{
	int rc = csdfs_super_write(io, sb);

	if (!rc)
		rc = csdfs_io_sync(io);
	if (!rc)
		sb->incompat = CSDFS_FEATURE_INCOMPAT_SUPP;
	return rc;
}

#define FAIL(rc, ...) do { snprintf(err, errlen, __VA_ARGS__); return rc; } while (0)

int csdfs_super_read(struct csdfs_io *io, struct csdfs_super *sb,
		     char *err, size_t errlen)
{
	struct csdfs_super_disk d;
	uint64_t incompat, ro_compat, total;
	uint32_t chunk, unit;
	int rc;

	if (io->size < sizeof(d))
		FAIL(-EUCLEAN, "container is truncated (%llu bytes): not a csdfs volume",
		     (unsigned long long)io->size);
	rc = csdfs_io_pread(io, &d, sizeof(d), CSDFS_SUPER_OFFSET);
	if (rc)
		FAIL(rc, "cannot read the superblock: %s", strerror(-rc));
	if (memcmp(d.magic, CSDFS_MAGIC, CSDFS_MAGIC_LEN))
		FAIL(-EUCLEAN, "not a csdfs volume (bad magic)");
	if (le32toh(d.version) > CSDFS_FORMAT_VERSION)
		FAIL(-EPROTONOSUPPORT,
		     "volume format version %u is newer than this csdfs supports (%u)",
		     le32toh(d.version), CSDFS_FORMAT_VERSION);
	if (le32toh(d.csum) != csdfs_crc32c(0, &d, offsetof(struct csdfs_super_disk,
							       csum)))
		FAIL(-EUCLEAN, "superblock checksum mismatch: the volume is corrupt");
	if (le32toh(d.version) != CSDFS_FORMAT_VERSION)
		FAIL(-EUCLEAN, "unknown volume format version %u", le32toh(d.version));
	incompat = le64toh(d.incompat);
	ro_compat = le64toh(d.ro_compat);
	if (incompat & ~CSDFS_FEATURE_INCOMPAT_SUPP)
		FAIL(-EPROTONOSUPPORT, "volume uses unknown incompatible features 0x%llx",
		     (unsigned long long)(incompat & ~CSDFS_FEATURE_INCOMPAT_SUPP));
	if (ro_compat & ~CSDFS_FEATURE_RO_COMPAT_SUPP)
		FAIL(-EPROTONOSUPPORT, "volume uses unknown read-only-compatible features 0x%llx",
		     (unsigned long long)(ro_compat & ~CSDFS_FEATURE_RO_COMPAT_SUPP));
	if (le32toh(d.block_size) != CSDFS_BLOCK_SIZE)
		FAIL(-EUCLEAN, "superblock names block size %u (expected %u)",
		     le32toh(d.block_size), CSDFS_BLOCK_SIZE);
	total = le64toh(d.total_blocks);
	chunk = le32toh(d.chunk_size);
	unit = le32toh(d.atomic_unit);
	if (total <= CSDFS_FIRST_DATA_BLOCK || total > (1ull << 40))
		FAIL(-EUCLEAN, "superblock names an impossible size (%llu blocks)",
		     (unsigned long long)total);
	if (io->size < total * CSDFS_BLOCK_SIZE)
		FAIL(-EUCLEAN, "container is truncated: %llu bytes, superblock says %llu",
		     (unsigned long long)io->size,
		     (unsigned long long)(total * CSDFS_BLOCK_SIZE));
	if (chunk < CSDFS_CHUNK_MIN || chunk > CSDFS_CHUNK_MAX || (chunk & (chunk - 1)))
		FAIL(-EUCLEAN, "superblock names a bad chunk size %u", chunk);
	/* The atomic unit is a promise to applications: only accept one a
	 * single write request can honour (power of two, 4K..1M). */
	if (unit && (unit < CSDFS_CHUNK_MIN || unit > (1u << 20) || (unit & (unit - 1))))
		FAIL(-EUCLEAN, "superblock names a bad atomic-write unit %u", unit);
	if (le64toh(d.logical_bytes) < (total - CSDFS_FIRST_DATA_BLOCK) * CSDFS_BLOCK_SIZE ||
	    le64toh(d.logical_bytes) / 16 > total * CSDFS_BLOCK_SIZE)
		FAIL(-EUCLEAN, "superblock names an impossible logical capacity %llu",
		     (unsigned long long)le64toh(d.logical_bytes));
	if (d.codec >= CSDFS_CODEC_COUNT)
		FAIL(-EUCLEAN, "superblock names unknown codec id %u", d.codec);
	/* A level out of the codec's range would fail every write later. */
	if (!csdfs_codec_valid((struct csdfs_codec_spec){ d.codec, d.level }))
		FAIL(-EUCLEAN, "superblock names level %d, out of range for codec %s", d.level,
		     csdfs_codec_name(d.codec));
	memcpy(sb->uuid, d.uuid, 16);
	sb->total_blocks = total;
	sb->logical_bytes = le64toh(d.logical_bytes);
	sb->chunk_size = chunk;
	sb->atomic_unit = unit ? unit : chunk;
	sb->codec.id = d.codec;
	sb->codec.level = d.level;
	sb->incompat = incompat;
	sb->created_sec = le64toh(d.created_sec);
	return 0;
}
