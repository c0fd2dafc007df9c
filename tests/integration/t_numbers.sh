#!/bin/bash
# t_numbers: numbers a reader can reconcile (issue 21, points 3 and 4).
# - df: Size is the logical capacity; Used = the logical capacity taken by
#   stored chunks, a whole chunk each (= du --apparent-size of files that
#   fill whole chunks, = the root's user.csdfs.used_logical, = extents x
#   chunk size); Avail = min(Size - Used, physical free x the ratio achieved
#   so far), checked numerically on a mix of 2:1 and random data, before and
#   after a deletion and across a remount;
# - csdfs-stat: two small files written together share a 4 KiB block, one is
#   charged 0 bytes: csdfs-stat marks it (physical "0*", ratio "shared", a
#   note under the table, "shares_blocks" in JSON) and never prints "inf";
# - csdfs-stat -f --prometheus: every line is a HELP, TYPE or sample line,
#   every family has both, values are numbers, labels name the mount; and
#   promtool check metrics accepts it when promtool is installed.
. "$(dirname "$0")/lib.sh"

[ $PLAIN = 1 ] && skip_test "csdfs's accounting (plain mode)"
require_csdfs
require_tools getfattr df du stat awk find head perl
STAT=${CSDFS_STAT:-$(dirname "$CSDFS_BIN")/csdfs-stat}
[ -x "$STAT" ] || die "csdfs-stat not found at $STAT"
setup
mkfs_vol --size 256M --multiplier 2
mount_vol || finish

xv() { getfattr --only-values -n "user.csdfs.$2" -- "$1" 2>/dev/null; }
CHUNK=16384

# ---------- df ----------
# check_df LABEL: the identities above, on the numbers of this moment
check_df() {
	local label=$1 size used avail apparent ul cap ext fphys uphys want
	sync
	read -r size used avail < <(df -B1 --output=size,used,avail "$MNT" | tail -n 1)
	apparent=$(find "$MNT" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
	ul=$(xv "$MNT" used_logical)
	cap=$(xv "$MNT" capacity_logical)
	ext=$(xv "$MNT" extents)
	fphys=$(xv "$MNT" free_physical)
	uphys=$(xv "$MNT" used_physical)
	log "$label: df size $size used $used avail $avail; files $apparent bytes;" \
		"used_logical $ul, extents $ext, used_physical $uphys, free_physical $fphys"
	check_eq "$label: df Size = capacity_logical" "$cap" "$size"
	check_eq "$label: df Used = user.csdfs.used_logical" "$ul" "$used"
	check_eq "$label: df Used = du --apparent-size of the files (whole chunks)" "$apparent" "$used"
	check_eq "$label: df Used = extents x chunk size" "$((ext * CHUNK))" "$used"
	# Avail: the logical free space, capped by physical free x ratio
	# (ratio = used_logical / used_physical, at least 1). The daemon also
	# keeps a reserve (0.5% of the container) out of it: allow 1%.
	want=$(awk -v s="$size" -v u="$used" -v f="$fphys" -v ul="$ul" -v up="$uphys" 'BEGIN {
		r = up > 0 ? ul / up : 1; if (r < 1) r = 1
		e = f * r; l = s - u; printf "%.0f", (e < l ? e : l) }')
	if awk -v a="$avail" -v w="$want" -v s="$size" -v u="$used" \
		'BEGIN { exit !(a <= s - u && a <= w && a >= w - s / 100) }'; then
		pass "$label: df Avail $avail = min(Size - Used, free physical x ratio) = $want (within the reserve)"
	else
		fail "$label: df Avail $avail, expected about $want (<= Size - Used = $((size - used)))"
	fi
}

mkdir "$MNT/mix"
# Compressible data: each 4 KiB block 2 KiB of random letters, 2 KiB of
# zeros (no all-zero chunk, so every chunk is stored).
perl -e 'srand(21); for (1 .. 2048) { print join("", map { chr(65 + int(rand(26))) } 1 .. 2048), "\0" x 2048 }' \
	>"$WORK/half8"
cp "$WORK/half8" "$MNT/mix/half"
head -c $((6 << 20)) /dev/urandom >"$MNT/mix/random"
head -c $((4 << 20)) "$WORK/half8" >"$MNT/mix/half4"
check_df "2:1 and random data"
phys=$(xv "$MNT" used_physical)
logi=$(xv "$MNT" used_logical)
if [ "$phys" -lt "$logi" ]; then
	pass "the mix compresses (used_physical $phys < used_logical $logi)"
else
	fail "the mix does not compress: used_physical $phys, used_logical $logi"
fi
used_du=$(du -sB1 "$MNT" | awk '{ print $1 }')
log "for comparison: du $used_du (physical), du --apparent-size $(du -sB1 --apparent-size "$MNT" | awk '{ print $1 }')"
rm "$MNT/mix/random"
check_df "after deleting the random file"
remount || finish
check_df "after a remount"

# ---------- shared blocks ----------
mkdir "$MNT/small"
head -c 1500 /usr/share/common-licenses/GPL-3 >"$MNT/small/a"
head -c 1500 /usr/share/common-licenses/GPL-2 >"$MNT/small/b"
sync
pa=$(xv "$MNT/small/a" physical) pb=$(xv "$MNT/small/b" physical)
sa=$(xv "$MNT/small/a" stored) sb=$(xv "$MNT/small/b" stored)
log "small files: a physical $pa stored $sa, b physical $pb stored $sb"
if [ "$pa" = 0 ] || [ "$pb" = 0 ]; then
	pass "two small files written together: one is charged 0 blocks ($pa, $pb)"
else
	fail "neither small file is charged 0 blocks ($pa, $pb): nothing to show"
fi
"$STAT" "$MNT/small/a" "$MNT/small/b" >"$WORK/small.txt" 2>&1
check_eq "csdfs-stat on the small files exits 0" 0 "$?"
sed 's/^/    | /' "$WORK/small.txt"
if grep -qi 'inf' "$WORK/small.txt"; then
	fail "csdfs-stat prints inf"
else
	pass "csdfs-stat prints no inf"
fi
zero=$([ "$pa" = 0 ] && echo a || echo b)
check_grep_i "the file charged 0 is marked" "/small/$zero +[0-9.]+K? +0\* +[0-9]+ +shared +shared" "$WORK/small.txt"
check_grep_i "the mark is explained under the table" \
	"^\* physical below stored: part of its bytes share 4 KiB blocks" "$WORK/small.txt"
"$STAT" --json "$MNT/small/$zero" >"$WORK/small.json" 2>&1
check_grep_i "JSON says the file shares blocks" '"shares_blocks": true' "$WORK/small.json"
check_grep_i "JSON ratio is null, not inf" '"ratio": null' "$WORK/small.json"
"$STAT" --json "$MNT/mix/half" >"$WORK/half.json" 2>&1
check_grep_i "a large file does not share" '"shares_blocks": false' "$WORK/half.json"

# ---------- Prometheus ----------
"$STAT" -f --prometheus "$MNT" >"$WORK/metrics.prom" 2>"$WORK/metrics.err"
check_eq "csdfs-stat -f --prometheus exits 0" 0 "$?"
check_eq "nothing on stderr" "" "$(head -c 300 "$WORK/metrics.err")"
bad=$(awk -v mnt="$MNT" '
	/^# HELP csdfs_[a-z_]+ [^ ].*$/ { split($0, w, " "); help[w[3]] = 1; next }
	/^# TYPE csdfs_[a-z_]+ (gauge|counter)$/ {
		split($0, w, " "); if (!(w[3] in help)) { print "TYPE before HELP: " $0; exit }
		type[w[3]] = w[4]; next }
	/^csdfs_[a-z_]+\{mount="[^"]*"\} -?[0-9]+(\.[0-9]+)?$/ {
		name = $0; sub(/\{.*/, "", name)
		if (!(name in type)) { print "sample without TYPE: " $0; exit }
		if (type[name] == "counter" && name !~ /_total$/) { print "counter not _total: " $0; exit }
		if (index($0, "{mount=\"" mnt "\"}") == 0) { print "wrong label: " $0; exit }
		n++; next }
	{ print "not HELP, TYPE or a sample: " $0; exit }
	END { if (!bad && n < 15) print "only " n " samples" }' "$WORK/metrics.prom")
if [ -z "$bad" ]; then
	pass "every line is HELP, TYPE or a numeric csdfs_ sample with the mount label ($(grep -vc '^#' "$WORK/metrics.prom") samples)"
else
	fail "prometheus output: $bad"
fi
prom() { awk -v m="$1" 'index($0, m "{") == 1 { print $2 }' "$WORK/metrics.prom"; }
check_eq "csdfs_used_logical_bytes = df Used" \
	"$(df -B1 --output=used "$MNT" | tail -n 1 | tr -d ' ')" "$(prom csdfs_used_logical_bytes)"
check_eq "csdfs_capacity_logical_bytes = capacity_logical" "$(xv "$MNT" capacity_logical)" \
	"$(prom csdfs_capacity_logical_bytes)"
check_eq "csdfs_app_written_bytes_total is a counter" "# TYPE csdfs_app_written_bytes_total counter" \
	"$(grep '^# TYPE csdfs_app_written_bytes_total' "$WORK/metrics.prom")"
check_eq "csdfs_checksum_errors_total = 0" 0 "$(prom csdfs_checksum_errors_total)"
if command -v promtool >/dev/null 2>&1; then
	if promtool check metrics <"$WORK/metrics.prom" >"$WORK/promtool.out" 2>&1; then
		pass "promtool check metrics accepts it"
	else
		fail "promtool check metrics: $(head -c 400 "$WORK/promtool.out")"
	fi
else
	skip_check "promtool not installed (Debian package prometheus)"
fi
"$STAT" --prometheus "$MNT" >/dev/null 2>"$WORK/prom-usage.err"
check_eq "--prometheus without -f is a usage error" 2 "$?"

umount_vol
fsck_clean "after the accounting checks"
finish
