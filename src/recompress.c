/* SPDX-License-Identifier: MIT */
/*
 * Recompression (setxattr user.csdfs.recompress=N): rewrite up to N chunks
 * of a file that do not follow its policy, in bounded operations of 16
 * chunks, through the same write planner as any write (out of place, one
 * transaction per batch): the same bytes in a new encoding, mtime kept.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "data.h"

/* Does a stored chunk already follow policy @p? Raw chunks that the policy
 * codec could not shrink count as following it. */
static bool chunk_matches(const struct csdfs_chunk_disk *c,
			  struct csdfs_codec_spec p)
{
	if (c->codec == CSDFS_CODEC_NONE)
		return p.id == CSDFS_CODEC_NONE || (c->flags & CSDFS_CHUNK_INCOMPRESSIBLE);
	return c->codec == p.id && c->level == p.level;
}

/* Collect up to @max chunk indices >= @from that do not match the file's
 * effective policy (its own, or its directories', csdfs_policy_resolve).
 * @return how many, or -errno. */
static int mismatched(struct csdfs_vol *vol, uint64_t ino, uint64_t from,
		      uint64_t *idxs, int max, struct csdfs_inode_disk *rec)
{
	struct csdfs_codec_spec p;
	struct csdfs_policy pol;
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	struct csdfs_op op;
	uint8_t key[16];
	int n = 0, rc;

	rc = csdfs_op_begin_irec(vol, &op, false, ino, rec);
	if (rc)
		return rc;
	if (!S_ISREG(rec->mode))
		rc = -EINVAL;
	if (!rc)
		rc = csdfs_policy_resolve(vol, op.txn, ino, rec, &pol);
	if (!rc)
		rc = csdfs_cursor_open(op.txn, CSDFS_DB_CHUNKS, &cur);
	if (rc)
		return csdfs_op_end(&op, rc);
	p = pol.codec;
	csdfs_chunk_key(key, ino, from);
	for (rc = csdfs_cursor_seek(cur, key, 16, &k, &v); !rc && n < max;
	     rc = csdfs_cursor_next(cur, &k, &v)) {
		struct csdfs_chunk_disk c;

		if (k.len != 16 || csdfs_be64_get(k.data) != ino)
			break;
		rc = csdfs_rec_chunk_decode(&v, &c);
		if (rc)
			break;
		if (!chunk_matches(&c, p))
			idxs[n++] = csdfs_be64_get((const uint8_t *)k.data + 8);
	}
	csdfs_cursor_close(cur);
	if (rc == -ENOENT)
		rc = 0;
	rc = csdfs_op_end(&op, rc);
	return rc ? rc : n;
}

int csdfs_file_recompress_left(struct csdfs_vol *vol, uint64_t ino)
{
	struct csdfs_inode_disk rec;
	uint64_t idxs[256], from = 0;
	int total = 0, n;

	do {
		n = mismatched(vol, ino, from, idxs, 256, &rec);
		if (n < 0)
			return n;
		total += n;
		if (n)
			from = idxs[n - 1] + 1;
	} while (n == 256 && total < (1 << 30));
	return total;
}

/* Rewrite the chunks @idxs[0..n) with the file's current policy; same
 * bytes, new encoding, mtime untouched. */
static int recompress_batch(struct csdfs_vol *vol, uint64_t ino,
			    const uint64_t *idxs, int n)
{
	uint64_t mask[CSDFS_STRIPES / 64];
	struct csdfs_inode_disk rec;
	struct wplan plan;
	char *tmp = NULL, *scratch = NULL;
	uint32_t cs;
	int rc;

	csdfs_stripes_lock_chunks(vol, ino, idxs, (size_t)n, mask);
	rc = csdfs_reg_load_codec(vol, ino, &rec);
	if (!rc)
		rc = csdfs_wplan_init(&plan, vol, ino, &rec, (size_t)n, (size_t)n);
	if (rc)
		goto out_unlock;
	cs = plan.cs;
	tmp = malloc((size_t)n * cs);  /* the plan points into it */
	scratch = malloc(csdfs_codec_bound(cs));
	if (!tmp || !scratch)
		rc = -ENOMEM;
	for (int i = 0; i < n && !rc; i++) {
		struct csdfs_chunk_disk c;

		rc = csdfs_read_mapping(vol, ino, idxs[i], &c);
		if (rc == -ENOENT) {
			rc = 0;  /* became a hole meanwhile */
			continue;
		}
		if (!rc)
			rc = csdfs_read_chunk(vol, ino, idxs[i], cs, &c, tmp + (size_t)i * cs,
					scratch, false);
		if (!rc)
			rc = csdfs_wplan_add(&plan, idxs[i], tmp + (size_t)i * cs, c.llen);
	}
	if (!rc)
		rc = csdfs_wplan_write(&plan, false);
	if (!rc)
		rc = csdfs_wplan_apply(&plan, NULL, NULL);
	csdfs_wplan_abandon(&plan);
	csdfs_wplan_free(&plan);
out_unlock:
	csdfs_stripes_unlock(vol, mask);
	free(tmp);
	free(scratch);
	return rc;
}

int csdfs_file_recompress_xattr(struct csdfs_vol *vol, uint64_t ino,
				const char *value, size_t size)
{
	struct csdfs_inode_disk rec;
	struct csdfs_inode *in;
	uint64_t idxs[16], from = 0, budget;
	char text[32], *end;
	long long done = 0;
	int n, rc = 0;

	if (!size || size >= sizeof(text))
		return -EINVAL;
	memcpy(text, value, size);
	text[size] = '\0';
	budget = strtoull(text, &end, 10);
	if (end == text || (*end && *end != '\n') || !budget || budget > (1u << 20))
		return -EINVAL;
	in = csdfs_inode_get(vol, ino);
	if (!in)
		return -ENOMEM;
	pthread_rwlock_rdlock(&in->io_lock);
	/* Bounded transactions: one operation per batch of 16 chunks. */
	while ((uint64_t)done < budget) {
		int want = budget - (uint64_t)done < 16 ? (int)(budget - (uint64_t)done) : 16;

		n = mismatched(vol, ino, from, idxs, want, &rec);
		if (n <= 0) {
			rc = n;
			break;
		}
		rc = recompress_batch(vol, ino, idxs, n);
		if (rc)
			break;
		from = idxs[n - 1] + 1;
		done += n;
	}
	pthread_rwlock_unlock(&in->io_lock);
	csdfs_inode_put(vol, in);
	return rc;
}
