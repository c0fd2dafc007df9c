/* SPDX-License-Identifier: MIT */
/*
 * csdfs: the mount daemon. Parses options (one fuse_opt table, help text
 * beside it), opens and verifies the volume BEFORE mounting so every refusal
 * reaches the terminal, mounts, daemonises, then serves with libfuse's
 * multithreaded loop. fusermount3 -u ends the loop; the volume is then
 * committed and closed, and the exit status says whether that worked.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csdfs/log.h"
#include "bdi.h"
#include "devio.h"
#include "ops.h"
#include "store.h"
#include "uring.h"

/*
 * The options: one table, the help text and the valid range beside each.
 * fuse_opt only collects the words (flags as 1, values as text); every
 * value is then checked against its entry, so a negative, zero, oversized
 * or malformed value is refused in one line naming the option and its
 * range instead of wrapping around (-1 as 4294967295 ms) or falling back
 * to a default without a word.
 */
enum opt_id {
	O_FOREGROUND, O_DEBUG, O_HELP, O_VERSION,
	O_COMMIT_MS, O_MAX_THREADS, O_CACHE_SIZE, O_READAHEAD, O_MAX_DIRTY,
	O_COMPACT_DEAD,
	O_WRITEBACK, O_NOWRITEBACK, O_URING, O_NOURING, O_NOPUNCH, O_NOJOURNAL,
	O_ALLOW_OTHER, O_NOALLOW_OTHER, O_NO_ATIME, O_RELATIME, O_STRICTATIME,
	O_NORELATIME, O_TEST_TORN,
	O_COUNT
};

enum opt_kind { OPT_FLAG, OPT_NUMBER, OPT_SIZE };

struct opt_def {
	const char *templ;         /* as fuse_opt matches it; "%s": takes a value */
	enum opt_id id;            /* aliases share one */
	enum opt_kind kind;
	uint64_t min, max;         /* OPT_NUMBER, OPT_SIZE: the valid range */
	const char *unit;          /* of an OPT_NUMBER, for messages */
	const char *shown;         /* as usage shows it; NULL: an alias, not shown */
	const char *help;          /* lines after the first are indented */
};

static const struct opt_def opt_defs[] = {
	{ "-f", O_FOREGROUND, OPT_FLAG, 0, 0, NULL, "-f", "stay in the foreground" },
	{ "-d", O_DEBUG, OPT_FLAG, 0, 0, NULL, "-d", "debug output (implies -f)" },
	{ "debug", O_DEBUG, OPT_FLAG, 0, 0, NULL, NULL, NULL },
	{ "-h", O_HELP, OPT_FLAG, 0, 0, NULL, "-h, --help", "this help" },
	{ "--help", O_HELP, OPT_FLAG, 0, 0, NULL, NULL, NULL },
	{ "-V", O_VERSION, OPT_FLAG, 0, 0, NULL, "-V, --version", "version" },
	{ "--version", O_VERSION, OPT_FLAG, 0, 0, NULL, NULL, NULL },
	{ "commit_ms=%s", O_COMMIT_MS, OPT_NUMBER, 1, 60000, "ms", "-o commit_ms=N",
	  "group-commit interval in ms (default 1000); an\n"
	  "un-fsynced crash loses at most about this much" },
	{ "max_threads=%s", O_MAX_THREADS, OPT_NUMBER, 1, 256, "threads",
	  "-o max_threads=N", "FUSE worker threads (default 16)" },
	{ "cache_size=%s", O_CACHE_SIZE, OPT_SIZE, 0, 64ull << 30, NULL,
	  "-o cache_size=SIZE", "decoded-chunk cache (default 64M; 0 disables)" },
	{ "readahead=%s", O_READAHEAD, OPT_SIZE, 0, 64ull << 20, NULL,
	  "-o readahead=SIZE", "kernel readahead for the mount (default 4M when run\n"
	  "as root; 0 keeps the kernel's 128K)" },
	{ "max_dirty=%s", O_MAX_DIRTY, OPT_SIZE, 0, 16ull << 30, NULL,
	  "-o max_dirty=SIZE", "dirty page cache the kernel may hold for the mount\n"
	  "(root; default an eighth of the capacity, 64M..1G;\n"
	  "0 keeps the kernel's, about 1% of its budget)" },
	{ "compact_dead=%s", O_COMPACT_DEAD, OPT_NUMBER, 0, 100, "percent",
	  "-o compact_dead=PERCENT", "compact in the background once this share of\n"
	  "the used blocks is dead (default 25; 0: off)" },
	{ "writeback_cache", O_WRITEBACK, OPT_FLAG, 0, 0, NULL, NULL, NULL },
	{ "nowriteback_cache", O_NOWRITEBACK, OPT_FLAG, 0, 0, NULL, "-o nowriteback_cache",
	  "send every buffered write(2) to csdfs as it is\n"
	  "made (slower): atomic writes (G3) then hold for\n"
	  "buffered writes too, not only for O_DIRECT and\n"
	  "O_SYNC/O_DSYNC ones, with one exception: csdfs(8)" },
	{ "uring", O_URING, OPT_FLAG, 0, 0, NULL, NULL, NULL },
	{ "nouring", O_NOURING, OPT_FLAG, 0, 0, NULL, "-o nouring",
	  "serve requests through read/write on /dev/fuse even\n"
	  "when the kernel offers io_uring (the default uses\n"
	  "io_uring when the fuse module's enable_uring is Y)" },
	{ "nopunch", O_NOPUNCH, OPT_FLAG, 0, 0, NULL, "-o nopunch",
	  "do not punch freed ranges out of the container\n"
	  "(by default freed space goes back to the host)" },
	{ "nojournal", O_NOJOURNAL, OPT_FLAG, 0, 0, NULL, "-o nojournal",
	  "make each fsync durable by a full metadata commit\n"
	  "(three host syncs) instead of one journal segment\n"
	  "synced with the data (one host sync)" },
	{ "allow_other", O_ALLOW_OTHER, OPT_FLAG, 0, 0, NULL, "-o allow_other",
	  "let other users in (default when run as root);\n"
	  "-o noallow_other turns it off" },
	{ "noallow_other", O_NOALLOW_OTHER, OPT_FLAG, 0, 0, NULL, NULL, NULL },
	/* The kernel leaves a FUSE file's access time to the daemon, so the
	 * mount flag alone would change nothing: csdfs reads it here and
	 * passes it on. */
	{ "noatime", O_NO_ATIME, OPT_FLAG, 0, 0, NULL, "-o noatime",
	  "never update access times (by default a read\n"
	  "updates one older than the file's change or a day,\n"
	  "as relatime does: a metadata write)" },
	{ "relatime", O_RELATIME, OPT_FLAG, 0, 0, NULL, "-o relatime",
	  "the default, as above (accepted for fstab lines)" },
	{ "nostrictatime", O_RELATIME, OPT_FLAG, 0, 0, NULL, NULL, NULL },
	/* Refused in one line after parsing: csdfs has no strict mode. */
	{ "strictatime", O_STRICTATIME, OPT_FLAG, 0, 0, NULL, NULL, NULL },
	{ "norelatime", O_NORELATIME, OPT_FLAG, 0, 0, NULL, NULL, NULL },
	{ "test_torn", O_TEST_TORN, OPT_FLAG, 0, 0, NULL, NULL, NULL },  /* tests only: csdfs(8) */
};
#define N_OPT_DEFS (sizeof(opt_defs) / sizeof(opt_defs[0]))

struct options {
	char *volume;              /* real path */
	char *mountpoint;          /* as given */
	int flag[O_COUNT];         /* OPT_FLAG: given */
	char *text[O_COUNT];       /* OPT_NUMBER, OPT_SIZE: as given */
	uint64_t val[O_COUNT];     /* ... checked; meaningful when text[] is set */
};

static struct fuse_opt option_spec[N_OPT_DEFS + 1];

static void option_spec_init(void)
{
	for (size_t i = 0; i < N_OPT_DEFS; i++) {
		const struct opt_def *d = &opt_defs[i];

		option_spec[i].templ = d->templ;
		option_spec[i].offset = d->kind == OPT_FLAG ?
			offsetof(struct options, flag) + d->id * sizeof(int) :
			offsetof(struct options, text) + d->id * sizeof(char *);
		option_spec[i].value = 1;
	}
	option_spec[N_OPT_DEFS] = (struct fuse_opt)FUSE_OPT_END;
}

/* "64G" for 64 << 30: the largest binary suffix that divides @v. */
static const char *size_text(uint64_t v, char *buf, size_t len)
{
	static const char suffixes[] = "KMGTPE";
	int i = -1;

	while (v && !(v & 1023) && suffixes[i + 1]) {
		v >>= 10;
		i++;
	}
	if (i >= 0)
		snprintf(buf, len, "%llu%c", (unsigned long long)v, suffixes[i]);
	else
		snprintf(buf, len, "%llu", (unsigned long long)v);
	return buf;
}

/* Check every value given against its table entry. */
static int options_check(struct options *o)
{
	for (size_t i = 0; i < N_OPT_DEFS; i++) {
		const struct opt_def *d = &opt_defs[i];
		const char *t = o->text[d->id];
		char lo[32], hi[32], name[32];
		uint64_t v = 0;
		int rc;

		if (d->kind == OPT_FLAG || !t)
			continue;
		rc = d->kind == OPT_SIZE ? csdfs_parse_size(t, &v) : csdfs_parse_u64(t, &v);
		if (!rc && v >= d->min && v <= d->max) {
			o->val[d->id] = v;
			continue;
		}
		snprintf(name, sizeof(name), "%.*s", (int)(strchr(d->templ, '=') - d->templ),
			 d->templ);
		if (d->kind == OPT_SIZE)
			fprintf(stderr, "csdfs: bad value '%s' for -o %s (a size from %s to %s, suffix K, M or G)\n",
				t, name, size_text(d->min, lo, sizeof(lo)),
				size_text(d->max, hi, sizeof(hi)));
		else
			fprintf(stderr, "csdfs: bad value '%s' for -o %s (a whole number from %llu to %llu %s)\n",
				t, name, (unsigned long long)d->min, (unsigned long long)d->max,
				d->unit);
		return -EINVAL;
	}
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out,
"usage: csdfs [-f] [-d] [-o OPT[,OPT...]] VOLUME MOUNTPOINT\n"
"\n"
"Mount the csdfs volume VOLUME (made by csdfs-mkfs) on MOUNTPOINT: an\n"
"existing directory outside VOLUME, neither VOLUME nor one above it.\n"
"Unmount with: fusermount3 -u MOUNTPOINT\n"
"\n");
	for (size_t i = 0; i < N_OPT_DEFS; i++) {
		const struct opt_def *d = &opt_defs[i];
		const char *h = d->help;

		if (!d->shown)
			continue;
		if (i && opt_defs[i - 1].templ[0] == '-' && d->templ[0] != '-')
			fputc('\n', out);
		fprintf(out, "  %-18s", d->shown);
		if (strlen(d->shown) > 18)
			fprintf(out, "\n  %-18s", "");
		while (h) {
			const char *nl = strchr(h, '\n');

			fprintf(out, "  %.*s\n", nl ? (int)(nl - h) : (int)strlen(h), h);
			h = nl ? nl + 1 : NULL;
			if (h)
				fprintf(out, "  %-18s", "");
		}
	}
	fprintf(out, "Other -o options are passed to FUSE (see mount.fuse3(8)).\n");
}

/* What runs once the kernel applied the INIT reply (in the thread that
 * sent it, before any other request is served). */
struct after_init {
	struct csdfs_bdi_tuning *bdi;
	struct csdfs_uring *uring;
};

static void after_init(void *arg)
{
	struct after_init *a = arg;
	size_t payload = csdfs_fuse_io_uring_payload();

	if (a->bdi->mountpoint)
		csdfs_bdi_tune(a->bdi);
	if (!a->uring)
		return;
	if (payload) {
		csdfs_log(LOG_INFO, "serving FUSE requests over io_uring");
		csdfs_uring_go(a->uring, payload);
	} else {
		csdfs_log(LOG_INFO, "the kernel did not take io_uring at INIT: serving /dev/fuse");
		csdfs_uring_stop(a->uring);
		a->uring = NULL;
	}
}

/* The fuse module's enable_uring parameter, as the kernel reads it. */
static bool kernel_offers_uring(void)
{
	FILE *f = fopen("/sys/module/fuse/parameters/enable_uring", "r");
	int c = f ? fgetc(f) : EOF;

	if (f)
		fclose(f);
	return c == 'Y' || c == '1';
}

static int opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct options *o = data;

	(void)outargs;
	if (key != FUSE_OPT_KEY_NONOPT)
		return 1;
	if (!o->volume) {
		/* Resolved now: the daemon chdirs to / when it forks, and must
		 * know the real directory to keep its mount off it. */
		o->volume = realpath(arg, NULL);
		if (!o->volume) {
			fprintf(stderr, "csdfs: volume '%s' not found: %s\n", arg, strerror(errno));
			return -1;
		}
		return 0;
	}
	if (!o->mountpoint) {
		o->mountpoint = strdup(arg);
		return 0;
	}
	fprintf(stderr, "csdfs: unexpected argument '%s'\n", arg);
	return -1;
}

/*
 * Until the mount is up (one thread), what libfuse says is collected here
 * rather than logged: it prints a message in pieces ("unknown option(s): `",
 * then each word), and a refusal should be one line of ours.
 */
static bool fuse_capture;
static char fuse_said[1024];

static void fuse_log_bridge(enum fuse_log_level level, const char *fmt, va_list ap)
{
	char msg[1024];
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (fuse_capture) {
		n = strlen(fuse_said);
		snprintf(fuse_said + n, sizeof(fuse_said) - n, "%s", msg);
		return;
	}
	n = strlen(msg);
	if (n && msg[n - 1] == '\n')
		msg[n - 1] = '\0';
	csdfs_log((int)level, "%s", msg);
}

/* End the capture: pass on what libfuse said, as one line per line. */
static void fuse_capture_end(void)
{
	char *line = fuse_said, *nl;

	fuse_capture = false;
	for (; *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			nl = line + strlen(line) - 1;
		else
			*nl = '\0';
		if (*line)
			csdfs_log(LOG_INFO, "%s", line);
	}
	fuse_said[0] = '\0';
}

/* What libfuse said, without its "fuse: " prefix and on one line. */
static const char *fuse_said_line(void)
{
	char *p = fuse_said;

	for (char *q = p; *q; q++)
		if (*q == '\n')
			*q = *(q + 1) ? ';' : '\0';
	return strncmp(p, "fuse: ", 6) ? p : p + 6;
}

/* The session: libfuse checks here the -o words no entry of ours took. */
static struct fuse_session *session_new(struct fuse_args *args, struct csdfs_fuse *f)
{
	struct fuse_session *se;
	const char *said, *q;

	se = fuse_session_new(args, &csdfs_fuse_ops, sizeof(csdfs_fuse_ops), f);
	if (se)
		return se;
	said = fuse_said_line();
	q = strstr(said, "unknown option(s): `");
	if (q) {
		q += strlen("unknown option(s): `");
		if (!strncmp(q, "-o ", 3))
			q += 3;
		fprintf(stderr, "csdfs: unknown option '%.*s' (csdfs --help lists csdfs's; FUSE's are in mount.fuse3(8))\n",
			(int)strcspn(q, "'"), q);
	} else {
		fprintf(stderr, "csdfs: cannot create the FUSE session%s%s\n",
			*said ? ": " : "", said);
	}
	return NULL;
}

/*
 * Paths the daemon and its libraries open by name while mounted, besides
 * the volume: a mount point above any of them would make the daemon wait
 * on its own mount (the FUSE loop that would answer is the caller).
 * /dev/null: store.c and fuse_daemonize; /dev/log, /etc/localtime: syslog;
 * /etc/mtab: libfuse, right after mount(2); /proc/self: bdi.c's mountinfo,
 * iometer.c; /sys: bdi.c, uring.c, the io_uring probe, glibc's CPU count;
 * fusermount3: an unprivileged unmount. (strace -f -e trace=%file of a
 * mount and unmount lists them.)
 */
static const char *const paths_used_mounted[] = {
	"/dev/null", "/dev/log", "/etc/localtime", "/etc/mtab",
	"/proc/self/mountinfo", "/proc/thread-self/io", "/sys/class/bdi",
	"/sys/module/fuse", "/sys/devices/system/cpu", "/usr/bin/fusermount3",
};

/* How many directories above @path (0: @path itself) the first one with
 * @id's device and inode is, walking up the path as written, or -1. */
static int levels_above_path(const char *path, const struct stat *id)
{
	char *p = strdup(path), *slash;
	struct stat st;
	int level = 0, found = -1;

	while (p) {
		if (!stat(p, &st) && st.st_dev == id->st_dev && st.st_ino == id->st_ino) {
			found = level;
			break;
		}
		slash = strrchr(p, '/');
		if (!slash || !p[1])
			break;
		slash[slash == p] = '\0';  /* "/a" becomes "/", "/a/b" "/a" */
		level++;
	}
	free(p);
	return found;
}

/* The same along the path as written and along its real path: a lookup
 * passes the directories of both (the symlinks, then their targets), and
 * inode identity catches bind mounts that names would not. */
static int levels_above(const char *path, const struct stat *id)
{
	char *real = realpath(path, NULL);
	int a = levels_above_path(path, id), b = real ? levels_above_path(real, id) : -1;

	free(real);
	return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

/*
 * A mount point the daemon could serve without ever touching it: an
 * existing directory that is not the volume, not above it (the daemon
 * reopens the volume after it forked, and would wait on itself), not
 * inside it (it would hide meta/ or the container), and not above a path
 * of paths_used_mounted. @real receives the mount point's real path.
 */
static int mountpoint_check(const char *volume, const char *mnt, char **real)
{
	struct stat ms, vs;
	int up;

	if (stat(mnt, &ms)) {
		fprintf(stderr, errno == ENOENT ? "csdfs: mount point '%s' does not exist\n" :
			"csdfs: cannot use mount point '%s': %s\n", mnt, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(ms.st_mode)) {
		fprintf(stderr, "csdfs: mount point '%s' is not a directory\n", mnt);
		return -1;
	}
	if (stat(volume, &vs)) {
		fprintf(stderr, "csdfs: volume '%s' not found: %s\n", volume, strerror(errno));
		return -1;
	}
	up = levels_above(volume, &ms);
	if (up == 0) {
		fprintf(stderr, "csdfs: mount point '%s' is the volume directory itself; mount elsewhere\n",
			mnt);
		return -1;
	}
	if (up > 0) {
		fprintf(stderr, "csdfs: mount point '%s' is a directory above the volume '%s'; mount elsewhere\n",
			mnt, volume);
		return -1;
	}
	if (levels_above(mnt, &vs) > 0) {
		fprintf(stderr, "csdfs: mount point '%s' is inside the volume '%s'; mount elsewhere\n",
			mnt, volume);
		return -1;
	}
	for (size_t i = 0; i < sizeof(paths_used_mounted) / sizeof(paths_used_mounted[0]); i++) {
		if (levels_above(paths_used_mounted[i], &ms) >= 0) {
			fprintf(stderr, "csdfs: mount point '%s' would hide '%s', which the daemon uses while mounted\n",
				mnt, paths_used_mounted[i]);
			return -1;
		}
	}
	*real = realpath(mnt, NULL);
	if (!*real) {
		fprintf(stderr, "csdfs: cannot use mount point '%s': %s\n", mnt, strerror(errno));
		return -1;
	}
	return 0;
}

/* Where /dev/fuse is 0600 (no udev rules), libfuse's own open fails with a
 * bare "Permission denied" and never tries fusermount3: say what to do. */
static int dev_fuse_check(void)
{
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);

	if (fd >= 0) {
		close(fd);
		return 0;
	}
	if (errno == EACCES || errno == EPERM)
		fprintf(stderr, "csdfs: cannot open /dev/fuse: permission denied; make it mode 0666 (chmod 0666 /dev/fuse, or install udev/fuse3's rules) or mount as root\n");
	else if (errno == ENOENT || errno == ENODEV || errno == ENXIO)
		fprintf(stderr, "csdfs: cannot open /dev/fuse: no such device; load the fuse module (modprobe fuse) or create the node (mknod /dev/fuse c 10 229)\n");
	else
		fprintf(stderr, "csdfs: cannot open /dev/fuse: %s\n", strerror(errno));
	return -1;
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct csdfs_mount_opts mo = { .no_commit_thread = true };
	struct fuse_loop_config *loop;
	struct csdfs_fuse f = { .attr_timeout = 1.0 };
	struct options o = { 0 };
	struct fuse_session *se = NULL;
	struct after_init ai = { 0 };
	unsigned threads;
	char err[512], fsname[4200], why[256], *mnt = NULL;
	/* Readahead 4 MiB: a cold sequential 64 KiB reader of a 1 GiB file
	 * (lz4, incompressible) made 20k reads/s at 1 MiB, 25k at 4 MiB and
	 * 8 MiB, 18k at 16 MiB; 2:1 data 24k at 1 MiB, 30k at 4 MiB.
	 * Random readers are not affected: the kernel reads ahead only
	 * for a sequential pattern. */
	struct csdfs_bdi_tuning bdi = {
		.readahead = 4ull << 20, .max_dirty = CSDFS_BDI_AUTO, .f = &f,
	};
	int rc, ret = 1;

	/* Few malloc arenas: FUSE workers come and go, and every arena keeps
	 * its own free memory (bounded daemon memory, issue "Performance"). */
	mallopt(M_ARENA_MAX, 2);
	fuse_capture = true;
	fuse_set_log_func(fuse_log_bridge);
	option_spec_init();
	if (fuse_opt_parse(&args, &o, option_spec, opt_proc) == -1) {
		if (fuse_said[0])
			fprintf(stderr, "csdfs: %s\n", fuse_said_line());
		goto out_args;
	}
	if (o.flag[O_HELP]) {
		usage(stdout);
		ret = 0;
		goto out_args;
	}
	if (o.flag[O_VERSION]) {
		printf("csdfs 0.1.0 (format %u)\n", CSDFS_FORMAT_VERSION);
		ret = 0;
		goto out_args;
	}
	if (!o.volume || !o.mountpoint) {
		fprintf(stderr, "csdfs: %s (try --help)\n",
			!o.volume ? "missing VOLUME and MOUNTPOINT" : "missing MOUNTPOINT");
		goto out_args;
	}
	if (o.flag[O_STRICTATIME] || o.flag[O_NORELATIME]) {
		fprintf(stderr, "csdfs: -o %s is not supported: csdfs updates access times as relatime does (the default) or not at all (-o noatime)\n",
			o.flag[O_STRICTATIME] ? "strictatime" : "norelatime");
		goto out_args;
	}
	if (options_check(&o))
		goto out_args;
	mo.commit_ms = (unsigned)o.val[O_COMMIT_MS];
	threads = o.text[O_MAX_THREADS] ? (unsigned)o.val[O_MAX_THREADS] : 16;
	if (o.text[O_CACHE_SIZE]) {
		mo.cache_size = o.val[O_CACHE_SIZE];
		mo.no_cache = mo.cache_size == 0;
	}
	if (o.text[O_READAHEAD])
		bdi.readahead = o.val[O_READAHEAD];
	if (o.text[O_MAX_DIRTY])
		bdi.max_dirty = o.val[O_MAX_DIRTY];
	if (o.text[O_COMPACT_DEAD])   /* 0 turns it off; unset keeps the default */
		mo.compact_dead = o.val[O_COMPACT_DEAD] ? (int)o.val[O_COMPACT_DEAD] : -1;
	mo.test_torn = o.flag[O_TEST_TORN];
	mo.no_punch = o.flag[O_NOPUNCH];
	mo.no_journal = o.flag[O_NOJOURNAL];
	mo.no_atime = o.flag[O_NO_ATIME];
	if (o.flag[O_DEBUG]) {
		o.flag[O_FOREGROUND] = 1;
		csdfs_log_set_level(LOG_DEBUG);
		fuse_opt_add_arg(&args, "-d");
	}
	if (mountpoint_check(o.volume, o.mountpoint, &mnt) || dev_fuse_check())
		goto out_args;

	snprintf(fsname, sizeof(fsname), "-ofsname=csdfs:%s,subtype=csdfs,default_permissions",
		 o.volume);
	fuse_opt_add_arg(&args, fsname);
	if ((o.flag[O_ALLOW_OTHER] || getuid() == 0) && !o.flag[O_NOALLOW_OTHER])
		fuse_opt_add_arg(&args, "-oallow_other");
	if (o.flag[O_NO_ATIME])
		fuse_opt_add_arg(&args, "-onoatime");
	se = session_new(&args, &f);
	if (!se)
		goto out_args;

	if (o.flag[O_TEST_TORN])
		fprintf(stderr, "csdfs: WARNING: test_torn tears writes at a crash; for tests only\n");
	rc = csdfs_vol_open(o.volume, &mo, &f.vol, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "csdfs: %s\n", err);
		goto out_destroy;
	}
	/* LMDB environments must not cross a fork: when daemonising, the
	 * open above only verified the volume; the child opens it again. */
	if (!o.flag[O_FOREGROUND]) {
		csdfs_vol_close(f.vol);
		f.vol = NULL;
	}
	f.writeback_cache = !o.flag[O_NOWRITEBACK];

	if (fuse_set_signal_handlers(se)) {
		fprintf(stderr, "csdfs: cannot install signal handlers\n");
		goto out_destroy;
	}
	/* libfuse cancels its workers at exit, and glibc loads libgcc_s by
	 * name to unwind them: load it now, while no path leads into our
	 * own mount. */
	dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NODELETE);
	if (fuse_session_mount(se, mnt)) {
		fprintf(stderr, "csdfs: cannot mount on '%s'%s%s\n", o.mountpoint,
			fuse_said[0] ? ": " : "", fuse_said_line());
		goto out_signals;
	}
	fuse_capture_end();
	bdi.mountpoint = getuid() == 0 ? mnt : NULL;
	f.se = se;
	ai.bdi = &bdi;
	rc = csdfs_fuse_io_install(se, after_init, &ai);
	if (rc)
		fprintf(stderr, "csdfs: cannot take over /dev/fuse I/O (%s); writes will cost an extra round trip\n",
			strerror(-rc));
	if (fuse_daemonize(o.flag[O_FOREGROUND])) {
		fprintf(stderr, "csdfs: cannot daemonise\n");
		goto out_unmount;
	}
	if (!o.flag[O_FOREGROUND]) {
		csdfs_log_use_syslog(true, "csdfs");
		rc = csdfs_vol_open(o.volume, &mo, &f.vol, err, sizeof(err));
		if (rc) {
			csdfs_log(LOG_ERR, "%s", err);
			goto out_unmount;
		}
	}
	rc = csdfs_vol_start(f.vol);
	if (rc) {
		csdfs_log(LOG_ERR, "cannot start the commit thread: %s", strerror(-rc));
		goto out_unmount;
	}
	if (!o.flag[O_NOURING] && kernel_offers_uring()) {
		ai.uring = csdfs_uring_prepare(se, threads, why, sizeof(why));
		if (ai.uring)
			csdfs_fuse_io_offer_uring(true);
		else
			csdfs_log(LOG_WARNING, "cannot use io_uring (%s): serving /dev/fuse", why);
	} else if (o.flag[O_URING]) {
		csdfs_log(LOG_WARNING, "-o uring: this kernel does not offer FUSE over io_uring "
			  "(needs Linux >= 6.14 and /sys/module/fuse/parameters/enable_uring = Y)");
	}
	f.stores = csdfs_stores_start(se, &f);
	if (!f.stores)
		csdfs_log(LOG_WARNING, "cannot start the page-cache store thread: "
			  "random reads will cost more round trips");
	loop = fuse_loop_cfg_create();
	fuse_loop_cfg_set_clone_fd(loop, 0);
	fuse_loop_cfg_set_max_threads(loop, threads);
	fuse_loop_cfg_set_idle_threads(loop, 8);
	ret = fuse_session_loop_mt(se, loop) ? 1 : 0;
	fuse_loop_cfg_destroy(loop);
	if (ai.uring)
		csdfs_log(LOG_INFO, "%lu requests came over io_uring", csdfs_uring_served(ai.uring));
	csdfs_uring_stop(ai.uring);
	ai.uring = NULL;
	csdfs_stores_stop(f.stores);
	f.stores = NULL;

out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_destroy:
	fuse_session_destroy(se);
	rc = csdfs_vol_close(f.vol);
	if (rc) {
		csdfs_log(LOG_ERR, "final commit of '%s' failed: %s", o.volume, strerror(-rc));
		ret = 1;
	}
out_args:
	fuse_opt_free_args(&args);
	free(o.volume);
	free(o.mountpoint);
	for (int i = 0; i < O_COUNT; i++)
		free(o.text[i]);
	free(mnt);
	return ret;
}
