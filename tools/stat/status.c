/* SPDX-License-Identifier: MIT */
/*
 * csdfs-stat -f: the human-readable status of a volume, read from the
 * attributes of its root (collect.c sample_volume): a page of labelled
 * values, or with --watch one line per sample with the changes of the
 * last interval. Ratio, savings and the codec mix are formatted as for a
 * row (volume_as_row), so the page and the table agree. --prometheus
 * prints the same values in the Prometheus text exposition format.
 */
#include "stat.h"

#include <inttypes.h>
#include <string.h>

static void page_line(const char *label, const char *value, const char *note)
{
	printf("  %-22s %12s%s%s\n", label, value, note && *note ? "   " : "",
	       note ? note : "");
}

static void page_size(const struct volume *v, const char *label, enum vfield f,
		      const char *note)
{
	char buf[64];

	if (vhas(v, f))
		fmt_size(buf, sizeof(buf), v->v[f]);
	else
		strcpy(buf, "-");
	page_line(label, buf, note);
}

static void page_count(const struct volume *v, const char *label, enum vfield f,
		       const char *note)
{
	char buf[64];

	if (vhas(v, f))
		snprintf(buf, sizeof(buf), "%" PRIu64, v->v[f]);
	else
		strcpy(buf, "-");
	page_line(label, buf, note);
}

/* "(12.5% of physical capacity)" when both are known. */
static void pct_note(char *buf, size_t len, const struct volume *v, enum vfield num,
		     enum vfield den, const char *what)
{
	buf[0] = '\0';
	if (vhas(v, num) && vhas(v, den) && v->v[den])
		snprintf(buf, len, "(%.1f%% of %s)",
			 100.0 * (double)v->v[num] / (double)v->v[den], what);
}

/* "Free for whole chunks  9.5M  (14.8% of physical capacity)": free space
 * a whole uncompressed chunk can still be written to, beyond the reserve
 * (df's Avail is made from it). When free runs too short for a chunk hold
 * a share of the free space, the note says how much instead, since that
 * explains ENOSPC with free space left. */
static void free_usable_line(const struct volume *v)
{
	char note[128];

	pct_note(note, sizeof(note), v, V_FREE_USABLE, V_CAP_PHYSICAL, "physical capacity");
	if (vhas(v, V_FREE_USABLE) && vhas(v, V_FREE_PHYSICAL) &&
	    v->v[V_FREE_PHYSICAL] > v->v[V_FREE_USABLE]) {
		uint64_t gap = v->v[V_FREE_PHYSICAL] - v->v[V_FREE_USABLE];
		char size[64];

		/* Under 1 MiB, or under 2 % of the free space, the gap is
		 * the reserve (0.5 % of the data area, 256 KiB to 64 MiB)
		 * and the head's unused rest: no news. */
		if (gap * 50 > v->v[V_FREE_PHYSICAL] && gap > (1u << 20)) {
			fmt_size(size, sizeof(size), gap);
			snprintf(note, sizeof(note), "(%s free in runs too short for a chunk, or reserved)",
				 size);
		}
	}
	page_size(v, "Free for whole chunks", V_FREE_USABLE, note);
}

/* "hits 1234, misses 62, hit ratio 95.2%, 1.5M held of 48M": the
 * decoded-chunk cache since mount (a hit ratio of "-" before any lookup;
 * "off" for a mount without one). A daemon older than the budget field
 * gets the line without "of". */
static void page_cache(const struct volume *v)
{
	char held[64], budget[64], ratio[32];
	double r;

	if (!vhas(v, V_CACHE_HITS) || !vhas(v, V_CACHE_MISSES) || !vhas(v, V_CACHE_BYTES)) {
		printf("  %-22s -\n", "Chunk cache");
		return;
	}
	if (vhas(v, V_CACHE_BUDGET) && !v->v[V_CACHE_BUDGET]) {
		printf("  %-22s off (mounted with cache_size=0)\n", "Chunk cache");
		return;
	}
	fmt_size(held, sizeof(held), v->v[V_CACHE_BYTES]);
	budget[0] = '\0';
	if (vhas(v, V_CACHE_BUDGET)) {
		strcpy(budget, " of ");
		fmt_size(budget + 4, sizeof(budget) - 4, v->v[V_CACHE_BUDGET]);
	}
	if (cache_hit_ratio(v, false, &r))
		snprintf(ratio, sizeof(ratio), "%.1f%%", 100.0 * r);
	else
		strcpy(ratio, "-");
	printf("  %-22s hits %" PRIu64 ", misses %" PRIu64 ", hit ratio %s, %s held%s\n",
	       "Chunk cache", v->v[V_CACHE_HITS], v->v[V_CACHE_MISSES], ratio, held, budget);
}

void print_volume_page(const struct volume *v)
{
	char buf[CELL], note[128];
	struct row r;

	if (!v->ok)
		return;
	volume_as_row(v, &r);
	printf("csdfs volume %s\n", v->mount);
	page_size(v, "Logical capacity", V_CAP_LOGICAL, "(df Size)");
	page_size(v, "Logical capacity used", V_USED_LOGICAL,
		  "(df Used: stored chunks, a whole chunk each)");
	page_size(v, "Physical capacity", V_CAP_PHYSICAL, "(container data area)");
	pct_note(note, sizeof(note), v, V_LOGICAL, V_CAP_LOGICAL, "logical capacity");
	page_size(v, "Logical used", V_LOGICAL, note);
	pct_note(note, sizeof(note), v, V_PHYSICAL, V_CAP_PHYSICAL, "physical capacity");
	page_size(v, "Physical used", V_PHYSICAL, note);
	page_size(v, "Stored (byte-exact)", V_STORED, "(compressed bytes before 4 KiB rounding)");
	pct_note(note, sizeof(note), v, V_FREE_PHYSICAL, V_CAP_PHYSICAL, "physical capacity");
	page_size(v, "Free physical space", V_FREE_PHYSICAL, note);
	free_usable_line(v);
	fmt_ratio(buf, sizeof(buf), &r);
	page_line("Compression ratio", buf, "(logical / physical)");
	fmt_savings(buf, sizeof(buf), &r);
	page_line("Space savings", buf, "(1 - physical / logical)");
	page_size(v, "Zero bytes", V_ZERO, "(holes and all-zero chunks, not stored)");
	page_size(v, "Incompressible", V_INCOMPRESSIBLE, "(logical bytes stored raw)");
	page_count(v, "Files", V_FILES, NULL);
	page_count(v, "Extents", V_EXTENTS, "(stored chunks)");
	fmt_mix(buf, sizeof(buf), &r);
	printf("  %-22s %s\n", "Codec mix", buf);
	printf("  %-22s %s\n", "Default policy", v->policy ? v->policy : "-");
	page_size(v, "App bytes written", V_APP_WRITTEN, "(by applications)");
	page_size(v, "Device bytes written", V_DEV_WRITTEN, "(to the container)");
	page_size(v, "Metadata size", V_META_BYTES, "(LMDB file)");
	if (v->have_wa)
		snprintf(buf, sizeof(buf), "%.2f", v->wa);
	else
		strcpy(buf, "-");
	page_line("Write amplification", buf, "((device + metadata writes) / app writes)");
	page_size(v, "Dead bytes", V_DEAD, "(in used blocks, stored by no live chunk)");
	page_size(v, "Bytes compacted", V_COMPACT_WRITTEN, "(moved out of mostly dead blocks)");
	page_count(v, "Chunks compacted", V_COMPACT_CHUNKS, NULL);
	if (vhas(v, V_COMPACT_WRITTEN) && vhas(v, V_APP_WRITTEN) && v->v[V_APP_WRITTEN])
		snprintf(buf, sizeof(buf), "%.3f", (double)v->v[V_COMPACT_WRITTEN] /
			 (double)v->v[V_APP_WRITTEN]);
	else
		strcpy(buf, "-");
	page_line("Compaction write amp.", buf, "(bytes compacted / app writes)");
	if (vhas(v, V_ATOMIC_UNIT)) {
		fmt_size(buf, sizeof(buf), v->v[V_ATOMIC_UNIT]);
		snprintf(note, sizeof(note), "(%" PRIu64 " bytes; aligned writes up to this size are atomic)",
			 v->v[V_ATOMIC_UNIT]);
	} else {
		strcpy(buf, "-");
		note[0] = '\0';
	}
	page_line("Atomic write unit", buf, note);
	page_count(v, "Checksum errors", V_CSUM_ERRORS, NULL);
	page_count(v, "FUSE requests", V_REQUESTS, "(answered by the daemon since it mounted)");
	page_count(v, "FSYNC requests", V_REQ_FSYNC, NULL);
	printf("  %-22s %s\n", "Requests by opcode", v->requests ? v->requests : "-");
	page_count(v, "Container syncs", V_SYNC_CONTAINER, "(fdatasync of the container file)");
	page_count(v, "data.mdb syncs", V_SYNC_DATA, "(fdatasync of LMDB's data file)");
	page_count(v, "Record syncs", V_SYNC_RECORD, "(fdatasync of the durability record)");
	page_count(v, "Group commits", V_GROUP_COMMITS, "(LMDB commits made durable since mount)");
	page_count(v, "Journal segments", V_JOURNAL_SEGMENTS,
		   "(fsyncs made durable by one container sync)");
	page_cache(v);
	printf("  %-22s %s\n", "Warnings",
	       !v->warnings ? "-" : *v->warnings ? v->warnings : "none");
	fflush(stdout);
}

void print_volume_watch_line(const struct volume *v, bool header, bool show_mount)
{
	static const char *const head[] = { "TIME", "LOGICAL", "+LOGICAL", "PHYSICAL",
		"+PHYSICAL", "RATIO", "FREE", "APP-WRITTEN", "DEV-WRITTEN", "WA",
		"REQ/S", "FSYNC/S", "SYNC/S", "COMMIT/S", "HIT%" };
	/* per second: requests, FSYNC requests, container syncs, group commits */
	static const enum vfield rate_of[] = { V_REQUESTS, V_REQ_FSYNC, V_SYNC_CONTAINER,
		V_GROUP_COMMITS };
	/* then HIT%: the chunk cache's hit ratio over the interval */
	enum { NCOLS = sizeof(head) / sizeof(head[0]) };
	int w = opt.bytes ? 14 : 9;
	char cells[NCOLS][64];
	struct row r;
	int64_t d;
	double wa, rate;
	size_t i;

	if (header) {
		printf("%-8s", head[0]);
		for (i = 1; i < NCOLS; i++)
			printf("  %*s", i == 5 || i == 9 || i == NCOLS - 1 ? 6 : w, head[i]);
		if (show_mount)
			printf("  MOUNT");
		printf("\n");
	}
	if (!v->ok)
		return;
	volume_as_row(v, &r);
	fmt_clock(cells[0], sizeof(cells[0]));
	for (i = 1; i < NCOLS; i++)
		strcpy(cells[i], "-");
	for (i = 0; i < 4; i++)
		if (vrate_get(v, rate_of[i], &rate))
			snprintf(cells[10 + i], 64, "%.1f", rate);
	if (vhas(v, V_LOGICAL))
		fmt_size(cells[1], 64, v->v[V_LOGICAL]);
	if (vdelta_get(v, V_LOGICAL, &d))
		fmt_delta(cells[2], 64, d);
	if (vhas(v, V_PHYSICAL))
		fmt_size(cells[3], 64, v->v[V_PHYSICAL]);
	if (vdelta_get(v, V_PHYSICAL, &d))
		fmt_delta(cells[4], 64, d);
	fmt_ratio(cells[5], 64, &r);
	if (vhas(v, V_FREE_PHYSICAL))
		fmt_size(cells[6], 64, v->v[V_FREE_PHYSICAL]);
	if (vdelta_get(v, V_APP_WRITTEN, &d))
		fmt_delta(cells[7], 64, d);
	if (vdelta_get(v, V_DEV_WRITTEN, &d))
		fmt_delta(cells[8], 64, d);
	if (interval_wa(v, &wa))
		snprintf(cells[9], 64, "%.2f", wa);
	if (cache_hit_ratio(v, true, &rate))
		snprintf(cells[NCOLS - 1], 64, "%.1f", 100.0 * rate);
	printf("%-8s", cells[0]);
	for (i = 1; i < NCOLS; i++)
		printf("  %*s", i == 5 || i == 9 || i == NCOLS - 1 ? 6 : w, cells[i]);
	if (show_mount)
		printf("  %s", v->mount);
	printf("\n");
	fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* --prometheus                                                       */

struct prom_metric {
	const char *name;
	bool counter;
	enum vfield f;
	const char *help;
};

static const struct prom_metric prom_metrics[] = {
	{ "csdfs_capacity_logical_bytes", false, V_CAP_LOGICAL,
	  "Logical capacity of the volume (df Size)." },
	{ "csdfs_used_logical_bytes", false, V_USED_LOGICAL,
	  "Logical capacity taken by stored chunks, a whole chunk each (df Used)." },
	{ "csdfs_capacity_physical_bytes", false, V_CAP_PHYSICAL,
	  "Data area of the container file." },
	{ "csdfs_used_physical_bytes", false, V_USED_PHYSICAL,
	  "Container blocks in use." },
	{ "csdfs_free_physical_bytes", false, V_FREE_PHYSICAL,
	  "Container blocks free." },
	{ "csdfs_free_usable_bytes", false, V_FREE_USABLE,
	  "Free container bytes a whole uncompressed chunk can still be written to, beyond the reserve." },
	{ "csdfs_logical_bytes", false, V_LOGICAL,
	  "Logical size of the regular files (du --apparent-size)." },
	{ "csdfs_physical_bytes", false, V_PHYSICAL,
	  "4 KiB blocks charged to the regular files (du)." },
	{ "csdfs_stored_bytes", false, V_STORED,
	  "Compressed bytes stored, byte-exact." },
	{ "csdfs_zero_bytes", false, V_ZERO,
	  "Logical bytes not stored: holes and all-zero chunks." },
	{ "csdfs_incompressible_bytes", false, V_INCOMPRESSIBLE,
	  "Logical bytes stored raw." },
	{ "csdfs_files", false, V_FILES, "Regular files." },
	{ "csdfs_extents", false, V_EXTENTS, "Stored chunks." },
	{ "csdfs_metadata_bytes", false, V_META_BYTES, "Size of the LMDB metadata file." },
	{ "csdfs_atomic_write_unit_bytes", false, V_ATOMIC_UNIT,
	  "Aligned writes up to this size are atomic." },
	{ "csdfs_app_written_bytes_total", true, V_APP_WRITTEN,
	  "Bytes written by applications." },
	{ "csdfs_dev_written_bytes_total", true, V_DEV_WRITTEN,
	  "Bytes written to the container." },
	{ "csdfs_checksum_errors_total", true, V_CSUM_ERRORS,
	  "Checksum mismatches found on read." },
	{ "csdfs_dead_bytes", false, V_DEAD,
	  "Bytes of used blocks no live chunk stores." },
	{ "csdfs_compacted_bytes_total", true, V_COMPACT_WRITTEN,
	  "Stored bytes compaction moved." },
	{ "csdfs_fuse_requests_total", true, V_REQUESTS,
	  "FUSE requests the daemon received since it mounted." },
	{ "csdfs_fuse_fsync_requests_total", true, V_REQ_FSYNC,
	  "FUSE FSYNC requests since mount." },
	{ "csdfs_container_syncs_total", true, V_SYNC_CONTAINER,
	  "fdatasync calls on the container file." },
	{ "csdfs_meta_data_syncs_total", true, V_SYNC_DATA,
	  "fdatasync calls on LMDB's data.mdb." },
	{ "csdfs_meta_record_syncs_total", true, V_SYNC_RECORD,
	  "fdatasync calls on the metadata durability record." },
	{ "csdfs_group_commits_total", true, V_GROUP_COMMITS,
	  "Group commits made durable since mount." },
	{ "csdfs_journal_segments_total", true, V_JOURNAL_SEGMENTS,
	  "Journal segments written since mount (an fsync made durable with one container sync)." },
	{ "csdfs_cache_hits_total", true, V_CACHE_HITS,
	  "Chunk reads the decoded-chunk cache answered since mount." },
	{ "csdfs_cache_misses_total", true, V_CACHE_MISSES,
	  "Chunk reads the decoded-chunk cache could not answer since mount." },
	{ "csdfs_cache_bytes", false, V_CACHE_BYTES,
	  "Decoded chunk bytes the cache holds." },
	{ "csdfs_cache_budget_bytes", false, V_CACHE_BUDGET,
	  "Decoded chunk bytes the cache may hold now (cache_size less the metadata's share; 0: no cache)." },
};

/* A label value: backslash, double quote and newline escaped. */
static void prom_label(const char *s)
{
	fputs("{mount=\"", stdout);
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			putchar('\\');
		if (*s == '\n')
			fputs("\\n", stdout);
		else
			putchar(*s);
	}
	fputs("\"}", stdout);
}

/* Non-empty items of a ';'-separated list. */
static int count_items(const char *s)
{
	int n = 0;

	while (*s) {
		size_t k = strcspn(s, ";");

		n += k > 0;
		s += k + (s[k] == ';');
	}
	return n;
}

static void prom_head(const char *name, const char *type, const char *help)
{
	printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static bool prom_ratio(const struct volume *v, double *x)
{
	struct row r;
	bool inf;

	volume_as_row(v, &r);
	return row_ratio(&r, x, &inf) && !inf;
}

static bool prom_wa(const struct volume *v, double *x)
{
	*x = v->wa;
	return v->have_wa;
}

static bool prom_warnings(const struct volume *v, double *x)
{
	*x = v->warnings ? count_items(v->warnings) : 0;
	return v->warnings != NULL;
}

/* A gauge computed per volume; @val says whether a volume has a value. */
static void prom_computed(const struct volume *vols, int n, const char *name,
			  const char *help, bool (*val)(const struct volume *, double *))
{
	int i, shown = 0;
	double x;

	for (i = 0; i < n; i++) {
		if (!vols[i].ok || !val(&vols[i], &x))
			continue;
		if (!shown++)
			prom_head(name, "gauge", help);
		fputs(name, stdout);
		prom_label(vols[i].mount);
		printf(" %.6g\n", x);
	}
}

void print_volumes_prometheus(const struct volume *vols, int n)
{
	size_t m;
	int i, shown;

	for (m = 0; m < sizeof(prom_metrics) / sizeof(prom_metrics[0]); m++) {
		const struct prom_metric *pm = &prom_metrics[m];

		for (i = shown = 0; i < n; i++) {
			if (!vols[i].ok || !vhas(&vols[i], pm->f))
				continue;
			if (!shown++)
				prom_head(pm->name, pm->counter ? "counter" : "gauge", pm->help);
			fputs(pm->name, stdout);
			prom_label(vols[i].mount);
			printf(" %" PRIu64 "\n", vols[i].v[pm->f]);
		}
	}
	prom_computed(vols, n, "csdfs_compression_ratio",
		      "Logical bytes / physical bytes of the regular files.", prom_ratio);
	prom_computed(vols, n, "csdfs_write_amplification",
		      "(Device + metadata bytes written) / application bytes written.", prom_wa);
	prom_computed(vols, n, "csdfs_warnings",
		      "Warnings the volume raises now (low-space, checksum-errors, failed).",
		      prom_warnings);
	fflush(stdout);
}
