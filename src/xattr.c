/* SPDX-License-Identifier: MIT */
/*
 * Extended attributes: stored user/trusted/security xattrs (db "xattrs"),
 * and the virtual, read-only user.csdfs.* attributes that report space
 * accounting. The virtual ones answer getxattr by name but are never listed,
 * so cp -a, tar --xattrs and rsync -X do not try to copy them.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>

#include "vol.h"

#define XATTR_NAME_MAX_LEN 255
#define XATTR_VALUE_MAX (64 * 1024)
#define VIRT_PREFIX "user.csdfs."

static int xattr_key(uint8_t *key, uint64_t ino, const char *name, size_t *klen)
{
	size_t n = strlen(name);

	if (!n || n > XATTR_NAME_MAX_LEN)
		return -ERANGE;
	csdfs_be64_put(key, ino);
	memcpy(key + 8, name, n);
	*klen = 8 + n;
	return 0;
}

static int check_namespace(const char *name)
{
	if (!strncmp(name, "user.", 5) || !strncmp(name, "trusted.", 8) ||
	    !strncmp(name, "security.", 9))
		return 0;
	return -EOPNOTSUPP;
}

/* Totals a virtual attribute reports: a file's own, or the volume's. */
struct usage {
	uint64_t logical, physical, stored, mapped, raw_bytes, chunks, raw_chunks;
	struct csdfs_codec_spec codec;
	uint32_t unit;
};

static int usage_of(struct csdfs_op *op, uint64_t ino, struct usage *u)
{
	struct csdfs_vol *vol = op->vol;
	struct csdfs_inode_disk rec;
	int rc;

	rc = csdfs_irec_load(op->txn, ino, &rec);
	if (rc)
		return rc;
	memset(u, 0, sizeof(*u));
	u->unit = vol->sb.atomic_unit;
	u->codec.id = rec.codec;
	u->codec.level = rec.level;
	if (ino == CSDFS_ROOT_INO) {
		const struct csdfs_counters_disk *c = &vol->counters;

		u->logical = c->mapped_bytes;
		u->physical = c->used_blocks * CSDFS_BLOCK_SIZE;
		u->stored = c->stored_bytes;
		u->mapped = c->mapped_bytes;
		u->chunks = c->stored_chunks;
		u->raw_chunks = c->raw_chunks;
		u->raw_bytes = 0;
		return 1;  /* volume totals: raw bytes unknown */
	}
	if (S_ISDIR(rec.mode))
		return -ENODATA;  /* subtree totals: not kept yet */
	u->logical = rec.size;
	u->physical = rec.phys_blocks * CSDFS_BLOCK_SIZE;
	u->stored = rec.stored_bytes;
	u->mapped = rec.mapped_bytes;
	u->raw_bytes = rec.raw_bytes;
	u->chunks = rec.stored_chunks;
	u->raw_chunks = rec.raw_chunks;
	return 0;
}

static int format_ratio(char *buf, size_t len, uint64_t num, uint64_t den)
{
	if (!den)
		return snprintf(buf, len, num ? "inf" : "1.00");
	return snprintf(buf, len, "%.2f", (double)num / (double)den);
}

/* @return value length written into @buf, or -ENODATA for an unknown name. */
static int virtual_get(struct csdfs_op *op, uint64_t ino, const char *attr,
		       char *buf, size_t len)
{
	struct usage u;
	char spec[32];
	int rc;
	bool volume;

	/* Answered on every inode, directories included. */
	if (!strcmp(attr, "atomic_write_unit"))
		return snprintf(buf, len, "%u", op->vol->sb.atomic_unit);
	rc = usage_of(op, ino, &u);
	volume = rc == 1;
	if (rc < 0)
		return rc;
	if (volume && !strcmp(attr, "checksum_errors"))
		return snprintf(buf, len, "%llu",
				(unsigned long long)op->vol->counters.csum_errors);
	if (!strcmp(attr, "logical"))
		return snprintf(buf, len, "%llu", (unsigned long long)u.logical);
	if (!strcmp(attr, "physical"))
		return snprintf(buf, len, "%llu", (unsigned long long)u.physical);
	if (!strcmp(attr, "stored"))
		return snprintf(buf, len, "%llu", (unsigned long long)u.stored);
	if (!strcmp(attr, "chunks") || !strcmp(attr, "extents"))
		return snprintf(buf, len, "%llu", (unsigned long long)u.chunks);
	if (!strcmp(attr, "incompressible"))
		return snprintf(buf, len, "%llu", (unsigned long long)u.raw_chunks);
	if (!strcmp(attr, "ratio"))
		return format_ratio(buf, len, u.logical, u.physical);
	if (!strcmp(attr, "savings")) {
		if (!u.logical)
			return snprintf(buf, len, "0.00");
		return snprintf(buf, len, "%.2f",
				1.0 - (double)u.physical / (double)u.logical);
	}
	if (!strcmp(attr, "codec")) {
		if (csdfs_codec_format(u.codec, spec, sizeof(spec)) < 0)
			return -EUCLEAN;
		if (volume)
			return snprintf(buf, len, "%s", spec);
		if (u.codec.id == CSDFS_CODEC_NONE)
			return snprintf(buf, len, "none=%llu",
					(unsigned long long)u.mapped);
		return snprintf(buf, len, "%s=%llu none=%llu", spec,
				(unsigned long long)(u.mapped - u.raw_bytes),
				(unsigned long long)u.raw_bytes);
	}
	return -ENODATA;
}

int csdfs_fs_getxattr(struct csdfs_vol *vol, uint64_t ino, const char *name,
		      void *value, size_t size)
{
	uint8_t key[8 + XATTR_NAME_MAX_LEN];
	struct csdfs_op op;
	struct csdfs_val v;
	size_t klen;
	int rc;

	rc = csdfs_op_begin_read(vol, &op);
	if (rc)
		return rc;
	if (!strncmp(name, VIRT_PREFIX, strlen(VIRT_PREFIX))) {
		char buf[256];

		rc = virtual_get(&op, ino, name + strlen(VIRT_PREFIX), buf, sizeof(buf));
		if (rc >= 0) {
			v.data = buf;
			v.len = (size_t)rc;
			rc = 0;
			if (size && v.len > size)
				rc = -ERANGE;
			else if (size)
				memcpy(value, buf, v.len);
		}
		if (rc != -ENODATA)
			return csdfs_op_end(&op, rc) ?: (int)v.len;
	}
	rc = xattr_key(key, ino, name, &klen);
	if (!rc)
		rc = csdfs_meta_get(op.txn, CSDFS_DB_XATTRS, key, klen, &v);
	if (rc == -ENOENT)
		rc = -ENODATA;
	if (!rc) {
		if (size && v.len > size)
			rc = -ERANGE;
		else if (size)
			memcpy(value, v.data, v.len);
	}
	rc = csdfs_op_end(&op, rc);
	return rc ? rc : (int)v.len;
}

int csdfs_fs_setxattr(struct csdfs_vol *vol, uint64_t ino, const char *name,
		      const void *value, size_t size, int flags)
{
	uint8_t key[8 + XATTR_NAME_MAX_LEN];
	struct csdfs_inode_disk rec;
	struct csdfs_op op;
	struct csdfs_val v;
	size_t klen;
	int rc;

	rc = check_namespace(name);
	if (rc)
		return rc;
	if (!strncmp(name, VIRT_PREFIX, strlen(VIRT_PREFIX)))
		return -EPERM;  /* accounting attributes are read-only */
	if (size > XATTR_VALUE_MAX)
		return -E2BIG;
	rc = xattr_key(key, ino, name, &klen);
	if (rc)
		return rc;
	rc = csdfs_op_begin(vol, &op);
	if (rc)
		return rc;
	rc = csdfs_irec_load(op.txn, ino, &rec);
	if (!rc) {
		rc = csdfs_meta_get(op.txn, CSDFS_DB_XATTRS, key, klen, &v);
		if (!rc && (flags & XATTR_CREATE))
			rc = -EEXIST;
		else if (rc == -ENOENT)
			rc = (flags & XATTR_REPLACE) ? -ENODATA : 0;
	}
	if (!rc)
		rc = csdfs_meta_put(op.txn, CSDFS_DB_XATTRS, key, klen, value, size, 0);
	if (!rc) {
		rec.ctime_ns = csdfs_now_ns();
		rc = csdfs_irec_store(op.txn, ino, &rec);
	}
	if (!rc)
		csdfs_op_touch(&op, ino);
	return csdfs_op_end(&op, rc);
}

int csdfs_fs_removexattr(struct csdfs_vol *vol, uint64_t ino, const char *name)
{
	uint8_t key[8 + XATTR_NAME_MAX_LEN];
	struct csdfs_inode_disk rec;
	struct csdfs_op op;
	size_t klen;
	int rc;

	if (!strncmp(name, VIRT_PREFIX, strlen(VIRT_PREFIX)))
		return -EPERM;
	rc = xattr_key(key, ino, name, &klen);
	if (rc)
		return rc == -ERANGE ? -ENODATA : rc;
	rc = csdfs_op_begin(vol, &op);
	if (rc)
		return rc;
	rc = csdfs_irec_load(op.txn, ino, &rec);
	if (!rc)
		rc = csdfs_meta_del(op.txn, CSDFS_DB_XATTRS, key, klen);
	if (rc == -ENOENT)
		rc = -ENODATA;
	if (!rc) {
		rec.ctime_ns = csdfs_now_ns();
		rc = csdfs_irec_store(op.txn, ino, &rec);
	}
	if (!rc)
		csdfs_op_touch(&op, ino);
	return csdfs_op_end(&op, rc);
}

int csdfs_fs_listxattr(struct csdfs_vol *vol, uint64_t ino, char *list,
		       size_t size)
{
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	struct csdfs_op op;
	uint8_t key[8];
	size_t total = 0;
	int rc;

	rc = csdfs_op_begin_read(vol, &op);
	if (rc)
		return rc;
	rc = csdfs_cursor_open(op.txn, CSDFS_DB_XATTRS, &cur);
	if (rc)
		return csdfs_op_end(&op, rc);
	csdfs_be64_put(key, ino);
	for (rc = csdfs_cursor_seek(cur, key, 8, &k, &v); !rc;
	     rc = csdfs_cursor_next(cur, &k, &v)) {
		size_t n = k.len - 8;

		if (k.len <= 8 || csdfs_be64_get(k.data) != ino)
			break;
		if (size) {
			if (total + n + 1 > size) {
				rc = -ERANGE;
				break;
			}
			memcpy(list + total, (const char *)k.data + 8, n);
			list[total + n] = '\0';
		}
		total += n + 1;
	}
	csdfs_cursor_close(cur);
	if (rc == -ENOENT)
		rc = 0;
	rc = csdfs_op_end(&op, rc);
	return rc ? rc : (int)total;
}

int csdfs_xattr_drop_all(struct csdfs_op *op, uint64_t ino)
{
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	uint8_t key[8];
	int rc;

	rc = csdfs_cursor_open(op->txn, CSDFS_DB_XATTRS, &cur);
	if (rc)
		return rc;
	csdfs_be64_put(key, ino);
	rc = csdfs_cursor_seek(cur, key, 8, &k, &v);
	while (!rc && k.len > 8 && csdfs_be64_get(k.data) == ino) {
		rc = csdfs_cursor_del(cur);
		if (!rc)
			rc = csdfs_cursor_seek(cur, key, 8, &k, &v);
	}
	csdfs_cursor_close(cur);
	return rc == -ENOENT ? 0 : rc;
}
