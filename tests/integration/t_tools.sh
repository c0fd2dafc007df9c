#!/bin/bash
# t_tools: the offline tools' small frictions (issue 21.6).
# - csdfs-fsck and csdfs-mkfs --force on a volume whose lock is held (a
#   daemon still closing after fusermount3 -u) wait for it, bounded (10 s),
#   saying so once, then go on, or fail with the usual message; a mounted
#   volume is refused at once; fsck right after fusermount3 -u succeeds.
# - csdfs-recompress rewrites its progress line with \r only on a terminal.
# - csdfs-fsck --verify-data lists the first 20 bad chunks, then how many
#   more, and always the total.
. "$(dirname "$0")/lib.sh"

[ $PLAIN = 1 ] && skip_test "every check here is about csdfs itself (plain mode)"
require_csdfs
require_tools flock timeout dd head grep script setfattr
RECOMPRESS=${CSDFS_RECOMPRESS:-$(dirname "$CSDFS_BIN")/csdfs-recompress}
[ -x "$RECOMPRESS" ] || die "csdfs-recompress not found at $RECOMPRESS"
setup
mkfs_vol --size 256M

WAITING="waiting for the daemon of '$VOL' to finish closing"

# hold_lock SECONDS: hold the volume's lock (flock(2) on the container, as
# the daemon does) in the background for SECONDS; waits until it is held
hold_lock() {
	rm -f "$WORK/held"
	# one process (the subshell execs sleep) holds it, so killing it frees it
	(exec 7<"$VOL/container" && flock -x 7 && : >"$WORK/held" && exec sleep "$1") &
	LOCK_PID=$!
	BG_PIDS+=("$LOCK_PID")
	for ((i = 0; i < 50; i++)); do
		[ -e "$WORK/held" ] && return 0
		sleep 0.1
	done
	die "cannot take the volume's lock"
}

# timed LABEL EXPECTED_RC CMD...: run CMD (bounded), check its exit status;
# sets ELAPSED (seconds)
timed() {
	local label=$1 want=$2 t0 rc
	shift 2
	t0=$(date +%s.%N)
	timeout -k 2 40 "$@" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	ELAPSED=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
	check_eq "$label: exit $want (after $ELAPSED s; $(head -c 300 "$WORK/err" | tr '\n' '|'))" "$want" $rc
}

# --- fsck and mkfs wait for a closing daemon ---
hold_lock 2
timed "fsck while the lock is held for 2 s" 0 "$CSDFS_FSCK" "$VOL"
check_eq "fsck said once that it waits" 1 "$(grep -cF "csdfs-fsck: $WAITING" "$WORK/err")"
fle 1.5 "$ELAPSED" && fle "$ELAPSED" 6 && pass "fsck waited for the lock ($ELAPSED s)" ||
	fail "fsck waited $ELAPSED s for a lock held 2 s"
wait "$LOCK_PID" 2>/dev/null

hold_lock 30
timed "fsck while the lock is held for good" 8 "$CSDFS_FSCK" "$VOL"
fle 9.5 "$ELAPSED" && fle "$ELAPSED" 15 && pass "fsck gave up after its bound ($ELAPSED s)" ||
	fail "fsck gave up after $ELAPSED s (bound: 10 s)"
check_grep_i "fsck then fails with the in-use message" 'already mounted or in use' "$WORK/err"
check_eq "fsck said once that it waits" 1 "$(grep -cF "csdfs-fsck: $WAITING" "$WORK/err")"
timed "mkfs --force while the lock is held for good" 1 "$CSDFS_MKFS" --force --size 256M "$VOL"
check_grep_i "mkfs --force then fails with the in-use message" 'mounted or in use' "$WORK/err"
check_eq "mkfs said once that it waits" 1 "$(grep -cF "csdfs-mkfs: $WAITING" "$WORK/err")"
kill "$LOCK_PID" 2>/dev/null
wait "$LOCK_PID" 2>/dev/null
fsck_clean "after the refused mkfs --force"

hold_lock 2
timed "mkfs --force while the lock is held for 2 s" 0 "$CSDFS_MKFS" --force --size 256M "$VOL"
check_eq "mkfs said once that it waits" 1 "$(grep -cF "csdfs-mkfs: $WAITING" "$WORK/err")"
wait "$LOCK_PID" 2>/dev/null
timed "mkfs without --force on the volume" 1 "$CSDFS_MKFS" --size 256M "$VOL"
check_grep_i "mkfs without --force: the usual refusal" 'already holds a volume' "$WORK/err"

# a mounted volume is not waited for
mount_vol || finish
timed "fsck on the mounted volume" 8 "$CSDFS_FSCK" "$VOL"
fle "$ELAPSED" 3 && pass "fsck on a mounted volume fails at once ($ELAPSED s)" ||
	fail "fsck on a mounted volume took $ELAPSED s"
check_eq "fsck on a mounted volume does not wait" 0 "$(grep -c waiting "$WORK/err")"

# the real thing: fsck right after fusermount3 -u
check "write 64 MiB" bounded 120 dd if=/dev/urandom of="$MNT/big" bs=1M count=64 status=none
check "fusermount3 -u" fusermount3 -u "$MNT"
timed "fsck right after fusermount3 -u" 0 "$CSDFS_FSCK" "$VOL"
log "    (fsck $(grep -q waiting "$WORK/err" && echo waited || echo 'did not wait'); $ELAPSED s)"
wait_daemon_exit 30 && DAEMON_PID= || fail "the daemon did not exit"
mount_vol || finish

# --- recompress: \r only on a terminal ---
check "write a file of 512 zstd chunks" bounded 60 sh -c \
	"yes 'csdfs progress line test' | head -c 8M >'$MNT/r1' && sync '$MNT/r1'"
cp "$MNT/r1" "$MNT/r2"
sync
check "set codec lz4 on r1 and r2" sh -c \
	"setfattr -n user.csdfs.codec -v lz4 '$MNT/r1' && setfattr -n user.csdfs.codec -v lz4 '$MNT/r2'"
bounded 60 "$RECOMPRESS" "$MNT/r1" >"$WORK/rc.out" 2>&1
check_eq "recompress to a file: exit 0" 0 $?
check_eq "recompress to a file: no carriage return" 0 "$(tr -cd '\r' <"$WORK/rc.out" | wc -c)"
check_eq "recompress to a file: one line" 1 "$(grep -c '' "$WORK/rc.out")"
check_grep_i "recompress to a file: the final line" '^/.*r1: 512 chunks rewritten, policy matched$' "$WORK/rc.out"
# A terminal needs a pseudo-terminal (a chroot without /dev/pts has none).
if ! script -qec true /dev/null >/dev/null 2>&1; then
	skip_check "recompress on a terminal: no pseudo-terminal here (is /dev/pts mounted?)"
else
	bounded 60 script -qec "'$RECOMPRESS' '$MNT/r2'" /dev/null >"$WORK/rc.tty" 2>&1
	check_eq "recompress on a terminal: exit 0" 0 $?
	# (a terminal turns \n into \r\n: look for the progress lines themselves)
	n=$(tr '\r' '\n' <"$WORK/rc.tty" | grep -c 'r2: [0-9]* of 512 chunks rewritten (')
	if [ "$n" -ge 2 ]; then
		pass "recompress on a terminal: $n progress lines, each rewritten with \\r"
	else
		fail "recompress on a terminal: $n progress lines: $(od -c "$WORK/rc.tty" | head -n 4)"
	fi
	check_grep_i "recompress on a terminal: the final line" 'r2: 512 chunks rewritten' "$WORK/rc.tty"
fi

# --- fsck --verify-data caps its per-chunk lines ---
check "write 2 MiB of random data (128 raw chunks)" \
	bounded 60 dd if=/dev/urandom of="$MNT/rand" bs=1M count=2 conv=fsync status=none
umount_vol
fsck_clean "before the damage"
# every byte of the data area after the first 1 MiB of it becomes random:
# r1, r2 and rand all lie there
check "overwrite the container's data blocks" dd if=/dev/urandom of="$VOL/container" \
	bs=1M seek=1 count=255 conv=notrunc status=none
bounded 120 "$CSDFS_FSCK" --verify-data "$VOL" >"$WORK/fsckv.out" 2>&1
check_eq "fsck --verify-data on the damaged volume: exit 4" 4 $?
n=$(grep -c 'does not verify' "$WORK/fsckv.out")
check_eq "fsck --verify-data lists 20 bad chunks" 20 "$n"
more=$(sed -n 's/.*\.\.\. and \([0-9]*\) more bad chunks (\([0-9]*\) in all).*/\1 \2/p' "$WORK/fsckv.out")
if [ -n "$more" ] && [ "${more#* }" -gt 100 ] && [ $((${more% *} + 20)) = "${more#* }" ]; then
	pass "fsck --verify-data then counts the rest: '... and ${more% *} more bad chunks (${more#* } in all)'"
else
	fail "fsck --verify-data: no count of the rest: $(grep -v 'does not verify' "$WORK/fsckv.out" | head -n 3 | tr '\n' '|')"
fi
log "    fsck --verify-data: $(grep -c '' "$WORK/fsckv.out") lines"

# a single bad chunk: listed, and counted
mkfs_vol --force --size 256M
mount_vol || finish
check "write 16 KiB" bounded 30 dd if=/dev/urandom of="$MNT/one" bs=16K count=1 conv=fsync status=none
umount_vol
check "overwrite the first data block" dd if=/dev/urandom of="$VOL/container" \
	bs=4096 seek=16 count=4 conv=notrunc status=none
bounded 120 "$CSDFS_FSCK" --verify-data "$VOL" >"$WORK/fsckv.out" 2>&1
check_eq "fsck --verify-data, one bad chunk: exit 4" 4 $?
check_eq "fsck --verify-data, one bad chunk: listed" 1 "$(grep -c 'does not verify' "$WORK/fsckv.out")"
check_grep_i "fsck --verify-data, one bad chunk: counted" 'data: 1 bad chunk in all' "$WORK/fsckv.out"
# the FUSE boundary check meson runs: a FUSE include outside daemon/ is
# found; tests/daemon/ may have one; a mounted demo volume (demo/mnt, whose
# samples hold libfuse's headers) and build trees are not read
B=$WORK/boundary
mkdir -p "$B/src" "$B/tests/daemon" "$B/demo/mnt/sample" "$B/build"
echo '#include <fuse3/fuse.h>' >"$B/demo/mnt/sample/fuse.h"
echo '#include <fuse.h>' >"$B/build/x.c"
echo '#include <linux/fuse.h>' >"$B/tests/daemon/t.c"
echo '#include <stdio.h>' >"$B/src/ok.c"
check "boundary check: clean tree passes" sh "$REPO_ROOT/tools/check-fuse-boundary.sh" "$B"
echo '#include <fuse_lowlevel.h>' >"$B/src/leak.c"
out=$(sh "$REPO_ROOT/tools/check-fuse-boundary.sh" "$B"); rc=$?
check_eq "boundary check: a FUSE include in src/ fails" 1 "$rc"
check_eq "boundary check: names only that file" "src/leak.c" "$(echo $out)"
finish
