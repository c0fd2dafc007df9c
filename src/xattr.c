/* SPDX-License-Identifier: MIT */
/*
 * Extended attributes: stored user/trusted/security xattrs (db "xattrs"),
 * and the virtual, read-only user.csdfs.* attributes that report space
 * accounting. The virtual ones answer getxattr by name but are never listed,
 * so cp -a, tar --xattrs and rsync -X do not try to copy them. Most come
 * from the inode record or the roll-ups; user.csdfs.histogram scans the
 * file's chunk map (read.c), user.csdfs.syncs reads the I/O seam's
 * counters and user.csdfs.cache the decoded-chunk cache's (cache.c).
 * user.csdfs.requests is the daemon's own (it counts the FUSE requests) and
 * never reaches this file.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>

#include "csdfs/log.h"
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

/* What a virtual attribute reports: a file's own numbers, or the roll-up
 * of a directory's subtree (the root's is the volume's). */
static int usage_of(struct csdfs_op *op, uint64_t ino,
		    struct csdfs_rollup_disk *u, struct csdfs_inode_disk *rec)
{
	int rc = csdfs_irec_load(op->txn, ino, rec);

	if (rc)
		return rc;
	memset(u, 0, sizeof(*u));
	if (S_ISDIR(rec->mode))
		return csdfs_rollup_get(op->txn, ino, u);
	if (S_ISREG(rec->mode))
		csdfs_rollup_of_file(rec, u);
	return 0;
}

struct mixfmt {
	char *buf;
	size_t len, used;
};

static int mix_fmt_cb(void *ctx, uint8_t codec, int8_t level, uint64_t bytes)
{
	struct mixfmt *m = ctx;
	struct csdfs_codec_spec spec = { codec, level };
	char name[32];
	int n;

	if (csdfs_codec_format(spec, name, sizeof(name)) < 0)
		snprintf(name, sizeof(name), "codec%u:%d", codec, level);
	n = snprintf(m->buf + m->used, m->len - m->used, "%s%s=%llu",
		     m->used ? " " : "", name, (unsigned long long)bytes);
	if (n < 0 || (size_t)n >= m->len - m->used)
		return -ERANGE;
	m->used += (size_t)n;
	return 0;
}

/* Where an effective value comes from, as user.csdfs.policy shows it. */
static void policy_source(char *buf, size_t len, uint64_t ino, uint64_t from)
{
	if (from == ino)
		snprintf(buf, len, "set");
	else if (from)
		snprintf(buf, len, "inherited from inode %llu", (unsigned long long)from);
	else
		snprintf(buf, len, "default");
}

/* user.csdfs.policy: "codec=zstd:9 (inherited from inode 12) chunk_size=
 * 16384 (default)"; user.csdfs.chunk_size: the chunk size alone. A regular
 * file's chunk size is the one its chunks were cut to, fixed at creation:
 * when its directories now say otherwise, it reads "fixed at creation". */
static int policy_get(struct csdfs_op *op, uint64_t ino,
		      const struct csdfs_inode_disk *rec, bool chunk_only,
		      char *buf, size_t len)
{
	struct csdfs_policy p;
	char spec[32], csrc[48], ssrc[48];
	uint32_t chunk;
	int rc = csdfs_policy_resolve(op->vol, op->txn, ino, rec, &p);

	if (rc)
		return rc;
	chunk = p.chunk_size;
	if (S_ISREG(rec->mode) && rec->chunk_size)
		chunk = rec->chunk_size;
	if (chunk_only)
		return snprintf(buf, len, "%u", chunk);
	if (csdfs_codec_format(p.codec, spec, sizeof(spec)) < 0)
		return -EUCLEAN;
	policy_source(csrc, sizeof(csrc), ino, p.codec_from);
	if (chunk == p.chunk_size)
		policy_source(ssrc, sizeof(ssrc), ino, p.chunk_from);
	else
		snprintf(ssrc, sizeof(ssrc), "fixed at creation");
	return snprintf(buf, len, "codec=%s (%s) chunk_size=%u (%s)", spec, csrc,
			chunk, ssrc);
}

/* Free blocks a whole uncompressed chunk can still be written to, beyond
 * the reserve (vol->lock held): what df's Avail is made from. Fewer than
 * the free blocks when freed chunks left runs too short for a chunk, as
 * small appends do, each rewriting the file's last chunk out of place. */
static uint64_t usable_blocks(struct csdfs_vol *vol)
{
	uint64_t usable = csdfs_alloc_usable(&vol->alloc);

	return usable > vol->alloc.reserve ? usable - vol->alloc.reserve : 0;
}

static int status_get(struct csdfs_op *op, const char *attr, char *buf,
		      size_t len)
{
	struct csdfs_vol *vol = op->vol;
	const struct csdfs_counters_disk *c = &vol->counters;
	uint64_t data = vol->sb.total_blocks - CSDFS_FIRST_DATA_BLOCK;
	uint64_t freeb = data - c->used_blocks;

	if (!strcmp(attr, "capacity_logical"))
		return snprintf(buf, len, "%llu", (unsigned long long)vol->sb.logical_bytes);
	if (!strcmp(attr, "capacity_physical"))
		return snprintf(buf, len, "%llu", (unsigned long long)(data * CSDFS_BLOCK_SIZE));
	if (!strcmp(attr, "free_physical"))
		return snprintf(buf, len, "%llu", (unsigned long long)(freeb * CSDFS_BLOCK_SIZE));
	if (!strcmp(attr, "free_usable"))
		return snprintf(buf, len, "%llu",
				(unsigned long long)(usable_blocks(vol) * CSDFS_BLOCK_SIZE));
	if (!strcmp(attr, "used_physical"))
		return snprintf(buf, len, "%llu",
				(unsigned long long)(c->used_blocks * CSDFS_BLOCK_SIZE));
	if (!strcmp(attr, "used_logical"))  /* df's Used, see csdfs_fs_statfs */
		return snprintf(buf, len, "%llu", (unsigned long long)c->logical_used);
	if (!strcmp(attr, "app_bytes_written"))
		return snprintf(buf, len, "%llu", (unsigned long long)c->app_bytes_written);
	if (!strcmp(attr, "dev_bytes_written"))
		return snprintf(buf, len, "%llu", (unsigned long long)c->dev_bytes_written);
	if (!strcmp(attr, "dead_bytes"))   /* what compaction can win back */
		return snprintf(buf, len, "%llu", (unsigned long long)
				(c->used_blocks * CSDFS_BLOCK_SIZE > c->stored_bytes ?
				 c->used_blocks * CSDFS_BLOCK_SIZE - c->stored_bytes : 0));
	if (!strcmp(attr, "compact_bytes_written"))
		return snprintf(buf, len, "%llu", (unsigned long long)c->compact_bytes_written);
	if (!strcmp(attr, "compact_chunks"))
		return snprintf(buf, len, "%llu", (unsigned long long)c->compact_chunks);
	if (!strcmp(attr, "compact_write_amplification"))
		return snprintf(buf, len, "%.3f", c->app_bytes_written ?
				(double)c->compact_bytes_written / (double)c->app_bytes_written : 0.0);
	if (!strcmp(attr, "meta_bytes_written"))
		return snprintf(buf, len, "%llu", (unsigned long long)c->meta_bytes_written);
	if (!strcmp(attr, "meta_bytes"))
		return snprintf(buf, len, "%llu",
				(unsigned long long)csdfs_meta_file_bytes(vol->meta));
	if (!strcmp(attr, "write_amplification")) {
		if (!c->app_bytes_written)
			return snprintf(buf, len, "0.00");
		return snprintf(buf, len, "%.2f",
				(double)(c->dev_bytes_written + c->meta_bytes_written) /
				(double)c->app_bytes_written);
	}
	if (!strcmp(attr, "syncs")) {
		/* vol->lock is held: the operation's. */
		return snprintf(buf, len, "container=%llu data.mdb=%llu record=%llu group_commits=%llu journal_segments=%llu",
				(unsigned long long)csdfs_io_syncs(CSDFS_IO_CONTAINER),
				(unsigned long long)csdfs_io_syncs(CSDFS_IO_META_DATA),
				(unsigned long long)csdfs_io_syncs(CSDFS_IO_META_RECORD),
				(unsigned long long)vol->group_commits,
				(unsigned long long)vol->journal.segments);
	}
	if (!strcmp(attr, "cache")) {
		uint64_t hits, misses;
		size_t bytes, budget;

		/* Under vol->lock, as fit_cache_locked (commit.c) resizes the
		 * cache: its shard locks are leaves, taken after vol->lock and
		 * never holding it. Counts since mount (the cache is the open
		 * volume's); a disabled cache counts nothing and has a budget
		 * of 0. The budget is cache_size less what LMDB's mapped pages
		 * take of it (fit_cache_locked). */
		csdfs_cache_stats(vol->cache, &hits, &misses, &bytes, &budget);
		return snprintf(buf, len, "hits=%llu misses=%llu bytes=%llu budget=%llu",
				(unsigned long long)hits, (unsigned long long)misses,
				(unsigned long long)bytes, (unsigned long long)budget);
	}
	if (!strcmp(attr, "checksum_errors"))
		return snprintf(buf, len, "%llu", (unsigned long long)c->csum_errors);
	if (!strcmp(attr, "warnings")) {
		const char *w[3];
		int n = 0, used = 0;

		/* Less than a tenth of the data area left for writes: counted
		 * as df counts it, not in free blocks, some of which may be
		 * in runs no chunk fits. */
		if (usable_blocks(vol) * 10 < data)
			w[n++] = "low-space";
		if (c->csum_errors)
			w[n++] = "checksum-errors";
		if (vol->failed)
			w[n++] = "failed";
		buf[0] = '\0';
		for (int i = 0; i < n; i++)
			used += snprintf(buf + used, len - (size_t)used, "%s%s",
					 i ? ";" : "", w[i]);
		return used;
	}
	return -ENODATA;
}

/* user.csdfs.histogram's stable text line: "chunk=16384 4K=N 8K=N 12K=N
 * 16K=N raw=N zero=N", one bucket per 4 KiB up to the chunk size (one above
 * it only when it holds chunks). @return its length, or -ERANGE. */
static int histogram_fmt(const struct csdfs_histogram *h, char *buf, size_t len)
{
	size_t used = 0;
	int n;

	n = snprintf(buf, len, "chunk=%u", h->chunk_size);
	for (unsigned i = 0; n >= 0 && (size_t)n < len - used && i < CSDFS_HIST_BUCKETS; i++) {
		used += (size_t)n;
		n = 0;
		if ((i + 1) * CSDFS_BLOCK_SIZE <= h->chunk_size || h->stored[i])
			n = snprintf(buf + used, len - used, " %uK=%llu",
				     (i + 1) * (CSDFS_BLOCK_SIZE / 1024),
				     (unsigned long long)h->stored[i]);
	}
	if (n >= 0 && (size_t)n < len - used) {
		used += (size_t)n;
		n = snprintf(buf + used, len - used, " raw=%llu zero=%llu",
			     (unsigned long long)h->raw, (unsigned long long)h->zero);
	}
	if (n < 0 || (size_t)n >= len - used)
		return -ERANGE;
	return (int)(used + (size_t)n);
}

/* @return value length written into @buf, or -ENODATA for an unknown name. */
static int virtual_get(struct csdfs_op *op, uint64_t ino, const char *attr,
		       char *buf, size_t len)
{
	struct csdfs_inode_disk rec;
	struct csdfs_rollup_disk u;
	uint64_t phys;
	int rc;

	if (!strcmp(attr, "atomic_write_unit"))
		return snprintf(buf, len, "%u", op->vol->sb.atomic_unit);
	if (ino == CSDFS_ROOT_INO) {
		rc = status_get(op, attr, buf, len);
		if (rc != -ENODATA)
			return rc;
	}
	rc = usage_of(op, ino, &u, &rec);
	if (rc < 0)
		return rc;
	phys = u.phys_blocks * CSDFS_BLOCK_SIZE;
	if (!strcmp(attr, "logical"))
		return snprintf(buf, len, "%llu", (unsigned long long)u.logical);
	if (!strcmp(attr, "physical"))
		return snprintf(buf, len, "%llu", (unsigned long long)phys);
	if (!strcmp(attr, "stored"))
		return snprintf(buf, len, "%llu", (unsigned long long)u.stored_bytes);
	if (!strcmp(attr, "extents"))
		return snprintf(buf, len, "%llu", (unsigned long long)u.stored_chunks);
	if (!strcmp(attr, "incompressible"))
		return snprintf(buf, len, "%llu", (unsigned long long)u.raw_bytes);
	if (!strcmp(attr, "zero"))
		return snprintf(buf, len, "%llu", (unsigned long long)
				(u.logical > u.mapped_bytes ? u.logical - u.mapped_bytes : 0));
	if (!strcmp(attr, "files") && S_ISDIR(rec.mode))
		return snprintf(buf, len, "%llu", (unsigned long long)u.files);
	if (!strcmp(attr, "ratio")) {
		if (!phys)
			return snprintf(buf, len, u.logical ? "inf" : "1.00");
		return snprintf(buf, len, "%.2f", (double)u.logical / (double)phys);
	}
	if (!strcmp(attr, "savings")) {
		if (!u.logical)
			return snprintf(buf, len, "0.0000");
		return snprintf(buf, len, "%.4f", 1.0 - (double)phys / (double)u.logical);
	}
	if (!strcmp(attr, "codec")) {
		struct mixfmt m = { buf, len, 0 };

		buf[0] = '\0';
		rc = csdfs_mix_list(op->txn, ino, mix_fmt_cb, &m);
		return rc ? rc : (int)m.used;
	}
	if (!strcmp(attr, "policy") || !strcmp(attr, "chunk_size"))
		return policy_get(op, ino, &rec, !strcmp(attr, "chunk_size"), buf, len);
	return -ENODATA;
}

/*
 * Writable policy attributes: user.csdfs.codec and user.csdfs.chunk_size,
 * set by setxattr and cleared by removexattr (@value NULL), each in one
 * operation. A cleared value falls back to the directories above
 * (csdfs_policy_resolve). A bad value is refused with one log line that
 * names the valid ones.
 */
static int policy_parse(uint64_t ino, bool is_codec, const void *value, size_t size,
			struct csdfs_codec_spec *spec, uint64_t *chunk)
{
	char text[64];
	/* Too long, or with a NUL inside: refused whatever its start says. */
	bool bad = size >= sizeof(text) || memchr(value, '\0', size);

	if (size >= sizeof(text))
		size = sizeof(text) - 1;
	memcpy(text, value, size);
	text[size] = '\0';
	if (size && text[size - 1] == '\n')
		text[size - 1] = '\0';
	if (is_codec && (bad || csdfs_codec_parse(text, spec))) {
		csdfs_log(LOG_WARNING, "'%s' is not a codec for 'user.csdfs.codec' on inode %llu: "
			  "use " CSDFS_CODEC_CHOICES, text, (unsigned long long)ino);
		return -EINVAL;
	}
	if (!is_codec && (bad || csdfs_parse_size(text, chunk) || *chunk < CSDFS_CHUNK_MIN ||
			  *chunk > CSDFS_CHUNK_MAX || (*chunk & (*chunk - 1)))) {
		csdfs_log(LOG_WARNING, "'%s' is not a chunk size for 'user.csdfs.chunk_size' on "
			  "inode %llu: use a power of two from %u to %u (4K..128K)",
			  text, (unsigned long long)ino, CSDFS_CHUNK_MIN, CSDFS_CHUNK_MAX);
		return -EINVAL;
	}
	return 0;
}

static int policy_change(struct csdfs_vol *vol, uint64_t ino, const char *attr,
			 const void *value, size_t size)
{
	struct csdfs_inode_disk rec;
	struct csdfs_codec_spec spec;
	struct csdfs_policy up;
	struct csdfs_inode *in;
	struct csdfs_op op;
	uint64_t chunk = 0;
	bool is_codec = !strcmp(attr, "codec");
	uint16_t set = is_codec ? CSDFS_INODE_CODEC_SET : CSDFS_INODE_CHUNK_SET;
	uint16_t inh = is_codec ? CSDFS_INODE_CODEC_INHERITED : CSDFS_INODE_CHUNK_INHERITED;
	int rc;

	if (!is_codec && strcmp(attr, "chunk_size"))
		return -EPERM;  /* the accounting attributes are read-only */
	if (value && policy_parse(ino, is_codec, value, size, &spec, &chunk))
		return -EINVAL;
	/* A write computes its chunks with the size it read first and reads
	 * the record again later: hold a size change off while any I/O runs.
	 * Each chunk names its own codec, so a codec change needs no lock. */
	in = csdfs_inode_get(vol, ino);
	if (!in)
		return -ENOMEM;
	if (!is_codec)
		csdfs_inode_lock_exclusive(vol, in);
	rc = csdfs_op_begin_irec(vol, &op, true, ino, &rec);
	if (rc)
		goto out;
	if (!S_ISREG(rec.mode) && !S_ISDIR(rec.mode))
		rc = -EPERM;
	else if (!value && !(rec.flags & set))
		rc = -ENODATA;  /* nothing set here to clear */
	/* Existing chunks have their size: only an empty file may change. */
	else if (!is_codec && S_ISREG(rec.mode) && (rec.size || rec.stored_chunks))
		rc = -EBUSY;
	if (!rc && !value) {
		/* What the directories above say now (informational for the
		 * codec, which is resolved at each write; the chunk size of a
		 * file is its own). */
		rec.flags = (uint16_t)(rec.flags & ~set);
		rc = csdfs_policy_resolve(vol, op.txn, ino, &rec, &up);
		spec = up.codec;
		chunk = up.chunk_size;
		if (!rc && (is_codec ? up.codec_from : up.chunk_from))
			rec.flags |= inh;
	} else if (!rc) {
		rec.flags = (uint16_t)((rec.flags & ~inh) | set);
	}
	if (!rc && is_codec) {
		rec.codec = spec.id;
		rec.level = spec.level;
	} else if (!rc) {
		rec.chunk_size = (uint32_t)chunk;
	}
	rec.ctime_ns = csdfs_now_ns();
	if (!rc)
		csdfs_policy_moved(vol);
	rc = csdfs_op_end_irec(&op, ino, &rec, rc);
	if (!rc && !is_codec)
		__atomic_store_n(&in->chunk_size, 0, __ATOMIC_RELAXED);
out:
	if (!is_codec)
		pthread_rwlock_unlock(&in->io_lock);
	csdfs_inode_put(vol, in);
	return rc;
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
		const char *attr = name + strlen(VIRT_PREFIX);
		char buf[1024];

		/* Each of these reads in an operation of its own (whole scans). */
		if (!strcmp(attr, "recompress") || !strcmp(attr, "histogram") ||
		    !strcmp(attr, "compact")) {
			struct csdfs_histogram h;
			uint64_t left = 0;

			csdfs_op_end(&op, 0);
			if (!strcmp(attr, "histogram")) {
				rc = csdfs_fs_histogram(vol, ino, &h);
				if (!rc)
					rc = histogram_fmt(&h, buf, sizeof(buf));
				if (rc < 0)
					return rc;
			} else {
				if (!strcmp(attr, "compact"))
					rc = csdfs_compact_left(vol, ino, &left);
				else if ((rc = csdfs_file_recompress_left(vol, ino)) >= 0)
					left = (uint64_t)rc;
				if (rc < 0)
					return rc;
				rc = snprintf(buf, sizeof(buf), "%llu", (unsigned long long)left);
			}
			if (size && (size_t)rc > size)
				return -ERANGE;
			if (size)
				memcpy(value, buf, (size_t)rc);
			return rc;
		}
		rc = virtual_get(&op, ino, attr, buf, sizeof(buf));
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
	if (!strncmp(name, VIRT_PREFIX, strlen(VIRT_PREFIX))) {
		const char *attr = name + strlen(VIRT_PREFIX);

		if (!strcmp(attr, "recompress"))
			return csdfs_file_recompress_xattr(vol, ino, value, size);
		if (!strcmp(attr, "compact"))
			return csdfs_compact_xattr(vol, ino, value, size);
		return policy_change(vol, ino, attr, value ? value : "", size);
	}
	if (size > XATTR_VALUE_MAX)
		return -E2BIG;
	rc = xattr_key(key, ino, name, &klen);
	if (rc)
		return rc;
	rc = csdfs_op_begin_irec(vol, &op, true, ino, &rec);
	if (rc)
		return rc;
	rc = csdfs_meta_get(op.txn, CSDFS_DB_XATTRS, key, klen, &v);
	if (!rc && (flags & XATTR_CREATE))
		rc = -EEXIST;
	else if (rc == -ENOENT)
		rc = (flags & XATTR_REPLACE) ? -ENODATA : 0;
	if (!rc)
		rc = csdfs_meta_put(op.txn, CSDFS_DB_XATTRS, key, klen, value, size, 0);
	rec.ctime_ns = csdfs_now_ns();
	return csdfs_op_end_irec(&op, ino, &rec, rc);
}

int csdfs_fs_removexattr(struct csdfs_vol *vol, uint64_t ino, const char *name)
{
	uint8_t key[8 + XATTR_NAME_MAX_LEN];
	struct csdfs_inode_disk rec;
	struct csdfs_op op;
	size_t klen;
	int rc;

	if (!strncmp(name, VIRT_PREFIX, strlen(VIRT_PREFIX)))
		return policy_change(vol, ino, name + strlen(VIRT_PREFIX), NULL, 0);
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
	size_t total = 0;
	int rc;

	rc = csdfs_op_begin_read(vol, &op);
	if (rc)
		return rc;
	rc = csdfs_cursor_at(op.txn, CSDFS_DB_XATTRS, ino, &cur, &k, &v);
	if (!cur)
		return csdfs_op_end(&op, rc);
	for (; !rc; rc = csdfs_cursor_next(cur, &k, &v)) {
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

/* Drop set-user-ID, set-group-ID (when group-executable: otherwise it
 * means mandatory locking) and security.capability, as a local filesystem
 * does when an unprivileged process writes or truncates a file, or the
 * owner of anything but a directory changes (FIFOs and device nodes too,
 * as the VFS's chown does). Checked first in a read operation: the common
 * case, nothing to drop, changes nothing. Returns 1 when it dropped
 * something, 0 when there was nothing to drop, or -errno. */
int csdfs_fs_kill_privs(struct csdfs_vol *vol, uint64_t ino)
{
	static const char cap[] = "security.capability";
	uint8_t key[8 + sizeof(cap)];
	struct csdfs_inode_disk rec;
	struct csdfs_val v;
	struct csdfs_op op;
	mode_t sgid = S_ISGID | S_IXGRP;
	bool has_cap = false;
	size_t klen;
	int rc;

	rc = xattr_key(key, ino, cap, &klen);
	if (rc)
		return rc;
	rc = csdfs_op_begin_irec(vol, &op, false, ino, &rec);
	if (rc)
		return rc;
	has_cap = !csdfs_meta_get(op.txn, CSDFS_DB_XATTRS, key, klen, &v);
	rc = csdfs_op_end(&op, 0);
	if (rc || S_ISDIR(rec.mode) ||
	    (!(rec.mode & S_ISUID) && (rec.mode & sgid) != sgid && !has_cap))
		return rc;

	rc = csdfs_op_begin_irec(vol, &op, true, ino, &rec);
	if (rc)
		return rc;
	rc = csdfs_meta_del(op.txn, CSDFS_DB_XATTRS, key, klen);
	if (rc == -ENOENT)
		rc = 0;
	rec.mode &= ~(mode_t)S_ISUID;
	if ((rec.mode & sgid) == sgid)
		rec.mode &= ~(mode_t)S_ISGID;
	rec.ctime_ns = csdfs_now_ns();
	rc = csdfs_op_end_irec(&op, ino, &rec, rc);
	return rc ? rc : 1;
}
