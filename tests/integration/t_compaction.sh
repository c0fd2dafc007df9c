#!/bin/bash
# t_compaction: compaction through a real mount (issue 20, points 1-3).
# - 2:1 data written in 4 KiB O_DIRECT pieces, on a mount with background
#   compaction off (-o compact_dead=0): after a remount it takes more than
#   0.6 physical / logical (the counter-check: there is something to win),
#   user.csdfs.dead_bytes and user.csdfs.compact are above 0;
# - csdfs-recompress --compact on the file: du after a remount <= 0.55 of
#   the logical size, the bytes unchanged, compact_bytes_written and
#   compact_chunks grew, user.csdfs.compact reads 0, dead_bytes shrank by
#   about what du did, and csdfs-stat -f shows the dead bytes, the bytes
#   compacted and the compaction write amplification;
# - the background pass: the same workload on a mount at compact_dead=1
#   compacts it without being asked (within 30 s; with compact_dead=0 the
#   first mount moved nothing);
# - -o compact_dead=101 and =-1 are refused in one line; fsck is clean.
. "$(dirname "$0")/lib.sh"

[ $PLAIN = 1 ] && skip_test "compaction (plain mode)"
require_csdfs
require_tools getfattr dd stat cmp python3 awk
RECOMPRESS=${CSDFS_RECOMPRESS:-$(dirname "$CSDFS_BIN")/csdfs-recompress}
STAT=${CSDFS_STAT:-$(dirname "$CSDFS_BIN")/csdfs-stat}
[ -x "$RECOMPRESS" ] || die "csdfs-recompress not found at $RECOMPRESS"
[ -x "$STAT" ] || die "csdfs-stat not found at $STAT"
setup
mkfs_vol --size 256M
mount_vol -o compact_dead=0 || finish

xv() { getfattr --only-values -n "user.csdfs.$2" -- "$1" 2>/dev/null; }
du_b() { echo $(($(stat -c %b "$1") * 512)); }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }

# 8 MiB of 2:1 data: each 4 KiB half random, half zeros
LEN=$((8 << 20))
python3 - "$WORK/half" $((LEN >> 12)) <<'EOF'
import os, sys
with open(sys.argv[1], "wb") as f:
    for _ in range(int(sys.argv[2])):
        f.write(os.urandom(2048) + bytes(2048))
EOF

# ---------- compaction asked for ----------
bounded 120 dd if="$WORK/half" of="$MNT/seq4k" bs=4k oflag=direct status=none ||
	fail "dd of 4 KiB O_DIRECT pieces"
remount -o compact_dead=0 || finish
before=$(du_b "$MNT/seq4k")
dead0=$(xv "$MNT" dead_bytes)
moved0=$(xv "$MNT" compact_bytes_written)
chunks0=$(xv "$MNT" compact_chunks)
left0=$(xv "$MNT/seq4k" compact)
log "4 KiB pieces: du $before ($(ratio "$before" $LEN)), dead $dead0, compact left $left0"
check "counter-check: 4 KiB O_DIRECT pieces take > 0.6 physical/logical ($(ratio "$before" $LEN))" \
	fle 0.6 "$(ratio "$before" $LEN)"
check "dead_bytes > 0 before compaction ($dead0)" test "${dead0:-0}" -gt 0
check_eq "compact_dead=0: nothing compacted in the background" 0 "$chunks0"
check "user.csdfs.compact > 0 before compaction ($left0)" test "${left0:-0}" -gt 0

bounded 120 "$RECOMPRESS" --compact "$MNT/seq4k" >"$WORK/compact.out" 2>&1
check_eq "csdfs-recompress --compact exits 0 ($(tail -n 1 "$WORK/compact.out"))" 0 $?
check_eq "user.csdfs.compact reads 0 after the pass" 0 "$(xv "$MNT/seq4k" compact)"
bounded 60 "$STAT" -f "$MNT" >"$WORK/stat.out" 2>&1 || fail "csdfs-stat -f"
for line in "Dead bytes" "Bytes compacted" "Chunks compacted" "Compaction write amp."; do
	check_grep_i "csdfs-stat -f shows '$line'" "$line" "$WORK/stat.out"
done
remount -o compact_dead=0 || finish
after=$(du_b "$MNT/seq4k")
dead1=$(xv "$MNT" dead_bytes)
moved=$(( $(xv "$MNT" compact_bytes_written) - moved0 ))
chunks=$(( $(xv "$MNT" compact_chunks) - chunks0 ))
log "after compaction: du $after ($(ratio "$after" $LEN)), dead $dead1, moved $moved bytes in $chunks chunks ($(ratio "$moved" $LEN)x the file)"
check "after compaction <= 0.55 physical/logical ($(ratio "$after" $LEN))" fle "$(ratio "$after" $LEN)" 0.55
check "compaction moved chunks ($chunks) and bytes ($moved)" test "$chunks" -gt 0 -a "$moved" -gt 0
check "compaction wrote <= 0.5x the workload's bytes ($(ratio "$moved" $LEN)x)" fle "$(ratio "$moved" $LEN)" 0.5
# dead bytes shrank by what du did (one file on the volume; 16 KiB slack)
check "dead_bytes shrank by about the blocks freed ($((dead0 - dead1)) vs $((before - after)))" \
	test $(( (dead0 - dead1) - (before - after) )) -le 16384 -a \
	     $(( (before - after) - (dead0 - dead1) )) -le 16384
check_files_equal "the file's bytes after compaction" "$WORK/half" "$MNT/seq4k"
umount_vol || finish
fsck_clean "after compaction asked for"

# ---------- background compaction ----------
mount_vol -o compact_dead=1 || finish
rm -f "$MNT/seq4k"
# read before the writes: the background passes start while dd still runs
c0=$(xv "$MNT" compact_chunks)
bounded 120 dd if="$WORK/half" of="$MNT/bg" bs=4k oflag=direct status=none ||
	fail "dd of 4 KiB O_DIRECT pieces (background)"
for ((i = 0; i < 300; i++)); do
	[ "$(xv "$MNT" compact_chunks)" -gt "$c0" ] && [ "$(xv "$MNT" dead_bytes)" -lt $((LEN / 10)) ] && break
	sleep 0.1
done
log "background: compact_chunks $c0 -> $(xv "$MNT" compact_chunks), dead $(xv "$MNT" dead_bytes) after $((i / 10)) s"
check "the background pass compacted the 4 KiB pieces without being asked" \
	test "$(xv "$MNT" compact_chunks)" -gt "$c0"
check "after it, dead bytes under a tenth of the file ($(xv "$MNT" dead_bytes))" \
	test "$(xv "$MNT" dead_bytes)" -lt $((LEN / 10))
check_files_equal "the file's bytes after background compaction" "$WORK/half" "$MNT/bg"
umount_vol || finish
fsck_clean "after background compaction"

# ---------- bad values ----------
for bad in 101 -1 abc; do
	bounded 30 "$CSDFS_BIN" -f -o compact_dead=$bad "$VOL" "$MNT" >"$WORK/bad.out" 2>&1
	rc=$?
	check "-o compact_dead=$bad refused (exit $rc, $(head -n 1 "$WORK/bad.out"))" \
		test $rc -ne 0 -a $rc -lt 124 -a "$(wc -l <"$WORK/bad.out")" = 1
	check_grep_i "-o compact_dead=$bad: the message names the option" "compact_dead" "$WORK/bad.out"
	mountpoint -q "$MNT" && fail "-o compact_dead=$bad: mounted anyway"
done

finish
