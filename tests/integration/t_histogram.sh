#!/bin/bash
# t_histogram: per-page truth for InnoDB-sized chunks (issue 19.5). Writes
# 16 KiB chunks of known compressibility with O_DIRECT 16 KiB writes (one
# write = one chunk): all zero (a hole), all random (stored raw), and N KiB
# of random bytes after 16 - N KiB of zeros, which lz4 packs into a little
# more than N KiB; then checks the exact bucket counts of
# user.csdfs.histogram on each file and of csdfs-stat --histogram (text, -r,
# --json) on the directory that holds them, after a remount too.
# Env: CSDFS_STAT (the binary).
. "$(dirname "$0")/lib.sh"

CSDFS_STAT=$(abspath "${CSDFS_STAT:-$REPO_ROOT/build/csdfs-stat}")

[ $PLAIN = 1 ] && skip_test "the histogram is csdfs's (plain mode)"
require_csdfs
require_tools getfattr setfattr dd head cmp
[ -x "$CSDFS_STAT" ] || die "binary '$CSDFS_STAT' not found (build first, or set CSDFS_STAT)"
setup
# lz4: its output for N KiB of random bytes after zeros is known to stay
# in the N KiB bucket for N = 2, 6, 10, 14 (zstd's too, but lz4 is pinned)
mkfs_vol --size 512M --codec lz4 --chunk 16K
mount_vol || finish

# chunk SPEC...: 16 KiB pieces to $REF/src: z = zeros, r = random, N = N KiB
# of random bytes after 16 - N KiB of zeros
chunks() {
	local c
	: >"$REF/src"
	for c in "$@"; do
		case $c in
		z) head -c 16384 /dev/zero ;;
		r) head -c 16384 /dev/urandom ;;
		*) head -c $(((16 - c) * 1024)) /dev/zero; head -c $((c * 1024)) /dev/urandom ;;
		esac >>"$REF/src"
	done
}

# put NAME: $REF/src onto the mount with O_DIRECT 16 KiB writes, kept in $REF
put() {
	bounded 60 dd if="$REF/src" of="$MNT/db/$1" bs=16K oflag=direct conv=notrunc status=none
	check "dd O_DIRECT 16K writes of '$1'" test $? = 0
	cp "$REF/src" "$REF/$1"
}

mkdir -p "$MNT/db"
# a: hole, raw, 2K, 6K, 10K, 14K, 2K, then a hole at the end (truncate)
chunks z r 2 6 10 14 2
put a
truncate -s $((8 * 16384)) "$MNT/db/a" "$REF/a"
# b: 6K, raw, hole
chunks 6 r z
put b
sync

want_a="chunk=16384 4K=2 8K=1 12K=1 16K=1 raw=1 zero=2"
want_b="chunk=16384 4K=0 8K=1 12K=0 16K=0 raw=1 zero=1"
check_eq "user.csdfs.histogram of a" "$want_a" \
	"$(getfattr --absolute-names --only-values -n user.csdfs.histogram "$MNT/db/a" 2>&1)"
check_eq "user.csdfs.histogram of b" "$want_b" \
	"$(getfattr --absolute-names --only-values -n user.csdfs.histogram "$MNT/db/b" 2>&1)"
check_files_equal "a reads back as written" "$REF/a" "$MNT/db/a"
check_files_equal "b reads back as written" "$REF/b" "$MNT/db/b"
getfattr -d -m - "$MNT/db/a" >"$WORK/listed" 2>&1
check "user.csdfs.histogram is not listed" bash -c "! grep -q histogram '$WORK/listed'"
getfattr -n user.csdfs.histogram "$MNT/db" >"$WORK/dir.out" 2>&1
check_grep_i "a directory has no user.csdfs.histogram (csdfs-stat sums its files)" \
	"no such attribute" "$WORK/dir.out"
setfattr -n user.csdfs.histogram -v 1 "$MNT/db/a" 2>"$WORK/set.err"
check "user.csdfs.histogram is read-only" test $? != 0

# csdfs-stat: one file, the directory (the sum over its files), -r, --json
STAT=$CSDFS_STAT
row() { # OUTPUT NAME: the cells after NAME
	awk -v n="$2" '$1 == n { $1 = ""; sub(/^ /, ""); print }' "$1"
}
bounded 60 "$STAT" --histogram "$MNT/db/a" "$MNT/db" >"$WORK/h.txt" 2>&1
check_eq "csdfs-stat --histogram: exit 0" 0 $?
check_grep_i "csdfs-stat --histogram: bucket heads" \
	"NAME +CHUNK +<=4K +<=8K +<=12K +<=16K +RAW +ZERO +CHUNKS" "$WORK/h.txt"
check_eq "csdfs-stat --histogram FILE" "16.0K 2 1 1 1 1 2 8" "$(row "$WORK/h.txt" "$MNT/db/a")"
check_eq "csdfs-stat --histogram DIR sums its files" "16.0K 2 2 1 1 2 3 11" \
	"$(row "$WORK/h.txt" "$MNT/db")"
bounded 60 "$STAT" --histogram -r "$MNT/db" >"$WORK/r.txt" 2>&1
check_eq "csdfs-stat --histogram -r: b's row" "16.0K 0 1 0 0 1 1 3" "$(row "$WORK/r.txt" "$MNT/db/b")"
check_eq "csdfs-stat --histogram -r: TOTAL" "(2 files) 16.0K 2 2 1 1 2 3 11" "$(row "$WORK/r.txt" TOTAL)"
if command -v python3 >/dev/null 2>&1; then
	bounded 60 "$STAT" --histogram --json -r "$MNT/db" >"$WORK/h.json" 2>&1
	check_eq "--json: total.histogram" \
		"{'chunk_size': 16384, '4K': 2, '8K': 2, '12K': 1, '16K': 1, 'raw': 2, 'zero': 3}" \
		"$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["total"]["histogram"])' "$WORK/h.json" 2>&1)"
	check_eq "--json: the roll-up's histogram" \
		"{'chunk_size': 16384, '4K': 2, '8K': 2, '12K': 1, '16K': 1, 'raw': 2, 'zero': 3}" \
		"$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["rollups"][0]["histogram"])' "$WORK/h.json" 2>&1)"
	bounded 60 "$STAT" --json "$MNT/db/a" >"$WORK/n.json" 2>&1
	check_eq "--json without --histogram: histogram is null" None \
		"$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["entries"][0]["histogram"])' "$WORK/n.json" 2>&1)"
else
	skip_check "--json histogram keys (no python3)"
fi
"$STAT" --histogram -f "$MNT" >"$WORK/u.out" 2>"$WORK/u.err"
rc=$?
check_eq "--histogram -f: usage error, exit 2" 2 $rc
check_eq "--histogram -f: one line" 1 "$(wc -l <"$WORK/u.err")"

# the chunk map is what is durable: the same after a remount
remount || finish
check_eq "user.csdfs.histogram of a after remount" "$want_a" \
	"$(getfattr --absolute-names --only-values -n user.csdfs.histogram "$MNT/db/a" 2>&1)"

umount_vol
fsck_clean "after the histogram writes"
finish
