/* SPDX-License-Identifier: MIT */
/*
 * csdfs-stat: the text of one value, shared by the table (human.c), the
 * status page and the watch line (status.c). Sizes follow --bytes; a value
 * the filesystem did not give is "-", never 0.
 */
#include "stat.h"

#include <inttypes.h>
#include <time.h>

void fmt_size(char *buf, size_t len, uint64_t v)
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

void fmt_delta(char *buf, size_t len, int64_t d)
{
	uint64_t mag = d < 0 ? (uint64_t)0 - (uint64_t)d : (uint64_t)d;

	buf[0] = d < 0 ? '-' : '+';
	fmt_size(buf + 1, len - 1, mag);
}

void fmt_ratio(char *buf, size_t len, const struct row *r)
{
	double ratio;
	bool inf;

	if (!row_ratio(r, &ratio, &inf))
		snprintf(buf, len, "-");
	else if (inf)
		snprintf(buf, len, has(r, R_STORED) && r->v[R_STORED] ? "shared" : "sparse");
	else
		snprintf(buf, len, "%.2fx", ratio);
}

void fmt_savings(char *buf, size_t len, const struct row *r)
{
	double s;

	if (!row_savings(r, &s))
		snprintf(buf, len, "-");
	else if (row_shares_blocks(r) && !r->v[R_PHYSICAL])
		snprintf(buf, len, "shared");  /* 100% would claim it costs nothing */
	else
		snprintf(buf, len, "%.1f%%", 100.0 * s);
}

void fmt_mix(char *buf, size_t len, const struct row *r)
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

void fmt_clock(char *buf, size_t len)
{
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	strftime(buf, len, "%H:%M:%S", &tm);
}

/* ---- interval figures of a sampled volume (--watch) ---- */

bool vdelta_get(const struct volume *v, enum vfield f, int64_t *d)
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

bool vrate_get(const struct volume *v, enum vfield f, double *rate)
{
	int64_t d;

	if (v->interval <= 0 || !vdelta_get(v, f, &d))
		return false;
	*rate = (double)d / v->interval;
	return true;
}

bool interval_wa(const struct volume *v, double *wa)
{
	int64_t app, dev;

	if (!vdelta_get(v, V_APP_WRITTEN, &app) || !vdelta_get(v, V_DEV_WRITTEN, &dev) ||
	    app <= 0)
		return false;
	*wa = (double)dev / (double)app;
	return true;
}

bool cache_hit_ratio(const struct volume *v, bool interval, double *ratio)
{
	int64_t dh, dm;
	double hits, misses;

	if (interval) {
		/* A remount between two samples restarts the counters: no ratio. */
		if (!vdelta_get(v, V_CACHE_HITS, &dh) || !vdelta_get(v, V_CACHE_MISSES, &dm) ||
		    dh < 0 || dm < 0)
			return false;
		hits = (double)dh;
		misses = (double)dm;
	} else {
		if (!vhas(v, V_CACHE_HITS) || !vhas(v, V_CACHE_MISSES))
			return false;
		hits = (double)v->v[V_CACHE_HITS];
		misses = (double)v->v[V_CACHE_MISSES];
	}
	if (hits + misses <= 0)
		return false;
	*ratio = hits / (hits + misses);
	return true;
}
