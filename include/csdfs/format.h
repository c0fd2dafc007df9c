/* SPDX-License-Identifier: MIT */
/*
 * csdfs on-disk format: the container superblock and every record stored in
 * LMDB. This header is frozen: fields are only ever appended in reserved
 * space, codec ids are pinned forever, and anything an older reader must not
 * misinterpret gets an incompat feature bit (an unknown incompat bit makes
 * mount refuse). All multi-byte fields are little-endian on disk: the
 * superblock's (src/container.c) and every LMDB record's (src/record.c, the
 * one place records are encoded and decoded; in memory the structs below
 * hold host-order values). LMDB keys that carry integers are big-endian so
 * byte order equals numeric order.
 *
 * A volume is a directory (mode 0700) holding:
 *   container   the preallocated data file; block 0 holds the superblock,
 *               blocks [CSDFS_FIRST_DATA_BLOCK, total_blocks) hold data.
 *   meta/       the LMDB environment (data.mdb), schema in meta_lmdb.c.
 */
#ifndef CSDFS_FORMAT_H
#define CSDFS_FORMAT_H

#include <stdint.h>

#define CSDFS_MAGIC            "CSDFS\x00\x1a\x0a"
#define CSDFS_MAGIC_LEN        8
#define CSDFS_FORMAT_VERSION   1u
#define CSDFS_BLOCK_SIZE       4096u
#define CSDFS_BLOCK_SHIFT      12
#define CSDFS_SUPER_OFFSET     0u
/* Blocks 0..15 are reserved for the superblock and future headers. */
#define CSDFS_FIRST_DATA_BLOCK 16u

#define CSDFS_CHUNK_MIN        4096u
#define CSDFS_CHUNK_MAX        131072u
#define CSDFS_CHUNK_DEFAULT    16384u
#define CSDFS_ROOT_INO         1u

#define CSDFS_CONTAINER_NAME   "container"
#define CSDFS_META_DIR_NAME    "meta"

/* Codec ids: pinned forever, never renumber. */
enum csdfs_codec_id {
	CSDFS_CODEC_NONE = 0,
	CSDFS_CODEC_ZSTD = 1,
	CSDFS_CODEC_LZ4 = 2,
	CSDFS_CODEC_COUNT
};

/*
 * Feature words. Incompat bit 0 is never defined (tests use it as the
 * unknown bit). SYNCED: LMDB commits are not synced by LMDB itself but
 * recorded durable in meta/synced, and an open rolls back a commit newer
 * than the record (src/meta_lmdb.c); a csdfs that does not know this would
 * trust such a commit, and commit without updating the record. Set by mkfs
 * and, on an older volume, by its first open.
 *
 * LE_RECORDS: every LMDB record is little-endian. Before this bit, csdfs
 * copied records in host order; LMDB's own file is host-endian and opens
 * only on the byte order that wrote it, so a volume without the bit holds
 * little-endian records exactly when the host is little-endian: such a
 * volume opens there and is refused, with a message, on a big-endian host
 * (csdfs_rec_order_check). Set by mkfs; an older csdfs on a big-endian host
 * refuses a volume that has it.
 */
#define CSDFS_FEATURE_INCOMPAT_SYNCED     (1ull << 1)
#define CSDFS_FEATURE_INCOMPAT_LE_RECORDS (1ull << 2)
/*
 * JOURNAL: the volume may hold, in a region of the container named by the
 * meta keys "journal_start" and "journal_blocks" (LE64 blocks), segments
 * of metadata changes made durable by an fsync but not yet by LMDB's own
 * commit; an open replays them (src/journal.c). A csdfs that does not know
 * this would drop acknowledged changes after a crash. Set by mkfs and, on
 * an older volume, by the open that makes the region.
 */
#define CSDFS_FEATURE_INCOMPAT_JOURNAL    (1ull << 3)
#define CSDFS_FEATURE_COMPAT_SUPP    0ull
#define CSDFS_FEATURE_INCOMPAT_SUPP  (CSDFS_FEATURE_INCOMPAT_SYNCED | \
				      CSDFS_FEATURE_INCOMPAT_LE_RECORDS | \
				      CSDFS_FEATURE_INCOMPAT_JOURNAL)
#define CSDFS_FEATURE_RO_COMPAT_SUPP 0ull

/*
 * The superblock, at byte 0 of the container. The checksum is CRC32C over
 * the first offsetof(csum) bytes; a mismatch means the volume is corrupt.
 */
struct csdfs_super_disk {
	uint8_t  magic[CSDFS_MAGIC_LEN];
	uint32_t version;          /* CSDFS_FORMAT_VERSION */
	uint32_t block_size;       /* CSDFS_BLOCK_SIZE */
	uint8_t  uuid[16];         /* also stored in LMDB meta "uuid" */
	uint64_t compat;
	uint64_t incompat;
	uint64_t ro_compat;
	uint64_t total_blocks;     /* container size / block_size */
	uint64_t logical_bytes;    /* logical capacity shown by statfs */
	uint32_t chunk_size;       /* default chunk size for new files */
	uint32_t atomic_unit;      /* G3 unit in bytes */
	uint8_t  codec;            /* default codec (enum csdfs_codec_id) */
	int8_t   level;            /* default codec level */
	uint16_t reserved0;
	uint32_t reserved1;
	uint64_t created_sec;
	uint8_t  reserved[184];
	uint32_t csum;
	uint32_t reserved2;
} __attribute__((packed));
_Static_assert(sizeof(struct csdfs_super_disk) == 288, "superblock layout");

/*
 * A journal segment: this header at the start of a block of the journal
 * region, then @len bytes of metadata changes (the redo encoding of
 * src/meta_lmdb.c), the rest of its @blocks blocks zero. Segment 1 starts
 * at the region's first block, each next one right after the one before.
 * @crc is CRC32C over the header with crc 0, then the changes. Segments
 * apply to the LMDB commit @base (the last one made durable before them),
 * in order; a segment of another base, out of order, or not whole ends
 * the journal.
 */
#define CSDFS_JOURNAL_MAGIC 0x4a445343u   /* "CSDJ" */
struct csdfs_journal_seg_disk {
	uint32_t magic;
	uint32_t version;          /* 1 */
	uint64_t base;
	uint64_t seq;              /* 1, 2, ... */
	uint32_t len;
	uint32_t blocks;
	uint32_t crc;
	uint32_t reserved;
} __attribute__((packed));
_Static_assert(sizeof(struct csdfs_journal_seg_disk) == 40, "journal segment layout");

/* Inode record (db "inodes", key = ino BE64). */
struct csdfs_inode_disk {
	uint32_t mode;
	uint32_t uid;
	uint32_t gid;
	uint32_t nlink;
	uint64_t size;             /* logical size in bytes */
	uint64_t rdev;
	int64_t  atime_ns, mtime_ns, ctime_ns, btime_ns;
	uint64_t parent;           /* dirs: "..", files: primary parent, 0 = detached */
	uint64_t phys_blocks;      /* 4 KiB container blocks charged to this inode */
	uint64_t stored_bytes;     /* byte-exact compressed bytes of its chunks */
	uint64_t stored_chunks;    /* chunks with a stored extent (not holes) */
	uint64_t raw_chunks;       /* of those, stored raw (incompressible) */
	uint64_t mapped_bytes;     /* logical bytes held by stored chunks */
	uint32_t chunk_size;       /* fixed at creation from the policy */
	uint8_t  codec;            /* policy codec for new writes */
	int8_t   level;
	uint16_t flags;            /* CSDFS_INODE_* */
	uint64_t raw_bytes;        /* logical bytes held by raw chunks */
	uint64_t reserved[4];
} __attribute__((packed));
_Static_assert(sizeof(struct csdfs_inode_disk) == 160, "inode layout");

#define CSDFS_INODE_ORPHAN 0x1u    /* nlink reached 0 while open */
/* Where the policy (codec, chunk_size) came from; neither bit = the volume
 * default. SET = set on this inode; INHERITED = copied from a parent that
 * had it set or inherited. */
#define CSDFS_INODE_CODEC_SET        0x2u
#define CSDFS_INODE_CODEC_INHERITED  0x4u
#define CSDFS_INODE_CHUNK_SET        0x8u
#define CSDFS_INODE_CHUNK_INHERITED  0x10u

/*
 * Chunk record (db "chunks", key = ino BE64 + chunk index BE64): where one
 * logical chunk of a file is stored. The compressed bytes occupy container
 * bytes [pa, pa + plen); they decode to llen bytes (the rest of the chunk
 * reads as zeros). Chunks written together are packed back to back, so one
 * 4 KiB block may hold parts of several chunks. Each used block is charged
 * to exactly one live chunk overlapping it (for st_blocks); charge_first /
 * charge_last say whether this chunk pays for its first / last block, the
 * blocks strictly between are always its own.
 */
struct csdfs_chunk_disk {
	uint64_t pa;               /* container byte offset */
	uint32_t plen;             /* stored bytes */
	uint32_t llen;             /* decoded bytes (<= chunk size) */
	uint32_t csum;             /* CRC32C of the stored bytes */
	uint8_t  codec;
	int8_t   level;
	uint8_t  flags;            /* CSDFS_CHUNK_* */
	uint8_t  reserved;
} __attribute__((packed));
_Static_assert(sizeof(struct csdfs_chunk_disk) == 24, "chunk layout");

#define CSDFS_CHUNK_CHARGE_FIRST 0x1u
#define CSDFS_CHUNK_CHARGE_LAST  0x2u
/* Stored raw because the policy codec did not save space (as opposed to
 * raw by policy "none"): recompress leaves it alone. */
#define CSDFS_CHUNK_INCOMPRESSIBLE 0x4u

/* Reverse map record (db "phys", key = pa BE64): which chunk owns bytes. */
struct csdfs_phys_disk {
	uint64_t ino;
	uint64_t chunk;
	uint32_t plen;
	uint32_t reserved;
} __attribute__((packed));
_Static_assert(sizeof(struct csdfs_phys_disk) == 24, "phys layout");

/* Dirent value (db "dirents", key = parent ino BE64 + name bytes). */
struct csdfs_dirent_disk {
	uint64_t ino;
	uint32_t type;             /* S_IFMT bits of the target */
	uint32_t reserved;
} __attribute__((packed));
_Static_assert(sizeof(struct csdfs_dirent_disk) == 16, "dirent layout");

/* Volume counters (db "meta", key "counters"). */
struct csdfs_counters_disk {
	uint64_t used_blocks;      /* data blocks not in the free map */
	uint64_t stored_bytes;     /* sum of plen over all chunks */
	uint64_t mapped_bytes;     /* sum of llen over all chunks */
	uint64_t stored_chunks;
	uint64_t raw_chunks;
	uint64_t inodes;
	uint64_t app_bytes_written;/* bytes applications asked to write */
	uint64_t dev_bytes_written;/* container bytes written for data */
	uint64_t csum_errors;      /* checksum mismatches seen on read */
	uint64_t meta_bytes_written; /* bytes LMDB wrote at group commits */
	uint64_t logical_used;     /* chunk-size units held by stored chunks:
				    * what counts against logical capacity */
	uint64_t compact_bytes_written; /* stored bytes compaction moved (not
				    * in dev_bytes_written) */
	uint64_t compact_chunks;   /* chunks compaction moved */
	uint64_t reserved[3];
} __attribute__((packed));
_Static_assert(sizeof(struct csdfs_counters_disk) == 128, "counters layout");

/*
 * Subtree roll-up of a directory (db "rollup", key = dir ino BE64): the sums
 * over every regular file attached beneath it (a file is attached to its
 * primary parent, the directory it was created or last moved in). The root's
 * roll-up is the volume's. Kept up to date by every inode store.
 */
struct csdfs_rollup_disk {
	uint64_t logical;          /* sum of st_size */
	uint64_t phys_blocks;
	uint64_t stored_bytes;
	uint64_t mapped_bytes;
	uint64_t raw_bytes;
	uint64_t stored_chunks;
	uint64_t files;
	uint64_t reserved;
} __attribute__((packed));
_Static_assert(sizeof(struct csdfs_rollup_disk) == 64, "rollup layout");

/* Codec mix (db "codecmix", key = ino BE64 + codec u8 + level i8, value =
 * LE64 logical bytes mapped by chunks of that codec and level), for files
 * and, summed over the subtree, for directories. */

#endif
