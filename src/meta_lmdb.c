/* SPDX-License-Identifier: MIT */
/*
 * The only file that includes <lmdb.h>. It maps LMDB's error space onto
 * -errno and holds the canonical schema of the metadata store.
 *
 * Longer than the ~700 lines a core file keeps to, on purpose: it is the one
 * adapter to LMDB (STYLE: no MDB_* escapes it), so besides the thin
 * transaction and cursor calls it holds what running LMDB with MDB_NOSYNC
 * takes: the durability record and the rollback of LMDB's meta page to the
 * last recorded commit, which read LMDB's own page layout.
 *
 * SCHEMA (format version 1). Integers in keys are big-endian (BE64) so that
 * LMDB's byte order is numeric order; values are the little-endian packed
 * records of include/csdfs/format.h, encoded and decoded only by
 * src/record.c (superblock feature LE_RECORDS).
 *
 *  db        key                      value                       fsck check
 *  --------  -----------------------  --------------------------  -----------------
 *  meta      ASCII name               "uuid": 16 bytes, equal to  superblock binding
 *                                     the superblock's;
 *                                     "version": LE32;
 *                                     "next_ino": LE64 next free
 *                                     inode number (never reused);
 *                                     "counters": csdfs_counters_disk
 *                                                                 counters match sums
 *  inodes    ino BE64                 csdfs_inode_disk            nlink = dirents,
 *                                                                 sizes, block sums
 *  dirents   parent BE64 + name       csdfs_dirent_disk           target inode live,
 *            (name 1..255 bytes, no                               type matches
 *            NUL, not "." / "..")
 *  chunks    ino BE64 + index BE64    csdfs_chunk_disk            inode live, index <
 *                                                                 ceil(size/chunk),
 *                                                                 phys entry agrees
 *  phys      pa BE64 (byte offset)    csdfs_phys_disk: the chunk  ranges disjoint, in
 *                                     stored at [pa, pa + plen)   data area, not free
 *  free      block BE64 (first)       LE64 block count; runs are  no overlap with
 *                                     disjoint and never adjacent phys, union = all
 *                                     (always coalesced)          unused blocks
 *  xattrs    ino BE64 + name          raw value                   inode live
 *  symlinks  ino BE64                 target bytes (no NUL)       inode is S_IFLNK
 *  orphans   ino BE64                 empty: nlink is 0 but the   inode live, nlink 0
 *                                     inode was still open; freed
 *                                     at the next mount
 *  rollup    dir ino BE64             csdfs_rollup_disk: sums of  equals the sum of
 *                                     attached files beneath it   its children
 *  codecmix  ino BE64 + codec u8 +    LE64 logical bytes of that  file: equals its
 *            level i8                 codec (dirs: subtree sum)   chunks
 *
 * Sentinels: inode 1 is the root directory (its "parent" is itself); no
 * inode 0 exists; block numbers below CSDFS_FIRST_DATA_BLOCK never appear.
 */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lmdb.h>

#include "csdfs/csum.h"
#include "csdfs/io.h"
#include "csdfs/log.h"
#include "csdfs/meta.h"
#include "csdfs/pool.h"

static const char *const db_names[CSDFS_DB_COUNT] = {
	[CSDFS_DB_META] = "meta",
	[CSDFS_DB_INODES] = "inodes",
	[CSDFS_DB_DIRENTS] = "dirents",
	[CSDFS_DB_CHUNKS] = "chunks",
	[CSDFS_DB_PHYS] = "phys",
	[CSDFS_DB_FREE] = "free",
	[CSDFS_DB_XATTRS] = "xattrs",
	[CSDFS_DB_SYMLINKS] = "symlinks",
	[CSDFS_DB_ORPHANS] = "orphans",
	[CSDFS_DB_ROLLUP] = "rollup",
	[CSDFS_DB_CODECMIX] = "codecmix",
};

struct csdfs_meta {
	MDB_env *env;
	MDB_dbi dbi[CSDFS_DB_COUNT];
	/* All file I/O of this layer goes through the seam (io.h); ops NULL:
	 * not open. */
	struct csdfs_io record;    /* the durability record (SYNCED_FILE) */
	struct csdfs_io data;      /* LMDB's own descriptor on data.mdb, for
	                            * its sync (sync_part) */
	/* csdfs_meta_open's hook, applied to each csdfs_io above and to the
	 * rollback's (open only). */
	int (*io_hook)(struct csdfs_io *io, void *arg);
	void *io_hook_arg;
	pthread_mutex_t sync_lock; /* orders syncs and top-level commits */
	uint64_t committed;        /* sync_lock: last committed txn id */
	uint64_t durable;          /* sync_lock: last txn id recorded durable */
	/* What a commit needs durable besides data.mdb before the record
	 * may name it (csdfs_meta_set_companion); NULL: nothing. */
	int (*companion)(void *arg);
	void *companion_arg;
	size_t redo_limit;         /* csdfs_meta_set_redo: 0, no journal */
	uint64_t rebuilds;         /* SAVEPOINTS: root transactions rebuilt */
	/* The last group's redo buffer, kept for the next group (atomic
	 * exchange: taken at a top-level begin, given back at its end), so a
	 * group does not grow its buffer again by reallocations, each copying
	 * it and touching fresh pages. */
	struct csdfs_redo_spare {
		unsigned char *buf;
		size_t cap;
	} *redo_spare;
};

/* REDO. A top-level transaction can keep, in order, every change made in
 * it and in the nested transactions that committed into it (a nested one
 * writes straight into its root's buffer and an abort cuts the buffer back
 * to where it began): the volume's journal makes those bytes durable in
 * the container, so an fsync does not wait for LMDB's own sync. Entry:
 * u8 op, u8 db, LE16 key length, LE32 value length, key, value. */
struct csdfs_redo {
	unsigned char *buf;
	size_t len, cap;
	bool over;                 /* outgrew its keep limit: incomplete */
};

#define REDO_PUT 1
#define REDO_DEL 2
#define REDO_HDR 8
/* Redo is kept up to this much (or the journal's limit, if larger) for
 * SAVEPOINTS, journal or not. */
#define REDO_KEEP_MAX (8u << 20)
/* A buffer larger than this is freed at its group's end, not kept. */
#define REDO_SPARE_MAX (4u << 20)

/* Take the spare buffer for a new group's redo @r (nothing if none). */
static void redo_take_spare(struct csdfs_meta *meta, struct csdfs_redo *r)
{
	struct csdfs_redo_spare *s = __atomic_exchange_n(&meta->redo_spare, NULL, __ATOMIC_ACQ_REL);

	if (!s)
		return;
	r->buf = s->buf;
	r->cap = s->cap;
	free(s);
}

/* The group of @r ended: keep its buffer as the spare, or free it. */
static void redo_give_back(struct csdfs_meta *meta, struct csdfs_redo *r)
{
	struct csdfs_redo_spare *s = NULL;

	if (r->buf && r->cap <= REDO_SPARE_MAX && (s = malloc(sizeof(*s)))) {
		s->buf = r->buf;
		s->cap = r->cap;
		s = __atomic_exchange_n(&meta->redo_spare, s, __ATOMIC_ACQ_REL);
		if (s)
			free(s->buf);
		free(s);
	} else {
		free(r->buf);
	}
	r->buf = NULL;
	r->cap = r->len = 0;
}

/* SAVEPOINTS. A nested transaction whose root keeps a complete redo is a
 * savepoint: it has no LMDB transaction of its own but works in its root's,
 * and remembers where the root's redo stood when it began. Committing one
 * costs nothing; aborting one that changed something rebuilds the root: a
 * fresh LMDB transaction (the root is the only writer, so it begins on the
 * same snapshot) replays the redo up to the mark. LMDB's own nested
 * transactions cost 3 MiB of malloc and a copy of every page they touch,
 * per operation; aborts that changed something are rare (a full disk, an
 * I/O error mid-operation), so the replay is the cheaper trade. An error
 * that fails LMDB's transaction (MDB_MAP_FULL and the like) is undone the
 * same way, so it still fails only the operation that met it. Once the
 * root's redo is incomplete (it outgrew REDO_KEEP_MAX), nested
 * transactions are LMDB's again. */
struct csdfs_txn {
	struct csdfs_meta *meta;
	MDB_txn *txn;              /* a savepoint's is its root's: see mtxn() */
	bool top;                  /* not nested */
	bool savepoint;            /* nested without an LMDB transaction */
	struct csdfs_txn *root;    /* the top-level transaction (self if top) */
	size_t redo_mark;          /* nested: root's redo length at begin */
	/* top only: */
	struct csdfs_redo redo;
	bool journal;              /* a redo limit was set at begin */
	bool poisoned;             /* LMDB may have failed txn (MDB_TXN_ERROR) */
	int broken;                /* it did, and no rebuild could undo it */
};

struct csdfs_cursor {
	MDB_cursor *cur;
	struct csdfs_txn *txn;
	enum csdfs_db db;
};

/* LMDB's error space -> -errno (STYLE: translate at the adapter). */
static int mdb_err(int rc)
{
	switch (rc) {
	case MDB_SUCCESS:
		return 0;
	case MDB_NOTFOUND:
		return -ENOENT;
	case MDB_KEYEXIST:
		return -EEXIST;
	case MDB_MAP_FULL:
	case MDB_TXN_FULL:
	case MDB_CURSOR_FULL:
	case MDB_PAGE_FULL:
		return -ENOSPC;
	case MDB_CORRUPTED:
	case MDB_PAGE_NOTFOUND:
	case MDB_INVALID:
	case MDB_VERSION_MISMATCH:
	case MDB_INCOMPATIBLE:
	case MDB_BAD_DBI:
		return -EUCLEAN;
	case MDB_MAP_RESIZED:
	case MDB_BAD_TXN:
	case MDB_BAD_VALSIZE:
		return -EINVAL;
	case MDB_READERS_FULL:
	case MDB_TLS_FULL:
	case MDB_DBS_FULL:
		return -EAGAIN;
	default:
		return rc > 0 ? -rc : -EIO;
	}
}

/*
 * DURABILITY RECORD. LMDB runs with MDB_NOSYNC: a commit writes its pages
 * and its meta page without syncing, so the caller's lock is held only for
 * the writes into the page cache. csdfs_meta_sync() then syncs data.mdb and
 * records the id of the last synced transaction in the file SYNCED_FILE
 * (synced itself). A crash may leave on disk the meta page of a commit
 * whose pages never arrived: a newer meta page than the record says, which
 * is never trusted. LMDB writes transaction t's meta page into slot t % 2
 * and only to pages free in snapshots t-1 and t-2, so the other slot still
 * describes the recorded snapshot intact; open copies it over the newer one
 * (rollback_unsynced). Nothing is lost that a caller was told is durable:
 * csdfs_meta_sync() returns only after the record is on disk, and the next
 * commit cannot begin before that (sync_lock), so at most one commit is
 * ever ahead of the record. The record also waits for the companion's
 * sync (the volume's container): a commit may be made while the data it
 * maps is written but not yet durable, and only the record makes it count.
 *
 * The record holds two 512-byte slots (a torn write can damage only one);
 * slot t % 2 gets id t: { LE32 magic, LE32 version, LE64 id, LE32 crc32c of
 * the 16 bytes before it }. The newest valid slot wins.
 */
#define SYNCED_FILE "synced"
#define SYNCED_MAGIC 0x53594e43u   /* "CNYS" */
#define SYNCED_SLOT 512

/* @io was just opened: its size is the record's. */
static int synced_read(struct csdfs_io *io, uint64_t *id)
{
	unsigned char buf[2 * SYNCED_SLOT];
	uint64_t n = io->size < sizeof(buf) ? io->size : sizeof(buf);
	bool found = false;
	int rc;

	rc = n ? csdfs_io_pread(io, buf, (size_t)n, 0) : 0;
	if (rc)
		return rc;
	for (int i = 0; i < 2; i++) {
		const unsigned char *p = buf + i * SYNCED_SLOT;
		uint32_t magic, ver, crc;
		uint64_t v;

		if (n < (uint64_t)(i + 1) * SYNCED_SLOT)
			break;
		memcpy(&magic, p, 4);
		memcpy(&ver, p + 4, 4);
		memcpy(&v, p + 8, 8);
		memcpy(&crc, p + 16, 4);
		if (le32toh(magic) != SYNCED_MAGIC || le32toh(ver) != 1 ||
		    le32toh(crc) != csdfs_crc32c(0, p, 16))
			continue;
		if (!found || le64toh(v) > *id)
			*id = le64toh(v);
		found = true;
	}
	return found ? 0 : -ENOENT;
}

static int synced_write(struct csdfs_io *io, uint64_t id)
{
	unsigned char p[SYNCED_SLOT] = { 0 };
	uint32_t magic = htole32(SYNCED_MAGIC), ver = htole32(1), crc;
	uint64_t v = htole64(id);
	int rc;

	memcpy(p, &magic, 4);
	memcpy(p + 4, &ver, 4);
	memcpy(p + 8, &v, 8);
	crc = htole32(csdfs_crc32c(0, p, 16));
	memcpy(p + 16, &crc, 4);
	rc = csdfs_io_pwrite(io, p, sizeof(p), (id % 2) * SYNCED_SLOT);
	return rc ? rc : csdfs_io_sync(io);
}

/* Hand the just opened @io to the open's hook; on failure it is closed. */
static int hook_io(struct csdfs_meta *meta, struct csdfs_io *io)
{
	int rc = meta->io_hook ? meta->io_hook(io, meta->io_hook_arg) : 0;

	if (rc)
		csdfs_io_close(io);
	return rc;
}

/* LMDB 0.9 data format, read here only to choose between the two meta
 * pages (lmdb.h has no call for it): each meta page is a 16-byte page
 * header followed by the meta record; offsets are into the page. */
#define LM_MAGIC 0xBEEFC0DEu
#define LM_META_AT 16              /* page header size */
#define LM_PSIZE_AT 40             /* mm_dbs[0].md_pad holds the page size */
#define LM_TXNID_AT 144
#define LM_META_END 152            /* end of the meta record */

struct lm_meta {
	uint64_t txnid;
	bool valid;
	unsigned char rec[LM_META_END - LM_META_AT];
};

static void lm_parse(const unsigned char *page, struct lm_meta *m)
{
	uint32_t magic, ver;

	memcpy(&magic, page + LM_META_AT, 4);
	memcpy(&ver, page + LM_META_AT + 4, 4);
	memcpy(&m->txnid, page + LM_TXNID_AT, 8);
	memcpy(m->rec, page + LM_META_AT, sizeof(m->rec));
	m->valid = magic == LM_MAGIC && ver == 1;
}

/*
 * Make data.mdb at @datafile describe the snapshot the durability record
 * names (see DURABILITY RECORD). *rolled: a commit was rolled back.
 * *recorded: the id data.mdb now ends at, known durable; UINT64_MAX when
 * the record had no whole slot. A file too short for its meta pages is
 * -EUCLEAN; a failed read or write is its -errno.
 */
static int rollback_unsynced(struct csdfs_meta *meta, const char *datafile,
			     bool *rolled, uint64_t *recorded)
{
	unsigned char page[LM_META_END];
	struct csdfs_io dio;
	struct lm_meta m[2];
	uint64_t durable = 0;
	uint32_t psize;
	int newer, rc;

	*rolled = false;
	*recorded = UINT64_MAX;
	rc = csdfs_io_open_file(&dio, datafile, false, CSDFS_IO_META_DATA);
	if (!rc)
		rc = hook_io(meta, &dio);
	if (rc)
		return rc;
	rc = -EUCLEAN;
	if (dio.size < sizeof(page))
		goto out_close;
	rc = csdfs_io_pread(&dio, page, sizeof(page), 0);
	if (rc)
		goto out_close;
	rc = -EUCLEAN;
	memcpy(&psize, page + LM_PSIZE_AT, 4);
	lm_parse(page, &m[0]);
	if (!m[0].valid || psize < 512 || psize > 65536 || (psize & (psize - 1)) ||
	    dio.size < psize + sizeof(page))
		goto out_close;
	rc = csdfs_io_pread(&dio, page, sizeof(page), psize);
	if (rc)
		goto out_close;
	rc = -EUCLEAN;
	lm_parse(page, &m[1]);
	if (!m[1].valid)
		goto out_close;
	newer = m[1].txnid > m[0].txnid;
	rc = synced_read(&meta->record, &durable);
	/* A record with no whole slot was cut while the first open made it:
	 * nothing was committed since the environment's last synchronous
	 * state (a volume older than records), or mkfs never finished. */
	if (rc == -ENOENT || (!rc && m[newer].txnid == durable)) {
		if (!rc)
			*recorded = durable;
		rc = 0;
		goto out_close;
	}
	if (rc)
		goto out_close;
	/* Only the one commit after the recorded one can be on disk. */
	rc = -EUCLEAN;
	if (m[newer].txnid != durable + 1 || m[!newer].txnid != durable)
		goto out_close;
	rc = csdfs_io_pwrite(&dio, m[!newer].rec, sizeof(m[!newer].rec),
			     (uint64_t)newer * psize + LM_META_AT);
	if (!rc)
		rc = csdfs_io_sync(&dio);
	if (rc)
		goto out_close;
	*rolled = true;
	*recorded = durable;
out_close:
	csdfs_io_close(&dio);
	return rc;
}

/* Open the durability record of @dir into meta->record, creating it with
 * @create (then its directory entry is synced: the record must survive a
 * crash too). @return 0, -ENOENT (none, without @create), -errno. */
static int synced_open(struct csdfs_meta *meta, const char *dir, bool create)
{
	char path[4096];
	int dfd, rc;

	snprintf(path, sizeof(path), "%s/%s", dir, SYNCED_FILE);
	rc = csdfs_io_open_file(&meta->record, path, create, CSDFS_IO_META_RECORD);
	if (rc)
		return rc;
	if (create) {
		dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (dfd >= 0) {
			fsync(dfd);
			close(dfd);
		}
	}
	return hook_io(meta, &meta->record);
}

/*
 * Take LMDB's descriptor on data.mdb into meta->data, so that data.mdb's
 * sync goes through the seam. The call it replaces, mdb_env_sync(env, 1),
 * is without MDB_WRITEMAP (never set here) one fdatasync of that very
 * descriptor: LMDB 0.9.24 mdb.c, mdb_env_sync calls
 * MDB_FDATASYNC(env->me_fd), fdatasync on Linux, and mdb_env_get_fd
 * returns me_fd. (LMDB would call fsync instead on ext3/ext4 under Linux
 * before 3.6, whose fdatasync was broken: MDB_FSYNCONLY.) LMDB still
 * writes its pages itself, unsynced (MDB_NOSYNC): this sync is what makes
 * them durable.
 */
static int data_wrap(struct csdfs_meta *meta)
{
	mdb_filehandle_t fd;
	int rc;

	rc = mdb_err(mdb_env_get_fd(meta->env, &fd));
	if (!rc)
		rc = csdfs_io_wrap_fd(&meta->data, fd, CSDFS_IO_META_DATA);
	return rc ? rc : hook_io(meta, &meta->data);
}

static int open_dbis(struct csdfs_meta *meta, bool create)
{
	MDB_txn *txn;
	int rc;

	rc = mdb_txn_begin(meta->env, NULL, 0, &txn);
	if (rc)
		return mdb_err(rc);
	for (int i = 0; i < CSDFS_DB_COUNT; i++) {
		rc = mdb_dbi_open(txn, db_names[i], create ? MDB_CREATE : 0,
				  &meta->dbi[i]);
		if (rc) {
			mdb_txn_abort(txn);
			/* A readable env without our sub-databases is foreign. */
			return rc == MDB_NOTFOUND ? -EUCLEAN : mdb_err(rc);
		}
	}
	return mdb_err(mdb_txn_commit(txn));
}

int csdfs_meta_open(const char *dir, bool create, uint64_t mapsize,
		    int (*io_hook)(struct csdfs_io *io, void *arg), void *io_hook_arg,
		    struct csdfs_meta **out)
{
	struct csdfs_meta *meta;
	struct stat st;
	char datafile[4096];
	int rc;

	snprintf(datafile, sizeof(datafile), "%s/data.mdb", dir);
	if (!create && stat(datafile, &st))
		return -errno;
	meta = calloc(1, sizeof(*meta));
	if (!meta)
		return -ENOMEM;
	pthread_mutex_init(&meta->sync_lock, NULL);
	meta->io_hook = io_hook;
	meta->io_hook_arg = io_hook_arg;
	meta->durable = UINT64_MAX;    /* unknown: the first sync records */
	/* No record yet: a new environment, or one made before records
	 * existed, whose commits were all synchronous. It gets one below,
	 * once the environment proved to be csdfs's. */
	if (create && stat(datafile, &st) && errno == ENOENT) {
		char rec[4200];

		/* A new environment: a record left by an old one is void. */
		snprintf(rec, sizeof(rec), "%s/%s", dir, SYNCED_FILE);
		if (unlink(rec) && errno != ENOENT) {
			rc = -errno;
			goto out_free;
		}
	}
	rc = synced_open(meta, dir, false);
	if (rc && rc != -ENOENT)
		goto out_free;
	if (!rc) {
		bool rolled;

		/* A record that matches data.mdb spares the open a sync. */
		rc = rollback_unsynced(meta, datafile, &rolled, &meta->durable);
		if (rc)
			goto out_free;
		if (rolled)
			csdfs_log(LOG_WARNING, "%s: the last metadata commit was never "
				  "made durable (a crash during its sync): rolled back to "
				  "the one before", dir);
	}
	rc = mdb_err(mdb_env_create(&meta->env));
	if (rc)
		goto out_free;
	mdb_env_set_maxdbs(meta->env, CSDFS_DB_COUNT + 2);
	rc = mdb_err(mdb_env_set_mapsize(meta->env, (size_t)mapsize));
	if (rc)
		goto out_close;
	/*
	 * NOLOCK: one process owns the volume (flock on the container) and
	 * the daemon serialises all transaction use itself; this also lets
	 * any thread commit the group transaction.
	 * NOSYNC: a commit only writes its pages and meta page; making them
	 * durable is csdfs_meta_sync()'s, which the volume calls after
	 * releasing its lock. Until then a crash undoes the commit, whole
	 * (see DURABILITY RECORD).
	 */
	rc = mdb_env_open(meta->env, dir,
			  MDB_NOLOCK | MDB_NOTLS | MDB_NORDAHEAD | MDB_NOSYNC,
			  0600);
	if (rc) {
		rc = mdb_err(rc);
		goto out_close;
	}
	rc = data_wrap(meta);
	if (rc)
		goto out_close;
	/*
	 * data.mdb may end before the last page LMDB counts, and rightly: a
	 * page a transaction allocated and freed again (a loose page) is never
	 * written, yet counts in me_last_pgno (seen after a clean unmount: a
	 * file of 641 pages, last page 641). Nothing refers to such a page.
	 * But a file cut short would fault (SIGBUS) on the first read of a
	 * page past its end: extend it with zeros to what LMDB counts, so a
	 * page truly lost reads as zeros, which LMDB reports as corrupt.
	 */
	if (!create) {
		MDB_envinfo info;
		MDB_stat mst;
		uint64_t need;

		rc = mdb_err(mdb_env_info(meta->env, &info));
		if (!rc)
			rc = mdb_err(mdb_env_stat(meta->env, &mst));
		if (!rc && fstat(meta->data.fd, &st))
			rc = -errno;
		if (rc)
			goto out_close;
		need = (uint64_t)(info.me_last_pgno + 1) * mst.ms_psize;
		if ((uint64_t)st.st_size < need && ftruncate(meta->data.fd, (off_t)need)) {
			rc = -errno;
			goto out_close;
		}
	}
	rc = open_dbis(meta, create);
	if (rc)
		goto out_close;
	{
		MDB_envinfo info;

		/* Record the state as opened (open_dbis may have committed). */
		if (!meta->record.ops)
			rc = synced_open(meta, dir, true);
		if (!rc)
			rc = mdb_err(mdb_env_info(meta->env, &info));
		if (!rc) {
			meta->committed = info.me_last_txnid;
			rc = csdfs_meta_sync(meta);
		}
		if (rc)
			goto out_close;
	}
	meta->io_hook = NULL;
	meta->io_hook_arg = NULL;
	*out = meta;
	return 0;

out_close:
	csdfs_io_close(&meta->data);
	mdb_env_close(meta->env);
out_free:
	csdfs_io_close(&meta->record);
	pthread_mutex_destroy(&meta->sync_lock);
	free(meta);
	return rc;
}

void csdfs_meta_close(struct csdfs_meta *meta)
{
	if (!meta)
		return;
	csdfs_io_close(&meta->data);
	mdb_env_close(meta->env);
	csdfs_io_close(&meta->record);
	pthread_mutex_destroy(&meta->sync_lock);
	if (meta->redo_spare)
		free(meta->redo_spare->buf);
	free(meta->redo_spare);
	free(meta);
}

void csdfs_meta_release_pages(struct csdfs_meta *meta)
{
	MDB_envinfo info;

	/* LMDB maps its file read-only and shared: dropping our page-table
	 * entries frees nothing the file does not hold, and the next access
	 * maps the page again from the page cache (a minor fault). */
	if (!mdb_env_info(meta->env, &info) && info.me_mapaddr)
		madvise(info.me_mapaddr, info.me_mapsize, MADV_DONTNEED);
}

uint64_t csdfs_meta_file_bytes(struct csdfs_meta *meta)
{
	MDB_envinfo info;
	MDB_stat st;

	if (mdb_env_info(meta->env, &info) || mdb_env_stat(meta->env, &st))
		return 0;
	return (uint64_t)(info.me_last_pgno + 1) * st.ms_psize;
}

/* The LMDB transaction @t works in (SAVEPOINTS: a rebuild replaces the
 * root's). */
static MDB_txn *mtxn(const struct csdfs_txn *t)
{
	return t->savepoint ? t->root->txn : t->txn;
}

/* LMDB returned @rc in @t: note whether it may have failed the
 * transaction. "Not found", "exists" and a refused argument (checked
 * before anything changes) are sure not to; a real nested transaction
 * keeps its failure to itself. */
static int mdb_noted(struct csdfs_txn *t, int rc)
{
	if (rc && rc != MDB_NOTFOUND && rc != MDB_KEYEXIST && rc != EINVAL &&
	    rc != MDB_BAD_VALSIZE && mtxn(t) == t->root->txn)
		t->root->poisoned = true;
	return mdb_err(rc);
}

static int replay_raw(void *arg, bool put, enum csdfs_db db,
		      const struct csdfs_val *k, const struct csdfs_val *v)
{
	struct csdfs_txn *root = arg;
	MDB_val mk = { k->len, (void *)k->data }, mv = { v->len, (void *)v->data };
	MDB_dbi dbi = root->meta->dbi[db];

	return mdb_err(put ? mdb_put(root->txn, dbi, &mk, &mv, 0) :
			     mdb_del(root->txn, dbi, &mk, NULL));
}

/* SAVEPOINTS: bring @root back to where its redo stood at @mark, in a
 * fresh LMDB transaction. The prefix was complete when the savepoint
 * began. On failure the root is broken: every later use fails with it. */
static void rebuild(struct csdfs_txn *root, size_t mark)
{
	struct csdfs_meta *meta = root->meta;
	int rc;

	mdb_txn_abort(root->txn);
	root->txn = NULL;
	meta->rebuilds++;
	rc = mdb_err(mdb_txn_begin(meta->env, NULL, 0, &root->txn));
	if (!rc)
		rc = csdfs_meta_redo_each(root->redo.buf, mark, replay_raw, root);
	root->redo.len = mark;
	root->redo.over = false;
	root->poisoned = false;
	if (rc) {
		if (root->txn)
			mdb_txn_abort(root->txn);
		root->txn = NULL;
		root->broken = rc;
		csdfs_log(LOG_ERR, "cannot undo a failed metadata operation: %s",
			  strerror(-rc));
	}
}

int csdfs_meta_begin(struct csdfs_meta *meta, struct csdfs_txn *parent,
		     struct csdfs_txn **out)
{
	struct csdfs_txn *t, *root = parent ? parent->root : NULL;
	int rc;

	if (root && root->broken)
		return root->broken;
	t = malloc(sizeof(*t));
	if (!t)
		return -ENOMEM;
	memset(t, 0, sizeof(*t));
	t->meta = meta;
	t->top = !parent;
	t->root = parent ? root : t;
	if (!parent) {
		t->journal = meta->redo_limit != 0;
		redo_take_spare(meta, &t->redo);
		rc = mdb_txn_begin(meta->env, NULL, 0, &t->txn);
	} else if (!root->redo.over && mtxn(parent) == root->txn) {
		/* A failure before this one (in the root itself) is undone
		 * first, so the mark is a state LMDB can reach. */
		if (root->poisoned)
			rebuild(root, root->redo.len);
		t->savepoint = true;
		rc = root->broken ? MDB_PANIC : 0;
	} else {
		rc = mdb_txn_begin(meta->env, mtxn(parent), 0, &t->txn);
	}
	t->redo_mark = t->root->redo.len;
	if (rc) {
		if (!parent)
			redo_give_back(meta, &t->redo);
		free(t);
		return root && root->broken ? root->broken : mdb_err(rc);
	}
	*out = t;
	return 0;
}

int csdfs_meta_broken(struct csdfs_txn *txn)
{
	return txn->root->broken;
}

uint64_t csdfs_meta_rebuilds(struct csdfs_meta *meta)
{
	return meta->rebuilds;
}

/* End savepoint @sp; @undo: take back what it changed. */
static void savepoint_end(struct csdfs_txn *sp, bool undo)
{
	struct csdfs_txn *root = sp->root;

	if (root->poisoned ||
	    (undo && (root->redo.len != sp->redo_mark || root->redo.over)))
		rebuild(root, sp->redo_mark);
	free(sp);
}

/* Part @i of a sync: 0 data.mdb, 1 the companion. */
static int sync_part(void *ctx, size_t i)
{
	struct csdfs_meta *meta = ctx;

	return i ? meta->companion(meta->companion_arg) : csdfs_io_sync(&meta->data);
}

/* Sync data.mdb and the companion (side by side on @pool, if any), then
 * record the last commit as durable (sync_lock). */
static int sync_locked(struct csdfs_meta *meta, struct csdfs_pool *pool)
{
	uint64_t id = meta->committed;
	int rc;

	if (id == meta->durable)
		return 0;
	rc = csdfs_pool_run(pool, meta->companion ? 2 : 1, sync_part, meta);
	if (!rc)
		rc = synced_write(&meta->record, id);
	if (!rc)
		meta->durable = id;
	return rc;
}

int csdfs_meta_commit_group(struct csdfs_txn *txn)
{
	struct csdfs_meta *meta = txn->meta;
	MDB_envinfo info;
	int rc;

	/* A nested commit only merges into its parent: no id, nothing to
	 * sync, and no wait behind a sync (its caller may hold locks). */
	if (txn->savepoint) {
		struct csdfs_txn *root = txn->root;
		bool failed = root->poisoned;

		/* A change LMDB failed is undone, not committed. */
		savepoint_end(txn, failed);
		return failed ? (root->broken ? root->broken : -EIO) : 0;
	}
	if (!txn->top) {
		rc = mdb_err(mdb_txn_commit(txn->txn));
		if (rc)    /* LMDB aborted it: so are its changes */
			txn->root->redo.len = txn->redo_mark;
		free(txn);
		return rc;
	}
	if (txn->broken) {
		rc = txn->broken;
		csdfs_meta_abort(txn);
		return rc;
	}
	pthread_mutex_lock(&meta->sync_lock);
	/* Never two commits ahead of the record: the one before must be
	 * durable first (a no-op unless a caller skipped csdfs_meta_sync). */
	rc = sync_locked(meta, NULL);
	if (rc) {
		mdb_txn_abort(txn->txn);
	} else {
		/* The id LMDB gave: a commit without changes takes none. */
		rc = mdb_err(mdb_txn_commit(txn->txn));
		if (!rc)
			rc = mdb_err(mdb_env_info(meta->env, &info));
		if (!rc)
			meta->committed = info.me_last_txnid;
	}
	pthread_mutex_unlock(&meta->sync_lock);
	redo_give_back(meta, &txn->redo);
	free(txn);
	return rc;
}

int csdfs_meta_sync_on(struct csdfs_meta *meta, struct csdfs_pool *pool)
{
	int rc;

	pthread_mutex_lock(&meta->sync_lock);
	rc = sync_locked(meta, pool);
	pthread_mutex_unlock(&meta->sync_lock);
	return rc;
}

int csdfs_meta_sync(struct csdfs_meta *meta)
{
	return csdfs_meta_sync_on(meta, NULL);
}

void csdfs_meta_set_companion(struct csdfs_meta *meta, int (*fn)(void *arg), void *arg)
{
	pthread_mutex_lock(&meta->sync_lock);
	meta->companion = fn;
	meta->companion_arg = arg;
	pthread_mutex_unlock(&meta->sync_lock);
}

int csdfs_meta_commit(struct csdfs_txn *txn)
{
	struct csdfs_meta *meta = txn->meta;
	bool top = txn->top;
	int rc = csdfs_meta_commit_group(txn);

	return !rc && top ? csdfs_meta_sync(meta) : rc;
}

void csdfs_meta_abort(struct csdfs_txn *txn)
{
	if (!txn)
		return;
	if (txn->savepoint) {
		savepoint_end(txn, true);
		return;
	}
	if (txn->txn)
		mdb_txn_abort(txn->txn);
	txn->root->redo.len = txn->redo_mark;
	if (txn->top)
		redo_give_back(txn->meta, &txn->redo);
	free(txn);
}

/* Keep @k and @v as change @op of @txn's root (REDO). */
static void redo_add(struct csdfs_txn *txn, int op, enum csdfs_db db,
		     const MDB_val *k, const MDB_val *v)
{
	struct csdfs_redo *r = &txn->root->redo;
	size_t vlen = v ? v->mv_size : 0, need = REDO_HDR + k->mv_size + vlen;
	uint16_t kl = htole16((uint16_t)k->mv_size);
	uint32_t vl = htole32((uint32_t)vlen);
	unsigned char *p;

	if (r->over)
		return;
	if (r->len + need > (txn->meta->redo_limit > REDO_KEEP_MAX ?
			     txn->meta->redo_limit : REDO_KEEP_MAX)) {
		r->over = true;
		return;
	}
	if (r->len + need > r->cap) {
		size_t cap = r->cap ? r->cap : 4096;

		while (cap < r->len + need)
			cap *= 2;
		p = realloc(r->buf, cap);
		if (!p) {
			r->over = true;
			return;
		}
		r->buf = p;
		r->cap = cap;
	}
	p = r->buf + r->len;
	p[0] = (unsigned char)op;
	p[1] = (unsigned char)db;
	memcpy(p + 2, &kl, 2);
	memcpy(p + 4, &vl, 4);
	memcpy(p + REDO_HDR, k->mv_data, k->mv_size);
	if (vlen)
		memcpy(p + REDO_HDR + k->mv_size, v->mv_data, vlen);
	r->len += need;
}

void csdfs_meta_set_redo(struct csdfs_meta *meta, size_t limit)
{
	meta->redo_limit = limit;
}

int csdfs_meta_redo(struct csdfs_txn *top, const void **buf, size_t *len)
{
	if (!top->top)
		return -EINVAL;
	if (!top->journal || top->redo.over || top->redo.len > top->meta->redo_limit)
		return -EOVERFLOW;
	*buf = top->redo.buf;
	*len = top->redo.len;
	return 0;
}

int csdfs_meta_redo_each(const void *buf, size_t len,
			 int (*fn)(void *arg, bool put, enum csdfs_db db,
				   const struct csdfs_val *k, const struct csdfs_val *v),
			 void *arg)
{
	const unsigned char *p = buf, *end = p + len;

	while (p < end) {
		struct csdfs_val k, v;
		uint16_t kl;
		uint32_t vl;
		int rc;

		if ((size_t)(end - p) < REDO_HDR)
			return -EUCLEAN;
		memcpy(&kl, p + 2, 2);
		memcpy(&vl, p + 4, 4);
		kl = le16toh(kl);
		vl = le32toh(vl);
		if (p[1] >= CSDFS_DB_COUNT || !kl ||
		    (size_t)(end - p) - REDO_HDR < (size_t)kl + vl ||
		    (p[0] == REDO_DEL && vl) || (p[0] != REDO_PUT && p[0] != REDO_DEL))
			return -EUCLEAN;
		k.data = p + REDO_HDR;
		k.len = kl;
		v.data = p + REDO_HDR + kl;
		v.len = vl;
		rc = fn(arg, p[0] == REDO_PUT, (enum csdfs_db)p[1], &k, &v);
		if (rc)
			return rc;
		p += REDO_HDR + kl + vl;
	}
	return 0;
}

static int replay_one(void *arg, bool put, enum csdfs_db db,
		      const struct csdfs_val *k, const struct csdfs_val *v)
{
	struct csdfs_txn *txn = arg;
	int rc = put ? csdfs_meta_put(txn, db, k->data, k->len, v->data, v->len, 0) :
		       csdfs_meta_del(txn, db, k->data, k->len);

	/* The changes were made on this very snapshot: each one applies. */
	return rc == -ENOENT ? -EUCLEAN : rc;
}

int csdfs_meta_replay(struct csdfs_txn *txn, const void *buf, size_t len)
{
	return csdfs_meta_redo_each(buf, len, replay_one, txn);
}

uint64_t csdfs_meta_durable_id(struct csdfs_meta *meta)
{
	uint64_t id;

	pthread_mutex_lock(&meta->sync_lock);
	id = meta->durable;
	pthread_mutex_unlock(&meta->sync_lock);
	return id;
}

int csdfs_meta_get(struct csdfs_txn *txn, enum csdfs_db db, const void *key,
		   size_t klen, struct csdfs_val *val)
{
	MDB_val k = { klen, (void *)key }, v;
	int rc = mdb_get(mtxn(txn), txn->meta->dbi[db], &k, &v);

	if (rc)
		return mdb_noted(txn, rc);
	val->data = v.mv_data;
	val->len = v.mv_size;
	return 0;
}

int csdfs_meta_put(struct csdfs_txn *txn, enum csdfs_db db, const void *key,
		   size_t klen, const void *val, size_t vlen, unsigned flags)
{
	MDB_val k = { klen, (void *)key }, v = { vlen, (void *)val };
	int rc = mdb_put(mtxn(txn), txn->meta->dbi[db], &k, &v,
			 (flags & CSDFS_PUT_NOOVERWRITE) ? MDB_NOOVERWRITE : 0);

	if (!rc)
		redo_add(txn, REDO_PUT, db, &k, &v);
	return mdb_noted(txn, rc);
}

int csdfs_meta_del(struct csdfs_txn *txn, enum csdfs_db db, const void *key,
		   size_t klen)
{
	MDB_val k = { klen, (void *)key };
	int rc = mdb_del(mtxn(txn), txn->meta->dbi[db], &k, NULL);

	if (!rc)
		redo_add(txn, REDO_DEL, db, &k, NULL);
	return mdb_noted(txn, rc);
}

int csdfs_cursor_open(struct csdfs_txn *txn, enum csdfs_db db,
		      struct csdfs_cursor **out)
{
	struct csdfs_cursor *c = malloc(sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	rc = mdb_cursor_open(mtxn(txn), txn->meta->dbi[db], &c->cur);
	if (rc) {
		free(c);
		return mdb_noted(txn, rc);
	}
	c->txn = txn;
	c->db = db;
	*out = c;
	return 0;
}

void csdfs_cursor_close(struct csdfs_cursor *cur)
{
	if (!cur)
		return;
	mdb_cursor_close(cur->cur);
	free(cur);
}

static int cursor_op(struct csdfs_cursor *cur, MDB_val *k, struct csdfs_val *ko,
		     struct csdfs_val *vo, MDB_cursor_op op)
{
	MDB_val v;
	int rc = mdb_cursor_get(cur->cur, k, &v, op);

	if (rc)
		return mdb_noted(cur->txn, rc);
	if (ko) {
		ko->data = k->mv_data;
		ko->len = k->mv_size;
	}
	if (vo) {
		vo->data = v.mv_data;
		vo->len = v.mv_size;
	}
	return 0;
}

int csdfs_cursor_seek(struct csdfs_cursor *cur, const void *key, size_t klen,
		      struct csdfs_val *k, struct csdfs_val *v)
{
	MDB_val mk = { klen, (void *)key };

	return cursor_op(cur, &mk, k, v, MDB_SET_RANGE);
}

int csdfs_cursor_step(struct csdfs_cursor *cur, enum csdfs_cursor_move how,
		      struct csdfs_val *k, struct csdfs_val *v)
{
	static const MDB_cursor_op ops[] = {
		[CSDFS_CURSOR_NEXT] = MDB_NEXT,
		[CSDFS_CURSOR_PREV] = MDB_PREV,
		[CSDFS_CURSOR_FIRST] = MDB_FIRST,
		[CSDFS_CURSOR_LAST] = MDB_LAST,
	};
	MDB_val mk;

	if ((unsigned)how >= sizeof(ops) / sizeof(ops[0]))
		return -EINVAL;
	return cursor_op(cur, &mk, k, v, ops[how]);
}

int csdfs_cursor_del(struct csdfs_cursor *cur)
{
	unsigned char key[512];    /* LMDB's default maximum key size is 511 */
	MDB_val k, v;
	int rc;

	/* Without redo kept, a delete is LMDB's alone. */
	if (cur->txn->root->redo.over)
		return mdb_noted(cur->txn, mdb_cursor_del(cur->cur, 0));
	rc = mdb_cursor_get(cur->cur, &k, &v, MDB_GET_CURRENT);
	if (rc)
		return mdb_noted(cur->txn, rc);
	/* The key's bytes live in the page the delete may change. */
	if (k.mv_size > sizeof(key))
		return -EINVAL;
	memcpy(key, k.mv_data, k.mv_size);
	rc = mdb_cursor_del(cur->cur, 0);
	if (!rc) {
		k.mv_data = key;
		redo_add(cur->txn, REDO_DEL, cur->db, &k, NULL);
	}
	return mdb_noted(cur->txn, rc);
}
