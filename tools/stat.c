/* SPDX-License-Identifier: MIT */
/*
 * csdfs-stat: per-file, per-tree and per-volume space report for csdfs.
 *
 * It talks to the filesystem only through the read-only virtual xattrs
 * user.csdfs.* (tests/CLI.md), read one by one with getxattr(2) by name, and
 * through stat(2)/lstat(2) for file types; it never opens a volume, so any
 * user who may read a file may report on it. The daemon never lists these
 * names, so nothing here may depend on listxattr(2).
 *
 * Invariants of the output: ratio = logical / physical and
 * savings = 1 - physical / logical, computed here from the integer byte
 * counts so that rows and totals use one definition; a value the filesystem
 * does not provide is shown as "-" (JSON null), never as 0. The JSON layout
 * is a stable interface, documented in docs/stat-json.md: add keys, never
 * rename or remove them, and bump CSDFS_STAT_JSON_VERSION when a meaning
 * changes.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#ifndef _FILE_OFFSET_BITS
#define _FILE_OFFSET_BITS 64
#endif
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define PROG "csdfs-stat"
#define XATTR_PREFIX "user.csdfs."
#define CSDFS_STAT_JSON_VERSION 1

/* Exit statuses (man page, EXIT STATUS). */
#define EXIT_OK 0
#define EXIT_ERR 1
#define EXIT_USAGE 2

/* ------------------------------------------------------------------ */
/* options and global state                                           */

enum sort_key { SORT_NAME, SORT_LOGICAL, SORT_PHYSICAL, SORT_STORED, SORT_ZERO,
		SORT_RATIO, SORT_SAVINGS };

static const char *const sort_names[] = {
	[SORT_NAME] = "name", [SORT_LOGICAL] = "logical",
	[SORT_PHYSICAL] = "physical", [SORT_STORED] = "stored",
	[SORT_ZERO] = "zero", [SORT_RATIO] = "ratio", [SORT_SAVINGS] = "savings",
};

struct opts {
	bool recursive;
	bool volume;       /* -f */
	bool json;
	bool bytes;        /* exact bytes instead of K/M/G/T */
	enum sort_key sort;
	double watch;      /* seconds between samples; 0 = one sample */
	long count;        /* samples to take with --watch; 0 = until SIGINT */
};

static struct opts opt;
static int exit_status = EXIT_OK;
static volatile sig_atomic_t stop_requested;

/* Problems met while sampling, for stderr (at once) and the JSON "errors". */
struct problem {
	char *path;
	char *message;
};
static struct problem *problems;
static size_t n_problems, cap_problems;

static void oom(void)
{
	fprintf(stderr, PROG ": out of memory\n");
	exit(EXIT_ERR);
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		oom();
	return p;
}

static void *xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (!p)
		oom();
	return p;
}

static char *xstrdup(const char *s)
{
	char *d = strdup(s);

	if (!d)
		oom();
	return d;
}

/* Grow *v (of *cap elements of @size) so that it holds at least @need. */
static void grow(void **v, size_t *cap, size_t need, size_t size)
{
	if (need <= *cap)
		return;
	*cap = *cap ? *cap * 2 : 16;
	if (*cap < need)
		*cap = need;
	*v = xrealloc(*v, *cap * size);
}

/* qsort(3) that also accepts an empty, never allocated array. */
static void sort_array(void *v, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(v, n, size, cmp);
}

/*
 * Report a problem with @path: one line on stderr now, an entry in the JSON
 * "errors" array later, and exit status 1 at the end. @fmt describes the
 * problem; the message on stderr is "csdfs-stat: " + the formatted text.
 */
__attribute__((format(printf, 2, 3)))
static void problem(const char *path, const char *fmt, ...)
{
	char msg[PATH_MAX + 256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, PROG ": %s\n", msg);
	grow((void **)&problems, &cap_problems, n_problems + 1, sizeof(*problems));
	problems[n_problems].path = xstrdup(path);
	problems[n_problems].message = xstrdup(msg);
	n_problems++;
	exit_status = EXIT_ERR;
}

static void problems_clear(void)
{
	size_t i;

	for (i = 0; i < n_problems; i++) {
		free(problems[i].path);
		free(problems[i].message);
	}
	n_problems = 0;
}

/* ------------------------------------------------------------------ */
/* reading attributes                                                 */

/*
 * Read user.csdfs.@attr of @path (following a final symlink) into a
 * malloc'd NUL-terminated string.
 * @return 0, or -errno: -ENODATA when the attribute is absent, -ENOTSUP when
 * the filesystem has no user xattrs at all.
 */
static int attr_read(const char *path, const char *attr, char **out)
{
	char name[64], small[256], *buf;
	ssize_t n;

	snprintf(name, sizeof(name), XATTR_PREFIX "%s", attr);
	n = getxattr(path, name, small, sizeof(small) - 1);
	if (n >= 0) {
		small[n] = '\0';
		*out = xstrdup(small);
		return 0;
	}
	/* Long values (a codec mix of many codecs): ask for the size, retry. */
	while (errno == ERANGE) {
		n = getxattr(path, name, NULL, 0);
		if (n < 0)
			break;
		buf = xrealloc(NULL, (size_t)n + 1);
		n = getxattr(path, name, buf, (size_t)n);
		if (n >= 0) {
			buf[n] = '\0';
			*out = buf;
			return 0;
		}
		free(buf);
	}
	return errno == EOPNOTSUPP ? -ENOTSUP : -errno;
}

/* Strict unsigned decimal: digits only, no sign, no overflow. */
static bool parse_u64(const char *s, uint64_t *v)
{
	unsigned long long x;
	char *end;

	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	x = strtoull(s, &end, 10);
	if (errno || *end)
		return false;
	*v = x;
	return true;
}

static bool parse_double(const char *s, double *v)
{
	char *end;

	if (!*s)
		return false;
	errno = 0;
	*v = strtod(s, &end);
	return !errno && !*end && isfinite(*v);
}

/*
 * Read a numeric attribute. @return true with *v set when present and valid;
 * false when absent (ENODATA: an older daemon), and then also for other
 * errors and malformed values, which are reported as problems.
 */
static bool attr_u64(const char *path, const char *attr, uint64_t *v)
{
	char *s;
	bool ok;
	int rc;

	rc = attr_read(path, attr, &s);
	if (rc == -ENODATA)
		return false;
	if (rc < 0) {
		problem(path, "cannot read user.csdfs.%s of '%s': %s", attr, path,
			strerror(-rc));
		return false;
	}
	ok = parse_u64(s, v);
	if (!ok)
		problem(path, "'%s' has a malformed user.csdfs.%s: '%s'", path, attr, s);
	free(s);
	return ok;
}

/* A string attribute; NULL when absent or unreadable (unreadable = problem). */
static char *attr_str(const char *path, const char *attr)
{
	char *s = NULL;
	int rc;

	rc = attr_read(path, attr, &s);
	if (rc < 0 && rc != -ENODATA)
		problem(path, "cannot read user.csdfs.%s of '%s': %s", attr, path,
			strerror(-rc));
	return rc < 0 ? NULL : s;
}

/*
 * Is @path on csdfs? user.csdfs.logical answers on every inode of a csdfs
 * mount. Problems name @shown (what the user typed).
 * @return 0 and *logical, or -1 after reporting the problem.
 */
static int probe_csdfs(const char *path, const char *shown, uint64_t *logical)
{
	char *s;
	int rc;

	rc = attr_read(path, "logical", &s);
	if (rc == -ENODATA || rc == -ENOTSUP) {
		problem(shown, "'%s' is not on a csdfs filesystem", shown);
		return -1;
	}
	if (rc < 0) {
		problem(path, "cannot read '%s': %s", path, strerror(-rc));
		return -1;
	}
	if (!parse_u64(s, logical)) {
		problem(path, "'%s' has a malformed user.csdfs.logical: '%s'", path, s);
		free(s);
		return -1;
	}
	free(s);
	return 0;
}

/* ------------------------------------------------------------------ */
/* codec mix: "zstd:1=1048576 lz4=65536 none=4096"                    */

struct mix_ent {
	char *codec;
	uint64_t bytes;
};

struct mix {
	struct mix_ent *v;
	size_t n, cap;
};

static void mix_add(struct mix *m, const char *codec, uint64_t bytes)
{
	size_t i;

	for (i = 0; i < m->n; i++) {
		if (!strcmp(m->v[i].codec, codec)) {
			m->v[i].bytes += bytes;
			return;
		}
	}
	grow((void **)&m->v, &m->cap, m->n + 1, sizeof(*m->v));
	m->v[m->n].codec = xstrdup(codec);
	m->v[m->n].bytes = bytes;
	m->n++;
}

static void mix_free(struct mix *m)
{
	size_t i;

	for (i = 0; i < m->n; i++)
		free(m->v[i].codec);
	free(m->v);
	memset(m, 0, sizeof(*m));
}

/* @return false (after keeping the well-formed words) on a malformed word. */
static bool mix_parse(struct mix *m, const char *s)
{
	char *copy = xstrdup(s), *save = NULL, *w, *eq;
	bool ok = true;
	uint64_t b;

	for (w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
		eq = strrchr(w, '=');
		if (!eq || eq == w || !parse_u64(eq + 1, &b)) {
			ok = false;
			continue;
		}
		*eq = '\0';
		mix_add(m, w, b);
	}
	free(copy);
	return ok;
}

static void mix_merge(struct mix *dst, const struct mix *src)
{
	size_t i;

	for (i = 0; i < src->n; i++)
		mix_add(dst, src->v[i].codec, src->v[i].bytes);
}

static int mix_cmp(const void *a, const void *b)
{
	const struct mix_ent *x = a, *y = b;

	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return strcmp(x->codec, y->codec);
}

/* Largest share first, so the dominant codec leads the column. */
static void mix_sort(struct mix *m)
{
	sort_array(m->v, m->n, sizeof(*m->v), mix_cmp);
}

/* ------------------------------------------------------------------ */
/* rows: a file, a directory roll-up, or the TOTAL of a walk          */

enum row_kind { ROW_FILE, ROW_DIR, ROW_TOTAL, ROW_ROLLUP };

/* Numeric per-row fields, all read from user.csdfs.<name>. */
enum rfield { R_LOGICAL, R_PHYSICAL, R_STORED, R_ZERO, R_EXTENTS,
	      R_INCOMPRESSIBLE, R_FILES, NR_RFIELDS };

static const char *const rfield_attr[NR_RFIELDS] = {
	"logical", "physical", "stored", "zero", "extents", "incompressible", "files",
};

/* The fields --watch reports deltas of. */
static const enum rfield delta_fields[] = { R_LOGICAL, R_PHYSICAL, R_STORED, R_ZERO };
#define NR_DELTA (sizeof(delta_fields) / sizeof(delta_fields[0]))

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
	bool have_delta;            /* --watch: the previous sample had this row */
	int64_t delta[NR_DELTA];
	unsigned have_dv;           /* bit per delta_fields index */
};

struct rows {
	struct row *v;
	size_t n, cap;
};

static bool has(const struct row *r, enum rfield f)
{
	return r->have & (1u << f);
}

static struct row *rows_push(struct rows *rs)
{
	struct row *r;

	grow((void **)&rs->v, &rs->cap, rs->n + 1, sizeof(*rs->v));
	r = &rs->v[rs->n];
	memset(r, 0, sizeof(*r));
	r->seq = rs->n++;
	return r;
}

static void row_free(struct row *r)
{
	free(r->name);
	mix_free(&r->mix);
}

static void rows_free(struct rows *rs)
{
	size_t i;

	for (i = 0; i < rs->n; i++)
		row_free(&rs->v[i]);
	free(rs->v);
	memset(rs, 0, sizeof(*rs));
}

/*
 * Fill @r from the xattrs of @path (a regular file or a directory, per
 * @st). The caller has checked that logical answers (probe_csdfs).
 */
static void row_load(struct row *r, const char *path, const struct stat *st,
		     uint64_t logical)
{
	char *s;
	int f;

	r->name = xstrdup(path);
	r->kind = S_ISDIR(st->st_mode) ? ROW_DIR : ROW_FILE;
	r->dev = st->st_dev;
	r->ino = st->st_ino;
	r->v[R_LOGICAL] = logical;
	r->have = 1u << R_LOGICAL;
	for (f = R_LOGICAL + 1; f < NR_RFIELDS; f++) {
		if (f == R_FILES && r->kind == ROW_FILE) {
			r->v[f] = 1;  /* a file is one file: keeps sums uniform */
			r->have |= 1u << f;
			continue;
		}
		if (attr_u64(path, rfield_attr[f], &r->v[f]))
			r->have |= 1u << f;
	}
	s = attr_str(path, "codec");
	if (s) {
		r->have_mix = true;
		if (!mix_parse(&r->mix, s))
			problem(path, "'%s' has a malformed user.csdfs.codec: '%s'", path, s);
		mix_sort(&r->mix);
		free(s);
	}
}

/* Add @src's fields into @dst; a field unknown in any row is unknown in the sum. */
static void row_accumulate(struct row *dst, const struct row *src, bool first)
{
	int f;

	for (f = 0; f < NR_RFIELDS; f++)
		dst->v[f] += src->v[f];
	if (first) {
		dst->have = src->have;
		dst->have_mix = src->have_mix;
	} else {
		dst->have &= src->have;
		dst->have_mix = dst->have_mix && src->have_mix;
	}
	mix_merge(&dst->mix, &src->mix);
}

/* ------------------------------------------------------------------ */
/* derived numbers                                                    */

/* ratio = logical / physical. @return false when unknown; *inf when physical is 0. */
static bool row_ratio(const struct row *r, double *ratio, bool *inf)
{
	uint64_t l = r->v[R_LOGICAL], p = r->v[R_PHYSICAL];

	if (!has(r, R_LOGICAL) || !has(r, R_PHYSICAL))
		return false;
	*inf = p == 0 && l != 0;
	*ratio = p ? (double)l / (double)p : (l ? INFINITY : 1.0);
	return true;
}

/* savings = 1 - physical / logical (0 when logical is 0; may be negative). */
static bool row_savings(const struct row *r, double *savings)
{
	uint64_t l = r->v[R_LOGICAL], p = r->v[R_PHYSICAL];

	if (!has(r, R_LOGICAL) || !has(r, R_PHYSICAL))
		return false;
	*savings = l ? 1.0 - (double)p / (double)l : 0.0;
	return true;
}

/* ------------------------------------------------------------------ */
/* human formatting                                                   */

/* A size: K/M/G/T/P (binary) with one decimal, or exact bytes with --bytes. */
static void fmt_size(char *buf, size_t len, uint64_t v)
{
	static const char units[] = "KMGTPE";
	double x = (double)v;
	int u = -1;

	if (opt.bytes || v < 1024) {
		snprintf(buf, len, "%" PRIu64, v);
		return;
	}
	/* Move up a unit also when rounding to one decimal would show 1024.0. */
	while (u < 5 && x >= 1023.95) {
		x /= 1024.0;
		u++;
	}
	snprintf(buf, len, "%.1f%c", x, units[u]);
}

static void fmt_delta(char *buf, size_t len, int64_t d)
{
	uint64_t mag = d < 0 ? (uint64_t)0 - (uint64_t)d : (uint64_t)d;

	buf[0] = d < 0 ? '-' : '+';
	fmt_size(buf + 1, len - 1, mag);
}

static void fmt_ratio(char *buf, size_t len, const struct row *r)
{
	double ratio;
	bool inf;

	if (!row_ratio(r, &ratio, &inf))
		snprintf(buf, len, "-");
	else if (inf)
		snprintf(buf, len, "inf");
	else
		snprintf(buf, len, "%.2fx", ratio);
}

static void fmt_savings(char *buf, size_t len, const struct row *r)
{
	double s;

	if (!row_savings(r, &s))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.1f%%", 100.0 * s);
}

/*
 * The CODEC MIX cell: "zstd:1 96% none 4%" (shares of the stored logical
 * bytes), or with --bytes the exact "zstd:1=1048576 none=4096". Codecs
 * holding no bytes are left out; "-" when nothing is stored.
 */
static void fmt_mix(char *buf, size_t len, const struct row *r)
{
	uint64_t total = 0;
	size_t i, off = 0;
	char part[96];

	buf[0] = '\0';
	if (!r->have_mix) {
		snprintf(buf, len, "-");
		return;
	}
	for (i = 0; i < r->mix.n; i++)
		total += r->mix.v[i].bytes;
	for (i = 0; i < r->mix.n; i++) {
		const struct mix_ent *e = &r->mix.v[i];
		double pct;

		if (!e->bytes)
			continue;
		pct = 100.0 * (double)e->bytes / (double)total;
		if (opt.bytes)
			snprintf(part, sizeof(part), "%s=%" PRIu64, e->codec, e->bytes);
		else if (pct < 1.0)
			snprintf(part, sizeof(part), "%s <1%%", e->codec);
		else
			snprintf(part, sizeof(part), "%s %.0f%%", e->codec, pct);
		off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "%s%s",
					off ? " " : "", part);
		if (off >= len)
			break;
	}
	if (!buf[0])
		snprintf(buf, len, "-");
}

/* ------------------------------------------------------------------ */
/* aligned tables                                                     */

#define MAX_COLS 12
#define CELL 512    /* formatting buffer for one cell (names are copied whole) */

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
/* JSON writer: pretty for one report, one line per sample for --watch */

struct json {
	FILE *f;
	bool pretty;
	int depth;
	bool first[32];
	bool after_key;
};

static void j_sep(struct json *j)
{
	int i;

	if (j->after_key) {
		j->after_key = false;
		return;
	}
	if (!j->first[j->depth])
		fputc(',', j->f);
	j->first[j->depth] = false;
	if (j->pretty && j->depth) {
		fputc('\n', j->f);
		for (i = 0; i < j->depth; i++)
			fputs("  ", j->f);
	}
}

static void j_open(struct json *j, char c)
{
	j_sep(j);
	fputc(c, j->f);
	j->first[++j->depth] = true;
}

static void j_close(struct json *j, char c)
{
	int i;

	if (j->pretty && !j->first[j->depth]) {
		fputc('\n', j->f);
		for (i = 0; i < j->depth - 1; i++)
			fputs("  ", j->f);
	}
	j->depth--;
	fputc(c, j->f);
}

/* Length of the valid UTF-8 sequence at @s, or 0 when it is not one. */
static size_t utf8_len(const unsigned char *s)
{
	size_t n, i;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0)
		n = 2, cp = s[0] & 0x1f;
	else if ((s[0] & 0xf0) == 0xe0)
		n = 3, cp = s[0] & 0x0f;
	else if ((s[0] & 0xf8) == 0xf0)
		n = 4, cp = s[0] & 0x07;
	else
		return 0;
	for (i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/* A JSON string; bytes that are not valid UTF-8 become U+FFFD. */
static void j_rawstr(struct json *j, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n;

	fputc('"', j->f);
	while (*s) {
		if (*s == '"' || *s == '\\') {
			fputc('\\', j->f);
			fputc(*s++, j->f);
		} else if (*s < 0x20) {
			fprintf(j->f, "\\u%04x", *s++);
		} else if ((n = utf8_len(s)) == 0) {
			fputs("\\ufffd", j->f);
			s++;
		} else {
			fwrite(s, 1, n, j->f);
			s += n;
		}
	}
	fputc('"', j->f);
}

/* A key; the value that follows must start with j_sep (j_open does). */
static void j_key(struct json *j, const char *k)
{
	j_sep(j);
	j_rawstr(j, k);
	fputs(j->pretty ? ": " : ":", j->f);
	j->after_key = true;
}

static void j_null(struct json *j)
{
	j_sep(j);
	fputs("null", j->f);
}

static void j_str(struct json *j, const char *k, const char *v)
{
	j_key(j, k);
	j_sep(j);
	if (v)
		j_rawstr(j, v);
	else
		fputs("null", j->f);
}

static void j_u64(struct json *j, const char *k, bool present, uint64_t v)
{
	j_key(j, k);
	j_sep(j);
	if (present)
		fprintf(j->f, "%" PRIu64, v);
	else
		fputs("null", j->f);
}

static void j_i64(struct json *j, const char *k, bool present, int64_t v)
{
	j_key(j, k);
	j_sep(j);
	if (present)
		fprintf(j->f, "%" PRId64, v);
	else
		fputs("null", j->f);
}

/* A number with 4 decimals (ratios, fractions); null when absent or infinite. */
static void j_num(struct json *j, const char *k, bool present, double v)
{
	j_key(j, k);
	j_sep(j);
	if (present && isfinite(v))
		fprintf(j->f, "%.4f", v);
	else
		fputs("null", j->f);
}

static void j_end_document(struct json *j)
{
	fputc('\n', j->f);
	fflush(j->f);
}

static void j_mix(struct json *j, const char *k, bool present, const struct mix *m)
{
	size_t i;

	j_key(j, k);
	if (!present) {
		j_null(j);
		return;
	}
	j_open(j, '{');
	for (i = 0; i < m->n; i++)
		j_u64(j, m->v[i].codec, true, m->v[i].bytes);
	j_close(j, '}');
}

static void j_errors(struct json *j)
{
	size_t i;

	j_key(j, "errors");
	j_open(j, '[');
	for (i = 0; i < n_problems; i++) {
		j_open(j, '{');
		j_str(j, "path", problems[i].path);
		j_str(j, "message", problems[i].message);
		j_close(j, '}');
	}
	j_close(j, ']');
}

/* ------------------------------------------------------------------ */
/* collecting rows for PATH arguments                                 */

/* nftw has no user pointer: the walk's state lives here. */
static struct rows *walk_rows;
static dev_t walk_dev;

static int walk_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	uint64_t logical;
	struct row *r;

	(void)ftw;
	if (stop_requested)
		return 1;
	switch (type) {
	case FTW_DNR:
		problem(path, "cannot read directory '%s'", path);
		return 0;
	case FTW_NS:
		problem(path, "cannot stat '%s'", path);
		return 0;
	case FTW_F:
		break;
	default:
		return 0;
	}
	/* FTW_MOUNT keeps the walk on one filesystem; check anyway. */
	if (!S_ISREG(st->st_mode) || st->st_dev != walk_dev)
		return 0;
	if (probe_csdfs(path, path, &logical) < 0)
		return 0;
	r = rows_push(walk_rows);
	row_load(r, path, st, logical);
	return 0;
}

static int row_devino_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	if (x->ino != y->ino)
		return x->ino < y->ino ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int row_seq_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* A file reached under two names (hard links, overlapping PATHs) counts once, by its first name. */
static void rows_dedup(struct rows *rs)
{
	size_t i, out = 0;

	sort_array(rs->v, rs->n, sizeof(*rs->v), row_devino_cmp);
	for (i = 0; i < rs->n; i++) {
		if (out && rs->v[out - 1].dev == rs->v[i].dev &&
		    rs->v[out - 1].ino == rs->v[i].ino) {
			row_free(&rs->v[i]);
			continue;
		}
		rs->v[out++] = rs->v[i];
	}
	rs->n = out;
	sort_array(rs->v, rs->n, sizeof(*rs->v), row_seq_cmp);
}

/* Sort key as a double (missing = -inf, so it sorts last in descending order). */
static double row_key(const struct row *r, enum sort_key k)
{
	double d;
	bool inf;

	switch (k) {
	case SORT_LOGICAL:
		return has(r, R_LOGICAL) ? (double)r->v[R_LOGICAL] : -INFINITY;
	case SORT_PHYSICAL:
		return has(r, R_PHYSICAL) ? (double)r->v[R_PHYSICAL] : -INFINITY;
	case SORT_STORED:
		return has(r, R_STORED) ? (double)r->v[R_STORED] : -INFINITY;
	case SORT_ZERO:
		return has(r, R_ZERO) ? (double)r->v[R_ZERO] : -INFINITY;
	case SORT_RATIO:
		return row_ratio(r, &d, &inf) ? d : -INFINITY;
	case SORT_SAVINGS:
		return row_savings(r, &d) ? d : -INFINITY;
	case SORT_NAME:
		break;
	}
	return 0;
}

static int row_sort_cmp(const void *a, const void *b)
{
	const struct row *x = a, *y = b;
	double kx, ky;

	if (opt.sort != SORT_NAME) {
		kx = row_key(x, opt.sort);
		ky = row_key(y, opt.sort);
		if (kx != ky)
			return kx > ky ? -1 : 1;  /* numbers: largest first */
	}
	return strcmp(x->name, y->name);
}

/*
 * One sample for the PATH arguments: @entries gets one row per PATH (or,
 * with -r, per regular file beneath a directory PATH), @rollups the
 * directory arguments' own roll-ups (-r only), @total the sum of @entries.
 */
static void sample_paths(char **paths, int npaths, struct rows *entries,
			 struct rows *rollups, struct row *total)
{
	struct stat st;
	uint64_t logical;
	size_t i;
	int a;

	for (a = 0; a < npaths; a++) {
		const char *p = paths[a];

		if (stat(p, &st) < 0) {
			problem(p, "cannot access '%s': %s", p, strerror(errno));
			continue;
		}
		if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
			problem(p, "'%s' is neither a regular file nor a directory", p);
			continue;
		}
		if (probe_csdfs(p, p, &logical) < 0)
			continue;
		if (opt.recursive && S_ISDIR(st.st_mode)) {
			struct row *r = rows_push(rollups);

			row_load(r, p, &st, logical);
			r->kind = ROW_ROLLUP;
			walk_rows = entries;
			walk_dev = st.st_dev;
			if (nftw(p, walk_one, 32, FTW_PHYS | FTW_MOUNT) < 0)
				problem(p, "cannot walk '%s': %s", p, strerror(errno));
		} else {
			row_load(rows_push(entries), p, &st, logical);
		}
	}
	rows_dedup(entries);
	sort_array(entries->v, entries->n, sizeof(*entries->v), row_sort_cmp);
	memset(total, 0, sizeof(*total));
	total->name = xstrdup("TOTAL");
	total->kind = ROW_TOTAL;
	total->have = ~0u;
	total->have_mix = true;
	for (i = 0; i < entries->n; i++)
		row_accumulate(total, &entries->v[i], i == 0);
	mix_sort(&total->mix);
}

/* ------------------------------------------------------------------ */
/* --watch bookkeeping for rows                                       */

static int row_name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct row *)a)->name, ((const struct row *)b)->name);
}

/* Set @r's deltas against the row of the same name in @prev (sorted by name). */
static void row_delta(struct row *r, const struct rows *prev)
{
	const struct row *p;
	struct row key;
	size_t i;

	if (!prev || !prev->n)
		return;
	key.name = r->name;
	p = bsearch(&key, prev->v, prev->n, sizeof(*prev->v), row_name_cmp);
	if (!p)
		return;
	r->have_delta = true;
	for (i = 0; i < NR_DELTA; i++) {
		enum rfield f = delta_fields[i];

		if (has(r, f) && has(p, f)) {
			r->delta[i] = (int64_t)(r->v[f] - p->v[f]);
			r->have_dv |= 1u << i;
		}
	}
}

/* A copy of @src's rows (names and numbers only), sorted by name for row_delta. */
static void rows_snapshot(struct rows *dst, const struct rows *src, const struct row *extra)
{
	size_t i;

	rows_free(dst);
	for (i = 0; i < src->n + (extra ? 1 : 0); i++) {
		const struct row *s = i < src->n ? &src->v[i] : extra;
		struct row *d = rows_push(dst);

		*d = *s;
		d->name = xstrdup(s->name);
		memset(&d->mix, 0, sizeof(d->mix));
	}
	sort_array(dst->v, dst->n, sizeof(*dst->v), row_name_cmp);
}

/* ------------------------------------------------------------------ */
/* output of PATH reports                                             */

/* A size cell of @r's field @f, "-" when unknown. */
static void cell_size(char *buf, const struct row *r, enum rfield f)
{
	if (has(r, f))
		fmt_size(buf, CELL, r->v[f]);
	else
		strcpy(buf, "-");
}

static void table_row(struct table *t, const struct row *r, const char *name, bool rule)
{
	size_t i = table_add(t, rule), d;
	char buf[CELL];
	int c = 0;

	table_set(t, i, c++, name);
	cell_size(buf, r, R_LOGICAL);
	table_set(t, i, c++, buf);
	cell_size(buf, r, R_PHYSICAL);
	table_set(t, i, c++, buf);
	cell_size(buf, r, R_STORED);
	table_set(t, i, c++, buf);
	fmt_ratio(buf, CELL, r);
	table_set(t, i, c++, buf);
	fmt_savings(buf, CELL, r);
	table_set(t, i, c++, buf);
	cell_size(buf, r, R_ZERO);
	table_set(t, i, c++, buf);
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

static void print_paths_human(const struct rows *entries, const struct rows *rollups,
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
	table_free(&t);
	fflush(stdout);
}

static const char *kind_name(enum row_kind k)
{
	switch (k) {
	case ROW_FILE: return "file";
	case ROW_DIR: return "dir";
	case ROW_TOTAL: return "total";
	case ROW_ROLLUP: return "dir";
	}
	return "?";
}

static void j_row(struct json *j, const struct row *r)
{
	double ratio = 0, savings = 0;
	bool inf, hr, hs;
	size_t d;
	int f;

	hr = row_ratio(r, &ratio, &inf);
	hs = row_savings(r, &savings);
	j_open(j, '{');
	j_str(j, "name", r->name);
	j_str(j, "type", kind_name(r->kind));
	for (f = 0; f < NR_RFIELDS; f++)
		j_u64(j, rfield_attr[f], has(r, f), r->v[f]);
	j_num(j, "ratio", hr, ratio);
	j_num(j, "savings", hs, savings);
	j_mix(j, "codec", r->have_mix, &r->mix);
	if (opt.watch > 0) {
		j_key(j, "delta");
		if (!r->have_delta) {
			j_null(j);
		} else {
			j_open(j, '{');
			for (d = 0; d < NR_DELTA; d++)
				j_i64(j, rfield_attr[delta_fields[d]],
				      r->have_dv & (1u << d), r->delta[d]);
			j_close(j, '}');
		}
	}
	j_close(j, '}');
}

static void j_header(struct json *j, const char *mode, long sample, double interval)
{
	struct timespec now;

	j_open(j, '{');
	j_u64(j, "csdfs_stat", true, CSDFS_STAT_JSON_VERSION);
	j_str(j, "mode", mode);
	if (opt.watch > 0) {
		clock_gettime(CLOCK_REALTIME, &now);
		j_u64(j, "sample", true, (uint64_t)sample);
		j_key(j, "time");
		j_sep(j);
		fprintf(j->f, "%lld.%03ld", (long long)now.tv_sec, now.tv_nsec / 1000000);
		j_num(j, "interval", sample > 1, interval);
	}
}

static void print_paths_json(const struct rows *entries, const struct rows *rollups,
			     const struct row *total, long sample, double interval)
{
	struct json j = { .f = stdout, .pretty = opt.watch <= 0 };
	size_t i;

	j.first[0] = true;
	j_header(&j, opt.recursive ? "recursive" : "paths", sample, interval);
	j_key(&j, "entries");
	j_open(&j, '[');
	for (i = 0; i < entries->n; i++)
		j_row(&j, &entries->v[i]);
	j_close(&j, ']');
	if (opt.recursive) {
		j_key(&j, "total");
		j_row(&j, total);
	} else {
		j_str(&j, "total", NULL);
	}
	j_key(&j, "rollups");
	j_open(&j, '[');
	for (i = 0; i < rollups->n; i++)
		j_row(&j, &rollups->v[i]);
	j_close(&j, ']');
	j_errors(&j);
	j_close(&j, '}');
	j_end_document(&j);
}

/* ------------------------------------------------------------------ */
/* volume status (-f)                                                 */

enum vfield { V_CAP_LOGICAL, V_CAP_PHYSICAL, V_LOGICAL, V_PHYSICAL, V_STORED,
	      V_ZERO, V_FREE_PHYSICAL, V_FILES, V_EXTENTS, V_INCOMPRESSIBLE,
	      V_APP_WRITTEN, V_DEV_WRITTEN, V_META_BYTES, V_ATOMIC_UNIT,
	      V_CSUM_ERRORS, NR_VFIELDS };

static const char *const vfield_attr[NR_VFIELDS] = {
	"capacity_logical", "capacity_physical", "logical", "physical", "stored",
	"zero", "free_physical", "files", "extents", "incompressible",
	"app_bytes_written", "dev_bytes_written", "meta_bytes",
	"atomic_write_unit", "checksum_errors",
};

/* The volume fields --watch reports deltas of. */
static const enum vfield vdelta_fields[] = { V_LOGICAL, V_PHYSICAL, V_STORED, V_ZERO,
	V_FREE_PHYSICAL, V_APP_WRITTEN, V_DEV_WRITTEN, V_META_BYTES, V_CSUM_ERRORS };
#define NR_VDELTA (sizeof(vdelta_fields) / sizeof(vdelta_fields[0]))

struct volume {
	char *arg;           /* the PATH as given */
	char *mount;         /* the root found from it */
	bool ok;             /* sampled (the root answered user.csdfs.logical) */
	uint64_t v[NR_VFIELDS];
	unsigned have;
	double wa;           /* user.csdfs.write_amplification */
	bool have_wa;
	char *warnings;      /* NULL = attribute absent */
	char *policy;
	struct mix mix;
	bool have_mix;
	/* --watch */
	bool have_delta;
	int64_t delta[NR_VDELTA];
	unsigned have_dv;
};

static bool vhas(const struct volume *v, enum vfield f)
{
	return v->have & (1u << f);
}

static void volume_clear(struct volume *v)
{
	free(v->warnings);
	free(v->policy);
	mix_free(&v->mix);
	v->warnings = v->policy = NULL;
	v->have = 0;
	v->have_wa = v->have_mix = v->ok = v->have_delta = false;
	v->have_dv = 0;
}

/*
 * The root of the filesystem holding @path: climb while the parent is on the
 * same device. @return a malloc'd path, or NULL with errno set.
 */
static char *mount_root(const char *path)
{
	struct stat st, pst;
	char *cur, *parent, *slash;

	cur = realpath(path, NULL);
	if (!cur)
		return NULL;
	if (stat(cur, &st) < 0) {
		free(cur);
		return NULL;
	}
	while (strcmp(cur, "/")) {
		slash = strrchr(cur, '/');
		parent = slash == cur ? xstrdup("/") : strndup(cur, (size_t)(slash - cur));
		if (!parent)
			oom();
		if (stat(parent, &pst) < 0 || pst.st_dev != st.st_dev ||
		    (pst.st_ino == st.st_ino)) {
			free(parent);
			break;
		}
		free(cur);
		cur = parent;
		st = pst;
	}
	return cur;
}

static void sample_volume(struct volume *v)
{
	uint64_t logical;
	char *s;
	int f;

	volume_clear(v);
	/*
	 * MOUNT is normally the mount point, which answers the root-only
	 * attributes; for any other path, climb to the root of its filesystem.
	 */
	if (!v->mount && attr_read(v->arg, "capacity_physical", &s) == 0) {
		free(s);
		v->mount = realpath(v->arg, NULL);
	}
	if (!v->mount) {
		v->mount = mount_root(v->arg);
		if (!v->mount) {
			problem(v->arg, "cannot access '%s': %s", v->arg, strerror(errno));
			return;
		}
	}
	if (probe_csdfs(v->mount, v->arg, &logical) < 0)
		return;
	v->ok = true;
	v->v[V_LOGICAL] = logical;
	v->have = 1u << V_LOGICAL;
	for (f = 0; f < NR_VFIELDS; f++)
		if (f != V_LOGICAL && attr_u64(v->mount, vfield_attr[f], &v->v[f]))
			v->have |= 1u << f;
	s = attr_str(v->mount, "write_amplification");
	if (s) {
		v->have_wa = parse_double(s, &v->wa);
		if (!v->have_wa)
			problem(v->mount, "'%s' has a malformed user.csdfs.write_amplification: '%s'",
				v->mount, s);
		free(s);
	}
	v->warnings = attr_str(v->mount, "warnings");
	v->policy = attr_str(v->mount, "policy");
	s = attr_str(v->mount, "codec");
	if (s) {
		v->have_mix = true;
		if (!mix_parse(&v->mix, s))
			problem(v->mount, "'%s' has a malformed user.csdfs.codec: '%s'",
				v->mount, s);
		mix_sort(&v->mix);
		free(s);
	}
}

/* The volume as a row, to share the ratio/savings/mix formatting. */
static void volume_as_row(const struct volume *v, struct row *r)
{
	memset(r, 0, sizeof(*r));
	r->v[R_LOGICAL] = v->v[V_LOGICAL];
	r->v[R_PHYSICAL] = v->v[V_PHYSICAL];
	r->have = (vhas(v, V_LOGICAL) ? 1u << R_LOGICAL : 0) |
		  (vhas(v, V_PHYSICAL) ? 1u << R_PHYSICAL : 0);
	r->mix = v->mix;
	r->have_mix = v->have_mix;
}

static void vdelta(struct volume *v, const uint64_t *prev, unsigned prev_have)
{
	size_t i;

	v->have_delta = true;
	for (i = 0; i < NR_VDELTA; i++) {
		enum vfield f = vdelta_fields[i];

		if (vhas(v, f) && (prev_have & (1u << f))) {
			v->delta[i] = (int64_t)(v->v[f] - prev[f]);
			v->have_dv |= 1u << i;
		}
	}
}

static bool vdelta_get(const struct volume *v, enum vfield f, int64_t *d)
{
	size_t i;

	if (!v->have_delta)
		return false;
	for (i = 0; i < NR_VDELTA; i++) {
		if (vdelta_fields[i] == f && (v->have_dv & (1u << i))) {
			*d = v->delta[i];
			return true;
		}
	}
	return false;
}

/* Write amplification of the last interval: device bytes / application bytes. */
static bool interval_wa(const struct volume *v, double *wa)
{
	int64_t app, dev;

	if (!vdelta_get(v, V_APP_WRITTEN, &app) || !vdelta_get(v, V_DEV_WRITTEN, &dev) ||
	    app <= 0)
		return false;
	*wa = (double)dev / (double)app;
	return true;
}

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

static void print_volume_page(const struct volume *v)
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

/* One line per sample and volume for -f --watch; the header once. */
static void print_volume_watch_line(const struct volume *v, bool header, bool show_mount)
{
	static const char *const head[] = { "TIME", "LOGICAL", "+LOGICAL", "PHYSICAL",
		"+PHYSICAL", "RATIO", "FREE", "APP-WRITTEN", "DEV-WRITTEN", "WA" };
	int w = opt.bytes ? 14 : 9;
	char cells[10][64];
	struct row r;
	struct tm tm;
	time_t now;
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
	now = time(NULL);
	localtime_r(&now, &tm);
	strftime(cells[0], sizeof(cells[0]), "%H:%M:%S", &tm);
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

static void j_volume(struct json *j, const struct volume *v)
{
	double ratio = 0, savings = 0, wa = 0;
	char *copy, *save = NULL, *w;
	bool inf, hr, hs;
	struct row r;
	size_t d;
	int f;

	volume_as_row(v, &r);
	hr = row_ratio(&r, &ratio, &inf);
	hs = row_savings(&r, &savings);
	j_open(j, '{');
	j_str(j, "path", v->arg);
	j_str(j, "mount", v->mount);
	for (f = 0; f < NR_VFIELDS; f++)
		j_u64(j, vfield_attr[f], vhas(v, f), v->v[f]);
	j_num(j, "ratio", hr, ratio);
	j_num(j, "savings", hs, savings);
	j_num(j, "write_amplification", v->have_wa, v->wa);
	j_mix(j, "codec", v->have_mix, &v->mix);
	j_str(j, "policy", v->policy);
	j_key(j, "warnings");
	if (!v->warnings) {
		j_null(j);
	} else {
		j_open(j, '[');
		copy = xstrdup(v->warnings);
		for (w = strtok_r(copy, ";", &save); w; w = strtok_r(NULL, ";", &save))
			if (*w) {
				j_sep(j);
				j_rawstr(j, w);
			}
		free(copy);
		j_close(j, ']');
	}
	if (opt.watch > 0) {
		j_key(j, "delta");
		if (!v->have_delta) {
			j_null(j);
		} else {
			j_open(j, '{');
			for (d = 0; d < NR_VDELTA; d++)
				j_i64(j, vfield_attr[vdelta_fields[d]], v->have_dv & (1u << d),
				      v->delta[d]);
			j_num(j, "write_amplification", interval_wa(v, &wa), wa);
			j_close(j, '}');
		}
	}
	j_close(j, '}');
}

static void print_volumes_json(const struct volume *vols, int n, long sample, double interval)
{
	struct json j = { .f = stdout, .pretty = opt.watch <= 0 };
	int i;

	j.first[0] = true;
	j_header(&j, "volume", sample, interval);
	j_key(&j, "volumes");
	j_open(&j, '[');
	for (i = 0; i < n; i++)
		if (vols[i].ok)
			j_volume(&j, &vols[i]);
	j_close(&j, ']');
	j_errors(&j);
	j_close(&j, '}');
	j_end_document(&j);
}

/* ------------------------------------------------------------------ */
/* sampling loop                                                      */

static void on_signal(int sig)
{
	(void)sig;
	stop_requested = 1;
}

static double now_mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sleep until monotonic time @t; false when a signal asked us to stop. */
static bool sleep_until(double t)
{
	struct timespec ts;

	ts.tv_sec = (time_t)t;
	ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
	if (ts.tv_nsec >= 1000000000L)
		ts.tv_nsec = 999999999L;
	while (!stop_requested) {
		int rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);

		if (rc == 0)
			return !stop_requested;
		if (rc != EINTR)
			return false;
	}
	return false;
}

static void install_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;  /* no SA_RESTART: the sleep must end at once */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

static bool more_samples(long done, double start)
{
	if (opt.watch <= 0 || stop_requested)
		return false;
	if (opt.count && done >= opt.count)
		return false;
	return sleep_until(start + (double)done * opt.watch);
}

static void run_paths(char **paths, int npaths)
{
	struct rows entries = { 0 }, rollups = { 0 }, prev = { 0 };
	struct row total;
	double start = now_mono(), last = start, t;
	long sample = 0;
	size_t i;

	do {
		t = now_mono();
		sample++;
		problems_clear();
		sample_paths(paths, npaths, &entries, &rollups, &total);
		if (opt.watch > 0) {
			for (i = 0; i < entries.n; i++)
				row_delta(&entries.v[i], sample > 1 ? &prev : NULL);
			for (i = 0; i < rollups.n; i++)
				row_delta(&rollups.v[i], sample > 1 ? &prev : NULL);
			row_delta(&total, sample > 1 ? &prev : NULL);
		}
		if (opt.json) {
			print_paths_json(&entries, &rollups, &total, sample, t - last);
		} else {
			if (opt.watch > 0) {
				struct tm tm;
				time_t now = time(NULL);
				char ts[16];

				localtime_r(&now, &tm);
				strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
				printf("%s== %s  sample %ld", sample > 1 ? "\n" : "", ts, sample);
				if (sample > 1)
					printf("  (deltas over %.1f s)", t - last);
				printf(" ==\n");
			}
			print_paths_human(&entries, &rollups, &total);
		}
		if (opt.watch > 0) {
			/* rollups are named like their directory; keep them apart from entries */
			rows_snapshot(&prev, &entries, &total);
			for (i = 0; i < rollups.n; i++) {
				struct row *d = rows_push(&prev);

				*d = rollups.v[i];
				d->name = xstrdup(rollups.v[i].name);
				memset(&d->mix, 0, sizeof(d->mix));
			}
			sort_array(prev.v, prev.n, sizeof(*prev.v), row_name_cmp);
		}
		last = t;
		rows_free(&entries);
		rows_free(&rollups);
		row_free(&total);
	} while (more_samples(sample, start));
	rows_free(&prev);
}

static void run_volumes(char **paths, int npaths)
{
	struct volume *vols = xcalloc((size_t)npaths, sizeof(*vols));
	uint64_t (*prev)[NR_VFIELDS] = xcalloc((size_t)npaths, sizeof(*prev));
	unsigned *prev_have = xcalloc((size_t)npaths, sizeof(*prev_have));
	double start = now_mono(), last = start, t;
	long sample = 0;
	int i;

	for (i = 0; i < npaths; i++)
		vols[i].arg = paths[i];
	do {
		t = now_mono();
		sample++;
		problems_clear();
		for (i = 0; i < npaths; i++) {
			sample_volume(&vols[i]);
			if (vols[i].ok && sample > 1)
				vdelta(&vols[i], prev[i], prev_have[i]);
		}
		if (opt.json) {
			print_volumes_json(vols, npaths, sample, t - last);
		} else if (opt.watch > 0) {
			for (i = 0; i < npaths; i++)
				print_volume_watch_line(&vols[i], sample == 1 && i == 0,
							npaths > 1);
		} else {
			int shown = 0;

			for (i = 0; i < npaths; i++) {
				if (!vols[i].ok)
					continue;
				if (shown++)
					printf("\n");
				print_volume_page(&vols[i]);
			}
		}
		for (i = 0; i < npaths; i++) {
			memcpy(prev[i], vols[i].v, sizeof(prev[i]));
			prev_have[i] = vols[i].ok ? vols[i].have : 0;
		}
		last = t;
	} while (more_samples(sample, start));
	for (i = 0; i < npaths; i++) {
		volume_clear(&vols[i]);
		free(vols[i].mount);
	}
	free(vols);
	free(prev);
	free(prev_have);
}

/* ------------------------------------------------------------------ */
/* command line                                                       */

static void usage(FILE *out)
{
	fprintf(out,
"usage: csdfs-stat [-r] [--json] [--sort=FIELD] [-H | --bytes] [--watch N [--count K]] PATH...\n"
"       csdfs-stat -f [--json] [-H | --bytes] [--watch N [--count K]] MOUNT...\n"
"\n"
"Report logical and physical space of files, directory trees and csdfs\n"
"volumes, read from the user.csdfs.* attributes of a mounted csdfs.\n"
"\n"
"  (no -f)           one row per PATH; a directory shows its subtree roll-up\n"
"  -r, --recursive   one row per regular file beneath each directory PATH,\n"
"                    a TOTAL row, and each directory's own roll-up to compare\n"
"  -f, --filesystem  volume status page of the csdfs mounted at (or holding) MOUNT\n"
"      --json        machine-readable output (docs/stat-json.md, csdfs-stat(1))\n"
"      --sort=FIELD  name (default), logical, physical, stored, zero, ratio,\n"
"                    savings; numbers sort largest first\n"
"  -H, --human       sizes in K/M/G/T (binary) with one decimal (default)\n"
"  -b, --bytes       sizes in exact bytes\n"
"      --watch N     sample every N seconds and print the changes since the\n"
"                    previous sample, until interrupted\n"
"      --count K     with --watch: stop after K samples\n"
"  -h, --help        this help\n"
"\n"
"ratio = logical / physical; savings = 1 - physical / logical.\n"
"Exit status: 0 success, 1 a PATH could not be reported, 2 usage error.\n");
}

static int usage_error(const char *fmt, const char *arg)
{
	fprintf(stderr, PROG ": ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, " (try --help)\n");
	return EXIT_USAGE;
}

int main(int argc, char *argv[])
{
	enum { O_JSON = 256, O_SORT, O_WATCH, O_COUNT };
	static const struct option longopts[] = {
		{ "recursive", no_argument, NULL, 'r' },
		{ "filesystem", no_argument, NULL, 'f' },
		{ "json", no_argument, NULL, O_JSON },
		{ "sort", required_argument, NULL, O_SORT },
		{ "human", no_argument, NULL, 'H' },
		{ "bytes", no_argument, NULL, 'b' },
		{ "watch", required_argument, NULL, O_WATCH },
		{ "count", required_argument, NULL, O_COUNT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	static char *dot[] = { ".", NULL };
	bool sort_given = false;
	char **paths, *end;
	size_t k;
	int c, npaths;

	opt.sort = SORT_NAME;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":rfHbh", longopts, NULL)) != -1) {
		switch (c) {
		case 'r': opt.recursive = true; break;
		case 'f': opt.volume = true; break;
		case 'H': opt.bytes = false; break;
		case 'b': opt.bytes = true; break;
		case O_JSON: opt.json = true; break;
		case O_SORT:
			for (k = 0; k < sizeof(sort_names) / sizeof(sort_names[0]); k++)
				if (!strcmp(optarg, sort_names[k]))
					break;
			if (k == sizeof(sort_names) / sizeof(sort_names[0]))
				return usage_error("bad --sort field '%s' (name, logical, physical, stored, zero, ratio or savings)",
						   optarg);
			opt.sort = (enum sort_key)k;
			sort_given = true;
			break;
		case O_WATCH:
			errno = 0;
			opt.watch = strtod(optarg, &end);
			if (errno || end == optarg || *end || !isfinite(opt.watch) ||
			    opt.watch <= 0 || opt.watch > 86400)
				return usage_error("bad --watch interval '%s' (seconds, more than 0)",
						   optarg);
			break;
		case O_COUNT:
			errno = 0;
			opt.count = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || opt.count < 1)
				return usage_error("bad --count '%s' (a number of samples, 1 or more)",
						   optarg);
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		case ':':
			return usage_error("option '%s' needs an argument", argv[optind - 1]);
		default:
			if (optopt && optopt < 256) {
				char o[3] = { '-', (char)optopt, '\0' };

				return usage_error("unknown option '%s'", o);
			}
			return usage_error("unknown option '%s'", argv[optind - 1]);
		}
	}
	if (opt.volume && opt.recursive)
		return usage_error("%s", "-f and -r do not go together");
	if (opt.volume && sort_given)
		return usage_error("%s", "--sort does not apply to -f");
	if (opt.count && opt.watch <= 0)
		return usage_error("%s", "--count needs --watch");
	paths = optind < argc ? &argv[optind] : dot;
	npaths = optind < argc ? argc - optind : 1;

	if (opt.watch > 0)
		install_signals();
	if (opt.volume)
		run_volumes(paths, npaths);
	else
		run_paths(paths, npaths);
	problems_clear();
	free(problems);
	return exit_status;
}
