/* SPDX-License-Identifier: MIT */
/*
 * Encoding and decoding of every LMDB record (record.h). A layout lists
 * each field's width; on a little-endian host a record's bytes are its
 * struct as it is, on a big-endian one every field is byte-swapped on the
 * way in and out. tests/unit/test_record.c checks each layout against its
 * struct and against hand-written little-endian bytes.
 */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "record.h"

/* Widths in the order of the struct's fields (format.h). */
const struct csdfs_rec_type csdfs_rec_inode_type = {
	"inode", sizeof(struct csdfs_inode_disk),
	"4444" "88" "8888" "888888" "4112" "8" "8888",
};
const struct csdfs_rec_type csdfs_rec_chunk_type = {
	"chunk", sizeof(struct csdfs_chunk_disk), "8444" "1111",
};
const struct csdfs_rec_type csdfs_rec_phys_type = {
	"phys", sizeof(struct csdfs_phys_disk), "8844",
};
const struct csdfs_rec_type csdfs_rec_dirent_type = {
	"dirent", sizeof(struct csdfs_dirent_disk), "844",
};
const struct csdfs_rec_type csdfs_rec_counters_type = {
	"counters", sizeof(struct csdfs_counters_disk), "88888888888" "88888",
};
const struct csdfs_rec_type csdfs_rec_rollup_type = {
	"rollup", sizeof(struct csdfs_rollup_disk), "88888888",
};
const struct csdfs_rec_type csdfs_rec_le64_type = { "le64", 8, "8" };
const struct csdfs_rec_type csdfs_rec_le32_type = { "le32", 4, "4" };

const struct csdfs_rec_type *const csdfs_rec_types[] = {
	&csdfs_rec_inode_type, &csdfs_rec_chunk_type, &csdfs_rec_phys_type,
	&csdfs_rec_dirent_type, &csdfs_rec_counters_type, &csdfs_rec_rollup_type,
	&csdfs_rec_le64_type, &csdfs_rec_le32_type, NULL,
};

/* Host order <-> little-endian, in place (the same swap both ways). */
static void swap_fields(const struct csdfs_rec_type *t, unsigned char *p)
{
#if __BYTE_ORDER == __BIG_ENDIAN
	for (const char *f = t->fields; *f; p += *f - '0', f++) {
		uint16_t u16;
		uint32_t u32;
		uint64_t u64;

		switch (*f) {
		case '2':
			memcpy(&u16, p, 2);
			u16 = htole16(u16);
			memcpy(p, &u16, 2);
			break;
		case '4':
			memcpy(&u32, p, 4);
			u32 = htole32(u32);
			memcpy(p, &u32, 4);
			break;
		case '8':
			memcpy(&u64, p, 8);
			u64 = htole64(u64);
			memcpy(p, &u64, 8);
			break;
		}
	}
#else
	(void)t;
	(void)p;
#endif
}

int csdfs_rec_order_check(uint64_t incompat, bool host_le)
{
	/* Without LE_RECORDS the records are in the order of the host that
	 * wrote them, which is this host's (LMDB's file is host-endian). */
	if (incompat & CSDFS_FEATURE_INCOMPAT_LE_RECORDS || host_le)
		return 0;
	return -EPROTONOSUPPORT;
}

int csdfs_rec_decode(const struct csdfs_rec_type *t, const struct csdfs_val *v,
		     void *out)
{
	if (v->len != t->size)
		return -EUCLEAN;
	memcpy(out, v->data, t->size);
	swap_fields(t, out);
	return 0;
}

void csdfs_rec_encode(const struct csdfs_rec_type *t, const void *rec, void *buf)
{
	memcpy(buf, rec, t->size);
	swap_fields(t, buf);
}

int csdfs_rec_get(struct csdfs_txn *txn, enum csdfs_db db, const void *key,
		  size_t klen, const struct csdfs_rec_type *t, void *out)
{
	struct csdfs_val v;
	int rc = csdfs_meta_get(txn, db, key, klen, &v);

	return rc ? rc : csdfs_rec_decode(t, &v, out);
}

int csdfs_rec_put(struct csdfs_txn *txn, enum csdfs_db db, const void *key,
		  size_t klen, const struct csdfs_rec_type *t, const void *rec,
		  unsigned flags)
{
	unsigned char buf[160];

	if (t->size > sizeof(buf))
		return -EINVAL;
	csdfs_rec_encode(t, rec, buf);
	return csdfs_meta_put(txn, db, key, klen, buf, t->size, flags);
}
