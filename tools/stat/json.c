/* SPDX-License-Identifier: MIT */
/*
 * csdfs-stat --json: the documents of docs/stat-json.md, a stable interface
 * (add keys, never rename or remove them; bump CSDFS_STAT_JSON_VERSION when
 * a meaning changes). A small writer of its own: pretty for one report, one
 * line per sample for --watch; an unknown value is null, never 0; every
 * string is valid UTF-8 (other bytes become U+FFFD).
 */
#include "stat.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------ */
/* JSON writer                                                        */

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

/*
 * A key and the start of its value; null when !@present.
 * @return @present: whether the caller writes the value.
 */
static bool j_field(struct json *j, const char *k, bool present)
{
	j_key(j, k);
	j_sep(j);
	if (!present)
		fputs("null", j->f);
	return present;
}

static void j_str(struct json *j, const char *k, const char *v)
{
	if (j_field(j, k, v))
		j_rawstr(j, v);
}

static void j_u64(struct json *j, const char *k, bool present, uint64_t v)
{
	if (j_field(j, k, present))
		fprintf(j->f, "%" PRIu64, v);
}

static void j_i64(struct json *j, const char *k, bool present, int64_t v)
{
	if (j_field(j, k, present))
		fprintf(j->f, "%" PRId64, v);
}

/* A number with 4 decimals (ratios, fractions); null when absent or infinite. */
static void j_num(struct json *j, const char *k, bool present, double v)
{
	if (j_field(j, k, present && isfinite(v)))
		fprintf(j->f, "%.4f", v);
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

/* ------------------------------------------------------------------ */
/* documents                                                          */

/*
 * Open a document on stdout: the version, the mode and, with --watch, the
 * sample's number, time and interval. j_end_document() closes it.
 */
static void j_begin_document(struct json *j, const char *mode, long sample, double interval)
{
	struct timespec now;

	memset(j, 0, sizeof(*j));
	j->f = stdout;
	j->pretty = opt.watch <= 0;
	j->first[0] = true;
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

/* The sample's problems as the last key, "errors"; close the document. */
static void j_end_document(struct json *j)
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
	j_close(j, '}');
	fputc('\n', j->f);
	fflush(j->f);
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
	if (j_field(j, "shares_blocks", has(r, R_PHYSICAL) && has(r, R_STORED)))
		fputs(row_shares_blocks(r) ? "true" : "false", j->f);
	j_mix(j, "codec", r->have_mix, &r->mix);
	j_key(j, "histogram");
	if (!r->have_hist) {
		j_null(j);
	} else {
		char key[16];

		j_open(j, '{');
		j_u64(j, "chunk_size", r->hist.chunk, r->hist.chunk);
		for (unsigned b = 0; b < hist_buckets(&r->hist); b++) {
			snprintf(key, sizeof(key), "%uK", (b + 1) * 4);
			j_u64(j, key, true, r->hist.b[b]);
		}
		j_u64(j, "raw", true, r->hist.raw);
		j_u64(j, "zero", true, r->hist.zero);
		j_close(j, '}');
	}
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

void print_paths_json(const struct rows *entries, const struct rows *rollups,
		      const struct row *total, long sample, double interval)
{
	struct json j;
	size_t i;

	j_begin_document(&j, opt.recursive ? "recursive" : "paths", sample, interval);
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
	j_end_document(&j);
}

static void j_volume(struct json *j, const struct volume *v)
{
	double ratio = 0, savings = 0, wa = 0, hit = 0;
	char *copy, *save = NULL, *w;
	bool inf, hr, hs, hc;
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
	hc = cache_hit_ratio(v, false, &hit);
	j_num(j, "cache_hit_ratio", hc, hit);
	j_mix(j, "codec", v->have_mix, &v->mix);
	j_str(j, "policy", v->policy);
	j_key(j, "requests_by_opcode");
	if (!v->requests) {
		j_null(j);
	} else {
		/* "total=N lookup=N ...": every key but total */
		char *list = xstrdup(v->requests), *save2 = NULL, *kv, *eq;
		uint64_t n;

		j_open(j, '{');
		for (kv = strtok_r(list, " ", &save2); kv; kv = strtok_r(NULL, " ", &save2)) {
			eq = strchr(kv, '=');
			if (!eq || eq == kv)
				continue;
			*eq = '\0';
			if (strcmp(kv, "total") && kv_get(v->requests, kv, &n))
				j_u64(j, kv, true, n);
		}
		free(list);
		j_close(j, '}');
	}
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
			hc = cache_hit_ratio(v, true, &hit);
			j_num(j, "cache_hit_ratio", hc, hit);
			j_close(j, '}');
		}
	}
	j_close(j, '}');
}

void print_volumes_json(const struct volume *vols, int n, long sample, double interval)
{
	struct json j;
	int i;

	j_begin_document(&j, "volume", sample, interval);
	j_key(&j, "volumes");
	j_open(&j, '[');
	for (i = 0; i < n; i++)
		if (vols[i].ok)
			j_volume(&j, &vols[i]);
	j_close(&j, ']');
	j_end_document(&j);
}
