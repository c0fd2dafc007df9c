#!/bin/bash
# t_enospc: ENOSPC reaches write(2) of buffered writers (issue 18, point 2;
# SPEC G5), with the kernel's writeback cache (the default) and with
# -o nowriteback_cache. Three cases per cache mode, each on a fresh volume
# that first gets three 8 MiB "earlier" files (md5 recorded) and a ballast
# file of 128 MiB, or the mount's dirty budget plus 64 MiB if that is more
# (cached writers stop while less than the budget is left, so freeing only
# the budget would let the first writer to resume take the space back from
# the others: the 1 GiB logical volume's budget is 128 MiB):
#   dd:       512 MiB volume; `dd if=/dev/urandom of=FILE bs=1M` with no
#             count must end with "dd: error writing ...: No space left on
#             device" within 60 s (not from close, not still running).
#   physical: 512 MiB volume; four buffered writers (enospc_writer, files
#             opened on the nearly empty volume before any is written) of
#             incompressible data: each gets ENOSPC from write(2), fstat/
#             stat/lseek(SEEK_END)/read past EOF keep working, another
#             write(2) still fails; truncating the ballast to 0 gives space
#             back and each writer's next write(2) succeeds.
#   logical:  the same on a --multiplier 2 volume (1 GiB logical) with
#             compressible data (about 2.3:1; exactly 2:1 would fill the
#             container first, by zstd's frame overhead), so the LOGICAL
#             capacity runs out: at least 16 MiB of the container stay
#             free. Space comes back by unlinking the ballast.
# Then in every case: the earlier files read back intact; st_size of each
# failed file exceeds what the volume stores of it (the file read back
# after a remount: dropped pages read as all-zero 4 KiB blocks, which the
# written data never has) by at most the mount's dirty budget (bdi
# max_bytes; csdfs(8));
# unlinking them gives the space back (df); a new 8 MiB file is written and
# reads back; fsck is clean.
. "$(dirname "$0")/lib.sh"

[ $PLAIN = 1 ] && skip_test "every check here is about csdfs volumes (plain mode)"
require_csdfs
require_tools dd df md5sum getfattr truncate timeout
setup

MiB=1048576
WRITER=$(helper enospc_writer)

xv() { getfattr --only-values -n "$2" -- "$1" 2>/dev/null; }
avail_bytes() { df -B1 --output=avail "$MNT" | tail -n 1 | tr -d ' '; }

# the dirty budget the kernel applies to this mount (0: unknown)
dirty_budget() {
	local f=/sys/class/bdi/$FUSE_CONN/max_bytes
	[ -r "$f" ] && cat "$f" || echo 0
}

# earlier DATA: three 8 MiB files and the ballast of DATA (random|half)
earlier() {
	local i ballast=$((128 * MiB))
	[ "$DIRTY" -gt 0 ] && [ $((DIRTY + 64 * MiB)) -gt $ballast ] && ballast=$((DIRTY + 64 * MiB))
	mkdir -p "$REF"
	for i in 1 2 3; do
		"$WRITER" gen "$1" $((8 * MiB)) >"$REF/early$i"
		cp "$REF/early$i" "$MNT/early$i" || fail "$LABEL: copy early$i"
	done
	(cd "$REF" && md5sum early1 early2 early3) >"$WORK/early.md5"
	"$WRITER" gen "$1" $ballast >"$MNT/ballast" || fail "$LABEL: ballast"
}

# after_case FILE...: integrity, st_size bound, space back, new write, fsck
after_case() {
	local f size stored over bound a0 a1 worst=0
	if (cd "$MNT" && md5sum -c --quiet "$WORK/early.md5") >"$WORK/md5.out" 2>&1; then
		pass "$LABEL: the earlier files read back intact"
	else
		fail "$LABEL: earlier files differ: $(head -c 300 "$WORK/md5.out")"
	fi
	bound=$DIRTY
	[ "$bound" -gt 0 ] || bound=$((64 * MiB))
	# st_size as the writers saw it, then what the volume holds: after a
	# remount (a failed write-back leaves its pages in the page cache),
	# the file read back, where dropped pages read as all-zero 4 KiB
	# blocks (the written data has none) or lie past the stored size
	for f in "$@"; do
		echo "$f $(stat -c %s "$f")"
	done >"$WORK/sizes"
	remount "${MOUNT_OPTS[@]}" || return
	while read -r f size; do
		stored=$(($(stat -c %s "$f") - $("$WRITER" zeros "$f")))
		over=$((size - stored))
		[ $over -gt $worst ] && worst=$over
	done <"$WORK/sizes"
	if [ $worst -le "$bound" ]; then
		pass "$LABEL: st_size exceeds the stored bytes by at most $worst <= dirty budget $bound"
	else
		fail "$LABEL: st_size exceeds the stored bytes by $worst > dirty budget $bound"
	fi
	a0=$(avail_bytes)
	rm -f "$@"
	for ((i = 0; i < 50; i++)); do
		a1=$(avail_bytes)
		[ "$a1" -ge $((a0 + 64 * MiB)) ] && break
		sleep 0.1
	done
	if [ "$a1" -ge $((a0 + 64 * MiB)) ]; then
		pass "$LABEL: unlinking the failed files gives space back (df avail $a0 -> $a1)"
	else
		fail "$LABEL: df avail $a0 -> $a1 after unlinking the failed files"
	fi
	head -c $((8 * MiB)) /dev/urandom >"$REF/new"
	if bounded 60 dd if="$REF/new" of="$MNT/new" bs=1M status=none 2>"$WORK/dd.err" &&
		cmp -s "$REF/new" "$MNT/new"; then
		pass "$LABEL: a new 8 MiB file is written and reads back"
	else
		fail "$LABEL: new write: $(head -c 300 "$WORK/dd.err")"
	fi
	umount_vol || fail "$LABEL: unmount"
	fsck_clean "$LABEL"
}

case_dd() {
	local t0 rc
	mkfs_vol --size 512M --multiplier 1
	MOUNT_OPTS=("$@")
	mount_vol "$@" || return
	DIRTY=$(dirty_budget)
	earlier random
	t0=$SECONDS
	bounded 60 dd if=/dev/urandom of="$MNT/fill" bs=1M 2>"$WORK/dd.err"
	rc=$?
	if [ $rc = 124 ]; then
		fail "$LABEL: dd still running after 60 s ($(stat -c %s "$MNT/fill") bytes)"
	elif grep -q "^dd: error writing .*No space left on device" "$WORK/dd.err"; then
		pass "$LABEL: dd's write(2) failed with ENOSPC after $((SECONDS - t0)) s"
	else
		fail "$LABEL: dd exit $rc without a write ENOSPC: $(tr '\n' '|' <"$WORK/dd.err" | head -c 300)"
	fi
	rm -f "$MNT/ballast"
	after_case "$MNT/fill"
}

# case_writers DATA FREE MKFS-ARGS... -- MOUNT-ARGS...
case_writers() {
	local data=$1 free=$2 mk=() rc phys
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do mk+=("$1"); shift; done
	shift
	rm -f "$WORK"/go "$WORK"/go.ready.*
	mkfs_vol --size 512M "${mk[@]}"
	MOUNT_OPTS=("$@")
	mount_vol "$@" || return
	DIRTY=$(dirty_budget)
	earlier "$data"
	"$WRITER" "$data" "$WORK/go" "$MNT"/w1 "$MNT"/w2 "$MNT"/w3 "$MNT"/w4 >"$WORK/writer.out" 2>&1 &
	WPID=$!
	BG_PIDS+=("$WPID")
	# wait (90 s) until every writer has failed and probed
	local i
	for ((i = 0; i < 900; i++)); do
		[ "$(ls "$WORK"/go.ready.* 2>/dev/null | wc -l)" -ge 4 ] && break
		kill -0 "$WPID" 2>/dev/null || break
		sleep 0.1
	done
	phys=$(xv "$MNT" user.csdfs.free_physical)
	if [ "$data" = half ]; then
		if [ "${phys:-0}" -ge $((16 * MiB)) ]; then
			pass "$LABEL: the logical capacity ran out first ($phys bytes of the container free)"
		else
			fail "$LABEL: only '${phys}' bytes of the container free: not the logical limit"
		fi
	fi
	if [ "$free" = truncate ]; then
		truncate -s 0 "$MNT/ballast"
	else
		rm -f "$MNT/ballast"
	fi
	touch "$WORK/go"
	for ((i = 0; i < 900; i++)); do
		kill -0 "$WPID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$WPID" 2>/dev/null; then
		fail "$LABEL: enospc_writer still running 90 s after space came back"
		kill -9 "$WPID"
	fi
	wait "$WPID"
	rc=$?
	sed "s/^/    $LABEL| /" "$WORK/writer.out"
	if [ $rc = 0 ] && [ "$(grep -c 'first_error=write:ENOSPC.*resumed=ok' "$WORK/writer.out")" = 4 ]; then
		pass "$LABEL: all four writers got ENOSPC from write(2), probes worked, and they resumed after the $free"
	else
		fail "$LABEL: enospc_writer exit $rc"
	fi
	after_case "$MNT"/w?
}

for MODE in writeback nowriteback_cache; do
	OPTS=()
	[ $MODE = nowriteback_cache ] && OPTS=(-o nowriteback_cache)
	LABEL="$MODE dd"
	log "[$((SECONDS - T_START)) s] $LABEL"
	VOL=$WORK/vol-$MODE-dd
	case_dd "${OPTS[@]}"
	LABEL="$MODE physical"
	log "[$((SECONDS - T_START)) s] $LABEL"
	VOL=$WORK/vol-$MODE-phys
	case_writers random truncate --multiplier 1 -- "${OPTS[@]}"
	LABEL="$MODE logical"
	log "[$((SECONDS - T_START)) s] $LABEL"
	VOL=$WORK/vol-$MODE-logical
	case_writers half unlink --multiplier 2 -- "${OPTS[@]}"
done
finish
