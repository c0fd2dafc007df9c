/* SPDX-License-Identifier: MIT */
/*
 * The read path. Reads look the mappings up under vol->lock, then read,
 * verify and decode outside it; runs of whole chunks stored back to back
 * are fetched with one pread (streaming runs past the host's page cache).
 * A checksum mismatch is re-checked against a fresh mapping (the chunk may
 * have been replaced and its blocks recycled meanwhile) before it is
 * reported as corruption. Also SEEK_DATA / SEEK_HOLE and the chunk-size
 * histogram (user.csdfs.histogram), which read the map.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "csdfs/bufpool.h"
#include "csdfs/csum.h"
#include "csdfs/log.h"
#include "data.h"

#define NS_PER_DAY (86400ll * 1000000000ll)

/* ---- one chunk ----------------------------------------------------------- */

/* Report a corrupt stored chunk once (log line and volume counter), however
 * often it is read: the set remembers the container offsets reported. */
static void count_csum_error(struct csdfs_vol *vol, uint64_t ino, uint64_t idx,
			     uint32_t cs, uint64_t pa)
{
	bool first = true;
	size_t h;

	pthread_mutex_lock(&vol->lock);
	h = (size_t)((pa * 0x9e3779b97f4a7c15ull) >> 54) % CSDFS_BAD_SEEN;
	for (size_t n = 0; n < CSDFS_BAD_SEEN; n++, h = (h + 1) % CSDFS_BAD_SEEN) {
		if (vol->bad_seen[h] == pa + 1) {
			first = false;
			break;
		}
		if (!vol->bad_seen[h]) {
			vol->bad_seen[h] = pa + 1;
			break;
		}
	}
	if (first)
		vol->counters.csum_errors++;
	pthread_mutex_unlock(&vol->lock);
	if (first)
		csdfs_log(LOG_ERR, "checksum mismatch: inode %llu offset %llu..%llu (container byte %llu): reads of that range return EIO",
			  (unsigned long long)ino, (unsigned long long)(idx * cs),
			  (unsigned long long)((idx + 1) * cs - 1),
			  (unsigned long long)pa);
}

/* Verify and decode stored bytes @stored of @c into @dst (cs bytes: the
 * tail past llen is zeroed). */
static int decode_chunk(const struct csdfs_chunk_disk *c, const char *stored,
			char *dst, uint32_t cs)
{
	int rc;

	if (c->llen > cs || !c->llen)
		return -EUCLEAN;
	if (csdfs_crc32c(0, stored, c->plen) != c->csum)
		return -EUCLEAN;
	rc = csdfs_codec_decompress(c->codec, stored, c->plen, dst, c->llen);
	if (rc)
		return rc == -EINVAL ? -EUCLEAN : rc;
	memset(dst + c->llen, 0, cs - c->llen);
	return 0;
}

int csdfs_read_mapping(struct csdfs_vol *vol, uint64_t ino, uint64_t idx,
			struct csdfs_chunk_disk *c)
{
	struct csdfs_op op;
	int rc;

	rc = csdfs_op_begin_read(vol, &op);
	if (rc)
		return rc;
	rc = csdfs_chunk_get(op.txn, ino, idx, c);
	return csdfs_op_end(&op, rc);
}

int csdfs_read_chunk(struct csdfs_vol *vol, uint64_t ino, uint64_t idx,
		      uint32_t cs, const struct csdfs_chunk_disk *c, char *dst,
		      char *scratch, bool keep)
{
	struct csdfs_chunk_disk cur;
	int rc;

	if (!c) {
		rc = csdfs_read_mapping(vol, ino, idx, &cur);
		if (rc == -ENOENT) {
			memset(dst, 0, cs);
			return 0;
		}
		if (rc)
			return rc;
		c = &cur;
	}
	for (int attempt = 0; ; attempt++) {
		struct csdfs_cache_key key = { ino, idx, c->pa, c->csum };

		if (!csdfs_cache_get(vol->cache, &key, dst, cs))
			return 0;
		if (c->plen > csdfs_codec_bound(cs))
			return -EUCLEAN;
		rc = csdfs_io_pread(&vol->io, scratch, c->plen, c->pa);
		if (!rc)
			rc = decode_chunk(c, scratch, dst, cs);
		if (!rc && keep)
			csdfs_cache_put(vol->cache, &key, dst, cs, cs);
		if (rc != -EUCLEAN || attempt)
			break;
		{
			struct csdfs_chunk_disk fresh;
			int lrc = csdfs_read_mapping(vol, ino, idx, &fresh);

			if (lrc == -ENOENT) {
				memset(dst, 0, cs);
				return 0;
			}
			if (lrc || !memcmp(&fresh, c, sizeof(fresh)))
				break;
			cur = fresh;
			c = &cur;
		}
	}
	if (rc == -EUCLEAN) {
		count_csum_error(vol, ino, idx, cs, c->pa);
		return -EIO;
	}
	return rc;
}

/* Reads of up to this many chunks keep their chunk records on the stack. */
#define READ_SMALL 4
/* Largest run of stored chunks one read fetches (and the read scratch). */
#define READ_SPAN_MAX (1u << 20)
/* Runs from this many logical bytes on are streaming reads (readahead, large
 * reads): they are read past the host's page cache (csdfs_io_pread_direct),
 * since the kernel caches what we return. Smaller reads, such as a
 * database's page reads, keep the host's cache as a second level. */
#define READ_DIRECT_MIN (128u << 10)
_Static_assert(READ_DIRECT_MIN >= CSDFS_BUFPOOL_MIN,
	       "a streaming read's buffers must come aligned from the pool");
/* The read scratch has room to round a run out to whole host blocks. */
#define SPAN_SLACK (2 * CSDFS_IO_DIRECT_ALIGN)

/* All @k chunks stored uncompressed and whole: their bytes are the data. */
static bool run_is_raw(const struct csdfs_chunk_disk *recs, uint64_t k, uint32_t cs)
{
	for (uint64_t j = 0; j < k; j++)
		if (recs[j].codec != CSDFS_CODEC_NONE || recs[j].plen != cs ||
		    recs[j].llen != cs)
			return false;
	return true;
}

/*
 * Read whole chunks recs[0..] (have[] mapped, @n of them, @room bytes of
 * @dst) that lie back to back in the container, as sequentially written
 * chunks do, with one pread into @span (@span_cap bytes, at most
 * READ_SPAN_MAX; for a caller whose @n chunks can make a streaming run,
 * plus SPAN_SLACK and aligned to CSDFS_IO_DIRECT_ALIGN), and
 * decode each into @dst. Not cached: the kernel's page cache holds whole
 * chunks it read. @return how many chunks were delivered (0: let load_chunk
 * do the first one, e.g. after a checksum mismatch, which it retries and
 * reports).
 */
static uint64_t read_whole_run(struct csdfs_vol *vol, uint32_t cs,
			       const struct csdfs_chunk_disk *recs,
			       const bool *have, uint64_t n, char *dst,
			       uint64_t room, char *span, size_t span_cap)
{
	uint64_t k = 0, len = 0, done = 0;
	bool streaming;

	while (k < n && have[k] && (k + 1) * cs <= room &&
	       recs[k].plen <= csdfs_codec_bound(cs) &&
	       len + recs[k].plen <= span_cap &&
	       (k == 0 || recs[k].pa == recs[0].pa + len)) {
		len += recs[k].plen;
		k++;
	}
	if (k < 2)
		return 0;
	streaming = k * cs >= READ_DIRECT_MIN;
	/* Incompressible data is stored as it is: read it straight into the
	 * reply and check it there, no copy. */
	if (run_is_raw(recs, k, cs)) {
		int rc = streaming ? csdfs_io_pread_direct(&vol->io, dst, len, recs[0].pa)
				   : csdfs_io_pread(&vol->io, dst, len, recs[0].pa);

		if (rc)
			return 0;
		for (uint64_t j = 0; j < k; j++) {
			if (csdfs_crc32c(0, dst + j * cs, cs) != recs[j].csum)
				return done;
			done++;
		}
		return done;
	}
	if (streaming) {
		/* Whole host blocks around the run, so it can be read direct:
		 * packed chunks start and end anywhere in a block. */
		uint64_t head = recs[0].pa % CSDFS_IO_DIRECT_ALIGN;
		uint64_t whole = (head + len + CSDFS_IO_DIRECT_ALIGN - 1) /
				 CSDFS_IO_DIRECT_ALIGN * CSDFS_IO_DIRECT_ALIGN;

		if (recs[0].pa - head + whole > vol->io.size ||
		    csdfs_io_pread_direct(&vol->io, span, whole, recs[0].pa - head))
			return 0;
		span += head;
	} else if (csdfs_io_pread(&vol->io, span, len, recs[0].pa)) {
		return 0;
	}
	for (uint64_t j = 0, at = 0; j < k; at += recs[j].plen, j++) {
		if (decode_chunk(&recs[j], span + at, dst + j * cs, cs))
			break;
		done++;
	}
	return done;
}

/* ---- read ---------------------------------------------------------------- */

/* relatime: update atime only when it is older than m/ctime or a day old. */
static void touch_atime(struct csdfs_vol *vol, uint64_t ino)
{
	struct csdfs_inode_disk rec;
	struct csdfs_op op;
	int64_t now = csdfs_now_ns();
	int rc;

	if (csdfs_op_begin(vol, &op))
		return;
	rc = csdfs_irec_load(op.txn, ino, &rec);
	if (!rc && (rec.atime_ns <= rec.mtime_ns || rec.atime_ns <= rec.ctime_ns ||
		    now - rec.atime_ns > NS_PER_DAY)) {
		rec.atime_ns = now;
		rc = csdfs_irec_store(op.txn, ino, &rec);
	} else if (!rc) {
		rc = -EALREADY;  /* nothing to change: abort quietly */
	}
	csdfs_op_end(&op, rc);
}

ssize_t csdfs_fs_read(struct csdfs_vol *vol, uint64_t ino, char *buf,
		      size_t size, uint64_t off)
{
	return csdfs_fs_read_with(vol, ino, buf, size, off, NULL, NULL);
}

/*
 * @around, if given, also gets the rest of a partly read chunk (up to EOF),
 * decoded anyway, so the kernel can cache it as btrfs caches the rest of a
 * compressed extent, and a random reader's next access to the same chunk
 * needs no round trip. Only while the inode never had a writer: the kernel
 * then holds no dirty page of it that stale bytes could overwrite. It gets
 * the file's store generation too: whoever hands the bytes to the kernel
 * later does so through csdfs_fs_if_unchanged().
 */
ssize_t csdfs_fs_read_with(struct csdfs_vol *vol, uint64_t ino, char *buf,
			   size_t size, uint64_t off, csdfs_around_fn around,
			   void *arg)
{
	/* A page-sized read (a database's) maps one or two chunks: no
	 * allocation for their records. */
	struct csdfs_chunk_disk *recs = NULL, recs_small[READ_SMALL];
	bool have_small[READ_SMALL];
	struct csdfs_inode_disk rec;
	struct csdfs_inode *in;
	struct csdfs_op op;
	char *tmp = NULL, *scratch = NULL;
	uint64_t first, last, n, end;
	bool *have = NULL, need_atime = false;
	size_t span_cap = 0;
	uint64_t gen;
	uint32_t cs = 0;
	int rc;

	in = csdfs_inode_get(vol, ino);
	if (!in)
		return -ENOMEM;
	pthread_rwlock_rdlock(&in->io_lock);
	gen = __atomic_load_n(&in->store_gen, __ATOMIC_RELAXED);
	if (around) {
		pthread_mutex_lock(&vol->itable.lock);
		if (in->had_writer)
			around = NULL;
		pthread_mutex_unlock(&vol->itable.lock);
	}
	rc = csdfs_op_begin_read(vol, &op);
	if (rc)
		goto out;
	rc = csdfs_irec_load(op.txn, ino, &rec);
	if (!rc && S_ISDIR(rec.mode))
		rc = -EISDIR;
	if (rc || off >= rec.size || !size) {
		csdfs_op_end(&op, 0);
		size = 0;
		goto out;
	}
	if (size > rec.size - off)
		size = (size_t)(rec.size - off);
	end = off + size;
	need_atime = !vol->no_atime &&
		     (rec.atime_ns <= rec.mtime_ns || rec.atime_ns <= rec.ctime_ns ||
		      csdfs_now_ns() - rec.atime_ns > NS_PER_DAY);
	cs = rec.chunk_size ? rec.chunk_size : vol->sb.chunk_size;
	first = off / cs;
	last = (end - 1) / cs;
	n = last - first + 1;
	if (n <= READ_SMALL) {
		recs = recs_small;
		have = memset(have_small, 0, sizeof(have_small));
	} else {
		recs = malloc(n * sizeof(*recs));
		have = calloc(n, sizeof(*have));
	}
	if (!recs || !have) {
		csdfs_op_end(&op, 0);
		rc = -ENOMEM;
		goto out;
	}
	{
		struct csdfs_cursor *cur;
		struct csdfs_val k, v;
		uint8_t key[16];

		rc = csdfs_cursor_open(op.txn, CSDFS_DB_CHUNKS, &cur);
		if (!rc) {
			csdfs_chunk_key(key, ino, first);
			for (rc = csdfs_cursor_seek(cur, key, 16, &k, &v); !rc;
			     rc = csdfs_cursor_next(cur, &k, &v)) {
				uint64_t idx;

				if (k.len != 16 || csdfs_be64_get(k.data) != ino)
					break;
				idx = csdfs_be64_get((const uint8_t *)k.data + 8);
				if (idx > last)
					break;
				rc = csdfs_rec_chunk_decode(&v, &recs[idx - first]);
				if (rc)
					break;
				have[idx - first] = true;
			}
			if (rc == -ENOENT)
				rc = 0;
			csdfs_cursor_close(cur);
		}
	}
	csdfs_op_end(&op, 0);
	if (rc)
		goto out;
	/* Room for the stored bytes of every chunk asked for, up to one span
	 * (a page-sized read touches no more of its buffer than that). */
	span_cap = n * csdfs_codec_bound(cs) < READ_SPAN_MAX ?
		   n * csdfs_codec_bound(cs) : READ_SPAN_MAX;
	if (span_cap < csdfs_codec_bound(cs))
		span_cap = csdfs_codec_bound(cs);
	/* From the pool (bufpool.h): aligned for a direct read, with room to
	 * round the run out. */
	scratch = csdfs_bufpool_get(span_cap + SPAN_SLACK);
	if (!scratch) {
		rc = -ENOMEM;
		goto out;
	}
	for (uint64_t i = 0; i < n && !rc; i++) {
		uint64_t cstart = (first + i) * cs;
		uint64_t s = off > cstart ? off : cstart;
		uint64_t e = end < cstart + cs ? end : cstart + cs;
		char *out = buf + (s - off);

		if (!have[i]) {
			memset(out, 0, e - s);
			continue;
		}
		if (s == cstart && e == cstart + cs) {
			/* Whole chunks wanted: decode straight into the reply,
			 * with one read for a run of chunks stored back to back. */
			uint64_t got = read_whole_run(vol, cs, recs + i, have + i, n - i,
						      buf + (cstart - off), end - cstart,
						      scratch, span_cap);

			if (got) {
				i += got - 1;
				continue;
			}
			rc = csdfs_read_chunk(vol, ino, first + i, cs, &recs[i], out, scratch, false);
		} else {
			uint64_t cend = cstart + cs < rec.size ? cstart + cs : rec.size;

			/* A part of a chunk: decoded whole, then copied. */
			if (!tmp && !(tmp = csdfs_bufpool_get(cs))) {
				rc = -ENOMEM;
				break;
			}
			rc = csdfs_read_chunk(vol, ino, first + i, cs, &recs[i], tmp, scratch, true);
			if (!rc)
				memcpy(out, tmp + (s - cstart), e - s);
			if (!rc && around && cstart < s &&
			    around(arg, gen, cstart, tmp, s - cstart))
				around = NULL;
			if (!rc && around && e < cend &&
			    around(arg, gen, e, tmp + (e - cstart), cend - e))
				around = NULL;
		}
	}
out:
	pthread_rwlock_unlock(&in->io_lock);
	if (recs != recs_small) {
		free(recs);
		free(have);
	}
	csdfs_bufpool_put(tmp, cs);
	csdfs_bufpool_put(scratch, span_cap + SPAN_SLACK);
	if (!rc && size && need_atime)
		touch_atime(vol, ino);
	csdfs_inode_put(vol, in);
	return rc ? rc : (ssize_t)size;
}

int csdfs_fs_lseek(struct csdfs_vol *vol, uint64_t ino, uint64_t off,
		   int whence, uint64_t *res)
{
	struct csdfs_inode_disk rec;
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	struct csdfs_op op;
	uint8_t key[16];
	uint64_t idx, want;
	uint32_t cs;
	int rc;

	if (whence != SEEK_DATA && whence != SEEK_HOLE)
		return -EINVAL;
	rc = csdfs_op_begin_read(vol, &op);
	if (rc)
		return rc;
	rc = csdfs_irec_load(op.txn, ino, &rec);
	if (rc)
		return csdfs_op_end(&op, rc);
	if (off >= rec.size)
		return csdfs_op_end(&op, -ENXIO);
	cs = rec.chunk_size ? rec.chunk_size : vol->sb.chunk_size;
	want = off / cs;
	rc = csdfs_cursor_open(op.txn, CSDFS_DB_CHUNKS, &cur);
	if (rc)
		return csdfs_op_end(&op, rc);
	csdfs_chunk_key(key, ino, want);
	rc = csdfs_cursor_seek(cur, key, 16, &k, &v);
	if (whence == SEEK_DATA) {
		if (rc == -ENOENT || (!rc && csdfs_be64_get(k.data) != ino)) {
			rc = -ENXIO;
		} else if (!rc) {
			idx = csdfs_be64_get((const uint8_t *)k.data + 8);
			*res = idx * cs > off ? idx * cs : off;
			if (*res >= rec.size)
				rc = -ENXIO;
		}
	} else {
		/* First chunk index >= want that is not mapped. */
		idx = want;
		while (!rc && csdfs_be64_get(k.data) == ino &&
		       csdfs_be64_get((const uint8_t *)k.data + 8) == idx) {
			idx++;
			rc = csdfs_cursor_next(cur, &k, &v);
		}
		if (rc == -ENOENT)
			rc = 0;
		if (!rc) {
			*res = idx * cs > off ? idx * cs : off;
			if (*res > rec.size)
				*res = rec.size;
		}
	}
	csdfs_cursor_close(cur);
	return csdfs_op_end(&op, rc);
}

/* ---- the chunk-size histogram -------------------------------------------- */

int csdfs_fs_histogram(struct csdfs_vol *vol, uint64_t ino,
		       struct csdfs_histogram *h)
{
	struct csdfs_inode_disk rec;
	struct csdfs_chunk_disk c;
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	struct csdfs_op op;
	uint64_t nchunks, seen = 0;
	uint8_t key[16];
	int rc;

	memset(h, 0, sizeof(*h));
	rc = csdfs_op_begin_read(vol, &op);
	if (rc)
		return rc;
	rc = csdfs_irec_load(op.txn, ino, &rec);
	if (!rc && !S_ISREG(rec.mode))
		rc = -ENODATA;
	if (rc)
		return csdfs_op_end(&op, rc);
	h->chunk_size = rec.chunk_size ? rec.chunk_size : vol->sb.chunk_size;
	nchunks = (rec.size + h->chunk_size - 1) / h->chunk_size;
	rc = csdfs_cursor_open(op.txn, CSDFS_DB_CHUNKS, &cur);
	if (rc)
		return csdfs_op_end(&op, rc);
	csdfs_chunk_key(key, ino, 0);
	for (rc = csdfs_cursor_seek(cur, key, 16, &k, &v); !rc;
	     rc = csdfs_cursor_next(cur, &k, &v)) {
		if (k.len != 16 || csdfs_be64_get(k.data) != ino ||
		    csdfs_be64_get((const uint8_t *)k.data + 8) >= nchunks)
			break;
		rc = csdfs_rec_chunk_decode(&v, &c);
		if (rc)
			break;
		seen++;
		if (c.codec == CSDFS_CODEC_NONE)
			h->raw++;
		else if (c.plen)
			h->stored[(c.plen - 1) / CSDFS_BLOCK_SIZE < CSDFS_HIST_BUCKETS ?
				  (c.plen - 1) / CSDFS_BLOCK_SIZE : CSDFS_HIST_BUCKETS - 1]++;
	}
	csdfs_cursor_close(cur);
	if (rc == -ENOENT)
		rc = 0;
	h->zero = nchunks > seen ? nchunks - seen : 0;
	return csdfs_op_end(&op, rc);
}
