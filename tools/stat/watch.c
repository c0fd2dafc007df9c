/* SPDX-License-Identifier: MIT */
/*
 * csdfs-stat: the sampling loop. Without --watch it takes one sample and
 * prints it; with --watch it samples every opt.watch seconds on a fixed
 * monotonic schedule (a slow sample does not shift the next ones) until
 * --count samples or SIGINT/SIGTERM, and each row or volume carries its
 * change since the previous sample. Rows are matched to the previous
 * sample by name, volumes by position.
 */
#include "stat.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

volatile sig_atomic_t stop_requested;

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

/* Append a copy of @s (name and numbers only) to @dst. */
static void snapshot_push(struct rows *dst, const struct row *s)
{
	struct row *d = rows_push(dst);

	*d = *s;
	d->name = xstrdup(s->name);
	memset(&d->mix, 0, sizeof(d->mix));
}

/*
 * Replace @dst with a copy of a sample's rows (entries, TOTAL, roll-ups),
 * sorted by name for row_delta.
 */
static void rows_snapshot(struct rows *dst, const struct rows *entries,
			  const struct row *total, const struct rows *rollups)
{
	size_t i;

	rows_free(dst);
	for (i = 0; i < entries->n; i++)
		snapshot_push(dst, &entries->v[i]);
	snapshot_push(dst, total);
	for (i = 0; i < rollups->n; i++)
		snapshot_push(dst, &rollups->v[i]);
	sort_array(dst->v, dst->n, sizeof(*dst->v), row_name_cmp);
}

/* ------------------------------------------------------------------ */
/* --watch bookkeeping for volumes                                    */

/* Set @v's deltas against the previous sample's fields @prev (known per @prev_have). */
static void vdelta(struct volume *v, const uint64_t *prev, uint64_t prev_have)
{
	size_t i;

	v->have_delta = true;
	for (i = 0; i < NR_VDELTA; i++) {
		enum vfield f = vdelta_fields[i];

		if (vhas(v, f) && (prev_have & vbit(f))) {
			v->delta[i] = (int64_t)(v->v[f] - prev[f]);
			v->have_dv |= 1u << i;
		}
	}
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

void install_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = 0;  /* no SA_RESTART: the sleep must end at once */
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/* After @done samples begun at @start: wait for the next one. @return false to stop. */
static bool more_samples(long done, double start)
{
	if (opt.watch <= 0 || stop_requested)
		return false;
	if (opt.count && done >= opt.count)
		return false;
	return sleep_until(start + (double)done * opt.watch);
}

void run_paths(char **paths, int npaths)
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
				char ts[16];

				fmt_clock(ts, sizeof(ts));
				printf("%s== %s  sample %ld", sample > 1 ? "\n" : "", ts, sample);
				if (sample > 1)
					printf("  (deltas over %.1f s)", t - last);
				printf(" ==\n");
			}
			(opt.histogram ? print_histogram_human : print_paths_human)(&entries, &rollups, &total);
		}
		if (opt.watch > 0)
			rows_snapshot(&prev, &entries, &total, &rollups);
		last = t;
		rows_free(&entries);
		rows_free(&rollups);
		row_free(&total);
	} while (more_samples(sample, start));
	rows_free(&prev);
}

void run_volumes(char **paths, int npaths)
{
	struct volume *vols = xcalloc((size_t)npaths, sizeof(*vols));
	uint64_t (*prev)[NR_VFIELDS] = xcalloc((size_t)npaths, sizeof(*prev));
	uint64_t *prev_have = xcalloc((size_t)npaths, sizeof(*prev_have));
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
			vols[i].interval = t - last;
			if (vols[i].ok && sample > 1)
				vdelta(&vols[i], prev[i], prev_have[i]);
		}
		if (opt.prometheus) {
			print_volumes_prometheus(vols, npaths);
		} else if (opt.json) {
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
