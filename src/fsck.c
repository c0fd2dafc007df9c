/* SPDX-License-Identifier: MIT */
/*
 * Offline consistency check (csdfs-fsck), the test oracle: one function per
 * invariant of the schema in meta_lmdb.c (SPEC G4). Every problem is logged
 * with what and where; --repair fixes only what cannot lose data (leaked
 * blocks back to the free map, unrecorded orphans, counters and directory
 * roll-ups, which are sums of other records) and explains the rest.
 *
 * Longer than the ~700 lines a core file keeps to, on purpose: every check
 * reads and fills the one walk state (struct fsck: which blocks are used,
 * the expected sums per directory) that the repair at the end writes back,
 * and a reader of one invariant should find the others beside it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "csdfs/csum.h"
#include "csdfs/log.h"
#include "vol.h"

#define FSCK_OK        0
#define FSCK_CORRECTED 1
#define FSCK_ERRORS    4
#define FSCK_OPERROR   8

struct fsck {
	struct csdfs_vol *vol;
	struct csdfs_txn *txn;
	const struct csdfs_fsck_opts *opts;
	uint64_t total;
	uint8_t *charge;           /* per block: chunks charged for it */
	uint8_t *used;             /* per block: 1 if a live chunk overlaps */
	uint8_t *isfree;           /* per block: 1 if in the free map */
	uint64_t *targets;         /* dirent targets, for link counts */
	size_t ntargets, captargets;
	struct csdfs_counters_disk sum;
	unsigned errors, fixable_leaks, fixable_orphans, counters_bad;
	unsigned hints_bad;        /* compaction hint pages malformed (fixable) */
	unsigned bad_chunks;       /* --verify-data: chunks that do not verify */
	struct node *nodes;        /* every inode, ascending ino */
	size_t nnodes, capnodes;
};

/* What the roll-up check needs of each inode. */
struct node {
	uint64_t ino, parent;
	uint32_t mode, nlink;
	struct csdfs_rollup_disk own;      /* a file's contribution */
	struct csdfs_rollup_disk expect;   /* a directory's expected roll-up */
};

#define BAD_CHUNKS_LISTED 20u

#define PROBLEM(f, ...) do { (f)->errors++; csdfs_log(LOG_ERR, __VA_ARGS__); } while (0)

static int check_free(struct fsck *f)
{
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	uint64_t prev_end = 0;
	int rc;

	rc = csdfs_cursor_open(f->txn, CSDFS_DB_FREE, &cur);
	if (rc)
		return rc;
	for (rc = csdfs_cursor_first(cur, &k, &v); !rc; rc = csdfs_cursor_next(cur, &k, &v)) {
		uint64_t s, n;

		if (csdfs_freemap_decode(&k, &v, &s, &n)) {
			PROBLEM(f, "free map: malformed record");
			continue;
		}
		if (s < CSDFS_FIRST_DATA_BLOCK || s + n > f->total || s + n < s) {
			PROBLEM(f, "free map: run %llu+%llu outside the data area",
				(unsigned long long)s, (unsigned long long)n);
			continue;
		}
		if (prev_end && s == prev_end)
			csdfs_log(LOG_WARNING, "free map: runs not coalesced at block %llu",
				  (unsigned long long)s);
		prev_end = s + n;
		for (uint64_t b = s; b < s + n; b++)
			f->isfree[b] = 1;
	}
	csdfs_cursor_close(cur);
	return rc == -ENOENT ? 0 : rc;
}

static int check_phys(struct fsck *f)
{
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	uint64_t prev_end = 0;
	int rc;

	rc = csdfs_cursor_open(f->txn, CSDFS_DB_PHYS, &cur);
	if (rc)
		return rc;
	for (rc = csdfs_cursor_first(cur, &k, &v); !rc; rc = csdfs_cursor_next(cur, &k, &v)) {
		struct csdfs_phys_disk p;
		struct csdfs_chunk_disk c;
		uint64_t pa;
		int grc;

		if (k.len != 8 || csdfs_rec_phys_decode(&v, &p)) {
			PROBLEM(f, "phys map: malformed record");
			continue;
		}
		pa = csdfs_be64_get(k.data);
		if (!p.plen || pa < (uint64_t)CSDFS_FIRST_DATA_BLOCK * CSDFS_BLOCK_SIZE ||
		    pa + p.plen > f->total * CSDFS_BLOCK_SIZE) {
			PROBLEM(f, "phys map: range %llu+%u outside the data area",
				(unsigned long long)pa, p.plen);
			continue;
		}
		if (pa < prev_end)
			PROBLEM(f, "phys map: range at byte %llu overlaps the previous one",
				(unsigned long long)pa);
		prev_end = pa + p.plen;
		grc = csdfs_chunk_get(f->txn, p.ino, p.chunk, &c);
		if (grc || c.pa != pa || c.plen != p.plen)
			PROBLEM(f, "phys map: byte %llu claims inode %llu chunk %llu, which does not point back",
				(unsigned long long)pa, (unsigned long long)p.ino,
				(unsigned long long)p.chunk);
		for (uint64_t b = pa / CSDFS_BLOCK_SIZE; b <= (pa + p.plen - 1) / CSDFS_BLOCK_SIZE; b++)
			f->used[b] = 1;
	}
	csdfs_cursor_close(cur);
	return rc == -ENOENT ? 0 : rc;
}

static void charge_chunk(struct fsck *f, const struct csdfs_chunk_disk *c,
			 uint64_t *blocks)
{
	uint64_t bs = c->pa / CSDFS_BLOCK_SIZE, be = (c->pa + c->plen - 1) / CSDFS_BLOCK_SIZE;

	for (uint64_t b = bs; b <= be && b < f->total; b++) {
		bool mine = (b > bs && b < be) ||
			    (b == bs && (c->flags & CSDFS_CHUNK_CHARGE_FIRST)) ||
			    (b == be && b != bs && (c->flags & CSDFS_CHUNK_CHARGE_LAST));

		if (mine) {
			if (f->charge[b] < 255)
				f->charge[b]++;
			(*blocks)++;
		}
	}
}

static int verify_data(struct fsck *f, uint64_t ino, uint64_t idx, uint32_t cs,
		       const struct csdfs_chunk_disk *c)
{
	char *stored = malloc(c->plen), *out = malloc(cs);
	int rc = -ENOMEM;

	if (stored && out) {
		rc = csdfs_io_pread(&f->vol->io, stored, c->plen, c->pa);
		if (!rc && csdfs_crc32c(0, stored, c->plen) != c->csum)
			rc = -EUCLEAN;
		if (!rc)
			rc = csdfs_codec_decompress(c->codec, stored, c->plen, out, c->llen);
		/* A damaged container can hold millions: the first few say
		 * where, report_bad_chunks() the count. */
		if (rc && f->bad_chunks++ < BAD_CHUNKS_LISTED)
			PROBLEM(f, "data: inode %llu offset %llu does not verify (%s)",
				(unsigned long long)ino, (unsigned long long)(idx * cs),
				rc == -EUCLEAN ? "checksum or decode failure" : strerror(-rc));
		else if (rc)
			f->errors++;
	}
	free(stored);
	free(out);
	return 0;
}

static void report_bad_chunks(const struct fsck *f)
{
	if (f->bad_chunks > BAD_CHUNKS_LISTED)
		csdfs_log(LOG_ERR, "data: ... and %u more bad chunks (%u in all)",
			  f->bad_chunks - BAD_CHUNKS_LISTED, f->bad_chunks);
	else if (f->bad_chunks)
		csdfs_log(LOG_ERR, "data: %u bad chunk%s in all", f->bad_chunks,
			  f->bad_chunks == 1 ? "" : "s");
}

/* Inodes and their chunks together: both are keyed by ino first. */
static int check_inode(struct fsck *f, uint64_t ino, const struct csdfs_inode_disk *rec)
{
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	uint8_t key[16];
	uint64_t blocks = 0, stored = 0, mapped = 0, chunks = 0, raw = 0;
	uint32_t cs = rec->chunk_size;
	int rc;

	f->sum.inodes++;
	if (S_ISREG(rec->mode) && (cs < CSDFS_CHUNK_MIN || cs > CSDFS_CHUNK_MAX))
		PROBLEM(f, "inode %llu: bad chunk size %u", (unsigned long long)ino, cs);
	if (!cs)
		cs = CSDFS_CHUNK_DEFAULT;
	rc = csdfs_cursor_open(f->txn, CSDFS_DB_CHUNKS, &cur);
	if (rc)
		return rc;
	csdfs_chunk_key(key, ino, 0);
	for (rc = csdfs_cursor_seek(cur, key, 16, &k, &v); !rc; rc = csdfs_cursor_next(cur, &k, &v)) {
		struct csdfs_chunk_disk c;
		uint64_t idx;

		if (k.len != 16 || csdfs_be64_get(k.data) != ino)
			break;
		idx = csdfs_be64_get((const uint8_t *)k.data + 8);
		if (csdfs_rec_chunk_decode(&v, &c)) {
			PROBLEM(f, "inode %llu chunk %llu: malformed record",
				(unsigned long long)ino, (unsigned long long)idx);
			continue;
		}
		if (!S_ISREG(rec->mode))
			PROBLEM(f, "inode %llu: chunks on a non-regular file", (unsigned long long)ino);
		if (!c.llen || c.llen > cs || idx * cs + c.llen > rec->size)
			PROBLEM(f, "inode %llu chunk %llu: length %u beyond size %llu",
				(unsigned long long)ino, (unsigned long long)idx, c.llen,
				(unsigned long long)rec->size);
		if (c.codec >= CSDFS_CODEC_COUNT)
			PROBLEM(f, "inode %llu chunk %llu: unknown codec %u",
				(unsigned long long)ino, (unsigned long long)idx, c.codec);
		if (!c.plen || c.pa / CSDFS_BLOCK_SIZE < CSDFS_FIRST_DATA_BLOCK ||
		    (c.pa + c.plen + CSDFS_BLOCK_SIZE - 1) / CSDFS_BLOCK_SIZE > f->total) {
			PROBLEM(f, "inode %llu chunk %llu: extent out of bounds",
				(unsigned long long)ino, (unsigned long long)idx);
			continue;
		}
		{
			uint8_t pk[8];
			struct csdfs_phys_disk p;

			csdfs_be64_put(pk, c.pa);
			if (csdfs_rec_phys_get(f->txn, CSDFS_DB_PHYS, pk, 8, &p) ||
			    p.ino != ino || p.chunk != idx)
				PROBLEM(f, "inode %llu chunk %llu: no matching phys entry",
					(unsigned long long)ino, (unsigned long long)idx);
		}
		charge_chunk(f, &c, &blocks);
		stored += c.plen;
		mapped += c.llen;
		f->sum.logical_used += cs;
		chunks++;
		if (c.codec == CSDFS_CODEC_NONE)
			raw++;
		if (f->opts->verify_data)
			verify_data(f, ino, idx, cs, &c);
	}
	csdfs_cursor_close(cur);
	if (rc && rc != -ENOENT)
		return rc;
	if (blocks != rec->phys_blocks || stored != rec->stored_bytes ||
	    mapped != rec->mapped_bytes || chunks != rec->stored_chunks ||
	    raw != rec->raw_chunks)
		PROBLEM(f, "inode %llu: accounting differs from its chunks (blocks %llu vs %llu, stored %llu vs %llu)",
			(unsigned long long)ino, (unsigned long long)rec->phys_blocks,
			(unsigned long long)blocks, (unsigned long long)rec->stored_bytes,
			(unsigned long long)stored);
	f->sum.stored_bytes += stored;
	f->sum.mapped_bytes += mapped;
	f->sum.stored_chunks += chunks;
	f->sum.raw_chunks += raw;
	return 0;
}

static int add_target(struct fsck *f, uint64_t ino)
{
	if (f->ntargets == f->captargets) {
		size_t cap = f->captargets ? f->captargets * 2 : 1024;
		uint64_t *t = realloc(f->targets, cap * sizeof(*t));

		if (!t)
			return -ENOMEM;
		f->targets = t;
		f->captargets = cap;
	}
	f->targets[f->ntargets++] = ino;
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Records keyed by an inode (xattrs, symlinks, orphans, roll-ups, codec
 * mix) must belong to a live inode of the right kind. */
static int check_owned(struct fsck *f, enum csdfs_db db, const char *what)
{
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	int rc;

	rc = csdfs_cursor_open(f->txn, db, &cur);
	if (rc)
		return rc;
	for (rc = csdfs_cursor_first(cur, &k, &v); !rc; rc = csdfs_cursor_next(cur, &k, &v)) {
		struct csdfs_inode_disk rec;
		uint64_t ino;

		if (k.len < 8) {
			PROBLEM(f, "%s: malformed key", what);
			continue;
		}
		ino = csdfs_be64_get(k.data);
		if (csdfs_irec_load(f->txn, ino, &rec)) {
			PROBLEM(f, "%s record for missing inode %llu", what,
				(unsigned long long)ino);
			continue;
		}
		if (db == CSDFS_DB_SYMLINKS && !S_ISLNK(rec.mode))
			PROBLEM(f, "symlink target stored for non-symlink inode %llu",
				(unsigned long long)ino);
		if (db == CSDFS_DB_ORPHANS && rec.nlink)
			PROBLEM(f, "inode %llu is recorded as an orphan but has %u links",
				(unsigned long long)ino, rec.nlink);
		if (db == CSDFS_DB_ROLLUP && !S_ISDIR(rec.mode))
			PROBLEM(f, "roll-up stored for non-directory inode %llu",
				(unsigned long long)ino);
	}
	csdfs_cursor_close(cur);
	return rc == -ENOENT ? 0 : rc;
}

static int check_symlink_targets(struct fsck *f)
{
	for (size_t i = 0; i < f->nnodes; i++) {
		struct csdfs_val v;
		uint8_t key[8];

		if (!S_ISLNK(f->nodes[i].mode))
			continue;
		csdfs_be64_put(key, f->nodes[i].ino);
		if (csdfs_meta_get(f->txn, CSDFS_DB_SYMLINKS, key, 8, &v))
			PROBLEM(f, "symlink inode %llu has no target",
				(unsigned long long)f->nodes[i].ino);
	}
	return 0;
}

static int check_dirents(struct fsck *f)
{
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	int rc;

	rc = csdfs_cursor_open(f->txn, CSDFS_DB_DIRENTS, &cur);
	if (rc)
		return rc;
	for (rc = csdfs_cursor_first(cur, &k, &v); !rc; rc = csdfs_cursor_next(cur, &k, &v)) {
		struct csdfs_inode_disk p, t;
		struct csdfs_dirent_disk d;
		uint64_t parent;

		if (k.len <= 8 || csdfs_rec_dirent_decode(&v, &d)) {
			PROBLEM(f, "dirent: malformed record");
			continue;
		}
		parent = csdfs_be64_get(k.data);
		if (csdfs_irec_load(f->txn, parent, &p) || !S_ISDIR(p.mode))
			PROBLEM(f, "dirent '%.*s': parent %llu is not a live directory",
				(int)(k.len - 8), (const char *)k.data + 8,
				(unsigned long long)parent);
		if (csdfs_irec_load(f->txn, d.ino, &t)) {
			PROBLEM(f, "dirent '%.*s' in %llu points at missing inode %llu",
				(int)(k.len - 8), (const char *)k.data + 8,
				(unsigned long long)parent, (unsigned long long)d.ino);
			continue;
		}
		if ((t.mode & S_IFMT) != d.type)
			PROBLEM(f, "dirent '%.*s': type differs from inode %llu",
				(int)(k.len - 8), (const char *)k.data + 8,
				(unsigned long long)d.ino);
		rc = add_target(f, d.ino);
		if (rc)
			break;
		if (S_ISDIR(t.mode))
			rc = add_target(f, parent);  /* a subdir's ".." */
		if (rc)
			break;
	}
	csdfs_cursor_close(cur);
	if (rc && rc != -ENOENT)
		return rc;
	if (f->ntargets)
		qsort(f->targets, f->ntargets, sizeof(*f->targets), cmp_u64);
	return 0;
}

static uint64_t links_to(struct fsck *f, uint64_t ino)
{
	size_t lo = 0, hi = f->ntargets, n = 0;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (f->targets[mid] < ino)
			lo = mid + 1;
		else
			hi = mid;
	}
	while (lo + n < f->ntargets && f->targets[lo + n] == ino)
		n++;
	return n;
}

static int add_node(struct fsck *f, uint64_t ino, const struct csdfs_inode_disk *rec)
{
	struct node *n;

	if (f->nnodes == f->capnodes) {
		size_t cap = f->capnodes ? f->capnodes * 2 : 1024;
		struct node *p = realloc(f->nodes, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		f->nodes = p;
		f->capnodes = cap;
	}
	n = &f->nodes[f->nnodes++];
	memset(n, 0, sizeof(*n));
	n->ino = ino;
	n->parent = rec->parent;
	n->mode = rec->mode;
	n->nlink = rec->nlink;
	if (S_ISREG(rec->mode)) {
		n->own.logical = rec->size;
		n->own.phys_blocks = rec->phys_blocks;
		n->own.stored_bytes = rec->stored_bytes;
		n->own.mapped_bytes = rec->mapped_bytes;
		n->own.raw_bytes = rec->raw_bytes;
		n->own.stored_chunks = rec->stored_chunks;
		n->own.files = 1;
	}
	return 0;
}

static struct node *find_node(struct fsck *f, uint64_t ino)
{
	size_t lo = 0, hi = f->nnodes;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;

		if (f->nodes[mid].ino < ino)
			lo = mid + 1;
		else if (f->nodes[mid].ino > ino)
			hi = mid;
		else
			return &f->nodes[mid];
	}
	return NULL;
}

static void rollup_add(struct csdfs_rollup_disk *r, const struct csdfs_rollup_disk *d)
{
	r->logical += d->logical;
	r->phys_blocks += d->phys_blocks;
	r->stored_bytes += d->stored_bytes;
	r->mapped_bytes += d->mapped_bytes;
	r->raw_bytes += d->raw_bytes;
	r->stored_chunks += d->stored_chunks;
	r->files += d->files;
}

/* Every directory's roll-up must equal the sum over the files attached
 * beneath it (rollup.c keeps it so incrementally). */
static int check_rollups(struct fsck *f)
{
	for (size_t i = 0; i < f->nnodes; i++) {
		struct node *n = &f->nodes[i];
		uint64_t d = n->parent;

		if (!S_ISREG(n->mode) || !n->nlink || !d)
			continue;
		for (int depth = 0; d && depth < 4096; depth++) {
			struct node *p = find_node(f, d);

			if (!p || !S_ISDIR(p->mode))
				break;
			rollup_add(&p->expect, &n->own);
			if (d == CSDFS_ROOT_INO || p->parent == d)
				break;
			d = p->parent;
		}
	}
	for (size_t i = 0; i < f->nnodes; i++) {
		struct node *n = &f->nodes[i];
		struct csdfs_rollup_disk have;
		int rc;

		if (!S_ISDIR(n->mode))
			continue;
		rc = csdfs_rollup_get(f->txn, n->ino, &have);
		if (rc)
			return rc;
		if (memcmp(&have, &n->expect, sizeof(have))) {
			PROBLEM(f, "directory %llu: roll-up differs from its subtree (logical %llu vs %llu, blocks %llu vs %llu, files %llu vs %llu)",
				(unsigned long long)n->ino, (unsigned long long)have.logical,
				(unsigned long long)n->expect.logical,
				(unsigned long long)have.phys_blocks,
				(unsigned long long)n->expect.phys_blocks,
				(unsigned long long)have.files,
				(unsigned long long)n->expect.files);
			f->counters_bad++;
		}
	}
	return 0;
}

static int check_inodes(struct fsck *f)
{
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	int rc;

	rc = csdfs_cursor_open(f->txn, CSDFS_DB_INODES, &cur);
	if (rc)
		return rc;
	for (rc = csdfs_cursor_first(cur, &k, &v); !rc; rc = csdfs_cursor_next(cur, &k, &v)) {
		struct csdfs_inode_disk rec;
		uint64_t ino, want;
		struct csdfs_val ov;
		uint8_t key[8];

		if (k.len != 8 || csdfs_rec_inode_decode(&v, &rec)) {
			PROBLEM(f, "inode: malformed record");
			continue;
		}
		ino = csdfs_be64_get(k.data);
		want = links_to(f, ino);
		if (S_ISDIR(rec.mode) && rec.nlink)
			want += ino == CSDFS_ROOT_INO ? 2 : 1;  /* ".", and root's ".." */
		if (rec.nlink != want)
			PROBLEM(f, "inode %llu: link count %u, but %llu links found",
				(unsigned long long)ino, rec.nlink, (unsigned long long)want);
		csdfs_be64_put(key, ino);
		if (!rec.nlink && csdfs_meta_get(f->txn, CSDFS_DB_ORPHANS, key, 8, &ov)) {
			PROBLEM(f, "inode %llu: unlinked but not recorded as an orphan",
				(unsigned long long)ino);
			f->fixable_orphans++;
		}
		rc = check_inode(f, ino, &rec);
		if (!rc)
			rc = add_node(f, ino, &rec);
		if (rc)
			break;
	}
	csdfs_cursor_close(cur);
	return rc == -ENOENT ? 0 : rc;
}

/* The journal's region is in use by the volume itself (journal.c). */
static void check_journal(struct fsck *f)
{
	uint64_t start, blocks;
	int rc = csdfs_journal_region(f->txn, &start, &blocks);

	if (rc == -ENOENT)
		return;
	if (rc || start < CSDFS_FIRST_DATA_BLOCK || !blocks || start + blocks > f->total ||
	    start + blocks < start) {
		PROBLEM(f, "journal region is malformed or outside the data area");
		return;
	}
	for (uint64_t b = start; b < start + blocks; b++) {
		if (f->used[b] || f->charge[b])
			PROBLEM(f, "block %llu is in the journal and holds data",
				(unsigned long long)b);
		f->used[b] = 2;
		f->charge[b] = 1;
	}
}

/* The compaction hints only say where to look for dead bytes, but a
 * malformed page makes every mount scan the whole volume again. */
static void check_hints(struct fsck *f)
{
	struct csdfs_chint h;
	int rc = csdfs_chint_init(&h, f->total);

	if (!rc)
		rc = csdfs_chint_load(&h, f->txn);
	if (rc == -EUCLEAN) {
		PROBLEM(f, "compaction hints are malformed (no data depends on them; repair rewrites them)");
		f->hints_bad = 1;
	} else if (rc) {
		PROBLEM(f, "cannot read the compaction hints: %s", strerror(-rc));
	}
	csdfs_chint_release(&h);
}

static void check_blocks(struct fsck *f)
{
	for (uint64_t b = CSDFS_FIRST_DATA_BLOCK; b < f->total; b++) {
		if (f->used[b] && f->isfree[b])
			PROBLEM(f, "block %llu is both free and in use", (unsigned long long)b);
		else if (!f->used[b] && !f->isfree[b]) {
			PROBLEM(f, "block %llu is leaked (neither free nor in use)",
				(unsigned long long)b);
			f->fixable_leaks++;
		}
		if (f->used[b] && f->charge[b] != 1)
			PROBLEM(f, "block %llu is charged to %u chunks (must be 1)",
				(unsigned long long)b, f->charge[b]);
		if (!f->used[b] && f->charge[b])
			PROBLEM(f, "block %llu is charged but unused", (unsigned long long)b);
		if (f->used[b] == 1)    /* 2: the journal's */
			f->sum.used_blocks++;
	}
}

static void check_counters(struct fsck *f)
{
	const struct csdfs_counters_disk *c = &f->vol->counters;

	if (c->stored_bytes != f->sum.stored_bytes || c->mapped_bytes != f->sum.mapped_bytes ||
	    c->stored_chunks != f->sum.stored_chunks || c->raw_chunks != f->sum.raw_chunks ||
	    c->inodes != f->sum.inodes || c->logical_used != f->sum.logical_used) {
		PROBLEM(f, "volume counters differ from the sums of the inodes");
		f->counters_bad++;
	}
	/* Dead space (used blocks' bytes no chunk stores) is what compaction
	 * goes by: used_blocks must be the blocks in use. */
	if (c->used_blocks != f->sum.used_blocks) {
		PROBLEM(f, "volume counters say %llu blocks are used, the chunks use %llu",
			(unsigned long long)c->used_blocks,
			(unsigned long long)f->sum.used_blocks);
		f->counters_bad++;
	}
	if (c->compact_chunks > c->compact_bytes_written) {
		PROBLEM(f, "compaction counters disagree: %llu chunks moved in %llu bytes",
			(unsigned long long)c->compact_chunks,
			(unsigned long long)c->compact_bytes_written);
		f->counters_bad++;
	}
}

static int repair(struct fsck *f)
{
	struct csdfs_txn *txn = f->vol->group;
	int rc = 0;

	for (uint64_t b = CSDFS_FIRST_DATA_BLOCK; b < f->total && !rc; b++)
		if (!f->used[b] && !f->isfree[b])
			rc = csdfs_freemap_give(txn, b, 1);
	if (!rc && f->fixable_orphans) {
		struct csdfs_cursor *cur;
		struct csdfs_val k, v;

		rc = csdfs_cursor_open(txn, CSDFS_DB_INODES, &cur);
		for (int r = rc ? rc : csdfs_cursor_first(cur, &k, &v); !rc && !r;
		     r = csdfs_cursor_next(cur, &k, &v)) {
			struct csdfs_inode_disk rec;

			/* Malformed records were reported, not repaired. */
			if (k.len == 8 && !csdfs_rec_inode_decode(&v, &rec) && !rec.nlink)
				rc = csdfs_meta_put(txn, CSDFS_DB_ORPHANS, k.data, 8, "", 0, 0);
		}
		csdfs_cursor_close(cur);
	}
	for (size_t i = 0; i < f->nnodes && !rc; i++) {
		static const struct csdfs_rollup_disk zero;
		struct node *n = &f->nodes[i];
		uint8_t key[8];

		if (!S_ISDIR(n->mode))
			continue;
		csdfs_be64_put(key, n->ino);
		if (!memcmp(&n->expect, &zero, sizeof(zero))) {
			rc = csdfs_meta_del(txn, CSDFS_DB_ROLLUP, key, 8);
			rc = rc == -ENOENT ? 0 : rc;
		} else {
			rc = csdfs_rec_rollup_put(txn, CSDFS_DB_ROLLUP, key, 8, &n->expect, 0);
		}
	}
	if (!rc) {
		struct csdfs_counters_disk c = f->vol->counters;

		c.stored_bytes = f->sum.stored_bytes;
		c.mapped_bytes = f->sum.mapped_bytes;
		c.stored_chunks = f->sum.stored_chunks;
		c.raw_chunks = f->sum.raw_chunks;
		c.inodes = f->sum.inodes;
		c.logical_used = f->sum.logical_used;
		c.used_blocks = f->sum.used_blocks;
		rc = csdfs_rec_counters_put(txn, CSDFS_DB_META, "counters", 8, &c, 0);
	}
	/* Malformed: the open set every region; store them so. */
	if (!rc && f->hints_bad)
		rc = csdfs_chint_store(&f->vol->chint, txn, true);
	if (!rc)
		rc = csdfs_meta_commit(txn);
	else
		csdfs_meta_abort(txn);
	f->vol->group = NULL;
	return rc;
}

int csdfs_fsck(const char *path, const struct csdfs_fsck_opts *opts)
{
	struct csdfs_mount_opts mo = { .read_only = true, .no_commit_thread = true };
	struct fsck f;
	char err[512];
	int rc, result;

	memset(&f, 0, sizeof(f));
	f.opts = opts;
	rc = csdfs_vol_open(path, &mo, &f.vol, err, sizeof(err));
	if (rc) {
		csdfs_log(LOG_ERR, "%s", err);
		return FSCK_OPERROR;
	}
	f.txn = f.vol->group;
	f.total = f.vol->sb.total_blocks;
	f.charge = calloc(f.total, 1);
	f.used = calloc(f.total, 1);
	f.isfree = calloc(f.total, 1);
	if (!f.charge || !f.used || !f.isfree) {
		rc = -ENOMEM;
		goto out;
	}
	rc = check_free(&f);
	if (!rc)
		rc = check_phys(&f);
	if (!rc)
		rc = check_dirents(&f);
	if (!rc)
		rc = check_inodes(&f);
	if (rc)
		goto out;
	rc = check_rollups(&f);
	if (!rc)
		rc = check_owned(&f, CSDFS_DB_XATTRS, "xattr");
	if (!rc)
		rc = check_owned(&f, CSDFS_DB_SYMLINKS, "symlink");
	if (!rc)
		rc = check_owned(&f, CSDFS_DB_ORPHANS, "orphan");
	if (!rc)
		rc = check_owned(&f, CSDFS_DB_ROLLUP, "roll-up");
	if (!rc)
		rc = check_owned(&f, CSDFS_DB_CODECMIX, "codec mix");
	if (!rc)
		rc = check_symlink_targets(&f);
	if (rc)
		goto out;
	report_bad_chunks(&f);
	check_journal(&f);
	check_hints(&f);
	check_blocks(&f);
	check_counters(&f);
	if (opts->verbose)
		csdfs_log(LOG_INFO, "checked %llu inodes, %llu chunks, %llu used blocks: %u problems",
			  (unsigned long long)f.sum.inodes, (unsigned long long)f.sum.stored_chunks,
			  (unsigned long long)f.sum.used_blocks, f.errors);
out:
	if (rc) {
		csdfs_log(LOG_ERR, "check aborted: %s", strerror(-rc));
		result = FSCK_OPERROR;
	} else if (!f.errors) {
		result = FSCK_OK;
	} else if (opts->repair && f.errors == f.fixable_leaks + f.fixable_orphans + f.counters_bad +
		   f.hints_bad) {
		rc = repair(&f);
		if (rc) {
			csdfs_log(LOG_ERR, "repair failed: %s", strerror(-rc));
			result = FSCK_ERRORS | FSCK_OPERROR;
		} else {
			csdfs_log(LOG_NOTICE, "repaired: %u leaked blocks freed, %u orphans recorded, counters rewritten",
				  f.fixable_leaks, f.fixable_orphans);
			result = FSCK_CORRECTED;
		}
	} else {
		if (opts->repair)
			csdfs_log(LOG_ERR, "not repairing: some problems cannot be fixed without risking data (only leaked blocks, orphans, counters and compaction hints are repaired)");
		result = FSCK_ERRORS;
	}
	free(f.charge);
	free(f.used);
	free(f.isfree);
	free(f.targets);
	free(f.nodes);
	csdfs_vol_close(f.vol);
	return result;
}
