/* SPDX-License-Identifier: MIT */
/*
 * csdfs-stat: per-file, per-tree and per-volume space report for csdfs.
 * The declarations its pieces share, one file a job:
 *
 *   main.c     option parsing and dispatch
 *   util.c     allocation that exits on failure; the list of problems
 *   collect.c  reading user.csdfs.* xattrs, walking trees, summing rows
 *   format.c   the text cells the table, the status page and the watch line
 *              share, and a sampled volume's interval figures
 *   human.c    the aligned table of PATH reports, and --policy
 *   status.c   the volume status page (-f), its --watch line, --prometheus
 *   json.c     the --json documents
 *   watch.c    the sampling loop: one sample, or one every --watch seconds
 *
 * It talks to the filesystem only through the read-only virtual xattrs
 * user.csdfs.* (tests/CLI.md), read one by one with getxattr(2) by name, and
 * through stat(2)/lstat(2) for file types; it never opens a volume, so any
 * user who may read a file may report on it. The daemon never lists these
 * names, so nothing here may depend on listxattr(2). It does not link
 * libcsdfs.
 *
 * Invariants of the output: ratio = logical / physical and
 * savings = 1 - physical / logical, computed here from the integer byte
 * counts so that rows and totals use one definition; a value the filesystem
 * does not provide is shown as "-" (JSON null), never as 0. The JSON layout
 * is a stable interface, documented in docs/stat-json.md: add keys, never
 * rename or remove them, and bump CSDFS_STAT_JSON_VERSION when a meaning
 * changes.
 *
 * The program has one thread; the only concurrency is the SIGINT/SIGTERM
 * handler, which sets stop_requested and nothing else. Functions that fail
 * to allocate print "out of memory" and exit(1): none returns -ENOMEM.
 */
#ifndef CSDFS_TOOLS_STAT_H
#define CSDFS_TOOLS_STAT_H

/* Before any system header: every file includes this one first. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#ifndef _FILE_OFFSET_BITS
#define _FILE_OFFSET_BITS 64
#endif
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define PROG "csdfs-stat"
#define XATTR_PREFIX "user.csdfs."
#define CSDFS_STAT_JSON_VERSION 1

/* Exit statuses (man page, EXIT STATUS). */
#define EXIT_OK 0
#define EXIT_ERR 1
#define EXIT_USAGE 2

#define CELL 512    /* formatting buffer for one cell (names are copied whole) */

/* ------------------------------------------------------------------ */
/* options and global state                                           */

enum sort_key { SORT_NAME, SORT_LOGICAL, SORT_PHYSICAL, SORT_STORED, SORT_ZERO,
		SORT_RATIO, SORT_SAVINGS };

struct opts {
	bool recursive;
	bool volume;       /* -f */
	bool json;
	bool bytes;        /* exact bytes instead of K/M/G/T */
	enum sort_key sort;
	double watch;      /* seconds between samples; 0 = one sample */
	long count;        /* samples to take with --watch; 0 = until SIGINT */
	bool prometheus;   /* -f --prometheus: the text exposition format */
	bool policy;       /* --policy: effective policy of each PATH */
	bool histogram;    /* --histogram: stored chunks by compressed size */
};

/* Set once by main() before any sampling; read everywhere after. */
extern struct opts opt;
/* EXIT_ERR once any problem() was reported; main() returns it. */
extern int exit_status;
/* Set by the signal handler (watch.c); the walk and the sleep end on it. */
extern volatile sig_atomic_t stop_requested;

/* ------------------------------------------------------------------ */
/* util.c: allocation and problems                                    */

/* Problems met while sampling, for stderr (at once) and the JSON "errors". */
struct problem {
	char *path;
	char *message;
};
/* The problems of the current sample; problems_clear() empties the list. */
extern struct problem *problems;
extern size_t n_problems;

/* Print "out of memory" and exit(EXIT_ERR). */
__attribute__((noreturn)) void oom(void);

/* realloc(3), calloc(3) and strdup(3) that never return NULL (oom() instead). */
void *xrealloc(void *p, size_t n);
void *xcalloc(size_t n, size_t size);
char *xstrdup(const char *s);

/* Grow *v (of *cap elements of @size) so that it holds at least @need. */
void grow(void **v, size_t *cap, size_t need, size_t size);

/* qsort(3) that also accepts an empty, never allocated array. */
void sort_array(void *v, size_t n, size_t size, int (*cmp)(const void *, const void *));

/*
 * Report a problem with @path: one line on stderr now, an entry in the JSON
 * "errors" array later, and exit status 1 at the end. @fmt describes the
 * problem; the message on stderr is "csdfs-stat: " + the formatted text.
 */
__attribute__((format(printf, 2, 3)))
void problem(const char *path, const char *fmt, ...);

/* Forget the problems listed so far (each sample reports its own). */
void problems_clear(void);

/* ------------------------------------------------------------------ */
/* collect.c: codec mix, rows, volumes                                */

/* The codec mix: "zstd:1=1048576 lz4=65536 none=4096", largest share first. */
struct mix_ent {
	char *codec;
	uint64_t bytes;
};

struct mix {
	struct mix_ent *v;
	size_t n, cap;
};

/* Rows: a file, a directory roll-up, or the TOTAL of a walk. */
enum row_kind { ROW_FILE, ROW_DIR, ROW_TOTAL, ROW_ROLLUP };

/* Numeric per-row fields, all read from user.csdfs.<name>. */
enum rfield { R_LOGICAL, R_PHYSICAL, R_STORED, R_ZERO, R_EXTENTS,
	      R_INCOMPRESSIBLE, R_FILES, NR_RFIELDS };

/* The attribute name (and JSON key) of each rfield. */
extern const char *const rfield_attr[NR_RFIELDS];

/*
 * The fields --watch reports deltas of; the table shows the first three.
 * Here and not in a .c, so that NR_DELTA counts the list (a copy per file).
 */
static const enum rfield delta_fields[] = { R_LOGICAL, R_PHYSICAL, R_STORED, R_ZERO };
#define NR_DELTA (sizeof(delta_fields) / sizeof(delta_fields[0]))

/*
 * Stored chunks by compressed size (user.csdfs.histogram of each regular
 * file, summed over trees here): b[i] = chunks of more than i * 4 KiB and at
 * most (i + 1) * 4 KiB compressed; raw = stored uncompressed; zero = not
 * stored (holes). chunk = the files' chunk size, 0 when they differ.
 */
#define HIST_BUCKETS 32
struct hist {
	uint64_t b[HIST_BUCKETS];
	uint64_t raw, zero;
	uint32_t chunk;
};

/* The number of buckets to show for @h: up to its chunk size (the largest
 * chunk size, 128 KiB, when mixed), and any bucket above that holds chunks. */
unsigned hist_buckets(const struct hist *h);

struct row {
	char *name;
	enum row_kind kind;
	dev_t dev;
	ino_t ino;
	size_t seq;                 /* discovery order, to keep a hard link's first name */
	uint64_t v[NR_RFIELDS];
	unsigned have;              /* bit (1 << field) when v[field] is known */
	struct mix mix;
	bool have_mix;
	struct hist hist;           /* --histogram */
	bool have_hist;
	bool have_delta;            /* --watch: the previous sample had this row */
	int64_t delta[NR_DELTA];
	unsigned have_dv;           /* bit per delta_fields index */
};

struct rows {
	struct row *v;
	size_t n, cap;
};

static inline bool has(const struct row *r, enum rfield f)
{
	return r->have & (1u << f);
}

/* Append a zeroed row to @rs, numbered in discovery order. Valid until the next push. */
struct row *rows_push(struct rows *rs);

/* Free what @r owns (name, mix), not @r itself. */
void row_free(struct row *r);

/* Free every row of @rs and the array; @rs is empty and reusable after. */
void rows_free(struct rows *rs);

/* The row's stored bytes sit partly in 4 KiB blocks charged to other files
 * (packed with them): its physical size is below its stored size. */
bool row_shares_blocks(const struct row *r);

/*
 * The effective policy of @path (user.csdfs.policy) in a malloc'd string,
 * "inherited from inode N" replaced by the directory's path when N is one of
 * @path's ancestors; NULL (and a problem()) when it cannot be read.
 */
char *policy_of(const char *path);

/* ratio = logical / physical. @return false when unknown; *inf when physical is 0. */
bool row_ratio(const struct row *r, double *ratio, bool *inf);

/* savings = 1 - physical / logical (0 when logical is 0; may be negative). */
bool row_savings(const struct row *r, double *savings);

/*
 * One sample for the PATH arguments: @entries gets one row per PATH (or,
 * with -r, per regular file beneath a directory PATH), @rollups the
 * directory arguments' own roll-ups (-r only), @total the sum of @entries.
 * @entries and @rollups must be empty; the caller frees all three
 * (rows_free, row_free). A PATH that cannot be reported is a problem().
 */
void sample_paths(char **paths, int npaths, struct rows *entries,
		  struct rows *rollups, struct row *total);

/* Volume fields, read from user.csdfs.<name> of the mount's root; from
 * V_REQUESTS on, from the key=value lists user.csdfs.requests (the daemon's
 * FUSE requests: total, fsync), user.csdfs.syncs (host syncs per file,
 * group commits) and user.csdfs.cache (the decoded-chunk cache's hits,
 * misses, bytes held and budget, 0 when the mount has no cache) instead. */
enum vfield { V_CAP_LOGICAL, V_CAP_PHYSICAL, V_LOGICAL, V_PHYSICAL, V_STORED,
	      V_ZERO, V_FREE_PHYSICAL, V_FILES, V_EXTENTS, V_INCOMPRESSIBLE,
	      V_APP_WRITTEN, V_DEV_WRITTEN, V_META_BYTES, V_ATOMIC_UNIT,
	      V_CSUM_ERRORS, V_USED_LOGICAL, V_USED_PHYSICAL,
	      V_DEAD, V_COMPACT_WRITTEN, V_COMPACT_CHUNKS, V_FREE_USABLE,
	      V_REQUESTS, V_REQ_FSYNC, V_SYNC_CONTAINER, V_SYNC_DATA, V_SYNC_RECORD,
	      V_GROUP_COMMITS, V_JOURNAL_SEGMENTS, V_CACHE_HITS, V_CACHE_MISSES,
	      V_CACHE_BYTES, V_CACHE_BUDGET, NR_VFIELDS };
/* struct volume's have: one bit per field (vbit). */
_Static_assert(NR_VFIELDS <= 64, "struct volume's have holds one bit per vfield");

/* The attribute name (and JSON key) of each vfield. */
extern const char *const vfield_attr[NR_VFIELDS];

/* The volume fields --watch reports deltas of (counted like delta_fields). */
static const enum vfield vdelta_fields[] = { V_LOGICAL, V_PHYSICAL, V_STORED, V_ZERO,
	V_FREE_PHYSICAL, V_APP_WRITTEN, V_DEV_WRITTEN, V_META_BYTES, V_CSUM_ERRORS,
	V_REQUESTS, V_REQ_FSYNC, V_SYNC_CONTAINER, V_SYNC_DATA, V_SYNC_RECORD, V_GROUP_COMMITS,
	V_JOURNAL_SEGMENTS, V_CACHE_HITS, V_CACHE_MISSES };
#define NR_VDELTA (sizeof(vdelta_fields) / sizeof(vdelta_fields[0]))
_Static_assert(NR_VDELTA <= 32, "struct volume's have_dv holds one bit per delta");

struct volume {
	char *arg;           /* the PATH as given */
	char *mount;         /* the root found from it */
	bool ok;             /* sampled (the root answered user.csdfs.logical) */
	uint64_t v[NR_VFIELDS];
	uint64_t have;       /* vbit(f) when v[f] is known */
	double wa;           /* user.csdfs.write_amplification */
	bool have_wa;
	char *warnings;      /* NULL = attribute absent */
	char *policy;
	struct mix mix;
	bool have_mix;
	char *requests;      /* user.csdfs.requests as read; NULL = absent */
	/* --watch */
	double interval;     /* seconds since the previous sample */
	bool have_delta;
	int64_t delta[NR_VDELTA];
	unsigned have_dv;
};

static inline uint64_t vbit(enum vfield f)
{
	return (uint64_t)1 << f;
}

static inline bool vhas(const struct volume *v, enum vfield f)
{
	return v->have & vbit(f);
}

/* The value of @key in a "key=N key=N" list (user.csdfs.requests, .syncs, .cache). */
bool kv_get(const char *s, const char *key, uint64_t *v);

/* Forget @v's sample (keeps arg and mount, which outlive samples). */
void volume_clear(struct volume *v);

/*
 * Sample the volume holding @v->arg: find its root once (kept in @v->mount,
 * malloc'd, the caller frees it), then read the root's attributes.
 * @v->ok says whether it answered; otherwise a problem() was reported.
 */
void sample_volume(struct volume *v);

/*
 * The volume as a row, to share the ratio/savings/mix formatting. @r borrows
 * @v's mix: it lives as long as @v's sample; never row_free() @r.
 */
void volume_as_row(const struct volume *v, struct row *r);

/* ------------------------------------------------------------------ */
/* format.c: text cells (sizes follow --bytes)                        */

/* A size: K/M/G/T/P (binary) with one decimal, or exact bytes with --bytes. */
void fmt_size(char *buf, size_t len, uint64_t v);

/* The delta of @f over the last interval. @return false when unknown. */
bool vdelta_get(const struct volume *v, enum vfield f, int64_t *d);

/* The change of @f per second over the last interval. @return false when unknown. */
bool vrate_get(const struct volume *v, enum vfield f, double *rate);

/* Write amplification of the last interval: device bytes / application bytes. */
bool interval_wa(const struct volume *v, double *wa);

/* The chunk cache's hit ratio, hits / (hits + misses): since mount, or with
 * @interval of the last interval. @return false when unknown or when there
 * was no lookup (shown as "-"). */
bool cache_hit_ratio(const struct volume *v, bool interval, double *ratio);

/* A signed size: "+1.5M", "-4096". */
void fmt_delta(char *buf, size_t len, int64_t d);

/* "2.50x"; when logical bytes take no physical space "shared" (their stored
 * bytes are in blocks charged to neighbours) or "sparse" (nothing stored);
 * "-" when unknown. Never "inf". */
void fmt_ratio(char *buf, size_t len, const struct row *r);

/* "60.0%", "-" when unknown, "shared" when physical is 0 but bytes are stored. */
void fmt_savings(char *buf, size_t len, const struct row *r);

/*
 * The CODEC MIX cell: "zstd:1 96% none 4%" (shares of the stored logical
 * bytes), or with --bytes the exact "zstd:1=1048576 none=4096". Codecs
 * holding no bytes are left out; "-" when nothing is stored.
 */
void fmt_mix(char *buf, size_t len, const struct row *r);

/* The local time of day, "HH:MM:SS" (@len at least 9). */
void fmt_clock(char *buf, size_t len);

/* ------------------------------------------------------------------ */
/* output: human.c, status.c, json.c                                  */

/*
 * The table of a PATH sample on stdout: a row per entry, and with -r the
 * TOTAL and the roll-ups; with --watch the delta columns.
 */
void print_paths_human(const struct rows *entries, const struct rows *rollups,
		       const struct row *total);

/* The status page of one volume on stdout; nothing when !v->ok. */
void print_volume_page(const struct volume *v);

/*
 * One line of -f --watch for @v on stdout, after the column heads when
 * @header; @show_mount adds a MOUNT column (several volumes).
 */
void print_volume_watch_line(const struct volume *v, bool header, bool show_mount);

/*
 * The JSON document of a PATH sample (or of the volumes) on stdout, with the
 * problems of the sample as "errors": pretty for one report, one line per
 * sample with --watch. @sample counts from 1; @interval is the seconds since
 * the previous sample (shown from sample 2 on).
 */
void print_paths_json(const struct rows *entries, const struct rows *rollups,
		      const struct row *total, long sample, double interval);
void print_volumes_json(const struct volume *vols, int n, long sample, double interval);

/* The volumes in the Prometheus text exposition format (node_exporter's
 * textfile collector), one metric family at a time. */
void print_volumes_prometheus(const struct volume *vols, int n);

/* --histogram: the table of each row's chunks by compressed size. */
void print_histogram_human(const struct rows *entries, const struct rows *rollups,
			   const struct row *total);

/* --policy: one line per PATH (with -r, per entry beneath): PATH, then its
 * effective policy and where each value comes from. */
void run_policy(char **paths, int npaths);

/* ------------------------------------------------------------------ */
/* watch.c: the sampling loop                                         */

/* SIGINT and SIGTERM set stop_requested, without SA_RESTART. */
void install_signals(void);

/*
 * Report the PATH arguments (the -f MOUNT arguments): once, or with --watch
 * every opt.watch seconds until opt.count samples or a signal. Problems
 * set exit_status; nothing is returned.
 */
void run_paths(char **paths, int npaths);
void run_volumes(char **paths, int npaths);

#endif
