/* SPDX-License-Identifier: MIT */
/*
 * The namespace: lookup, create, link, unlink, rmdir, rename and
 * attributes (readdir is readdir.c). Each call is one operation (one nested transaction): either
 * every record it touches changes, or none does.
 *
 * Directory bookkeeping: a directory's nlink is 2 + its subdirectories, its
 * size is its number of entries, and its "parent" field answers "..".
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vol.h"

#define NAME_MAX_LEN 255
#define SYMLINK_MAX 4095

static int dirent_key(uint8_t *key, uint64_t parent, const char *name,
		      size_t *klen)
{
	size_t n = strlen(name);

	if (!n)
		return -ENOENT;
	if (n > NAME_MAX_LEN)
		return -ENAMETOOLONG;
	csdfs_be64_put(key, parent);
	memcpy(key + 8, name, n);
	*klen = 8 + n;
	return 0;
}

static int dirent_get(struct csdfs_txn *txn, uint64_t parent, const char *name,
		      struct csdfs_dirent_disk *d)
{
	uint8_t key[8 + NAME_MAX_LEN];
	size_t klen;
	int rc;

	rc = dirent_key(key, parent, name, &klen);
	return rc ? rc : csdfs_rec_dirent_get(txn, CSDFS_DB_DIRENTS, key, klen, d);
}

static int dirent_put(struct csdfs_txn *txn, uint64_t parent, const char *name,
		      uint64_t ino, mode_t type)
{
	uint8_t key[8 + NAME_MAX_LEN];
	struct csdfs_dirent_disk d;
	size_t klen;
	int rc;

	rc = dirent_key(key, parent, name, &klen);
	if (rc)
		return rc;
	memset(&d, 0, sizeof(d));
	d.ino = ino;
	d.type = type & S_IFMT;
	return csdfs_rec_dirent_put(txn, CSDFS_DB_DIRENTS, key, klen, &d, 0);
}

static int dirent_del(struct csdfs_txn *txn, uint64_t parent, const char *name)
{
	uint8_t key[8 + NAME_MAX_LEN];
	size_t klen;
	int rc;

	rc = dirent_key(key, parent, name, &klen);
	return rc ? rc : csdfs_meta_del(txn, CSDFS_DB_DIRENTS, key, klen);
}

static int dir_is_empty(struct csdfs_txn *txn, uint64_t ino)
{
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	int rc;

	rc = csdfs_cursor_at(txn, CSDFS_DB_DIRENTS, ino, &cur, &k, &v);
	if (!cur)
		return rc;
	csdfs_cursor_close(cur);
	if (rc == -ENOENT)
		return 1;
	if (rc)
		return rc;
	return k.len < 8 || csdfs_be64_get(k.data) != ino;
}

/* Load a directory that is about to change. */
static int load_dir(struct csdfs_txn *txn, uint64_t ino,
		    struct csdfs_inode_disk *rec)
{
	int rc = csdfs_irec_load(txn, ino, rec);

	if (rc)
		return rc;
	if (!S_ISDIR(rec->mode))
		return -ENOTDIR;
	if (!rec->nlink)
		return -ENOENT;  /* removed while someone held it */
	return 0;
}

/* A namespace operation: one operation on entry @name of directory @parent
 * and the inode it links (or is to link). */
struct nsop {
	struct csdfs_op op;
	struct csdfs_inode_disk dir;    /* @parent */
	struct csdfs_dirent_disk d;     /* @name's entry, if it exists */
	bool exists;
	struct csdfs_inode_disk rec;    /* the inode */
	int64_t now;
};

/*
 * Begin @n: load @parent (a live directory), look @name up, and load the
 * inode @ino, or the one @name links when @ino is 0 (-ENOENT if @name does
 * not exist then). @return 0 with the operation begun, or -errno with
 * nothing left to end.
 */
static int nsop_begin(struct nsop *n, struct csdfs_vol *vol, uint64_t parent,
		      const char *name, uint64_t ino)
{
	int rc;

	n->now = csdfs_now_ns();
	rc = csdfs_op_begin(vol, &n->op);
	if (rc)
		return rc;
	rc = load_dir(n->op.txn, parent, &n->dir);
	if (!rc) {
		rc = dirent_get(n->op.txn, parent, name, &n->d);
		n->exists = !rc;
		rc = rc == -ENOENT && ino ? 0 : rc;
	}
	if (!rc)
		rc = csdfs_irec_load(n->op.txn, ino ? ino : n->d.ino, &n->rec);
	return rc ? csdfs_op_end(&n->op, rc) : 0;
}

static void dir_changed(struct csdfs_inode_disk *dir, int64_t now, int dentries)
{
	dir->mtime_ns = dir->ctime_ns = now;
	dir->size += (uint64_t)(int64_t)dentries;
}

int csdfs_fs_lookup(struct csdfs_vol *vol, uint64_t parent, const char *name,
		    struct stat *st)
{
	struct csdfs_dirent_disk d;
	struct csdfs_inode_disk rec;
	struct csdfs_op op;
	int rc;

	rc = csdfs_op_begin_read(vol, &op);
	if (rc)
		return rc;
	rc = dirent_get(op.txn, parent, name, &d);
	if (!rc) {
		rc = csdfs_irec_load(op.txn, d.ino, &rec);
		if (rc == -ENOENT)
			rc = -EUCLEAN;  /* dangling dirent */
	}
	if (!rc)
		csdfs_irec_to_stat(d.ino, &rec, st);
	return csdfs_op_end(&op, rc);
}

int csdfs_fs_setattr(struct csdfs_vol *vol, uint64_t ino,
		     const struct stat *in, unsigned mask, struct stat *st)
{
	struct csdfs_inode_disk rec;
	struct csdfs_op op;
	int rc;

	if (mask & CSDFS_SET_SIZE)
		return csdfs_file_truncate(vol, ino, (uint64_t)in->st_size, in,
					   mask, st);
	rc = csdfs_op_begin_irec(vol, &op, true, ino, &rec);
	if (rc)
		return rc;
	csdfs_irec_apply_attrs(&rec, in, mask, csdfs_now_ns());
	csdfs_irec_to_stat(ino, &rec, st);
	return csdfs_op_end_irec(&op, ino, &rec, 0);
}

/* Create an inode named @name in @parent; the caller holds an operation. */
static int create_locked(struct csdfs_op *op, const struct csdfs_cred *cred,
			 uint64_t parent, const char *name, mode_t mode,
			 dev_t rdev, const char *target, struct stat *st)
{
	struct csdfs_vol *vol = op->vol;
	struct csdfs_inode_disk dir, rec;
	struct csdfs_policy pol;
	struct csdfs_dirent_disk d;
	int64_t now = csdfs_now_ns();
	uint64_t ino, next;
	uint8_t key[8];
	int rc;

	rc = load_dir(op->txn, parent, &dir);
	if (rc)
		return rc;
	rc = dirent_get(op->txn, parent, name, &d);
	if (!rc)
		return -EEXIST;
	if (rc != -ENOENT)
		return rc;
	ino = vol->next_ino;
	next = ino + 1;
	rc = csdfs_rec_le64_put(op->txn, CSDFS_DB_META, "next_ino", 8, &next, 0);
	if (rc)
		return rc;

	memset(&rec, 0, sizeof(rec));
	rec.mode = mode;
	rec.uid = cred->uid;
	rec.gid = cred->gid;
	/* BSD group semantics under a setgid directory, as local fs do. */
	if (dir.mode & S_ISGID) {
		rec.gid = dir.gid;
		if (S_ISDIR(mode))
			rec.mode |= S_ISGID;
	}
	rec.nlink = S_ISDIR(mode) ? 2 : 1;
	rec.rdev = rdev;
	rec.atime_ns = rec.mtime_ns = rec.ctime_ns = rec.btime_ns = now;
	rec.parent = parent;
	/* The directory's effective policy now: the chunk size stays (a file's
	 * chunks are cut to it); the codec is resolved again at each write. */
	rc = csdfs_policy_resolve(vol, op->txn, parent, &dir, &pol);
	if (rc)
		return rc;
	rec.chunk_size = pol.chunk_size;
	rec.codec = pol.codec.id;
	rec.level = pol.codec.level;
	if (pol.codec_from)
		rec.flags |= CSDFS_INODE_CODEC_INHERITED;
	if (pol.chunk_from)
		rec.flags |= CSDFS_INODE_CHUNK_INHERITED;
	if (target) {
		rec.size = strlen(target);
		csdfs_be64_put(key, ino);
		rc = csdfs_meta_put(op->txn, CSDFS_DB_SYMLINKS, key, 8, target,
				    rec.size, 0);
		if (rc)
			return rc;
	}
	rc = csdfs_irec_store(op->txn, ino, &rec);
	if (!rc)
		rc = dirent_put(op->txn, parent, name, ino, mode);
	if (rc)
		return rc;
	dir_changed(&dir, now, 1);
	if (S_ISDIR(mode))
		dir.nlink++;
	rc = csdfs_irec_store(op->txn, parent, &dir);
	if (rc)
		return rc;
	vol->next_ino = ino + 1;
	op->delta.inodes++;
	csdfs_op_touch(op, parent);
	csdfs_irec_to_stat(ino, &rec, st);
	return 0;
}

int csdfs_fs_mknod(struct csdfs_vol *vol, const struct csdfs_cred *cred,
		   uint64_t parent, const char *name, mode_t mode, dev_t rdev,
		   struct stat *st)
{
	struct csdfs_op op;
	int rc;

	switch (mode & S_IFMT) {
	case S_IFREG: case S_IFDIR: case S_IFIFO: case S_IFSOCK:
	case S_IFCHR: case S_IFBLK:
		break;
	default:
		return -EINVAL;
	}
	rc = csdfs_op_begin(vol, &op);
	if (rc)
		return rc;
	rc = create_locked(&op, cred, parent, name, mode, rdev, NULL, st);
	return csdfs_op_end(&op, rc);
}

int csdfs_fs_symlink(struct csdfs_vol *vol, const struct csdfs_cred *cred,
		     uint64_t parent, const char *name, const char *target,
		     struct stat *st)
{
	struct csdfs_op op;
	int rc;

	if (!*target)
		return -ENOENT;
	if (strlen(target) > SYMLINK_MAX)
		return -ENAMETOOLONG;
	rc = csdfs_op_begin(vol, &op);
	if (rc)
		return rc;
	rc = create_locked(&op, cred, parent, name, S_IFLNK | 0777, 0, target, st);
	return csdfs_op_end(&op, rc);
}

int csdfs_fs_readlink(struct csdfs_vol *vol, uint64_t ino, char *buf,
		      size_t len)
{
	struct csdfs_op op;
	struct csdfs_val v;
	uint8_t key[8];
	int rc;

	rc = csdfs_op_begin_read(vol, &op);
	if (rc)
		return rc;
	csdfs_be64_put(key, ino);
	rc = csdfs_meta_get(op.txn, CSDFS_DB_SYMLINKS, key, 8, &v);
	if (rc == -ENOENT)
		rc = -EINVAL;
	if (!rc) {
		if (v.len > len)
			v.len = len;
		memcpy(buf, v.data, v.len);
		rc = (int)v.len;
	}
	return csdfs_op_end(&op, rc < 0 ? rc : 0) ?: rc;
}

int csdfs_fs_link(struct csdfs_vol *vol, uint64_t ino, uint64_t parent,
		  const char *name, struct stat *st)
{
	struct nsop n;
	int rc;

	rc = nsop_begin(&n, vol, parent, name, ino);
	if (rc)
		return rc;
	if (S_ISDIR(n.rec.mode))
		rc = -EPERM;
	else if (!n.rec.nlink)
		rc = -ENOENT;
	else if (n.rec.nlink >= 65000)
		rc = -EMLINK;
	else if (n.exists)
		rc = -EEXIST;
	if (!rc)
		rc = dirent_put(n.op.txn, parent, name, ino, n.rec.mode);
	if (!rc) {
		n.rec.nlink++;
		n.rec.ctime_ns = n.now;
		dir_changed(&n.dir, n.now, 1);
		rc = csdfs_irec_store(n.op.txn, ino, &n.rec);
	}
	if (!rc)
		csdfs_irec_to_stat(ino, &n.rec, st);
	if (!rc)
		csdfs_op_touch(&n.op, ino);
	return csdfs_op_end_irec(&n.op, parent, &n.dir, rc);
}

/* A directory holding a link to @ino other than entry @xname in @xdir (a
 * full scan: only needed when a hard-linked file loses its primary link). */
static int find_other_link(struct csdfs_txn *txn, uint64_t ino, uint64_t xdir,
			   const char *xname, uint64_t *dir)
{
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	int rc;

	rc = csdfs_cursor_open(txn, CSDFS_DB_DIRENTS, &cur);
	if (rc)
		return rc;
	for (rc = csdfs_cursor_first(cur, &k, &v); !rc; rc = csdfs_cursor_next(cur, &k, &v)) {
		struct csdfs_dirent_disk d;

		if (k.len <= 8 || csdfs_rec_dirent_decode(&v, &d))
			continue;
		if (d.ino == ino && !(xname && csdfs_be64_get(k.data) == xdir &&
				      k.len - 8 == strlen(xname) &&
				      !memcmp((const char *)k.data + 8, xname, k.len - 8))) {
			*dir = csdfs_be64_get(k.data);
			break;
		}
	}
	csdfs_cursor_close(cur);
	return rc;
}

/* Drop the link of @ino held by directory @from (a directory loses its
 * only one); at zero the inode becomes an orphan if still referenced, else
 * it is destroyed. @still_listed names the entry in @from if the caller has
 * not removed it yet. */
static int drop_link(struct csdfs_op *op, uint64_t ino,
		     struct csdfs_inode_disk *rec, int64_t now, uint64_t from,
		     const char *still_listed)
{
	uint8_t key[8];
	int rc;

	rec->nlink = S_ISDIR(rec->mode) ? 0 : rec->nlink - 1;
	rec->ctime_ns = now;
	csdfs_op_touch(op, ino);
	if (rec->nlink && rec->parent == from) {
		/* Its usage moves to a directory that still links it. */
		uint64_t dir = 0;

		rc = find_other_link(op->txn, ino, from, still_listed, &dir);
		if (rc && rc != -ENOENT)
			return rc;
		rec->parent = dir;
		csdfs_policy_moved(op->vol);
	}
	if (rec->nlink)
		return csdfs_irec_store(op->txn, ino, rec);
	if (!csdfs_inode_in_use(op->vol, ino)) {
		rc = csdfs_irec_store(op->txn, ino, rec);
		return rc ? rc : csdfs_inode_destroy(op, ino);
	}
	rec->flags |= CSDFS_INODE_ORPHAN;
	csdfs_be64_put(key, ino);
	rc = csdfs_meta_put(op->txn, CSDFS_DB_ORPHANS, key, 8, "", 0, 0);
	return rc ? rc : csdfs_irec_store(op->txn, ino, rec);
}

static int remove_entry(struct csdfs_vol *vol, uint64_t parent, const char *name,
			bool want_dir)
{
	struct nsop n;
	int rc;

	rc = nsop_begin(&n, vol, parent, name, 0);
	if (rc)
		return rc;
	if (want_dir && !S_ISDIR(n.rec.mode))
		rc = -ENOTDIR;
	if (!rc && !want_dir && S_ISDIR(n.rec.mode))
		rc = -EISDIR;
	if (!rc && want_dir) {
		rc = dir_is_empty(n.op.txn, n.d.ino);
		rc = rc == 1 ? 0 : rc ? rc : -ENOTEMPTY;
	}
	if (!rc)
		rc = dirent_del(n.op.txn, parent, name);
	if (!rc) {
		dir_changed(&n.dir, n.now, -1);
		if (want_dir)
			n.dir.nlink--;
		rc = csdfs_irec_store(n.op.txn, parent, &n.dir);
	}
	if (!rc)
		rc = drop_link(&n.op, n.d.ino, &n.rec, n.now, parent, NULL);
	if (!rc)
		csdfs_op_touch(&n.op, parent);
	return csdfs_op_end(&n.op, rc);
}

int csdfs_fs_unlink(struct csdfs_vol *vol, uint64_t parent, const char *name)
{
	return remove_entry(vol, parent, name, false);
}

int csdfs_fs_rmdir(struct csdfs_vol *vol, uint64_t parent, const char *name)
{
	return remove_entry(vol, parent, name, true);
}

/* Is directory @dir @anc itself or below it? @return 1, 0 or -errno. */
static int is_below(struct csdfs_txn *txn, uint64_t dir, uint64_t anc)
{
	for (int depth = 0; depth < 4096; depth++) {
		struct csdfs_inode_disk r;
		int rc;

		if (dir == anc)
			return 1;
		if (dir == CSDFS_ROOT_INO)
			return 0;
		rc = csdfs_irec_load(txn, dir, &r);
		if (rc)
			return rc;
		dir = r.parent;
	}
	return -EUCLEAN;  /* a parent loop */
}

/*
 * Rename: both parents are loaded once (the same record when equal) and
 * stored once at the end, so nlink/size/time updates compose. A whiteout
 * (RENAME_WHITEOUT, for overlayfs's upper layer) is made after that, in the
 * same operation, by create_locked(), which reloads the old parent with
 * the rename applied: after a crash the old name is the source or the
 * whiteout, never empty.
 */
static int rename_locked(struct csdfs_op *op, const struct csdfs_cred *cred,
			 uint64_t p, const char *name, uint64_t np,
			 const char *nname, unsigned flags)
{
	struct csdfs_inode_disk pdir, npdir_rec, srec, drec;
	struct csdfs_inode_disk *npdir = p == np ? &pdir : &npdir_rec;
	struct csdfs_dirent_disk s, d;
	int64_t now = csdfs_now_ns();
	bool dst_exists, sdir, ddir = false;
	int rc;

	/* A move can put a file under another directory's policy. */
	if (p != np)
		csdfs_policy_moved(op->vol);
	rc = load_dir(op->txn, p, &pdir);
	if (!rc && p != np)
		rc = load_dir(op->txn, np, npdir);
	if (!rc)
		rc = dirent_get(op->txn, p, name, &s);
	if (!rc)
		rc = csdfs_irec_load(op->txn, s.ino, &srec);
	if (rc)
		return rc;
	sdir = S_ISDIR(srec.mode);
	/* A directory may not move below itself (the kernel checks this too;
	 * the library API must not rely on it). */
	if (sdir && p != np) {
		rc = is_below(op->txn, np, s.ino);
		if (rc)
			return rc < 0 ? rc : -EINVAL;
	}
	rc = dirent_get(op->txn, np, nname, &d);
	if (rc && rc != -ENOENT)
		return rc;
	dst_exists = !rc;
	if (dst_exists) {
		rc = csdfs_irec_load(op->txn, d.ino, &drec);
		if (rc)
			return rc == -ENOENT ? -EUCLEAN : rc;
		ddir = S_ISDIR(drec.mode);
	}

	if (flags & CSDFS_RENAME_EXCHANGE) {
		if (!dst_exists)
			return -ENOENT;
		if (ddir && p != np) {
			rc = is_below(op->txn, p, d.ino);
			if (rc)
				return rc < 0 ? rc : -EINVAL;
		}
		if (s.ino == d.ino)
			return 0;
		rc = dirent_put(op->txn, p, name, d.ino, drec.mode);
		if (!rc)
			rc = dirent_put(op->txn, np, nname, s.ino, srec.mode);
		if (rc)
			return rc;
		if (p != np && sdir != ddir) {
			int moved = sdir ? 1 : -1;  /* subdirs moving p -> np */

			pdir.nlink -= (uint32_t)moved;
			npdir->nlink += (uint32_t)moved;
		}
		if (sdir || srec.parent == p)
			srec.parent = np;
		if (ddir || drec.parent == np)
			drec.parent = p;
		srec.ctime_ns = drec.ctime_ns = now;
		rc = csdfs_irec_store(op->txn, s.ino, &srec);
		if (!rc)
			rc = csdfs_irec_store(op->txn, d.ino, &drec);
		csdfs_op_touch(op, d.ino);
	} else {
		if (dst_exists) {
			if (flags & CSDFS_RENAME_NOREPLACE)
				return -EEXIST;
			if (s.ino == d.ino)
				return 0;  /* two links to one inode: no-op */
			if (sdir && !ddir)
				return -ENOTDIR;
			if (!sdir && ddir)
				return -EISDIR;
			if (ddir) {
				rc = dir_is_empty(op->txn, d.ino);
				if (rc != 1)
					return rc ? rc : -ENOTEMPTY;
				npdir->nlink--;
			}
			npdir->size--;
			rc = drop_link(op, d.ino, &drec, now, np, nname);
			if (rc)
				return rc;
		}
		rc = dirent_del(op->txn, p, name);
		if (!rc)
			rc = dirent_put(op->txn, np, nname, s.ino, srec.mode);
		if (rc)
			return rc;
		pdir.size--;
		npdir->size++;
		if (sdir && p != np) {
			pdir.nlink--;
			npdir->nlink++;
		}
		if (sdir || srec.parent == p)
			srec.parent = np;
		srec.ctime_ns = now;
		rc = csdfs_irec_store(op->txn, s.ino, &srec);
	}
	if (rc)
		return rc;
	dir_changed(&pdir, now, 0);
	dir_changed(npdir, now, 0);
	rc = csdfs_irec_store(op->txn, p, &pdir);
	if (!rc && p != np)
		rc = csdfs_irec_store(op->txn, np, npdir);
	csdfs_op_touch(op, s.ino);
	csdfs_op_touch(op, p);
	csdfs_op_touch(op, np);
	if (!rc && (flags & CSDFS_RENAME_WHITEOUT)) {
		struct stat wst;

		/* The kernel's whiteout: a character device 0/0, mode 0. */
		rc = create_locked(op, cred, p, name, S_IFCHR, 0, NULL, &wst);
	}
	return rc;
}

int csdfs_fs_rename_as(struct csdfs_vol *vol, const struct csdfs_cred *cred,
		       uint64_t parent, const char *name, uint64_t newparent,
		       const char *newname, unsigned flags)
{
	struct csdfs_op op;
	int rc;

	if (flags & ~(CSDFS_RENAME_NOREPLACE | CSDFS_RENAME_EXCHANGE |
		      CSDFS_RENAME_WHITEOUT))
		return -EINVAL;
	/* An exchange leaves no name empty: nothing to replace or white out. */
	if ((flags & CSDFS_RENAME_EXCHANGE) &&
	    (flags & (CSDFS_RENAME_NOREPLACE | CSDFS_RENAME_WHITEOUT)))
		return -EINVAL;
	if ((flags & CSDFS_RENAME_WHITEOUT) && !cred)
		return -EINVAL;
	rc = csdfs_op_begin(vol, &op);
	if (rc)
		return rc;
	rc = rename_locked(&op, cred, parent, name, newparent, newname, flags);
	return csdfs_op_end(&op, rc);
}

int csdfs_fs_rename(struct csdfs_vol *vol, uint64_t parent, const char *name,
		    uint64_t newparent, const char *newname, unsigned flags)
{
	return csdfs_fs_rename_as(vol, NULL, parent, name, newparent, newname,
				  flags);
}
