#!/bin/bash
# t_data: what you read is what you wrote (SPEC G1). Files of boundary sizes
# with random, zero, text and 2:1 content are written with cp/dd/cat, then
# overwritten at random offsets, extended and truncated, each change applied
# identically to a reference copy in a plain directory; every file is compared
# byte for byte through the page cache, with O_DIRECT reads and after a
# remount. Then fio's own verification on the mount (4k, 16k, 64k, mixed,
# direct, a compressible pattern), and a fio verify of data written before a
# remount.
. "$(dirname "$0")/lib.sh"

require_csdfs
require_tools cmp dd fio perl truncate
setup
mkfs_vol --size 2G
mount_vol || finish

D=$MNT/data
mkdir -p "$D"
SIZES="0 1 4095 4096 16383 16384 16385 1048583 34603008"
KINDS="random zeros text half"

# gen KIND SIZE: content on stdout
gen() {
	case $1 in
	random) head -c "$2" /dev/urandom ;;
	zeros) head -c "$2" /dev/zero ;;
	text) perl -e '$n = shift; $s = ""; $i = 0;
		while (length($s) < $n) { $s .= "line $i: the quick brown fox jumps over the lazy dog\n"; $i++ }
		print substr($s, 0, $n)' "$2" ;;
	half) # 2:1 data: each 4 KiB = 2 KiB random + 2 KiB of one repeated byte
		perl -e '$n = shift; open(R, "<", "/dev/urandom") or die; $o = "";
		while (length($o) < $n) { read(R, $r, 2048); $o .= $r . (chr(length($o) % 251) x 2048) }
		print substr($o, 0, $n)' "$2" ;;
	esac
}

# put METHOD SRC DST: write SRC to the mount with one of several tools
put() {
	case $1 in
	0) cp "$2" "$3" ;;
	1) dd if="$2" of="$3" bs=4k status=none ;;
	2) dd if="$2" of="$3" bs=1M status=none ;;
	3) cat "$2" >"$3" ;;
	4) dd if="$2" of="$3" bs=7777 status=none ;;
	esac
}

# compare_all LABEL [direct]: every file on the mount equals its reference
compare_all() {
	local label=$1 direct=${2:-} f bad=0 n=0 out
	for f in "$REF"/*; do
		f=${f##*/}
		n=$((n + 1))
		if [ -n "$direct" ]; then
			if out=$(dd if="$D/$f" of="$WORK/dread" iflag=direct bs=1M status=none 2>&1); then
				out=$(cmp "$WORK/dread" "$REF/$f" 2>&1)
			fi
		else
			out=$(cmp "$D/$f" "$REF/$f" 2>&1)
		fi
		if [ -n "$out" ]; then
			bad=$((bad + 1))
			echo "    $f: $out (size $(stat -c %s "$D/$f" 2>/dev/null) vs $(stat -c %s "$REF/$f"))"
		fi
	done
	if [ $bad = 0 ] && [ $n = 36 ]; then
		pass "$label: $n files identical"
	elif [ $bad = 0 ]; then
		fail "$label: $n reference files instead of 36"
	else
		fail "$label: $bad of $n files differ"
	fi
}

# --- 1. initial write ---
log "[$((SECONDS - T_START)) s] 1. initial write"
m=0
for s in $SIZES; do
	for k in $KINDS; do
		name=${k}_$s
		gen "$k" "$s" >"$REF/$name"
		put $((m % 5)) "$REF/$name" "$D/$name"
		m=$((m + 1))
	done
done
compare_all "after write"

# --- 2. random overwrites, appends, extensions and truncations ---
log "[$((SECONDS - T_START)) s] 2. random overwrites, appends, extensions and truncations"
RANDOM=4242
for f in "$REF"/*; do
	f=${f##*/}
	size=$(stat -c %s "$REF/$f")
	for ((i = 0; i < 12; i++)); do
		span=$((size > 0 ? size : 1))
		off=$(((RANDOM * 32768 + RANDOM) % span))
		((i == 11)) && off=$((size + RANDOM % 20000))	# past EOF: a hole then data
		len=$((1 + (RANDOM * 32768 + RANDOM) % (i % 4 == 0 ? 70000 : 5000)))
		case $((RANDOM % 3)) in
		0) head -c $len /dev/urandom >"$WORK/patch" ;;
		1) head -c $len /dev/zero >"$WORK/patch" ;;
		2) gen text $len >"$WORK/patch" ;;
		esac
		for t in "$REF/$f" "$D/$f"; do
			dd if="$WORK/patch" of="$t" bs=$len count=1 seek=$off oflag=seek_bytes \
				conv=notrunc status=none
		done
		size=$(stat -c %s "$REF/$f")
	done
	# shrink into the middle of a chunk, grow again, append
	if [ "$size" -gt 3 ]; then
		cut=$((size / 3 + 1))
		truncate -s $cut "$REF/$f" "$D/$f"
		truncate -s $((cut + 20000)) "$REF/$f" "$D/$f"
		head -c 3000 /dev/urandom >"$WORK/patch"
		cat "$WORK/patch" >>"$REF/$f"
		cat "$WORK/patch" >>"$D/$f"
	fi
done
compare_all "after random overwrites"
compare_all "O_DIRECT read after overwrites" direct

# --- 3. fio's own verification ---
log "[$((SECONDS - T_START)) s] 3. fio's own verification"
# --verify_state_save=0: fio would otherwise drop *-verify.state files in the cwd
FIO_COMMON=(--ioengine=psync --size=32m --verify=crc32c --do_verify=1 --verify_fatal=1
	--verify_backlog=512 --verify_state_save=0 --group_reporting --minimal)
mkdir -p "$MNT/fio"
run_fio() {
	local name=$1
	shift
	if bounded 300 fio --name="$name" --filename="$MNT/fio/$name" "${FIO_COMMON[@]}" "$@" \
		>"$WORK/fio.$name.out" 2>&1; then
		pass "fio verify $name"
	else
		fail "fio verify $name (exit $?): $(grep -iE 'verify|bad|error|crc' "$WORK/fio.$name.out" | head -n 5 | tr '\n' '|')"
	fi
}
run_fio randwrite-4k --rw=randwrite --bs=4k
run_fio randwrite-16k --rw=randwrite --bs=16k
run_fio randwrite-64k --rw=randwrite --bs=64k
run_fio randwrite-mixed --rw=randwrite --bssplit=4k/30:8k/10:16k/30:64k/20:128k/10
run_fio randwrite-4k-direct --rw=randwrite --bs=4k --direct=1
run_fio randrw-unaligned --rw=randrw --bsrange=1k-33k --blockalign=1k --size=16m
run_fio pattern-compressible --rw=randwrite --bs=16k --verify=pattern \
	--verify_pattern=0x0000cafe --size=32m
run_fio seqwrite-128k --rw=write --bs=128k --size=64m

# data fio writes now, verified after the remount below
PERSIST_JOB=(--name=persist --filename="$MNT/fio/persist" --ioengine=psync --size=48m
	--rw=randwrite --bssplit=4k/40:16k/40:64k/20 --verify=crc32c --randseed=7 --end_fsync=1
	--verify_state_save=0 --verify_state_load=0)
if bounded 300 fio "${PERSIST_JOB[@]}" --do_verify=0 >"$WORK/fio.persist.out" 2>&1; then
	pass "fio write for verification after remount"
else
	fail "fio write for verification after remount (exit $?)"
fi

# --- 4. after remount ---
log "[$((SECONDS - T_START)) s] 4. after remount"
if [ $PLAIN = 0 ]; then
	remount || finish
	compare_all "after remount"
	compare_all "O_DIRECT read after remount" direct
fi
if bounded 300 fio "${PERSIST_JOB[@]}" --verify_only --verify_fatal=1 \
	>"$WORK/fio.persist-verify.out" 2>&1; then
	pass "fio verify_only of data written before the remount"
else
	fail "fio verify_only of data written before the remount (exit $?): $(grep -iE 'verify|bad|crc' "$WORK/fio.persist-verify.out" | head -n 3 | tr '\n' '|')"
fi

# --- 5. access times ---
# The kernel leaves a FUSE file's atime to the daemon: by default csdfs
# updates it as relatime does, with -o noatime never. An O_DIRECT read
# reaches the daemon whatever the page cache holds; the atime is read back
# after a remount, from the volume. The default's update is the
# counter-check that the noatime case would see one.
if [ $PLAIN = 0 ]; then
	log "[$((SECONDS - T_START)) s] 5. access times"
	head -c 65536 /dev/urandom >"$MNT/atime"
	old=$(($(date +%s) - 2 * 86400))
	# atime_after_read LABEL updated|kept [MOUNT OPTIONS...]
	atime_after_read() {
		local label=$1 want=$2 a
		shift 2
		remount "$@" || return
		touch -a -d "@$old" "$MNT/atime"
		dd if="$MNT/atime" of=/dev/null bs=4096 iflag=direct status=none
		[ "$want" = kept ] && check "-o noatime is in the mount's flags" \
			grep -q "^noatime$" < <(findmnt -n -o VFS-OPTIONS "$MNT" | tr , '\n')
		remount || return
		a=$(stat -c %X "$MNT/atime")
		if { [ "$want" = updated ] && [ "$a" -gt "$old" ]; } ||
			{ [ "$want" = kept ] && [ "$a" = "$old" ]; }; then
			pass "atime $label"
		else
			fail "atime $label: $a after the read, set to $old before it (want $want)"
		fi
	}
	atime_after_read "by default: a read updates a 2-day-old atime (relatime)" updated
	atime_after_read "with -o noatime: a read leaves it alone" kept -o noatime
	atime_after_read "with -o relatime (the default, named): a read updates it" updated -o relatime
	umount_vol
	fsck_clean "after data tests"
fi
finish
