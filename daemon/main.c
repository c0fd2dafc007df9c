/* SPDX-License-Identifier: MIT */
/*
 * csdfs: the mount daemon. Parses options (one fuse_opt table, help text
 * beside it), opens and verifies the volume BEFORE mounting so every refusal
 * reaches the terminal, mounts, daemonises, then serves with libfuse's
 * multithreaded loop. fusermount3 -u ends the loop; the volume is then
 * committed and closed, and the exit status says whether that worked.
 */
#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "csdfs/log.h"
#include "bdi.h"
#include "devio.h"
#include "ops.h"
#include "store.h"
#include "uring.h"

struct options {
	char *volume;
	char *mountpoint;
	unsigned commit_ms;
	unsigned max_threads;
	char *cache_size;
	char *readahead;
	char *max_dirty;
	int writeback_cache;
	int no_writeback_cache;
	int foreground;
	int debug;
	int help;
	int version;
	int allow_other;
	int no_allow_other;
	int test_torn;
	int nopunch;
	int uring;
	int no_uring;
};

#define OPT(t, p) { t, offsetof(struct options, p), 1 }
static const struct fuse_opt option_spec[] = {
	OPT("commit_ms=%u", commit_ms),        /* group-commit interval */
	OPT("max_threads=%u", max_threads),    /* FUSE worker threads */
	OPT("cache_size=%s", cache_size),      /* decompressed-chunk cache */
	OPT("readahead=%s", readahead),        /* the mount's read_ahead_kb */
	OPT("max_dirty=%s", max_dirty),        /* the mount's dirty-page budget */
	OPT("writeback_cache", writeback_cache),  /* the default */
	OPT("nowriteback_cache", no_writeback_cache),
	OPT("allow_other", allow_other),
	OPT("noallow_other", no_allow_other),
	OPT("nopunch", nopunch),               /* keep freed space in the host file */
	OPT("uring", uring),                   /* FUSE over io_uring if offered */
	OPT("nouring", no_uring),
	OPT("test_torn", test_torn),           /* tests only: see csdfs(8) */
	OPT("-f", foreground),
	OPT("-d", debug),
	OPT("debug", debug),
	OPT("-h", help),
	OPT("--help", help),
	OPT("-V", version),
	OPT("--version", version),
	FUSE_OPT_END
};

static void usage(FILE *out)
{
	fprintf(out,
"usage: csdfs [-f] [-d] [-o OPT[,OPT...]] VOLUME MOUNTPOINT\n"
"\n"
"Mount the csdfs volume VOLUME (made by csdfs-mkfs) on MOUNTPOINT.\n"
"Unmount with: fusermount3 -u MOUNTPOINT\n"
"\n"
"  -f                  stay in the foreground\n"
"  -d                  debug output (implies -f)\n"
"  -h, --help          this help\n"
"  -V, --version       version\n"
"\n"
"  -o commit_ms=N      group-commit interval in ms (default 1000); an\n"
"                      un-fsynced crash loses at most about this much\n"
"  -o max_threads=N    FUSE worker threads (default 16)\n"
"  -o cache_size=SIZE  decoded-chunk cache (default 64M; 0 disables)\n"
"  -o readahead=SIZE   kernel readahead for the mount (default 1M when run\n"
"                      as root; 0 keeps the kernel's 128K)\n"
"  -o max_dirty=SIZE   dirty page cache the kernel may hold for the mount\n"
"                      (root; default an eighth of the capacity, 64M..1G;\n"
"                      0 keeps the kernel's, about 1%% of its budget)\n"
"  -o nowriteback_cache  send every buffered write(2) to csdfs as it is\n"
"                      made (slower): atomic writes (G3) then hold for\n"
"                      buffered writes too, not only for O_DIRECT and\n"
"                      O_SYNC/O_DSYNC ones; see csdfs(8)\n"
"  -o nouring          serve requests through read/write on /dev/fuse even\n"
"                      when the kernel offers io_uring (the default uses\n"
"                      io_uring when the fuse module's enable_uring is Y)\n"
"  -o nopunch          do not punch freed ranges out of the container\n"
"                      (by default freed space goes back to the host)\n"
"  -o allow_other      let other users in (default when run as root);\n"
"                      -o noallow_other turns it off\n"
"Other -o options are passed to FUSE (see mount.fuse3(8)).\n");
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

	if (key != FUSE_OPT_KEY_NONOPT)
		return 1;
	if (!o->volume) {
		o->volume = realpath(arg, NULL);
		if (!o->volume)
			o->volume = strdup(arg);
		return 0;
	}
	if (!o->mountpoint) {
		o->mountpoint = strdup(arg);
		return 0;
	}
	fprintf(stderr, "csdfs: unexpected argument '%s'\n", arg);
	return -1;
}

static void fuse_log_bridge(enum fuse_log_level level, const char *fmt, va_list ap)
{
	char msg[1024];
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	if (n && msg[n - 1] == '\n')
		msg[n - 1] = '\0';
	csdfs_log((int)level, "%s", msg);
}

int main(int argc, char *argv[])
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct csdfs_mount_opts mo = { .no_commit_thread = true };
	struct fuse_loop_config *loop;
	struct csdfs_fuse f = { .attr_timeout = 1.0 };
	struct options o = { 0 };
	struct fuse_session *se;
	struct after_init ai = { 0 };
	unsigned threads;
	char err[512], fsname[4200], why[256];
	struct csdfs_bdi_tuning bdi = {
		.readahead = 1ull << 20, .max_dirty = CSDFS_BDI_AUTO, .f = &f,
	};
	int rc, ret = 1;

	/* Few malloc arenas: FUSE workers come and go, and every arena keeps
	 * its own free memory (bounded daemon memory, issue "Performance"). */
	mallopt(M_ARENA_MAX, 2);
	if (fuse_opt_parse(&args, &o, option_spec, opt_proc) == -1)
		goto out_args;
	if (o.help) {
		usage(stdout);
		ret = 0;
		goto out_args;
	}
	if (o.version) {
		printf("csdfs 0.1.0 (format %u)\n", CSDFS_FORMAT_VERSION);
		ret = 0;
		goto out_args;
	}
	if (!o.volume || !o.mountpoint) {
		fprintf(stderr, "csdfs: %s (try --help)\n",
			!o.volume ? "missing VOLUME and MOUNTPOINT" : "missing MOUNTPOINT");
		goto out_args;
	}
	if (o.cache_size) {
		if (csdfs_parse_size(o.cache_size, &mo.cache_size) ||
		    mo.cache_size > (64ull << 30)) {
			fprintf(stderr, "csdfs: bad cache_size '%s' (e.g. 64M; 0 disables)\n",
				o.cache_size);
			goto out_args;
		}
		mo.no_cache = mo.cache_size == 0;
	}
	if (o.readahead && (csdfs_parse_size(o.readahead, &bdi.readahead) ||
			    bdi.readahead > (64ull << 20))) {
		fprintf(stderr, "csdfs: bad readahead '%s' (e.g. 1M, at most 64M; 0 keeps the kernel's)\n",
			o.readahead);
		goto out_args;
	}
	if (o.max_dirty && (csdfs_parse_size(o.max_dirty, &bdi.max_dirty) ||
			    bdi.max_dirty > (16ull << 30))) {
		fprintf(stderr, "csdfs: bad max_dirty '%s' (e.g. 256M, at most 16G; 0 keeps the kernel's)\n",
			o.max_dirty);
		goto out_args;
	}
	if (o.max_threads > 256) {
		fprintf(stderr, "csdfs: max_threads %u is too large (at most 256)\n",
			o.max_threads);
		goto out_args;
	}
	if (o.debug) {
		o.foreground = 1;
		csdfs_log_set_level(LOG_DEBUG);
		fuse_opt_add_arg(&args, "-d");
	}
	fuse_set_log_func(fuse_log_bridge);

	mo.commit_ms = o.commit_ms;
	mo.test_torn = o.test_torn;
	mo.no_punch = o.nopunch;
	if (o.test_torn)
		fprintf(stderr, "csdfs: WARNING: test_torn tears writes at a crash; for tests only\n");
	rc = csdfs_vol_open(o.volume, &mo, &f.vol, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "csdfs: %s\n", err);
		goto out_args;
	}
	/* LMDB environments must not cross a fork: when daemonising, the
	 * open above only verified the volume; the child opens it again. */
	if (!o.foreground) {
		csdfs_vol_close(f.vol);
		f.vol = NULL;
	}
	f.writeback_cache = !o.no_writeback_cache;

	snprintf(fsname, sizeof(fsname), "-ofsname=csdfs:%s,subtype=csdfs,default_permissions",
		 o.volume);
	fuse_opt_add_arg(&args, fsname);
	if ((o.allow_other || getuid() == 0) && !o.no_allow_other)
		fuse_opt_add_arg(&args, "-oallow_other");

	se = fuse_session_new(&args, &csdfs_fuse_ops, sizeof(csdfs_fuse_ops), &f);
	if (!se) {
		fprintf(stderr, "csdfs: cannot create the FUSE session\n");
		goto out_close;
	}
	if (fuse_set_signal_handlers(se)) {
		fprintf(stderr, "csdfs: cannot install signal handlers\n");
		goto out_destroy;
	}
	if (fuse_session_mount(se, o.mountpoint)) {
		fprintf(stderr, "csdfs: cannot mount on '%s'\n", o.mountpoint);
		goto out_signals;
	}
	bdi.mountpoint = getuid() == 0 ? realpath(o.mountpoint, NULL) : NULL;
	f.se = se;
	ai.bdi = &bdi;
	threads = o.max_threads ? o.max_threads : 16;
	rc = csdfs_fuse_io_install(se, after_init, &ai);
	if (rc)
		fprintf(stderr, "csdfs: cannot take over /dev/fuse I/O (%s); writes will cost an extra round trip\n",
			strerror(-rc));
	if (fuse_daemonize(o.foreground)) {
		fprintf(stderr, "csdfs: cannot daemonise\n");
		goto out_unmount;
	}
	if (!o.foreground) {
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
	if (!o.no_uring && kernel_offers_uring()) {
		ai.uring = csdfs_uring_prepare(se, threads, why, sizeof(why));
		if (ai.uring)
			csdfs_fuse_io_offer_uring(true);
		else
			csdfs_log(LOG_WARNING, "cannot use io_uring (%s): serving /dev/fuse", why);
	} else if (o.uring) {
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
out_close:
	rc = csdfs_vol_close(f.vol);
	if (rc) {
		csdfs_log(LOG_ERR, "final commit of '%s' failed: %s", o.volume, strerror(-rc));
		ret = 1;
	}
out_args:
	fuse_opt_free_args(&args);
	free(o.volume);
	free(o.mountpoint);
	free(o.cache_size);
	free(o.readahead);
	free(o.max_dirty);
	free(bdi.mountpoint);
	return ret;
}
