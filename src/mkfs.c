/* SPDX-License-Identifier: MIT */
/*
 * Volume creation (csdfs-mkfs): checks the requested geometry, lays out the
 * volume directory, preallocates the container, writes the superblock and
 * an initial metadata environment holding the root directory, the counters
 * and one free extent covering the data area. A creation that fails
 * leaves the directory as empty as it found it (or not there at all).
 * Also the bounded wait for a volume's lock that the offline tools do
 * first: a daemon still closes for a moment after fusermount3 -u returns.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vol.h"

/* Fill the caller's message buffer and return @rc. */
#define ERR(rc, ...) do { snprintf(err, errlen, __VA_ARGS__); return rc; } while (0)


static bool dir_is_empty(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	bool empty = true;

	if (!d)
		return false;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			empty = false;
			break;
		}
	}
	closedir(d);
	return empty;
}

static bool looks_like_volume(const char *path)
{
	char p[4096];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", path, CSDFS_CONTAINER_NAME);
	if (!stat(p, &st))
		return true;
	snprintf(p, sizeof(p), "%s/%s", path, CSDFS_META_DIR_NAME);
	return !stat(p, &st);
}

static int init_meta(const char *metadir, const struct csdfs_super *sb)
{
	struct csdfs_counters_disk ctr;
	struct csdfs_inode_disk root;
	struct csdfs_meta *meta;
	struct csdfs_txn *txn;
	uint8_t key[8];
	uint64_t v, first = CSDFS_FIRST_DATA_BLOCK;
	uint32_t ver = CSDFS_FORMAT_VERSION;
	int64_t now = csdfs_now_ns();
	int rc;

	rc = csdfs_meta_open(metadir, true,
			     csdfs_meta_mapsize(sb->total_blocks, sb->logical_bytes),
			     NULL, NULL, &meta);
	if (rc)
		return rc;
	rc = csdfs_meta_begin(meta, NULL, &txn);
	if (rc)
		goto out_close;
	memset(&root, 0, sizeof(root));
	root.mode = S_IFDIR | 0755;
	root.uid = getuid();
	root.gid = getgid();
	root.nlink = 2;
	root.atime_ns = root.mtime_ns = root.ctime_ns = root.btime_ns = now;
	root.parent = CSDFS_ROOT_INO;
	root.chunk_size = sb->chunk_size;
	root.codec = sb->codec.id;
	root.level = sb->codec.level;
	memset(&ctr, 0, sizeof(ctr));
	ctr.inodes = 1;
	rc = csdfs_meta_put(txn, CSDFS_DB_META, "uuid", 4, sb->uuid, 16, 0);
	if (!rc)
		rc = csdfs_rec_le32_put(txn, CSDFS_DB_META, "version", 7, &ver, 0);
	v = CSDFS_ROOT_INO + 1;
	if (!rc)
		rc = csdfs_rec_le64_put(txn, CSDFS_DB_META, "next_ino", 8, &v, 0);
	if (!rc)
		rc = csdfs_rec_counters_put(txn, CSDFS_DB_META, "counters", 8, &ctr, 0);
	if (!rc)
		rc = csdfs_irec_store(txn, CSDFS_ROOT_INO, &root);
	if (!rc) {
		/* No dead bytes anywhere yet: every compaction hint clear. */
		struct csdfs_chint h;

		rc = csdfs_chint_init(&h, sb->total_blocks);
		if (!rc)
			rc = csdfs_chint_store(&h, txn, true);
		csdfs_chint_release(&h);
	}
	v = sb->total_blocks - first;
	csdfs_be64_put(key, first);
	if (!rc)
		rc = csdfs_rec_le64_put(txn, CSDFS_DB_FREE, key, 8, &v, 0);
	if (rc) {
		csdfs_meta_abort(txn);
		goto out_close;
	}
	rc = csdfs_meta_commit(txn);
out_close:
	csdfs_meta_close(meta);
	return rc;
}


/* Remove every file in the metadata directory @mpath, then the directory:
 * what a --force overwrite and a failed mkfs both must clear. */
static void remove_meta(const char *mpath)
{
	char f[4200];
	DIR *d = opendir(mpath);
	struct dirent *e;

	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(f, sizeof(f), "%s/%s", mpath, e->d_name);
		unlink(f);
	}
	if (d)
		closedir(d);
	rmdir(mpath);
}

/* Does any mount's source name the volume at @path ("csdfs:REALPATH")? */
static bool vol_is_mounted(const char *path)
{
	char line[8192], *real = realpath(path, NULL);
	bool found = false;
	FILE *f;

	if (!real)
		return false;
	f = fopen("/proc/self/mountinfo", "r");
	while (f && !found && fgets(line, sizeof(line), f)) {
		/* ... - fstype source options: paths come octal-escaped, so a
		 * volume path with a blank is never matched and only waited for */
		char *sep = strstr(line, " - "), fstype[64], source[4200];

		if (sep && sscanf(sep + 3, "%63s %4199s", fstype, source) == 2 &&
		    !strncmp(source, "csdfs:", 6) && !strcmp(source + 6, real))
			found = true;
	}
	if (f)
		fclose(f);
	free(real);
	return found;
}

int csdfs_vol_wait_closed(const char *path, unsigned timeout_ms,
			  void (*waiting)(const char *path))
{
	char cpath[4096];
	int fd, waited = 0;

	snprintf(cpath, sizeof(cpath), "%s/%s", path, CSDFS_CONTAINER_NAME);
	fd = open(cpath, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	while (flock(fd, LOCK_EX | LOCK_NB)) {
		if (errno != EWOULDBLOCK || vol_is_mounted(path) ||
		    (unsigned)waited >= timeout_ms) {
			close(fd);
			return -EBUSY;
		}
		if (!waited && waiting)
			waiting(path);
		usleep(100 * 1000);
		waited += 100;
	}
	flock(fd, LOCK_UN);
	close(fd);
	return 0;
}

int csdfs_vol_create(const char *path, const struct csdfs_mkfs_opts *o,
		     char *err, size_t errlen)
{
	char cpath[4096], mpath[4096];
	bool made_dir = false, made_container = false;
	struct csdfs_super sb;
	struct csdfs_io io;
	struct stat st;
	uint64_t logical;
	int fd, rc;

	if (strlen(path) > 3000)
		ERR(-ENAMETOOLONG, "volume path is too long");
	if (o->size < (64ull << 20))
		ERR(-EINVAL, "size %llu is too small (minimum 64M)",
		    (unsigned long long)o->size);
	if (o->size > CSDFS_VOL_SIZE_MAX)
		ERR(-EINVAL, "size %llu is too large (maximum 4P)",
		    (unsigned long long)o->size);
	if (o->chunk_size < CSDFS_CHUNK_MIN || o->chunk_size > CSDFS_CHUNK_MAX ||
	    (o->chunk_size & (o->chunk_size - 1)))
		ERR(-EINVAL, "chunk size %u is invalid (a power of two from 4K to 128K)",
		    o->chunk_size);
	if (o->codec.id >= CSDFS_CODEC_COUNT)
		ERR(-EINVAL, "unknown codec");
	if (o->logical_size) {
		logical = o->logical_size;
	} else {
		if (!(o->multiplier >= 1.0 && o->multiplier <= 16.0))
			ERR(-EINVAL, "multiplier %g is invalid (1.0 to 16.0)",
			    o->multiplier);
		logical = (uint64_t)((double)o->size * o->multiplier);
	}
	if (logical < o->size)
		ERR(-EINVAL, "logical size %llu is below the physical size %llu",
		    (unsigned long long)logical, (unsigned long long)o->size);
	if (logical > 16 * o->size)
		ERR(-EINVAL, "logical size is more than 16x the physical size");

	snprintf(cpath, sizeof(cpath), "%s/%s", path, CSDFS_CONTAINER_NAME);
	snprintf(mpath, sizeof(mpath), "%s/%s", path, CSDFS_META_DIR_NAME);
	if (!stat(path, &st)) {
		if (!S_ISDIR(st.st_mode))
			ERR(-EEXIST, "'%s' exists and is not a directory", path);
		if (looks_like_volume(path)) {
			if (!o->force)
				ERR(-EEXIST, "'%s' already holds a volume (use --force to overwrite)",
				    path);
			/* Refuse to clobber a volume someone has mounted. */
			rc = csdfs_io_open_posix(&io, cpath);
			if (rc == -EBUSY)
				ERR(-EBUSY, "'%s' is mounted or in use; unmount it first", path);
			if (!rc)
				csdfs_io_close(&io);
			unlink(cpath);
			remove_meta(mpath);
		} else if (!dir_is_empty(path)) {
			ERR(-EEXIST, "'%s' is a non-empty directory that is not a csdfs volume",
			    path);
		}
		chmod(path, 0700);
	} else if (errno != ENOENT) {
		ERR(-errno, "cannot access '%s': %s", path, strerror(errno));
	} else if (mkdir(path, 0700)) {
		ERR(-errno, "cannot create '%s': %s", path, strerror(errno));
	} else {
		made_dir = true;
	}
	/* From here on a failure takes back all it made (out_remove): a
	 * half-made volume would look like one to the next mkfs and like
	 * none to csdfs. */
	if (mkdir(mpath, 0700) && errno != EEXIST) {
		rc = -errno;
		snprintf(err, errlen, "cannot create '%s': %s", mpath, strerror(errno));
		goto out_remove;
	}
	fd = open(cpath, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "cannot create '%s': %s", cpath, strerror(errno));
		goto out_remove;
	}
	made_container = true;
	/* Preallocate all of it: physical space is promised up front. */
	rc = posix_fallocate(fd, 0, (off_t)o->size);
	close(fd);
	if (rc == ENOSPC || rc == EFBIG) {
		snprintf(err, errlen, rc == ENOSPC ?
			 "the host filesystem has no room for %llu bytes" :
			 "the host filesystem cannot hold a file of %llu bytes",
			 (unsigned long long)o->size);
		rc = -ENOSPC;
		goto out_remove;
	} else if (rc) {
		snprintf(err, errlen, "cannot preallocate '%s': %s", cpath, strerror(rc));
		rc = -rc;
		goto out_remove;
	}

	memset(&sb, 0, sizeof(sb));
	if (getrandom(sb.uuid, sizeof(sb.uuid), 0) != sizeof(sb.uuid)) {
		rc = -EIO;
		snprintf(err, errlen, "cannot get random bytes for the volume uuid");
		goto out_remove;
	}
	sb.total_blocks = o->size / CSDFS_BLOCK_SIZE;
	sb.logical_bytes = logical / CSDFS_BLOCK_SIZE * CSDFS_BLOCK_SIZE;
	sb.chunk_size = o->chunk_size;
	sb.atomic_unit = o->chunk_size > 16384 ? o->chunk_size : 16384;
	sb.codec = o->codec;

	rc = csdfs_io_open_posix(&io, cpath);
	if (rc) {
		snprintf(err, errlen, "cannot open '%s': %s", cpath, strerror(-rc));
		goto out_remove;
	}
	rc = csdfs_super_write(&io, &sb);
	if (!rc)
		rc = csdfs_io_sync(&io);
	csdfs_io_close(&io);
	if (rc) {
		snprintf(err, errlen, "cannot write the superblock: %s", strerror(-rc));
		goto out_remove;
	}
	rc = init_meta(mpath, &sb);
	if (rc) {
		snprintf(err, errlen, "cannot create the metadata environment: %s",
			 strerror(-rc));
		goto out_remove;
	}
	fd = open(path, O_RDONLY | O_DIRECTORY);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
	return 0;

out_remove:
	if (made_container)
		unlink(cpath);
	remove_meta(mpath);
	if (made_dir)
		rmdir(path);
	return rc;
}
