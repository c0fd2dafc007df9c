/* SPDX-License-Identifier: MIT */
/*
 * The metadata journal: how an fsync becomes durable with one host sync.
 *
 * A group commit makes LMDB durable with three syncs in two rounds (the
 * container and data.mdb side by side, then the durability record; see
 * commit.c and meta_lmdb.c). An fsync does not need that: the changes of
 * the open group so far (the redo bytes LMDB's adapter keeps) are written
 * as one segment into a region of the container, and one fdatasync of the
 * container makes the data and the segment durable together. LMDB's own
 * commit comes later, on the commit thread's schedule or when the region
 * is full, and starts the region over.
 *
 * An open applies, to the durable LMDB snapshot, every whole segment made
 * on it, in order (csdfs_journal_load). A segment is whole when its header
 * and checksum are right and every chunk it maps holds the bytes its
 * checksum names: one fdatasync writes the segment and the data it maps
 * in no particular order, so after a crash inside it either may be
 * missing; then the fsync never returned, and the segment is dropped with
 * all after it (none can exist: the next one is written after this sync
 * returned).
 *
 * Blocks freed in the open group stay quarantined until LMDB's commit is
 * durable (as without the journal), so no segment's chunk is overwritten
 * while its segment may still be replayed.
 */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "csdfs/csum.h"
#include "csdfs/log.h"
#include "record.h"
#include "vol.h"

#define SEG_HDR sizeof(struct csdfs_journal_seg_disk)

/* Region size: 1/256 of the volume, from 256 KiB to 64 MiB: a segment
 * per fsync takes a block or more, and a full region costs a commit. */
static uint64_t region_blocks(uint64_t total_blocks)
{
	uint64_t n = total_blocks / 256;

	return n < 64 ? 64 : n > 16384 ? 16384 : n;
}

static void seg_encode(struct csdfs_journal_seg_disk *h, uint64_t base,
		       uint64_t seq, uint32_t len, uint32_t blocks)
{
	memset(h, 0, sizeof(*h));
	h->magic = htole32(CSDFS_JOURNAL_MAGIC);
	h->version = htole32(1);
	h->base = htole64(base);
	h->seq = htole64(seq);
	h->len = htole32(len);
	h->blocks = htole32(blocks);
}

uint64_t csdfs_journal_seg_blocks(size_t len)
{
	return (SEG_HDR + len + CSDFS_BLOCK_SIZE - 1) / CSDFS_BLOCK_SIZE;
}

int csdfs_journal_write(struct csdfs_vol *vol, const void *redo, size_t len,
			uint64_t *blocks)
{
	struct csdfs_journal *j = &vol->journal;
	uint64_t n = csdfs_journal_seg_blocks(len);
	struct csdfs_journal_seg_disk h;
	unsigned char *buf;
	uint32_t crc;
	int rc;

	if (!j->blocks || j->pos + n > j->blocks)
		return -ENOSPC;
	buf = aligned_alloc(CSDFS_BLOCK_SIZE, n * CSDFS_BLOCK_SIZE);
	if (!buf)
		return -ENOMEM;
	memset(buf + (n - 1) * CSDFS_BLOCK_SIZE, 0, CSDFS_BLOCK_SIZE);
	seg_encode(&h, j->base, j->seq, (uint32_t)len, (uint32_t)n);
	memcpy(buf, &h, SEG_HDR);
	memcpy(buf + SEG_HDR, redo, len);
	crc = htole32(csdfs_crc32c(0, buf, SEG_HDR + len));
	memcpy(buf + offsetof(struct csdfs_journal_seg_disk, crc), &crc, 4);
	rc = csdfs_io_pwrite(&vol->io, buf, n * CSDFS_BLOCK_SIZE,
			     (j->start + j->pos) * CSDFS_BLOCK_SIZE);
	free(buf);
	if (!rc)
		*blocks = n;
	return rc;
}

void csdfs_journal_restart(struct csdfs_journal *j, uint64_t base)
{
	j->base = base;
	j->seq = 1;
	j->pos = 0;
}

/* ---- open: find the region, replay it -------------------------------- */

struct verify {
	struct csdfs_vol *vol;
	unsigned char *buf;
	size_t cap;
	uint64_t bad_pa;
};

/* Does every chunk a change maps hold the bytes its checksum names? */
static int verify_chunk(void *arg, bool put, enum csdfs_db db,
			const struct csdfs_val *k, const struct csdfs_val *v)
{
	struct verify *vf = arg;
	struct csdfs_chunk_disk c;
	int rc;

	(void)k;
	if (!put || db != CSDFS_DB_CHUNKS)
		return 0;
	if (csdfs_rec_chunk_decode(v, &c))
		return -EUCLEAN;
	if (!c.plen)
		return 0;
	if (c.pa + c.plen > vf->vol->sb.total_blocks * CSDFS_BLOCK_SIZE || c.plen > CSDFS_CHUNK_MAX + CSDFS_BLOCK_SIZE)
		return -EUCLEAN;
	if (c.plen > vf->cap) {
		unsigned char *p = realloc(vf->buf, c.plen);

		if (!p)
			return -ENOMEM;
		vf->buf = p;
		vf->cap = c.plen;
	}
	rc = csdfs_io_pread(&vf->vol->io, vf->buf, c.plen, c.pa);
	if (rc)
		return rc;
	if (csdfs_crc32c(0, vf->buf, c.plen) != c.csum) {
		vf->bad_pa = c.pa;
		return -EILSEQ;
	}
	return 0;
}

/*
 * Read segment @seq at block @pos of the region into *@seg (the caller
 * frees it). @return 0; 1: no whole segment there (the journal ends);
 * -errno on a failed read.
 */
static int seg_read(struct csdfs_vol *vol, uint64_t pos, uint64_t seq,
		    unsigned char **seg, size_t *len, uint64_t *blocks)
{
	struct csdfs_journal *j = &vol->journal;
	struct csdfs_journal_seg_disk h;
	unsigned char *buf;
	uint32_t crc, want;
	uint64_t n;
	int rc;

	rc = csdfs_io_pread(&vol->io, &h, SEG_HDR, (j->start + pos) * CSDFS_BLOCK_SIZE);
	if (rc)
		return rc;
	n = le32toh(h.blocks);
	if (le32toh(h.magic) != CSDFS_JOURNAL_MAGIC || le32toh(h.version) != 1 ||
	    le64toh(h.base) != j->base || le64toh(h.seq) != seq || !n ||
	    pos + n > j->blocks || csdfs_journal_seg_blocks(le32toh(h.len)) != n)
		return 1;
	buf = malloc(n * CSDFS_BLOCK_SIZE);
	if (!buf)
		return -ENOMEM;
	rc = csdfs_io_pread(&vol->io, buf, n * CSDFS_BLOCK_SIZE,
			    (j->start + pos) * CSDFS_BLOCK_SIZE);
	if (rc) {
		free(buf);
		return rc;
	}
	memcpy(&want, buf + offsetof(struct csdfs_journal_seg_disk, crc), 4);
	memset(buf + offsetof(struct csdfs_journal_seg_disk, crc), 0, 4);
	crc = csdfs_crc32c(0, buf, SEG_HDR + le32toh(h.len));
	if (crc != le32toh(want)) {
		free(buf);
		return 1;
	}
	*seg = buf;
	*len = le32toh(h.len);
	*blocks = n;
	return 0;
}

static int replay(struct csdfs_vol *vol, char *err, size_t errlen)
{
	struct csdfs_journal *j = &vol->journal;
	struct verify vf = { .vol = vol };
	uint64_t pos = 0, seq = 1, bytes = 0;
	int rc = 0;

	while (pos < j->blocks) {
		unsigned char *seg;
		uint64_t n;
		size_t len;

		rc = seg_read(vol, pos, seq, &seg, &len, &n);
		if (rc) {
			if (rc == 1)
				rc = 0;
			else
				snprintf(err, errlen, "cannot read the journal: %s", strerror(-rc));
			break;
		}
		rc = csdfs_meta_redo_each(seg + SEG_HDR, len, verify_chunk, &vf);
		if (rc == -EILSEQ) {
			/* Its fsync never returned (see the top). */
			csdfs_log(LOG_NOTICE, "journal segment %llu maps bytes at %llu that never reached the disk: dropped (its fsync did not return)",
				  (unsigned long long)seq, (unsigned long long)vf.bad_pa);
			free(seg);
			rc = 0;
			break;
		}
		if (!rc)
			rc = csdfs_meta_replay(vol->group, seg + SEG_HDR, len);
		free(seg);
		if (rc) {
			snprintf(err, errlen, "journal segment %llu does not apply to the metadata: %s",
				 (unsigned long long)seq, strerror(-rc));
			break;
		}
		bytes += len;
		pos += n;
		seq++;
	}
	free(vf.buf);
	if (!rc && seq > 1) {
		j->replayed = seq - 1;
		csdfs_log(LOG_NOTICE, "replayed %llu journal segments (%llu bytes of metadata changes made durable by fsync)",
			  (unsigned long long)(seq - 1), (unsigned long long)bytes);
	}
	return rc;
}

/* Take a region for the journal out of the free map (in the open group,
 * committed by the open). The superblock names the journal first: an older
 * csdfs must refuse the volume from then on. */
static int create(struct csdfs_vol *vol, char *err, size_t errlen)
{
	uint64_t want = region_blocks(vol->sb.total_blocks), start = 0, taken;
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	int rc;

	rc = csdfs_cursor_open(vol->group, CSDFS_DB_FREE, &cur);
	if (rc)
		return rc;
	/* The last run long enough: far from where data is placed first. */
	for (rc = csdfs_cursor_last(cur, &k, &v); !rc; rc = csdfs_cursor_prev(cur, &k, &v)) {
		uint64_t s, n;

		rc = csdfs_freemap_decode(&k, &v, &s, &n);
		if (rc)
			break;
		if (n >= want) {
			start = s + n - want;
			break;
		}
	}
	csdfs_cursor_close(cur);
	if (rc && rc != -ENOENT)
		return rc;
	if (!start) {
		csdfs_log(LOG_NOTICE, "volume '%s' has no free run of %llu blocks for a journal: every fsync commits the metadata in full",
			  vol->path, (unsigned long long)want);
		return 0;
	}
	if (!(vol->sb.incompat & CSDFS_FEATURE_INCOMPAT_JOURNAL)) {
		rc = csdfs_super_upgrade(&vol->io, &vol->sb);
		if (rc) {
			snprintf(err, errlen, "cannot mark volume '%s' as journaled: %s",
				 vol->path, strerror(-rc));
			return rc;
		}
	}
	rc = csdfs_freemap_take(vol->group, start, want, &taken);
	if (!rc && taken != want)
		rc = -EUCLEAN;
	if (!rc)
		rc = csdfs_rec_le64_put(vol->group, CSDFS_DB_META, "journal_start", 13, &start, 0);
	if (!rc)
		rc = csdfs_rec_le64_put(vol->group, CSDFS_DB_META, "journal_blocks", 14, &want, 0);
	if (rc) {
		snprintf(err, errlen, "cannot make the journal of '%s': %s", vol->path,
			 strerror(-rc));
		return rc;
	}
	vol->dirty = true;
	vol->journal.start = start;
	vol->journal.blocks = want;
	return 0;
}

int csdfs_journal_region(struct csdfs_txn *txn, uint64_t *start, uint64_t *blocks)
{
	int rc = csdfs_rec_le64_get(txn, CSDFS_DB_META, "journal_start", 13, start);

	if (!rc)
		rc = csdfs_rec_le64_get(txn, CSDFS_DB_META, "journal_blocks", 14, blocks);
	return rc;
}

int csdfs_journal_load(struct csdfs_vol *vol, bool writable, char *err, size_t errlen)
{
	struct csdfs_journal *j = &vol->journal;
	uint64_t start, blocks;
	int rc;

	memset(j, 0, sizeof(*j));
	rc = csdfs_journal_region(vol->group, &start, &blocks);
	if (rc == -ENOENT)
		return writable ? create(vol, err, errlen) : 0;
	if (rc || start < CSDFS_FIRST_DATA_BLOCK || !blocks ||
	    start + blocks > vol->sb.total_blocks) {
		snprintf(err, errlen, "metadata is corrupt: bad journal region");
		return -EUCLEAN;
	}
	if (!(vol->sb.incompat & CSDFS_FEATURE_INCOMPAT_JOURNAL)) {
		snprintf(err, errlen, "metadata names a journal but the superblock does not: the volume is corrupt");
		return -EUCLEAN;
	}
	j->start = start;
	j->blocks = blocks;
	csdfs_journal_restart(j, csdfs_meta_durable_id(vol->meta));
	return replay(vol, err, errlen);
}
