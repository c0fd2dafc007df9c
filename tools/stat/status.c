/* SPDX-License-Identifier: MIT */
/*
 * csdfs-stat -f: the human-readable status of a volume, read from the
 * attributes of its root (collect.c sample_volume): a page of labelled
 * values, or with --watch one line per sample with the changes of the
 * last interval. Ratio, savings and the codec mix are formatted as for a
 * row (volume_as_row), so the page and the table agree.
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

void print_volume_page(const struct volume *v)
{
	char buf[CELL], note[128];
	struct row r;

	if (!v->ok)
		return;
	volume_as_row(v, &r);
	printf("csdfs volume %s\n", v->mount);
	page_size(v, "Logical capacity", V_CAP_LOGICAL, "(what df shows)");
	page_size(v, "Physical capacity", V_CAP_PHYSICAL, "(container data area)");
	pct_note(note, sizeof(note), v, V_LOGICAL, V_CAP_LOGICAL, "logical capacity");
	page_size(v, "Logical used", V_LOGICAL, note);
	pct_note(note, sizeof(note), v, V_PHYSICAL, V_CAP_PHYSICAL, "physical capacity");
	page_size(v, "Physical used", V_PHYSICAL, note);
	page_size(v, "Stored (byte-exact)", V_STORED, "(compressed bytes before 4 KiB rounding)");
	pct_note(note, sizeof(note), v, V_FREE_PHYSICAL, V_CAP_PHYSICAL, "physical capacity");
	page_size(v, "Free physical space", V_FREE_PHYSICAL, note);
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
	printf("  %-22s %s\n", "Warnings",
	       !v->warnings ? "-" : *v->warnings ? v->warnings : "none");
	fflush(stdout);
}

void print_volume_watch_line(const struct volume *v, bool header, bool show_mount)
{
	static const char *const head[] = { "TIME", "LOGICAL", "+LOGICAL", "PHYSICAL",
		"+PHYSICAL", "RATIO", "FREE", "APP-WRITTEN", "DEV-WRITTEN", "WA" };
	int w = opt.bytes ? 14 : 9;
	char cells[10][64];
	struct row r;
	int64_t d;
	double wa;
	size_t i;

	if (header) {
		printf("%-8s", head[0]);
		for (i = 1; i < 10; i++)
			printf("  %*s", i == 5 || i == 9 ? 6 : w, head[i]);
		if (show_mount)
			printf("  MOUNT");
		printf("\n");
	}
	if (!v->ok)
		return;
	volume_as_row(v, &r);
	fmt_clock(cells[0], sizeof(cells[0]));
	for (i = 1; i < 10; i++)
		strcpy(cells[i], "-");
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
	printf("%-8s", cells[0]);
	for (i = 1; i < 10; i++)
		printf("  %*s", i == 5 || i == 9 ? 6 : w, cells[i]);
	if (show_mount)
		printf("  %s", v->mount);
	printf("\n");
	fflush(stdout);
}
