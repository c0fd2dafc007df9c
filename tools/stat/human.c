/* SPDX-License-Identifier: MIT */
/*
 * csdfs-stat: the human-readable report of PATH arguments, an aligned
 * table: a row per entry, and with -r a TOTAL under a rule and each
 * directory's own roll-up to compare it with; --histogram, the same rows
 * as counts of stored chunks by compressed size; and --policy, a line of
 * effective policy per PATH.
 */
#include "stat.h"

#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ------------------------------------------------------------------ */
/* aligned tables                                                     */

#define MAX_COLS (HIST_BUCKETS + 6)   /* --histogram's, the widest */

struct table {
	int ncols;
	const char *head[MAX_COLS];
	bool left[MAX_COLS];        /* left-aligned column */
	char *(*cells)[MAX_COLS];
	bool *rule_before;          /* print a separator line before this row */
	size_t n, cap;
};

static size_t table_add(struct table *t, bool rule)
{
	size_t old = t->cap;

	grow((void **)&t->cells, &t->cap, t->n + 1, sizeof(*t->cells));
	if (t->cap != old)
		t->rule_before = xrealloc(t->rule_before, t->cap * sizeof(bool));
	memset(t->cells[t->n], 0, sizeof(*t->cells));
	t->rule_before[t->n] = rule;
	return t->n++;
}

static void table_set(struct table *t, size_t row, int col, const char *s)
{
	free(t->cells[row][col]);
	t->cells[row][col] = xstrdup(s);
}

static const char *table_get(const struct table *t, size_t row, int col)
{
	return t->cells[row][col] ? t->cells[row][col] : "";
}

static void table_print(const struct table *t, FILE *f)
{
	size_t w[MAX_COLS], i, total = 0;
	int c;

	for (c = 0; c < t->ncols; c++) {
		w[c] = strlen(t->head[c]);
		for (i = 0; i < t->n; i++)
			if (strlen(table_get(t, i, c)) > w[c])
				w[c] = strlen(table_get(t, i, c));
		total += w[c] + (c ? 2 : 0);
	}
	for (i = 0; i <= t->n; i++) {
		if (i && t->rule_before[i - 1]) {
			size_t k;

			for (k = 0; k < total; k++)
				fputc('-', f);
			fputc('\n', f);
		}
		for (c = 0; c < t->ncols; c++) {
			const char *s = i ? table_get(t, i - 1, c) : t->head[c];
			bool last = c == t->ncols - 1;

			if (c)
				fputs("  ", f);
			if (t->left[c])
				fprintf(f, "%-*s", last ? 0 : (int)w[c], s);
			else
				fprintf(f, "%*s", (int)w[c], s);
		}
		fputc('\n', f);
	}
}

static void table_free(struct table *t)
{
	size_t i;
	int c;

	for (i = 0; i < t->n; i++)
		for (c = 0; c < MAX_COLS; c++)
			free(t->cells[i][c]);
	free(t->cells);
	free(t->rule_before);
	memset(t, 0, sizeof(*t));
}

/* ------------------------------------------------------------------ */
/* output of PATH reports                                             */

/* Cell @c of table row @i: the size of @r's field @f, "-" when unknown. */
static void cell_size(struct table *t, size_t i, int c, const struct row *r, enum rfield f)
{
	char buf[CELL];

	if (has(r, f))
		fmt_size(buf, CELL, r->v[f]);
	else
		strcpy(buf, "-");
	table_set(t, i, c, buf);
}

static void table_row(struct table *t, const struct row *r, const char *name, bool rule)
{
	size_t i = table_add(t, rule), d;
	char buf[CELL];
	int c = 0;

	table_set(t, i, c++, name);
	cell_size(t, i, c++, r, R_LOGICAL);
	cell_size(t, i, c, r, R_PHYSICAL);
	if (row_shares_blocks(r)) {
		/* Marked, and explained under the table (shared_note). */
		snprintf(buf, CELL, "%s*", table_get(t, i, c));
		table_set(t, i, c, buf);
	}
	c++;
	cell_size(t, i, c++, r, R_STORED);
	fmt_ratio(buf, CELL, r);
	table_set(t, i, c++, buf);
	fmt_savings(buf, CELL, r);
	table_set(t, i, c++, buf);
	cell_size(t, i, c++, r, R_ZERO);
	if (opt.watch > 0) {
		/* +LOGICAL +PHYSICAL +STORED: the first three delta_fields */
		for (d = 0; d < 3; d++) {
			if (r->have_delta && (r->have_dv & (1u << d)))
				fmt_delta(buf, CELL, r->delta[d]);
			else
				strcpy(buf, "-");
			table_set(t, i, c++, buf);
		}
	}
	fmt_mix(buf, CELL, r);
	table_set(t, i, c, buf);
}

void print_paths_human(const struct rows *entries, const struct rows *rollups,
		       const struct row *total)
{
	static const char *const head[] = { "NAME", "LOGICAL", "PHYSICAL", "STORED",
		"RATIO", "SAVINGS", "ZERO" };
	struct table t = { 0 };
	char *name;
	size_t i;
	int c;

	for (c = 0; c < 7; c++)
		t.head[t.ncols++] = head[c];
	if (opt.watch > 0) {
		t.head[t.ncols++] = "+LOGICAL";
		t.head[t.ncols++] = "+PHYSICAL";
		t.head[t.ncols++] = "+STORED";
	}
	t.head[t.ncols++] = "CODEC MIX";
	t.left[0] = true;
	t.left[t.ncols - 1] = true;
	for (i = 0; i < entries->n; i++)
		table_row(&t, &entries->v[i], entries->v[i].name, false);
	if (opt.recursive) {
		if (asprintf(&name, "TOTAL (%zu file%s)", entries->n,
			     entries->n == 1 ? "" : "s") < 0)
			oom();
		table_row(&t, total, name, true);
		free(name);
		for (i = 0; i < rollups->n; i++) {
			if (asprintf(&name, "%s (roll-up)", rollups->v[i].name) < 0)
				oom();
			table_row(&t, &rollups->v[i], name, false);
			free(name);
		}
	}
	/* Only error lines when nothing at all could be reported. */
	if (entries->n || rollups->n || !n_problems)
		table_print(&t, stdout);
	for (i = 0; i < t.n; i++)
		if (strchr(table_get(&t, i, 2), '*')) {
			printf("* physical below stored: part of its bytes share 4 KiB blocks "
			       "charged to files written with it (csdfs-stat(1), SHARED BLOCKS)\n");
			break;
		}
	table_free(&t);
	fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* --histogram                                                        */

static void hist_row(struct table *t, const struct row *r, const char *name,
		     unsigned nb, bool rule)
{
	size_t i = table_add(t, rule);
	uint64_t all;
	char buf[CELL];
	unsigned b;
	int c = 0;

	table_set(t, i, c++, name);
	if (!r->have_hist) {
		for (; c < t->ncols; c++)
			table_set(t, i, c, "-");
		return;
	}
	if (r->hist.chunk)
		fmt_size(buf, CELL, r->hist.chunk);
	else
		strcpy(buf, "mixed");
	table_set(t, i, c++, buf);
	all = r->hist.raw + r->hist.zero;
	for (b = 0; b < nb; b++) {
		snprintf(buf, CELL, "%llu", (unsigned long long)r->hist.b[b]);
		table_set(t, i, c++, buf);
		all += r->hist.b[b];
	}
	snprintf(buf, CELL, "%llu", (unsigned long long)r->hist.raw);
	table_set(t, i, c++, buf);
	snprintf(buf, CELL, "%llu", (unsigned long long)r->hist.zero);
	table_set(t, i, c++, buf);
	snprintf(buf, CELL, "%llu", (unsigned long long)all);
	table_set(t, i, c, buf);
}

void print_histogram_human(const struct rows *entries, const struct rows *rollups,
			   const struct row *total)
{
	static char head[HIST_BUCKETS][16];
	struct table t = { 0 };
	unsigned nb = 0, b;
	char *name;
	size_t i;

	for (i = 0; i < entries->n; i++)
		if (entries->v[i].have_hist && hist_buckets(&entries->v[i].hist) > nb)
			nb = hist_buckets(&entries->v[i].hist);
	for (i = 0; i < rollups->n; i++)
		if (rollups->v[i].have_hist && hist_buckets(&rollups->v[i].hist) > nb)
			nb = hist_buckets(&rollups->v[i].hist);
	t.head[t.ncols++] = "NAME";
	t.head[t.ncols++] = "CHUNK";
	for (b = 0; b < nb; b++) {
		snprintf(head[b], sizeof(head[b]), "<=%uK", (b + 1) * 4);
		t.head[t.ncols++] = head[b];
	}
	t.head[t.ncols++] = "RAW";
	t.head[t.ncols++] = "ZERO";
	t.head[t.ncols++] = "CHUNKS";
	t.left[0] = true;
	for (i = 0; i < entries->n; i++)
		hist_row(&t, &entries->v[i], entries->v[i].name, nb, false);
	if (opt.recursive) {
		if (asprintf(&name, "TOTAL (%zu file%s)", entries->n,
			     entries->n == 1 ? "" : "s") < 0)
			oom();
		hist_row(&t, total, name, nb, true);
		free(name);
		for (i = 0; i < rollups->n; i++) {
			if (asprintf(&name, "%s (roll-up)", rollups->v[i].name) < 0)
				oom();
			hist_row(&t, &rollups->v[i], name, nb, false);
			free(name);
		}
	}
	if (entries->n || rollups->n || !n_problems) {
		table_print(&t, stdout);
		printf("stored chunks by compressed size (byte-exact, before 4 KiB rounding); "
		       "RAW = stored uncompressed, ZERO = holes and all-zero chunks, not stored\n");
	}
	table_free(&t);
	fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* --policy                                                           */

static void policy_line(const char *path)
{
	char *pol = policy_of(path);

	if (pol)
		printf("%s: %s\n", path, pol);
	free(pol);
}

static int policy_walk(const char *path, const struct stat *st, int type, struct FTW *f)
{
	(void)st;
	(void)f;
	if (stop_requested)
		return 1;
	if (type == FTW_F || type == FTW_D)
		policy_line(path);
	return 0;
}

void run_policy(char **paths, int npaths)
{
	struct stat st;

	for (int i = 0; i < npaths && !stop_requested; i++) {
		if (stat(paths[i], &st)) {
			problem(paths[i], "cannot access '%s': %s", paths[i], strerror(errno));
			continue;
		}
		if (opt.recursive && S_ISDIR(st.st_mode))
			nftw(paths[i], policy_walk, 32, FTW_PHYS | FTW_MOUNT);
		else
			policy_line(paths[i]);
	}
	fflush(stdout);
}
