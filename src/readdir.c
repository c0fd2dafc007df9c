/* SPDX-License-Identifier: MIT */
/*
 * readdir: a directory's entries are copied out in one read operation (a
 * snapshot the handle keeps), so a listing never holds the volume lock
 * between the kernel's READDIR requests and never sees an entry twice or
 * misses one that stayed put, whatever is created or removed meanwhile.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vol.h"

void csdfs_dirsnap_free(struct csdfs_dirsnap *snap)
{
	for (size_t i = 0; i < snap->n; i++)
		free(snap->ents[i].name);
	free(snap->ents);
	snap->ents = NULL;
	snap->n = 0;
}

static int snap_add(struct csdfs_dirsnap *snap, size_t *cap, uint64_t ino,
		    mode_t type, const char *name, size_t len)
{
	if (snap->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		struct csdfs_dirent *e = realloc(snap->ents, ncap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		snap->ents = e;
		*cap = ncap;
	}
	snap->ents[snap->n].name = strndup(name, len);
	if (!snap->ents[snap->n].name)
		return -ENOMEM;
	snap->ents[snap->n].ino = ino;
	snap->ents[snap->n].type = type;
	snap->n++;
	return 0;
}

int csdfs_fs_readdir_snapshot(struct csdfs_vol *vol, uint64_t ino,
			      struct csdfs_dirsnap *snap)
{
	struct csdfs_inode_disk dir;
	struct csdfs_cursor *cur = NULL;
	struct csdfs_val k, v;
	struct csdfs_op op;
	uint8_t key[8];
	size_t cap = 0;
	int rc;

	memset(snap, 0, sizeof(*snap));
	rc = csdfs_op_begin_read(vol, &op);
	if (rc)
		return rc;
	rc = csdfs_irec_load(op.txn, ino, &dir);
	if (!rc && !S_ISDIR(dir.mode))
		rc = -ENOTDIR;
	if (!rc)
		rc = snap_add(snap, &cap, ino, S_IFDIR, ".", 1);
	if (!rc)
		rc = snap_add(snap, &cap, dir.parent, S_IFDIR, "..", 2);
	if (!rc)
		rc = csdfs_cursor_open(op.txn, CSDFS_DB_DIRENTS, &cur);
	if (!rc) {
		csdfs_be64_put(key, ino);
		for (rc = csdfs_cursor_seek(cur, key, 8, &k, &v); !rc;
		     rc = csdfs_cursor_next(cur, &k, &v)) {
			struct csdfs_dirent_disk d;

			if (k.len <= 8 || csdfs_be64_get(k.data) != ino)
				break;
			rc = csdfs_rec_dirent_decode(&v, &d);
			if (rc)
				break;
			rc = snap_add(snap, &cap, d.ino, d.type,
				      (const char *)k.data + 8, k.len - 8);
			if (rc)
				break;
		}
		if (rc == -ENOENT)
			rc = 0;
		csdfs_cursor_close(cur);
	}
	rc = csdfs_op_end(&op, rc);
	if (rc)
		csdfs_dirsnap_free(snap);
	return rc;
}
