#!/bin/bash
# t_compress: physical footprint of known-compressibility data (SPEC §3, §5).
# fio writes 256 MiB sequentially in 128 KiB requests of 2:1 data
# (buffer_compress_percentage=50, 4 KiB compress chunks): physical (du -B1 and
# user.csdfs.physical) must be <= 0.60 x logical; incompressible data must stay
# <= 1.02 x logical + 1 MiB. Also: fallocate then write 2:1 data (fallocate
# must not switch compression off), incompressible data overwritten by 2:1
# data (the per-chunk flag is not sticky), and the virtual xattrs on a file,
# a directory and the mount root, which listxattr must never show.
. "$(dirname "$0")/lib.sh"

require_csdfs
require_tools fio getfattr setfattr du
setup
mkfs_vol --size 1G
mount_vol || finish

# xv PATH NAME: value of a virtual xattr (empty if absent)
xv() { getfattr --only-values -n "$2" -- "$1" 2>/dev/null; }

# fio_write FILE SIZE PERCENT [extra fio args]
fio_write() {
	local f=$1 size=$2 pct=$3
	shift 3
	bounded 300 fio --name=w --filename="$f" --rw=write --bs=128k --size="$size" \
		--ioengine=psync --buffer_compress_percentage="$pct" --buffer_compress_chunk=4k \
		--refill_buffers --end_fsync=1 "$@" >"$WORK/fio.out" 2>&1
}

# measure FILE: sets LOGICAL, PHYS_DU, PHYS_X and RATIO_DU / RATIO_X (physical/logical)
measure() {
	LOGICAL=$(stat -c %s "$1")
	PHYS_DU=$(du -B1 "$1" | cut -f1)
	PHYS_X=$(xv "$1" user.csdfs.physical)
	RATIO_DU=$(awk -v p="$PHYS_DU" -v l="$LOGICAL" 'BEGIN { printf "%.3f", l ? p / l : 0 }')
	RATIO_X=$(awk -v p="${PHYS_X:-0}" -v l="$LOGICAL" 'BEGIN { printf "%.3f", l ? p / l : 0 }')
}

# footprint LABEL FILE MAXFACTOR SLACK_BYTES: physical <= MAXFACTOR x logical + SLACK
footprint() {
	local label=$1 f=$2 max=$3 slack=$4 lim i
	measure "$f"
	lim=$(awk -v l="$LOGICAL" -v m="$max" -v s="$slack" 'BEGIN { printf "%d", l * m + s }')
	log "$label: logical $LOGICAL, du $PHYS_DU (physical/logical $RATIO_DU), user.csdfs.physical ${PHYS_X:-n/a} ($RATIO_X), user.csdfs.stored $(xv "$f" user.csdfs.stored), ratio xattr $(xv "$f" user.csdfs.ratio)"
	if [ $PLAIN = 1 ]; then
		skip_check "$label: physical <= $max x logical (plain mode, measured $RATIO_DU)"
		return
	fi
	if [ "$PHYS_DU" -le "$lim" ]; then
		pass "$label: du physical/logical $RATIO_DU <= $max"
	else
		fail "$label: du physical/logical $RATIO_DU > $max (du $PHYS_DU, logical $LOGICAL)"
	fi
	if [ -n "$PHYS_X" ] && [ "$PHYS_X" -le "$lim" ]; then
		pass "$label: user.csdfs.physical/logical $RATIO_X <= $max"
	else
		fail "$label: user.csdfs.physical/logical $RATIO_X > $max (value '${PHYS_X}')"
	fi
}

D=$MNT/c
mkdir "$D"

log "[$((SECONDS - T_START)) s] 256 MiB of 2:1 data"
check "fio: 256 MiB sequential 128k writes, 2:1 data" fio_write "$D/half" 256m 50
footprint "2:1 data" "$D/half" 0.60 0

log "[$((SECONDS - T_START)) s] 256 MiB of incompressible data"
check "fio: 256 MiB sequential 128k writes, incompressible" fio_write "$D/rand" 256m 0
footprint "incompressible data" "$D/rand" 1.02 1048576

log "[$((SECONDS - T_START)) s] fallocate, then 2:1 data into the allocated range"
check "fallocate -l 64M" fallocate -l 64M "$D/falloc"
check "fio: overwrite the fallocated 64 MiB with 2:1 data" \
	fio_write "$D/falloc" 64m 50 --fallocate=none
footprint "fallocated then 2:1 data" "$D/falloc" 0.60 0

log "[$((SECONDS - T_START)) s] incompressible, then overwritten with 2:1 data"
check "fio: 32 MiB incompressible" fio_write "$D/flip" 32m 0
check "fio: the same 32 MiB overwritten with 2:1 data" fio_write "$D/flip" 32m 50 --fallocate=none
footprint "incompressible overwritten by 2:1" "$D/flip" 0.60 0

log "[$((SECONDS - T_START)) s] virtual xattrs"
NUM='^[0-9]+$'
if [ $PLAIN = 1 ]; then
	skip_check "virtual xattrs (plain mode)"
else
	f=$D/half
	measure "$f"
	v=$(xv "$f" user.csdfs.logical)
	check_eq "user.csdfs.logical of a file = st_size" "$LOGICAL" "$v"
	blocks=$(stat -c %b "$f")
	check_eq "user.csdfs.physical of a file = st_blocks*512" "$((blocks * 512))" "$PHYS_X"
	v=$(xv "$f" user.csdfs.stored)
	if [[ $v =~ $NUM ]] && [ "$v" -le "$PHYS_X" ] && [ "$v" -gt 0 ]; then
		pass "user.csdfs.stored ($v) > 0 and <= physical"
	else
		fail "user.csdfs.stored '$v' not a number in (0, physical=$PHYS_X]"
	fi
	v=$(xv "$f" user.csdfs.ratio)
	want=$(awk -v l="$LOGICAL" -v p="$PHYS_X" 'BEGIN { printf "%.2f", p ? l / p : 0 }')
	if [[ $v =~ ^[0-9]+\.[0-9]{2}$ ]] && fle "$(awk -v a="$v" -v b="$want" 'BEGIN { d = a - b; print d < 0 ? -d : d }')" 0.011; then
		pass "user.csdfs.ratio '$v' = logical/physical ($want)"
	else
		fail "user.csdfs.ratio '$v', expected logical/physical = $want"
	fi
	v=$(xv "$f" user.csdfs.codec)
	sum=$(awk -v s="$v" 'BEGIN { n = split(s, a, " "); t = 0; for (i = 1; i <= n; i++) { split(a[i], kv, "="); t += kv[2] } print t }')
	if [[ $v == *zstd* ]] && [[ $v =~ ^([a-z0-9:+-]+=[0-9]+)( [a-z0-9:+-]+=[0-9]+)*$ ]] && [ "$sum" -gt 0 ] && [ "$sum" -le "$LOGICAL" ]; then
		pass "user.csdfs.codec of 2:1 data: '$v'"
	else
		fail "user.csdfs.codec of 2:1 data: '$v' (want 'codec=bytes ...' with zstd, sum <= $LOGICAL)"
	fi
	v=$(xv "$D/rand" user.csdfs.codec)
	if [[ $v =~ ^([a-z0-9:+-]+=[0-9]+)( [a-z0-9:+-]+=[0-9]+)*$ ]]; then
		pass "user.csdfs.codec of incompressible data: '$v'"
	else
		fail "user.csdfs.codec of incompressible data: '$v'"
	fi
	v=$(xv "$f" user.csdfs.atomic_write_unit)
	if [[ $v =~ $NUM ]] && [ "$v" -ge 16384 ] && [ $((v & (v - 1))) = 0 ]; then
		pass "user.csdfs.atomic_write_unit '$v' is a power of two >= 16 KiB"
	else
		fail "user.csdfs.atomic_write_unit '$v'"
	fi
	# directory roll-up and volume totals on the root
	mkdir "$D/sub"
	head -c 100000 /dev/urandom >"$D/sub/x"
	sync "$D/sub/x"
	v=$(xv "$D/sub" user.csdfs.logical)
	check_eq "user.csdfs.logical of a directory = its subtree (one 100000-byte file)" 100000 "$v"
	total=$(du -B1 --apparent-size -s "$D" | cut -f1)
	for name in logical physical ratio codec; do
		v=$(xv "$MNT" user.csdfs.$name)
		if [ -n "$v" ]; then
			pass "user.csdfs.$name on the mount root: '$v'"
		else
			fail "user.csdfs.$name on the mount root is missing"
		fi
	done
	v=$(xv "$MNT" user.csdfs.logical)
	if [[ $v =~ $NUM ]] && [ "$v" -ge $((256 * 1048576 * 2)) ]; then
		pass "root user.csdfs.logical ($v) covers the 512+ MiB written"
	else
		fail "root user.csdfs.logical '$v' < the 512+ MiB written (du --apparent-size says $total)"
	fi
	v=$(xv "$MNT" user.csdfs.physical)
	sumphys=$(du -B1 -s "$D" | cut -f1)
	if [[ $v =~ $NUM ]] && [ "$v" -ge $((sumphys * 9 / 10)) ]; then
		pass "root user.csdfs.physical ($v) >= files' physical ($sumphys)"
	else
		fail "root user.csdfs.physical '$v' < files' physical ($sumphys)"
	fi
	# never listed, read-only
	setfattr -n user.mine -v 1 "$f"
	for target in "$f" "$MNT" "$D/sub"; do
		out=$(getfattr --absolute-names -d -- "$target" 2>&1 | grep -v '^# file:')
		all=$(getfattr --absolute-names -d -m - -- "$target" 2>&1 | grep -v '^# file:')
		if [[ $out == *csdfs* || $all == *csdfs* ]]; then
			fail "listxattr of $target shows user.csdfs.*: $(echo "$all" | tr '\n' ' ')"
		else
			pass "listxattr of ${target#$WORK/} hides user.csdfs.*"
		fi
	done
	if getfattr --absolute-names -d -- "$f" 2>/dev/null | grep -q '^user.mine='; then
		pass "listxattr still shows ordinary user xattrs"
	else
		fail "listxattr does not show the user.mine set on the file"
	fi
	if setfattr -n user.csdfs.logical -v 5 "$f" 2>/dev/null; then
		fail "user.csdfs.logical is writable"
	else
		pass "user.csdfs.logical is read-only"
	fi
	check_eq "file still reads its size after the refused xattr write" "$LOGICAL" "$(xv "$f" user.csdfs.logical)"
fi

if [ $PLAIN = 0 ]; then
	umount_vol
	fsck_clean "after compression tests"
fi
finish
