#!/bin/bash
# t_mountpoint: csdfs refuses, before mounting anything, every mount point it
# could not serve without waiting on its own mount (issue 18.3, 21.2/5):
# the volume directory itself, a directory above it (also through a symlink
# and a bind mount), one inside it, one above a path the daemon opens while
# mounted (/, /dev, /proc: run in a private mount namespace, so that a csdfs
# that did mount there could not hide them from anyone else), a file, a
# missing path. Each refusal exits non-zero at once (bounded), prints one
# line, mounts nothing (/proc/self/mountinfo), leaves no daemon and leaves the
# volume fsck-clean. A relative VOLUME path from the daemonising csdfs still
# works. And an unprivileged user on a /dev/fuse of mode 0600 is told what
# to do (a private node bind-mounted over /dev/fuse in a private mount
# namespace: the machine's /dev/fuse is never changed).
. "$(dirname "$0")/lib.sh"

[ $PLAIN = 1 ] && skip_test "every check here is about csdfs itself (plain mode)"
require_csdfs
require_tools timeout setpriv unshare mknod stat
setup
mkfs_vol --size 64M

nlines() { grep -c '' "$1"; }

# Some checks need a private mount namespace; a chroot whose root is not a
# mount point cannot make one (unshare: cannot change root filesystem
# propagation): those are skipped, with the reason, as t_install does.
ns_err=$(unshare -m --propagation private true 2>&1) && ns_ok=1 || ns_ok=0
[ $ns_ok = 1 ] || log "no private mount namespace here ($ns_err): its checks are skipped"

# csdfs_mounts: the csdfs mounts of this test's volume, as mountinfo lines
csdfs_mounts() { grep -F " csdfs:$VOL " /proc/self/mountinfo; }

# refused LABEL REGEX MOUNTPOINT [csdfs words...]: run the daemonising csdfs
# (the mode that returns once mounted) on $VOL; it must refuse.
# (VOLUME is $R_VOL when set: a relative path)
refused() {
	local label=$1 re=$2 mnt=$3 rc t0 dt mounted pids
	shift 3
	t0=$SECONDS
	timeout -k 2 20 "$CSDFS_BIN" "$@" "${R_VOL:-$VOL}" "$mnt" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	dt=$((SECONDS - t0))
	# A csdfs that did mount here waits on its own mount, which may hide
	# $WORK itself: end its connection before anything reads a file (from
	# /proc only), and its daemon.
	mounted=$(csdfs_mounts | head -n 1)
	csdfs_mounts | while read -r _ _ dev _ m _; do
		abort_fuse_conn "$dev"
		umount -l "$(printf '%b' "$m")" 2>/dev/null
	done
	pids=$(daemons_using "$VOL")
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	if [ $rc = 0 ]; then
		fail "$label: accepted (exit 0)"
	elif [ $rc -ge 124 ]; then
		fail "$label: exit $rc (hang)"
	elif [ $dt -gt 5 ]; then
		fail "$label: refused only after $dt s"
	else
		pass "$label: refused at once (exit $rc)"
	fi
	if [ -n "$mounted" ]; then
		fail "$label: mounted anyway: $mounted"
	else
		pass "$label: nothing mounted"
	fi
	[ -n "$pids" ] && fail "$label: a csdfs process was left (pid $pids); killed it"
	check_eq "$label: one line on stderr ($(head -c 200 "$WORK/err" | tr '\n' '|'))" 1 "$(nlines "$WORK/err")"
	check_grep_i "$label: the line names the problem" "^csdfs: .*($re)" "$WORK/err"
	fsck_clean "$label"
	log "    message: $(head -n 1 "$WORK/err")"
}

refused "the volume directory as mount point" 'is the volume directory' "$VOL"
refused "the volume directory, foreground (-f)" 'is the volume directory' "$VOL" -f
refused "the volume's parent directory" 'above the volume' "$WORK"
ln -s "$VOL" "$WORK/vol-link"
refused "a symlink to the volume directory" 'is the volume directory' "$WORK/vol-link"
ln -s "$WORK" "$WORK/work-link"
refused "a symlink to the volume's parent" 'above the volume' "$WORK/work-link"
cd "$WORK" || die "cd $WORK"
R_VOL=vol refused "the volume directory as relative paths (csdfs vol vol)" 'is the volume directory' vol
R_VOL=vol refused "the volume's parent as relative paths (csdfs vol .)" 'above the volume' .
cd / || die "cd /"
refused "the volume's meta/ directory" 'inside the volume' "$VOL/meta"
mkdir "$VOL/sub"
refused "a new directory inside the volume" 'inside the volume' "$VOL/sub"
rmdir "$VOL/sub"
: >"$WORK/plainfile"
refused "a regular file as mount point" 'is not a directory' "$WORK/plainfile"
refused "a missing mount point" 'does not exist' "$WORK/missing"

if [ "$(id -u)" = 0 ]; then
	mkdir "$WORK/bind-work" "$WORK/bind-vol"
	if mount --bind "$WORK" "$WORK/bind-work" && mount --bind "$VOL" "$WORK/bind-vol"; then
		refused "a bind mount of the volume's parent" 'above the volume' "$WORK/bind-work"
		refused "a bind mount of the volume directory" 'is the volume directory' "$WORK/bind-vol"
	else
		fail "cannot bind-mount for the bind-mount cases"
	fi
	umount "$WORK/bind-vol" "$WORK/bind-work" 2>/dev/null

	# refused_private LABEL REGEX MOUNTPOINT: refused, in a private mount
	# namespace (whatever a wrong csdfs mounted there dies with it)
	refused_private() {
		local rc
		[ $ns_ok = 1 ] || { log "SKIP $1: no private mount namespace"; return 0; }
		timeout -k 2 20 unshare -m --propagation private sh -c '
			"$1" "$2" "$3" 2>"$4/err"; rc=$?
			grep -c " fuse.csdfs csdfs:$2 " /proc/self/mountinfo >"$4/ns-mounts"
			exit $rc' sh "$CSDFS_BIN" "$VOL" "$3" "$WORK" >/dev/null
		rc=$?
		if [ $rc != 0 ] && [ $rc -lt 124 ]; then
			pass "$1: refused (exit $rc)"
		else
			fail "$1: exit $rc"
		fi
		check_eq "$1: one line on stderr ($(head -c 200 "$WORK/err" | tr '\n' '|'))" 1 "$(nlines "$WORK/err")"
		check_grep_i "$1: the line names the problem" "^csdfs: .*($2)" "$WORK/err"
		check_eq "$1: nothing mounted in its namespace" 0 "$(cat "$WORK/ns-mounts")"
		for p in $(daemons_using "$VOL"); do
			fail "$1: a csdfs process is left (pid $p); killing it"
			kill -9 "$p"
		done
		fsck_clean "$1"
	}
	refused_private "/ as mount point" 'above the volume' /
	refused_private "/dev as mount point (the daemon opens /dev/null)" "would hide '/dev/null'" /dev
	refused_private "/proc as mount point (mountinfo, /etc/mtab's target)" "would hide '/(proc/self/mountinfo|etc/mtab)'" /proc
	refused_private "/sys/class as mount point (bdi)" "would hide '/sys/class/bdi'" /sys/class
else
	skip_check "bind-mount and namespace cases: need root"
fi

# the control: a relative VOLUME from another directory, daemonising (the
# daemon chdirs to / when it forks), a relative mount point
mkdir -p "$MNT"
if (cd "$WORK" && timeout -k 2 20 "$CSDFS_BIN" vol mnt) 2>"$WORK/err"; then
	pass "csdfs vol mnt from the volume's parent: mounted"
	# its command line names no absolute path: find it by binary and words
	for d in /proc/[0-9]*; do
		[ "$(readlink "$d/exe")" = "$(readlink -f "$CSDFS_BIN")" ] &&
			[ "$(tr '\0' ' ' <"$d/cmdline")" = "$CSDFS_BIN vol mnt " ] &&
			DAEMON_PID=${d#/proc/}
	done 2>/dev/null
	[ -n "$DAEMON_PID" ] || fail "the daemon of 'csdfs vol mnt' not found"
	FUSE_CONN=$(awk -v m="$MNT" '$5 == m { c = $3 } END { print c }' /proc/self/mountinfo)
	check "write through the mount" bounded 20 sh -c "echo edge >'$MNT/f' && sync '$MNT/f'"
	check_eq "read back" edge "$(bounded 20 cat "$MNT/f")"
	# not our child: umount_vol cannot wait for its status
	check "fusermount3 -u" fusermount3 -u "$MNT"
	for ((i = 0; i < 100; i++)); do
		pid_alive "$DAEMON_PID" || break
		sleep 0.1
	done
	if pid_alive "$DAEMON_PID"; then
		fail "the daemon still runs 10 s after fusermount3 -u"
	else
		pass "the daemon exited after fusermount3 -u"
		DAEMON_PID=
	fi
	fsck_clean "after the relative-path mount"
else
	fail "csdfs vol mnt from the volume's parent: $(tr '\n' '|' <"$WORK/err")"
fi

# --- an unprivileged user and a /dev/fuse of mode 0600 (no udev rules) ---
if [ "$(id -u)" = 0 ] && [ $ns_ok = 1 ] && ensure_test_user; then
	as_user_init
	UV=$WORK/u/vol
	UM=$WORK/u/mnt
	mkdir -p "$UM" "$WORK/devns" "$WORK/bin"
	chown -R "$TEST_UID:$TEST_GID" "$WORK/u"
	# copies the user can run wherever the build lives (libcsdfs is static)
	for b in "$CSDFS_BIN" "$CSDFS_MKFS" "$CSDFS_FSCK"; do
		cp "$b" "$WORK/bin/" && chmod 755 "$WORK/bin" "$WORK/bin/${b##*/}"
	done
	U_BIN=$WORK/bin/${CSDFS_BIN##*/}
	U_MKFS=$WORK/bin/${CSDFS_MKFS##*/}
	U_FSCK=$WORK/bin/${CSDFS_FSCK##*/}
	"${AS_USER[@]}" "$U_MKFS" --size 64M "$UV" >/dev/null 2>"$WORK/err" ||
		die "mkfs as $TEST_USER: $(cat "$WORK/err")"
	# user_try MODE CMD...: in a private mount namespace whose /dev/fuse is
	# a fresh node (10:229) of MODE, run CMD as $TEST_USER
	user_try() {
		local mode=$1
		shift
		timeout -k 2 30 unshare -m --propagation private sh -c '
			mount -t tmpfs -o size=1m,mode=755 none "$1" &&
			mknod -m "$2" "$1/fuse" c 10 229 && mount --bind "$1/fuse" /dev/fuse ||
			{ echo "cannot set up the private /dev/fuse" >&2; exit 99; }
			shift 2; exec "$@"' sh "$WORK/devns" "$mode" "${AS_USER[@]}" "$@"
	}
	# the control: the private node is the real device, and mode decides
	if user_try 0666 sh -c 'exec 3<>/dev/fuse' 2>"$WORK/err"; then
		pass "as $TEST_USER: a private /dev/fuse of mode 0666 opens"
	else
		fail "as $TEST_USER: a private /dev/fuse of mode 0666 does not open: $(cat "$WORK/err")"
	fi
	if user_try 0600 sh -c 'exec 3<>/dev/fuse' 2>/dev/null; then
		fail "as $TEST_USER: a private /dev/fuse of mode 0600 opens"
	else
		pass "as $TEST_USER: a private /dev/fuse of mode 0600 does not open"
	fi
	t0=$SECONDS
	user_try 0600 "$U_BIN" "$UV" "$UM" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	if [ $rc != 0 ] && [ $rc -lt 99 ] && [ $((SECONDS - t0)) -le 5 ]; then
		pass "as $TEST_USER on a 0600 /dev/fuse: refused at once (exit $rc)"
	else
		fail "as $TEST_USER on a 0600 /dev/fuse: exit $rc after $((SECONDS - t0)) s"
	fi
	check_eq "0600 /dev/fuse: one line ($(head -c 300 "$WORK/err" | tr '\n' '|'))" 1 "$(nlines "$WORK/err")"
	check_grep_i "0600 /dev/fuse: the line says what to do" \
		'^csdfs: cannot open /dev/fuse: permission denied; .*chmod 0666 /dev/fuse.* or mount as root' "$WORK/err"
	for p in $(daemons_using "$UV"); do
		fail "0600 /dev/fuse: a csdfs process is left (pid $p)"
		kill -9 "$p"
	done
	check "0600 /dev/fuse: the user's volume is fsck-clean" \
		bounded 60 "${AS_USER[@]}" "$U_FSCK" "$UV"
else
	skip_check "unprivileged /dev/fuse case: needs root and a test user"
fi
finish
