#!/bin/bash
# t_space: honest space numbers and a full volume (SPEC G5, §5; issue
# "Honest numbers" points 1-3).
# - Capacity: 128 MiB volumes with --multiplier 1 and 2: df shows the logical
#   capacity (within 1%), f_bavail <= f_bfree (df: avail <= size - used) and
#   avail <= capacity - logical bytes used (root user.csdfs.logical).
# - Multiplier 1, incompressible data (8 MiB files, 1 MiB dd requests, each
#   file made first in the plain reference dir) until ENOSPC: at least 95% of
#   the starting f_bavail is writable, a write of the remaining f_bavail bytes
#   succeeds, every byte written reads back identical. On the full volume rm,
#   truncate -s half and fallocate -p succeed and give space back (df avail
#   grows, a write of that size then succeeds); touch, mkdir and setfattr
#   succeed (the reserve); user.csdfs.warnings says "low-space" when full and
#   not after freeing; unmount, fsck clean, remount, data and df unchanged.
# - Multiplier 2, 2:1 data (fio buffer_compress_percentage=50): ENOSPC
#   (logical or physical, whichever first), every byte written intact, the
#   multiplier is usable (> 1.5 x physical capacity written), fsck clean.
# - Host punching: deleting a 64 MiB file gives >= 50% of its physical size
#   back to the host (du of VOL/container) after the group commit; with
#   -o nopunch it does not.
# - Tools and xattrs: cp -a, tar --xattrs and rsync -X (if installed) out of
#   and into csdfs succeed silently, copy user.mine and never user.csdfs.*.
# - Small appends (6000-byte dd requests) of incompressible data until
#   ENOSPC on a 64 MiB lz4 volume: the bytes read back, free_usable is under
#   a tenth of the data area and the low-space warning is on although
#   free_physical may count more free blocks (in runs too short for a
#   chunk); deleting the file clears the warning; fsck clean.
. "$(dirname "$0")/lib.sh"

CSDFS_STAT=$(abspath "${CSDFS_STAT:-$REPO_ROOT/build/csdfs-stat}")

[ $PLAIN = 1 ] && skip_test "every check here is about csdfs volumes (plain mode)"
require_csdfs
require_tools fio getfattr setfattr fallocate truncate df du stat cmp dd tar md5sum
setup

MiB=1048576
FILE_MB=8               # size of each fill file
PLAIN_DIR=$WORK/plain   # a plain directory on the host file system
mkdir -p "$PLAIN_DIR"

elapsed() { printf '[%d s]' $((SECONDS - T_START)); }

# xv PATH NAME: value of an xattr (empty if absent)
xv() { getfattr --only-values -n "$2" -- "$1" 2>/dev/null; }

# sf: statfs(2) of the mount: SF_BLOCKS SF_BFREE SF_BAVAIL SF_FRSIZE
sf() {
	read -r SF_BLOCKS SF_BFREE SF_BAVAIL SF_FRSIZE < <(stat -f -c '%b %f %a %S' "$MNT")
}
avail_bytes() {
	sf
	echo $((SF_BAVAIL * SF_FRSIZE))
}

# df_line: DF_SIZE DF_USED DF_AVAIL in bytes, as df(1) prints them
df_line() {
	read -r DF_SIZE DF_USED DF_AVAIL < <(df -B1 --output=size,used,avail "$MNT" | tail -n 1)
}

# check_capacity LABEL EXPECTED_BYTES: df size = logical capacity within 1%
check_capacity() {
	local label=$1 want=$2
	df_line
	sf
	if [ $((SF_BLOCKS * SF_FRSIZE)) = "$DF_SIZE" ] &&
		awk -v s="$DF_SIZE" -v w="$want" 'BEGIN { d = s - w; if (d < 0) d = -d; exit !(d <= w / 100) }'; then
		pass "$label: df size $DF_SIZE = f_blocks*f_frsize ≈ logical capacity $want (1%)"
	else
		fail "$label: df size $DF_SIZE (f_blocks $SF_BLOCKS x f_frsize $SF_FRSIZE), expected logical capacity $want within 1%"
	fi
	local x
	x=$(xv "$MNT" user.csdfs.capacity_logical)
	if [[ $x =~ ^[0-9]+$ ]] && awk -v s="$x" -v w="$want" 'BEGIN { d = s - w; if (d < 0) d = -d; exit !(d <= w / 100) }'; then
		pass "$label: root user.csdfs.capacity_logical $x ≈ $want"
	else
		fail "$label: root user.csdfs.capacity_logical '$x', expected ≈ $want"
	fi
}

# check_statfs_honest LABEL: f_bavail never exceeds what is not used. The
# logical bytes in use are the root's user.csdfs.logical minus
# user.csdfs.zero (holes and all-zero chunks map no capacity, as a trimmed
# LBA on a drive).
check_statfs_honest() {
	local label=$1 lused lzero
	sf
	df_line
	lused=$(xv "$MNT" user.csdfs.logical)
	lzero=$(xv "$MNT" user.csdfs.zero)
	if [ "$SF_BAVAIL" -le "$SF_BFREE" ] && [ "$SF_BFREE" -le "$SF_BLOCKS" ] &&
		[ "$DF_AVAIL" -le $((DF_SIZE - DF_USED)) ]; then
		pass "$label: f_bavail $SF_BAVAIL <= f_bfree $SF_BFREE <= f_blocks $SF_BLOCKS (df avail <= size - used)"
	else
		fail "$label: statfs not honest: f_blocks $SF_BLOCKS f_bfree $SF_BFREE f_bavail $SF_BAVAIL; df size $DF_SIZE used $DF_USED avail $DF_AVAIL"
	fi
	if [[ $lused =~ ^[0-9]+$ ]] && [[ $lzero =~ ^[0-9]+$ ]] &&
		[ $((SF_BAVAIL * SF_FRSIZE)) -le $((SF_BLOCKS * SF_FRSIZE - (lused - lzero))) ]; then
		pass "$label: f_bavail bytes $((SF_BAVAIL * SF_FRSIZE)) <= capacity - mapped logical bytes ($lused - $lzero zero)"
	else
		fail "$label: f_bavail bytes $((SF_BAVAIL * SF_FRSIZE)) > capacity $((SF_BLOCKS * SF_FRSIZE)) - mapped logical bytes (root logical '$lused' - zero '$lzero')"
	fi
}

# wait_avail_grows OLD MIN_DELTA: poll df (10 s) until avail >= OLD + MIN_DELTA;
# prints the last avail seen
wait_avail_grows() {
	local old=$1 delta=$2 i a
	for ((i = 0; i < 100; i++)); do
		a=$(avail_bytes)
		[ "$a" -ge $((old + delta)) ] && break
		sleep 0.1
	done
	echo "$a"
}

# warnings_wait WANT(yes|no): poll the root warnings (5 s) until low-space
# is (yes) or is not (no) in them; prints the last value
warnings_wait() {
	local i w
	for ((i = 0; i < 50; i++)); do
		w=$(xv "$MNT" user.csdfs.warnings)
		case $1:$w in
		yes:*low-space*) break ;;
		no:*low-space*) ;;
		no:*) break ;;
		esac
		sleep 0.1
	done
	printf '%s\n' "$w"
}

# gen_random FILE INDEX: 8 MiB of incompressible data
gen_random() { head -c $((FILE_MB * MiB)) /dev/urandom >"$1"; }

# gen_half FILE INDEX: 8 MiB of 2:1 data (the seeds' fio profile), slice
# INDEX of a pool made by one fio run (fio starts slowly on a loaded machine)
HALF_POOL_MB=384
gen_half() {
	if ! [ -s "$WORK/halfpool" ]; then
		fio --name=gen --filename="$WORK/halfpool" --rw=write --bs=1m --size=${HALF_POOL_MB}m \
			--ioengine=psync --buffer_compress_percentage=50 --buffer_compress_chunk=4k \
			--refill_buffers >"$WORK/fio-gen.out" 2>&1 || return 1
	fi
	[ $((($2 + 1) * FILE_MB)) -le $HALF_POOL_MB ] || return 1
	dd if="$WORK/halfpool" of="$1" bs=1M skip=$(($2 * FILE_MB)) count=$FILE_MB status=none
}

# fill DIR PREFIX GEN MAX: for i < MAX, make $REF/PREFIXi with GEN and copy it
# to DIR/PREFIXi with dd bs=1M until a write fails. Sets FILL_FULL (files
# copied whole), FILL_BYTES (bytes in the copies), FILL_ENOSPC (1 when the
# stop was ENOSPC), FILL_LAST (the file being written then), FILL_COPIED
# (bytes dd said it wrote into it), FILL_ERR (an unexpected error).
# The reference of the last file is cut to what the volume holds.
fill() {
	local dir=$1 pfx=$2 gen=$3 max=$4 i rc got
	FILL_FULL=0 FILL_BYTES=0 FILL_ENOSPC=0 FILL_LAST='' FILL_COPIED='' FILL_ERR=''
	for ((i = 0; i < max; i++)); do
		if ! "$gen" "$REF/$pfx$i" "$i"; then
			FILL_ERR="cannot make the reference file $REF/$pfx$i"
			return 1
		fi
		bounded 120 dd if="$REF/$pfx$i" of="$dir/$pfx$i" bs=1M 2>"$WORK/dd.err"
		rc=$?
		got=$(stat -c %s "$dir/$pfx$i" 2>/dev/null || echo 0)
		FILL_BYTES=$((FILL_BYTES + got))
		if [ $rc = 0 ]; then
			FILL_FULL=$((FILL_FULL + 1))
			continue
		fi
		FILL_LAST=$pfx$i
		FILL_COPIED=$(sed -n 's/^\([0-9][0-9]*\) bytes.*copied.*/\1/p' "$WORK/dd.err" | tail -n 1)
		if grep -q 'No space left on device' "$WORK/dd.err"; then
			FILL_ENOSPC=1
		else
			FILL_ERR="dd into $dir/$pfx$i: exit $rc: $(tr '\n' '|' <"$WORK/dd.err" | head -c 300)"
		fi
		truncate -s "$got" "$REF/$pfx$i"
		return 0
	done
	FILL_ERR="no ENOSPC after $max files of $FILE_MB MiB"
}

# verify_tree LABEL DIR: every file in $REF has an identical copy in DIR and
# DIR holds nothing else
verify_tree() {
	local label=$1 dir=$2 f n=0 bad=0 first='' out
	for f in "$REF"/*; do
		[ -f "$f" ] || continue
		n=$((n + 1))
		if ! out=$(bounded 60 cmp -- "$f" "$dir/${f##*/}" 2>&1); then
			bad=$((bad + 1))
			[ -z "$first" ] && first=$out
		fi
	done
	if [ $bad = 0 ] && [ $n -gt 0 ]; then
		pass "$label: all $n files read back identical"
	else
		fail "$label: $bad of $n files differ from their reference: $first"
	fi
	out=$(diff <(cd "$REF" && ls -A) <(cd "$dir" && ls -A) 2>&1)
	if [ -z "$out" ]; then
		pass "$label: the directory holds exactly the expected names"
	else
		fail "$label: names differ from the reference: $(printf '%s' "$out" | tr '\n' '|' | head -c 300)"
	fi
}

# write_new LABEL NAME BYTES: a new random file of BYTES in $D must be
# written whole (reference kept in $REF)
write_new() {
	local label=$1 name=$2 bytes=$3
	head -c "$bytes" /dev/urandom >"$REF/$name"
	if bounded 60 dd if="$REF/$name" of="$D/$name" bs=1M 2>"$WORK/dd.err" &&
		[ "$(stat -c %s "$D/$name")" = "$bytes" ]; then
		pass "$label: a new $bytes-byte write succeeds"
	else
		fail "$label: a new $bytes-byte write failed: $(tr '\n' '|' <"$WORK/dd.err" | head -c 300)"
		# keep the reference equal to what the volume holds
		truncate -s "$(stat -c %s "$D/$name" 2>/dev/null || echo 0)" "$REF/$name"
	fi
}

# ====================================================================
# 1. multiplier 1: capacity, fill with incompressible data, a full volume
# ====================================================================
log "$(elapsed) multiplier 1: 128 MiB volume, incompressible data"
VOL=$WORK/vol1
mkfs_vol --size 128M --multiplier 1
mount_vol || finish
check_capacity "multiplier 1, empty" $((128 * MiB))
check_statfs_honest "multiplier 1, empty"

D=$MNT/d
mkdir "$D"
START_AVAIL=$(avail_bytes)
log "starting f_bavail*f_frsize: $START_AVAIL"
fill "$D" f gen_random 24
[ -n "$FILL_ERR" ] && fail "fill (incompressible): $FILL_ERR"
log "$(elapsed) wrote $FILL_BYTES bytes in $FILL_FULL whole files + $FILL_LAST (dd copied ${FILL_COPIED:-?} bytes into it)"
check_eq "fill (incompressible) ends with ENOSPC" 1 "$FILL_ENOSPC"
if [ "$FILL_BYTES" -ge $((START_AVAIL * 95 / 100)) ]; then
	pass "bytes written before ENOSPC ($FILL_BYTES) >= 95% of the starting f_bavail ($START_AVAIL)"
else
	fail "bytes written before ENOSPC ($FILL_BYTES) < 95% of the starting f_bavail ($START_AVAIL)"
fi
if [ -n "$FILL_LAST" ]; then
	check_eq "size of $FILL_LAST = the bytes dd reported written before ENOSPC" \
		"${FILL_COPIED:-?}" "$(stat -c %s "$D/$FILL_LAST")"
fi
verify_tree "after ENOSPC" "$D"
check_statfs_honest "multiplier 1, full"

# f_bavail must not promise what cannot be written
FULL_AVAIL=$(avail_bytes)
if [ "$FULL_AVAIL" -lt $((4 * MiB)) ]; then
	pass "df avail after ENOSPC is small ($FULL_AVAIL bytes)"
else
	fail "df avail after ENOSPC is $FULL_AVAIL bytes, yet a 1 MiB write failed"
fi
if [ "$FULL_AVAIL" -gt 0 ]; then
	write_new "f_bavail after ENOSPC ($FULL_AVAIL bytes)" promised "$FULL_AVAIL"
fi

w=$(warnings_wait yes)
case $w in
*low-space*) pass "root user.csdfs.warnings on the full volume: '$w'" ;;
*) fail "root user.csdfs.warnings on the full volume: '$w' (no low-space)" ;;
esac
if [ -x "$CSDFS_STAT" ]; then
	"$CSDFS_STAT" -f "$MNT" >"$WORK/stat-f.out" 2>&1
	check_grep_i "csdfs-stat -f shows the low-space warning" 'low-space' "$WORK/stat-f.out"
else
	skip_check "csdfs-stat -f (no binary $CSDFS_STAT)"
fi

# the reserve: metadata operations on the full volume
log "$(elapsed) operations on the full volume"
check "touch of a new empty file on the full volume" touch "$D/empty"
: >"$REF/empty"
check "setfattr user.mine on the full volume" setfattr -n user.mine -v full-volume "$D/empty"
check_eq "the xattr set on the full volume reads back" full-volume "$(xv "$D/empty" user.mine)"
check "mkdir on the full volume" mkdir "$D/newdir"
rmdir "$D/newdir" 2>/dev/null

# rm gives space back
a0=$(avail_bytes)
check "rm of an 8 MiB file on the full volume" rm -- "$D/f1"
rm -f "$REF/f1"
a1=$(wait_avail_grows "$a0" $((FILE_MB * MiB * 7 / 8)))
if [ "$a1" -ge $((a0 + FILE_MB * MiB * 7 / 8)) ]; then
	pass "rm: df avail grew by $((a1 - a0)) bytes"
else
	fail "rm: df avail grew by only $((a1 - a0)) bytes (from $a0 to $a1)"
fi
write_new "after rm" r1 $((FILE_MB * MiB))

# truncate to half gives space back
a0=$(avail_bytes)
check "truncate -s half of an 8 MiB file on the full volume" truncate -s $((FILE_MB * MiB / 2)) "$D/f2"
truncate -s $((FILE_MB * MiB / 2)) "$REF/f2"
a1=$(wait_avail_grows "$a0" $((FILE_MB * MiB * 7 / 16)))
if [ "$a1" -ge $((a0 + FILE_MB * MiB * 7 / 16)) ]; then
	pass "truncate: df avail grew by $((a1 - a0)) bytes"
else
	fail "truncate: df avail grew by only $((a1 - a0)) bytes (from $a0 to $a1)"
fi
# Up to 1 MiB of what a truncate frees may still sit in quarantine behind
# the allocation head (see csdfs(8), G5); the rest must be writable now.
write_new "after truncate" r2 $((FILE_MB * MiB / 2 - MiB))

# punching a hole gives space back
a0=$(avail_bytes)
check "fallocate -p (punch 4 MiB) on the full volume" fallocate -p -o $((2 * MiB)) -l $((4 * MiB)) "$D/f3"
dd if=/dev/zero of="$REF/f3" bs=1M seek=2 count=4 conv=notrunc status=none
a1=$(wait_avail_grows "$a0" $((4 * MiB * 7 / 8)))
if [ "$a1" -ge $((a0 + 4 * MiB * 7 / 8)) ]; then
	pass "punch hole: df avail grew by $((a1 - a0)) bytes"
else
	fail "punch hole: df avail grew by only $((a1 - a0)) bytes (from $a0 to $a1)"
fi
check_eq "punch hole: size unchanged" $((FILE_MB * MiB)) "$(stat -c %s "$D/f3")"
write_new "after punch hole" r3 $((4 * MiB))

w=$(warnings_wait yes)
case $w in
*low-space*) pass "user.csdfs.warnings while nearly full again: '$w'" ;;
*) fail "user.csdfs.warnings while nearly full again: '$w' (no low-space)" ;;
esac
verify_tree "full volume after rm, truncate, punch and rewrites" "$D"

# free a third of the volume: the warning goes away
a0=$(avail_bytes)
check "rm of 6 files" rm -- "$D/r1" "$D/r2" "$D/r3" "$D/f4" "$D/f5" "$D/f6"
rm -f "$REF/r1" "$REF/r2" "$REF/r3" "$REF/f4" "$REF/f5" "$REF/f6"
a1=$(wait_avail_grows "$a0" $((32 * MiB)))
log "df avail after freeing: $a1 (was $a0)"
w=$(warnings_wait no)
case $w in
*low-space*) fail "user.csdfs.warnings after freeing $((a1 - a0)) bytes: '$w' (still low-space)" ;;
*) pass "user.csdfs.warnings after freeing $((a1 - a0)) bytes: '$w' (no low-space)" ;;
esac
check_statfs_honest "multiplier 1, after freeing"

verify_tree "before unmount" "$D"
df_line
DF_BEFORE="$DF_USED $DF_AVAIL"
log "$(elapsed) unmount, fsck, remount"
umount_vol
fsck_clean "multiplier 1, after the full-volume operations"
mount_vol || finish
verify_tree "after remount" "$D"
check_eq "getfattr user.mine after remount" full-volume "$(xv "$D/empty" user.mine)"
df_line
# A live daemon holds part of a run at its allocation head and freed pieces
# in quarantine; a fresh mount has neither. Allow that much difference.
read -r u0 a0 <<<"$DF_BEFORE"
if [ $(( (DF_USED - u0) < 0 ? u0 - DF_USED : DF_USED - u0 )) -le $MiB ] &&
   [ $(( (DF_AVAIL - a0) < 0 ? a0 - DF_AVAIL : DF_AVAIL - a0 )) -le $MiB ]; then
	pass "df used and avail unchanged by the remount (within 1 MiB: $DF_BEFORE -> $DF_USED $DF_AVAIL)"
else
	fail "df used and avail changed by the remount: $DF_BEFORE -> $DF_USED $DF_AVAIL"
fi
umount_vol
rm -rf "$VOL" "${REF:?}"/*

# ====================================================================
# 2. multiplier 2: 2:1 data until ENOSPC
# ====================================================================
log "$(elapsed) multiplier 2: 128 MiB volume, 2:1 data"
VOL=$WORK/vol2
mkfs_vol --size 128M --multiplier 2
mount_vol || finish
check_capacity "multiplier 2, empty" $((256 * MiB))
check_statfs_honest "multiplier 2, empty"
PHYS_CAP=$(xv "$MNT" user.csdfs.capacity_physical)
D=$MNT/h
mkdir "$D"
fill "$D" g gen_half $((HALF_POOL_MB / FILE_MB))
[ -n "$FILL_ERR" ] && fail "fill (2:1): $FILL_ERR"
log "$(elapsed) wrote $FILL_BYTES bytes in $FILL_FULL whole files + $FILL_LAST (dd copied ${FILL_COPIED:-?} bytes into it);" \
	"root logical $(xv "$MNT" user.csdfs.logical), physical $(xv "$MNT" user.csdfs.physical)," \
	"free_physical $(xv "$MNT" user.csdfs.free_physical) of $PHYS_CAP"
check_eq "fill (2:1 data) ends with ENOSPC" 1 "$FILL_ENOSPC"
if [ -n "$FILL_LAST" ]; then
	check_eq "size of $FILL_LAST = the bytes dd reported written before ENOSPC" \
		"${FILL_COPIED:-?}" "$(stat -c %s "$D/$FILL_LAST")"
fi
if [[ $PHYS_CAP =~ ^[0-9]+$ ]] && [ "$FILL_BYTES" -ge $((PHYS_CAP * 3 / 2)) ]; then
	pass "2:1 data: $FILL_BYTES logical bytes fit (>= 1.5 x the physical capacity $PHYS_CAP)"
else
	fail "2:1 data: only $FILL_BYTES logical bytes fit (physical capacity '$PHYS_CAP', multiplier 2)"
fi
verify_tree "2:1 data after ENOSPC" "$D"
check_statfs_honest "multiplier 2, full"
FULL_AVAIL=$(avail_bytes)
if [ "$FULL_AVAIL" -lt $((4 * MiB)) ]; then
	pass "df avail after ENOSPC (2:1) is small ($FULL_AVAIL bytes)"
else
	fail "df avail after ENOSPC (2:1) is $FULL_AVAIL bytes, yet a 1 MiB write failed"
fi
umount_vol
fsck_clean "multiplier 2, after ENOSPC"
mount_vol || finish
verify_tree "2:1 data after remount" "$D"

# ====================================================================
# 3. freed space goes back to the host (and not with -o nopunch)
# ====================================================================
log "$(elapsed) host punching"
rm -rf "$D" "${REF:?}"/* "$WORK/halfpool"
D=$MNT/p
mkdir "$D"
head -c $((64 * MiB)) /dev/urandom >"$WORK/big"

# punch_test LABEL EXPECT(fall|keep)
punch_test() {
	local label=$1 expect=$2 a0 phys before after i
	if ! bounded 120 dd if="$WORK/big" of="$D/big" bs=1M conv=fsync status=none; then
		fail "$label: writing the 64 MiB file failed"
		return
	fi
	sleep 2.5	# group commit
	a0=$(avail_bytes)
	phys=$(du -B1 "$D/big" | cut -f1)
	before=$(du -B1 "$VOL/container" | cut -f1)
	rm -- "$D/big"
	for ((i = 0; i < 60; i++)); do
		[ "$expect" = fall ] || break
		sleep 0.1
		after=$(du -B1 "$VOL/container" | cut -f1)
		[ $((before - after)) -ge $((phys / 2)) ] && break
	done
	wait_avail_grows "$a0" $((32 * MiB)) >/dev/null
	sleep 2.5	# at least two group commits after the unlink
	after=$(du -B1 "$VOL/container" | cut -f1)
	log "$label: file physical $phys; du VOL/container $before -> $after"
	if [ "$expect" = fall ]; then
		if [ $((before - after)) -ge $((phys / 2)) ]; then
			pass "$label: du of the container fell by $((before - after)) >= 50% of the file's $phys"
		else
			fail "$label: du of the container fell by $((before - after)) bytes ($before -> $after), expected >= 50% of the deleted file's $phys"
		fi
	else
		if [ "$after" -ge "$before" ]; then
			pass "$label: du of the container did not fall ($before -> $after)"
		else
			fail "$label: du of the container fell ($before -> $after) despite -o nopunch"
		fi
	fi
}
punch_test "default (punch)" fall
umount_vol
mount_vol -o nopunch || finish
punch_test "-o nopunch" keep

# ====================================================================
# 4. copy tools and xattrs
# ====================================================================
log "$(elapsed) cp -a, tar --xattrs, rsync -X"
X=$MNT/xa
mkdir -p "$X/sub"
head -c 100000 /dev/urandom >"$X/file"
cat /usr/share/common-licenses/GPL-3 >"$X/sub/text" 2>/dev/null || seq 1 20000 >"$X/sub/text"
setfattr -n user.mine -v 1 "$X/file"
setfattr -n user.mine -v 2 "$X/sub"
sync "$X/file" "$X/sub/text"

# quiet LABEL CMD...: CMD exits 0 and prints nothing on stderr
quiet() {
	local label=$1 rc
	shift
	bounded 120 "$@" 2>"$WORK/tool.err" >/dev/null
	rc=$?
	if [ $rc = 0 ] && ! [ -s "$WORK/tool.err" ]; then
		pass "$label"
	else
		fail "$label: exit $rc, stderr: $(tr '\n' '|' <"$WORK/tool.err" | head -c 300)"
	fi
}

# check_copy LABEL DIR: DIR is a copy of $X: same data, user.mine on the
# file and the subdir, no user.csdfs.* anywhere (getfattr -d)
check_copy() {
	local label=$1 dir=$2 dump
	if cmp -s "$X/file" "$dir/file" && cmp -s "$X/sub/text" "$dir/sub/text"; then
		pass "$label: data copied"
	else
		fail "$label: data differs or is missing"
	fi
	dump=$(getfattr -R -d --absolute-names -- "$dir" 2>&1)
	if grep -q '^user.mine="1"' <<<"$(getfattr -d --absolute-names -- "$dir/file" 2>&1)" &&
		grep -q '^user.mine="2"' <<<"$(getfattr -d --absolute-names -- "$dir/sub" 2>&1)"; then
		pass "$label: user.mine copied (file and directory)"
	else
		fail "$label: user.mine missing: $(tr '\n' '|' <<<"$dump" | head -c 300)"
	fi
	if grep -q '^user\.csdfs' <<<"$dump"; then
		fail "$label: the copy has user.csdfs.* xattrs: $(grep '^user\.csdfs' <<<"$dump" | tr '\n' '|' | head -c 300)"
	else
		pass "$label: no user.csdfs.* in getfattr -d of the copy"
	fi
}

quiet "cp -a out of csdfs" cp -a "$X" "$PLAIN_DIR/cpa"
check_copy "cp -a out of csdfs" "$PLAIN_DIR/cpa"

quiet "tar --xattrs -cf of a csdfs tree" tar --xattrs -cf "$WORK/xa.tar" -C "$MNT" xa
if grep -aq 'xattr.user.csdfs' "$WORK/xa.tar"; then
	fail "tar --xattrs archive holds user.csdfs.* records"
else
	pass "tar --xattrs archive holds no user.csdfs.* records"
fi
mkdir -p "$PLAIN_DIR/tar"
quiet "tar --xattrs -xf into a plain dir" tar --xattrs -xf "$WORK/xa.tar" -C "$PLAIN_DIR/tar"
check_copy "tar --xattrs out of csdfs" "$PLAIN_DIR/tar/xa"

if command -v rsync >/dev/null 2>&1; then
	quiet "rsync -aX out of csdfs" rsync -aX "$X/" "$PLAIN_DIR/rsync/"
	check_copy "rsync -aX out of csdfs" "$PLAIN_DIR/rsync"
else
	skip_check "rsync -X (rsync not installed)"
fi

quiet "cp -a from a plain dir into csdfs" cp -a "$PLAIN_DIR/cpa" "$MNT/back"
check_copy "cp -a into csdfs" "$MNT/back"
mkdir -p "$MNT/tarin"
quiet "tar --xattrs -xf into csdfs" tar --xattrs -xf "$WORK/xa.tar" -C "$MNT/tarin"
check_copy "tar --xattrs into csdfs" "$MNT/tarin/xa"
if command -v rsync >/dev/null 2>&1; then
	quiet "rsync -aX from a plain dir into csdfs" rsync -aX "$PLAIN_DIR/cpa/" "$MNT/rsin/"
	check_copy "rsync -aX into csdfs" "$MNT/rsin"
fi

umount_vol
fsck_clean "multiplier 2, at the end"

# ====================================================================
# 5. small appends of incompressible data: free space in short runs
# ====================================================================
# Each 6000-byte append rewrites the file's last chunk out of place; the
# versions it frees leave runs of a block or two between stored chunks, too
# short for a whole uncompressed chunk. The volume fills with free space
# left: user.csdfs.free_usable (what df's Avail is made from) and the
# low-space warning must say so, not free_physical's count of free blocks.
log "$(elapsed) small appends of incompressible data until ENOSPC"
VOL=$WORK/vol5
mkfs_vol --size 64M --codec lz4
mount_vol || finish
u0=$(xv "$MNT" user.csdfs.free_usable)
w0=$(xv "$MNT" user.csdfs.warnings)
CAP5=$(xv "$MNT" user.csdfs.capacity_physical)
check "free_usable on the empty volume is most of it ($u0 of $CAP5)" \
	test "${u0:-0}" -ge $((CAP5 * 9 / 10))
# counter-check for the warning below: not there while the volume is empty
check "no low-space warning on the empty volume ('$w0')" test "${w0#*low-space}" = "$w0"
head -c $((80 * MiB)) /dev/urandom >"$WORK/appends"
bounded 120 dd if="$WORK/appends" of="$MNT/log" bs=6000 status=none 2>"$WORK/appends.err"
check_grep_i "6000-byte appends end with ENOSPC" 'No space left on device' "$WORK/appends.err"
n5=$(stat -c %s "$MNT/log")
check "the appended bytes read back equal ($n5 bytes)" cmp -n "$n5" "$WORK/appends" "$MNT/log"
f5=$(xv "$MNT" user.csdfs.free_physical)
u5=$(xv "$MNT" user.csdfs.free_usable)
a5=$(avail_bytes)
log "full after $n5 bytes of appends: free_physical $f5, free_usable $u5, df avail $a5 of $CAP5"
check "free_usable on the full volume is under a tenth ($u5 of $CAP5)" \
	test "${u5:-$CAP5}" -lt $((CAP5 / 10))
check "free_usable <= free_physical ($u5 <= $f5)" test "${u5:-1}" -le "${f5:-0}"
w=$(warnings_wait yes)
case $w in
*low-space*) pass "root user.csdfs.warnings after the appends: '$w'" ;;
*) fail "root user.csdfs.warnings after the appends: '$w' (no low-space; free_physical $f5, free_usable $u5)" ;;
esac
if [ -x "$CSDFS_STAT" ]; then
	"$CSDFS_STAT" -f --bytes "$MNT" >"$WORK/stat-f5.out" 2>&1
	check_grep_i "csdfs-stat -f shows free_usable" "^  Free for whole chunks +$u5 " "$WORK/stat-f5.out"
fi
rm -f "$MNT/log"
w=$(warnings_wait no)
case $w in
*low-space*) fail "user.csdfs.warnings after deleting the appended file: '$w' (still low-space)" ;;
*) pass "user.csdfs.warnings after deleting the appended file: '$w'" ;;
esac
umount_vol
fsck_clean "after small appends until ENOSPC"
finish
