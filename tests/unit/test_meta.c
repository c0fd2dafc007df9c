/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for meta_lmdb.c, the metadata store adapter: put/get/del round
 * trips on several sub-databases, LMDB's error space translated to -errno
 * (-ENOENT, -EEXIST, -EINVAL, -ENOSPC, -EUCLEAN), nested transactions
 * (a child's abort discards only its own changes, whether it is a savepoint
 * undone by a rebuild from redo or LMDB's own nested transaction; a full
 * map fails only the nested one that met it), durability across
 * close/reopen, cursor semantics (seek/next/prev/first/last, the end of the
 * database, delete-then-next across pages), hostile environments (missing,
 * garbage data.mdb, a valid LMDB environment that is not ours), and the
 * big-endian key helpers.
 *
 * Every test works in its own directory under the fixture's temp directory
 * (fixture.h), which the parent process removes, so a failing test leaves
 * nothing behind in /tmp.
 */
#include <check.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Only to build foreign environments csdfs must refuse. */
#include <lmdb.h>

#include "fixture.h"
#include "csdfs/csum.h"
#include "csdfs/io.h"
#include "csdfs/meta.h"

#define MAPSIZE (64ull << 20)

static void key64(uint8_t k[8], uint64_t v)
{
	csdfs_be64_put(k, v);
}

static void expect_val(struct csdfs_txn *txn, enum csdfs_db db, const void *key,
		       size_t klen, const char *want)
{
	struct csdfs_val v;

	ck_assert_int_eq(csdfs_meta_get(txn, db, key, klen, &v), 0);
	ck_assert_uint_eq(v.len, strlen(want));
	ck_assert_int_eq(memcmp(v.data, want, v.len), 0);
}

static void expect_none(struct csdfs_txn *txn, enum csdfs_db db, const void *key,
			size_t klen)
{
	struct csdfs_val v;

	ck_assert_int_eq(csdfs_meta_get(txn, db, key, klen, &v), -ENOENT);
}

static void put_str(struct csdfs_txn *txn, enum csdfs_db db, const void *key,
		    size_t klen, const char *val)
{
	ck_assert_int_eq(csdfs_meta_put(txn, db, key, klen, val, strlen(val), 0), 0);
}

static struct csdfs_meta *open_new(const char *dir)
{
	struct csdfs_meta *m = NULL;

	ck_assert_int_eq(csdfs_meta_open(dir, true, MAPSIZE, NULL, NULL, &m), 0);
	ck_assert_ptr_nonnull(m);
	return m;
}

/* ---- basic round trips --------------------------------------------------- */

START_TEST(test_open_missing)
{
	char dir[512], nodir[600];
	struct csdfs_meta *m = NULL;

	fixture_dir(dir, sizeof(dir), "missing");
	/* An empty directory holds no environment. */
	ck_assert_int_eq(csdfs_meta_open(dir, false, MAPSIZE, NULL, NULL, &m), -ENOENT);
	ck_assert_ptr_null(m);
	/* Nor does a directory that does not exist. */
	snprintf(nodir, sizeof(nodir), "%s/nope", dir);
	ck_assert_int_eq(csdfs_meta_open(nodir, false, MAPSIZE, NULL, NULL, &m), -ENOENT);
	ck_assert_ptr_null(m);
	/* Opening without create must not have created anything. */
	ck_assert_int_ne(access(nodir, F_OK), 0);
	{
		char f[700];

		snprintf(f, sizeof(f), "%s/data.mdb", dir);
		ck_assert_int_ne(access(f, F_OK), 0);
	}
}
END_TEST

START_TEST(test_put_get_del)
{
	char dir[512];
	struct csdfs_meta *m;
	struct csdfs_txn *t;
	struct csdfs_val v;
	uint8_t k[8];
	uint8_t big[16384];

	fixture_dir(dir, sizeof(dir), "putget");
	m = open_new(dir);
	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &t), 0);

	put_str(t, CSDFS_DB_META, "alpha", 5, "one");
	key64(k, 5);
	put_str(t, CSDFS_DB_INODES, k, 8, "inode five");
	put_str(t, CSDFS_DB_FREE, k, 8, "free five");
	put_str(t, CSDFS_DB_XATTRS, "x", 1, "");
	expect_val(t, CSDFS_DB_META, "alpha", 5, "one");
	expect_val(t, CSDFS_DB_INODES, k, 8, "inode five");
	/* The same key in another sub-database is another record. */
	expect_val(t, CSDFS_DB_FREE, k, 8, "free five");
	expect_none(t, CSDFS_DB_CHUNKS, k, 8);
	expect_none(t, CSDFS_DB_META, "alph", 4);
	/* Empty values are values. */
	ck_assert_int_eq(csdfs_meta_get(t, CSDFS_DB_XATTRS, "x", 1, &v), 0);
	ck_assert_uint_eq(v.len, 0);

	/* NOOVERWRITE: -EEXIST and the old value stays. */
	ck_assert_int_eq(csdfs_meta_put(t, CSDFS_DB_META, "alpha", 5, "two", 3,
					CSDFS_PUT_NOOVERWRITE), -EEXIST);
	expect_val(t, CSDFS_DB_META, "alpha", 5, "one");
	ck_assert_int_eq(csdfs_meta_put(t, CSDFS_DB_META, "beta", 4, "b", 1,
					CSDFS_PUT_NOOVERWRITE), 0);
	/* A plain put overwrites. */
	put_str(t, CSDFS_DB_META, "alpha", 5, "three");
	expect_val(t, CSDFS_DB_META, "alpha", 5, "three");

	/* Delete, then it is gone; deleting again is -ENOENT. */
	ck_assert_int_eq(csdfs_meta_del(t, CSDFS_DB_INODES, k, 8), 0);
	expect_none(t, CSDFS_DB_INODES, k, 8);
	ck_assert_int_eq(csdfs_meta_del(t, CSDFS_DB_INODES, k, 8), -ENOENT);
	expect_val(t, CSDFS_DB_FREE, k, 8, "free five");

	/* Large values (overflow pages) round-trip byte for byte. */
	for (size_t i = 0; i < sizeof(big); i++)
		big[i] = (uint8_t)(i * 7 + 3);
	ck_assert_int_eq(csdfs_meta_put(t, CSDFS_DB_SYMLINKS, "big", 3, big,
					sizeof(big), 0), 0);
	ck_assert_int_eq(csdfs_meta_get(t, CSDFS_DB_SYMLINKS, "big", 3, &v), 0);
	ck_assert_uint_eq(v.len, sizeof(big));
	ck_assert_int_eq(memcmp(v.data, big, sizeof(big)), 0);

	ck_assert_int_eq(csdfs_meta_commit(t), 0);
	ck_assert_uint_gt(csdfs_meta_file_bytes(m), 0);
	csdfs_meta_close(m);
	csdfs_meta_close(NULL);   /* harmless */
	csdfs_meta_abort(NULL);   /* harmless */
}
END_TEST

START_TEST(test_bad_keys)
{
	char dir[512], key[600];
	struct csdfs_meta *m;
	struct csdfs_txn *t;
	struct csdfs_val v;

	fixture_dir(dir, sizeof(dir), "badkeys");
	m = open_new(dir);
	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &t), 0);
	memset(key, 'k', sizeof(key));
	/* LMDB's key limit (511 by default): an invalid size, not a crash. */
	ck_assert_int_eq(csdfs_meta_put(t, CSDFS_DB_META, key, sizeof(key), "v", 1, 0),
			 -EINVAL);
	ck_assert_int_eq(csdfs_meta_put(t, CSDFS_DB_META, key, 0, "v", 1, 0), -EINVAL);
	/* A failed put leaves the transaction usable. */
	put_str(t, CSDFS_DB_META, "ok", 2, "fine");
	/* No record can have such a key: a lookup finds nothing (or calls the
	 * key invalid), and never crashes. */
	{
		int rc = csdfs_meta_get(t, CSDFS_DB_META, key, sizeof(key), &v);

		ck_assert_msg(rc == -ENOENT || rc == -EINVAL, "get gave %d", rc);
	}
	ck_assert_int_eq(csdfs_meta_commit(t), 0);
	csdfs_meta_close(m);
}
END_TEST

START_TEST(test_map_full)
{
	char dir[512];
	struct csdfs_meta *m;
	struct csdfs_txn *t;
	static uint8_t val[64 * 1024];
	uint8_t k[8];
	int rc = 0, i;

	fixture_dir(dir, sizeof(dir), "mapfull");
	ck_assert_int_eq(csdfs_meta_open(dir, true, 1u << 20, NULL, NULL, &m), 0);
	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &t), 0);
	put_str(t, CSDFS_DB_META, "keep", 4, "me");
	ck_assert_int_eq(csdfs_meta_commit(t), 0);

	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &t), 0);
	for (i = 0; i < 64 && !rc; i++) {
		key64(k, (uint64_t)i);
		rc = csdfs_meta_put(t, CSDFS_DB_XATTRS, k, 8, val, sizeof(val), 0);
	}
	/* MDB_MAP_FULL is translated, never leaked as an LMDB code. */
	ck_assert_int_eq(rc, -ENOSPC);
	csdfs_meta_abort(t);

	/* The environment survives: earlier commits are intact. */
	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &t), 0);
	expect_val(t, CSDFS_DB_META, "keep", 4, "me");
	csdfs_meta_abort(t);
	csdfs_meta_close(m);
}
END_TEST

/* ---- transactions -------------------------------------------------------- */

START_TEST(test_nested_abort_and_commit)
{
	char dir[512];
	struct csdfs_meta *m;
	struct csdfs_txn *p, *c, *gc;

	fixture_dir(dir, sizeof(dir), "nested");
	m = open_new(dir);

	/* Committed base state. */
	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &p), 0);
	put_str(p, CSDFS_DB_META, "base", 4, "b0");
	ck_assert_int_eq(csdfs_meta_commit(p), 0);

	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &p), 0);
	put_str(p, CSDFS_DB_META, "parent", 6, "p1");

	/* Child: sees the parent's change, makes its own, then aborts. */
	ck_assert_int_eq(csdfs_meta_begin(m, p, &c), 0);
	expect_val(c, CSDFS_DB_META, "parent", 6, "p1");
	put_str(c, CSDFS_DB_META, "child", 5, "c1");
	put_str(c, CSDFS_DB_META, "parent", 6, "p1-by-child");
	ck_assert_int_eq(csdfs_meta_del(c, CSDFS_DB_META, "base", 4), 0);
	put_str(c, CSDFS_DB_DIRENTS, "d", 1, "dirent");
	expect_none(c, CSDFS_DB_META, "base", 4);
	csdfs_meta_abort(c);
	/* A savepoint that changed something is undone by a rebuild. */
	ck_assert_uint_eq(csdfs_meta_rebuilds(m), 1);

	/* The parent keeps its own change and none of the child's. */
	expect_val(p, CSDFS_DB_META, "parent", 6, "p1");
	expect_none(p, CSDFS_DB_META, "child", 5);
	expect_none(p, CSDFS_DB_DIRENTS, "d", 1);
	expect_val(p, CSDFS_DB_META, "base", 4, "b0");

	/* A committed child merges into the parent... */
	ck_assert_int_eq(csdfs_meta_begin(m, p, &c), 0);
	put_str(c, CSDFS_DB_META, "child2", 6, "c2");
	/* ...including its own aborted and committed grandchildren. */
	ck_assert_int_eq(csdfs_meta_begin(m, c, &gc), 0);
	put_str(gc, CSDFS_DB_META, "grand-aborted", 13, "x");
	csdfs_meta_abort(gc);
	ck_assert_int_eq(csdfs_meta_begin(m, c, &gc), 0);
	put_str(gc, CSDFS_DB_META, "grand", 5, "g");
	ck_assert_int_eq(csdfs_meta_commit(gc), 0);
	ck_assert_int_eq(csdfs_meta_commit(c), 0);
	ck_assert_uint_eq(csdfs_meta_rebuilds(m), 2);
	/* An abort that changed nothing costs no rebuild. */
	ck_assert_int_eq(csdfs_meta_begin(m, p, &c), 0);
	expect_val(c, CSDFS_DB_META, "child2", 6, "c2");
	csdfs_meta_abort(c);
	ck_assert_uint_eq(csdfs_meta_rebuilds(m), 2);
	expect_val(p, CSDFS_DB_META, "child2", 6, "c2");
	expect_val(p, CSDFS_DB_META, "grand", 5, "g");
	expect_none(p, CSDFS_DB_META, "grand-aborted", 13);
	ck_assert_int_eq(csdfs_meta_commit(p), 0);

	/* An aborted top-level transaction leaves no trace. */
	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &p), 0);
	put_str(p, CSDFS_DB_META, "lost", 4, "l");
	ck_assert_int_eq(csdfs_meta_begin(m, p, &c), 0);
	put_str(c, CSDFS_DB_META, "lost-child", 10, "lc");
	ck_assert_int_eq(csdfs_meta_commit(c), 0);
	csdfs_meta_abort(p);
	csdfs_meta_close(m);

	/* Reopen: exactly the committed state. */
	ck_assert_int_eq(csdfs_meta_open(dir, false, MAPSIZE, NULL, NULL, &m), 0);
	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &p), 0);
	expect_val(p, CSDFS_DB_META, "base", 4, "b0");
	expect_val(p, CSDFS_DB_META, "parent", 6, "p1");
	expect_val(p, CSDFS_DB_META, "child2", 6, "c2");
	expect_val(p, CSDFS_DB_META, "grand", 5, "g");
	expect_none(p, CSDFS_DB_META, "child", 5);
	expect_none(p, CSDFS_DB_META, "grand-aborted", 13);
	expect_none(p, CSDFS_DB_META, "lost", 4);
	expect_none(p, CSDFS_DB_META, "lost-child", 10);
	expect_none(p, CSDFS_DB_DIRENTS, "d", 1);
	csdfs_meta_abort(p);
	csdfs_meta_close(m);
}
END_TEST

/* A nested transaction that meets a full map fails alone: LMDB failed the
 * whole transaction underneath, and the rebuild brings back every change
 * made before it in the same top-level one. */
START_TEST(test_nested_map_full)
{
	char dir[512];
	struct csdfs_meta *m;
	struct csdfs_txn *p, *c;
	static uint8_t val[64 * 1024];
	uint8_t k[8];
	int rc = 0, i, n;

	fixture_dir(dir, sizeof(dir), "nestedfull");
	ck_assert_int_eq(csdfs_meta_open(dir, true, 1u << 20, NULL, NULL, &m), 0);
	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &p), 0);
	put_str(p, CSDFS_DB_META, "keep", 4, "me");
	ck_assert_int_eq(csdfs_meta_commit(p), 0);

	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &p), 0);
	put_str(p, CSDFS_DB_META, "group", 5, "g");
	ck_assert_int_eq(csdfs_meta_begin(m, p, &c), 0);
	put_str(c, CSDFS_DB_META, "op1", 3, "done");
	ck_assert_int_eq(csdfs_meta_commit(c), 0);

	/* This one fills the map and gives up. */
	ck_assert_int_eq(csdfs_meta_begin(m, p, &c), 0);
	ck_assert_int_eq(csdfs_meta_del(c, CSDFS_DB_META, "keep", 4), 0);
	for (i = 0; i < 64 && !rc; i++) {
		key64(k, (uint64_t)i);
		rc = csdfs_meta_put(c, CSDFS_DB_XATTRS, k, 8, val, sizeof(val), 0);
	}
	ck_assert_int_eq(rc, -ENOSPC);
	n = i - 1;
	ck_assert_int_gt(n, 0);
	csdfs_meta_abort(c);
	ck_assert_uint_eq(csdfs_meta_rebuilds(m), 1);
	ck_assert_int_eq(csdfs_meta_broken(p), 0);

	/* One that fills it and commits anyway gets the failure, and its
	 * changes are undone all the same. */
	rc = 0;
	ck_assert_int_eq(csdfs_meta_begin(m, p, &c), 0);
	for (i = 100; i < 164 && !rc; i++) {
		key64(k, (uint64_t)i);
		rc = csdfs_meta_put(c, CSDFS_DB_XATTRS, k, 8, val, sizeof(val), 0);
	}
	ck_assert_int_eq(rc, -ENOSPC);
	ck_assert_int_ne(csdfs_meta_commit(c), 0);
	ck_assert_uint_eq(csdfs_meta_rebuilds(m), 2);

	/* The group goes on: it sees its own changes, none of the failed
	 * ones, and commits. */
	expect_val(p, CSDFS_DB_META, "group", 5, "g");
	expect_val(p, CSDFS_DB_META, "op1", 3, "done");
	expect_val(p, CSDFS_DB_META, "keep", 4, "me");
	key64(k, 0);
	expect_none(p, CSDFS_DB_XATTRS, k, 8);
	key64(k, 100);
	expect_none(p, CSDFS_DB_XATTRS, k, 8);
	ck_assert_int_eq(csdfs_meta_begin(m, p, &c), 0);
	put_str(c, CSDFS_DB_META, "op2", 3, "after");
	ck_assert_int_eq(csdfs_meta_commit(c), 0);
	ck_assert_int_eq(csdfs_meta_commit(p), 0);
	csdfs_meta_close(m);

	ck_assert_int_eq(csdfs_meta_open(dir, false, 1u << 20, NULL, NULL, &m), 0);
	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &p), 0);
	expect_val(p, CSDFS_DB_META, "keep", 4, "me");
	expect_val(p, CSDFS_DB_META, "group", 5, "g");
	expect_val(p, CSDFS_DB_META, "op1", 3, "done");
	expect_val(p, CSDFS_DB_META, "op2", 3, "after");
	key64(k, (uint64_t)(n - 1));
	expect_none(p, CSDFS_DB_XATTRS, k, 8);
	csdfs_meta_abort(p);
	csdfs_meta_close(m);
}
END_TEST

/* Past the redo a top-level transaction keeps (8 MiB), nested ones are
 * LMDB's own: aborts still discard exactly their changes, without a
 * rebuild; and a nested one whose own changes outgrow the redo is undone
 * by a rebuild. */
START_TEST(test_nested_past_redo)
{
	char dir[512];
	struct csdfs_meta *m;
	struct csdfs_txn *p, *c;
	static uint8_t val[60 * 1024];
	uint8_t k[8];
	int i;

	fixture_dir(dir, sizeof(dir), "pastredo");
	m = open_new(dir);
	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &p), 0);
	put_str(p, CSDFS_DB_META, "base", 4, "b");
	/* A nested one that outgrows the redo itself. */
	ck_assert_int_eq(csdfs_meta_begin(m, p, &c), 0);
	for (i = 0; i < 160; i++) {
		key64(k, (uint64_t)i);
		ck_assert_int_eq(csdfs_meta_put(c, CSDFS_DB_XATTRS, k, 8, val,
						sizeof(val), 0), 0);
	}
	csdfs_meta_abort(c);
	ck_assert_uint_eq(csdfs_meta_rebuilds(m), 1);
	expect_val(p, CSDFS_DB_META, "base", 4, "b");
	key64(k, 0);
	expect_none(p, CSDFS_DB_XATTRS, k, 8);

	/* The top-level one outgrows it... */
	for (i = 0; i < 160; i++) {
		key64(k, (uint64_t)i);
		ck_assert_int_eq(csdfs_meta_put(p, CSDFS_DB_XATTRS, k, 8, val,
						sizeof(val), 0), 0);
	}
	/* ...so this nested one is LMDB's. */
	ck_assert_int_eq(csdfs_meta_begin(m, p, &c), 0);
	put_str(c, CSDFS_DB_META, "gone", 4, "x");
	ck_assert_int_eq(csdfs_meta_del(c, CSDFS_DB_META, "base", 4), 0);
	csdfs_meta_abort(c);
	ck_assert_uint_eq(csdfs_meta_rebuilds(m), 1);
	expect_val(p, CSDFS_DB_META, "base", 4, "b");
	expect_none(p, CSDFS_DB_META, "gone", 4);
	ck_assert_int_eq(csdfs_meta_begin(m, p, &c), 0);
	put_str(c, CSDFS_DB_META, "kept", 4, "k");
	ck_assert_int_eq(csdfs_meta_commit(c), 0);
	ck_assert_int_eq(csdfs_meta_commit(p), 0);

	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &p), 0);
	expect_val(p, CSDFS_DB_META, "kept", 4, "k");
	key64(k, 159);
	ck_assert_int_eq(csdfs_meta_get(p, CSDFS_DB_XATTRS, k, 8, &(struct csdfs_val){ 0 }), 0);
	csdfs_meta_abort(p);
	csdfs_meta_close(m);
}
END_TEST

START_TEST(test_persist_reopen)
{
	char dir[512];
	struct csdfs_meta *m;
	struct csdfs_txn *t;
	uint8_t k[8];

	fixture_dir(dir, sizeof(dir), "persist");
	m = open_new(dir);
	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &t), 0);
	for (int db = 0; db < CSDFS_DB_COUNT; db++) {
		char val[32];

		key64(k, (uint64_t)db * 1000 + 1);
		snprintf(val, sizeof(val), "db%d", db);
		put_str(t, (enum csdfs_db)db, k, 8, val);
	}
	ck_assert_int_eq(csdfs_meta_commit(t), 0);
	csdfs_meta_close(m);

	/* Reopen twice (the second reopen sees the first one's state). */
	for (int round = 0; round < 2; round++) {
		ck_assert_int_eq(csdfs_meta_open(dir, false, MAPSIZE, NULL, NULL, &m), 0);
		ck_assert_int_eq(csdfs_meta_begin(m, NULL, &t), 0);
		for (int db = 0; db < CSDFS_DB_COUNT; db++) {
			char val[32];

			key64(k, (uint64_t)db * 1000 + 1);
			snprintf(val, sizeof(val), "db%d", db);
			expect_val(t, (enum csdfs_db)db, k, 8, val);
		}
		ck_assert_int_eq(csdfs_meta_commit(t), 0);
		csdfs_meta_close(m);
	}
	/* create=true on an existing environment opens it, keeping data. */
	m = open_new(dir);
	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &t), 0);
	key64(k, 1);
	expect_val(t, CSDFS_DB_META, k, 8, "db0");
	csdfs_meta_abort(t);
	csdfs_meta_close(m);
}
END_TEST

/* ---- cursors ------------------------------------------------------------- */

static uint64_t kv(const struct csdfs_val *k)
{
	ck_assert_uint_eq(k->len, 8);
	return csdfs_be64_get(k->data);
}

START_TEST(test_cursor_semantics)
{
	char dir[512];
	struct csdfs_meta *m;
	struct csdfs_txn *t;
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	uint8_t key[8];

	fixture_dir(dir, sizeof(dir), "cursor");
	m = open_new(dir);
	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &t), 0);

	/* An empty database: every positioning call is -ENOENT. */
	ck_assert_int_eq(csdfs_cursor_open(t, CSDFS_DB_CHUNKS, &cur), 0);
	ck_assert_int_eq(csdfs_cursor_first(cur, &k, &v), -ENOENT);
	ck_assert_int_eq(csdfs_cursor_last(cur, &k, &v), -ENOENT);
	key64(key, 0);
	ck_assert_int_eq(csdfs_cursor_seek(cur, key, 8, &k, &v), -ENOENT);
	csdfs_cursor_close(cur);

	for (uint64_t i = 10; i <= 100; i += 10) {
		char val[16];

		key64(key, i);
		snprintf(val, sizeof(val), "v%llu", (unsigned long long)i);
		put_str(t, CSDFS_DB_CHUNKS, key, 8, val);
	}
	ck_assert_int_eq(csdfs_cursor_open(t, CSDFS_DB_CHUNKS, &cur), 0);
	key64(key, 25);
	ck_assert_int_eq(csdfs_cursor_seek(cur, key, 8, &k, &v), 0);
	ck_assert_uint_eq(kv(&k), 30);
	ck_assert_uint_eq(v.len, 3);
	ck_assert_int_eq(memcmp(v.data, "v30", 3), 0);
	ck_assert_int_eq(csdfs_cursor_next(cur, &k, &v), 0);
	ck_assert_uint_eq(kv(&k), 40);
	ck_assert_int_eq(csdfs_cursor_prev(cur, &k, &v), 0);
	ck_assert_uint_eq(kv(&k), 30);
	ck_assert_int_eq(csdfs_cursor_prev(cur, &k, &v), 0);
	ck_assert_uint_eq(kv(&k), 20);
	/* Exact match. */
	key64(key, 70);
	ck_assert_int_eq(csdfs_cursor_seek(cur, key, 8, &k, &v), 0);
	ck_assert_uint_eq(kv(&k), 70);
	/* Before the first key: the first key. */
	key64(key, 0);
	ck_assert_int_eq(csdfs_cursor_seek(cur, key, 8, &k, &v), 0);
	ck_assert_uint_eq(kv(&k), 10);
	ck_assert_int_eq(csdfs_cursor_first(cur, &k, &v), 0);
	ck_assert_uint_eq(kv(&k), 10);
	ck_assert_int_eq(csdfs_cursor_prev(cur, &k, &v), -ENOENT);
	ck_assert_int_eq(csdfs_cursor_last(cur, &k, &v), 0);
	ck_assert_uint_eq(kv(&k), 100);
	ck_assert_int_eq(csdfs_cursor_next(cur, &k, &v), -ENOENT);
	/* Past the end. */
	key64(key, 101);
	ck_assert_int_eq(csdfs_cursor_seek(cur, key, 8, &k, &v), -ENOENT);
	key64(key, UINT64_MAX);
	ck_assert_int_eq(csdfs_cursor_seek(cur, key, 8, &k, &v), -ENOENT);
	/* NULL outputs are allowed. */
	ck_assert_int_eq(csdfs_cursor_first(cur, NULL, NULL), 0);

	/* Delete 30: the next item after the deleted one is 40. */
	key64(key, 30);
	ck_assert_int_eq(csdfs_cursor_seek(cur, key, 8, &k, &v), 0);
	ck_assert_int_eq(csdfs_cursor_del(cur), 0);
	ck_assert_int_eq(csdfs_cursor_next(cur, &k, &v), 0);
	ck_assert_uint_eq(kv(&k), 40);
	key64(key, 30);
	expect_none(t, CSDFS_DB_CHUNKS, key, 8);
	/* Delete the last item: nothing follows. */
	ck_assert_int_eq(csdfs_cursor_last(cur, &k, &v), 0);
	ck_assert_int_eq(csdfs_cursor_del(cur), 0);
	ck_assert_int_eq(csdfs_cursor_next(cur, &k, &v), -ENOENT);
	ck_assert_int_eq(csdfs_cursor_last(cur, &k, &v), 0);
	ck_assert_uint_eq(kv(&k), 90);
	/* Delete the first item: next is the new first. */
	ck_assert_int_eq(csdfs_cursor_first(cur, &k, &v), 0);
	ck_assert_int_eq(csdfs_cursor_del(cur), 0);
	ck_assert_int_eq(csdfs_cursor_next(cur, &k, &v), 0);
	ck_assert_uint_eq(kv(&k), 20);
	csdfs_cursor_close(cur);
	csdfs_cursor_close(NULL);  /* harmless */
	ck_assert_int_eq(csdfs_meta_commit(t), 0);
	csdfs_meta_close(m);
}
END_TEST

START_TEST(test_cursor_numeric_order)
{
	static const uint64_t keys[] = {
		0, 1, 255, 256, 65535, 65536, 1ull << 32, (1ull << 32) + 1,
		1ull << 40, 0x00ff00ff00ff00ffull, 1ull << 63, UINT64_MAX - 1,
		UINT64_MAX,
	};
	size_t nk = sizeof(keys) / sizeof(keys[0]), i = 0;
	char dir[512];
	struct csdfs_meta *m;
	struct csdfs_txn *t;
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	uint8_t key[8];
	int rc;

	fixture_dir(dir, sizeof(dir), "order");
	m = open_new(dir);
	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &t), 0);
	/* Insert in reverse: iteration must still be numeric. */
	for (size_t j = nk; j-- > 0;) {
		key64(key, keys[j]);
		put_str(t, CSDFS_DB_PHYS, key, 8, "x");
	}
	ck_assert_int_eq(csdfs_cursor_open(t, CSDFS_DB_PHYS, &cur), 0);
	for (rc = csdfs_cursor_first(cur, &k, &v); !rc; rc = csdfs_cursor_next(cur, &k, &v))
		ck_assert_uint_eq(kv(&k), keys[i++]);
	ck_assert_int_eq(rc, -ENOENT);
	ck_assert_uint_eq(i, nk);
	csdfs_cursor_close(cur);
	csdfs_meta_abort(t);
	csdfs_meta_close(m);
}
END_TEST

/*
 * Delete every other key through the cursor in a database of several
 * pages: "a following cursor_next yields the item after the deleted one"
 * must hold at page boundaries and through page merges too.
 */
START_TEST(test_cursor_del_many)
{
	enum { N = 5000 };
	char dir[512];
	struct csdfs_meta *m;
	struct csdfs_txn *t;
	struct csdfs_cursor *cur;
	struct csdfs_val k, v;
	uint8_t key[8], val[40];
	uint64_t want = 0, count = 0;
	int rc;

	fixture_dir(dir, sizeof(dir), "delmany");
	m = open_new(dir);
	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &t), 0);
	memset(val, 'v', sizeof(val));
	for (uint64_t i = 0; i < N; i++) {
		key64(key, i);
		ck_assert_int_eq(csdfs_meta_put(t, CSDFS_DB_CHUNKS, key, 8, val,
						sizeof(val), 0), 0);
	}
	ck_assert_int_eq(csdfs_meta_commit(t), 0);

	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &t), 0);
	ck_assert_int_eq(csdfs_cursor_open(t, CSDFS_DB_CHUNKS, &cur), 0);
	rc = csdfs_cursor_first(cur, &k, &v);
	while (!rc) {
		uint64_t got = kv(&k);

		if (got != want)
			ck_abort_msg("cursor at %llu, expected %llu",
				     (unsigned long long)got, (unsigned long long)want);
		if (!(got % 2)) {
			if (csdfs_cursor_del(cur))
				ck_abort_msg("cursor_del at %llu failed", (unsigned long long)got);
		}
		want++;
		rc = csdfs_cursor_next(cur, &k, &v);
	}
	ck_assert_int_eq(rc, -ENOENT);
	ck_assert_uint_eq(want, N);
	csdfs_cursor_close(cur);
	ck_assert_int_eq(csdfs_meta_commit(t), 0);

	/* Exactly the odd keys are left. */
	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &t), 0);
	ck_assert_int_eq(csdfs_cursor_open(t, CSDFS_DB_CHUNKS, &cur), 0);
	for (rc = csdfs_cursor_first(cur, &k, &v); !rc; rc = csdfs_cursor_next(cur, &k, &v)) {
		if (kv(&k) != 2 * count + 1)
			ck_abort_msg("key %llu left, expected %llu",
				     (unsigned long long)kv(&k),
				     (unsigned long long)(2 * count + 1));
		count++;
	}
	ck_assert_uint_eq(count, N / 2);
	csdfs_cursor_close(cur);
	csdfs_meta_abort(t);
	csdfs_meta_close(m);
}
END_TEST

/* ---- hostile environments ------------------------------------------------ */

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, len), (ssize_t)len);
	ck_assert_int_eq(close(fd), 0);
}

START_TEST(test_garbage_env)
{
	static const size_t sizes[] = { 100, 4096, 8192, 65536 };
	char dir[512], f[600];
	struct csdfs_meta *m = NULL;
	static unsigned char junk[65536];
	uint64_t s = 0x1234567887654321ull;

	for (size_t i = 0; i < sizeof(junk); i++) {
		s ^= s >> 12;
		s ^= s << 25;
		s ^= s >> 27;
		junk[i] = (unsigned char)((s * 0x2545f4914f6cdd1dull) >> 56);
	}
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char name[32];
		int rc;

		snprintf(name, sizeof(name), "garbage%zu", sizes[i]);
		fixture_dir(dir, sizeof(dir), name);
		snprintf(f, sizeof(f), "%s/data.mdb", dir);
		write_file(f, junk, sizes[i]);
		rc = csdfs_meta_open(dir, false, MAPSIZE, NULL, NULL, &m);
		ck_assert_msg(rc == -EUCLEAN,
			      "%zu garbage bytes: open gave %d (%s), want -EUCLEAN",
			      sizes[i], rc, strerror(-rc));
		ck_assert_ptr_null(m);
		/* create=true must not "repair" garbage either. */
		rc = csdfs_meta_open(dir, true, MAPSIZE, NULL, NULL, &m);
		ck_assert_msg(rc == -EUCLEAN, "%zu garbage bytes, create: open gave %d (%s)",
			      sizes[i], rc, strerror(-rc));
	}
}
END_TEST

START_TEST(test_empty_data_file)
{
	char dir[512], f[600];
	struct csdfs_meta *m = NULL;
	int rc;

	/* A zero-length data.mdb (a crash during creation) is not a csdfs
	 * environment: refuse it rather than silently start a new one. */
	fixture_dir(dir, sizeof(dir), "empty");
	snprintf(f, sizeof(f), "%s/data.mdb", dir);
	write_file(f, "", 0);
	rc = csdfs_meta_open(dir, false, MAPSIZE, NULL, NULL, &m);
	ck_assert_msg(rc == -EUCLEAN, "open gave %d (%s)", rc, strerror(-rc));
}
END_TEST

/* Build an LMDB environment at @dir holding what @fill puts in it. */
static void make_foreign(const char *dir, void (*fill)(MDB_txn *txn))
{
	MDB_env *env;
	MDB_txn *txn;

	ck_assert_int_eq(mdb_env_create(&env), 0);
	ck_assert_int_eq(mdb_env_set_maxdbs(env, 8), 0);
	ck_assert_int_eq(mdb_env_set_mapsize(env, 16u << 20), 0);
	ck_assert_int_eq(mdb_env_open(env, dir, MDB_NOLOCK, 0600), 0);
	ck_assert_int_eq(mdb_txn_begin(env, NULL, 0, &txn), 0);
	fill(txn);
	ck_assert_int_eq(mdb_txn_commit(txn), 0);
	mdb_env_close(env);
}

static void fill_plain(MDB_txn *txn)
{
	MDB_dbi dbi;
	MDB_val k = { 5, "hello" }, v = { 5, "world" };

	ck_assert_int_eq(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
	ck_assert_int_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
}

static void fill_partial(MDB_txn *txn)
{
	MDB_dbi dbi;

	/* Three of csdfs's sub-databases, not all of them. */
	ck_assert_int_eq(mdb_dbi_open(txn, "meta", MDB_CREATE, &dbi), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, "inodes", MDB_CREATE, &dbi), 0);
	ck_assert_int_eq(mdb_dbi_open(txn, "dirents", MDB_CREATE, &dbi), 0);
}

static void fill_impostor(MDB_txn *txn)
{
	MDB_dbi dbi;
	MDB_val k = { 4, "meta" }, v = { 3, "abc" };

	/* "meta" exists in the main database, but as a plain record. */
	ck_assert_int_eq(mdb_dbi_open(txn, NULL, 0, &dbi), 0);
	ck_assert_int_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
}

START_TEST(test_foreign_env)
{
	static const struct {
		const char *name;
		void (*fill)(MDB_txn *txn);
	} cases[] = {
		{ "plain", fill_plain },
		{ "partial", fill_partial },
		{ "impostor", fill_impostor },
	};
	char dir[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct csdfs_meta *m = NULL;
		int rc;

		fixture_dir(dir, sizeof(dir), cases[i].name);
		make_foreign(dir, cases[i].fill);
		rc = csdfs_meta_open(dir, false, MAPSIZE, NULL, NULL, &m);
		ck_assert_msg(rc == -EUCLEAN, "%s env: open gave %d (%s), want -EUCLEAN",
			      cases[i].name, rc, strerror(-rc));
		ck_assert_ptr_null(m);
	}
}
END_TEST

/* ---- durability record ---------------------------------------------------- */

/* Commit "k" = @val in a top-level transaction: durable on return. */
static void commit_k(struct csdfs_meta *m, const char *val)
{
	struct csdfs_txn *t;

	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &t), 0);
	put_str(t, CSDFS_DB_META, "k", 1, val);
	ck_assert_int_eq(csdfs_meta_commit(t), 0);
}

/* Commit "k" = @val as a group commit, and leave it unsynced. */
static void commit_k_unsynced(struct csdfs_meta *m, const char *val)
{
	struct csdfs_txn *t;

	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &t), 0);
	put_str(t, CSDFS_DB_META, "k", 1, val);
	ck_assert_int_eq(csdfs_meta_commit_group(t), 0);
}

static void expect_k(const char *dir, const char *want)
{
	struct csdfs_meta *m = NULL;
	struct csdfs_txn *t;

	ck_assert_int_eq(csdfs_meta_open(dir, false, MAPSIZE, NULL, NULL, &m), 0);
	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &t), 0);
	expect_val(t, CSDFS_DB_META, "k", 1, want);
	csdfs_meta_abort(t);
	csdfs_meta_close(m);
}

/* LMDB's id of the last commit, as the environment reports it. */
static uint64_t last_txnid(const char *dir)
{
	MDB_env *env;
	MDB_envinfo info;

	ck_assert_int_eq(mdb_env_create(&env), 0);
	ck_assert_int_eq(mdb_env_set_maxdbs(env, CSDFS_DB_COUNT + 2), 0);
	ck_assert_int_eq(mdb_env_open(env, dir, MDB_NOLOCK | MDB_RDONLY, 0600), 0);
	ck_assert_int_eq(mdb_env_info(env, &info), 0);
	mdb_env_close(env);
	return info.me_last_txnid;
}

/* Write record slot @slot saying @id (a well-formed one). */
static void write_record(const char *dir, int slot, uint64_t id)
{
	unsigned char p[512] = { 0 };
	uint32_t magic = htole32(0x53594e43u), ver = htole32(1), crc;
	uint64_t v = htole64(id);
	char path[600];
	int fd;

	memcpy(p, &magic, 4);
	memcpy(p + 4, &ver, 4);
	memcpy(p + 8, &v, 8);
	crc = htole32(csdfs_crc32c(0, p, 16));
	memcpy(p + 16, &crc, 4);
	snprintf(path, sizeof(path), "%s/synced", dir);
	fd = open(path, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, p, sizeof(p), slot * 512), (ssize_t)sizeof(p));
	close(fd);
}

/* A new environment in test dir @name whose "k" is "durable" in a synced
 * commit, then "unsynced" in one never synced. Returns the synced id. */
static uint64_t env_one_unsynced(const char *name, char *dir, size_t len)
{
	struct csdfs_meta *m;
	uint64_t id;

	fixture_dir(dir, len, name);
	m = open_new(dir);
	commit_k(m, "durable");
	id = last_txnid(dir);
	commit_k_unsynced(m, "unsynced");
	ck_assert_uint_eq(last_txnid(dir), id + 1);   /* its meta page is there */
	csdfs_meta_close(m);
	return id;
}

/* A group commit never synced (a crash before csdfs_meta_sync, whatever
 * of it reached the disk) is rolled back at the next open; the state
 * before it is intact and takes new commits. */
START_TEST(test_unsynced_commit_rolled_back)
{
	char dir[512];
	struct csdfs_meta *m;
	uint64_t id;

	id = env_one_unsynced("rollback", dir, sizeof(dir));

	expect_k(dir, "durable");
	ck_assert_uint_eq(last_txnid(dir), id);
	ck_assert_int_eq(csdfs_meta_open(dir, false, MAPSIZE, NULL, NULL, &m), 0);
	commit_k(m, "after");
	csdfs_meta_close(m);
	expect_k(dir, "after");

	/* Synced, the same commit stays. */
	ck_assert_int_eq(csdfs_meta_open(dir, false, MAPSIZE, NULL, NULL, &m), 0);
	commit_k_unsynced(m, "synced");
	ck_assert_int_eq(csdfs_meta_sync(m), 0);
	csdfs_meta_close(m);
	expect_k(dir, "synced");
}
END_TEST

static int install_fault(struct csdfs_io *io, void *arg)
{
	return csdfs_io_fault_install(io, arg);
}

/* A rollback that cannot be made durable fails the open, with the
 * environment still one commit ahead of its record; a later open (the disk
 * working again) rolls it back. */
START_TEST(test_rollback_sync_fails)
{
	/* The first sync of either file (the rollback's, of data.mdb) fails. */
	struct csdfs_io_fault f = { .kinds = CSDFS_IO_SYNC, .nth = 1, .err = EIO };
	char dir[512];
	struct csdfs_meta *m = NULL;
	uint64_t id;

	id = env_one_unsynced("rollbackfail", dir, sizeof(dir));
	ck_assert_int_eq(csdfs_meta_open(dir, false, MAPSIZE, install_fault, &f, &m), -EIO);
	ck_assert_uint_eq(f.failed, 1);                 /* it did fire */
	ck_assert_ptr_null(m);
	expect_k(dir, "durable");
	ck_assert_uint_eq(last_txnid(dir), id);
}
END_TEST

/* ---- the companion -------------------------------------------------------- */

/* A companion that counts its calls, fails with companion_rc, and with
 * companion_hold set waits (holding the sync) until it is cleared. */
static pthread_mutex_t companion_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t companion_cv = PTHREAD_COND_INITIALIZER;
static int companion_calls, companion_rc;
static bool companion_hold, companion_in;

static int companion(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&companion_mu);
	companion_calls++;
	companion_in = true;
	pthread_cond_broadcast(&companion_cv);
	while (companion_hold)
		pthread_cond_wait(&companion_cv, &companion_mu);
	pthread_mutex_unlock(&companion_mu);
	return companion_rc;
}

/* Every sync that records a commit runs the companion, and records nothing
 * if it fails: the commit is rolled back at the next open. A sync with
 * nothing to record runs nothing. */
START_TEST(test_companion_gates_record)
{
	char dir[512];
	struct csdfs_meta *m;

	fixture_dir(dir, sizeof(dir), "companion");
	m = open_new(dir);
	csdfs_meta_set_companion(m, companion, NULL);
	commit_k(m, "one");
	ck_assert_int_eq(companion_calls, 1);
	ck_assert_int_eq(csdfs_meta_sync(m), 0);
	ck_assert_int_eq(companion_calls, 1);

	commit_k_unsynced(m, "two");
	companion_rc = -EIO;
	ck_assert_int_eq(csdfs_meta_sync(m), -EIO);
	ck_assert_int_eq(companion_calls, 2);
	csdfs_meta_close(m);
	expect_k(dir, "one");
	companion_rc = 0;

	/* A commit made while the one before is unrecorded runs it too. */
	m = NULL;
	ck_assert_int_eq(csdfs_meta_open(dir, false, MAPSIZE, NULL, NULL, &m), 0);
	csdfs_meta_set_companion(m, companion, NULL);
	commit_k_unsynced(m, "three");
	commit_k_unsynced(m, "four");
	ck_assert_int_eq(companion_calls, 3);
	csdfs_meta_close(m);
	expect_k(dir, "three");
}
END_TEST

static void *sync_thread(void *arg)
{
	return (void *)(intptr_t)csdfs_meta_sync(arg);
}

/* A nested commit never waits for a sync in progress: its caller (an
 * operation ending under the volume lock) would stall every other. */
START_TEST(test_nested_commit_beside_sync)
{
	char dir[512];
	struct csdfs_meta *m;
	struct csdfs_txn *top, *child;
	pthread_t t;
	void *ret;

	fixture_dir(dir, sizeof(dir), "beside");
	m = open_new(dir);
	csdfs_meta_set_companion(m, companion, NULL);
	commit_k_unsynced(m, "one");
	companion_hold = true;
	ck_assert_int_eq(pthread_create(&t, NULL, sync_thread, m), 0);
	pthread_mutex_lock(&companion_mu);
	while (!companion_in)
		pthread_cond_wait(&companion_cv, &companion_mu);
	pthread_mutex_unlock(&companion_mu);

	/* The sync now holds its lock, inside the companion. */
	ck_assert_int_eq(csdfs_meta_begin(m, NULL, &top), 0);
	ck_assert_int_eq(csdfs_meta_begin(m, top, &child), 0);
	put_str(child, CSDFS_DB_META, "k", 1, "two");
	ck_assert_int_eq(csdfs_meta_commit(child), 0);
	expect_val(top, CSDFS_DB_META, "k", 1, "two");

	pthread_mutex_lock(&companion_mu);
	companion_hold = false;
	pthread_cond_broadcast(&companion_cv);
	pthread_mutex_unlock(&companion_mu);
	ck_assert_int_eq(pthread_join(t, &ret), 0);
	ck_assert_int_eq((int)(intptr_t)ret, 0);
	ck_assert_int_eq(csdfs_meta_commit(top), 0);
	csdfs_meta_close(m);
	expect_k(dir, "two");
}
END_TEST

/* The next commit makes the one before it durable first: never two
 * commits ahead of the record. */
START_TEST(test_commit_syncs_previous)
{
	char dir[512];
	struct csdfs_meta *m;

	fixture_dir(dir, sizeof(dir), "twoahead");
	m = open_new(dir);
	commit_k_unsynced(m, "first");
	commit_k_unsynced(m, "second");
	csdfs_meta_close(m);
	expect_k(dir, "first");
}
END_TEST

/* A torn record slot (a crash while it was written, before the sync that
 * would have acknowledged the commit) counts as not written: the other
 * slot names the commit before, which the open returns to. */
START_TEST(test_torn_record)
{
	char dir[512], path[600];
	struct csdfs_meta *m;
	uint64_t id;
	int fd;

	fixture_dir(dir, sizeof(dir), "torn");
	m = open_new(dir);
	commit_k(m, "one");
	commit_k(m, "two");
	csdfs_meta_close(m);
	id = last_txnid(dir);
	snprintf(path, sizeof(path), "%s/synced", dir);
	fd = open(path, O_WRONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "garbage!", 8, (off_t)(id % 2) * 512 + 8), 8);
	close(fd);
	expect_k(dir, "one");
	ck_assert_uint_eq(last_txnid(dir), id - 1);
}
END_TEST

/* A record that cannot describe the environment is refused, not trusted:
 * two commits behind it, or ahead of it. No record at all is an
 * environment from before records: trusted, and given one. */
START_TEST(test_record_mismatch)
{
	char dir[512], path[600];
	struct csdfs_meta *m = NULL;
	uint64_t id;
	struct stat st;

	fixture_dir(dir, sizeof(dir), "mismatch");
	m = open_new(dir);
	commit_k(m, "one");
	commit_k(m, "two");
	commit_k(m, "three");
	csdfs_meta_close(m);
	id = last_txnid(dir);

	write_record(dir, 0, id - 2);
	write_record(dir, 1, id - 3);
	m = NULL;
	ck_assert_int_eq(csdfs_meta_open(dir, false, MAPSIZE, NULL, NULL, &m), -EUCLEAN);
	ck_assert_ptr_null(m);
	write_record(dir, (int)((id + 1) % 2), id + 1);
	ck_assert_int_eq(csdfs_meta_open(dir, false, MAPSIZE, NULL, NULL, &m), -EUCLEAN);
	ck_assert_uint_eq(last_txnid(dir), id);        /* nothing was changed */

	snprintf(path, sizeof(path), "%s/synced", dir);
	ck_assert_int_eq(unlink(path), 0);
	expect_k(dir, "three");
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_ge(st.st_size, 512);
	expect_k(dir, "three");
}
END_TEST

/* An open that finds data.mdb at the recorded commit writes nothing: the
 * record keeps the (old) time it was given, and its commit stays. */
START_TEST(test_open_matching_record_writes_nothing)
{
	const struct timespec old[2] = { { 946684800, 0 }, { 946684800, 0 } };
	char dir[512], path[600];
	struct csdfs_meta *m;
	struct stat st;
	uint64_t id;

	fixture_dir(dir, sizeof(dir), "quietopen");
	m = open_new(dir);
	commit_k(m, "one");
	csdfs_meta_close(m);
	id = last_txnid(dir);
	snprintf(path, sizeof(path), "%s/synced", dir);
	ck_assert_int_eq(utimensat(AT_FDCWD, path, old, 0), 0);

	expect_k(dir, "one");
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_mtim.tv_sec, old[1].tv_sec);
	ck_assert_uint_eq(last_txnid(dir), id);

	/* A commit after it still moves the record. */
	ck_assert_int_eq(csdfs_meta_open(dir, false, MAPSIZE, NULL, NULL, &m), 0);
	commit_k(m, "two");
	csdfs_meta_close(m);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_gt(st.st_mtim.tv_sec, old[1].tv_sec);
	expect_k(dir, "two");
}
END_TEST

/* ---- key helpers --------------------------------------------------------- */

START_TEST(test_be64)
{
	uint8_t a[8], b[8];
	uint64_t s = 0xfeedfacecafebeefull;

	csdfs_be64_put(a, 0x0102030405060708ull);
	for (int i = 0; i < 8; i++)
		ck_assert_uint_eq(a[i], i + 1);
	ck_assert_uint_eq(csdfs_be64_get(a), 0x0102030405060708ull);
	csdfs_be64_put(a, 0);
	ck_assert_uint_eq(csdfs_be64_get(a), 0);
	csdfs_be64_put(a, UINT64_MAX);
	ck_assert_uint_eq(csdfs_be64_get(a), UINT64_MAX);

	for (int i = 0; i < 100000; i++) {
		uint64_t x, y;
		int c, want;

		s ^= s >> 12;
		s ^= s << 25;
		s ^= s >> 27;
		x = s * 0x2545f4914f6cdd1dull;
		/* Mix in small and nearby values: the interesting orderings. */
		y = (i % 3 == 0) ? x + (uint64_t)(i % 7) - 3 :
		    (i % 3 == 1) ? x >> (i % 64) : ~x;
		csdfs_be64_put(a, x);
		csdfs_be64_put(b, y);
		if (csdfs_be64_get(a) != x || csdfs_be64_get(b) != y)
			ck_abort_msg("round trip failed for %llx", (unsigned long long)x);
		c = memcmp(a, b, 8);
		want = x < y ? -1 : x > y;
		if ((c > 0) - (c < 0) != want)
			ck_abort_msg("byte order of %llx vs %llx differs from numeric order",
				     (unsigned long long)x, (unsigned long long)y);
	}
}
END_TEST

static Suite *meta_suite(void)
{
	Suite *s = suite_create("meta");
	TCase *basic = tcase_create("basic");
	TCase *txn = tcase_create("txn");
	TCase *cursor = tcase_create("cursor");
	TCase *hostile = tcase_create("hostile");

	tcase_add_test(basic, test_open_missing);
	tcase_add_test(basic, test_put_get_del);
	tcase_add_test(basic, test_bad_keys);
	tcase_add_test(basic, test_map_full);
	tcase_add_test(basic, test_be64);
	suite_add_tcase(s, basic);

	tcase_add_test(txn, test_nested_abort_and_commit);
	tcase_add_test(txn, test_nested_map_full);
	tcase_add_test(txn, test_nested_past_redo);
	tcase_add_test(txn, test_persist_reopen);
	tcase_add_test(txn, test_unsynced_commit_rolled_back);
	tcase_add_test(txn, test_open_matching_record_writes_nothing);
	tcase_add_test(txn, test_rollback_sync_fails);
	tcase_add_test(txn, test_companion_gates_record);
	tcase_add_test(txn, test_nested_commit_beside_sync);
	tcase_add_test(txn, test_commit_syncs_previous);
	tcase_add_test(txn, test_torn_record);
	tcase_add_test(txn, test_record_mismatch);
	suite_add_tcase(s, txn);

	tcase_set_timeout(cursor, 120);
	tcase_add_test(cursor, test_cursor_semantics);
	tcase_add_test(cursor, test_cursor_numeric_order);
	tcase_add_test(cursor, test_cursor_del_many);
	suite_add_tcase(s, cursor);

	tcase_add_test(hostile, test_garbage_env);
	tcase_add_test(hostile, test_empty_data_file);
	tcase_add_test(hostile, test_foreign_env);
	suite_add_tcase(s, hostile);
	return s;
}

FIXTURE_MAIN(meta_suite, FIXTURE_TMP)
