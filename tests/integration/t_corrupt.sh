#!/bin/bash
# t_corrupt: damaged on-disk bytes are detected, never served (SPEC G1, G6;
# issue "Crash safety" point 8).
# - Data: a 1 MiB random file A carries a unique 16-byte marker inside its
#   chunk 5; random data is stored raw, so the marker appears verbatim in
#   VOL/container. The test finds it there (grep, no knowledge of the
#   layout), flips one byte, remounts: reading that chunk gives EIO (O_DIRECT
#   and buffered, 6 times), every other chunk of A and all of a second file B
#   read back intact, the root's user.csdfs.checksum_errors >= 1 and
#   user.csdfs.warnings has "checksum-errors", the daemon log names the
#   checksum problem exactly once for the 6 reads, the volume stays usable.
#   Offline, csdfs-fsck exits 0 (metadata only) and csdfs-fsck --verify-data
#   exits 4, neither changing the volume.
# - Metadata: a flipped superblock byte (two places) and a random first page
#   of meta/data.mdb are refused at mount (non-zero exit, a message naming
#   the checksum / the metadata, no mount, no daemon left, no crash or
#   sanitizer report, volume unchanged); csdfs-fsck exits 4 or 8 on them;
#   once the bytes are restored the volume mounts and B is intact.
. "$(dirname "$0")/lib.sh"

[ $PLAIN = 1 ] && skip_test "every check here is about csdfs on-disk damage (plain mode)"
require_csdfs
require_tools getfattr od dd grep cmp md5sum timeout head tr
setup

MiB=1048576
CRASH_RE='AddressSanitizer|LeakSanitizer|ThreadSanitizer|runtime error|Segmentation fault|core dumped|Aborted|stack smashing'

xv() { getfattr --only-values -n "$2" -- "$1" 2>/dev/null; }
get_byte() { od -An -tu1 -j "$2" -N1 "$1" | tr -d ' '; }
# put_byte FILE OFFSET VALUE(0-255)
put_byte() {
	printf "$(printf '\\%03o' "$3")" | dd of="$1" bs=1 seek="$2" count=1 conv=notrunc status=none
}
flip_byte() { put_byte "$1" "$2" $(($(get_byte "$1" "$2") ^ 0xff)); }
# volume fingerprint: container + every LMDB file
vol_md5() { cat "$VOL/container" "$VOL"/meta/* 2>/dev/null | md5sum | cut -d' ' -f1; }
nlines() { grep -c '' "$1" 2>/dev/null || echo 0; }

mkfs_vol --size 64M
mount_vol || finish

# ---------- two files, A with a marker ----------
# chunk size of a new file (policy xattr), default 16 KiB
touch "$MNT/probe"
CH=$(xv "$MNT/probe" user.csdfs.policy | sed -n 's/.*chunk_size=\([0-9][0-9]*\).*/\1/p')
rm -f "$MNT/probe"
[[ $CH =~ ^[0-9]+$ ]] && [ "$CH" -ge 4096 ] && [ "$CH" -le 131072 ] || CH=16384
BAD=5                       # the chunk of A that gets damaged
NCH=$((MiB / CH))
MOFF=$((BAD * CH + 1000))   # marker offset inside A
MARK=CSDFS$(head -c 256 /dev/urandom | tr -dc 'A-Za-z0-9' | head -c 11)
[ ${#MARK} = 16 ] || die "could not make a 16-byte marker"
log "chunk size $CH, marker '$MARK' at offset $MOFF of A (chunk $BAD)"

head -c $MiB /dev/urandom >"$REF/A"
printf '%s' "$MARK" | dd of="$REF/A" bs=1 seek=$MOFF conv=notrunc status=none
head -c $MiB /dev/urandom >"$REF/B"
check "write A (1 MiB random + marker), fsync" dd if="$REF/A" of="$MNT/A" bs=1M conv=fsync status=none
check "write B (1 MiB random), fsync" dd if="$REF/B" of="$MNT/B" bs=1M conv=fsync status=none
sync "$MNT" 2>/dev/null
check_files_equal "A reads back before the damage" "$REF/A" "$MNT/A"
umount_vol
fsck_clean "before the damage"

# ---------- damage one byte of A's data ----------
mapfile -t HITS < <(LC_ALL=C grep -obaF -- "$MARK" "$VOL/container" | cut -d: -f1)
if [ ${#HITS[@]} = 1 ]; then
	pass "the marker appears exactly once in VOL/container (byte ${HITS[0]})"
else
	fail "the marker appears ${#HITS[@]} times in VOL/container (${HITS[*]}), expected once (raw storage of random data)"
	[ ${#HITS[@]} = 0 ] && finish
fi
OFF=${HITS[0]}
old=$(get_byte "$VOL/container" "$OFF")
flip_byte "$VOL/container" "$OFF"
new=$(get_byte "$VOL/container" "$OFF")
if [ "$new" = $((old ^ 0xff)) ]; then
	pass "flipped container byte $OFF ($old -> $new)"
else
	die "could not flip container byte $OFF ($old -> $new)"
fi

mount_vol || finish
LOG0=$(nlines "$WORK/daemon.log")

# read_chunk FILE IDX [iflag]: chunk IDX of FILE on stdout
read_chunk() {
	dd if="$1" bs="$CH" skip="$2" count=1 status=none ${3:+iflag=$3}
}
ref_chunk() { dd if="$REF/$1" bs="$CH" skip="$2" count=1 status=none; }

n_eio=0
for _ in 1 2 3 4 5; do
	if read_chunk "$MNT/A" $BAD direct >/dev/null 2>"$WORK/dd.err"; then
		:
	elif grep -q 'Input/output error' "$WORK/dd.err"; then
		n_eio=$((n_eio + 1))
	fi
done
check_eq "5 O_DIRECT reads of the damaged chunk all give EIO" 5 "$n_eio"
if read_chunk "$MNT/A" $BAD >"$WORK/badchunk" 2>"$WORK/dd.err"; then
	fail "a buffered read of the damaged chunk succeeded ($(stat -c %s "$WORK/badchunk") bytes)"
else
	check_grep_i "a buffered read of the damaged chunk gives EIO" 'Input/output error' "$WORK/dd.err"
fi

for mode in direct buffered; do
	bad=
	for ((c = 0; c < NCH; c++)); do
		[ $c = $BAD ] && continue
		if ! cmp -s <(read_chunk "$MNT/A" $c "$([ $mode = direct ] && echo direct)" 2>/dev/null) <(ref_chunk A $c); then
			bad="$bad $c"
		fi
	done
	if [ -z "$bad" ]; then
		pass "every other chunk of A ($((NCH - 1))) reads back intact ($mode)"
	else
		fail "chunks of A other than $BAD read wrong or fail ($mode):$bad"
	fi
done
check_files_equal "B reads back intact (buffered)" "$REF/B" "$MNT/B"
if cmp -s <(dd if="$MNT/B" bs=1M iflag=direct status=none 2>/dev/null) "$REF/B"; then
	pass "B reads back intact (O_DIRECT)"
else
	fail "B differs or fails with O_DIRECT"
fi

v=$(xv "$MNT" user.csdfs.checksum_errors)
if [[ $v =~ ^[0-9]+$ ]] && [ "$v" -ge 1 ]; then
	pass "root user.csdfs.checksum_errors = $v (>= 1)"
else
	fail "root user.csdfs.checksum_errors = '$v', expected >= 1"
fi
w=$(xv "$MNT" user.csdfs.warnings)
case $w in
*checksum-errors*) pass "root user.csdfs.warnings: '$w'" ;;
*) fail "root user.csdfs.warnings: '$w' (no checksum-errors)" ;;
esac

# the daemon log: the problem named, once for the 6 reads of one range
tail -n +$((LOG0 + 1)) "$WORK/daemon.log" >"$WORK/log.new"
nck=$(grep -ci 'checksum' "$WORK/log.new")
if [ "$nck" = 1 ]; then
	pass "daemon log names the checksum problem once for 6 reads: $(grep -i checksum "$WORK/log.new")"
elif [ "$nck" = 0 ]; then
	fail "daemon log does not mention 'checksum' after the damaged reads: $(head -c 300 "$WORK/log.new" | tr '\n' '|')"
else
	fail "daemon log mentions 'checksum' on $nck lines for 6 reads of one bad range, expected 1: $(grep -i checksum "$WORK/log.new" | head -n 3 | tr '\n' '|')"
fi

# the volume keeps working
head -c 262144 /dev/urandom >"$REF/C"
check "a new file can be written after the checksum errors" dd if="$REF/C" of="$MNT/C" bs=1M conv=fsync status=none
check_files_equal "the new file reads back" "$REF/C" "$MNT/C"
w=$(xv "$MNT" user.csdfs.warnings)
case $w in
*failed*) fail "the volume reports 'failed' after a checksum error: '$w'" ;;
*) pass "the volume is not marked failed by a checksum error ('$w')" ;;
esac
umount_vol

# ---------- offline checks ----------
md0=$(vol_md5)
bounded 300 "$CSDFS_FSCK" "$VOL" >"$WORK/fsck.log" 2>&1
check_eq "csdfs-fsck (metadata only) on the damaged data: exit 0" 0 $?
bounded 300 "$CSDFS_FSCK" --verify-data "$VOL" >"$WORK/fsckv.log" 2>&1
rc=$?
check_eq "csdfs-fsck --verify-data on the damaged data: exit 4" 4 $rc
log "    fsck --verify-data said: $(head -n 3 "$WORK/fsckv.log" | tr '\n' '|')"
if grep -Eq "$CRASH_RE" "$WORK/fsck.log" "$WORK/fsckv.log"; then
	fail "csdfs-fsck printed a crash or sanitizer report"
fi
check_eq "csdfs-fsck without --repair changed nothing" "$md0" "$(vol_md5)"

# ---------- damaged metadata ----------
# mount_refused LABEL REGEX [csdfs options...]: the mount of $VOL is refused
mount_refused() {
	local label=$1 re=$2 rc pids fp0 cores
	shift 2
	fp0=$(vol_md5)
	# (cwd = $WORK, so that a core dump would land where it is looked for)
	bounded 30 env -C "$WORK" "$CSDFS_BIN" "$@" "$VOL" "$MNT" >"$WORK/out" 2>"$WORK/err"
	rc=$?
	if [ $rc = 0 ]; then
		fail "mount $label: accepted (exit 0)"
	elif [ $rc -ge 124 ]; then
		fail "mount $label: exit $rc (crash or hang)"
	else
		pass "mount $label: refused (exit $rc)"
	fi
	if [ -s "$WORK/err" ]; then
		check_grep_i "mount $label: message matches /$re/" "$re" "$WORK/err"
	else
		fail "mount $label: nothing on stderr (stdout: $(head -c 200 "$WORK/out"))"
	fi
	log "    message: $(head -n 3 "$WORK/err" | tr '\n' '|')"
	if grep -Eq "$CRASH_RE" "$WORK/err" "$WORK/out"; then
		fail "mount $label: crash or sanitizer report: $(grep -E "$CRASH_RE" "$WORK/err" "$WORK/out" | head -n 2 | tr '\n' '|')"
	fi
	cores=$(find "$WORK" -maxdepth 2 -name 'core*' -type f 2>/dev/null | head -n 3)
	[ -n "$cores" ] && fail "mount $label: core file(s) left: $cores"
	if mountpoint -q "$MNT"; then
		fail "mount $label: $MNT is mounted anyway"
		fusermount3 -u -z "$MNT"
	fi
	sleep 0.2
	pids=$(daemons_using "$VOL")
	if [ -n "$pids" ]; then
		fail "mount $label: a csdfs process is left running (pid $pids); killing it"
		for p in $pids; do kill -9 "$p" 2>/dev/null; done
	else
		pass "mount $label: no daemon left"
	fi
	check_eq "mount $label: the volume is unchanged" "$fp0" "$(vol_md5)"
}

# fsck_refuses LABEL: csdfs-fsck reports errors (4) or cannot check (8)
fsck_refuses() {
	local rc
	bounded 120 "$CSDFS_FSCK" "$VOL" >"$WORK/fsck.log" 2>&1
	rc=$?
	case $rc in
	4 | 8) pass "csdfs-fsck on $1: exit $rc" ;;
	*) fail "csdfs-fsck on $1: exit $rc, expected 4 or 8: $(head -n 2 "$WORK/fsck.log" | tr '\n' '|')" ;;
	esac
	if grep -Eq "$CRASH_RE" "$WORK/fsck.log"; then
		fail "csdfs-fsck on $1: crash or sanitizer report"
	fi
}

head -c 4096 "$VOL/container" >"$WORK/sb.bak"
cp "$VOL/meta/data.mdb" "$WORK/mdb.bak" || die "cannot back up meta/data.mdb"
for off in 40 100; do
	flip_byte "$VOL/container" $off
	mount_refused "superblock byte $off flipped" 'checksum'
	mount_refused "superblock byte $off flipped (-f)" 'checksum' -f
	fsck_refuses "a flipped superblock byte $off"
	dd if="$WORK/sb.bak" of="$VOL/container" bs=4096 count=1 conv=notrunc status=none
done

head -c 4096 /dev/urandom | dd of="$VOL/meta/data.mdb" bs=4096 count=1 conv=notrunc status=none
mount_refused "meta/data.mdb first page random" 'meta|lmdb|mdb|database'
mount_refused "meta/data.mdb first page random (-f)" 'meta|lmdb|mdb|database' -f
fsck_refuses "a random first page of meta/data.mdb"
cp "$WORK/mdb.bak" "$VOL/meta/data.mdb"

# restored: the volume mounts again, nothing was silently repaired
mount_vol || finish
check_files_equal "B intact after the restored metadata" "$REF/B" "$MNT/B"
if read_chunk "$MNT/A" $BAD direct >/dev/null 2>&1; then
	fail "the damaged chunk of A reads without error after a remount"
else
	pass "the damaged chunk of A still gives EIO (no silent repair)"
fi
umount_vol
finish
