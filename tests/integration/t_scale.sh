#!/bin/bash
# t_scale: tools/scale (docs/scale.md) still runs end to end, at a tiny N:
# it makes, fills, opens, fscks and measures a volume of chunks and one of
# files, measures statfs on a fragmented allocator (checking the kept usable
# count against a walk of the map), prints every column of the table and
# removes what it made. No timing is asserted: only that each measurement
# is there, and that the metadata grew with the volume.
. "$(dirname "$0")/lib.sh"

[ $PLAIN = 1 ] && skip_test "measures libcsdfs itself (plain mode)"
require_tools awk grep
SCALE=${CSDFS_SCALE:-$(dirname "$CSDFS_BIN")/csdfs-scale}
[ -x "$SCALE" ] || die "csdfs-scale not found at $SCALE"
setup

out=$WORK/table
CSDFS_SCALE_QUICK=1 bounded 240 "$REPO_ROOT/tools/scale" --build "$(dirname "$SCALE")" \
	--dir "$WORK/scale" --chunks "2000 2e4" --files 2000 --statfs 1G >"$out" 2>"$WORK/err"
check_eq "tools/scale exits 0" 0 $?
log=$WORK/scale/scale.log

for row in "chunks 2000" "chunks 20000" "files 2000" "statfs 1GiB"; do
	check "table has row '$row'" grep -q "^$row " "$out"
done
ops="getattr lookup read16k write16k_sync statfs readdir10k setattr_mode truncate read16k_all_referenced"
for op in $ops; do
	check_eq "$op measured on all three volumes" 3 \
		"$(grep -c -E "mode=(chunks|files) .* op=$op .*median_us=[0-9.]+ p99_us=[0-9.]+" "$log")"
done
check_eq "statfs measured on the 1 GiB allocator" 1 "$(grep -c 'mode=statfs .* op=statfs ' "$log")"
check_eq "the old walk timed for comparison" 1 "$(grep -c 'op=usable_scan_walk ' "$log")"
check_eq "fsck clean on every volume" 3 "$(grep -c 'fsck_rc=0' "$log")"
check_eq "open timed on every volume" 3 "$(grep -c 'open_s=[0-9.]*' "$log")"
lmdb() { grep "mode=chunks n=$1 populate_s" "$log" | sed 's/.*lmdb_bytes=\([0-9]*\).*/\1/'; }
small=$(lmdb 2000) big=$(lmdb 20000)
check "LMDB grows with the chunks ($small -> $big bytes)" [ "${big:-0}" -gt "${small:-0}" ]
check_eq "volumes removed after the run" "" "$(find "$WORK/scale" -mindepth 1 -maxdepth 1 -type d)"

# Counter-checks: bad input is refused with one line naming it.
"$SCALE" chunks 0 "$WORK/x" >/dev/null 2>"$WORK/bad"
check_eq "a zero count is refused (exit 2)" 2 $?
check_grep_i "the refusal names the count" "bad count '0'" "$WORK/bad"
mkdir -p "$WORK/notvol"
"$SCALE" chunks 1000 "$WORK/notvol" >/dev/null 2>"$WORK/bad"
check_eq "a directory that is not a volume is refused (exit 1)" 1 $?
check_grep_i "the refusal names it" "not a csdfs volume" "$WORK/bad"
finish
