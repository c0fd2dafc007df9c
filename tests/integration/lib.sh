# shellcheck shell=bash
# lib.sh: shared helpers for the csdfs integration tests. Source it; don't run it.
#
# Every test gets one private temp dir ($WORK) holding the volume ($VOL), the
# mount point ($MNT) and a plain reference dir ($REF). An EXIT/INT/TERM trap
# always lazy-unmounts, stops the daemon and removes $WORK, whatever happened,
# so no test leaves a mount, a daemon or a volume behind.
#
# Environment (meson sets these; defaults suit a run by hand):
#   CSDFS_BIN CSDFS_MKFS CSDFS_FSCK  the binaries        (default build/csdfs...)
#   CSDFS_HELPERS                    compiled posix_check, rw_stress (build/tests)
#   CSDFS_TEST_PLAIN=1               run on a plain directory: no mkfs, mount,
#                                    fsck or remount; csdfs-only checks skipped
#   CSDFS_KEEP_LOGS=1                print the daemon log at the end even on success
#   CSDFS_MKFS_OPTS, CSDFS_MOUNT_OPTS extra csdfs-mkfs / csdfs words for every
#                                    volume, e.g. "--chunk 128K --codec lz4",
#                                    "-o writeback_cache"
#
# Exit codes: 0 all checks passed, 77 skipped (no /dev/fuse or a missing tool),
# 1 a check failed. Long commands run through `bounded` so that a hung
# filesystem turns into a failed check, not a hung test.

T_NAME=${T_NAME:-$(basename "${0%.sh}")}
LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$LIB_DIR/../.." && pwd)

abspath() {
	case $1 in
	/*) printf '%s\n' "$1" ;;
	*) printf '%s\n' "$PWD/$1" ;;
	esac
}

CSDFS_BIN=$(abspath "${CSDFS_BIN:-$REPO_ROOT/build/csdfs}")
CSDFS_MKFS=$(abspath "${CSDFS_MKFS:-$REPO_ROOT/build/csdfs-mkfs}")
CSDFS_FSCK=$(abspath "${CSDFS_FSCK:-$REPO_ROOT/build/csdfs-fsck}")
CSDFS_HELPERS=$(abspath "${CSDFS_HELPERS:-$REPO_ROOT/build/tests}")
PLAIN=0
[ "${CSDFS_TEST_PLAIN:-0}" = 1 ] && PLAIN=1

N_PASS=0
N_FAIL=0
N_SKIP=0
FAILED_NAMES=()
WORK=
VOL=
MNT=
REF=
DAEMON_PID=
FUSE_CONN=      # major:minor of the mount mount_vol made last
BG_PIDS=()
T_START=$SECONDS

# ---------- reporting ----------

log() { printf '%s: %s\n' "$T_NAME" "$*"; }

pass() {
	N_PASS=$((N_PASS + 1))
	printf 'PASS %s\n' "$*"
}

fail() {
	N_FAIL=$((N_FAIL + 1))
	FAILED_NAMES+=("${1%%:*}")
	printf 'FAIL %s\n' "$*"
}

# a check that cannot run in this mode (plain dir, not root, ...)
skip_check() {
	N_SKIP=$((N_SKIP + 1))
	printf 'SKIP %s\n' "$*"
}

# check NAME CMD...: passes when CMD exits 0
check() {
	local name=$1
	shift
	if "$@"; then
		pass "$name"
	else
		fail "$name (exit $?: $*)"
	fi
}

# check_eq NAME EXPECTED ACTUAL
check_eq() {
	if [ "$2" = "$3" ]; then
		pass "$1"
	else
		fail "$1: expected '$2', got '$3'"
	fi
}

# check_files_equal NAME FILE1 FILE2: byte-identical (prints where they differ)
check_files_equal() {
	local out
	if out=$(cmp -- "$2" "$3" 2>&1); then
		pass "$1"
	else
		fail "$1: $out"
	fi
}

# check_grep_i NAME REGEX FILE: FILE contains REGEX (extended, case-insensitive)
check_grep_i() {
	if grep -Eqi -- "$2" "$3"; then
		pass "$1"
	else
		fail "$1: no /$2/ in: $(head -c 300 "$3" | tr '\n' '|')"
	fi
}

# float comparison helper: fle A B -> true when A <= B
fle() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }

die() {
	fail "$T_NAME: $*"
	exit 1
}

skip_test() {
	log "SKIP: $*"
	SKIPPED=1
	exit 77
}

finish() {
	local secs=$((SECONDS - T_START))
	if [ $N_PASS -eq 0 ] && [ $N_FAIL -eq 0 ]; then
		fail "$T_NAME: no check ran"
	fi
	if [ $N_FAIL -gt 0 ]; then
		log "failed checks: ${FAILED_NAMES[*]}"
		show_daemon_log
	elif [ "${CSDFS_KEEP_LOGS:-0}" = 1 ]; then
		show_daemon_log
	fi
	printf '%s: %d passed, %d failed, %d skipped (%d s%s)\n' "$T_NAME" $N_PASS $N_FAIL \
		$N_SKIP $secs "$([ $PLAIN = 1 ] && echo ', plain mode')"
	[ $N_FAIL -eq 0 ] && exit 0
	exit 1
}

show_daemon_log() {
	[ -n "$WORK" ] && [ -s "$WORK/daemon.log" ] || return 0
	log "last lines of the csdfs daemon log:"
	tail -n 40 "$WORK/daemon.log" | sed 's/^/    | /'
}

# ---------- requirements ----------

require_tools() {
	local t
	for t in "$@"; do
		command -v "$t" >/dev/null 2>&1 || skip_test "required tool '$t' is missing"
	done
}

# csdfs mode needs /dev/fuse, fusermount3 and the three binaries
require_csdfs() {
	[ $PLAIN = 1 ] && return 0
	[ -c /dev/fuse ] || skip_test "/dev/fuse is absent"
	require_tools fusermount3 mountpoint
	local b
	for b in "$CSDFS_BIN" "$CSDFS_MKFS" "$CSDFS_FSCK"; do
		[ -x "$b" ] || die "binary '$b' not found (build first, or set CSDFS_BIN etc.)"
	done
}

# helper NAME: path of a compiled helper, copied into $WORK/bin so that an
# unprivileged user can run it; compiled from source when missing or stale.
helper() {
	local name=$1 src="$LIB_DIR/$1.c" bin="$CSDFS_HELPERS/$1" out="$WORK/bin/$1"
	mkdir -p "$WORK/bin"
	chmod 755 "$WORK/bin"
	if [ -x "$out" ]; then
		printf '%s\n' "$out"
		return 0
	fi
	if [ -x "$bin" ] && ! [ "$src" -nt "$bin" ]; then
		cp "$bin" "$out"
	elif command -v gcc >/dev/null 2>&1; then
		gcc -O2 -Wall -Wextra -o "$out" "$src" -lpthread >&2 ||
			die "cannot compile $src"
	elif [ -x "$bin" ]; then
		cp "$bin" "$out"
	else
		skip_test "helper '$name' not built ($bin) and no gcc"
	fi
	chmod 755 "$out"
	printf '%s\n' "$out"
}

# ---------- temp dir, volume, mount ----------

setup() {
	WORK=$(mktemp -d "${TMPDIR:-/tmp}/csdfs-$T_NAME.XXXXXX") || {
		echo "mktemp failed" >&2
		exit 1
	}
	chmod 755 "$WORK"	# an unprivileged test user must reach $MNT
	VOL=$WORK/vol
	MNT=$WORK/mnt
	REF=$WORK/ref
	mkdir -p "$MNT" "$REF"
	# fd 9 = the test's own stdout, for messages from a trap that may fire
	# while a command's output is redirected to a file
	exec 9>&1
	trap cleanup EXIT
	trap 'log "interrupted ($N_PASS passed, $N_FAIL failed so far)" >&9; exit 130' INT
	trap 'log "terminated ($N_PASS passed, $N_FAIL failed so far)" >&9; exit 143' TERM
	log "work dir $WORK$([ $PLAIN = 1 ] && echo ' (plain mode: no csdfs)')"
}

# mkfs_vol [OPTIONS...]: make the volume; default --size 1G; words in
# $CSDFS_MKFS_OPTS are appended (e.g. "--chunk 128K --codec lz4")
mkfs_vol() {
	[ $PLAIN = 1 ] && return 0
	[ $# -eq 0 ] && set -- --size 1G
	# shellcheck disable=SC2086
	set -- "$@" ${CSDFS_MKFS_OPTS:-}
	if "$CSDFS_MKFS" "$@" "$VOL" >"$WORK/mkfs.log" 2>&1; then
		pass "mkfs $*"
	else
		fail "mkfs $* (exit $?): $(head -c 400 "$WORK/mkfs.log")"
		exit 1
	fi
}

pid_alive() {
	local st
	[ -n "$1" ] || return 1
	st=$(sed -n 's/^.*) \(.\).*/\1/p' "/proc/$1/stat" 2>/dev/null)
	[ -n "$st" ] && [ "$st" != Z ]
}

# mount_vol [DAEMON OPTIONS...]: start "csdfs -f [opts] VOL MNT" in the
# background and wait (10 s) until MNT is a mount point. Words in
# $CSDFS_MOUNT_OPTS come first (e.g. "-o writeback_cache").
mount_vol() {
	[ $PLAIN = 1 ] && return 0
	local i rc
	# shellcheck disable=SC2086
	set -- ${CSDFS_MOUNT_OPTS:-} "$@"
	echo "=== mount $(date +%T) $* ===" >>"$WORK/daemon.log"
	"$CSDFS_BIN" -f "$@" "$VOL" "$MNT" >>"$WORK/daemon.log" 2>&1 &
	DAEMON_PID=$!
	for ((i = 0; i < 100; i++)); do
		if mountpoint -q "$MNT"; then
			FUSE_CONN=$(awk -v m="$MNT" '$5 == m { c = $3 } END { print c }' /proc/self/mountinfo)
			# the first access waits for FUSE_INIT; make sure it answers
			if timeout 10 stat "$MNT" >/dev/null 2>&1; then
				return 0
			fi
			fail "mount: $MNT is mounted but stat on it fails or hangs"
			return 1
		fi
		if ! pid_alive "$DAEMON_PID"; then
			wait "$DAEMON_PID" 2>/dev/null
			rc=$?
			DAEMON_PID=
			fail "mount: csdfs exited (status $rc) before the mount was ready"
			show_daemon_log
			return 1
		fi
		sleep 0.1
	done
	fail "mount: $MNT not mounted 10 s after starting csdfs"
	return 1
}

# wait_daemon_exit SECONDS: true when the daemon exited; sets DAEMON_RC
wait_daemon_exit() {
	local i n=$(($1 * 10))
	DAEMON_RC=
	for ((i = 0; i < n; i++)); do
		pid_alive "$DAEMON_PID" || break
		sleep 0.1
	done
	pid_alive "$DAEMON_PID" && return 1
	wait "$DAEMON_PID" 2>/dev/null
	DAEMON_RC=$?
	return 0
}

# umount_vol: clean unmount; the daemon must exit 0 (CLI.md)
umount_vol() {
	[ $PLAIN = 1 ] && return 0
	local i ok=0
	[ -n "$DAEMON_PID" ] || {
		fail "umount: no daemon running"
		return 1
	}
	for ((i = 0; i < 20; i++)); do
		if fusermount3 -u "$MNT" 2>>"$WORK/umount.log"; then
			ok=1
			break
		fi
		sleep 0.5	# EBUSY: a reader of ours may still be closing
	done
	if [ $ok = 0 ]; then
		fail "umount: fusermount3 -u failed: $(tail -n 1 "$WORK/umount.log")"
		fusermount3 -u -z "$MNT" 2>/dev/null
	fi
	if ! wait_daemon_exit 60; then
		fail "umount: csdfs still running 60 s after unmount; killing it"
		abort_fuse_conn "$FUSE_CONN"    # if stuck in the kernel, SIGKILL is not enough
		kill -9 "$DAEMON_PID" 2>/dev/null
		{ wait "$DAEMON_PID"; } 2>/dev/null
		DAEMON_PID=
		return 1
	fi
	DAEMON_PID=
	if [ "$DAEMON_RC" != 0 ]; then
		fail "umount: csdfs exited with status $DAEMON_RC after fusermount3 -u"
		return 1
	fi
	[ $ok = 1 ]
}

# remount [DAEMON OPTIONS...]
remount() {
	[ $PLAIN = 1 ] && return 0
	umount_vol || return 1
	mount_vol "$@"
}

# kill9: simulate a daemon crash: SIGKILL, then detach the dead mount
# detach_dead MNT: lazily unmount MNT, whose daemon is dead, and wait (at
# most 5 s) until it is gone; 1 if it is still mounted then
detach_dead() {
	local i
	fusermount3 -u -z "$1" 2>/dev/null
	for ((i = 0; i < 100; i++)); do
		mountpoint -q "$1" || return 0
		sleep 0.05
	done
	return 1
}

kill9() {
	[ $PLAIN = 1 ] && return 0
	[ -n "$DAEMON_PID" ] || {
		fail "kill9: no daemon running"
		return 1
	}
	kill -9 "$DAEMON_PID"
	{ wait "$DAEMON_PID"; } 2>/dev/null
	DAEMON_PID=
	detach_dead "$MNT" && return 0
	fail "kill9: $MNT still mounted after fusermount3 -u -z"
	return 1
}

# fsck_clean LABEL: csdfs-fsck on the unmounted volume must exit 0
fsck_clean() {
	[ $PLAIN = 1 ] && return 0
	local rc
	timeout -k 5 300 "$CSDFS_FSCK" "$VOL" >"$WORK/fsck.log" 2>&1
	rc=$?
	if [ $rc = 0 ]; then
		pass "fsck clean ($1)"
	else
		fail "fsck clean ($1): csdfs-fsck exited $rc"
		sed 's/^/    fsck| /' "$WORK/fsck.log" | head -n 30
	fi
}

# bounded SECONDS CMD...: run CMD in the background (so a TERM from meson is
# handled at once) and kill it after SECONDS; returns CMD's status (124 on timeout)
bounded() {
	# CSDFS_TIME_SCALE stretches every bound (sanitizer builds run slower).
	local secs=$(($1 * ${CSDFS_TIME_SCALE:-1})) pid rc
	shift
	timeout -k 10 "$secs" "$@" &
	pid=$!
	BG_PIDS+=("$pid")
	wait "$pid"
	rc=$?
	[ $rc = 124 ] && log "timed out after $secs s: $*"
	return $rc
}

# ---------- unprivileged user ----------

TEST_USER=csdfstest

# ensure_test_user: create $TEST_USER if needed; sets TEST_UID, TEST_GID
ensure_test_user() {
	[ "$(id -u)" = 0 ] || return 1
	if ! id "$TEST_USER" >/dev/null 2>&1; then
		useradd -M -U -s /usr/sbin/nologin -d /nonexistent "$TEST_USER" >/dev/null 2>&1 ||
			useradd -M -s /usr/sbin/nologin "$TEST_USER" >/dev/null 2>&1 || return 1
	fi
	TEST_UID=$(id -u "$TEST_USER") && TEST_GID=$(id -g "$TEST_USER")
}

# "${AS_USER[@]}" CMD...: run CMD as $TEST_USER without any capability
# (an array, not a function, so that `bounded` can run it)
as_user_init() {
	AS_USER=(setpriv --reuid="$TEST_UID" --regid="$TEST_GID" --clear-groups
		--inh-caps=-all --bounding-set=-all --)
}

# ---------- cleanup ----------

# fusectl_mounted: is the FUSE control file system at /sys/fs/fuse/connections
# (mounted now if need be; root only)? A fresh machine may not have it.
fusectl_mounted() {
	local c=/sys/fs/fuse/connections
	[ "$(id -u)" = 0 ] || return 1
	mountpoint -q "$c" || mount -t fusectl none "$c" 2>/dev/null
}

# abort_fuse_conn DEV: end the FUSE connection of device DEV (major:minor,
# from mountinfo: stat on a stuck mount would hang; mount_vol records ours
# in FUSE_CONN) (root; fusectl). A daemon deadlocked inside the kernel survives SIGKILL, and so
# do its callers, until its connection ends.
abort_fuse_conn() {
	local c=/sys/fs/fuse/connections
	fusectl_mounted || return 0
	[ -w "$c/${1#*:}/abort" ] && echo 1 >"$c/${1#*:}/abort" 2>/dev/null
	return 0
}

cleanup() {
	local rc=$? p m i
	trap - EXIT INT TERM
	set +e
	# a mount still there now belongs to a failed or interrupted test: end
	# its connection first, so nothing below can wait on it for ever
	if [ -n "$WORK" ]; then
		while read -r _ _ dev _ m _; do
			m=$(printf '%b' "$m")
			case $m in "$WORK"/*) abort_fuse_conn "$dev" ;; esac
		done </proc/self/mountinfo
	fi
	# and that of our daemon if it still runs, even when its mount was
	# detached already (while it runs, the connection is still its own)
	if [ -n "$DAEMON_PID" ] && pid_alive "$DAEMON_PID"; then
		abort_fuse_conn "$FUSE_CONN"
	fi
	# `timeout` leads its own process group: kill the group, so the command
	# it runs dies too (a process stuck in a FUSE request dies on SIGKILL)
	for p in "${BG_PIDS[@]}"; do
		if pid_alive "$p"; then
			kill -9 -- "-$p" 2>/dev/null || kill -9 "$p" 2>/dev/null
			{ wait "$p"; } 2>/dev/null
		fi
	done
	if [ -n "$WORK" ]; then
		# every mount below $WORK (MNT, and any extra one a test made)
		while read -r _ m _; do
			m=$(printf '%b' "$m")
			case $m in
			"$WORK"/*) fusermount3 -u -z "$m" 2>/dev/null || umount -l "$m" 2>/dev/null ;;
			esac
		done </proc/self/mounts
	fi
	if [ -n "$DAEMON_PID" ] && pid_alive "$DAEMON_PID"; then
		for ((i = 0; i < 30; i++)); do
			pid_alive "$DAEMON_PID" || break
			sleep 0.1
		done
		if pid_alive "$DAEMON_PID"; then
			kill -9 "$DAEMON_PID" 2>/dev/null
		fi
		{ wait "$DAEMON_PID"; } 2>/dev/null
	fi
	for p in "${EXTRA_DAEMONS[@]}"; do
		pid_alive "$p" && kill -9 "$p" 2>/dev/null
	done
	for p in "${CLEANUP_HOOKS[@]}"; do
		eval "$p" 2>/dev/null
	done
	if [ -n "$WORK" ] && [ -d "$WORK" ]; then
		chmod -R u+rwX "$WORK" 2>/dev/null
		rm -rf --one-file-system "$WORK" 2>/dev/null || rm -rf "$WORK"
	fi
	exit $rc
}
EXTRA_DAEMONS=()
# shell commands cleanup runs last (e.g. restoring a kernel parameter)
CLEANUP_HOOKS=()

# daemons_using PATH: pids of processes whose command line mentions PATH
# (our own unique temp path: finds a daemon we started that daemonised),
# except this shell and the daemon mount_vol started
daemons_using() {
	local d c
	for d in /proc/[0-9]*; do
		c=$(tr '\0' ' ' 2>/dev/null <"$d/cmdline") || continue
		case $c in
		*"$1"*)
			case ${d#/proc/} in
			"$$" | "$BASHPID" | "$DAEMON_PID") ;;
			*) echo "${d#/proc/}" ;;
			esac
			;;
		esac
	done
}
