/* SPDX-License-Identifier: MIT */
/*
 * csdfs-stat: gathering the numbers. Every user.csdfs.* attribute is read
 * here, by name (the daemon never lists them); a file's row, a tree's walk
 * and its TOTAL, and a volume's sample are filled here and nowhere else.
 *
 * An attribute that is absent (ENODATA: an older daemon) leaves its field
 * unknown without a word; one that cannot be read or does not parse is a
 * problem(). A sum is unknown in a field unknown in any of its rows.
 *
 * Longer than ~700 lines on purpose: it is the one reader of the daemon's
 * attributes, so every parser of their text (codec mix, histogram, policy,
 * volume status) sits beside the one attr_read they all go through.
 */
#include "stat.h"

#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

const char *const rfield_attr[NR_RFIELDS] = {
	"logical", "physical", "stored", "zero", "extents", "incompressible", "files",
};

const char *const vfield_attr[NR_VFIELDS] = {
	"capacity_logical", "capacity_physical", "logical", "physical", "stored",
	"zero", "free_physical", "files", "extents", "incompressible",
	"app_bytes_written", "dev_bytes_written", "meta_bytes",
	"atomic_write_unit", "checksum_errors", "used_logical", "used_physical",
	"dead_bytes", "compact_bytes_written", "compact_chunks", "free_usable",
	"requests", "fsync_requests", "syncs_container", "syncs_data_mdb", "syncs_record",
	"group_commits", "journal_segments", "cache_hits", "cache_misses", "cache_bytes",
	"cache_budget",
};

/* Where the fields from V_REQUESTS on come from: attribute and key. */
static const struct { const char *attr, *key; } vlisted[NR_VFIELDS - V_REQUESTS] = {
	{ "requests", "total" }, { "requests", "fsync" }, { "syncs", "container" },
	{ "syncs", "data.mdb" }, { "syncs", "record" }, { "syncs", "group_commits" },
	{ "syncs", "journal_segments" }, { "cache", "hits" }, { "cache", "misses" },
	{ "cache", "bytes" }, { "cache", "budget" },
};

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

/* The value of @key in the "key=N key=N" list @s. */
bool kv_get(const char *s, const char *key, uint64_t *v)
{
	size_t k = strlen(key);
	char num[32];

	for (; *s; s += strcspn(s, " "), s += strspn(s, " ")) {
		size_t n;

		if (strncmp(s, key, k) || s[k] != '=')
			continue;
		n = strcspn(s + k + 1, " ");
		if (n >= sizeof(num))
			return false;
		memcpy(num, s + k + 1, n);
		num[n] = '\0';
		return parse_u64(num, v);
	}
	return false;
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

/*
 * Read user.csdfs.codec of @path into @m, sorted. @return whether it
 * answered; a malformed word is a problem and the well-formed ones are kept.
 */
static bool mix_load(struct mix *m, const char *path)
{
	char *s = attr_str(path, "codec");

	if (!s)
		return false;
	if (!mix_parse(m, s))
		problem(path, "'%s' has a malformed user.csdfs.codec: '%s'", path, s);
	mix_sort(m);
	free(s);
	return true;
}

/* ------------------------------------------------------------------ */
/* rows: a file, a directory roll-up, or the TOTAL of a walk          */

struct row *rows_push(struct rows *rs)
{
	struct row *r;

	grow((void **)&rs->v, &rs->cap, rs->n + 1, sizeof(*rs->v));
	r = &rs->v[rs->n];
	memset(r, 0, sizeof(*r));
	r->seq = rs->n++;
	return r;
}

void row_free(struct row *r)
{
	free(r->name);
	mix_free(&r->mix);
}

void rows_free(struct rows *rs)
{
	size_t i;

	for (i = 0; i < rs->n; i++)
		row_free(&rs->v[i]);
	free(rs->v);
	memset(rs, 0, sizeof(*rs));
}

/* ------------------------------------------------------------------ */
/* the chunk-size histogram                                           */

/* "chunk=16384 4K=3 8K=1 ... raw=2 zero=5": keys not known here are skipped
 * (a later daemon may add some). @return false when malformed. */
static bool hist_parse(struct hist *h, const char *s)
{
	char key[32], val[32];
	uint64_t v;
	int n;

	memset(h, 0, sizeof(*h));
	while (*s) {
		unsigned long kib;
		char *end;

		if (sscanf(s, " %31[^= ]=%31s%n", key, val, &n) != 2 || !parse_u64(val, &v))
			return false;
		s += n;
		kib = strtoul(key, &end, 10);
		if (!strcmp(key, "chunk") && v <= UINT32_MAX)
			h->chunk = (uint32_t)v;
		else if (!strcmp(key, "raw"))
			h->raw = v;
		else if (!strcmp(key, "zero"))
			h->zero = v;
		else if (end != key && !strcmp(end, "K") && kib % 4 == 0 && kib &&
			 kib / 4 <= HIST_BUCKETS)
			h->b[kib / 4 - 1] = v;
		while (*s == ' ')
			s++;
	}
	return true;
}

/* user.csdfs.histogram of the regular file @path. */
static bool hist_load(struct hist *h, const char *path)
{
	char *s = attr_str(path, "histogram");
	bool ok;

	if (!s)
		return false;
	ok = hist_parse(h, s);
	if (!ok)
		problem(path, "'%s' has a malformed user.csdfs.histogram: '%s'", path, s);
	free(s);
	return ok;
}

static void hist_add(struct hist *dst, const struct hist *src, bool first)
{
	for (unsigned i = 0; i < HIST_BUCKETS; i++)
		dst->b[i] += src->b[i];
	dst->raw += src->raw;
	dst->zero += src->zero;
	if (first)
		dst->chunk = src->chunk;
	else if (dst->chunk != src->chunk)
		dst->chunk = 0;
}

unsigned hist_buckets(const struct hist *h)
{
	unsigned n = (h->chunk ? h->chunk : HIST_BUCKETS * 4096u) / 4096u;

	for (unsigned i = n; i < HIST_BUCKETS; i++)
		if (h->b[i])
			n = i + 1;
	return n < HIST_BUCKETS ? n : HIST_BUCKETS;
}

/*
 * Fill @r from the xattrs of @path (a regular file or a directory, per
 * @st). The caller has checked that logical answers (probe_csdfs).
 */
static void row_load(struct row *r, const char *path, const struct stat *st,
		     uint64_t logical)
{
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
	r->have_mix = mix_load(&r->mix, path);
	/* A directory's is the sum over its files (hist_of_tree). */
	if (opt.histogram && r->kind == ROW_FILE)
		r->have_hist = hist_load(&r->hist, path);
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
	hist_add(&dst->hist, &src->hist, first);
	dst->have_hist = first ? src->have_hist : dst->have_hist && src->have_hist;
}

/* ------------------------------------------------------------------ */
/* derived numbers                                                    */

bool row_shares_blocks(const struct row *r)
{
	return has(r, R_PHYSICAL) && has(r, R_STORED) && r->v[R_PHYSICAL] < r->v[R_STORED];
}

/* The directory above @path (on its filesystem) whose inode is @ino, in a
 * malloc'd string; NULL when none is. */
static char *ancestor_of(const char *path, unsigned long long ino)
{
	char *up = realpath(path, NULL), *cut;
	struct stat self, st;

	if (!up || stat(up, &self))
		goto out_none;
	while ((cut = strrchr(up, '/'))) {
		if (cut == up && !up[1])
			break;          /* above "/" */
		*(cut == up ? cut + 1 : cut) = '\0';
		if (stat(up, &st) || st.st_dev != self.st_dev)
			break;
		if ((unsigned long long)st.st_ino == ino)
			return up;
	}
out_none:
	free(up);
	return NULL;
}

char *policy_of(const char *path)
{
	static const char tag[] = "inherited from inode ";
	char *pol, *at, *out, *s;
	size_t len = 0;
	int rc = attr_read(path, "policy", &pol);

	if (rc < 0) {
		problem(path, "cannot read user.csdfs.policy of '%s': %s", path,
			rc == -ENODATA || rc == -ENOTSUP ? "not on a csdfs filesystem" :
			strerror(-rc));
		return NULL;
	}
	out = xcalloc(1, 1);
	for (s = pol; (at = strstr(s, tag)); ) {
		unsigned long long ino = strtoull(at + sizeof(tag) - 1, &s, 10);
		char *dir = ancestor_of(path, ino), *part;

		if (asprintf(&part, "%s%.*s%s%s%s%llu%s", out, (int)(at - pol - len), pol + len,
			     dir ? "inherited from '" : tag, dir ? dir : "", dir ? "' (inode " : "",
			     ino, dir ? ")" : "") < 0)
			oom();
		free(out);
		free(dir);
		out = part;
		len = (size_t)(s - pol);
	}
	if (asprintf(&at, "%s%s", out, pol + len) < 0)
		oom();
	free(out);
	free(pol);
	return at;
}

bool row_ratio(const struct row *r, double *ratio, bool *inf)
{
	uint64_t l = r->v[R_LOGICAL], p = r->v[R_PHYSICAL];

	if (!has(r, R_LOGICAL) || !has(r, R_PHYSICAL))
		return false;
	*inf = p == 0 && l != 0;
	*ratio = p ? (double)l / (double)p : (l ? INFINITY : 1.0);
	return true;
}

bool row_savings(const struct row *r, double *savings)
{
	uint64_t l = r->v[R_LOGICAL], p = r->v[R_PHYSICAL];

	if (!has(r, R_LOGICAL) || !has(r, R_PHYSICAL))
		return false;
	*savings = l ? 1.0 - (double)p / (double)l : 0.0;
	return true;
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

/* The histogram of directory row @r: the sum over the regular files
 * beneath it, each counted once (@files, walked from it). */
static void hist_of_tree(struct row *r, const struct rows *files)
{
	r->have_hist = true;
	memset(&r->hist, 0, sizeof(r->hist));
	for (size_t i = 0; i < files->n; i++) {
		hist_add(&r->hist, &files->v[i].hist, i == 0);
		r->have_hist = r->have_hist && files->v[i].have_hist;
	}
}

/* Walk the directory @p for its rows' regular files into @out. */
static void walk_files(const char *p, const struct stat *st, struct rows *out)
{
	walk_rows = out;
	walk_dev = st->st_dev;
	if (nftw(p, walk_one, 32, FTW_PHYS | FTW_MOUNT) < 0)
		problem(p, "cannot walk '%s': %s", p, strerror(errno));
}

/*
 * --histogram of the directory row @rs->v[@at] (@p, @st): walk it for its
 * regular files, each counted once; with @entries they become its rows.
 */
static void dir_hist(const char *p, const struct stat *st, struct rows *rs,
		     size_t at, struct rows *entries)
{
	struct rows files = { 0 };

	walk_files(p, st, &files);
	rows_dedup(&files);
	hist_of_tree(&rs->v[at], &files);
	if (!entries) {
		rows_free(&files);
		return;
	}
	for (size_t i = 0; i < files.n; i++) {
		struct row *e = rows_push(entries);
		size_t seq = e->seq;

		*e = files.v[i];
		e->seq = seq;   /* discovery order among all entries */
	}
	free(files.v);
}

void sample_paths(char **paths, int npaths, struct rows *entries,
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
			if (opt.histogram)
				dir_hist(p, &st, rollups, rollups->n - 1, entries);
			else
				walk_files(p, &st, entries);
		} else {
			struct row *r = rows_push(entries);

			row_load(r, p, &st, logical);
			if (opt.histogram && S_ISDIR(st.st_mode))
				dir_hist(p, &st, entries, entries->n - 1, NULL);
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
/* volumes (-f)                                                       */

void volume_clear(struct volume *v)
{
	free(v->warnings);
	free(v->policy);
	free(v->requests);
	mix_free(&v->mix);
	v->warnings = v->policy = v->requests = NULL;
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

void sample_volume(struct volume *v)
{
	uint64_t logical;
	char *s, *cache;
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
	v->have = vbit(V_LOGICAL);
	for (f = 0; f < V_REQUESTS; f++)
		if (f != V_LOGICAL && attr_u64(v->mount, vfield_attr[f], &v->v[f]))
			v->have |= vbit(f);
	v->requests = attr_str(v->mount, "requests");
	s = attr_str(v->mount, "syncs");
	cache = attr_str(v->mount, "cache");
	for (f = V_REQUESTS; f < NR_VFIELDS; f++) {
		const char *attr = vlisted[f - V_REQUESTS].attr;
		const char *list = !strcmp(attr, "requests") ? v->requests :
				   !strcmp(attr, "syncs") ? s : cache;

		/* A count missing from the requests list is an opcode not
		 * seen yet: 0. */
		v->v[f] = 0;
		if (list && (kv_get(list, vlisted[f - V_REQUESTS].key, &v->v[f]) ||
			     list == v->requests))
			v->have |= vbit(f);
	}
	free(s);
	free(cache);
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
	v->have_mix = mix_load(&v->mix, v->mount);
}

void volume_as_row(const struct volume *v, struct row *r)
{
	memset(r, 0, sizeof(*r));
	r->v[R_LOGICAL] = v->v[V_LOGICAL];
	r->v[R_PHYSICAL] = v->v[V_PHYSICAL];
	r->v[R_STORED] = v->v[V_STORED];
	r->have = (vhas(v, V_LOGICAL) ? 1u << R_LOGICAL : 0) |
		  (vhas(v, V_PHYSICAL) ? 1u << R_PHYSICAL : 0) |
		  (vhas(v, V_STORED) ? 1u << R_STORED : 0);
	r->mix = v->mix;
	r->have_mix = v->have_mix;
}
