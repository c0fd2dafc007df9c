/* SPDX-License-Identifier: MIT */
/*
 * enospc_writer: buffered writers that run a volume out of space, for
 * t_enospc.sh. Every FILE is opened (O_RDWR|O_CREAT|O_TRUNC) before any is
 * written, then one thread per file writes 1 MiB write(2)s until one fails.
 * A writer passes when:
 *   - the first error comes from write(2), and is ENOSPC;
 *   - then fstat(), stat(), lseek(SEEK_END) and a read past end of file
 *     all succeed, at once and again after the kernel's attribute cache
 *     has expired (1.5 s), while another write(2) still fails with ENOSPC;
 *   - it then creates GO_FILE.ready.<index> and, once GO_FILE exists (the test freed space; waited for at most 60 s),
 *     a 1 MiB write(2) succeeds on the same descriptor within 5 s.
 * Each writer stops with a failure after 60 s or 16 GiB without an error.
 * DATA is "random" (incompressible) or "half" (each 4 KiB: 1792 random
 * bytes, then zeros: about 2.3:1, so that on a multiplier-2 volume the
 * logical capacity runs out before the container does).
 * "enospc_writer gen DATA BYTES" writes BYTES of such data to stdout;
 * "enospc_writer zeros FILE" prints how many bytes of FILE lie in all-zero
 * 4 KiB blocks (pages the kernel dropped: no block of either DATA is zero).
 *
 * Prints one line per file: path, bytes write(2) accepted, and what each
 * step gave; exit 0 when every writer passed, 1 otherwise, 2 on bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BUF (1u << 20)
#define MAX_BYTES (16ull << 30)
#define MAX_SECONDS 60
#define GO_WAIT_SECONDS 60
#define HALF_RANDOM 1792  /* random bytes per 4 KiB in "half" data */

struct writer {
	pthread_t t;
	const char *path;
	int fd;
	uint64_t seed, written;
	int idx;
	bool half;
	char report[512];
	bool ok;
};

static const char *go_file;
static pthread_barrier_t opened;

static void gen(struct writer *w, char *buf)
{
	uint64_t s = w->seed;

	for (size_t i = 0; i < BUF; i += 8) {
		s ^= s >> 12;
		s ^= s << 25;
		s ^= s >> 27;
		if (w->half && i % 4096 >= HALF_RANDOM) {
			memset(buf + i, 0, 8);
		} else {
			uint64_t v = s * 0x2545f4914f6cdd1dull;

			memcpy(buf + i, &v, 8);
		}
	}
	w->seed = s;
}

/* One write(2) of the whole buffer; 0, or the errno of the failed write. */
static int write_once(struct writer *w, char *buf)
{
	ssize_t n = write(w->fd, buf, BUF);

	if (n == (ssize_t)BUF) {
		w->written += BUF;
		return 0;
	}
	if (n >= 0) {
		/* A short write: the next one tells why. */
		w->written += (uint64_t)n;
		return EAGAIN;
	}
	return errno;
}

/* fstat, stat, lseek(SEEK_END), a read past EOF: all must work. */
static bool probes_ok(struct writer *w, char *what, size_t len)
{
	struct stat st;
	char c[64];
	off_t end;

	if (fstat(w->fd, &st)) {
		snprintf(what, len, "fstat:%s", strerror(errno));
		return false;
	}
	if (stat(w->path, &st)) {
		snprintf(what, len, "stat:%s", strerror(errno));
		return false;
	}
	end = lseek(w->fd, 0, SEEK_END);
	if (end < 0) {
		snprintf(what, len, "lseek-end:%s", strerror(errno));
		return false;
	}
	if (pread(w->fd, c, sizeof(c), end + 4096) < 0) {
		snprintf(what, len, "read-past-eof:%s", strerror(errno));
		return false;
	}
	snprintf(what, len, "ok");
	return true;
}

static void *run(void *arg)
{
	struct writer *w = arg;
	char *buf = malloc(BUF);
	char p1[80], p2[80], ready[4096];
	time_t until = time(NULL) + MAX_SECONDS;
	int err = 0, again;
	bool ok1, ok2, resumed;

	pthread_barrier_wait(&opened);
	if (!buf || w->fd < 0) {
		snprintf(w->report, sizeof(w->report), "%s: cannot start", w->path);
		return NULL;
	}
	while (!err && w->written < MAX_BYTES && time(NULL) < until) {
		gen(w, buf);
		err = write_once(w, buf);
		if (err == EAGAIN)
			err = write_once(w, buf);
	}
	if (err != ENOSPC) {
		snprintf(w->report, sizeof(w->report),
			 "%s written=%llu first_error=%s (expected write:ENOSPC)", w->path,
			 (unsigned long long)w->written, err ? strerror(err) : "none");
		free(buf);
		return NULL;
	}
	ok1 = probes_ok(w, p1, sizeof(p1));
	usleep(1500000);
	ok2 = probes_ok(w, p2, sizeof(p2));
	/* An lseek once the attributes expired is answered, and the answer
	 * taken back within milliseconds (csdfs(8)): write after that. */
	usleep(100000);
	again = write_once(w, buf);
	snprintf(ready, sizeof(ready), "%s.ready.%d", go_file, w->idx);
	close(open(ready, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
	for (int i = 0; i < GO_WAIT_SECONDS * 20 && access(go_file, F_OK); i++)
		usleep(50000);
	/* The daemon notices freed space within a second or so. */
	for (int i = 0; i < 50 && !(resumed = !write_once(w, buf)); i++)
		usleep(100000);
	w->ok = ok1 && ok2 && again == ENOSPC && resumed;
	snprintf(w->report, sizeof(w->report),
		 "%s written=%llu first_error=write:ENOSPC probes=%s probes_after_1.5s=%s "
		 "write_again=%s resumed=%s", w->path, (unsigned long long)w->written,
		 p1, p2, again ? strerror(again) : "succeeded(expected ENOSPC)",
		 resumed ? "ok" : "failed");
	free(buf);
	return NULL;
}

static int gen_out(const char *kind, uint64_t bytes)
{
	struct writer w = { .half = !strcmp(kind, "half"), .seed = (uint64_t)time(NULL) | 1 };
	char *buf = malloc(BUF);

	if (!buf)
		return 2;
	for (uint64_t done = 0; done < bytes; done += BUF) {
		size_t n = bytes - done < BUF ? (size_t)(bytes - done) : BUF;

		gen(&w, buf);
		if (fwrite(buf, 1, n, stdout) != n)
			return 1;
	}
	free(buf);
	return fflush(stdout) ? 1 : 0;
}

static int zeros_out(const char *path)
{
	static char blk[4096], zero[4096];
	FILE *f = fopen(path, "rb");
	uint64_t n = 0;
	size_t got;

	if (!f) {
		fprintf(stderr, "enospc_writer: cannot open '%s': %s\n", path, strerror(errno));
		return 2;
	}
	while ((got = fread(blk, 1, sizeof(blk), f)) > 0)
		if (!memcmp(blk, zero, got))
			n += got;
	fclose(f);
	printf("%llu\n", (unsigned long long)n);
	return 0;
}

int main(int argc, char **argv)
{
	struct writer *w;
	int nw, bad = 0;
	bool half;

	if (argc == 3 && !strcmp(argv[1], "zeros"))
		return zeros_out(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "gen"))
		return gen_out(argv[2], strtoull(argv[3], NULL, 0));
	if (argc < 4 || (strcmp(argv[1], "random") && strcmp(argv[1], "half"))) {
		fprintf(stderr, "usage: enospc_writer random|half GO_FILE FILE...\n"
			"       enospc_writer gen random|half BYTES\n"
			"       enospc_writer zeros FILE\n");
		return 2;
	}
	half = !strcmp(argv[1], "half");
	go_file = argv[2];
	nw = argc - 3;
	w = calloc((size_t)nw, sizeof(*w));
	if (!w)
		return 2;
	pthread_barrier_init(&opened, NULL, (unsigned)nw);
	for (int i = 0; i < nw; i++) {
		w[i].path = argv[3 + i];
		w[i].half = half;
		w[i].idx = i;
		w[i].seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1);
		w[i].fd = open(w[i].path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (w[i].fd < 0)
			fprintf(stderr, "enospc_writer: cannot open '%s': %s\n", w[i].path,
				strerror(errno));
	}
	for (int i = 0; i < nw; i++)
		pthread_create(&w[i].t, NULL, run, &w[i]);
	for (int i = 0; i < nw; i++) {
		int rc;

		pthread_join(w[i].t, NULL);
		/* close() may report pages of before the stop that did not fit
		 * (the test bounds those by the dirty budget). */
		rc = w[i].fd >= 0 ? close(w[i].fd) : -1;
		printf("%s close=%s\n", w[i].report, rc ? strerror(errno) : "0");
		bad += !w[i].ok;
	}
	free(w);
	return bad ? 1 : 0;
}
