/* SPDX-License-Identifier: MIT */
/*
 * The typed record layer: every LMDB value csdfs stores is encoded and
 * decoded here, and only here (record.c). On disk each record is the
 * packed struct of include/csdfs/format.h with every multi-byte field
 * little-endian; in memory the same struct holds host-order values. Keys
 * are not records: their integers are big-endian (csdfs_be64_put), so that
 * LMDB's byte order is numeric order.
 *
 * A decoder refuses a value of the wrong length (-EUCLEAN): stored bytes
 * are hostile. Each record type has three typed calls, generated below:
 *   csdfs_rec_T_decode(v, out)              a value LMDB returned
 *   csdfs_rec_T_get(txn, db, key, klen, out)  0, -ENOENT, -EUCLEAN
 *   csdfs_rec_T_put(txn, db, key, klen, rec, flags)  csdfs_meta_put's codes
 * They may be called from any thread that may use @txn.
 */
#ifndef CSDFS_RECORD_H
#define CSDFS_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "csdfs/format.h"
#include "csdfs/meta.h"

/* A record's layout: its size and the width (1, 2, 4 or 8 bytes) of each
 * field in order, as a string of digits. */
struct csdfs_rec_type {
	const char *name;
	size_t size;
	const char *fields;
};

extern const struct csdfs_rec_type csdfs_rec_inode_type;    /* db inodes */
extern const struct csdfs_rec_type csdfs_rec_chunk_type;    /* db chunks */
extern const struct csdfs_rec_type csdfs_rec_phys_type;     /* db phys */
extern const struct csdfs_rec_type csdfs_rec_dirent_type;   /* db dirents */
extern const struct csdfs_rec_type csdfs_rec_counters_type; /* meta "counters" */
extern const struct csdfs_rec_type csdfs_rec_rollup_type;   /* db rollup */
extern const struct csdfs_rec_type csdfs_rec_le64_type;     /* free, codecmix, "next_ino" */
extern const struct csdfs_rec_type csdfs_rec_le32_type;     /* meta "version" */

/* Every record type, for tests and tools (NULL-terminated). */
extern const struct csdfs_rec_type *const csdfs_rec_types[];

/* @v (t->size bytes, little-endian) -> @out (host order).
 * @return 0 or -EUCLEAN when the length is not t->size. */
int csdfs_rec_decode(const struct csdfs_rec_type *t, const struct csdfs_val *v,
		     void *out);
/* @rec (host order) -> @buf (t->size bytes, little-endian). */
void csdfs_rec_encode(const struct csdfs_rec_type *t, const void *rec, void *buf);
int csdfs_rec_get(struct csdfs_txn *txn, enum csdfs_db db, const void *key,
		  size_t klen, const struct csdfs_rec_type *t, void *out);
int csdfs_rec_put(struct csdfs_txn *txn, enum csdfs_db db, const void *key,
		  size_t klen, const struct csdfs_rec_type *t, const void *rec,
		  unsigned flags);

/* May a volume whose superblock has feature word @incompat be read on a
 * host of this byte order (@host_le)? @return 0 or -EPROTONOSUPPORT. */
int csdfs_rec_order_check(uint64_t incompat, bool host_le);
/* Is this host little-endian? */
static inline bool csdfs_rec_host_le(void)
{
	return __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
}

#define CSDFS_REC_TYPED(T, ctype)                                              \
	_Static_assert(sizeof(ctype) <= 160, #T " fits the encode buffer");    \
	static inline int csdfs_rec_##T##_decode(const struct csdfs_val *v,    \
						 ctype *out)                   \
	{                                                                      \
		return csdfs_rec_decode(&csdfs_rec_##T##_type, v, out);        \
	}                                                                      \
	static inline int csdfs_rec_##T##_get(struct csdfs_txn *txn,           \
					      enum csdfs_db db,                \
					      const void *key, size_t klen,    \
					      ctype *out)                      \
	{                                                                      \
		return csdfs_rec_get(txn, db, key, klen, &csdfs_rec_##T##_type, \
				     out);                                     \
	}                                                                      \
	static inline int csdfs_rec_##T##_put(struct csdfs_txn *txn,           \
					      enum csdfs_db db,                \
					      const void *key, size_t klen,    \
					      const ctype *rec, unsigned flags) \
	{                                                                      \
		return csdfs_rec_put(txn, db, key, klen, &csdfs_rec_##T##_type, \
				     rec, flags);                              \
	}

CSDFS_REC_TYPED(inode, struct csdfs_inode_disk)
CSDFS_REC_TYPED(chunk, struct csdfs_chunk_disk)
CSDFS_REC_TYPED(phys, struct csdfs_phys_disk)
CSDFS_REC_TYPED(dirent, struct csdfs_dirent_disk)
CSDFS_REC_TYPED(counters, struct csdfs_counters_disk)
CSDFS_REC_TYPED(rollup, struct csdfs_rollup_disk)
CSDFS_REC_TYPED(le64, uint64_t)
CSDFS_REC_TYPED(le32, uint32_t)

#endif
